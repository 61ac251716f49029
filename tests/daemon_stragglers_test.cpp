// SPDX-License-Identifier: MIT
// Straggler detection over slot snapshots: overdue partial chunk-rounds are reported once each,
// naming exactly the missing ranks.
#include <gtest/gtest.h>

#include "daemon/datapath/slot_states.hpp"
#include "daemon/jobs/stragglers.hpp"

namespace xagg::daemon {
namespace {

constexpr uint64_t kMs = 1000000;

Job three_workers()
{
    Job j;
    j.id = 4;
    j.tag = 4;  // the slots' owner tag: in these tests, the job id
    j.workers = 3;
    j.timeout_ms = 100;
    return j;
}

xagg_slot slot(uint32_t tag, uint32_t round, uint64_t seen, uint64_t started_ns, uint32_t chunk = 0)
{
    xagg_slot s{};
    s.tag = tag;
    s.chunk = chunk;
    s.round = round;
    s.seen = seen;
    s.started_ns = started_ns;
    return s;
}

TEST(StragglerWatchTest, OverduePartialRoundsAreReportedOnceWithTheMissingRanks)
{
    Job job = three_workers();
    std::vector<xagg_slot> slots(4);              // two chunks, two round slots each
    slots[0] = slot(4, 6, 0b011, 1000 * kMs);     // chunk 0, round 6: rank 2 missing
    slots[1] = slot(4, 5, 0b111, 900 * kMs);      // chunk 0, round 5: complete
    slots[3] = slot(4, 1, 0b001, 1050 * kMs, 1);  // chunk 1, round 1: ranks 1, 2 missing
    StragglerWatch watch;

    EXPECT_TRUE(watch.scan(job, region_states(slots), 1099 * kMs).empty()) << "not overdue yet";
    auto events = watch.scan(job, region_states(slots), 1120 * kMs);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].chunk, 0u);
    EXPECT_EQ(events[0].round, 6u);
    EXPECT_EQ(events[0].missing, 0b100u);
    EXPECT_EQ(events[0].waited_ms, 120u);
    events = watch.scan(job, region_states(slots), 1200 * kMs);
    ASSERT_EQ(events.size(), 1u) << "chunk 0 is not reported again; chunk 1 is now overdue";
    EXPECT_EQ(events[0].chunk, 1u);
    EXPECT_EQ(events[0].missing, 0b110u);
    EXPECT_EQ(watch.total(4), 2u);

    // The straggler arrives; later the next round of chunk 0 stalls: a new event.
    slots[0] = slot(4, 6, 0b111, 1000 * kMs);
    EXPECT_TRUE(watch.scan(job, region_states(slots), 1300 * kMs).empty());
    slots[0] = slot(4, 8, 0b110, 1300 * kMs);
    events = watch.scan(job, region_states(slots), 1500 * kMs);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].round, 8u);
    EXPECT_EQ(events[0].missing, 0b001u);
    EXPECT_EQ(watch.recent(4).size(), 3u);
    watch.forget(4);
    EXPECT_EQ(watch.total(4), 0u);
}

// A jumbo chunk's three slot parts are one chunk: one event, named by the job's chunk index.
TEST(StragglerWatchTest, AJumboChunkIsReportedOnceByItsOwnIndex)
{
    Job job = three_workers();
    job.chunk_elems = XAGG_JUMBO_CHUNK_ELEMS;
    std::vector<xagg_slot> slots(12);  // jumbo chunks 0 and 1: positions 0-2 and 3-5
    for (uint32_t part = 0; part < 3; part++)
        slots[2 * (3 + part)] = slot(4, 2, 0b101, 1000 * kMs, 3 + part);
    StragglerWatch watch;
    auto events = watch.scan(job, region_states(slots), 1200 * kMs);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].chunk, 1u);
    EXPECT_EQ(events[0].round, 2u);
    EXPECT_EQ(events[0].missing, 0b010u);
    EXPECT_EQ(watch.total(4), 1u);
}

TEST(StragglerWatchTest, OtherJobsSlotsAndUnusedSlotsAreIgnored)
{
    Job job = three_workers();
    // Another owner's slot, an unused one, and one of this job's that holds chunk 5's state
    // where chunk 1's slot is (left there before its region moved).
    std::vector<xagg_slot> slots = {slot(9, 0, 0b001, 0), slot(4, 0, 0, 0),
                                    slot(4, 3, 0b001, 0, 5)};
    StragglerWatch watch;
    EXPECT_TRUE(watch.scan(job, region_states(slots), 10000 * kMs).empty());
}

TEST(StragglerWatchTest, EvictPolicyNamesARankAfterItsConsecutiveTimeouts)
{
    Job job = three_workers();
    job.policy = StragglerPolicy::evict;
    job.evict_after = 3;
    // Host-path slots of chunks 40 and 41: rank 2 missing in both, rank 1 only in chunk 41.
    std::vector<SlotState> slots = {{40, 4, 0, 0b011, 0}, {41, 4, 0, 0b001, 0}};
    StragglerWatch watch;
    EXPECT_EQ(watch.scan(job, slots, 100 * kMs).size(), 2u);  // strike 1 for ranks 1 and 2
    EXPECT_EQ(watch.due_for_eviction(job), 0u);
    watch.scan(job, slots, 150 * kMs);  // less than a timeout later: no new strike
    watch.scan(job, slots, 200 * kMs);  // strike 2
    slots.pop_back();                   // rank 1 catches up: its strikes are gone
    watch.scan(job, slots, 300 * kMs);  // strike 3 for rank 2
    EXPECT_EQ(watch.due_for_eviction(job), 0b100u);
    Job waiting = job;
    waiting.policy = StragglerPolicy::wait;
    EXPECT_EQ(watch.due_for_eviction(waiting), 0u) << "wait never evicts";
    watch.pardon(4, 2);
    EXPECT_EQ(watch.due_for_eviction(job), 0u);
}

}  // namespace
}  // namespace xagg::daemon
