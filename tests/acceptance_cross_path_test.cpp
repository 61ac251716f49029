// SPDX-License-Identifier: MIT
// One acceptance rule, two paths: every frame of the fast path's table of refused and passed
// frames (tests/support/fastpath_fixture.hpp) runs through the XDP program (BPF_PROG_TEST_RUN)
// and, as the datagram the kernel would deliver, through the host-side parameter server; a
// refusal must carry the same counter on both. Then one sequence of contributions (duplicate,
// disagreeing exponent, completion, re-send, stale round) gives the same verdicts and the same
// sums on both paths.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <optional>

#include "daemon/datapath/host_ps.hpp"
#include "daemon/datapath/host_slots.hpp"
#include "tests/support/fastpath_fixture.hpp"

namespace xagg::test {
namespace {

// The datagram a UDP socket gets for `frame`: the UDP payload, from the frame's source.
struct Datagram {
    Bytes payload;
    sockaddr_in from{};
    uint8_t tos = 0;  // the IP header's, as IP_RECVTOS hands it over
};

Datagram as_datagram(const Bytes &frame)
{
    const size_t udp_len = (size_t{frame[off::udp_len]} << 8) | frame[off::udp_len + 1];
    Datagram d;
    d.payload.assign(frame.begin() + off::x, frame.begin() + off::udp + udp_len);
    d.from.sin_family = AF_INET;
    std::memcpy(&d.from.sin_addr.s_addr, &frame[off::ip_src], 4);
    std::memcpy(&d.from.sin_port, &frame[off::udp_sport], 2);
    d.tos = frame[off::ip_tos];
    return d;
}

// The sums on the wire: little-endian int32 after the 40-byte header.
std::vector<int32_t> values_of(const uint8_t *datagram, size_t n = XAGG_CHUNK_ELEMS)
{
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < v.size(); i++) {
        uint32_t le = 0;
        for (int b = 0; b < 4; b++)
            le |= uint32_t{datagram[sizeof(xagg_hdr) + 4 * i + b]} << (8 * b);
        v[i] = static_cast<int32_t>(le);
    }
    return v;
}

class CrossPathTest : public FastPathTest {
protected:
    void SetUp() override
    {
        FastPathTest::SetUp();
        if (IsSkipped())
            return;
        // No serving threads: datagrams come in through handle() only.
        host_ = std::make_unique<daemon::HostPs>(XAGG_DEFAULT_PORT, "lo", 0);
        for (const AddedJob &added : jobs_)
            host_->put_job(host_job(added));
    }

    // The fixture's job as the daemon's table has it, members included.
    static daemon::Job host_job(const AddedJob &added)
    {
        daemon::Job job;
        job.id = added.spec.id;
        job.workers = added.workers;
        job.positions = 1u << 20;
        job.region_base = added.spec.region_base;
        job.region_positions = added.spec.region_positions;
        job.chunk_elems = added.spec.chunk_elems;
        job.tag = added.spec.tag;
        job.key = added.spec.key;
        job.host_path = added.spec.host_path;
        job.fanout = added.spec.fanout;
        job.group = added.spec.group;
        job.group_port = added.spec.group_port;
        for (uint32_t r = 0; r < added.workers; r++) {
            Member m = member_of(job.id, r);
            job.members[r] = daemon::Member{r, in_addr{htonl(m.ip)}, m.port};
        }
        return job;
    }

    // Runs the datagram through the host path; checks that exactly its outcome was counted.
    enum xagg_counter host_run(const Bytes &frame, std::vector<daemon::HostPs::Reply> &replies)
    {
        const Datagram d = as_datagram(frame);
        const Counters before = host_->counters();
        const enum xagg_counter outcome = host_->handle(d.payload, d.from, d.tos, replies);
        const Counters after = host_->counters();
        for (int c = 0; c < XAGG_CNT_MAX; c++) {
            if (c == XAGG_CNT_FANOUT_COPIES)  // counted per copy, beside it
                continue;
            const uint64_t want =
                c == XAGG_CNT_SUMMED_VALUES ? (adds_values(outcome) ? nelem_of(frame) : 0)
                : c == XAGG_CNT_CE_MARKED   ? (adds_values(outcome) && ce_marked(frame) ? 1 : 0)
                                            : (c == outcome ? 1 : 0);
            EXPECT_EQ(after[c], before[c] + want)
                << "host counter " << counter_name(static_cast<xagg_counter>(c));
        }
        return outcome;
    }

    // One sequence of contributions to chunk 1 (a duplicate, a disagreeing exponent, a
    // completion, a re-send, a stale round) from the two ranks of `fast_job`, served by the fast
    // path (its frames' linear part `linear` bytes, 0: as much as fits), and of `host_job`, served
    // by the host path, chunks of `elems` values: the same verdict on both, and every result the
    // exact sum of its round, with the same bitmap of contributors (the host marks its results
    // FALLBACK).
    void same_sequence(uint32_t fast_job, uint32_t host_job, size_t elems, uint32_t linear)
    {
        struct Step {
            uint32_t rank, round;
            int8_t exponent;
            uint32_t seed;
            enum xagg_counter outcome;
            uint8_t tos = XAGG_ECN_ECT0;
        };
        // CE marks: counted once per contribution added (not for the duplicate, the refused
        // exponent or the re-send), echoed in every result of the round.
        const Step steps[] = {
            {0, 0, 3, 11, XAGG_CNT_AGGREGATED, XAGG_ECN_CE},
            {0, 0, 3, 11, XAGG_CNT_DROP_DUPLICATE, XAGG_ECN_CE},
            {1, 0, 4, 22, XAGG_CNT_DROP_BAD_EXPONENT, XAGG_ECN_CE},
            {1, 0, 3, 23, XAGG_CNT_COMPLETED},
            {0, 0, 3, 11, XAGG_CNT_RESENT, XAGG_ECN_CE},
            {0, 1, 3, 5, XAGG_CNT_AGGREGATED, XAGG_ECN_CE},
            {1, 1, 3, 6, XAGG_CNT_COMPLETED, XAGG_ECN_CE},
            {0, 2, 3, 7, XAGG_CNT_AGGREGATED, 0},
            {1, 0, 3, 1, XAGG_CNT_DROP_STALE_ROUND},
        };
        const uint8_t marked_in_round[3] = {1, 2, 0};
        std::vector<int32_t> round_values[3][2];
        for (const Step &s : steps) {
            SCOPED_TRACE(std::string("rank ") + std::to_string(s.rank) + " round " +
                         std::to_string(s.round) + ", expecting " + counter_name(s.outcome));
            const std::vector<int32_t> values = random_values(s.seed, elems);
            if (s.outcome == XAGG_CNT_AGGREGATED || s.outcome == XAGG_CNT_COMPLETED)
                round_values[s.round][s.rank] = values;
            const auto frame_of = [&](uint32_t job) {
                Frame f = contribution(job, s.rank, s.round, 1, values);
                f.nelem = static_cast<uint16_t>(elems);
                f.exponent = s.exponent;
                f.tos = s.tos;
                return f.build();
            };
            const uint32_t action =
                s.outcome == XAGG_CNT_COMPLETED || s.outcome == XAGG_CNT_RESENT ? XDP_TX : XDP_DROP;
            const Result on_fast = expect(frame_of(fast_job), action, s.outcome, linear);

            std::vector<daemon::HostPs::Reply> replies;
            EXPECT_EQ(counter_name(host_run(frame_of(host_job), replies)),
                      std::string(counter_name(s.outcome)));
            ASSERT_EQ(replies.size(), action == XDP_TX ? 1u : 0u);
            if (replies.empty())
                continue;
            const auto want = sum_of({round_values[s.round][0], round_values[s.round][1]});
            ASSERT_EQ(replies[0].size, sizeof(xagg_hdr) + 4 * elems);
            EXPECT_EQ(values_of(replies[0].data.data(), elems), want);
            EXPECT_EQ(values_of(on_fast.out.data() + off::x, elems), want);
            EXPECT_EQ(
                std::memcmp(replies[0].data.data() + 24, on_fast.out.data() + off::x_contrib, 8),
                0);
            EXPECT_EQ(replies[0].data[5], on_fast.out[off::x_flags] | XAGG_F_FALLBACK);
            EXPECT_EQ(replies[0].data[off::x_marked - off::x], marked_in_round[s.round]);
            EXPECT_EQ(on_fast.out[off::x_marked], marked_in_round[s.round]);
            // The result leaves ECT(0), with its IPv4 checksum right for that.
            EXPECT_EQ(on_fast.out[off::ip_tos], XAGG_ECN_ECT0);
            EXPECT_EQ(ipv4_checksum(on_fast.out, off::ip),
                      (on_fast.out[off::ip_csum] << 8) | on_fast.out[off::ip_csum + 1]);
        }
    }

    std::unique_ptr<daemon::HostPs> host_;
};

// The host path's slots outlive its process (daemon/datapath/host_slots.hpp): a HostPs killed
// with a chunk half summed, and another started over the same directory, completes it with the
// exact sum and re-sends it to a worker that missed it, as the fast path does from its pinned
// map. Without the files, the second one would start the chunk afresh: rank 1 alone, never
// completed, since rank 0 has moved on.
TEST_F(CrossPathTest, TheHostPathsSlotsOutliveItsProcess)
{
    const std::string dir = ::testing::TempDir() + "xagg-host-slots-" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    daemon::Job job = host_job(jobs_[2]);
    ASSERT_EQ(job.id, kJobHost);
    job.positions = 64;  // the host path reserves room for what it serves
    const auto a = random_values(31), b = random_values(32), c = random_values(33);
    std::vector<daemon::HostPs::Reply> replies;
    // Rank `rank`'s contribution of round `round` to chunk 5 of the host-path job.
    const auto send = [&](daemon::HostPs &ps, uint32_t rank, uint32_t round,
                          const std::vector<int32_t> &v) {
        replies.clear();
        const Datagram d = as_datagram(contribution(kJobHost, rank, round, 5, v).build());
        return ps.handle(d.payload, d.from, d.tos, replies);
    };
    {
        daemon::HostPs first(XAGG_DEFAULT_PORT, "lo", 0, dir);
        first.put_job(job);
        EXPECT_EQ(send(first, 0, 0, a), XAGG_CNT_AGGREGATED);
        // Round 1 complete too: its result is the one a worker may have missed.
        EXPECT_EQ(send(first, 0, 1, b), XAGG_CNT_AGGREGATED);
        EXPECT_EQ(send(first, 1, 1, c), XAGG_CNT_COMPLETED);
    }  // killed: nothing but the files is left
    daemon::HostPs second(XAGG_DEFAULT_PORT, "lo", 0, dir);
    second.put_job(job);
    EXPECT_EQ(send(second, 1, 0, b), XAGG_CNT_COMPLETED);
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(values_of(replies[0].data.data(), XAGG_CHUNK_ELEMS), sum_of({a, b}));
    EXPECT_EQ(send(second, 0, 1, b), XAGG_CNT_RESENT);
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(values_of(replies[0].data.data(), XAGG_CHUNK_ELEMS), sum_of({b, c}));
    // A new job of the same id (another tag) does not see them.
    daemon::Job other = job;
    other.tag ^= 1;
    daemon::HostPs third(XAGG_DEFAULT_PORT, "lo", 0, dir);
    third.put_job(other);
    EXPECT_TRUE(third.slot_states(other).empty());
    std::filesystem::remove_all(dir);
}

// A slot a kill caught half-written (still marked) is cleared when the file is opened again,
// with every part of a jumbo chunk in that round; the others are kept.
TEST(HostSlots, ASlotCaughtHalfWrittenIsClearedAndTheRestKept)
{
    const std::string dir = ::testing::TempDir() + "xagg-torn-" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    constexpr uint32_t kParts = XAGG_JUMBO_SLOT_PARTS, kPositions = 30 * kParts;
    {
        daemon::HostSlots slots(dir, 9, 0x77, kPositions, kParts);
        slots.reserve(0, kPositions);
        for (uint32_t p = 0; p < kPositions; p++)
            for (uint32_t parity : {0u, 1u}) {
                xagg_slot &s = slots.pair(p)[parity];
                s.tag = 0x77;
                s.chunk = p;
                s.round = parity;
                s.seen = 1;
                s.sum[0] = static_cast<int32_t>(p);
            }
        daemon::begin_slot_write(slots.pair(4 * kParts + 1)[1]);  // chunk 4, part 1, odd round
    }
    daemon::HostSlots again(dir, 9, 0x77, kPositions, kParts);
    EXPECT_TRUE(again.recovered());
    EXPECT_EQ(again.torn(), 1u);
    for (uint32_t p = 0; p < kPositions; p++) {
        const bool torn_chunk = p / kParts == 4;
        EXPECT_EQ(again.pair(p)[0].sum[0], static_cast<int32_t>(p)) << p;
        EXPECT_EQ(again.pair(p)[1].seen, torn_chunk ? 0u : 1u) << p;
        EXPECT_EQ(again.pair(p)[1].lock.val, 0u) << p;
    }
    // Another size or tag: a new file.
    daemon::HostSlots other(dir, 9, 0x78, kPositions, kParts);
    EXPECT_FALSE(other.recovered());
    EXPECT_EQ(other.pair(0)[0].seen, 0u);
    std::filesystem::remove_all(dir);
}

class SameRefusalTest : public CrossPathTest, public ::testing::WithParamInterface<BadFrameCase> {};

TEST_P(SameRefusalTest, OnBothPaths)
{
    const BadFrameCase &c = GetParam();
    const Bytes frame = c.make();
    expect_unchanged(frame, c.action, c.counter);
    if (!c.host) {
        SUCCEED() << "an IP-layer case: the kernel, not the host path, handles it";
        return;
    }
    std::vector<daemon::HostPs::Reply> replies;
    EXPECT_EQ(counter_name(host_run(frame, replies)), std::string(counter_name(*c.host)));
    if (c.action == XDP_DROP) {
        EXPECT_EQ(*c.host, c.counter) << "a refusal must be the same on both paths";
    }
    if (*c.host != XAGG_CNT_AGGREGATED) {
        EXPECT_TRUE(replies.empty()) << "a refused datagram causes no reply";
    }
}

INSTANTIATE_TEST_SUITE_P(Table, SameRefusalTest, ::testing::ValuesIn(kBadFrames),
                         [](const auto &tc) { return std::string(tc.param.name); });

TEST_F(CrossPathTest, OneSequenceGivesTheSameVerdictsAndSumsOnBothPaths)
{
    // Job B (two workers) is served by the fast path; the same contributions to the host-path
    // job (two workers too) are served by the host path.
    same_sequence(kJobB, kJobHost, XAGG_CHUNK_ELEMS, 0);
}

// Jumbo chunks: a fast-path job and a host-path job of 2048-value chunks beside the others.
constexpr uint32_t kJobJumbo = 6, kJobJumboHost = 7;

class JumboCrossPathTest : public CrossPathTest {
protected:
    void SetUp() override
    {
        CrossPathTest::SetUp();
        if (IsSkipped())
            return;
        add_job(kJobJumbo, 2, 24, 4 * XAGG_JUMBO_SLOT_PARTS, false, false, XAGG_JUMBO_CHUNK_ELEMS);
        host_->put_job(host_job(jobs_.back()));
        add_job(kJobJumboHost, 2, 0, 0, true, false, XAGG_JUMBO_CHUNK_ELEMS);
        host_->put_job(host_job(jobs_.back()));
    }

    void same_refusal(const Bytes &frame, uint32_t action, enum xagg_counter fast,
                      enum xagg_counter host)
    {
        expect_unchanged(frame, action, fast, 300);
        std::vector<daemon::HostPs::Reply> replies;
        EXPECT_EQ(counter_name(host_run(frame, replies)), std::string(counter_name(host)));
        EXPECT_TRUE(replies.empty());
    }
};

TEST_F(JumboCrossPathTest, AChunkOfTheOtherSizeIsRefusedAlikeOnBothPaths)
{
    for (uint32_t job : {kJobJumbo, kJobJumboHost}) {
        SCOPED_TRACE(job);
        same_refusal(contribution(job, 0, 0, 0).build(), XDP_DROP, XAGG_CNT_DROP_BAD_LENGTH,
                     XAGG_CNT_DROP_BAD_LENGTH);
    }
    same_refusal(jumbo_contribution(kJobA, 0, 0, 0, jumbo_random(1)).build(), XDP_DROP,
                 XAGG_CNT_DROP_BAD_LENGTH, XAGG_CNT_DROP_BAD_LENGTH);
    same_refusal(jumbo_contribution(kJobHost, 0, 0, 0, jumbo_random(2)).build(), XDP_DROP,
                 XAGG_CNT_DROP_BAD_LENGTH, XAGG_CNT_DROP_BAD_LENGTH);
}

TEST_F(JumboCrossPathTest, AChunkBeyondTheJobIsHandedUpAndDroppedThereWithoutState)
{
    // The host job has 1 << 20 slot positions (host_job()): jumbo chunk 349524 takes the last
    // three, 349525 would pass them, and an index whose positions pass 2^32 is no job's.
    const uint32_t last = (1u << 20) / XAGG_JUMBO_SLOT_PARTS - 1;
    for (uint32_t chunk : {last + 1, last + 1000, 0x60000000u}) {
        SCOPED_TRACE(chunk);
        same_refusal(jumbo_contribution(kJobJumbo, 0, 0, chunk, jumbo_random(3)).build(), XDP_PASS,
                     XAGG_CNT_PASS_HOST_OVERFLOW, XAGG_CNT_DROP_BEYOND_JOB);
    }
    std::vector<daemon::HostPs::Reply> replies;
    EXPECT_EQ(counter_name(host_run(
                  jumbo_contribution(kJobJumbo, 0, 0, last, jumbo_random(4)).build(), replies)),
              std::string("aggregated"));
    EXPECT_EQ(counter_name(host_run(
                  jumbo_contribution(kJobJumbo, 1, 0, last, jumbo_random(5)).build(), replies)),
              std::string("completed"));
    EXPECT_EQ(replies.size(), 1u);
}

TEST_F(JumboCrossPathTest, OneSequenceGivesTheSameVerdictsAndSumsOnBothPaths)
{
    same_sequence(kJobJumbo, kJobJumboHost, XAGG_JUMBO_CHUNK_ELEMS, 1000);
}

}  // namespace
}  // namespace xagg::test
