// SPDX-License-Identifier: MIT
// xagg-sim's cluster model: replays a trace through the daemon's own memory scheduler
// (daemon/memory_scheduler.hpp) and placement (daemon/placement.hpp), event by event.
//
// The model, deliberately small so that what differs between runs is the policy:
//  - N aggregator nodes, each with `node_chunks` of fast-path memory, aggregating `fast_rate`
//    contributions per second on the fast path or `host_rate` on its host path. Both paths run
//    on the node's CPUs, which the partitions placed there share (processor sharing), each
//    counted for the share of its job's iteration spent communicating.
//  - A job's gradient is cut into partitions placed on nodes when it arrives (place()); on each
//    node the policy divides memory between the partitions there (divide()); a partition's
//    chunks beyond its share go to the node's host path.
//  - An iteration takes compute_s, then the communication of every partition in parallel: the
//    slowest partition's (fast chunks / fast_rate + host chunks / host_rate) x workers x the
//    node's sharing. Memory is re-divided when a job arrives or ends and every `reschedule_s`.
//  - A job's "alone" time is the same job in an empty cluster. Efficiency = alone / actual
//    completion time (1.0: as if it had the aggregators alone).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/sched/memory_scheduler.hpp"
#include "tools/xagg-sim/trace.hpp"

namespace xagg::sim {

struct ClusterParams {
    uint32_t nodes = 100;
    uint64_t node_chunks = 65536;       // xaggd's default max_chunks
    double fast_rate = 4e6;             // contributions/s: ~100 Gbit/s of 3 KiB chunks
    double host_rate = 4e6 / 2.5;       // bench/run: the host path, 2.5x slower per core
    uint64_t min_job_chunks = 256;      // xaggd's default
    uint64_t partition_chunks = 16384;  // 48 MiB of gradient per partition
    double reschedule_s = 10;
};

struct JobResult {
    uint32_t id = 0;
    double arrival_s = 0, finish_s = 0, alone_s = 0;
    double jct() const { return finish_s - arrival_s; }
    double efficiency() const { return alone_s / jct(); }
};

struct PolicyResult {
    sched::Policy policy{};
    std::vector<JobResult> jobs;
    double mean_jct = 0, p50_jct = 0, p95_jct = 0, p99_jct = 0;
    double mean_efficiency = 0;
    double utilization = 0;    // time-average of fast-path memory handed out / all of it
    double makespan_s = 0;     // when the last job finished
    uint64_t divisions = 0;    // times a node's memory was divided
    uint64_t over_budget = 0;  // divisions that handed out more than a node has: always 0
};

PolicyResult simulate(const std::vector<TraceJob> &trace, const ClusterParams &cluster,
                      sched::Policy policy);

}  // namespace xagg::sim
