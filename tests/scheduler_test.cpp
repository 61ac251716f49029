// SPDX-License-Identifier: MIT
// The memory scheduler's core (daemon/memory_scheduler.hpp): each policy's exact division,
// guarantees, re-division as jobs come and go, and the budget never exceeded.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "lib/sched/memory_scheduler.hpp"

namespace xagg::sched {
namespace {

using Give = std::map<uint32_t, uint64_t>;

JobDemand job(uint32_t id, uint64_t chunks, double weight = 1.0, std::optional<double> gain = {})
{
    return JobDemand{id, chunks, weight, id, gain};
}

uint64_t total(const Give &g)
{
    return std::accumulate(g.begin(), g.end(), uint64_t{0},
                           [](uint64_t s, const auto &kv) { return s + kv.second; });
}

TEST(SchedulerTest, FairSharesByWeightAndResharesWhatASmallJobLeaves)
{
    // 1000 chunks, no minimum: weights 1, 1, 2 want 1000 each: 250, 250, 500.
    EXPECT_EQ(divide(Policy::fair, 1000, 0, {job(1, 1000), job(2, 1000), job(3, 1000, 2)}),
              (Give{{1, 250}, {2, 250}, {3, 500}}));
    // Job 1 needs only 100: the 150 it leaves of its share go to the others by weight.
    EXPECT_EQ(divide(Policy::fair, 1000, 0, {job(1, 100), job(2, 1000), job(3, 1000, 2)}),
              (Give{{1, 100}, {2, 300}, {3, 600}}));
}

TEST(SchedulerTest, MinimumsAreGuaranteedWhileTheyFitThenTheRestIsShared)
{
    std::vector<JobDemand> five;
    for (uint32_t id = 1; id <= 5; id++)
        five.push_back(job(id, 1000));
    // Three minimums of 256 fit (768); jobs 4 and 5 get none guaranteed; the 232 left go 46
    // each and the 2 the rounding leaves to the first two in arrival order.
    for (Policy p : {Policy::fair, Policy::benefit})
        EXPECT_EQ(divide(p, 1000, 256, five),
                  (Give{{1, 303}, {2, 303}, {3, 302}, {4, 46}, {5, 46}}))
            << to_string(p);
    // A job smaller than the minimum is guaranteed all of itself.
    EXPECT_EQ(divide(Policy::fair, 1000, 256, {job(1, 10), job(2, 5000)}),
              (Give{{1, 10}, {2, 990}}));
}

TEST(SchedulerTest, BenefitServesTheLargestGainFirstAndTheMinimumStillHolds)
{
    // Gains 0.1 (job 1), 0.5 (job 2), unknown (job 3): job 2 is served whole first, then job 1,
    // job 3 last; each keeps its minimum of 100.
    std::vector<JobDemand> jobs{job(1, 600, 1, 0.1), job(2, 600, 1, 0.5), job(3, 600)};
    EXPECT_EQ(divide(Policy::benefit, 1000, 100, jobs), (Give{{1, 300}, {2, 600}, {3, 100}}));
    // Weight scales the gain: job 1 at weight 10 outranks job 2.
    jobs[0].weight = 10;
    EXPECT_EQ(divide(Policy::benefit, 1000, 100, jobs), (Give{{1, 600}, {2, 300}, {3, 100}}));
    // Equal gains share like fair.
    EXPECT_EQ(divide(Policy::benefit, 1000, 0, {job(1, 900, 1, 0.2), job(2, 900, 1, 0.2)}),
              (Give{{1, 500}, {2, 500}}));
    // Nobody's gain known: benefit is fair.
    EXPECT_EQ(divide(Policy::benefit, 1000, 0, {job(1, 100), job(2, 1000), job(3, 1000, 2)}),
              divide(Policy::fair, 1000, 0, {job(1, 100), job(2, 1000), job(3, 1000, 2)}));
}

TEST(SchedulerTest, BenefitScoreIsTheGainPerRemainingTime)
{
    EXPECT_DOUBLE_EQ(benefit_score(1.7, 1.0, 7.0), 0.1);
    EXPECT_DOUBLE_EQ(benefit_score(1.0, 1.7, 7.0), 0.0);  // the fast path would not help
    EXPECT_DOUBLE_EQ(benefit_score(1.7, 1.0, 0.0), 0.0);  // done: nothing to gain
}

TEST(SchedulerTest, BaselinesDivideAsTheirPapersDo)
{
    std::vector<JobDemand> jobs{job(1, 100), job(2, 1000), job(3, 1000)};
    // Equal: a third each, capped at demand; what job 1 leaves is not re-shared.
    EXPECT_EQ(divide(Policy::equal, 1000, 0, jobs), (Give{{1, 100}, {2, 333}, {3, 333}}));
    // FCFS by arrival, not by id: job 3 came first.
    jobs[2].arrival = 0;
    jobs[0].arrival = 5;
    EXPECT_EQ(divide(Policy::fcfs, 1000, 0, jobs), (Give{{1, 0}, {2, 0}, {3, 1000}}));
    // Hashed: 2100 chunks into 1000 slots occupy 1000 (1 - e^-2.1) = 877.5 in expectation,
    // each job in proportion to its chunks.
    Give h = divide(Policy::hashed, 1000, 0, jobs);
    const double occupied = 1000 * (1 - std::exp(-2.1));
    EXPECT_EQ(h, (Give{{1, uint64_t(100 * occupied / 2100)},
                       {2, uint64_t(1000 * occupied / 2100)},
                       {3, uint64_t(1000 * occupied / 2100)}}));
    EXPECT_EQ(h, (Give{{1, 41}, {2, 417}, {3, 417}}));
}

TEST(SchedulerTest, MemoryIsRedividedAsJobsArriveAndLeave)
{
    JobDemand a = job(1, 800), b = job(2, 800, 3);
    EXPECT_EQ(divide(Policy::fair, 1000, 0, {a}), (Give{{1, 800}}));
    EXPECT_EQ(divide(Policy::fair, 1000, 0, {a, b}), (Give{{1, 250}, {2, 750}}));
    EXPECT_EQ(divide(Policy::fair, 1000, 0, {b}), (Give{{2, 800}}));
    EXPECT_EQ(divide(Policy::fcfs, 1000, 0, {a, b}), (Give{{1, 800}, {2, 200}}));
    EXPECT_EQ(divide(Policy::fcfs, 1000, 0, {b}), (Give{{2, 800}}));
}

TEST(SchedulerTest, NoPolicyEverExceedsTheBudgetOrADemand)
{
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 3000; trial++) {
        uint64_t budget = rng() % 5000, minimum = rng() % 300;
        std::vector<JobDemand> jobs;
        uint64_t demand = 0;
        for (uint32_t id = 1, n = 1 + static_cast<uint32_t>(rng() % 12); id <= n; id++) {
            std::optional<double> gain;
            if (rng() % 3)
                gain = double(rng() % 4) / 4;  // ties are common
            jobs.push_back(
                JobDemand{id, rng() % 3000, 0.1 + double(rng() % 50) / 10, rng() % 5, gain});
            demand += jobs.back().positions;
        }
        for (Policy p : all_policies()) {
            Give g = divide(p, budget, minimum, jobs);
            ASSERT_EQ(g.size(), jobs.size());
            ASSERT_LE(total(g), budget) << to_string(p) << " trial " << trial;
            for (const JobDemand &j : jobs)
                ASSERT_LE(g[j.id], j.positions) << to_string(p) << " trial " << trial;
            // The exclusive policies but equal waste nothing: all of the memory or all demands.
            if (p == Policy::fair || p == Policy::benefit || p == Policy::fcfs) {
                ASSERT_EQ(total(g), std::min(budget, demand)) << to_string(p) << " trial " << trial;
            }
        }
    }
}

TEST(SchedulerTest, PolicyNamesRoundTrip)
{
    for (Policy p : all_policies())
        EXPECT_EQ(parse_policy(to_string(p)), p);
    EXPECT_EQ(parse_policy("lottery"), std::nullopt);
    EXPECT_EQ(all_policies().front(), Policy::benefit);
}

}  // namespace
}  // namespace xagg::sched
