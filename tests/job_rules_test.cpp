// SPDX-License-Identifier: MIT
// The job rules (include/xagg/job_rules.hpp) on cases worked out by hand: what a job may be,
// and the arithmetic every parser, the job table, the cluster agent and `xaggctl job size` use.
#include "xagg/job_rules.hpp"

#include <gtest/gtest.h>

namespace xagg {
namespace {

TEST(JobRules, BoundsAreTheProtocolsAndTheChunkSizesTwo)
{
    EXPECT_TRUE(job_rules::valid_chunk_elems(768));
    EXPECT_TRUE(job_rules::valid_chunk_elems(2048));
    for (uint64_t bad : {0ull, 767ull, 1024ull, 2049ull, (1ull << 32) + 768})
        EXPECT_FALSE(job_rules::valid_chunk_elems(bad)) << bad;
    EXPECT_EQ(job_rules::chunk_elems_choices(), "768 or 2048");
    EXPECT_EQ(job_rules::chunk_elems_choices("nor"), "768 nor 2048");
    EXPECT_FALSE(job_rules::valid_workers(0));
    EXPECT_TRUE(job_rules::valid_workers(1));
    EXPECT_TRUE(job_rules::valid_workers(64));
    EXPECT_FALSE(job_rules::valid_workers(65));
    EXPECT_FALSE(job_rules::valid_job_id(0));
    EXPECT_TRUE(job_rules::valid_job_id(65535));
    EXPECT_FALSE(job_rules::valid_job_id(65536));
}

// A 16 MiB float32 tensor (4194304 values), as the demo all-reduces it. In 768-value chunks:
// 5462 blocks (4194304 = 5461 * 768 + 256: the last holds 256 values), one exponent chunk per
// 64 blocks: 86, so 5548 chunks and as many slot positions. In 2048-value chunks: 2048 blocks,
// one exponent chunk per 170: 13, so 2061 chunks of three positions each: 6183.
TEST(JobRules, ChunksAndPositionsOfATensor)
{
    EXPECT_EQ(job_rules::blocks(4194304, 768), 5462u);
    EXPECT_EQ(job_rules::float_wire_chunks(4194304, 768), 5548u);
    EXPECT_EQ(job_rules::positions(5548 * 768, 768), 5548u);
    EXPECT_EQ(job_rules::blocks(4194304, 2048), 2048u);
    EXPECT_EQ(job_rules::float_wire_chunks(4194304, 2048), 2061u);
    EXPECT_EQ(job_rules::positions_per_chunk(2048), 3u);
    EXPECT_EQ(job_rules::positions(2061 * 2048, 2048), 6183u);
    // One value more is one block more; an exact multiple is not.
    EXPECT_EQ(job_rules::blocks(768, 768), 1u);
    EXPECT_EQ(job_rules::blocks(769, 768), 2u);
    EXPECT_EQ(job_rules::float_wire_chunks(64 * 768, 768), 65u);
    EXPECT_EQ(job_rules::float_wire_chunks(65 * 768, 768), 67u);
}

}  // namespace
}  // namespace xagg
