// SPDX-License-Identifier: MIT
// A job's round progress from its slots: latest round per chunk, serial-number order, members.
#include <gtest/gtest.h>

#include "daemon/jobs/progress.hpp"

namespace xagg::daemon {
namespace {

Job job_of(uint32_t chunks, uint32_t workers)
{
    Job job;
    job.id = 9;
    job.tag = 9;  // the slots' owner tag: in these tests, the job id
    job.positions = chunks;
    job.workers = workers;
    return job;
}

TEST(ProgressTest, NothingSentYet)
{
    JobProgress p = job_progress(job_of(8, 2), {});
    EXPECT_FALSE(p.newest_round.has_value());
    EXPECT_FALSE(p.oldest_round.has_value());
    EXPECT_EQ(p.not_started, 8u);
    EXPECT_EQ(p.in_flight, 0u);
    EXPECT_FALSE(to_api(p).newest_round.has_value());
}

TEST(ProgressTest, EachChunkCountsAtItsLatestRound)
{
    // chunk 0 holds rounds 6 (complete) and 7 (partial); chunk 1 round 7 complete; chunk 2
    // round 6 complete.
    std::vector<SlotState> slots = {
        {0, 9, 6, 0b11, 0}, {0, 9, 7, 0b10, 0}, {1, 9, 7, 0b11, 0}, {2, 9, 6, 0b11, 0}};
    JobProgress p = job_progress(job_of(3, 2), slots);
    EXPECT_EQ(p.newest_round, 7u);
    EXPECT_EQ(p.oldest_round, 6u);
    EXPECT_EQ(p.complete_at_newest, 1u);
    EXPECT_EQ(p.in_flight, 1u);
    EXPECT_EQ(p.not_started, 0u);
}

TEST(ProgressTest, RoundsWrapInSerialOrder)
{
    std::vector<SlotState> slots = {{0, 9, 0xffffffffu, 0b1, 0}, {0, 9, 0, 0b1, 0}};
    JobProgress p = job_progress(job_of(1, 1), slots);
    EXPECT_EQ(p.newest_round, 0u);  // 0 follows 2^32 - 1
    EXPECT_EQ(p.oldest_round, 0u);
    EXPECT_EQ(p.complete_at_newest, 1u);
}

TEST(ProgressTest, EvictedRanksAreNotWaitedForAndOtherOwnersSlotsIgnored)
{
    Job job = job_of(2, 3);
    job.evicted = 0b100;
    std::vector<SlotState> slots = {{0, 9, 2, 0b011, 0}, {1, 4, 9, 0b111, 0}};
    JobProgress p = job_progress(job, slots);
    EXPECT_EQ(p.newest_round, 2u);
    EXPECT_EQ(p.complete_at_newest, 1u);
    EXPECT_EQ(p.not_started, 1u);  // chunk 1's slot carries another owner's tag
}

}  // namespace
}  // namespace xagg::daemon
