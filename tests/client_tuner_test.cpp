// SPDX-License-Identifier: MIT
// The tuner (client/tuner.hpp) on synthetic cost surfaces: it must find the best setting within
// its trial budget, without being fooled by noise below its threshold.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>

#include "client/tuner.hpp"

namespace xagg::client {
namespace {

// A bowl in log2 space with its bottom at `best` (lowest cost 1.0).
std::function<double(TuneSetting)> bowl(TuneSetting best, double noise = 0)
{
    return [=](TuneSetting s) {
        double dw = std::log2(double(s.window)) - std::log2(double(best.window));
        double dp =
            std::log2(double(s.partition_chunks)) - std::log2(double(best.partition_chunks));
        // Deterministic noise in [-noise, noise], different per setting.
        double jitter = noise * std::sin(double(s.window) * 12.9898 + s.partition_chunks * 78.233);
        return (1 + 0.08 * dw * dw + 0.05 * dp * dp) * (1 + jitter);
    };
}

TuneSetting run(Tuner &t, const std::function<double(TuneSetting)> &cost)
{
    while (!t.done())
        t.record(cost(t.current()));
    return t.current();
}

TEST(TunerTest, FindsTheBottomOfABowlWithinItsBudget)
{
    const TuneSpace space;  // 16 trials, windows 32-4096, partitions 4-256
    for (TuneSetting best : {TuneSetting{256, 64}, TuneSetting{4096, 4}, TuneSetting{32, 256},
                             TuneSetting{512, 32}, TuneSetting{2048, 8}}) {
        Tuner t(space, {512, 32});
        EXPECT_EQ(run(t, bowl(best)), best) << best.window << "/" << best.partition_chunks;
        EXPECT_LE(t.trials(), space.trials);
        EXPECT_EQ(t.best().first, best);
        EXPECT_DOUBLE_EQ(t.best().second, 1.0);
    }
}

TEST(TunerTest, NoiseBelowTheThresholdDoesNotLeadItAstray)
{
    TuneSpace space;
    Tuner t(space, {512, 32});
    // 1% noise, 3% threshold: still the bottom at (1024, 16).
    EXPECT_EQ(run(t, bowl({1024, 16}, 0.01)), (TuneSetting{1024, 16}));
}

TEST(TunerTest, AFlatSurfaceKeepsTheStartingSettingAfterMeasuringItsNeighbours)
{
    Tuner t(TuneSpace{}, {512, 32});
    EXPECT_EQ(run(t, [](TuneSetting) { return 1.0; }), (TuneSetting{512, 32}));
    EXPECT_EQ(t.trials(), 5u);  // the start and its four neighbours
}

TEST(TunerTest, TheBudgetIsARealLimit)
{
    TuneSpace space;
    space.trials = 4;
    Tuner t(space, {32, 4});
    TuneSetting chosen = run(t, bowl({4096, 256}));
    EXPECT_EQ(t.trials(), 4u);
    EXPECT_EQ(chosen, t.best().first);  // the best of what it measured
    EXPECT_NE(chosen, (TuneSetting{32, 4}));
}

TEST(TunerTest, TheStartIsPutOnTheGridInsideTheBox)
{
    Tuner t(TuneSpace{}, {100000, 3});
    EXPECT_EQ(t.current(), (TuneSetting{4096, 4}));
    Tuner u(TuneSpace{}, {600, 40});
    EXPECT_EQ(u.current(), (TuneSetting{512, 32}));
}

TEST(TunerTest, SameMeasurementsSameChoices)
{
    // What makes every worker switch alike: the tuner is a pure function of what it is told.
    Tuner a(TuneSpace{}, {512, 32}), b(TuneSpace{}, {512, 32});
    auto cost = bowl({128, 128}, 0.02);
    while (!a.done()) {
        ASSERT_EQ(a.current(), b.current());
        double c = cost(a.current());
        a.record(c);
        b.record(c);
    }
    EXPECT_EQ(a.current(), b.current());
}

}  // namespace
}  // namespace xagg::client
