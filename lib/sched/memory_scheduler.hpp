// SPDX-License-Identifier: MIT
// Who gets an aggregator's fast-path memory: the pure core, shared by xaggd (which applies it to
// the slots map) and xagg-sim (which replays thousands of jobs through it). No I/O, no clock:
// the same jobs and budget always give the same division.
//
// The unit is the slot position (one slot pair, XAGG_CHUNK_ELEMS values; a jumbo chunk takes
// several). A job's demand is the positions of its gradient; what it is not given goes to the
// host-side parameter server, so any division is correct and only speed differs. Policies:
//  - benefit (default): Mina's rule (docs/SCHEDULING.md): after the guaranteed minimums, memory
//    goes to the jobs that gain most from it first, ranked by weight x (step time on the host path
//    - step time on the fast path) / remaining time; jobs of equal rank (and jobs whose rank is
//    unknown, which rank last) share what is left as `fair` does.
//  - fair: weighted water-filling: every job gets its weight's share, capped at its demand, and
//    what a capped job leaves is shared again among the others.
//  - equal: static equal partition: budget / jobs each, capped at demand; nothing is re-shared.
//  - fcfs: first come, first served: whole demands in arrival order until the memory runs out.
//  - hashed: ATP-style sharing: every chunk of every job hashes into one shared pool and a chunk
//    that collides goes to the host path. Not exclusive, so xaggd cannot lay it out (its regions
//    are); the core gives each job its expected share, for the simulator's comparison.
// benefit and fair first give each job min(demand, minimum) while those guarantees fit (in
// arrival order); the three baselines are as their papers describe them, without guarantees.
// No policy hands out more than the budget or more than a job's demand.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace xagg::sched {

enum class Policy { benefit, fair, equal, fcfs, hashed };

// "benefit", "fair", ...; parse() returns nullopt for an unknown name.
const char *to_string(Policy p);
std::optional<Policy> parse_policy(const std::string &name);
// Every policy, the default first.
const std::vector<Policy> &all_policies();

struct JobDemand {
    uint32_t id = 0;
    uint64_t positions = 0;  // what the whole gradient needs
    double weight = 1.0;     // > 0
    uint64_t arrival = 0;    // order of arrival (ties broken by id)
    // Mina's gain rate: (step time without the fast path - with it) / remaining time, from
    // benefit_score(); nullopt when the job has not said how long it will run.
    std::optional<double> benefit;
};

// Mina's ranking of one job: how much its remaining time shrinks per unit of remaining time if
// it has the fast path. Times in any one unit; remaining <= 0 gives 0 (done: gains nothing).
double benefit_score(double step_host, double step_fast, double remaining);

// Positions of fast-path memory per job id (every id of `jobs` present, possibly 0). The sum never
// exceeds `budget`, no job gets more than its demand; `minimum` is the guaranteed share.
std::map<uint32_t, uint64_t> divide(Policy policy, uint64_t budget, uint64_t minimum,
                                    const std::vector<JobDemand> &jobs);

}  // namespace xagg::sched
