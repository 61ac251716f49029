// SPDX-License-Identifier: MIT
// The quantization kernels of every instruction set this CPU has (client/quantize_kernels.hpp)
// give the scalar kernels' bits, on every input class and at every tail length; and the scalar
// kernels give the values worked out by hand. A variant this CPU cannot run is skipped, named.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "client/quantize_kernels.hpp"

namespace xagg::client {
namespace {

float from_bits(uint32_t b)
{
    return std::bit_cast<float>(b);
}

// Inputs that exercise every branch: ordinary values, signed zeros, denormals, the largest
// finite, infinities, NaNs (quiet and signalling, both signs), exact rounding ties, and values
// beyond the clamp at the scale the test uses.
std::vector<float> mixed_inputs(size_t n, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<uint32_t> any_bits;
    const float specials[] = {0.0f,
                              -0.0f,
                              from_bits(0x00000001),  // smallest denormal
                              from_bits(0x807fffff),  // largest negative denormal
                              std::numeric_limits<float>::max(),
                              -std::numeric_limits<float>::max(),
                              INFINITY,
                              -INFINITY,
                              from_bits(0x7fc00000),  // quiet NaN
                              from_bits(0xff800001),  // signalling NaN, sign set
                              0.5f / 1024,            // ties at scale 2^11: 0.5, 1.5, 2.5, -2.5
                              1.5f / 1024,
                              2.5f / 1024,
                              -2.5f / 1024,
                              1e9f};
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) {
        switch (rng() % 4) {
        case 0: v[i] = specials[rng() % std::size(specials)]; break;
        case 1: v[i] = from_bits(any_bits(rng)); break;  // any pattern at all
        default: v[i] = normal(rng); break;
        }
    }
    return v;
}

class KernelVariantTest : public ::testing::TestWithParam<Isa> {
protected:
    void SetUp() override
    {
        if (!isa_supported(GetParam()))
            GTEST_SKIP() << "this CPU has no " << isa_name(GetParam())
                         << ": that variant is checked only where it can run";
    }
};

// Every length from 0 to 70 (vector tails of every width) and a few chunk sizes.
std::vector<size_t> lengths()
{
    std::vector<size_t> out;
    for (size_t n = 0; n <= 70; n++)
        out.push_back(n);
    for (size_t n : {255, 256, 257, 767, 768, 2047, 2048})
        out.push_back(n);
    return out;
}

TEST_P(KernelVariantTest, LargestFiniteBitsMatchScalar)
{
    const QuantizeKernels &ref = kernels_for(Isa::scalar), &k = kernels_for(GetParam());
    for (size_t n : lengths())
        for (uint32_t seed = 0; seed < 8; seed++) {
            auto v = mixed_inputs(n, seed * 1000 + static_cast<uint32_t>(n));
            int32_t any_ref = -1, any = -2;
            EXPECT_EQ(k.largest_finite_bits(v.data(), n, &any),
                      ref.largest_finite_bits(v.data(), n, &any_ref))
                << "n=" << n << " seed=" << seed;
            EXPECT_EQ(any, any_ref) << "n=" << n << " seed=" << seed;
        }
}

TEST_P(KernelVariantTest, QuantizeMatchesScalarBitForBit)
{
    const QuantizeKernels &ref = kernels_for(Isa::scalar), &k = kernels_for(GetParam());
    for (size_t n : lengths())
        for (int exponent : {-140, -11, 0, 5, 120}) {
            auto v = mixed_inputs(n, static_cast<uint32_t>(n * 7 + exponent + 200));
            // One past the end stays untouched: the kernels write exactly n values.
            std::vector<int32_t> want(n + 1, 0x5a5a5a5a), got(n + 1, 0x5a5a5a5a);
            const double scale = std::ldexp(1.0, -exponent);
            ref.quantize(v.data(), n, scale, want.data());
            k.quantize(v.data(), n, scale, got.data());
            ASSERT_EQ(got, want) << "n=" << n << " exponent=" << exponent;
        }
}

TEST_P(KernelVariantTest, DequantizeMatchesScalarBitForBit)
{
    const QuantizeKernels &ref = kernels_for(Isa::scalar), &k = kernels_for(GetParam());
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> any_int(std::numeric_limits<int32_t>::min(),
                                                   std::numeric_limits<int32_t>::max());
    for (size_t n : lengths())
        for (int exponent : {-128, -30, 0, 90, 127}) {
            std::vector<int32_t> sums(n);
            for (auto &s : sums)
                s = any_int(rng);
            std::vector<float> want(n + 1, 42.0f), got(n + 1, 42.0f);
            const double unit = std::ldexp(1.0, exponent);
            ref.dequantize(sums.data(), n, unit, want.data());
            k.dequantize(sums.data(), n, unit, got.data());
            for (size_t i = 0; i <= n; i++)
                ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
                    << "n=" << n << " exponent=" << exponent << " at " << i;
        }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, KernelVariantTest,
                         ::testing::Values(Isa::sse2, Isa::avx2, Isa::avx512),
                         [](const ::testing::TestParamInfo<Isa> &p) {
                             return std::string(isa_name(p.param));
                         });

// The reference itself, on values worked out by hand.
TEST(ScalarKernels, RoundToNearestEvenClampAndNonFinite)
{
    const QuantizeKernels &k = kernels_for(Isa::scalar);
    const float in[] = {0.5f,  1.5f,   2.5f, -2.5f,     -0.5f, 3.25f,
                        1e12f, -1e12f, NAN,  -INFINITY, -0.0f};
    const int32_t want[] = {0, 2, 2, -2, 0, 3, 1 << 30, -(1 << 30), 0, 0, 0};
    int32_t got[std::size(in)];
    k.quantize(in, std::size(in), 1.0, got);
    for (size_t i = 0; i < std::size(in); i++)
        EXPECT_EQ(got[i], want[i]) << "input " << in[i];

    // Scale 2^-x with x = -3: 0.375 * 8 = 3.
    const float eighth[] = {0.375f};
    k.quantize(eighth, 1, 8.0, got);
    EXPECT_EQ(got[0], 3);
}

TEST(ScalarKernels, LargestFiniteBitsIgnoresNonFiniteButReportsIt)
{
    const QuantizeKernels &k = kernels_for(Isa::scalar);
    const float in[] = {-3.0f, 2.0f, INFINITY, NAN};
    int32_t any = 0;
    EXPECT_EQ(k.largest_finite_bits(in, 2, &any), std::bit_cast<int32_t>(3.0f));
    EXPECT_EQ(any, std::bit_cast<int32_t>(3.0f));
    EXPECT_EQ(k.largest_finite_bits(in, 4, &any), std::bit_cast<int32_t>(3.0f));
    EXPECT_GE(any, 0x7f800000);
    EXPECT_EQ(k.largest_finite_bits(in, 0, &any), 0);
    EXPECT_EQ(any, 0);
}

TEST(ScalarKernels, DequantizeIsExactWherePossible)
{
    const QuantizeKernels &k = kernels_for(Isa::scalar);
    const int32_t sums[] = {3, -5, 1 << 24, (1 << 24) + 1};
    float out[4];
    k.dequantize(sums, 4, 0.25, out);
    EXPECT_EQ(out[0], 0.75f);
    EXPECT_EQ(out[1], -1.25f);
    EXPECT_EQ(out[2], 4194304.0f);
    EXPECT_EQ(out[3], 4194304.0f);  // 2^22 + 0.25: a tie between 2^22 and 2^22 + 0.5, to even
}

TEST(Isa, NamesRoundTripAndUnknownIsRefused)
{
    for (Isa isa : {Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512})
        EXPECT_EQ(isa_named(isa_name(isa)), isa);
    EXPECT_FALSE(isa_named("avx1024").has_value());
    EXPECT_TRUE(isa_supported(Isa::scalar));
}

}  // namespace
}  // namespace xagg::client
