// SPDX-License-Identifier: MIT
// BPF_PROG_TEST_RUN tests of multi-buffer frames on the XDP fast path: jumbo chunks (2048 values,
// 8274-byte frames), and standard ones split by a driver with small receive buffers. The kernel
// puts `linear` bytes in the linear part and the rest in page-sized frags, as such a driver does,
// so every case runs with the frag boundaries at several offsets (headers only partly linear,
// which the pull variant pulls and the copy variant refuses; the payload split inside a value;
// the payload wholly in frags).
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <vector>

#include "lib/fastpath/fastpath.hpp"
#include "tests/support/fastpath_fixture.hpp"
#include "tests/support/packet_builder.hpp"

namespace xagg::test {
namespace {

constexpr uint32_t kJobJumbo = 6;
// Four jumbo chunks: twelve slot positions, after the other jobs' regions.
constexpr uint32_t kJumboBase = 24, kJumboChunks = 4;

class JumboTest : public FastPathTest {
protected:
    void SetUp() override
    {
        FastPathTest::SetUp();
        if (IsSkipped())
            return;
        add_job(kJobJumbo, 3, kJumboBase, kJumboChunks * XAGG_JUMBO_SLOT_PARTS, false, false,
                XAGG_JUMBO_CHUNK_ELEMS);
    }

    // Three members contribute `values[r]` to (round, chunk); returns the last one's result.
    Result complete(uint32_t round, uint32_t chunk, const std::vector<std::vector<int32_t>> &values,
                    uint32_t linear, bool checksums = false)
    {
        Result last{};
        for (uint32_t r = 0; r < 3; r++) {
            Bytes in = jumbo_contribution(kJobJumbo, r, round, chunk, values[r]).build();
            if (checksums)
                in = with_udp_checksum(in);
            last = expect(in, r < 2 ? XDP_DROP : XDP_TX,
                          r < 2 ? XAGG_CNT_AGGREGATED : XAGG_CNT_COMPLETED, linear);
        }
        return last;
    }
};

// Where the kernel ends the linear part: inside the Ethernet header's reach of the IP header,
// inside the xagg header, right after the headers, inside a value, at a page, and the most the
// test run allows (4096 - 256 of headroom - 320 of skb_shared_info = 3520).
const uint32_t kLinearSizes[] = {34,   60,  XAGG_FRAME_HDR_BYTES, XAGG_FRAME_HDR_BYTES + 1, 1001,
                                 2048, 3520};

class JumboSplitTest : public JumboTest, public ::testing::WithParamInterface<uint32_t> {
protected:
    // The copy variant (Linux 6.1-6.12) cannot pull: a contribution whose headers are not all in
    // the linear part is refused, counted, and nothing of it added (include/xagg/fastpath.h).
    bool headers_beyond_reach(uint32_t linear) const
    {
        return fp_->variant() == XAGG_VARIANT_COPY && linear < XAGG_FRAME_HDR_BYTES;
    }
};

TEST_P(JumboSplitTest, SumsExactlyWhereverTheFragsBegin)
{
    const uint32_t linear = GetParam();
    if (headers_beyond_reach(linear)) {
        expect_unchanged(jumbo_contribution(kJobJumbo, 0, 0, 1, jumbo_random(1)).build(), XDP_DROP,
                         XAGG_CNT_DROP_NOT_LINEAR, linear);
        return;
    }
    std::vector<std::vector<int32_t>> v = {jumbo_random(1), jumbo_random(2), jumbo_random(3)};
    // The extremes too, at both ends of the chunk and around the slot parts' seams.
    for (size_t i :
         {size_t{0}, size_t{767}, size_t{768}, size_t{1535}, size_t{1536}, size_t{2047}}) {
        v[0][i] = INT32_MAX;
        v[1][i] = INT32_MAX;
        v[2][i] = static_cast<int32_t>(i);
    }
    Result res = complete(0, 1, v, linear);
    const std::vector<int32_t> want = sum_of(v);
    EXPECT_EQ(want[2047], static_cast<int32_t>(2047 - 2));  // 2 * INT32_MAX wraps to -2
    Frame last = jumbo_contribution(kJobJumbo, 2, 0, 1, v[2]);
    EXPECT_EQ(res.out.size(), size_t{XAGG_JUMBO_FRAME_BYTES});
    EXPECT_EQ(res.out, multicast_result(last, want, 0b111));
}

TEST_P(JumboSplitTest, ChecksummedContributionsAreVerifiedAcrossTheFrags)
{
    const uint32_t linear = GetParam();
    std::vector<std::vector<int32_t>> v = {jumbo_random(4), jumbo_random(5), jumbo_random(6)};
    // One bit flipped after the sender's checksum, in the last value (the last frag): refused.
    Bytes bad = with_udp_checksum(jumbo_contribution(kJobJumbo, 0, 0, 2, v[0]).build());
    bad[bad.size() - 1] ^= 0x10;
    if (headers_beyond_reach(linear)) {
        expect_unchanged(bad, XDP_DROP, XAGG_CNT_DROP_NOT_LINEAR, linear);
        return;
    }
    expect_unchanged(bad, XDP_DROP, XAGG_CNT_DROP_BAD_UDP_CHECKSUM, linear);
    Result res = complete(0, 2, v, linear, true);
    Frame last = jumbo_contribution(kJobJumbo, 2, 0, 2, v[2]);
    EXPECT_EQ(res.out, multicast_result(last, sum_of(v), 0b111));
}

TEST_P(JumboSplitTest, AFrameCutInsideItsFragsIsTruncated)
{
    const uint32_t linear = GetParam();
    Bytes whole = jumbo_contribution(kJobJumbo, 0, 0, 0, jumbo_random(7)).build();
    for (size_t keep : {size_t{XAGG_JUMBO_FRAME_BYTES - 1}, size_t{XAGG_JUMBO_FRAME_BYTES - 4096},
                        size_t{3600}}) {
        SCOPED_TRACE(keep);
        expect_unchanged(
            cut(whole, keep), XDP_DROP,
            headers_beyond_reach(linear) ? XAGG_CNT_DROP_NOT_LINEAR : XAGG_CNT_DROP_TRUNCATED,
            std::min<uint32_t>(linear, static_cast<uint32_t>(keep)));
    }
    if (headers_beyond_reach(linear))
        return;
    // Nothing of it was added: the chunk still needs all three.
    std::vector<std::vector<int32_t>> v = {jumbo_random(8), jumbo_random(9), jumbo_random(10)};
    Result res = complete(0, 0, v, linear);
    EXPECT_EQ(res.out,
              multicast_result(jumbo_contribution(kJobJumbo, 2, 0, 0, v[2]), sum_of(v), 0b111));
}

INSTANTIATE_TEST_SUITE_P(Linear, JumboSplitTest, ::testing::ValuesIn(kLinearSizes),
                         [](const auto &tc) { return "linear_" + std::to_string(tc.param); });

// A standard contribution (3154-byte frame) from a driver whose buffers are smaller than it (3 KiB
// on i40e at MTU 9000): both variants sum a copy of its values; the pull variant also pulls
// headers the driver left out of the linear part, which the copy variant refuses.
const uint32_t kStandardLinearSizes[] = {
    34, 60, XAGG_FRAME_HDR_BYTES, XAGG_FRAME_HDR_BYTES + 1, 1001, 2048, 3072, XAGG_FRAME_BYTES - 1};

class StandardSplitTest : public JumboSplitTest {};

TEST_P(StandardSplitTest, SumsExactlyWhereverTheFragsBegin)
{
    const uint32_t linear = GetParam();
    std::vector<std::vector<int32_t>> v = {random_values(11), random_values(12), random_values(13)};
    v[0][XAGG_CHUNK_ELEMS - 1] = INT32_MAX;
    v[1][XAGG_CHUNK_ELEMS - 1] = INT32_MAX;
    v[2][XAGG_CHUNK_ELEMS - 1] = 5;
    if (headers_beyond_reach(linear)) {
        expect_unchanged(contribution(kJobA, 0, 0, 1, v[0]).build(), XDP_DROP,
                         XAGG_CNT_DROP_NOT_LINEAR, linear);
        return;
    }
    Result last{};
    for (uint32_t r = 0; r < 3; r++)
        last = expect(contribution(kJobA, r, 0, 1, v[r]).build(), r < 2 ? XDP_DROP : XDP_TX,
                      r < 2 ? XAGG_CNT_AGGREGATED : XAGG_CNT_COMPLETED, linear);
    const std::vector<int32_t> want = sum_of(v);
    EXPECT_EQ(want[XAGG_CHUNK_ELEMS - 1], 3);  // 2 * INT32_MAX + 5 wraps to 3
    EXPECT_EQ(last.out, multicast_result(contribution(kJobA, 2, 0, 1, v[2]), want, 0b111));
    // A re-send of the same contribution is answered with the same sum, to its sender alone.
    Result again =
        expect(contribution(kJobA, 1, 0, 1, v[1]).build(), XDP_TX, XAGG_CNT_RESENT, linear);
    EXPECT_EQ(again.out, unicast_result(contribution(kJobA, 1, 0, 1, v[1]), want, 0b111));
}

TEST_P(StandardSplitTest, ChecksumsAreVerifiedAndFilledAcrossTheFrags)
{
    const uint32_t linear = GetParam();
    if (headers_beyond_reach(linear))
        GTEST_SKIP() << "refused as not linear (SumsExactlyWhereverTheFragsBegin)";
    std::vector<std::vector<int32_t>> v = {random_values(14), random_values(15), random_values(16)};
    Bytes bad = with_udp_checksum(contribution(kJobA, 0, 0, 2, v[0]).build());
    bad[bad.size() - 1] ^= 0x01;
    expect_unchanged(bad, XDP_DROP, XAGG_CNT_DROP_BAD_UDP_CHECKSUM, linear);
    Result last{};
    for (uint32_t r = 0; r < 3; r++)
        last = expect(with_udp_checksum(contribution(kJobA, r, 0, 2, v[r]).build()),
                      r < 2 ? XDP_DROP : XDP_TX, r < 2 ? XAGG_CNT_AGGREGATED : XAGG_CNT_COMPLETED,
                      linear);
    EXPECT_EQ(last.out, multicast_result(contribution(kJobA, 2, 0, 2, v[2]), sum_of(v), 0b111));
}

INSTANTIATE_TEST_SUITE_P(Linear, StandardSplitTest, ::testing::ValuesIn(kStandardLinearSizes),
                         [](const auto &tc) { return "linear_" + std::to_string(tc.param); });

TEST_F(JumboTest, TheThreeSlotPartsCarryOneRoundsBookkeeping)
{
    std::vector<std::vector<int32_t>> v = {jumbo_random(11), jumbo_random(12), jumbo_random(13)};
    for (uint32_t r = 0; r < 2; r++)
        expect(jumbo_contribution(kJobJumbo, r, 5, 3, v[r]).build(), XDP_DROP, XAGG_CNT_AGGREGATED);
    const std::vector<int32_t> partial = sum_of({v[0], v[1]});
    for (uint32_t part = 0; part < XAGG_JUMBO_SLOT_PARTS; part++) {
        SCOPED_TRACE(part);
        const uint32_t position = 3 * XAGG_JUMBO_SLOT_PARTS + part;
        xagg_slot s = fp_->slot(2 * (kJumboBase + position) + 1);  // round 5: odd slot
        EXPECT_EQ(s.tag, kJobJumbo);
        EXPECT_EQ(s.chunk, position);
        EXPECT_EQ(s.round, 5u);
        EXPECT_EQ(s.seen, 0b011u);
        for (uint32_t i = 0; i < XAGG_CHUNK_ELEMS; i++) {
            const uint32_t at = part * XAGG_CHUNK_ELEMS + i;
            if (at < XAGG_JUMBO_CHUNK_ELEMS && s.sum[i] != partial[at]) {
                ADD_FAILURE() << "value " << at << ": " << s.sum[i] << " != " << partial[at];
                break;
            }
        }
    }
}

TEST_F(JumboTest, DuplicatesAndResendsAreAnsweredLikeStandardChunks)
{
    std::vector<std::vector<int32_t>> v = {jumbo_random(14), jumbo_random(15), jumbo_random(16)};
    expect(jumbo_contribution(kJobJumbo, 0, 0, 1, v[0]).build(), XDP_DROP, XAGG_CNT_AGGREGATED,
           100);
    expect_unchanged(jumbo_contribution(kJobJumbo, 0, 0, 1, v[0]).build(), XDP_DROP,
                     XAGG_CNT_DROP_DUPLICATE, 100);
    expect(jumbo_contribution(kJobJumbo, 1, 0, 1, v[1]).build(), XDP_DROP, XAGG_CNT_AGGREGATED,
           100);
    Frame last = jumbo_contribution(kJobJumbo, 2, 0, 1, v[2]);
    EXPECT_EQ(expect(last.build(), XDP_TX, XAGG_CNT_COMPLETED, 100).out,
              multicast_result(last, sum_of(v), 0b111));
    // Rank 1 missed the result and sends again: the sum goes back to it alone.
    Frame again = jumbo_contribution(kJobJumbo, 1, 0, 1, v[1]);
    again.flags = XAGG_F_RETRANSMIT;
    EXPECT_EQ(expect(again.build(), XDP_TX, XAGG_CNT_RESENT, 100).out,
              unicast_result(again, sum_of(v), 0b111));
}

TEST_F(JumboTest, AChunkOfTheOtherSizeIsABadLengthForItsJob)
{
    // A standard chunk under the jumbo job's key, and a jumbo chunk under job A's.
    expect_unchanged(contribution(kJobJumbo, 0, 0, 0).build(), XDP_DROP, XAGG_CNT_DROP_BAD_LENGTH);
    expect_unchanged(jumbo_contribution(kJobA, 0, 0, 0, jumbo_random(17)).build(), XDP_DROP,
                     XAGG_CNT_DROP_BAD_LENGTH);
    // nelem that disagrees with the datagram's length, both ways.
    Frame f = jumbo_contribution(kJobJumbo, 0, 0, 0, jumbo_random(18));
    f.nelem = XAGG_CHUNK_ELEMS;
    expect_unchanged(f.build(), XDP_DROP, XAGG_CNT_DROP_BAD_LENGTH);
    Frame g = contribution(kJobJumbo, 0, 0, 0);
    g.nelem = XAGG_JUMBO_CHUNK_ELEMS;
    expect_unchanged(g.build(), XDP_DROP, XAGG_CNT_DROP_BAD_LENGTH);
}

TEST_F(JumboTest, AChunkBeyondTheRegionGoesToTheHostPath)
{
    expect_unchanged(jumbo_contribution(kJobJumbo, 0, 0, kJumboChunks, jumbo_random(19)).build(),
                     XDP_PASS, XAGG_CNT_PASS_HOST_OVERFLOW, 200);
    // Far beyond: chunk * 3 does not fit 32 bits.
    expect_unchanged(jumbo_contribution(kJobJumbo, 0, 0, 0x60000000u, jumbo_random(20)).build(),
                     XDP_PASS, XAGG_CNT_PASS_HOST_OVERFLOW, 200);
}

TEST_F(JumboTest, AWrongKeyIsRefusedBeforeAnythingIsAdded)
{
    Frame f = jumbo_contribution(kJobJumbo, 0, 0, 0, jumbo_random(21));
    f.key = test_job_key(kJobJumbo) ^ 1;
    expect_unchanged(f.build(), XDP_DROP, XAGG_CNT_DROP_BAD_KEY, 500);
}

TEST_F(JumboTest, JumboAndStandardJobsShareTheAggregatorWithoutTouchingEachOther)
{
    std::vector<std::vector<int32_t>> v = {jumbo_random(22), jumbo_random(23), jumbo_random(24)};
    std::vector<std::vector<int32_t>> a = {random_values(25), random_values(26), random_values(27)};
    for (uint32_t r = 0; r < 3; r++) {
        Frame j = jumbo_contribution(kJobJumbo, r, 0, 0, v[r]);
        Frame s = contribution(kJobA, r, 0, 3, a[r]);
        Result rj = expect(j.build(), r < 2 ? XDP_DROP : XDP_TX,
                           r < 2 ? XAGG_CNT_AGGREGATED : XAGG_CNT_COMPLETED, 500);
        Result rs = expect(s.build(), r < 2 ? XDP_DROP : XDP_TX,
                           r < 2 ? XAGG_CNT_AGGREGATED : XAGG_CNT_COMPLETED);
        if (r == 2) {
            EXPECT_EQ(rj.out, multicast_result(j, sum_of(v), 0b111));
            EXPECT_EQ(rs.out, multicast_result(s, sum_of(a), 0b111));
        }
    }
}

}  // namespace
}  // namespace xagg::test
