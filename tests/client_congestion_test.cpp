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

// Answers a whole window of chunks, each at its first transmission after `rtt_ns`.
void answer_window(CreditController &c, int64_t rtt_ns = 100'000)
{
    const unsigned w = c.window();
    for (unsigned i = 0; i < w; i++)
        c.on_answer(true, rtt_ns);
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
        c.on_answer(false, 100'000);
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

TEST(CreditController, DelayCutsWhenEvenTheQuickestAnswerQueued)
{
    CongestionParams p = loss_only();
    p.delay_target_ns = kMs;
    p.delay_beta = 0.8;
    CreditController c(p, 100);
    for (int round = 0; round < 4; round++)
        answer_window(c, 50'000);  // the quickest ever: 50 us
    ASSERT_EQ(c.window(), 100u);
    // Most answers wait 3 ms for other workers, but one came back in 0.9 ms: no queue.
    for (unsigned i = 0; i < 99; i++)
        c.on_answer(true, 3 * kMs);
    c.on_answer(true, 900'000);
    EXPECT_EQ(c.window(), 100u);
    EXPECT_EQ(c.cuts(), 0u);
    // A window of answers (as many as the credit when it begins: what the controller counts)
    // whose quickest took 1.1 ms + 50 us.
    const auto queued_window = [&c] {
        for (unsigned i = 0, n = c.window(); i < n; i++)
            c.on_answer(true, 1'100'000 + 50'000 + i);
    };
    // One such window: a host that was not scheduled for a while looks the same, so one window
    // alone does not cut.
    queued_window();
    EXPECT_EQ(c.window(), 100u);
    EXPECT_EQ(c.cuts(), 0u);
    // The next window queued too: a queue that stays. Cut to 0.8 once.
    queued_window();
    EXPECT_EQ(c.window(), 80u);
    EXPECT_EQ(c.cuts(), 1u);
    // Resent chunks carry no sample: a window of them says nothing about delay, and a queued
    // window after it is again alone.
    for (unsigned i = 0, n = c.window(); i < n; i++)
        c.on_answer(true, 0);
    queued_window();
    EXPECT_EQ(c.cuts(), 1u);
    // Still queued a window later: cut again.
    queued_window();
    EXPECT_EQ(c.cuts(), 2u);
    EXPECT_EQ(c.window(), 65u);  // 0.8 of 82: the two windows not cut grew it by one each
}

TEST(CreditController, WithoutATargetDelayIsIgnored)
{
    CreditController c(loss_only(), 64);
    for (int round = 0; round < 10; round++)
        answer_window(c, 500 * kMs);
    EXPECT_EQ(c.window(), 64u);
    EXPECT_EQ(c.cuts(), 0u);
}

TEST(CreditController, JumboChunkJobsGetADelayTargetAndStandardOnesLossAlone)
{
    EXPECT_EQ(default_delay_target(XAGG_JUMBO_CHUNK_ELEMS), std::chrono::microseconds(1000));
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
