// SPDX-License-Identifier: MIT
#include "client/quantize.hpp"

#include "client/quantize_kernels.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace xagg::client {

BlockScan scan_block(const float *values, size_t n)
{
    constexpr int32_t kInfinity = 0x7f800000;
    int32_t any = 0;
    const int32_t largest = kernels().largest_finite_bits(values, n, &any);
    const bool nonfinite = any >= kInfinity;
    BlockScan s;
    s.nonfinite = nonfinite;
    if (largest > 0) {
        s.any = true;
        float m;
        std::memcpy(&m, &largest, sizeof(m));
        std::frexp(m, &s.exponent);
    }
    return s;
}

void encode_scan(const BlockScan &scan, int32_t *groups)
{
    if (scan.any) {
        int level = scan.exponent - kMinFrexpExponent;
        groups[level / kLevelsPerGroup] += int32_t{1} << (level % kLevelsPerGroup);
    }
    if (scan.nonfinite)
        groups[kExponentGroups - 1] += static_cast<int32_t>(kNonFiniteBit);
}

int fraction_bits(unsigned workers)
{
    return 30 - static_cast<int>(std::bit_width(std::max(workers, 1u) - 1));  // 30 - ceil(log2 W)
}

BlockScale decode_scale(const int32_t *summed, unsigned workers)
{
    BlockScale scale;
    auto last = static_cast<uint32_t>(summed[kExponentGroups - 1]);
    // Bit 23 and up of the last group count the workers that saw a NaN or an infinity; no level
    // of that group reaches bit 23, even summed over 64 workers.
    scale.nonfinite = last >= kNonFiniteBit;
    for (int g = kExponentGroups - 1; g >= 0; g--) {
        auto s = static_cast<uint32_t>(summed[g]);
        if (g == kExponentGroups - 1)
            s &= kNonFiniteBit - 1;
        if (s == 0)
            continue;
        int e = g * kLevelsPerGroup + static_cast<int>(std::bit_width(s)) - 1 + kMinFrexpExponent;
        int x = e - fraction_bits(workers);
        scale.exponent = static_cast<int8_t>(std::clamp(x, -128, 127));
        return scale;
    }
    return scale;  // every value zero (or non-finite): any exponent is exact; 0
}

void quantize(const float *values, size_t n, int8_t exponent, int32_t *out, size_t chunk_elems)
{
    // |q| <= 2^30 when the values are those the exponent was agreed for; the kernel's clamp
    // keeps a buffer changed in the meantime from overflowing the conversion (its sum is then
    // wrong, but nobody else's). The loop is client/quantize_kernels.cpp's.
    kernels().quantize(values, n, std::ldexp(1.0, -exponent), out);
    std::fill(out + n, out + chunk_elems, 0);
}

void dequantize(const int32_t *sums, size_t n, const BlockScale &scale, float *out)
{
    if (scale.nonfinite) {
        std::fill(out, out + n, std::numeric_limits<float>::quiet_NaN());
        return;
    }
    kernels().dequantize(sums, n, std::ldexp(1.0, scale.exponent), out);
}

double error_bound(int8_t exponent, unsigned workers, double exact)
{
    // The integer sum's rounding, then the float conversion's half ulp of what it converts
    // (normal range: 2^-24 relative; below it, 2^-150 absolute).
    double rounding = workers * std::ldexp(1.0, exponent - 1);
    return rounding + std::ldexp(std::fabs(exact) + rounding, -24) + std::ldexp(1.0, -150);
}

BlockScan combine(const BlockScan &a, const BlockScan &b)
{
    BlockScan c;
    c.any = a.any || b.any;
    c.exponent = !a.any ? b.exponent : !b.any ? a.exponent : std::max(a.exponent, b.exponent);
    c.nonfinite = a.nonfinite || b.nonfinite;
    return c;
}

void add_wrapping(int32_t *sum, const int32_t *more, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sum[i] =
            static_cast<int32_t>(static_cast<uint32_t>(sum[i]) + static_cast<uint32_t>(more[i]));
}

Expected expected_allreduce(const std::vector<std::span<const float>> &inputs, size_t chunk_elems,
                            unsigned local_ranks)
{
    const size_t block = chunk_elems;
    const auto workers = static_cast<unsigned>(inputs.size());
    const size_t n = inputs.empty() ? 0 : inputs[0].size(), blocks = (n + block - 1) / block;
    Expected out{std::vector<float>(n), std::vector<BlockScale>(blocks)};
    for (size_t b = 0; b < blocks; b++) {
        const size_t at = b * block, len = std::min(block, n - at);
        int32_t groups[kExponentGroups] = {};
        for (size_t host = 0; host < inputs.size(); host += local_ranks) {
            // A member's scan: its host's largest, with local-first reduction.
            BlockScan scan;
            for (size_t i = host; i < std::min(inputs.size(), host + local_ranks); i++)
                scan = combine(scan, scan_block(inputs[i].data() + at, len));
            int32_t mine[kExponentGroups] = {};
            encode_scan(scan, mine);
            add_wrapping(groups, mine, kExponentGroups);  // the aggregator's add
        }
        BlockScale scale = decode_scale(groups, workers);
        int32_t sum[XAGG_MAX_CHUNK_ELEMS] = {}, q[XAGG_MAX_CHUNK_ELEMS];
        for (const auto &in : inputs) {
            quantize(in.data() + at, len, scale.exponent, q, block);
            add_wrapping(sum, q, block);
        }
        dequantize(sum, len, scale, out.values.data() + at);
        out.scales[b] = scale;
    }
    return out;
}

}  // namespace xagg::client
