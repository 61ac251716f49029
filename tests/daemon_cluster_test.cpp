// SPDX-License-Identifier: MIT
// The cluster agent's pure decisions (daemon/cluster.hpp): placing, keeping and re-placing a
// job's partitions, each node's share, and the records' parsing.
#include <gtest/gtest.h>

#include <algorithm>

#include "daemon/cluster/cluster_agent.hpp"
#include "xagg/proto.h"

namespace xagg::daemon {
namespace {

ClusterNode node(const std::string &name, uint64_t capacity = 65536)
{
    return {name, "10.0.0.1", 9871, "", "", capacity, 1e6};
}

ClusterJob job(uint32_t id, uint64_t elems, uint64_t partition_chunks, int64_t revision = 5)
{
    ClusterJob j;
    j.id = id;
    j.workers = 4;
    j.gradient_elems = elems;
    j.partition_chunks = partition_chunks;
    j.revision = revision;
    return j;
}

TEST(ClusterTest, ANewJobIsSpreadOverTheLiveNodes)
{
    // 391 blocks + 7 exponent chunks = 398 chunks: partitions of 200 and 198.
    ClusterJob j = job(7, 300000, 200);
    EXPECT_EQ(job_chunks(j), 398u);
    auto p = replace(j, std::nullopt, {node("a"), node("b")}, {}, {j});
    ASSERT_TRUE(p);
    EXPECT_EQ(p->partitions, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(p->job_revision, 5);
}

TEST(ClusterTest, APlacementOnLiveNodesStaysAndADeadNodesPartitionsMove)
{
    ClusterJob j = job(7, 300000, 100);  // 4 partitions
    ClusterPlacement current{7, 5, {"a", "b", "c", "a"}};
    EXPECT_EQ(replace(j, current, {node("a"), node("b"), node("c")}, {}, {j}), std::nullopt);
    // c is gone: its partition goes to the node that finishes first (b, with one partition).
    auto p = replace(j, current, {node("a"), node("b")}, {}, {j});
    ASSERT_TRUE(p);
    EXPECT_EQ(p->partitions, (std::vector<std::string>{"a", "b", "b", "a"}));
    // No node alive: nothing to do.
    EXPECT_EQ(replace(j, current, {}, {}, {j}), std::nullopt);
}

TEST(ClusterTest, ANodeThatJoinsLaterGetsPartitionsButSmallGainsMoveNothing)
{
    ClusterJob j = job(7, 300000, 200);  // partitions of 200 and 198 chunks
    // Both partitions went to a while it was alone; b joins: the slowest node's time halves.
    auto p = replace(j, ClusterPlacement{7, 5, {"a", "a"}}, {node("a"), node("b")}, {}, {j});
    ASSERT_TRUE(p);
    EXPECT_EQ(p->partitions, (std::vector<std::string>{"a", "b"}));
    // Once spread, a third node changes nothing: one partition per node is already the best.
    EXPECT_EQ(replace(j, *p, {node("a"), node("b"), node("c")}, {}, {j}), std::nullopt);
    // Four partitions on three nodes: the best is two, one, one; three, one is 1.5x that, and
    // worth a move; two, two is 1x that and is not.
    ClusterJob four = job(8, 300000, 100);
    auto q = replace(four, ClusterPlacement{8, 5, {"a", "a", "a", "b"}},
                     {node("a"), node("b"), node("c")}, {}, {four});
    ASSERT_TRUE(q);
    EXPECT_EQ(std::count(q->partitions.begin(), q->partitions.end(), "c"), 1);
    EXPECT_EQ(replace(four, ClusterPlacement{8, 5, {"a", "a", "b", "b"}},
                      {node("a"), node("b"), node("c")}, {}, {four}),
              std::nullopt);
}

TEST(ClusterTest, AChangedSpecIsPlacedAfresh)
{
    ClusterJob j = job(7, 300000, 200, 9);  // revision 9, placed for revision 5
    auto p = replace(j, ClusterPlacement{7, 5, {"b", "b"}}, {node("a"), node("b")}, {}, {j});
    ASSERT_TRUE(p);
    EXPECT_EQ(p->partitions, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(p->job_revision, 9);
}

TEST(ClusterTest, OtherJobsLoadAndMemoryAreTakenIntoAccount)
{
    ClusterJob big = job(1, 300000, 400), small = job(2, 1000, 400);  // 398 and 3 chunks
    // a holds the big job: the small one goes to b, though a comes first.
    auto p = replace(small, std::nullopt, {node("a", 500), node("b", 500)},
                     {ClusterPlacement{1, 5, {"a"}}}, {big, small});
    ASSERT_TRUE(p);
    EXPECT_EQ(p->partitions, (std::vector<std::string>{"b"}));
}

TEST(ClusterTest, EachNodeHoldsItsShareOfEveryTensorAndItsExponentChunks)
{
    ClusterJob j = job(7, 300000, 200);
    ClusterPlacement half{7, 5, {"a", "b"}}, whole{7, 5, {"a", "a"}};
    // ceil(391 / 2) + 1 = 197 blocks, + 4 exponent chunks.
    EXPECT_EQ(local_share(j, half, "a"), (197 + 4) * XAGG_CHUNK_ELEMS);
    EXPECT_EQ(local_share(j, whole, "a"), (392 + 7) * XAGG_CHUNK_ELEMS);
    EXPECT_EQ(local_share(j, whole, "b"), 0u);
}

TEST(ClusterTest, AJumboChunkJobIsCutInSlotPositionsAndSharedInJumboBlocks)
{
    ClusterJob j = job(7, 300000, 200);
    j.chunk_elems = XAGG_JUMBO_CHUNK_ELEMS;
    // ceil(300000 / 2048) = 147 blocks + 1 exponent chunk (170 blocks' exponents a chunk), each
    // chunk XAGG_JUMBO_SLOT_PARTS slot positions: 444, partitions of 200, 200 and 44.
    EXPECT_EQ(job_chunks(j), 148u * XAGG_JUMBO_SLOT_PARTS);
    auto p = replace(j, std::nullopt, {node("a"), node("b")}, {}, {j});
    ASSERT_TRUE(p);
    EXPECT_EQ(p->partitions.size(), 3u);
    // Split by partitions, as the client splits every tensor: a node with 1 of 2 holds
    // ceil(147 / 2) + 1 = 75 blocks and their 1 exponent chunk, in jumbo chunks.
    ClusterPlacement half{7, 5, {"a", "b"}}, whole{7, 5, {"a", "a"}};
    EXPECT_EQ(local_share(j, half, "a"), (75 + 1) * XAGG_JUMBO_CHUNK_ELEMS);
    EXPECT_EQ(local_share(j, whole, "a"), (148 + 1) * XAGG_JUMBO_CHUNK_ELEMS);
}

TEST(ClusterTest, RecordsRoundTripAndBadOnesAreRefusedClearly)
{
    ClusterNode n = node("a");
    EXPECT_EQ(parse_node(to_json(n).dump()).capacity_positions, 65536u);
    ClusterJob j = parse_job(7, R"({"workers":3,"gradient_elems":1000})");
    EXPECT_EQ(j.partition_chunks, 16384u);
    EXPECT_EQ(j.chunk_elems, XAGG_CHUNK_ELEMS);  // a record written before chunk_elems existed
    j.chunk_elems = XAGG_JUMBO_CHUNK_ELEMS;
    EXPECT_EQ(parse_job(7, to_json(j).dump()).chunk_elems, XAGG_JUMBO_CHUNK_ELEMS);
    try {
        parse_job(7, R"({"workers":3,"gradient_elems":1000,"chunk_elems":1000})");
        ADD_FAILURE() << "chunk_elems 1000 accepted";
    } catch (const std::invalid_argument &e) {
        EXPECT_STREQ(e.what(), "job 7: chunk_elems 1000 is neither 768 nor 2048");
    }
    EXPECT_THROW(parse_job(7, R"({"workers":65,"gradient_elems":1000})"), std::invalid_argument);
    EXPECT_THROW(parse_job(0, R"({"workers":3,"gradient_elems":1000})"), std::invalid_argument);
    EXPECT_THROW(parse_job(7, "not json"), std::invalid_argument);
    ClusterPlacement p{7, 5, {"a", "a", "b"}};
    nlohmann::json j7 = to_json(p, {node("a"), node("b"), node("c")});
    EXPECT_EQ(j7["nodes"].size(), 2u);  // c holds nothing
    EXPECT_EQ(j7["nodes"][0]["partitions"], 2);
    EXPECT_EQ(parse_placement(j7.dump()).partitions, p.partitions);
}

}  // namespace
}  // namespace xagg::daemon
