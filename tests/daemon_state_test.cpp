// SPDX-License-Identifier: MIT
// The job table's on-disk schema (daemon/state_schema.hpp): its own versioned document, the
// table bit for bit through it, the unversioned file of xagg 0.1 still read, and a file it
// cannot take refused with what is wrong.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "daemon/recovery.hpp"
#include "daemon/state_schema.hpp"

namespace xagg::daemon {
namespace {

using nlohmann::json;

Job sample_job()
{
    Job j;
    j.id = 3;
    j.workers = 4;
    j.gradient_elems = 10000;
    j.positions = 14;
    j.region_base = 100;
    j.region_positions = 9;
    j.policy = StragglerPolicy::evict;
    j.timeout_ms = 250;
    j.evict_after = 5;
    j.evicted = 0b0100;
    j.evictions = 2;
    j.weight = 1.5;
    j.iterations = 900;
    j.arrival = 17;
    j.tag = 0xdeadbeef;
    j.key = 0x5ec2e79a41b03d16;
    j.fanout = true;
    inet_pton(AF_INET, "239.1.0.3", &j.group);
    j.group_port = 9872;
    in_addr a{};
    inet_pton(AF_INET, "10.0.0.2", &a);
    j.members[1] = Member{1, a, 5001};
    return j;
}

TEST(StateSchema, IsVersionedAndKeepsEveryFieldOfEveryJob)
{
    const json saved = state::save({{3, sample_job()}});
    EXPECT_EQ(saved.at("schema"), "xagg-state");
    EXPECT_EQ(saved.at("version"), 2);
    EXPECT_EQ(saved.at("jobs")[0].at("key"), "5ec2e79a41b03d16");
    const auto loaded = state::load(saved);
    ASSERT_EQ(loaded.size(), 1u);
    const Job &j = loaded.at(3);
    EXPECT_EQ(j.region_base, 100u);
    EXPECT_EQ(j.region_positions, 9u);
    EXPECT_EQ(j.policy, StragglerPolicy::evict);
    EXPECT_EQ(j.evicted, 0b0100u);
    EXPECT_EQ(j.evictions, 2u);
    EXPECT_EQ(j.tag, 0xdeadbeefu);
    EXPECT_EQ(j.key, 0x5ec2e79a41b03d16u);
    EXPECT_EQ(j.arrival, 17u);
    EXPECT_TRUE(j.fanout);
    EXPECT_EQ(ipv4_string(j.group), "239.1.0.3");
    ASSERT_EQ(j.members.count(1), 1u);
    EXPECT_EQ(ipv4_string(j.members.at(1).addr), "10.0.0.2");
    EXPECT_EQ(j.members.at(1).port, 5001);
    EXPECT_EQ(state::save(loaded), saved);
}

TEST(StateSchema, ReadsTheUnversionedTableOfXagg01)
{
    // What xagg 0.1 wrote: the API's job objects in a bare array.
    const json old = json::parse(R"([{"id":5,"workers":2,"gradient_elems":1536,"chunks":2,
        "region_base":0,"fast_path_chunks":2,"host_path_chunks":0,"policy":"wait",
        "timeout_ms":1000,"weight":1.0,"host_path":false,"fanout":false,"group":"239.1.0.5",
        "group_port":9872,"tag":77,"members":[{"rank":0,"addr":"10.0.0.1","port":5000}]}])");
    const auto loaded = state::load(old);
    ASSERT_EQ(loaded.count(5), 1u);
    EXPECT_EQ(loaded.at(5).region_positions, 2u);
    EXPECT_EQ(loaded.at(5).tag, 77u);
    EXPECT_EQ(loaded.at(5).evict_after, 3u);
    EXPECT_EQ(loaded.at(5).members.size(), 1u);
    EXPECT_NE(loaded.at(5).key, 0u);  // a fresh one
}

TEST(StateSchema, ReadsVersion1GivingEachJobAFreshKey)
{
    json v1 = state::save({{3, sample_job()}});
    v1["version"] = 1;
    v1["jobs"][0].erase("key");
    const auto loaded = state::load(v1);
    ASSERT_EQ(loaded.count(3), 1u);
    EXPECT_EQ(loaded.at(3).tag, 0xdeadbeefu);
    EXPECT_NE(loaded.at(3).key, 0u);
    EXPECT_NE(loaded.at(3).key, 0x5ec2e79a41b03d16u);
}

TEST(StateFile, HoldsTheKeysReadableByTheDaemonAlone)
{
    const auto dir =
        std::filesystem::temp_directory_path() / ("xagg-state-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    JobTable table(1024, 16, in_addr{htonl(0xef010000)});
    api::CreateJob request;
    request.workers = 2;
    request.gradient_elems = 1000;
    const uint64_t key = table.create(request).key;
    const StateFile file(dir.string());
    file.save(table);
    EXPECT_EQ(std::filesystem::status(file.path()).permissions(),
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    JobTable loaded(1024, 16, in_addr{htonl(0xef010000)});
    file.load_into(loaded);
    EXPECT_EQ(loaded.jobs().begin()->second.key, key);
    std::filesystem::remove_all(dir);
}

TEST(StateSchema, RefusesWhatItCannotTakeSayingWhat)
{
    const auto message = [](const json &j) {
        try {
            state::load(j);
        } catch (const std::invalid_argument &e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    json future = state::save({{3, sample_job()}});
    future["version"] = 3;
    EXPECT_EQ(message(future), "state version 3 is not one this xaggd reads (1 or 2)");
    EXPECT_EQ(message(json::object()), "not an xagg state file (no \"schema\": \"xagg-state\")");
    json missing = state::save({{3, sample_job()}});
    missing["jobs"][0].erase("tag");
    EXPECT_NE(message(missing).find("malformed job table"), std::string::npos) << message(missing);
    json policy = state::save({{3, sample_job()}});
    policy["jobs"][0]["straggler_policy"] = "linger";
    EXPECT_EQ(message(policy), "unknown straggler policy 'linger'");
    json zero_key = state::save({{3, sample_job()}});
    zero_key["jobs"][0]["key"] = "0000000000000000";
    EXPECT_EQ(message(zero_key), "job key '0000000000000000' is not 16 hex digits, not all zero");
    zero_key["jobs"][0]["key"] = "5ec2e79a41b03d1";
    EXPECT_EQ(message(zero_key), "job key '5ec2e79a41b03d1' is not 16 hex digits, not all zero");
}

}  // namespace
}  // namespace xagg::daemon
