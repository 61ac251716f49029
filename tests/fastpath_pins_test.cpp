// SPDX-License-Identifier: MIT
// The fast path's pinned maps across restarts: maps that fit are taken over with what they hold;
// maps of another layout (an upgrade that changed a shared struct) or another size (a changed
// max_positions) are replaced by fresh ones instead of failing the load at every restart.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "lib/fastpath/fastpath.hpp"
#include "xagg/fastpath.h"

namespace xagg::test {
namespace {

class FastPathPins : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (geteuid() != 0)
            GTEST_SKIP() << "loading BPF and pinning in bpffs need root (CAP_BPF)";
        dir_ = "/sys/fs/bpf/xagg-pins-test-" + std::to_string(getpid());
        std::filesystem::remove_all(dir_);
        ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0) << "is bpffs mounted on /sys/fs/bpf?";
        config_.max_positions = 64;
        config_.max_jobs = 8;
        config_.pin_dir = dir_;
    }
    void TearDown() override
    {
        if (!dir_.empty())
            std::filesystem::remove_all(dir_);
    }

    // A slot holding a partial sum, as a crashed run would leave it.
    static xagg_slot held()
    {
        xagg_slot s{};
        s.tag = 0x51;
        s.seen = 0b1;
        s.sum[0] = 77;
        return s;
    }

    // Loads the fast path over whatever is pinned; its slot 0 is written when `write` is set.
    // Returns what it found: whether it reused the pins, and slot 0.
    std::pair<bool, xagg_slot> start(bool write = false)
    {
        FastPath fp(config_);
        fp.load();
        if (write) {
            const uint32_t key = 0;
            const xagg_slot s = held();
            fp.write_slots({&key, 1}, {&s, 1});
        }
        return {fp.reused_pinned_maps(), fp.slot(0)};
    }

    std::string dir_;
    FastPathConfig config_;
};

TEST_F(FastPathPins, MapsThatFitAreTakenOverWithTheSumsTheyHold)
{
    EXPECT_FALSE(start(/*write=*/true).first);
    auto [reused, slot] = start();
    EXPECT_TRUE(reused);
    EXPECT_EQ(slot.seen, 0b1u);
    EXPECT_EQ(slot.sum[0], 77);
}

TEST_F(FastPathPins, AnotherMaxChunksGetsFreshMapsInsteadOfAFailedLoad)
{
    start(/*write=*/true);
    config_.max_positions = 128;
    auto [reused, slot] = start();
    EXPECT_FALSE(reused);
    EXPECT_EQ(slot.seen, 0u) << "a fresh slots map";
    EXPECT_TRUE(start().first) << "the fresh maps were pinned in their turn";
}

// The upgrade to protocol version 3 grew xagg_job by its key: a jobs map pinned by the older
// build has the older value size.
TEST_F(FastPathPins, AJobsMapOfAnOlderLayoutIsReplacedAndTheOtherPinsWithIt)
{
    start(/*write=*/true);
    const std::string jobs = dir_ + "/jobs";
    ASSERT_EQ(unlink(jobs.c_str()), 0);
    int old = bpf_map_create(BPF_MAP_TYPE_HASH, "jobs", sizeof(uint32_t),
                             sizeof(xagg_job) - sizeof(uint64_t), config_.max_jobs, nullptr);
    ASSERT_GE(old, 0);
    ASSERT_EQ(bpf_obj_pin(old, jobs.c_str()), 0);
    close(old);
    auto [reused, slot] = start();
    EXPECT_FALSE(reused);
    EXPECT_EQ(slot.seen, 0u) << "slots go with the jobs map whose owners they are tagged with";
}

}  // namespace
}  // namespace xagg::test
