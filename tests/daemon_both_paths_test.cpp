// SPDX-License-Identifier: MIT
// The memory-move protocol of BothPaths (daemon/datapath/both_paths.cpp) against fakes of the
// two paths that record every call and check, at each one, the protocol's invariant: a chunk
// only changes paths while the host path holds it, and the fast path routes a chunk to its
// slots only once they carry the host path's state. Then a crash at every step of a move,
// recovered by daemon/recovery.cpp from the saved table.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/datapath/both_paths.hpp"
#include "daemon/recovery.hpp"

namespace xagg::daemon {
namespace {

constexpr uint32_t kCapacity = 4096;  // chunks of fast-path memory

struct Crash : std::runtime_error {
    Crash() : std::runtime_error("crash") {}
};

// Calls of both fakes, in order, and a crash after `crash_after` mutating calls.
struct Recorder {
    std::vector<std::string> log;
    int mutations = 0;
    int crash_after = -1;
    void mutate(const std::string &what)
    {
        if (crash_after >= 0 && mutations == crash_after)
            throw Crash();
        mutations++;
        log.push_back(what);
    }
};

class FakeHost : public HostStore {
public:
    explicit FakeHost(Recorder &rec) : rec_(rec) {}
    void put_job(const Job &job) override
    {
        rec_.mutate("host.put_job " + std::to_string(job.region_positions));
        jobs[job.id] = job;
    }
    void delete_job(uint32_t id) override { jobs.erase(id); }
    void put_member(uint32_t, const Member &) override {}
    void delete_member(uint32_t, uint32_t) override {}
    void hold(uint32_t id, uint32_t first, uint32_t end) override
    {
        rec_.mutate("host.hold " + std::to_string(first) + " " + std::to_string(end));
        held[id] = {first, end};
    }
    void release(uint32_t id) override
    {
        rec_.mutate("host.release");
        held.erase(id);
    }
    void import_slots(const Job &job, uint32_t first_chunk, std::span<const xagg_slot> in) override
    {
        rec_.mutate("host.import " + std::to_string(first_chunk));
        for (size_t i = 0; i + 1 < in.size(); i += 2) {
            const auto chunk = first_chunk + static_cast<uint32_t>(i / 2);
            EXPECT_TRUE(is_held(job.id, chunk)) << "chunk " << chunk << " imported unheld";
            slots[chunk] = {in[i], in[i + 1]};
        }
    }
    Exported export_slots(uint32_t id, uint32_t first, uint32_t end) override
    {
        rec_.mutate("host.export " + std::to_string(first) + " " + std::to_string(end));
        Exported out;
        for (uint32_t c = first; c < end; c++) {
            EXPECT_TRUE(is_held(id, c)) << "chunk " << c << " exported unheld";
            if (auto it = slots.find(c); it != slots.end()) {
                out.positions.push_back(c);
                out.slots.push_back(it->second[0]);
                out.slots.push_back(it->second[1]);
            }
        }
        return out;
    }
    // The latest state of each slot wins, as HostPs::merge_slots() decides it.
    void merge_slots(const Job &job, uint32_t first, std::span<const xagg_slot> in) override
    {
        rec_.mutate("host.merge " + std::to_string(first));
        for (size_t i = 0; i + 1 < in.size(); i += 2) {
            const auto chunk = first + static_cast<uint32_t>(i / 2);
            for (uint32_t parity : {0u, 1u}) {
                const xagg_slot &from = in[i + parity];
                if (from.tag != job.tag || from.chunk != chunk || !from.seen)
                    continue;
                xagg_slot &to = slots[chunk][parity];
                if (!to.seen || static_cast<int32_t>(from.round - to.round) > 0 ||
                    (from.round == to.round && (from.seen & to.seen) == to.seen &&
                     from.seen != to.seen))
                    to = from;
            }
        }
    }
    std::vector<SlotState> slot_states(const Job &) const override { return {}; }
    Counters counters() const override { return {}; }

    bool is_held(uint32_t id, uint32_t chunk) const
    {
        auto it = held.find(id);
        return it != held.end() && chunk >= it->second.first && chunk < it->second.second;
    }

    std::map<uint32_t, Job> jobs;
    std::map<uint32_t, std::pair<uint32_t, uint32_t>> held;
    std::map<uint32_t, std::array<xagg_slot, 2>> slots;  // by chunk (one job in these tests)

private:
    Recorder &rec_;
};

class FakeFast : public FastMaps {
public:
    FakeFast(Recorder &rec, const FakeHost &host) : rec_(rec), host_(host), slots(2 * kCapacity) {}
    // The invariant: a chunk whose routing changes is held by the host path; one that comes
    // to the fast path already has the host path's state in its slots (checked by the test).
    void put_job(const JobSpec &job) override
    {
        rec_.mutate("fast.put_job " + std::to_string(job.region_positions));
        if (auto it = jobs.find(job.id); it != jobs.end() && move_checks) {
            const uint32_t before = it->second.region_positions, after = job.region_positions;
            for (uint32_t c = std::min(before, after); c < std::max(before, after); c++)
                EXPECT_TRUE(host_.is_held(job.id, c))
                    << "chunk " << c << " changed paths while the host path served it";
        }
        jobs[job.id] = job;
    }
    void delete_job(uint32_t id) override { jobs.erase(id); }
    std::optional<std::pair<uint32_t, uint32_t>> routed_region(uint32_t id) const override
    {
        auto it = jobs.find(id);
        if (it == jobs.end())
            return std::nullopt;
        return std::pair{it->second.region_base, it->second.region_positions};
    }
    void put_member(uint32_t id, uint32_t rank, in_addr, uint16_t) override
    {
        members[id].push_back(rank);
    }
    void delete_member(uint32_t, uint32_t) override {}
    void clear_region(uint32_t base, uint32_t positions) override
    {
        rec_.mutate("fast.clear " + std::to_string(base) + " " + std::to_string(positions));
        std::fill(slots.begin() + 2 * base, slots.begin() + 2 * (base + positions), xagg_slot{});
    }
    void for_each_slot_batch(uint32_t first, uint32_t count, const SlotBatchFn &fn) const override
    {
        for (uint32_t at = first; at < first + count; at += 4096) {
            const uint32_t n = std::min(4096u, first + count - at);
            fn(at, std::span<const xagg_slot>(slots.data() + at, n));
        }
    }
    void write_slots(std::span<const uint32_t> keys, std::span<const xagg_slot> values) override
    {
        rec_.mutate("fast.write " + std::to_string(keys.size()));
        for (size_t i = 0; i < keys.size(); i++)
            slots.at(keys[i]) = values[i];
    }
    Counters counters() const override { return {}; }

private:
    Recorder &rec_;
    const FakeHost &host_;

public:
    std::vector<xagg_slot> slots;
    bool move_checks = true;
    std::map<uint32_t, JobSpec> jobs;
    std::map<uint32_t, std::vector<uint32_t>> members;
};

// A slot holding round `round` of the job's chunk, with a sum that names chunk and parity.
xagg_slot held_slot(const Job &job, uint32_t chunk, uint32_t parity)
{
    xagg_slot s{};
    s.tag = job.tag;
    s.chunk = chunk;
    s.round = parity;
    s.seen = 0b01;
    s.sum[0] = static_cast<int32_t>(chunk * 2 + parity);
    s.sum[XAGG_CHUNK_ELEMS - 1] = -static_cast<int32_t>(chunk);
    return s;
}

Job make_job(uint32_t base, uint32_t region_positions, uint32_t chunks = 1500)
{
    Job job;
    job.id = 7;
    job.workers = 2;
    job.positions = chunks;
    job.gradient_elems = uint64_t{chunks} * XAGG_CHUNK_ELEMS;
    job.region_base = base;
    job.region_positions = region_positions;
    job.tag = 0x5eed;
    job.key = 0x2f64c0d9a31e57b8ull;
    job.group_port = 9872;
    job.members[0] = Member{0, in_addr{htonl(0x0a000001)}, 5000};
    job.members[1] = Member{1, in_addr{htonl(0x0a000002)}, 5001};
    return job;
}

class BothPathsTest : public ::testing::Test {
protected:
    Recorder rec_;
    FakeHost host_{rec_};
    FakeFast fast_{rec_, host_};
    int moves_marked_ = 0;
    BothPaths paths_{&fast_, host_,
                     [this] {
                         moves_marked_++;
                         rec_.log.push_back("marker");
                     },
                     std::chrono::microseconds(0)};

    // The job as it stands before a move, on both paths, its fast region's slots filled.
    void place(const Job &job)
    {
        fast_.move_checks = false;
        paths_.put_job(job);
        fast_.move_checks = true;
        for (uint32_t c = 0; c < job.region_positions; c++)
            for (uint32_t p : {0u, 1u})
                if (c % 3 != 0)  // every third chunk has nothing yet
                    fast_.slots[2 * (job.region_base + c) + p] = held_slot(job, c, p);
        rec_.log.clear();
    }
};

TEST_F(BothPathsTest, ShrinkHandsEverySlotToTheHostPathInStepsEachHeldWhileItMoves)
{
    const Job job = make_job(10, 1200);
    place(job);
    paths_.shrink_fast(job, 100);
    ASSERT_FALSE(rec_.log.empty());
    EXPECT_EQ(rec_.log.front(), "marker") << "the maps are marked mid-move before anything";
    // From the end backwards, in steps of kMoveStep chunks: 1200 -> 688 -> 176 -> 100.
    const std::vector<std::string> want = {
        "marker",           "host.hold 688 1200", "fast.put_job 688",  "host.import 688",
        "host.put_job 688", "host.release",       "host.hold 176 688", "fast.put_job 176",
        "host.import 176",  "host.put_job 176",   "host.release",      "host.hold 100 176",
        "fast.put_job 100", "host.import 100",    "host.put_job 100",  "host.release"};
    EXPECT_EQ(rec_.log, want);
    for (uint32_t c = 100; c < 1200; c++) {
        SCOPED_TRACE("chunk " + std::to_string(c));
        if (c % 3 == 0) {
            EXPECT_FALSE(host_.slots.count(c) && host_.slots[c][0].seen);
            continue;
        }
        ASSERT_TRUE(host_.slots.count(c));
        for (uint32_t p : {0u, 1u}) {
            EXPECT_EQ(host_.slots[c][p].sum[0], static_cast<int32_t>(c * 2 + p));
            EXPECT_EQ(host_.slots[c][p].sum[XAGG_CHUNK_ELEMS - 1], -static_cast<int32_t>(c));
        }
    }
    EXPECT_FALSE(host_.slots.count(99)) << "the fast path keeps its prefix";
    EXPECT_EQ(fast_.jobs.at(7).region_positions, 100u);
    EXPECT_EQ(host_.jobs.at(7).region_positions, 100u);
    EXPECT_TRUE(host_.held.empty());
}

TEST_F(BothPathsTest, GrowWritesTheHostPathsSlotsIntoTheNewRegionBeforeRoutingThere)
{
    // Chunks [0, 50) are on the fast path at base 300; the host path has some of the rest.
    Job job = make_job(300, 50);
    place(job);
    for (uint32_t c = 50; c < 700; c += 7)
        host_.slots[c] = {held_slot(job, c, 0), held_slot(job, c, 1)};
    job.region_positions = 700;
    paths_.grow_fast(job, 50);
    const std::vector<std::string> want = {
        "marker",         "host.hold 50 562",  "host.export 50 562",
        "fast.write 148", "fast.put_job 562",  "host.put_job 562",
        "host.release",   "host.hold 562 700", "host.export 562 700",
        "fast.write 38",  "fast.put_job 700",  "host.put_job 700",
        "host.release",   "fast.put_job 700",  "host.put_job 700"};
    EXPECT_EQ(rec_.log, want);
    for (uint32_t c = 50; c < 700; c++)
        for (uint32_t p : {0u, 1u}) {
            const xagg_slot &s = fast_.slots[2 * (300 + c) + p];
            if (c % 7 == 50 % 7) {
                EXPECT_EQ(s.sum[0], static_cast<int32_t>(c * 2 + p)) << "chunk " << c;
                EXPECT_EQ(s.tag, job.tag);
            } else {
                EXPECT_EQ(s.seen, 0u) << "chunk " << c << " had nothing to bring";
            }
        }
    // The host path keeps its copy of what it handed over (recovery merges copies, newest
    // first), and it is the same state.
    for (const auto &[c, pair] : host_.slots)
        EXPECT_EQ(fast_.slots[2 * (300 + c)].sum[0], pair[0].sum[0]) << "chunk " << c;
}

TEST_F(BothPathsTest, WithoutAFastPathChangesGoToTheHostPathAlone)
{
    Recorder rec;
    FakeHost host(rec);
    BothPaths host_only(nullptr, host, [] { FAIL() << "nothing moves without a fast path"; });
    host_only.put_job(make_job(0, 0));
    host_only.put_member(7, Member{1, in_addr{}, 1});
    EXPECT_EQ(host.jobs.count(7), 1u);
    EXPECT_EQ(host_only.counters(), Counters{});
}

// A crash (kill -9) at every step of a move. The marker was set before the first slot changed
// hands; the pinned fast-path slots and the host path's slot files outlive the process. The next
// start merges every copy of the job's slots on the host path, so that whatever step the crash
// cut short, no chunk loses its state (a result a worker may still need among it), and the
// layout is then restored by an ordinary move, which brings the same state back.
class CrashMidMoveTest : public ::testing::TestWithParam<int> {};

TEST_P(CrashMidMoveTest, LosesNoChunkState)
{
    const auto dir = std::filesystem::temp_directory_path() /
                     ("xagg-crash-" + std::to_string(getpid()) + "-" + std::to_string(GetParam()));
    std::filesystem::create_directories(dir);
    const StateFile state(dir.string());
    const MoveMarker marker(dir.string());
    const Job saved = make_job(10, 1200);
    {
        JobTable table(kCapacity, 8, in_addr{htonl(0xef010000)});
        table.restore({{saved.id, saved}});
        state.save(table);
    }

    Recorder rec;
    FakeHost host(rec);
    FakeFast fast(rec, host);
    BothPaths paths(
        &fast, host, [&] { marker.set(); }, std::chrono::microseconds(0));
    fast.move_checks = false;
    paths.put_job(saved);
    fast.move_checks = true;
    for (uint32_t c = 0; c < 1200; c++)
        fast.slots[2 * (10 + c)] = held_slot(saved, c, 0);
    // The host path serves chunks 1200-1499: one holds a round there too.
    host.slots[1300] = {held_slot(saved, 1300, 0), xagg_slot{}};
    rec.crash_after = rec.mutations + GetParam();
    EXPECT_THROW(paths.shrink_fast(saved, 100), Crash);
    EXPECT_TRUE(marker.present()) << "a move under way is marked on disk";

    // The next start: the same pinned maps (slots and the jobs map as the crash left them) and
    // the host path's slots as the crash left them (their files), in a new process.
    Recorder after;
    FakeHost host2(after);
    host2.slots = host.slots;
    FakeFast fast2(after, host2);
    fast2.move_checks = false;
    fast2.slots = fast.slots;
    fast2.jobs = fast.jobs;
    JobTable table(kCapacity, 8, in_addr{htonl(0xef010000)});
    const Recovery r = recover(state, marker, table, &fast2, host2, /*maps_reused=*/true,
                               std::chrono::microseconds(0));
    EXPECT_TRUE(r.crashed_mid_move);
    EXPECT_FALSE(r.maps_rebuilt);
    EXPECT_TRUE(r.layout_to_restore);
    EXPECT_FALSE(marker.present());
    EXPECT_EQ(fast2.jobs.at(saved.id).region_positions, 0u) << "nothing routed to the fast path";
    EXPECT_EQ(host2.jobs.at(saved.id).region_positions, 0u) << "the host path serves it all";
    EXPECT_EQ(table.find(saved.id)->region_positions, 0u);
    for (uint32_t c : std::vector<uint32_t>{0, 99, 100, 611, 1199, 1300}) {
        ASSERT_EQ(host2.slots.count(c), 1u) << "chunk " << c << " lost its state";
        EXPECT_EQ(host2.slots.at(c)[0].sum[0], static_cast<int32_t>(c * 2)) << "chunk " << c;
        EXPECT_EQ(host2.slots.at(c)[0].seen, 1u) << "chunk " << c;
    }
    for (uint32_t c = 0; c < 1200; c++)
        ASSERT_EQ(host2.slots.count(c), 1u) << "chunk " << c << " lost its state";

    // The layout comes back by an ordinary move, with the same state in the fast path's slots.
    BothPaths paths2(
        &fast2, host2, [] {}, std::chrono::microseconds(0));
    fast2.move_checks = true;
    Job back = *table.find(saved.id);
    back.region_base = 10;
    back.region_positions = 1200;
    paths2.grow_fast(back, 0);
    for (uint32_t c = 0; c < 1200; c++)
        ASSERT_EQ(fast2.slots[2 * (10 + c)].sum[0], static_cast<int32_t>(c * 2)) << "chunk " << c;
    EXPECT_EQ(fast2.jobs.at(saved.id).region_positions, 1200u);
    std::filesystem::remove_all(dir);
}

// The shrink above makes 15 mutating calls (3 steps of 5): crash before each of them.
INSTANTIATE_TEST_SUITE_P(AtEveryStep, CrashMidMoveTest, ::testing::Range(0, 15));

TEST(Recovery, ACleanStartWithoutAMarkerKeepsThePinnedMapsAsTheyAre)
{
    const auto dir =
        std::filesystem::temp_directory_path() / ("xagg-recovery-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const StateFile state(dir.string());
    const MoveMarker marker(dir.string());
    const Job saved = make_job(0, 64);
    JobTable table(kCapacity, 8, in_addr{});
    table.restore({{saved.id, saved}});
    state.save(table);

    Recorder rec;
    FakeHost host(rec);
    FakeFast fast(rec, host);
    fast.slots[0] = held_slot(saved, 0, 0);
    JobTable loaded(kCapacity, 8, in_addr{});
    const Recovery r = recover(state, marker, loaded, &fast, host, /*maps_reused=*/true);
    EXPECT_EQ(r.jobs, 1u);
    EXPECT_FALSE(r.maps_rebuilt);
    EXPECT_EQ(rec.log, std::vector<std::string>{"host.put_job 64"})
        << "the host path gets the table; nothing is written into the reused maps";
    EXPECT_EQ(fast.slots[0].sum[0], 0 * 2 + 0);
    EXPECT_EQ(fast.slots[0].seen, 1u) << "sums in flight survive a restart";
    EXPECT_EQ(host.jobs.at(saved.id).members.size(), 2u);
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace xagg::daemon
