// SPDX-License-Identifier: MIT
// Block-exponent quantization, end to end for W workers with the aggregator's wrapping int32
// sum in the middle: every result within the documented bound of the float64 reference, on
// random, skewed, tiny, huge, zero and denormal inputs; NaN and infinity reported and confined to
// their block.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "client/quantize.hpp"

namespace xagg::client {
namespace {

constexpr size_t kBlock = XAGG_CHUNK_ELEMS;

// What W clients and the aggregator compute.
Expected all_reduce(const std::vector<std::vector<float>> &inputs)
{
    std::vector<std::span<const float>> views(inputs.begin(), inputs.end());
    return expected_allreduce(views);
}

// Checks every finite value against the float64 sum and the bound; returns the worst error
// relative to its bound. `block`: the job's chunk size, the block of one exponent.
double check_bound(const std::vector<std::vector<float>> &inputs, const Expected &o,
                   size_t block = kBlock)
{
    double worst = 0;
    for (size_t i = 0; i < o.values.size(); i++) {
        double exact = 0;
        for (const auto &in : inputs)
            exact += in[i];
        const BlockScale &s = o.scales[i / block];
        if (std::fabs(exact) > std::numeric_limits<float>::max()) {
            EXPECT_EQ(o.values[i], std::copysign(INFINITY, exact)) << "value " << i;
            continue;
        }
        double bound = error_bound(s.exponent, static_cast<unsigned>(inputs.size()), exact);
        double err = std::fabs(double{o.values[i]} - exact);
        EXPECT_LE(err, bound) << "value " << i << ": got " << o.values[i] << ", exact " << exact;
        worst = std::max(worst, err / bound);
    }
    return worst;
}

using Gen = std::function<float(std::mt19937 &, unsigned worker, size_t i)>;

std::vector<std::vector<float>> make(unsigned workers, size_t n, const Gen &gen)
{
    std::mt19937 rng(1234);
    std::vector<std::vector<float>> in(workers, std::vector<float>(n));
    for (unsigned w = 0; w < workers; w++)
        for (size_t i = 0; i < n; i++)
            in[w][i] = gen(rng, w, i);
    return in;
}

struct Case {
    const char *name;
    Gen gen;
};

class BoundTest : public ::testing::TestWithParam<std::tuple<Case, unsigned>> {};

TEST_P(BoundTest, EveryValueIsWithinTheDocumentedBound)
{
    auto [c, workers] = GetParam();
    auto inputs = make(workers, 10 * kBlock + 17, c.gen);  // a ragged last block too
    Expected o = all_reduce(inputs);
    for (const auto &s : o.scales)
        EXPECT_FALSE(s.nonfinite);
    check_bound(inputs, o);
}

const Case kCases[] = {
    {"uniform", [](std::mt19937 &r, unsigned,
                   size_t) { return std::uniform_real_distribution<float>(-1, 1)(r); }},
    {"gaussian_gradients", [](std::mt19937 &r, unsigned,
                              size_t) { return std::normal_distribution<float>(0, 1e-3f)(r); }},
    // Magnitudes from 1e-30 to 1e30 side by side in one block, differing per worker.
    {"skewed",
     [](std::mt19937 &r, unsigned, size_t) {
         float e = std::uniform_real_distribution<float>(-30, 30)(r);
         return std::pow(10.0f, e) * (r() % 2 ? 1.0f : -1.0f);
     }},
    // One worker's block dominates the others by 2^40.
    {"one_loud_worker",
     [](std::mt19937 &r, unsigned w, size_t) {
         float v = std::uniform_real_distribution<float>(-1, 1)(r);
         return w == 0 ? std::ldexp(v, 40) : v;
     }},
    {"tiny", [](std::mt19937 &r, unsigned,
                size_t) { return std::uniform_real_distribution<float>(-1e-36f, 1e-36f)(r); }},
    {"denormal",
     [](std::mt19937 &r, unsigned, size_t) {
         return std::numeric_limits<float>::denorm_min() * static_cast<float>(r() % 1000) *
                (r() % 2 ? 1.0f : -1.0f);
     }},
    {"huge",
     [](std::mt19937 &r, unsigned, size_t) {
         // (in double: the width of a float range this wide is itself beyond float)
         return static_cast<float>(std::uniform_real_distribution<double>(-3e38, 3e38)(r));
     }},
    {"zero", [](std::mt19937 &, unsigned, size_t) { return 0.0f; }},
    {"integers_exact",
     [](std::mt19937 &r, unsigned, size_t) {
         return static_cast<float>(static_cast<int>(r() % 2001) - 1000);
     }},
};

INSTANTIATE_TEST_SUITE_P(Inputs, BoundTest,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(1u, 2u, 4u, 7u, 64u)),
                         [](const auto &param_info) {
                             return std::string(std::get<0>(param_info.param).name) + "_" +
                                    std::to_string(std::get<1>(param_info.param)) + "workers";
                         });

// Local-first reduction: each host's ranks are one member (its scan the largest of its ranks'),
// every rank's values quantized with the agreed scale and summed in integers. The same bound
// holds with W = every rank, on every kind of input above.
struct HostShape {
    unsigned ranks, local_ranks;
};
const HostShape kHostShapes[] = {{8, 4}, {6, 3}, {64, 8}};

class LocalFirstBoundTest : public ::testing::TestWithParam<std::tuple<Case, HostShape>> {};

TEST_P(LocalFirstBoundTest, EveryValueIsWithinTheBoundOfAllRanks)
{
    const auto &[c, shape] = GetParam();
    auto inputs = make(shape.ranks, 10 * kBlock + 17, c.gen);
    std::vector<std::span<const float>> views(inputs.begin(), inputs.end());
    Expected o = expected_allreduce(views, kBlock, shape.local_ranks);
    for (const auto &s : o.scales)
        EXPECT_FALSE(s.nonfinite);
    check_bound(inputs, o);
}

std::string host_shape_name(const ::testing::TestParamInfo<std::tuple<Case, HostShape>> &info)
{
    const HostShape &shape = std::get<1>(info.param);
    return std::string(std::get<0>(info.param).name) + "_" + std::to_string(shape.ranks) +
           "ranks_" + std::to_string(shape.local_ranks) + "_a_host";
}

INSTANTIATE_TEST_SUITE_P(Inputs, LocalFirstBoundTest,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::ValuesIn(kHostShapes)),
                         host_shape_name);

TEST(QuantizeTest, AHostsScanIsTheLargestOfItsRanks)
{
    const BlockScan none, small{true, -3, false}, large{true, 5, false}, bad{false, 0, true};
    EXPECT_EQ(combine(small, large).exponent, 5);
    EXPECT_EQ(combine(large, small).exponent, 5);
    EXPECT_TRUE(combine(none, small).any);
    EXPECT_EQ(combine(none, small).exponent, -3);
    EXPECT_FALSE(combine(none, none).any);
    EXPECT_TRUE(combine(small, bad).nonfinite);
    EXPECT_EQ(combine(small, bad).exponent, -3);
}

TEST(QuantizeTest, ZeroAndSmallIntegersAreExact)
{
    auto inputs = make(4, kBlock, [](std::mt19937 &r, unsigned, size_t i) {
        return i < 128 ? 0.0f : static_cast<float>(static_cast<int>(r() % 201) - 100);
    });
    Expected o = all_reduce(inputs);
    for (size_t i = 0; i < kBlock; i++) {
        double exact = 0;
        for (const auto &in : inputs)
            exact += in[i];
        EXPECT_EQ(double{o.values[i]}, exact) << i;
    }
}

TEST(QuantizeTest, TheAgreedExponentIsTheLargestWorkersWithinLog2W)
{
    // Worker maxima 2^-3 .. 2^10 (frexp exponents -2 .. 11): E is 11 plus at most log2(W).
    for (unsigned workers : {1u, 3u, 14u, 64u}) {
        int32_t groups[kExponentGroups] = {};
        for (unsigned w = 0; w < workers; w++) {
            float v = std::ldexp(1.0f, -3 + static_cast<int>(w % 14));
            encode_scan(scan_block(&v, 1), groups);
        }
        int emax = 0;
        std::frexp(std::ldexp(1.0f, -3 + static_cast<int>(std::min(workers, 14u) - 1)), &emax);
        BlockScale s = decode_scale(groups, workers);
        int e = s.exponent + fraction_bits(workers);
        EXPECT_GE(e, emax) << workers;
        EXPECT_LE(e, emax + static_cast<int>(std::log2(workers))) << workers;
    }
}

TEST(QuantizeTest, NanAndInfinityAreReportedAndStayInTheirBlock)
{
    auto inputs = make(4, 3 * kBlock, [](std::mt19937 &r, unsigned, size_t) {
        return std::uniform_real_distribution<float>(-1, 1)(r);
    });
    inputs[2][kBlock + 5] = std::numeric_limits<float>::quiet_NaN();  // block 1
    inputs[3][kBlock + 9] = INFINITY;                                 // block 1 too
    inputs[0][2 * kBlock] = -INFINITY;                                // block 2
    Expected o = all_reduce(inputs);
    EXPECT_FALSE(o.scales[0].nonfinite);
    EXPECT_TRUE(o.scales[1].nonfinite);
    EXPECT_TRUE(o.scales[2].nonfinite);
    for (size_t i = kBlock; i < 3 * kBlock; i++)
        EXPECT_TRUE(std::isnan(o.values[i])) << i;
    // Block 0 is untouched: within the bound of its own exact sums.
    std::vector<std::vector<float>> first;
    for (const auto &in : inputs)
        first.emplace_back(in.begin(), in.begin() + kBlock);
    Expected clean{std::vector<float>(o.values.begin(), o.values.begin() + kBlock), {o.scales[0]}};
    check_bound(first, clean);
    // The flag counts up to 64 workers without touching the levels beside it.
    int32_t groups[kExponentGroups] = {};
    float v = std::ldexp(1.0f, 127), nan = NAN;
    for (int w = 0; w < 64; w++) {
        encode_scan(scan_block(&v, 1), groups);
        encode_scan(scan_block(&nan, 1), groups);
    }
    BlockScale s = decode_scale(groups, 64);
    EXPECT_TRUE(s.nonfinite);
    EXPECT_EQ(s.exponent + fraction_bits(64), 128 + 6);
}

TEST(QuantizeTest, FractionBitsLeaveRoomForEveryWorker)
{
    EXPECT_EQ(fraction_bits(1), 30);
    EXPECT_EQ(fraction_bits(2), 29);
    EXPECT_EQ(fraction_bits(3), 28);
    EXPECT_EQ(fraction_bits(4), 28);
    EXPECT_EQ(fraction_bits(64), 24);
}

// Jumbo chunks: blocks of 2048 values, one exponent each, under the same bound; values of very
// different magnitudes inside one block cost the small ones precision, never correctness.
TEST(JumboBlockTest, EveryValueIsWithinTheBoundWithBlocksOf2048)
{
    constexpr size_t kJumbo = XAGG_JUMBO_CHUNK_ELEMS;
    auto inputs = make(4, 3 * kJumbo + 5, [](std::mt19937 &r, unsigned, size_t i) {
        std::uniform_real_distribution<float> u(-1, 1);
        return std::ldexp(u(r), static_cast<int>(i % 997) % 40 - 20);
    });
    std::vector<std::span<const float>> views(inputs.begin(), inputs.end());
    Expected o = expected_allreduce(views, kJumbo);
    ASSERT_EQ(o.scales.size(), 4u);  // ceil((3 * 2048 + 5) / 2048)
    check_bound(inputs, o, kJumbo);
}

}  // namespace
}  // namespace xagg::client
