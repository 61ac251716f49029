// SPDX-License-Identifier: MIT
// The xagg worker client: all-reduce float (or int32) buffers in place through one or more xagg
// aggregators. What a training job links against; docs/CLIENT.md is its manual.
//
//   xagg::ClientOptions o;
//   o.aggregators = {{.control_socket = "/run/xagg/xaggd.sock", .address = "10.0.0.5", .job = 7}};
//   o.rank = 2;
//   o.local_address = "10.0.0.12";
//   xagg::Client client(o);              // joins job 7 as rank 2
//   client.allreduce(std::span(grads));  // every worker's sum, in place
//
// Collective rules, as in every all-reduce library: every worker of the job makes the same
// calls, with the same sizes, in the same order (priorities may differ in effect but must be
// given the same). Calls may come from several threads, but then that order must still be the
// same on every worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "xagg/control_tls.hpp"
#include "xagg/defaults.h"

namespace xagg {

// One aggregator node: its xaggd's control API and its data-plane address.
struct Aggregator {
    std::string control_socket = XAGG_DEFAULT_CONTROL_SOCKET;  // the daemon's Unix socket, or:
    std::string control_host;  // HOST:PORT of its control_tcp_address (used when set)
    std::string token;         // the token control_host requires
    ControlTls tls;            // how control_host is secured: TLS unless tls.plaintext
    std::string address;       // IPv4 of its aggregating NIC: contributions go there
    uint32_t job = 0;          // the job on that aggregator
    // The job's key (16 hex digits) when ClientOptions::join is off: as `xaggctl worker join`
    // printed it. A worker that joins itself gets it from the join and ignores this.
    std::string key;
    // Share of every tensor's chunks this aggregator gets, relative to the others. Every
    // worker must give the same aggregators, in the same order, with the same weights.
    double weight = 1;
};

struct ClientOptions {
    std::vector<Aggregator> aggregators;
    uint32_t rank = 0;
    std::string local_address;  // IPv4 this worker sends from; results come back to it
    // Several ranks on one address (a GPU server runs one a GPU): the daemon knows a rank by
    // its address and UDP port, so each needs a port of its own. With `local_ranks` > 1 and no
    // `port`, a rank sends from the job's group port + 1 + `local_rank` (torchrun's LOCAL_RANK
    // and LOCAL_WORLD_SIZE); `port` sets it outright. Default: one rank on the address, which
    // sends from the group port itself (docs/PROTOCOL.md, "Members").
    uint32_t local_rank = 0;
    uint32_t local_ranks = 1;
    uint16_t port = 0;
    // Local-first reduction (hierarchical all-reduce; docs/CLIENT.md): the `local_ranks` ranks of
    // a host hand their tensors to local rank 0 over a Unix socket, which alone is the job's
    // member for the host (job rank = rank / local_ranks; the job has one worker a host) and
    // sends their integer sum: 1/local_ranks of the bytes into the aggregator. Every rank of
    // the job says it, and ranks are numbered host by host (rank % local_ranks = local_rank),
    // as torchrun numbers them.
    bool local_first = false;
    // Register the rank (address and port) with each daemon when starting and leave when done.
    // Off when an operator registered it (xaggctl worker join).
    bool join = true;
    // Chunks in flight per aggregator: the credit, or with congestion control its ceiling.
    unsigned window = 512;
    // Congestion control (docs/CLIENT.md): the credit follows the network (DCTCP-style on the
    // ECN marks the aggregator echoes, AIMD on loss), and a chunk whose result is overdue while
    // later ones came back is sent again within a round trip instead of after the timer. Off:
    // `window` chunks are kept in flight whatever happens, and only the timer finds losses.
    bool congestion_control = true;
    // With congestion control, on a path that dropped without marking (its bottleneck does not
    // mark ECN), also cut the credit (to 0.8 of itself) when even the quickest answer of two
    // windows in a row took this much longer than the quickest of the last seconds: a queue is
    // building. 0 or unset: never (ECN and loss alone; docs/CLIENT.md has the measurements).
    // For fabrics whose switches cannot mark ECN: 1 ms.
    std::optional<std::chrono::microseconds> delay_target;
    // Chunks sent back to back (and in one batched send) before the scheduler looks at
    // priorities again: larger is fewer system calls, smaller lets urgent tensors in sooner.
    unsigned partition_chunks = 32;
    // Retransmission timer: at least this, else 4 deviations above the measured round trip
    // (RFC 6298); backs off up to 8x for a chunk sent again and again.
    std::chrono::milliseconds timeout{20};
    unsigned max_retries = 200;  // then the aggregator counts as unreachable
    bool gso = true;             // batch sends with UDP GSO (else sendmmsg alone)
    // Automatic configuration: window and partition_chunks are tuned online, starting from the
    // values above, by measuring the time of every `tune_calls` all-reduce calls (a training
    // step or a few), averaged over all workers through the aggregator, so that every worker
    // switches at the same call; at most `tune_trials` settings are tried. Off: the values
    // above are used as given (pinned). Every worker must give the same tuning options.
    bool autotune = true;
    unsigned tune_calls = 8;
    unsigned tune_trials = 16;
    // Where the client says what it chose (one line when tuning ends); stderr when empty.
    std::function<void(const std::string &)> log;
};

// What the tuner has done so far (Client::tuning()).
struct Tuning {
    bool enabled = false;
    bool done = false;              // the search has ended: the setting below is the choice
    unsigned window = 0;            // in use now
    unsigned partition_chunks = 0;  // in use now
    unsigned trials = 0;            // settings measured
    double best_call_seconds = 0;   // the chosen setting's measured time per call
    double start_call_seconds = 0;  // the starting (hand-set) setting's
};

// What one all-reduce did.
struct AllReduceReport {
    uint64_t chunks = 0;             // chunks (768 values each) sent (data and exponent chunks)
    uint64_t retransmits = 0;        // contributions sent again (found lost early or by the timer)
    uint64_t early_retransmits = 0;  // of those, found lost early (before the timer)
    uint64_t credit_cuts = 0;        // times congestion control cut a credit during the call
    uint64_t marked_chunks = 0;      // results whose path the network marked CE (ECN)
    uint64_t fallback_chunks = 0;    // results summed by an aggregator's host path
    uint64_t nonfinite_blocks = 0;   // blocks (768 values) set to NaN: some worker had NaN/inf
    uint64_t partial_chunks = 0;     // results that lack an evicted worker's contribution
    unsigned contributors = 0;       // fewest workers summed into any result
    double seconds = 0;              // from the call to the last result
    unsigned window = 0;             // the credit in use when the call was made (the first
                                     // aggregator's, under congestion control)
    unsigned partition_chunks = 0;   // the batch in use when the call was made
};

class ClientError : public std::runtime_error {
public:
    enum class Kind {
        unreachable,  // the daemon's control API cannot be reached
        refused,      // the daemon refused to join (no such job, rank taken, ...)
        evicted,      // this worker was evicted from the job
        job_deleted,  // the job is gone
        timeout,      // no result after max_retries: the aggregator is not answering
        closed,       // the client failed earlier or is shutting down
        invalid,      // a bad argument or option
    };
    ClientError(Kind kind, const std::string &message) : std::runtime_error(message), kind_(kind) {}
    Kind kind() const { return kind_; }

private:
    Kind kind_;
};

// Where a cluster job is aggregated, as the nodes placed it in etcd (docs/SCHEDULING.md): one
// Aggregator per node, weighted by its partitions, in the placement's order (the same for every
// worker). `revision` changes whenever the placement does (a node died, the job changed).
struct Placement {
    std::vector<Aggregator> aggregators;
    int64_t revision = 0;
};
// Reads PREFIX/placement/JOB from etcd at `etcd_endpoint` (http://HOST:PORT). A node's Unix
// control socket is used when it exists here, else its TCP address with `token`. Throws
// ClientError: unreachable (etcd), invalid (no such job placed yet, or a malformed record).
Placement resolve_placement(const std::string &etcd_endpoint, uint32_t job,
                            const std::string &prefix = "/xagg", const std::string &token = "");

// For a run that sizes its own job (the torch backend's rank 0 does): creates a job of `workers`
// ranks and `gradient_elems` values (chunk_elems 0: the daemon's default, 768) through the
// aggregator's control API, as `xaggctl job create` does, and returns its id; deletes job
// `a.job`. Throw ClientError: unreachable, refused (no room, bad value), job_deleted.
struct JobRequest {
    uint32_t workers = 0;
    uint64_t gradient_elems = 0;
    uint32_t chunk_elems = 0;
};
uint32_t create_job(const Aggregator &a, const JobRequest &request);
void delete_job(const Aggregator &a);

namespace client {
class Engine;
class LocalLeader;
class LocalMember;
class Tuner;
struct Op;
struct TuneSetting;
}  // namespace client

// An all-reduce in progress. The buffer must stay alive and untouched until wait() returns.
class AllReduce {
public:
    AllReduce() = default;
    bool ready() const;
    // Blocks until every value is summed; throws ClientError if it cannot be.
    AllReduceReport wait();

private:
    friend class Client;
    explicit AllReduce(std::shared_ptr<client::Op> op) : op_(std::move(op)) {}
    std::shared_ptr<client::Op> op_;
};

class Client {
public:
    // Joins the job on every aggregator (unless options.join is off) and starts the I/O thread.
    // Throws ClientError.
    explicit Client(const ClientOptions &options);
    ~Client();  // waits for nothing: operations still running fail with Kind::closed
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;

    // Higher priority is sent first among the operations in flight.
    AllReduce allreduce_async(std::span<float> data, int priority = 0);
    AllReduce allreduce_async(std::span<int32_t> data, int priority = 0);
    AllReduceReport allreduce(std::span<float> data, int priority = 0)
    {
        return allreduce_async(data, priority).wait();
    }
    AllReduceReport allreduce(std::span<int32_t> data, int priority = 0)
    {
        return allreduce_async(data, priority).wait();
    }

    // Returns once every worker of the job has called it: a one-value all-reduce through the
    // first aggregator, sent ahead of everything queued. Not an all-reduce call for the tuner.
    void barrier();

    unsigned workers() const;  // the job's size (of the first aggregator's job)
    // The job's chunk size (768, or 2048 for jumbo chunks): the block of values that shares one
    // exponent in a float all-reduce, and so the unit of its error bound.
    size_t chunk_elems() const;
    Tuning tuning() const;

private:
    void rendezvous();
    // Before each call: ends a tuning trial every tune_calls calls (see ClientOptions).
    void tune_point();
    Tuning tuning_locked() const;                    // under tune_lock_
    void apply(const client::TuneSetting &setting);  // to the engine

    // A rank's all-reduce of n values: through the engine, or with local-first reduction
    // through the host's leader (a local member) or with the host's other ranks (the leader).
    AllReduce submit(float *floats, int32_t *ints, size_t n, int priority);

    std::once_flag rendezvous_;
    // Local-first reduction: the leader's side (local rank 0, which also has the engine) or
    // another rank's (which has no engine). Declared before the engine so that the engine, which
    // fails whatever is still running, goes first.
    std::unique_ptr<client::LocalLeader> leader_;
    std::unique_ptr<client::LocalMember> member_;
    std::unique_ptr<client::Engine> engine_;
    ClientOptions options_;
    mutable std::mutex tune_lock_;
    std::unique_ptr<client::Tuner> tuner_;  // null when autotune is off
    uint64_t calls_ = 0;
    std::chrono::steady_clock::time_point trial_started_;
    double start_call_seconds_ = 0;  // the first trial's: the starting setting's time
};

}  // namespace xagg
