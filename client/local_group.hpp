// SPDX-License-Identifier: MIT
// Local-first reduction (hierarchical all-reduce): the ranks of one host hand their tensors to
// the host's leader (local rank 0) over a Unix socket, the leader contributes them all to the
// aggregator as one member (Engine::submit's more_floats: each quantized with the agreed scale
// and summed in integers, as the aggregator sums), and hands each its result. One flow per host
// reaches the aggregator instead of one per rank.
//
// Every rank of the host calls its collectives in the same order (as every rank of a job must):
// the leader pairs its k-th call with each other rank's k-th, and refuses a call whose size or
// type differs. The socket is in the abstract namespace of the host's network namespace, named
// by the job, so nothing on disk is left behind and ranks of other jobs never meet.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace xagg::client {

struct Op;

// What a rank's call carries.
enum class LocalKind : uint32_t { floats = 1, ints = 2 };

// The socket's name for a job seen from one host: the leader listens on it, the others connect.
std::string local_group_name(const std::string &aggregator, uint32_t job,
                             const std::string &local_address);

// What the leader tells every other rank when it connects.
struct LocalHello {
    uint32_t members = 0;  // the job's members (one a host)
    uint32_t chunk_elems = 0;
};

// The leader's side.
class LocalLeader {
public:
    // Listens on `name` and accepts the other `local_ranks - 1` ranks (each says its local
    // rank), waiting at most `wait` for them; sends each `hello`. Throws ClientError.
    LocalLeader(const std::string &name, unsigned local_ranks, LocalHello hello,
                std::chrono::seconds wait);
    ~LocalLeader();
    LocalLeader(const LocalLeader &) = delete;
    LocalLeader &operator=(const LocalLeader &) = delete;

    // The next call of every other rank, in local-rank order: its n values (as raw 32-bit
    // words). Throws ClientError if one hung up or called with another size or type; the group
    // is then ended (every rank's calls fail).
    std::vector<std::vector<int32_t>> gather(LocalKind kind, size_t n);
    // Once `op` is done (in call order, by a thread of its own), sends each other rank its
    // result (the buffers gather() filled, which the engine wrote the result into) or the
    // op's error.
    void scatter(std::shared_ptr<Op> op, std::vector<std::vector<int32_t>> buffers);

private:
    struct Pending {
        std::shared_ptr<Op> op;
        std::vector<std::vector<int32_t>> buffers;
    };
    std::vector<std::vector<int32_t>> read_calls(LocalKind kind, size_t n);
    void send_results();

    std::vector<int> peers_;  // by local rank - 1
    std::mutex lock_;
    std::condition_variable queued_;
    std::deque<Pending> pending_;
    bool stop_ = false;
    std::thread sender_;
};

// Every other rank's side.
class LocalMember {
public:
    // Connects to the leader as `local_rank` (retrying until it listens, for at most `wait`) and
    // reads its hello. Throws ClientError.
    LocalMember(const std::string &name, unsigned local_rank, std::chrono::seconds wait);
    ~LocalMember();
    LocalMember(const LocalMember &) = delete;
    LocalMember &operator=(const LocalMember &) = delete;

    const LocalHello &hello() const { return hello_; }
    // Sends the call's values; the op completes when the leader's result comes back (a reader
    // thread fills the buffer in place, as the engine does for the leader).
    std::shared_ptr<Op> submit(float *floats, int32_t *ints, size_t n);

private:
    void read_results();
    void fail_pending(const std::string &why);

    int fd_ = -1;
    LocalHello hello_;
    std::mutex write_lock_;  // the socket's write side
    std::mutex lock_;        // pending_, failure_
    std::deque<std::shared_ptr<Op>> pending_;
    std::string failure_;
    std::thread reader_;
};

}  // namespace xagg::client
