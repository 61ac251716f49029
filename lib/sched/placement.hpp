// SPDX-License-Identifier: MIT
// Where a job's gradient goes when a cluster has several aggregator nodes: the pure core of
// placement (GOAT's idea, docs/SCHEDULING.md). A job's gradient is cut into partitions; each
// partition is assigned to exactly one node (no two nodes ever aggregate the same chunk, so no two
// collide), so that the slowest node finishes first-best: largest partition first, each to the node
// that would finish its load soonest with it, among the nodes with fast-path memory left for it
// (LPT scheduling with a capacity limit, the classic greedy for this knapsack-like problem).
// Shared by xagg-sim and, through etcd, by the daemons.
#pragma once

#include <cstdint>
#include <vector>

namespace xagg::sched {

struct Node {
    uint32_t id = 0;
    uint64_t free_chunks = 0;  // fast-path memory not yet promised to a placed partition
    double rate = 1;           // contributions per second the node aggregates (> 0)
    double load = 0;           // contributions per iteration already placed on it
};

struct Partition {
    uint32_t index = 0;    // within its job
    uint64_t chunks = 0;   // its share of the gradient
    uint32_t workers = 1;  // contributions per chunk
};

// Cuts `chunks` into partitions of at most `partition_chunks` (the last one smaller).
std::vector<Partition> cut(uint64_t chunks, uint32_t workers, uint64_t partition_chunks);

// The node id of each partition (same order as `partitions`). Updates `nodes` (free memory and
// load) as it places, so several jobs can be placed one after another. Deterministic; `nodes`
// must not be empty. A partition no node has memory for goes to the node that would finish
// soonest anyway (its chunks are served by that node's host path).
std::vector<uint32_t> place(std::vector<Node> &nodes, const std::vector<Partition> &partitions);

// The estimated time of the busiest node per iteration: max over nodes of load / rate.
double makespan(const std::vector<Node> &nodes);

}  // namespace xagg::sched
