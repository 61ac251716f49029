// SPDX-License-Identifier: MIT
// Deterministic synthetic gradients: every worker (and every test) can compute any rank's
// contribution, hence the exact expected sum, without exchanging data.
#pragma once

#include <cstdint>

#include "xagg/proto.h"
#include "xagg/wire.hpp"

namespace xagg::synthetic {

// SplitMix64 finaliser: a well-mixed hash of the element's coordinates.
inline uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Value of element i of `chunk` in `round` for `rank`, bounded so that the sum over `workers`
// ranks cannot overflow int32 (as a real quantizer guarantees).
inline int32_t value(uint64_t seed, uint32_t rank, uint32_t round, uint32_t chunk, uint32_t i,
                     uint32_t workers)
{
    uint64_t h = mix(seed ^ mix((uint64_t{rank} << 48) ^ (uint64_t{round} << 24) ^ chunk) ^
                     (uint64_t{i} << 32));
    int64_t bound = INT32_MAX / (workers ? workers : 1);
    return static_cast<int32_t>(static_cast<int64_t>(h % static_cast<uint64_t>(2 * bound + 1)) -
                                bound);
}

inline int32_t expected_sum(uint64_t seed, uint32_t workers, uint32_t round, uint32_t chunk,
                            uint32_t i)
{
    int32_t s = 0;
    for (uint32_t r = 0; r < workers; r++)
        s = wire::wrapping_add(s, value(seed, r, round, chunk, i, workers));
    return s;
}

// Order-independent digest of a set of (round, chunk, values) results: the wrapping sum of each
// result's FNV-1a hash. Equal digests on every worker mean they all received the same sums.
inline uint64_t result_hash(uint32_t round, uint32_t chunk, const int32_t *values, uint32_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    auto feed = [&h](uint32_t w) {
        for (int b = 0; b < 4; b++) {
            h ^= (w >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    };
    feed(round);
    feed(chunk);
    for (uint32_t i = 0; i < n; i++)
        feed(static_cast<uint32_t>(values[i]));
    return h;
}

}  // namespace xagg::synthetic
