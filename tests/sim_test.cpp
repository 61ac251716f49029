// SPDX-License-Identifier: MIT
// Placement (daemon/placement.hpp) and xagg-sim's trace and cluster model: exact results on cases
// small enough to work out by hand, and the invariants on a generated trace.
#include <gtest/gtest.h>

#include <sstream>

#include "lib/sched/placement.hpp"
#include "tools/xagg-sim/simulator.hpp"
#include "tools/xagg-sim/trace.hpp"

namespace xagg::sim {
namespace {

TEST(PlacementTest, LargestFirstToTheNodeThatFinishesSoonestWithRoom)
{
    std::vector<sched::Node> nodes{{0, 100, 10, 0}, {1, 100, 20, 0}, {2, 30, 10, 0}};
    // 100, 60, 60, 30 chunks of 1 worker: 100 to the fastest node (1: 100/20 = 5 s); 60 to
    // node 0 (6 s; node 2 has no room); the second 60 nowhere with room, so to the soonest
    // finish overall (node 2: 6 s, against node 1's 160/20 = 8 and node 0's 12); 30 to the one
    // node with room left, node 0 (90/10 = 9 s), the slowest node's time.
    std::vector<sched::Partition> parts{{0, 100, 1}, {1, 60, 1}, {2, 60, 1}, {3, 30, 1}};
    EXPECT_EQ(sched::place(nodes, parts), (std::vector<uint32_t>{1, 0, 2, 0}));
    EXPECT_EQ(nodes[0].free_chunks, 10u);
    EXPECT_EQ(nodes[1].free_chunks, 0u);
    EXPECT_EQ(nodes[2].free_chunks, 0u);
    EXPECT_DOUBLE_EQ(sched::makespan(nodes), 9.0);
}

TEST(PlacementTest, EveryChunkIsCutIntoExactlyOnePartition)
{
    auto parts = sched::cut(100, 4, 30);
    ASSERT_EQ(parts.size(), 4u);
    EXPECT_EQ(parts[0].chunks + parts[1].chunks + parts[2].chunks + parts[3].chunks, 100u);
    EXPECT_EQ(parts[3].chunks, 10u);
    EXPECT_EQ(parts[3].index, 3u);
    EXPECT_EQ(parts[3].workers, 4u);
}

ClusterParams one_node()
{
    ClusterParams c;
    c.nodes = 1;
    c.node_chunks = 100;
    c.fast_rate = 100;
    c.host_rate = 50;
    c.min_job_chunks = 0;
    c.partition_chunks = 1000;
    c.reschedule_s = 0;
    return c;
}

TEST(SimulatorTest, AJobAloneTakesItsAloneTime)
{
    std::vector<TraceJob> trace{{1, 0, 1, 100, 10, 0, 1}};
    PolicyResult r = simulate(trace, one_node(), sched::Policy::benefit);
    ASSERT_EQ(r.jobs.size(), 1u);
    EXPECT_DOUBLE_EQ(r.jobs[0].jct(), 10.0);  // 100 chunks / 100 per second, 10 times
    EXPECT_DOUBLE_EQ(r.mean_efficiency, 1.0);
    EXPECT_DOUBLE_EQ(r.utilization, 1.0);
}

TEST(SimulatorTest, TwoJobsOnOneNodeFinishWhenTheirPolicySays)
{
    // Two jobs that each fill the node, sharing its CPUs (each an iteration's work x 2).
    // fcfs: job 1 on the fast path (1 s of work, 2 s an iteration), job 2 on the host path (2 s
    // of work, 4 s) until job 1 ends at 20 s with job 2 halfway; then 5 more at 1 s, alone.
    std::vector<TraceJob> trace{{1, 0, 1, 100, 10, 0, 1}, {2, 0, 1, 100, 10, 0, 1}};
    PolicyResult fcfs = simulate(trace, one_node(), sched::Policy::fcfs);
    EXPECT_DOUBLE_EQ(fcfs.jobs[0].jct(), 20.0);
    EXPECT_DOUBLE_EQ(fcfs.jobs[1].jct(), 25.0);
    EXPECT_DOUBLE_EQ(fcfs.mean_jct, 22.5);
    // equal: 50 chunks each on each path: (0.5 + 1) s of work x 2 = 3 s an iteration for both.
    PolicyResult equal = simulate(trace, one_node(), sched::Policy::equal);
    EXPECT_DOUBLE_EQ(equal.jobs[0].jct(), 30.0);
    EXPECT_DOUBLE_EQ(equal.jobs[1].jct(), 30.0);
    EXPECT_DOUBLE_EQ(equal.mean_efficiency, 1.0 / 3);
    // benefit: job 2 has 5 iterations left, job 1 has 10: job 2 gets the memory and ends at
    // 10 s (2 s an iteration); job 1 did 2.5 on the host path (4 s each), 7.5 more at 1 s.
    trace[1].iterations = 5;
    PolicyResult benefit = simulate(trace, one_node(), sched::Policy::benefit);
    EXPECT_DOUBLE_EQ(benefit.jobs[1].jct(), 10.0);
    EXPECT_DOUBLE_EQ(benefit.jobs[0].jct(), 17.5);
}

TEST(SimulatorTest, AGeneratedTraceRunsUnderEveryPolicyWithinTheBudget)
{
    TraceParams tp;
    tp.jobs = 150;
    tp.seed = 3;
    auto trace = generate(tp);
    ClusterParams c;
    c.nodes = 20;
    for (sched::Policy p : sched::all_policies()) {
        PolicyResult r = simulate(trace, c, p);
        EXPECT_EQ(r.jobs.size(), trace.size()) << sched::to_string(p);
        EXPECT_EQ(r.over_budget, 0u) << sched::to_string(p);
        EXPECT_GT(r.divisions, 0u);
        for (const JobResult &j : r.jobs) {
            EXPECT_LE(j.efficiency(), 1.0 + 1e-9) << sched::to_string(p) << " job " << j.id;
            EXPECT_GT(j.efficiency(), 0.0);
        }
        EXPECT_GT(r.utilization, 0.0);
        EXPECT_LE(r.utilization, 1.0 + 1e-9);
        EXPECT_LE(r.p50_jct, r.p95_jct);
        EXPECT_LE(r.p95_jct, r.p99_jct);
    }
}

TEST(TraceTest, WritesAndReadsBackTheSameJobs)
{
    TraceParams tp;
    tp.jobs = 20;
    auto jobs = generate(tp);
    EXPECT_EQ(generate(tp)[7].chunks, jobs[7].chunks);  // same seed, same trace
    std::stringstream s;
    write_csv(s, jobs);
    auto back = read_csv(s);
    ASSERT_EQ(back.size(), jobs.size());
    for (size_t i = 0; i < jobs.size(); i++) {
        EXPECT_EQ(back[i].id, jobs[i].id);
        EXPECT_EQ(back[i].chunks, jobs[i].chunks);
        EXPECT_EQ(back[i].workers, jobs[i].workers);
        EXPECT_EQ(back[i].iterations, jobs[i].iterations);
    }
}

TEST(TraceTest, ABadLineIsNamed)
{
    auto error_of = [](const std::string &text) {
        std::stringstream s(text);
        try {
            read_csv(s);
        } catch (const std::runtime_error &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(error_of("# header\n1,0,2,10,5,0.1,1\n2,1,2,10,5,0.1\n"),
              "trace line 3: expected 7 comma-separated fields (id,arrival_s,workers,chunks,"
              "iterations,compute_s,weight), found 6: '2,1,2,10,5,0.1'");
    EXPECT_EQ(error_of("1,0,2,ten,5,0.1,1\n"),
              "trace line 1: every field must be a non-negative number: '1,0,2,ten,5,0.1,1'");
    EXPECT_EQ(error_of("1,0,65,10,5,0.1,1\n"),
              "trace line 1: workers must be 1..64: '1,0,65,10,5,0.1,1'");
    EXPECT_EQ(error_of("1,5,2,10,5,0.1,1\n2,4,2,10,5,0.1,1\n"),
              "trace line 2: arrivals must not go back in time: '2,4,2,10,5,0.1,1'");
}

}  // namespace
}  // namespace xagg::sim
