// SPDX-License-Identifier: MIT
#include "lib/sched/memory_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace xagg::sched {
namespace {

using Give = std::map<uint32_t, uint64_t>;

std::vector<const JobDemand *> in_arrival_order(const std::vector<JobDemand> &jobs)
{
    std::vector<const JobDemand *> order;
    for (const JobDemand &j : jobs)
        order.push_back(&j);
    std::sort(order.begin(), order.end(), [](const JobDemand *a, const JobDemand *b) {
        return a->arrival != b->arrival ? a->arrival < b->arrival : a->id < b->id;
    });
    return order;
}

// min(demand, minimum) to each job in arrival order while it fits; a job whose guarantee does
// not fit gets none (a later, smaller one may still fit).
void guarantee(uint64_t &left, uint64_t minimum, const std::vector<const JobDemand *> &order,
               Give &give)
{
    for (const JobDemand *j : order) {
        uint64_t g = std::min(j->positions, minimum);
        if (g <= left) {
            give[j->id] = g;
            left -= g;
        }
    }
}

// Weighted water-filling of `left` over `open` (in a fixed order): each job's need beyond what
// it has is met if it fits its weight's share, and what the satisfied leave is shared again;
// when nobody's need fits, each takes its share rounded down and the positions the rounding leaves
// go one each in order. Deterministic.
void water_fill(uint64_t &left, std::vector<const JobDemand *> open, Give &give)
{
    std::erase_if(open, [&](const JobDemand *j) { return give[j->id] >= j->positions; });
    while (left > 0 && !open.empty()) {
        long double weights = 0;
        for (const JobDemand *j : open)
            weights += j->weight;
        bool any_satisfied = false;
        for (const JobDemand *j : open) {
            uint64_t need = j->positions - give[j->id];
            if (need <= static_cast<long double>(left) * j->weight / weights) {
                give[j->id] = j->positions;
                left -= need;
                any_satisfied = true;
            }
        }
        if (any_satisfied) {
            std::erase_if(open, [&](const JobDemand *j) { return give[j->id] >= j->positions; });
            continue;
        }
        uint64_t handed = 0;
        for (const JobDemand *j : open) {
            auto share =
                static_cast<uint64_t>(static_cast<long double>(left) * j->weight / weights);
            give[j->id] += share;
            handed += share;
        }
        left -= handed;
        for (auto it = open.begin(); left > 0 && it != open.end(); ++it)
            if (give[(*it)->id] < (*it)->positions) {
                give[(*it)->id]++;
                left--;
            }
        break;
    }
}

void benefit(uint64_t left, uint64_t minimum, const std::vector<JobDemand> &jobs, Give &give)
{
    auto order = in_arrival_order(jobs);
    guarantee(left, minimum, order, give);
    // Highest gain first; an unknown gain ranks below every known one. Equal gains share.
    auto rank = [](const JobDemand *j) {
        return j->benefit ? j->weight * *j->benefit : -std::numeric_limits<double>::infinity();
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](const JobDemand *a, const JobDemand *b) { return rank(a) > rank(b); });
    for (size_t i = 0; i < order.size() && left > 0;) {
        size_t end = i + 1;
        while (end < order.size() && rank(order[end]) == rank(order[i]))
            end++;
        water_fill(left, {order.begin() + i, order.begin() + end}, give);
        i = end;
    }
}

void hashed(uint64_t budget, const std::vector<JobDemand> &jobs, Give &give)
{
    // Balls into bins: D positions hashed into M slots occupy M (1 - e^(-D/M)) of them in
    // expectation; a chunk that finds its slot taken goes to the host path. Each job keeps its
    // proportional part of the occupied slots (every chunk is equally likely to win its slot).
    long double demand = 0;
    for (const JobDemand &j : jobs)
        demand += j.positions;
    if (demand == 0 || budget == 0)
        return;
    long double occupied = budget * (1 - std::exp(-demand / budget));
    for (const JobDemand &j : jobs)
        give[j.id] = static_cast<uint64_t>(j.positions * occupied / demand);
}

}  // namespace

const char *to_string(Policy p)
{
    switch (p) {
    case Policy::benefit: return "benefit";
    case Policy::fair: return "fair";
    case Policy::equal: return "equal";
    case Policy::fcfs: return "fcfs";
    case Policy::hashed: return "hashed";
    }
    return "?";
}

std::optional<Policy> parse_policy(const std::string &name)
{
    for (Policy p : all_policies())
        if (name == to_string(p))
            return p;
    return std::nullopt;
}

const std::vector<Policy> &all_policies()
{
    static const std::vector<Policy> all{Policy::benefit, Policy::fair, Policy::equal, Policy::fcfs,
                                         Policy::hashed};
    return all;
}

double benefit_score(double step_host, double step_fast, double remaining)
{
    if (remaining <= 0)
        return 0;
    return std::max(0.0, step_host - step_fast) / remaining;
}

std::map<uint32_t, uint64_t> divide(Policy policy, uint64_t budget, uint64_t minimum,
                                    const std::vector<JobDemand> &jobs)
{
    Give give;
    for (const JobDemand &j : jobs)
        give[j.id] = 0;
    uint64_t left = budget;
    switch (policy) {
    case Policy::benefit: benefit(budget, minimum, jobs, give); break;
    case Policy::fair: {
        auto order = in_arrival_order(jobs);
        guarantee(left, minimum, order, give);
        water_fill(left, order, give);
        break;
    }
    case Policy::equal:
        for (const JobDemand &j : jobs)
            give[j.id] = std::min(j.positions, budget / jobs.size());
        break;
    case Policy::fcfs:
        for (const JobDemand *j : in_arrival_order(jobs)) {
            give[j->id] = std::min(j->positions, left);
            left -= give[j->id];
        }
        break;
    case Policy::hashed: hashed(budget, jobs, give); break;
    }
    return give;
}

}  // namespace xagg::sched
