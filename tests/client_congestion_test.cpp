// SPDX-License-Identifier: MIT
// The credit controller (client/congestion.hpp) on synthetic signals: slow start, the cut on
// loss (once per congestion event), the growth back, its bounds, the delay signal, and two
// controllers converging to a fair share of one bottleneck.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "client/congestion.hpp"
#include "xagg/proto.h"

namespace xagg::client {
namespace {

constexpr int64_t kMs = 1'000'000;

CongestionParams loss_only()
{
    CongestionParams p;
    p.initial = 16;
    p.minimum = 4;
    p.beta = 0.5;
    p.increase = 1;
    p.delay_target_ns = 0;
    return p;
}

// A synthetic clock: every answer comes 1 us after the previous one.
int64_t g_now = 0;

// A chunk answered at its first transmission after `rtt_ns` (0: a resent chunk's answer, no
// sample), `marked` of its path CE-marked.
void answer(CreditController &c, bool window_full, int64_t rtt_ns, double marked = 0)
{
    g_now += 1000;
    c.on_answer(Answer{.window_full = window_full,
                       .rtt_ns = rtt_ns,
                       .sent_ns = g_now - rtt_ns,
                       .at_ns = g_now,
                       .marked = marked});
}

// Answers a whole window of chunks, each at its first transmission after `rtt_ns`.
void answer_window(CreditController &c, int64_t rtt_ns = 100'000, double marked = 0)
{
    const unsigned w = c.window();
    for (unsigned i = 0; i < w; i++)
        answer(c, true, rtt_ns, marked);
}

TEST(CreditController, SlowStartDoublesEveryWindowUpToTheMaximum)
{
    CreditController c(loss_only(), 512);
    EXPECT_EQ(c.window(), 16u);
    EXPECT_TRUE(c.slow_start());
    std::vector<unsigned> seen;
    for (int round = 0; round < 7; round++) {
        answer_window(c);
        seen.push_back(c.window());
    }
    EXPECT_EQ(seen, (std::vector<unsigned>{32, 64, 128, 256, 512, 512, 512}));
    EXPECT_EQ(c.cuts(), 0u);
}

TEST(CreditController, AnswersItDidNotNeedTheCreditForDoNotGrowIt)
{
    CreditController c(loss_only(), 512);
    for (int i = 0; i < 1000; i++)
        answer(c, false, 100'000);
    EXPECT_EQ(c.window(), 16u);
}

TEST(CreditController, ALossHalvesOncePerCongestionEvent)
{
    CreditController c(loss_only(), 512);
    for (int round = 0; round < 5; round++)
        answer_window(c);
    ASSERT_EQ(c.window(), 512u);
    // A burst of drops of chunks sent before the cut (at 10 ms): one event, one cut.
    EXPECT_TRUE(c.on_loss(9 * kMs, 10 * kMs));
    EXPECT_EQ(c.window(), 256u);
    for (int64_t sent = 0; sent <= 10 * kMs; sent += kMs / 2)
        EXPECT_FALSE(c.on_loss(sent, 11 * kMs));
    EXPECT_EQ(c.window(), 256u);
    EXPECT_FALSE(c.slow_start());
    // A chunk sent after the cut and lost is a new event.
    EXPECT_TRUE(c.on_loss(10 * kMs + 1, 12 * kMs));
    EXPECT_EQ(c.window(), 128u);
    EXPECT_EQ(c.cuts(), 2u);
}

TEST(CreditController, GrowsBackOneChunkPerWindowToTheFullCredit)
{
    CreditController c(loss_only(), 512);
    for (int round = 0; round < 5; round++)
        answer_window(c);
    c.on_loss(1, 2);
    ASSERT_EQ(c.window(), 256u);
    answer_window(c);
    EXPECT_EQ(c.window(), 257u);
    answer_window(c);
    EXPECT_EQ(c.window(), 258u);
    // Congestion over: the full credit again after the remaining windows, and no further.
    unsigned windows = 2;
    while (c.window() < 512 && windows < 1000) {
        answer_window(c);
        windows++;
    }
    EXPECT_EQ(c.window(), 512u);
    EXPECT_EQ(windows, 256u);
    answer_window(c);
    EXPECT_EQ(c.window(), 512u);
}

TEST(CreditController, StaysWithinItsFloorAndCeiling)
{
    CreditController c(loss_only(), 512);
    for (int64_t event = 1; event < 40; event++)
        c.on_loss(event * kMs, event * kMs);
    EXPECT_EQ(c.window(), 4u);
    c.set_maximum(2);  // a ceiling below the floor wins
    EXPECT_EQ(c.window(), 2u);
    for (int round = 0; round < 20; round++)
        answer_window(c);
    EXPECT_EQ(c.window(), 2u);
    c.set_maximum(64);
    for (int round = 0; round < 200; round++)
        answer_window(c);
    EXPECT_EQ(c.window(), 64u);
    c.set_maximum(16);  // the tuner lowered the window
    EXPECT_EQ(c.window(), 16u);
}

CongestionParams with_delay()
{
    CongestionParams p = loss_only();
    p.delay_target_ns = kMs;
    p.delay_beta = 0.8;
    return p;
}

// A window of answers (as many as the credit when it begins: what the controller counts)
// whose quickest took `quickest` and the rest longer.
void queued_window(CreditController &c, int64_t quickest)
{
    for (unsigned i = 0, n = c.window(); i < n; i++)
        answer(c, true, quickest + i);
}

// A busy host: the workers were not scheduled for milliseconds at a time, so window after window
// of answers took long, but nothing was lost and nothing marked. The delay signal is not armed:
// no cut, however long the answers took.
TEST(CreditController, DelayAloneNeverCutsOnAPathThatHasNotDropped)
{
    CreditController c(with_delay(), 100);
    for (int round = 0; round < 4; round++)
        answer_window(c, 50'000);
    ASSERT_EQ(c.window(), 100u);
    for (int round = 0; round < 20; round++)
        queued_window(c, 5 * kMs);
    EXPECT_EQ(c.window(), 100u);
    EXPECT_EQ(c.cuts(), 0u);
    EXPECT_FALSE(c.delay_armed(g_now));
}

// A loss with no mark before it arms the delay signal: then a queue that stays two windows is cut.
TEST(CreditController, DelayCutsAfterALossWithoutMarksWhenEvenTheQuickestAnswerQueued)
{
    CreditController c(with_delay(), 200);
    for (int round = 0; round < 5; round++)
        answer_window(c, 50'000);  // the quickest: 50 us
    ASSERT_EQ(c.window(), 200u);
    ASSERT_TRUE(c.on_loss(g_now, g_now + 1));
    g_now += 1;
    EXPECT_TRUE(c.delay_armed(g_now));
    ASSERT_EQ(c.window(), 100u);
    ASSERT_EQ(c.cuts(), 1u);
    // Most answers wait 3 ms for other workers, but one came back in 0.9 ms: no queue.
    for (unsigned i = 0; i < 99; i++)
        answer(c, true, 3 * kMs);
    answer(c, true, 900'000);
    EXPECT_EQ(c.cuts(), 1u);
    // One window whose quickest took 1.1 ms + 50 us: a host that was not scheduled for a while
    // looks the same, so one window alone does not cut.
    queued_window(c, 1'150'000);
    EXPECT_EQ(c.cuts(), 1u);
    const unsigned before = c.window();
    // The next window queued too: a queue that stays. Cut to 0.8 once.
    queued_window(c, 1'150'000);
    EXPECT_EQ(c.cuts(), 2u);
    EXPECT_EQ(c.delay_cuts(), 1u);
    EXPECT_EQ(c.window(), unsigned(before * 0.8));
    // Resent chunks carry no sample: a window of them says nothing about delay, and a queued
    // window after it is again alone.
    for (unsigned i = 0, n = c.window(); i < n; i++)
        answer(c, true, 0);
    queued_window(c, 1'150'000);
    EXPECT_EQ(c.cuts(), 2u);
    queued_window(c, 1'150'000);
    EXPECT_EQ(c.cuts(), 3u);
}

// A loss soon after marks is a marking bottleneck overflowing: ECN stays the signal, delay stays
// unarmed. And an armed delay signal disarms itself after delay_armed_ns.
TEST(CreditController, DelayStaysUnarmedOnAMarkingPathAndDisarmsInTime)
{
    CreditController c(with_delay(), 200);
    answer_window(c, 50'000);
    answer(c, true, 50'000, 0.25);
    ASSERT_TRUE(c.on_loss(g_now + 1, g_now + 2));
    EXPECT_FALSE(c.delay_armed(g_now + 2));

    CreditController d(with_delay(), 200);
    answer_window(d, 50'000);
    ASSERT_TRUE(d.on_loss(g_now, g_now + 1));
    EXPECT_TRUE(d.delay_armed(g_now + 1));
    EXPECT_TRUE(d.delay_armed(g_now + with_delay().delay_armed_ns));
    EXPECT_FALSE(d.delay_armed(g_now + 1 + with_delay().delay_armed_ns));
}

// The base round trip is the quickest of the last one or two periods, not of all time: a path
// that became slower for good (a new route, a farther aggregator) is learnt again rather than
// read as a standing queue for ever.
TEST(CreditController, TheQuickestRoundTripExpires)
{
    CongestionParams p = with_delay();
    p.base_rtt_period_ns = 100 * kMs;
    p.delay_armed_ns = 100'000 * kMs;  // armed throughout
    CreditController c(p, 100);
    answer_window(c, 50'000);
    ASSERT_TRUE(c.on_loss(g_now, g_now + 1));
    const uint64_t cuts = c.cuts();
    // From now on every answer takes 3 ms: read as queueing (cuts) until the 50 us of the old
    // path has expired, then as the path's round trip (no more cuts).
    uint64_t cuts_after_expiry = 0;
    const int64_t expired_at = g_now + 2 * p.base_rtt_period_ns;
    for (int round = 0; round < 400; round++) {
        const uint64_t before = c.cuts();
        const bool expired = g_now > expired_at;
        queued_window(c, 3 * kMs);
        g_now += kMs;
        if (expired)
            cuts_after_expiry += c.cuts() - before;
    }
    EXPECT_GT(c.cuts(), cuts);
    EXPECT_EQ(cuts_after_expiry, 0u);
}

// DCTCP: a mark cuts by alpha/2 (alpha starts at 1: the first mark of a path never marked
// before halves); the marks of chunks sent before that cut are the same congestion event; alpha
// follows the fraction marked window by window, so a path marked lightly is cut lightly.
TEST(CreditController, MarksCutByTheFractionMarkedOncePerEvent)
{
    CreditController fresh(loss_only(), 512);
    answer(fresh, true, 100'000, 0.5);
    EXPECT_EQ(fresh.window(), 8u);

    CreditController c(loss_only(), 512);
    for (int round = 0; round < 5; round++)
        answer_window(c);
    ASSERT_EQ(c.window(), 512u);
    // Five windows unmarked: alpha = (15/16)^5.
    EXPECT_NEAR(c.alpha(), 0.7242, 0.0001);
    answer(c, true, 100'000, 0.5);
    EXPECT_EQ(c.window(), unsigned(512 * (1 - 0.7242 / 2)));
    EXPECT_EQ(c.ecn_cuts(), 1u);
    EXPECT_FALSE(c.slow_start());
    // Marks on chunks sent before the cut: no further cut.
    for (int i = 0; i < 50; i++)
        answer(c, true, 1 * kMs, 1.0);
    EXPECT_EQ(c.ecn_cuts(), 1u);
    // Many windows in which 1 answer in 10 is a quarter marked (F = 0.025): alpha decays towards
    // it, and a mark then keeps nearly all of the credit.
    for (int w = 0; w < 200; w++)
        for (unsigned i = 0, n = c.window(); i < n; i++)
            answer(c, true, 100'000, 0);
    EXPECT_LT(c.alpha(), 0.01);
    const unsigned before = c.window();
    answer(c, true, 100'000, 0.25);
    EXPECT_EQ(c.ecn_cuts(), 2u);
    EXPECT_GE(c.window(), unsigned(before * 0.99));
    EXPECT_LT(c.window(), before);
}

// Two senders through one marking bottleneck, a round trip at a time: above the threshold every
// answer of both is marked (a queue marks every flow in it); nothing is ever lost. They share it
// fairly, without a single loss, and the sum stays near the threshold.
TEST(CreditController, TwoSendersShareAMarkingBottleneckWithoutLoss)
{
    CreditController a(loss_only(), 4096), b(loss_only(), 4096);
    for (int round = 0; round < 4; round++)
        answer_window(a);
    ASSERT_EQ(a.window(), 256u);
    const unsigned threshold = 300;  // chunks per round trip at which the queue marks
    std::vector<double> shares, totals;
    for (int round = 0; round < 3000; round++) {
        const unsigned wa = a.window(), wb = b.window();
        const double marked = wa + wb > threshold ? 1.0 : 0.0;
        answer_window(a, 100'000, marked);
        answer_window(b, 100'000, marked);
        g_now += kMs;
        if (round >= 2000) {
            shares.push_back(double(wa) / (wa + wb));
            totals.push_back(wa + wb);
        }
    }
    double mean = 0;
    for (double s : shares)
        mean += s;
    mean /= double(shares.size());
    EXPECT_NEAR(mean, 0.5, 0.03);
    const auto [lo, hi] = std::minmax_element(totals.begin(), totals.end());
    EXPECT_GT(*lo, 0.5 * threshold);
    EXPECT_LT(*hi, 1.1 * threshold);
}

TEST(CreditController, WithoutATargetDelayIsIgnored)
{
    CreditController c(loss_only(), 64);
    for (int round = 0; round < 10; round++)
        answer_window(c, 500 * kMs);
    EXPECT_EQ(c.window(), 64u);
    EXPECT_EQ(c.cuts(), 0u);
}

TEST(CreditController, NoJobGetsADelayTargetUnlessItAsks)
{
    EXPECT_EQ(default_delay_target(XAGG_JUMBO_CHUNK_ELEMS), std::chrono::microseconds(0));
    EXPECT_EQ(default_delay_target(XAGG_CHUNK_ELEMS), std::chrono::microseconds(0));
}

// Two senders through one bottleneck, a round trip at a time: each sends its credit; when the
// sum exceeds what the link and its queue hold, both lose (a drop-tail queue drops from every
// flow in it) and both cut. AIMD's fixed point is the fair share, whatever the start.
TEST(CreditController, TwoSendersConvergeToAFairShareOfABottleneck)
{
    CreditController a(loss_only(), 4096), b(loss_only(), 4096);
    for (int round = 0; round < 4; round++)  // a starts alone and takes a large credit
        answer_window(a);
    ASSERT_EQ(a.window(), 256u);
    const unsigned capacity = 300;  // chunks per round trip, queue included
    int64_t now = 0;
    std::vector<double> shares;
    for (int round = 0; round < 3000; round++) {
        now += kMs;
        const unsigned wa = a.window(), wb = b.window();
        if (wa + wb > capacity) {
            a.on_loss(now - 1, now);
            b.on_loss(now - 1, now);
        } else {
            answer_window(a);
            answer_window(b);
        }
        if (round >= 2000)
            shares.push_back(double(wa) / (wa + wb));
    }
    double mean = 0;
    for (double s : shares)
        mean += s;
    mean /= double(shares.size());
    EXPECT_NEAR(mean, 0.5, 0.02);
    const auto [lo, hi] = std::minmax_element(shares.begin(), shares.end());
    EXPECT_GT(*lo, 0.45);
    EXPECT_LT(*hi, 0.55);
}

}  // namespace
}  // namespace xagg::client
