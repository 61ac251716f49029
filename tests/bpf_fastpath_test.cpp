// SPDX-License-Identifier: MIT
// BPF_PROG_TEST_RUN tests of the XDP fast path: a crafted frame in, the expected XDP action, the
// exact bytes out and exactly one outcome counter incremented.
#include <bpf/bpf.h>
#include <linux/pkt_cls.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <climits>
#include <functional>
#include <memory>
#include <random>
#include <thread>

#include "lib/fastpath/fastpath.hpp"
#include "tests/support/fastpath_fixture.hpp"
#include "tests/support/packet_builder.hpp"

namespace xagg::test {
namespace {

class BadFrameTest : public FastPathTest, public ::testing::WithParamInterface<BadFrameCase> {};

TEST_P(BadFrameTest, IsCountedAndNeverSummed)
{
    const BadFrameCase &c = GetParam();
    expect_unchanged(c.make(), c.action, c.counter);
    // Whatever it was, it left no trace: job A's chunk 0 still needs all three members.
    for (uint32_t r = 0; r < 2; r++)
        expect(contribution(kJobA, r, 0, 0).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame last = contribution(kJobA, 2, 0, 0);
    Result res = expect(last.build(), XDP_TX, XAGG_CNT_COMPLETED);
    EXPECT_EQ(res.out, multicast_result(last, filled(21), 0b111));
}

INSTANTIATE_TEST_SUITE_P(Table, BadFrameTest, ::testing::ValuesIn(kBadFrames),
                         [](const auto &tc) { return std::string(tc.param.name); });

// --- Aggregation ------------------------------------------------------------------------------

TEST_F(FastPathTest, SumsThreeWorkersExactlyAtTheExtremesOfTheRange)
{
    std::vector<int32_t> v0(XAGG_CHUNK_ELEMS), v1(XAGG_CHUNK_ELEMS), v2(XAGG_CHUNK_ELEMS);
    for (int i = 0; i < XAGG_CHUNK_ELEMS; i++) {
        v0[i] = i % 2 ? INT32_MAX : INT32_MIN;
        v1[i] = i % 2 ? INT32_MIN : INT32_MAX;
        v2[i] = -i * 1000003;
    }
    expect(contribution(kJobA, 0, 0, 1, v0).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    expect(contribution(kJobA, 1, 0, 1, v1).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame last = contribution(kJobA, 2, 0, 1, v2);
    Result r = expect(last.build(), XDP_TX, XAGG_CNT_COMPLETED);
    std::vector<int32_t> want(XAGG_CHUNK_ELEMS);
    for (int i = 0; i < XAGG_CHUNK_ELEMS; i++)
        want[i] = -1 - i * 1000003;  // INT32_MAX + INT32_MIN == -1
    EXPECT_EQ(r.out, multicast_result(last, want, 0b111));
    EXPECT_EQ(get_le32(r.out, off::payload), -1);
    EXPECT_EQ(get_le32(r.out, off::payload + 4 * 255), -1 - 255 * 1000003);
}

TEST_F(FastPathTest, OverflowWrapsAsTwosComplement)
{
    expect(contribution(kJobA, 0, 0, 0, filled(INT32_MAX)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    expect(contribution(kJobA, 1, 0, 0, filled(1)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame last = contribution(kJobA, 2, 0, 0, filled(1));
    Result r = expect(last.build(), XDP_TX, XAGG_CNT_COMPLETED);
    EXPECT_EQ(r.out, multicast_result(last, filled(INT32_MIN + 1), 0b111));
}

TEST_F(FastPathTest, ArrivalOrderDoesNotMatter)
{
    auto v = [](uint32_t r) { return random_values(100 + r); };
    std::vector<int32_t> want = sum_of({v(0), v(1), v(2)});
    for (uint32_t chunk = 0; chunk < 3; chunk++) {
        uint32_t order[3][3] = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}};
        for (int i = 0; i < 2; i++)
            expect(contribution(kJobA, order[chunk][i], 0, chunk, v(order[chunk][i])).build(),
                   XDP_DROP, XAGG_CNT_AGGREGATED);
        Frame last = contribution(kJobA, order[chunk][2], 0, chunk, v(order[chunk][2]));
        EXPECT_EQ(expect(last.build(), XDP_TX, XAGG_CNT_COMPLETED).out,
                  multicast_result(last, want, 0b111));
    }
}

TEST_F(FastPathTest, DuplicateIsNotCountedTwice)
{
    expect(contribution(kJobA, 0, 0, 0, filled(5)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame again = contribution(kJobA, 0, 0, 0, filled(5));
    again.flags = XAGG_F_RETRANSMIT;
    expect_unchanged(again.build(), XDP_DROP, XAGG_CNT_DROP_DUPLICATE);
    expect(contribution(kJobA, 1, 0, 0, filled(6)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame last = contribution(kJobA, 2, 0, 0, filled(7));
    EXPECT_EQ(expect(last.build(), XDP_TX, XAGG_CNT_COMPLETED).out,
              multicast_result(last, filled(18), 0b111));
}

TEST_F(FastPathTest, RetransmissionAfterCompletionIsAnsweredToThatWorkerAlone)
{
    for (uint32_t r = 0; r < 3; r++)
        run(contribution(kJobA, r, 0, 0, filled(static_cast<int32_t>(r + 1))).build());
    Frame asker = contribution(kJobA, 1, 0, 0, filled(2));
    asker.flags = XAGG_F_RETRANSMIT;
    Result r = expect(asker.build(), XDP_TX, XAGG_CNT_RESENT);
    EXPECT_EQ(r.out, unicast_result(asker, filled(6), 0b111));
    // Swapping addresses keeps the IPv4 checksum valid without recomputing it.
    EXPECT_EQ((r.out[off::ip_csum] << 8 | r.out[off::ip_csum + 1]), ipv4_checksum(r.out, off::ip));
}

TEST_F(FastPathTest, RoundsAlternateSlotsAndKeepThePreviousResult)
{
    auto finish_round = [&](uint32_t round, int32_t base) {
        for (uint32_t r = 0; r < 2; r++)
            expect(contribution(kJobA, r, round, 0, filled(base + static_cast<int32_t>(r))).build(),
                   XDP_DROP, XAGG_CNT_AGGREGATED);
        Frame last = contribution(kJobA, 2, round, 0, filled(base + 2));
        EXPECT_EQ(expect(last.build(), XDP_TX, XAGG_CNT_COMPLETED).out,
                  multicast_result(last, filled(3 * base + 3), 0b111));
    };
    finish_round(0, 10);
    // Round 1 starts while worker 0 still lacks round 0's result: both must coexist.
    expect(contribution(kJobA, 1, 1, 0, filled(20)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame lost = contribution(kJobA, 0, 0, 0, filled(10));
    EXPECT_EQ(expect(lost.build(), XDP_TX, XAGG_CNT_RESENT).out,
              unicast_result(lost, filled(33), 0b111));
    expect(contribution(kJobA, 0, 1, 0, filled(21)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame last1 = contribution(kJobA, 2, 1, 0, filled(22));
    EXPECT_EQ(expect(last1.build(), XDP_TX, XAGG_CNT_COMPLETED).out,
              multicast_result(last1, filled(63), 0b111));
    // Round 2 reuses round 0's slot; from then on round 0 is history.
    finish_round(2, 30);
    expect_unchanged(contribution(kJobA, 0, 0, 0).build(), XDP_DROP, XAGG_CNT_DROP_STALE_ROUND);
    // Round 1's result is still there for a worker that lost it.
    Frame lost1 = contribution(kJobA, 2, 1, 0, filled(22));
    EXPECT_EQ(expect(lost1.build(), XDP_TX, XAGG_CNT_RESENT).out,
              unicast_result(lost1, filled(63), 0b111));
}

TEST_F(FastPathTest, OlderRoundsAreStaleAndNewerOnesRestartTheSlot)
{
    for (uint32_t r = 0; r < 3; r++)
        run(contribution(kJobA, r, 3, 0).build());  // slot of parity 1 holds round 3, complete
    expect_unchanged(contribution(kJobA, 0, 1, 0).build(), XDP_DROP, XAGG_CNT_DROP_STALE_ROUND);
    // 0xffffffff is 4 rounds behind 3 in serial-number order, not 2^32 - 4 ahead.
    expect_unchanged(contribution(kJobA, 0, 0xffffffff, 0).build(), XDP_DROP,
                     XAGG_CNT_DROP_STALE_ROUND);
    // Whole rounds lost (round 5 never arrived): round 7 still takes the slot over, so a slot can
    // never be stuck on an old round.
    expect(contribution(kJobA, 0, 7, 0, filled(1)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    expect(contribution(kJobA, 1, 7, 0, filled(2)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame last = contribution(kJobA, 2, 7, 0, filled(3));
    EXPECT_EQ(expect(last.build(), XDP_TX, XAGG_CNT_COMPLETED).out,
              multicast_result(last, filled(6), 0b111));
    // Round 3's result is gone with it: its retransmission is stale now.
    expect_unchanged(contribution(kJobA, 0, 3, 0).build(), XDP_DROP, XAGG_CNT_DROP_STALE_ROUND);
}

TEST_F(FastPathTest, RoundNumbersWrapAround)
{
    for (uint32_t round : {0xfffffffeu, 0xffffffffu, 0u, 1u}) {
        for (uint32_t r = 0; r < 2; r++)
            expect(contribution(kJobA, r, round, 3, filled(1)).build(), XDP_DROP,
                   XAGG_CNT_AGGREGATED);
        Frame last = contribution(kJobA, 2, round, 3, filled(1));
        EXPECT_EQ(expect(last.build(), XDP_TX, XAGG_CNT_COMPLETED).out,
                  multicast_result(last, filled(3), 0b111))
            << "round " << round;
    }
}

TEST_F(FastPathTest, DisagreeingExponentIsRefused)
{
    Frame f0 = contribution(kJobA, 0, 0, 0);
    f0.exponent = -8;
    expect(f0.build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame f1 = contribution(kJobA, 1, 0, 0);
    f1.exponent = -7;
    expect_unchanged(f1.build(), XDP_DROP, XAGG_CNT_DROP_BAD_EXPONENT);
}

TEST_F(FastPathTest, WhatAnotherOwnerOrAnotherChunkLeftInASlotIsNeverAddedTo)
{
    // Slot 0 is job A's chunk 0, round parity 0. Left-overs a newer round would otherwise treat
    // as the chunk's (round 6 > 0 would make round 0 stale, or be added to): each is taken as
    // empty, and the contribution starts a fresh sum.
    struct Case {
        const char *what;
        uint32_t tag, chunk;
    };
    for (const Case &c : {Case{"the previous job of this id (another tag)", kJobA + 100, 0},
                          Case{"this job's chunk 3, before its region moved", kJobA, 3},
                          Case{"another job", kJobB, 0}}) {
        SCOPED_TRACE(c.what);
        xagg_slot old{};
        old.tag = c.tag;
        old.chunk = c.chunk;
        old.round = 6;
        old.seen = 0b110;
        old.sum[0] = 999;
        const uint32_t key = 0;
        fp_->write_slots(std::span(&key, 1), std::span(&old, 1));
        expect(contribution(kJobA, 0, 0, 0, filled(5)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
        xagg_slot now = fp_->slot(0);
        EXPECT_EQ(now.tag, kJobA);
        EXPECT_EQ(now.chunk, 0u);
        EXPECT_EQ(now.round, 0u);
        EXPECT_EQ(now.seen, 0b1u);
        EXPECT_EQ(now.sum[0], 5);
    }
    // The job's own state of the chunk is added to as before.
    expect_unchanged(contribution(kJobA, 1, 0, 0, filled(7)).build(), XDP_DROP,
                     XAGG_CNT_AGGREGATED);
    EXPECT_EQ(fp_->slot(0).seen, 0b11u);
    EXPECT_EQ(fp_->slot(0).sum[0], 12);
}

TEST_F(FastPathTest, JobsNeverTouchEachOthersSlots)
{
    // Job A and job B use the same chunk and round numbers at the same time.
    expect(contribution(kJobA, 0, 0, 0, filled(1000)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    expect(contribution(kJobB, 0, 0, 0, filled(-1)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame lastb = contribution(kJobB, 1, 0, 0, filled(-2));
    EXPECT_EQ(expect(lastb.build(), XDP_TX, XAGG_CNT_COMPLETED).out,
              multicast_result(lastb, filled(-3), 0b11));
    // Job A's region is slots [0, 2*4), job B's [8, 16): check the memory itself.
    xagg_slot a = fp_->slot(0), b = fp_->slot(2 * kRegionChunks);
    EXPECT_EQ(a.tag, kJobA);
    EXPECT_EQ(a.chunk, 0u);
    EXPECT_EQ(a.seen, 0b1u);
    EXPECT_EQ(a.sum[0], 1000);
    EXPECT_EQ(b.tag, kJobB);
    EXPECT_EQ(b.sum[255], -3);
    // A chunk index that would land in job B's region if it were not bounded goes to the host.
    expect_unchanged(contribution(kJobA, 1, 0, kRegionChunks).build(), XDP_PASS,
                     XAGG_CNT_PASS_HOST_OVERFLOW);
    EXPECT_EQ(fp_->slot(2 * kRegionChunks).seen, 0b11u);
}

// A job deleted and created again under the same id gets a new key: the old job's workers,
// still sending with the key they were handed, add nothing to the new job's sums.
TEST_F(FastPathTest, AJobCreatedAgainRefusesTheKeyOfItsPredecessor)
{
    expect(contribution(kJobA, 0, 0, 0, filled(5)).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    fp_->delete_job(kJobA);
    JobSpec again = jobs_.front().spec;
    ASSERT_EQ(again.id, kJobA);
    again.tag = 0x7a9;
    again.key = 0x0123456789abcdefull;
    fp_->put_job(again);
    for (uint32_t r = 0; r < 3; r++)
        expect_unchanged(contribution(kJobA, r, 0, 0).build(), XDP_DROP, XAGG_CNT_DROP_BAD_KEY);
    std::vector<int32_t> sum(XAGG_CHUNK_ELEMS, 0);
    for (uint32_t r = 0; r < 3; r++) {
        Frame f = contribution(kJobA, r, 0, 0, random_values(40 + r));
        f.key = again.key;
        sum = sum_of({sum, f.values});
        Result res = expect(f.build(), r < 2 ? XDP_DROP : XDP_TX,
                            r < 2 ? XAGG_CNT_AGGREGATED : XAGG_CNT_COMPLETED);
        if (r == 2) {
            EXPECT_EQ(res.out, multicast_result(f, sum, 0b111));
        }
    }
}

// Workers whose NIC fills in UDP checksums (every real one) are summed like those that send none.
TEST_F(FastPathTest, ContributionsWithARightUdpChecksumAreSummed)
{
    std::vector<int32_t> sum(XAGG_CHUNK_ELEMS, 0);
    for (uint32_t r = 0; r < 3; r++) {
        Frame f = contribution(kJobA, r, 0, 2, random_values(70 + r));
        sum = sum_of({sum, f.values});
        Result res = expect(with_udp_checksum(f.build()), r < 2 ? XDP_DROP : XDP_TX,
                            r < 2 ? XAGG_CNT_AGGREGATED : XAGG_CNT_COMPLETED);
        if (r == 2) {
            EXPECT_EQ(res.out, multicast_result(f, sum, 0b111));
        }
    }
}

TEST_F(FastPathTest, OneWorkerJobAnswersAtOnce)
{
    Frame f = contribution(kJobSolo, 0, 0, 0, random_values(9));
    EXPECT_EQ(expect(f.build(), XDP_TX, XAGG_CNT_COMPLETED).out,
              multicast_result(f, random_values(9), 0b1));
}

// Fan-out jobs: XDP completes the sum and passes it up; TC ingress sends one copy per member.
TEST_F(FastPathTest, FanoutJobPassesTheResultToTcWhichCopiesItToEveryMember)
{
    for (uint32_t r = 0; r < 2; r++)
        expect(contribution(kJobFanout, r, 0, 1, filled(static_cast<int32_t>(10 + r))).build(),
               XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame last = contribution(kJobFanout, 2, 0, 1, filled(12));
    Result passed = expect(last.build(), XDP_PASS, XAGG_CNT_COMPLETED_FANOUT);
    // Addressed as it came, marked as a result, carrying the sum.
    Frame marked = last;
    marked.flags = XAGG_F_RESULT;
    marked.rank = XAGG_RANK_AGGREGATOR;
    marked.contrib = 0b111;
    marked.key = 0;  // a result carries no key
    marked.values = filled(33);
    EXPECT_EQ(passed.out, with_udp_checksum(marked.build()));

    Counters before = fp_->counters();
    Result tc = run_prog(fp_->fanout_prog_fd(), passed.out);
    Counters after = fp_->counters();
    EXPECT_EQ(tc.action, static_cast<uint32_t>(TC_ACT_SHOT)) << "the original is consumed";
    EXPECT_EQ(after[XAGG_CNT_FANOUT_COPIES] - before[XAGG_CNT_FANOUT_COPIES], 3u);
    EXPECT_EQ(after[XAGG_CNT_FANOUT_FAILED], before[XAGG_CNT_FANOUT_FAILED]);
    // What is left in the buffer is the copy for the last member (rank 2), to its learned MAC.
    Frame to2 = marked;
    to2.src_mac = kAggMac;
    to2.dst_mac = member_of(kJobFanout, 2).mac;
    to2.src_ip = last.dst_ip;
    to2.dst_ip = member_of(kJobFanout, 2).ip;
    to2.src_port = XAGG_DEFAULT_PORT;
    to2.dst_port = member_of(kJobFanout, 2).port;
    EXPECT_EQ(tc.out, with_udp_checksum(to2.build()))
        << "the checksum adjusted for the new addresses";
}

TEST_F(FastPathTest, FanoutIgnoresEverythingButResults)
{
    Bytes contribution_frame = contribution(kJobFanout, 0, 0, 0).build();
    Result r = run_prog(fp_->fanout_prog_fd(), contribution_frame);
    EXPECT_EQ(r.action, static_cast<uint32_t>(TC_ACT_OK));
    EXPECT_EQ(r.out, contribution_frame);
}

class WorkerCountTest : public FastPathTest, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(WorkerCountTest, EveryMemberCompletesTheSum)
{
    uint32_t n = GetParam();
    constexpr uint32_t kJob = 10;
    add_job(kJob, n, 3 * kRegionChunks, kRegionChunks);
    std::vector<std::vector<int32_t>> parts;
    for (uint32_t r = 0; r < n; r++)
        parts.push_back(random_values(1000 * n + r));
    for (uint32_t r = 0; r + 1 < n; r++)
        expect(contribution(kJob, r, 0, 2, parts[r]).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    Frame last = contribution(kJob, n - 1, 0, 2, parts[n - 1]);
    uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
    EXPECT_EQ(expect(last.build(), XDP_TX, XAGG_CNT_COMPLETED).out,
              multicast_result(last, sum_of(parts), all));
}

INSTANTIATE_TEST_SUITE_P(Workers, WorkerCountTest, ::testing::Values(2u, 3u, 4u, 8u, 17u, 64u));

// Several CPUs adding into the same slot at once: the spin lock must make each packet's update
// atomic. Every round all threads race on chunk 0 (and a few more), then results are checked.
TEST_F(FastPathTest, ConcurrentContributionsToOneSlotSumExactly)
{
    constexpr uint32_t kThreads = 8, kRounds = 2000, kChunks = 2, kJob = 11;
    add_job(kJob, kThreads, 3 * kRegionChunks, kChunks);
    std::vector<std::vector<int32_t>> parts;
    for (uint32_t r = 0; r < kThreads; r++)
        parts.push_back(random_values(77 + r));
    const std::vector<int32_t> want = sum_of(parts);

    std::barrier sync(kThreads);
    std::atomic<uint32_t> completions{0}, wrong{0}, errors{0};
    auto worker = [&](uint32_t rank) {
        std::vector<Bytes> frames;
        for (uint32_t round = 0; round < kRounds; round++) {
            sync.arrive_and_wait();
            for (uint32_t chunk = 0; chunk < kChunks; chunk++) {
                Bytes in = contribution(kJob, rank, round, chunk, parts[rank]).build();
                Bytes out(in.size());
                LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in.data(), .data_out = out.data(),
                            .data_size_in = static_cast<uint32_t>(in.size()),
                            .data_size_out = static_cast<uint32_t>(out.size()), .repeat = 1);
                if (bpf_prog_test_run_opts(fp_->prog_fd(), &o) != 0) {
                    errors++;
                    continue;
                }
                if (o.retval == XDP_TX) {
                    completions++;
                    for (int i = 0; i < XAGG_CHUNK_ELEMS; i++)
                        if (get_le32(out, off::payload + 4 * i) != want[i]) {
                            wrong++;
                            break;
                        }
                } else if (o.retval != XDP_DROP) {
                    errors++;
                }
            }
        }
    };
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < kThreads; r++)
        threads.emplace_back(worker, r);
    for (auto &t : threads)
        t.join();
    EXPECT_EQ(errors.load(), 0u);
    EXPECT_EQ(wrong.load(), 0u);
    EXPECT_EQ(completions.load(), kRounds * kChunks) << "exactly one completion per chunk-round";
    Counters c = fp_->counters();
    EXPECT_EQ(c[XAGG_CNT_COMPLETED], kRounds * kChunks);
    EXPECT_EQ(c[XAGG_CNT_AGGREGATED], kRounds * kChunks * (kThreads - 1));
}

}  // namespace
}  // namespace xagg::test
