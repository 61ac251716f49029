// SPDX-License-Identifier: MIT
// Float gradients to the wire's int32 and back, with a block exponent every worker agrees on
// before it sends a value, so that the integer sum of all workers cannot overflow.
//
// A block is one chunk: 768 values (XAGG_CHUNK_ELEMS), or 2048 in a job of jumbo chunks.
// Agreement costs one extra all-reduce of small integers through the aggregator itself, because
// the aggregator only sums:
//
//  1. Each worker takes its block's largest finite magnitude m and e = its frexp exponent
//     (m < 2^e; e in [-148, 128] for floats). It encodes level L = e + 148 as the single bit
//     2^(L mod 24) in group L / 24 of 12 int32 groups (kExponentGroups); a block with a NaN or
//     an infinity also sets bit 23 of the last group, which no level uses.
//  2. The groups of 64 blocks fill one "exponent chunk" (all 768 of its values; 170 blocks and
//     2040 of 2048 values with jumbo chunks), all-reduced like any other chunk. In the sum, the
//     highest non-zero group g holds the largest worker's level: s = sum of 2^b over the workers
//     there, so 2^bmax <= s <= W * 2^bmax and E = 24 g + floor(log2 s) - 148 satisfies emax <= E <=
//     emax + log2(W). Every worker computes the same E from the same sum: that is the agreement.
//  3. Values are sent as q = round(v * 2^-x) with x = E - F and F = 30 - ceil(log2 W) fraction
//     bits: |q| <= 2^F, so the sum of W of them is at most 2^30 and cannot overflow. x goes in
//     the header's exponent field; it is clamped to >= -128 (its 8 bits), which only blocks
//     of values below 2^-98 need.
//
// Error bound (error_bound()): each worker's rounding is at most 2^(x-1), so the integer sum
// is within r = W * 2^(x-1) of the exact sum of the inputs, and the conversion of the result to
// float adds at most half an ulp: |result - exact| <= r + 2^-24 (|exact| + r) + 2^-150. Relative to
// the block's largest input that is about W * 2^-(F+1) * 2^log2(W): 2^-25 for 4 workers.
// A sum beyond the float range becomes +-inf, as a float sum would.
//
// NaN and infinity: such a value is sent as 0, so it cannot spill into other values or blocks;
// every worker learns from the exponent chunk that the block had one, and that block's result
// is NaN for all of them (the whole block: which value it was is not sent). The caller is told
// how many blocks were so marked, the way mixed-precision training skips a step on overflow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "xagg/proto.h"

namespace xagg::client {

inline constexpr int kExponentGroups = XAGG_EXPONENT_GROUPS;
inline constexpr int kLevelsPerGroup = 24;
inline constexpr int kMinFrexpExponent = -148;  // the smallest denormal is 2^-149 = 0.5 * 2^-148
inline constexpr uint32_t kNonFiniteBit = 1u << 23;  // in the last group

// What a worker knows of its own block before agreement.
struct BlockScan {
    bool any = false;        // a finite non-zero value: `exponent` is meaningful
    int exponent = 0;        // frexp exponent of the largest finite magnitude
    bool nonfinite = false;  // a NaN or an infinity
};

// The agreed scale of a block (the same on every worker).
struct BlockScale {
    int8_t exponent = 0;     // the header's exponent: value = int32 * 2^exponent
    bool nonfinite = false;  // some worker's block had a NaN or an infinity
};

// Scans n values (at most a chunk).
BlockScan scan_block(const float *values, size_t n);
// The scan of two blocks taken together (local-first reduction: a host's ranks').
BlockScan combine(const BlockScan &a, const BlockScan &b);
// sum[i] += more[i], wrapping as the aggregator's int32 adds do.
void add_wrapping(int32_t *sum, const int32_t *more, size_t n);
// Adds the block's bits into its kExponentGroups slots of an exponent chunk (zeroed before).
void encode_scan(const BlockScan &scan, int32_t *groups);
// The agreed scale from the summed slots of a job of `workers` workers.
BlockScale decode_scale(const int32_t *summed_groups, unsigned workers);
// F: fraction bits that keep W values of magnitude <= 2^F summable in int32.
int fraction_bits(unsigned workers);

// n <= chunk_elems values into chunk_elems int32 (zero-padded); NaN and infinities become 0.
void quantize(const float *values, size_t n, int8_t exponent, int32_t *out,
              size_t chunk_elems = XAGG_CHUNK_ELEMS);
// The first n summed int32 of a chunk back to floats; a non-finite block gives NaN throughout.
void dequantize(const int32_t *sums, size_t n, const BlockScale &scale, float *out);

// The documented bound on |result - exact sum| of one value whose exact sum is `exact`.
double error_bound(int8_t exponent, unsigned workers, double exact);

// What a job of inputs.size() workers computes for these inputs (every worker gets the same),
// reproduced bit for bit without a network: scan, agree, quantize, wrapping sum, dequantize.
// With the agreed scale of every block, for the error bound. For verification and tests.
struct Expected {
    std::vector<float> values;
    std::vector<BlockScale> scales;  // per block (chunk) of values
};
// `chunk_elems`: the job's chunk size, which is the block size. `local_ranks`: with local-first
// reduction, each run of that many consecutive inputs is one host's, contributed by one member
// (the host's scan is the largest of its ranks'); 1: every input is a member's.
Expected expected_allreduce(const std::vector<std::span<const float>> &inputs,
                            size_t chunk_elems = XAGG_CHUNK_ELEMS, unsigned local_ranks = 1);

}  // namespace xagg::client
