// SPDX-License-Identifier: MIT
// The client's protocol engine: one I/O thread that owns every chunk in flight. It assigns each
// all-reduce its chunk indices and rounds (in call order, the same on every worker), sends by
// priority under a credit of chunks in flight (congestion.hpp), retransmits what is lost (found
// early, RACK-style, or by the timer), matches results to the chunk-rounds they answer, and
// runs the two phases of a float all-reduce: agree on the block exponents (quantize.hpp), then
// send the values.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <thread>
#include <tuple>
#include <vector>

#include "client/congestion.hpp"
#include "client/datagram_socket.hpp"
#include "client/quantize.hpp"
#include "xagg/client.hpp"
#include "xagg/wire.hpp"

namespace xagg::client {

struct Op;
struct SubOp;
struct Channel;

// One chunk of one all-reduce on one aggregator: what is sent, timed and answered.
struct Use {
    enum class State : uint8_t { waiting, ready, in_flight, done };
    SubOp *sub = nullptr;
    uint32_t item = 0;         // exponent chunk number, or block number within the sub-op
    bool exponent = false;     // agreement chunk (float all-reduce) rather than values
    bool holds_index = false;  // no earlier use of its chunk index is still open
    bool scale_known = false;  // values: its block's exponent is agreed (or none is needed)
    State state = State::waiting;
    uint32_t index = 0;  // chunk index in the job
    uint32_t round = 0;
    uint64_t position = 0;  // in the job's ring of chunks: the order of assignment
    unsigned retries = 0;
    uint32_t timer_generation = 0;
    int64_t sent_ns = 0;       // of the first transmission (a round-trip sample unless resent)
    int64_t last_sent_ns = 0;  // of the latest transmission
    std::list<Use *>::iterator sent_at;  // in the channel's sent_order, while in flight
    Use *next_waiting = nullptr;         // the next use of the same index
};

// The part of an all-reduce that goes to one aggregator: a contiguous range of its blocks.
struct SubOp {
    Op *op = nullptr;
    Channel *channel = nullptr;
    size_t first_block = 0, blocks = 0;  // blocks (chunks of values) of the op
    uint32_t exponent_chunks = 0;        // 0 for int32 all-reduces
    std::vector<BlockScan> scans;        // this worker's, per block
    std::vector<BlockScale> scales;      // agreed, per block
    std::vector<Use> uses;               // exponent chunks first, then one per block
};

// One all-reduce, shared by the caller's handle and the engine.
struct Op : std::enable_shared_from_this<Op> {
    uint64_t seq = 0;
    int priority = 0;
    float *floats = nullptr;
    int32_t *ints = nullptr;
    size_t n = 0;
    // Local-first reduction (local_group.hpp): the other ranks of this host, whose tensors of the
    // same n values this leader contributes with its own. Each is quantized with the agreed scale
    // and summed in integers, as the aggregator sums, and each receives the result.
    std::vector<float *> more_floats;
    std::vector<int32_t *> more_ints;
    unsigned ranks() const
    {
        return 1 + static_cast<unsigned>(more_floats.size() + more_ints.size());
    }
    std::vector<SubOp> subs;
    uint64_t open_uses = 0;
    AllReduceReport report;
    std::chrono::steady_clock::time_point started;

    std::mutex lock;
    std::condition_variable finished;
    bool done = false;
    std::exception_ptr error;
};

// The order chunks are sent in: higher priority first, then older operations, then position.
struct UseKey {
    int neg_priority;
    uint64_t seq, position;
    auto operator<=>(const UseKey &) const = default;
};

// One aggregator's job as this worker uses it.
struct Channel {
    uint32_t job = 0;
    uint64_t key = 0;      // the job's key on that aggregator, in every contribution
    uint32_t ring = 0;     // the job's chunks: indices are assigned round-robin over them
    unsigned workers = 0;  // the job's size (fraction bits, the full contributor set)
    double weight = 1;     // its share of each operation's blocks, relative to the others
    sockaddr_in aggregator{};
    uint64_t cursor = 0;
    std::vector<uint32_t> next_round;              // per index
    std::vector<Use *> holder, waiting_tail;       // per index: who holds it, last in line
    std::set<std::pair<UseKey, Use *>> ready;      // sendable, best first
    std::set<std::pair<UseKey, Use *>> in_flight;  // sent, unanswered
    // Every chunk not yet answered, oldest (first assigned) first: the oldest ready ones are
    // sent whatever the credit holds (Engine::send_ready says why).
    std::map<uint64_t, Use *> unanswered;
    // Round-trip estimate for the retransmission timer (RFC 6298's, from chunks answered at
    // the first try), so a large window's queueing is not mistaken for loss.
    int64_t srtt_ns = 0, rttvar_ns = 0, min_rtt_ns = 0;
    // Congestion control: the credit, and whether the last send stopped at it (only then do
    // answers grow it).
    CreditController credit{CongestionParams{}, 1};
    bool credit_limited = false;
    // Early loss detection (RACK, RFC 8985, by time rather than by count: results come back
    // reordered by whole batches, so "three later chunks answered" misfires). The chunks in
    // flight in the order of their latest transmission; the latest transmission answered so
    // far and its round trip. A chunk sent before that one and unanswered for that round trip
    // plus a reordering allowance is lost.
    std::list<Use *> sent_order;
    int64_t rack_sent_ns = 0, rack_rtt_ns = 0;
};

class Engine {
public:
    struct Endpoint {
        uint32_t job = 0, chunks = 0, workers = 0;
        in_addr aggregator{}, group{};
        uint16_t port = 0, group_port = 0;
        uint16_t member_port = 0;  // this rank's: it sends from it (ClientOptions::port)
        double weight = 1;
        uint32_t first_round = 0;  // of every chunk, newer than any an earlier session left
        uint64_t key = 0;          // the job key the aggregator handed out at join
        uint32_t chunk_elems = XAGG_CHUNK_ELEMS;  // the job's chunk size, which is the block's
    };
    Engine(const ClientOptions &options, std::vector<Endpoint> endpoints, in_addr local);
    ~Engine();

    // `more_floats`/`more_ints`: tensors of other ranks of this host to contribute with this one
    // (local-first reduction), each of n values; each gets the result too.
    std::shared_ptr<Op> submit(float *floats, int32_t *ints, size_t n, int priority,
                               std::vector<float *> more_floats = {},
                               std::vector<int32_t *> more_ints = {});
    unsigned workers() const { return channels_.front()->workers; }
    size_t chunk_elems() const { return block_; }

    // The send-side knobs, changeable while operations are in flight (the tuner's choices):
    // they only pace what is sent, never what is summed. partition_chunks is capped at
    // kMaxPartition, the batch buffer's size.
    static constexpr unsigned kMaxPartition = 256;
    void set_tuning(unsigned window, unsigned partition_chunks);
    unsigned window() const { return window_.load(std::memory_order_relaxed); }
    unsigned partition_chunks() const { return partition_.load(std::memory_order_relaxed); }

    // Called when the engine gives up (timeout, eviction): says why, for the error. `round` is
    // the round that went unanswered, if one did.
    std::function<ClientError(const std::string &why, uint32_t job, std::optional<uint32_t> round)>
        diagnose;

private:
    void run();
    void accept_submissions();
    void assign(Op &op);
    void make_ready(Use &u);
    void send_ready(Channel &ch);
    void transmit(Channel &ch, std::vector<Use *> &batch, bool retransmit);
    size_t encode(const Use &u, bool retransmit, uint8_t *out) const;
    void on_datagram(const DatagramSocket::Arrival &arrival, std::span<const uint8_t> datagram);
    void on_result(Use &u, const wire::Header &h, const DatagramSocket::Arrival &arrival,
                   std::span<const uint8_t> datagram);
    // `now`: when the answer arrived; `marked`: the fraction of its path marked CE.
    void finish_use(Use &u, int64_t now, double marked);
    void check_timers();
    void on_loss(Use &u, int64_t now);
    void detect_losses(Channel &ch, int64_t now);
    void retransmit_lost(Channel &ch, std::vector<Use *> &lost, int64_t now);
    unsigned credit(const Channel &ch) const;
    void complete(Op &op);
    void fail_all(const std::exception_ptr &error);
    UseKey key(const Use &u) const;

    ClientOptions options_;
    std::vector<std::unique_ptr<Channel>> channels_;
    std::unique_ptr<DatagramSocket> socket_;
    int wake_fd_ = -1;

    std::mutex submit_lock_;
    std::deque<std::shared_ptr<Op>> submitted_;
    uint64_t next_seq_ = 0;
    bool failed_ = false;  // under submit_lock_
    std::exception_ptr failure_;

    std::vector<std::shared_ptr<Op>> active_;  // engine thread only
    // Retransmission timers, earliest first. A timer keeps its operation alive: it may fire
    // (and be found stale) after the operation is done.
    struct Timer {
        int64_t deadline;
        uint32_t generation;
        Use *use;
        std::shared_ptr<Op> keep;
        bool operator>(const Timer &o) const { return deadline > o.deadline; }
    };
    std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
    void arm(Use &u, int64_t deadline);
    std::vector<uint8_t> tx_;
    // Values per chunk (every aggregator's job has the same: checked by the client), the
    // blocks an exponent chunk serves, and a datagram's size.
    size_t block_ = XAGG_CHUNK_ELEMS, blocks_per_exponent_chunk_ = 0, datagram_bytes_ = 0;
    std::atomic<unsigned> window_, partition_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace xagg::client
