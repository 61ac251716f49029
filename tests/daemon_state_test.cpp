// SPDX-License-Identifier: MIT
// The job table's on-disk schema (daemon/state_schema.hpp): its own versioned document, the
// table bit for bit through it, the unversioned file of xagg 0.1 still read, and a file it
// cannot take refused with what is wrong.
#include <arpa/inet.h>
#include <gtest/gtest.h>

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
    j.chunks = 14;
    j.region_base = 100;
    j.region_chunks = 9;
    j.policy = StragglerPolicy::evict;
    j.timeout_ms = 250;
    j.evict_after = 5;
    j.evicted = 0b0100;
    j.evictions = 2;
    j.weight = 1.5;
    j.iterations = 900;
    j.arrival = 17;
    j.tag = 0xdeadbeef;
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
    EXPECT_EQ(saved.at("version"), 1);
    const auto loaded = state::load(saved);
    ASSERT_EQ(loaded.size(), 1u);
    const Job &j = loaded.at(3);
    EXPECT_EQ(j.region_base, 100u);
    EXPECT_EQ(j.region_chunks, 9u);
    EXPECT_EQ(j.policy, StragglerPolicy::evict);
    EXPECT_EQ(j.evicted, 0b0100u);
    EXPECT_EQ(j.evictions, 2u);
    EXPECT_EQ(j.tag, 0xdeadbeefu);
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
    EXPECT_EQ(loaded.at(5).region_chunks, 2u);
    EXPECT_EQ(loaded.at(5).tag, 77u);
    EXPECT_EQ(loaded.at(5).evict_after, 3u);
    EXPECT_EQ(loaded.at(5).members.size(), 1u);
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
    future["version"] = 2;
    EXPECT_EQ(message(future), "state version 2 is not one this xaggd reads (1)");
    EXPECT_EQ(message(json::object()), "not an xagg state file (no \"schema\": \"xagg-state\")");
    json missing = state::save({{3, sample_job()}});
    missing["jobs"][0].erase("tag");
    EXPECT_NE(message(missing).find("malformed job table"), std::string::npos) << message(missing);
    json policy = state::save({{3, sample_job()}});
    policy["jobs"][0]["straggler_policy"] = "linger";
    EXPECT_EQ(message(policy), "unknown straggler policy 'linger'");
}

}  // namespace
}  // namespace xagg::daemon
