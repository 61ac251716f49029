// SPDX-License-Identifier: MIT
// The control API against the job table, with a recording datapath at its edge: valid requests
// change the table and the maps together, refused ones change neither.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <vector>

#include "control.hpp"

namespace xagg::daemon {
namespace {

using nlohmann::json;

class RecordingDatapath : public Datapath {
public:
    void put_job(const Job &job) override { log.push_back("put_job " + std::to_string(job.id)); }
    void delete_job(uint32_t id) override { log.push_back("delete_job " + std::to_string(id)); }
    void put_member(uint32_t id, const Member &m) override
    {
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &m.addr, a, sizeof(a));
        log.push_back("put_member " + std::to_string(id) + ":" + std::to_string(m.rank) + " " + a +
                      ":" + std::to_string(m.port));
    }
    void delete_member(uint32_t id, uint32_t rank) override
    {
        log.push_back("delete_member " + std::to_string(id) + ":" + std::to_string(rank));
    }
    void clear_region(uint32_t base, uint32_t chunks) override
    {
        log.push_back("clear " + std::to_string(base) + "+" + std::to_string(chunks));
    }
    Counters counters() const override
    {
        Counters c{};
        c[XAGG_CNT_COMPLETED] = 42;
        return c;
    }
    std::vector<std::string> log;
};

class ControlTest : public ::testing::Test {
protected:
    ControlTest() : jobs_(1000, 8, group_base()), api_(jobs_, dp_, 9871, [this] { saves_++; }) {}
    static in_addr group_base()
    {
        in_addr a{};
        inet_pton(AF_INET, "239.77.0.0", &a);
        return a;
    }
    json call(const std::string &line) { return json::parse(api_.handle_line(line)); }

    // A refused request: the error is the expected one and nothing changed anywhere.
    void expect_refused(const std::string &line, const std::string &error)
    {
        json before = jobs_.to_json();
        size_t log_size = dp_.log.size();
        int saves = saves_;
        json reply = call(line);
        EXPECT_EQ(reply["ok"], false) << line;
        EXPECT_EQ(reply["error"], error) << line;
        EXPECT_EQ(jobs_.to_json(), before) << line;
        EXPECT_EQ(dp_.log.size(), log_size) << line;
        EXPECT_EQ(saves_, saves) << line;
    }

    JobTable jobs_;
    RecordingDatapath dp_;
    ControlApi api_;
    int saves_ = 0;
};

TEST_F(ControlTest, CreateJoinShowLeaveDelete)
{
    json r = call(R"({"op":"create_job","workers":2,"gradient_elems":1000,"policy":"evict"})");
    ASSERT_EQ(r["ok"], true) << r;
    EXPECT_EQ(r["job"]["id"], 1);
    EXPECT_EQ(r["job"]["chunks"], 4);  // ceil(1000 / 256)
    EXPECT_EQ(r["job"]["fast_path_chunks"], 4);
    EXPECT_EQ(r["job"]["host_path_chunks"], 0);
    EXPECT_EQ(r["job"]["group"], "239.77.0.1");
    EXPECT_EQ(r["job"]["policy"], "evict");
    r = call(R"({"op":"join","job":1,"rank":0,"addr":"10.0.0.1","port":9872})");
    ASSERT_EQ(r["ok"], true) << r;
    EXPECT_EQ(r["aggregator"]["port"], 9871);
    EXPECT_EQ(r["job"]["members"].size(), 1u);
    // Joining again from the same address is idempotent.
    EXPECT_EQ(call(R"({"op":"join","job":1,"rank":0,"addr":"10.0.0.1","port":9872})")["ok"], true);
    r = call(R"({"op":"show_job","job":1})");
    EXPECT_EQ(r["job"]["members"][0]["addr"], "10.0.0.1");
    EXPECT_EQ(call(R"({"op":"leave","job":1,"rank":0})")["ok"], true);
    EXPECT_EQ(call(R"({"op":"delete_job","job":1})")["ok"], true);
    EXPECT_EQ(call(R"({"op":"list_jobs"})")["jobs"].size(), 0u);
    EXPECT_EQ(dp_.log, (std::vector<std::string>{
                           "clear 0+4", "put_job 1", "put_member 1:0 10.0.0.1:9872",
                           "put_member 1:0 10.0.0.1:9872", "delete_member 1:0", "delete_job 1"}));
    EXPECT_EQ(saves_, 5);  // every change, and only changes, is persisted
}

TEST_F(ControlTest, MemoryBeyondTheBudgetGoesToTheHostPath)
{
    // 1000 chunks of capacity: the first job takes 600, the second gets the 400 left.
    call(R"({"op":"create_job","workers":2,"gradient_elems":153600})");
    json r = call(R"({"op":"create_job","workers":2,"gradient_elems":153600})");
    EXPECT_EQ(r["job"]["region_base"], 600);
    EXPECT_EQ(r["job"]["fast_path_chunks"], 400);
    EXPECT_EQ(r["job"]["host_path_chunks"], 200);
    EXPECT_EQ(call(R"({"op":"stats"})")["fast_path_chunks_used"], 1000);
    // Deleting the first frees its range for the next job.
    call(R"({"op":"delete_job","job":1})");
    r = call(R"({"op":"create_job","workers":1,"gradient_elems":256})");
    EXPECT_EQ(r["job"]["id"], 1);
    EXPECT_EQ(r["job"]["region_base"], 0);
    EXPECT_EQ(r["job"]["fast_path_chunks"], 1);
}

TEST_F(ControlTest, BadRequestsAreRefusedAndChangeNothing)
{
    call(R"({"op":"create_job","id":5,"workers":2,"gradient_elems":512})");
    call(R"({"op":"join","job":5,"rank":0,"addr":"10.0.0.1","port":9872})");
    expect_refused("not json", "not a JSON object");
    expect_refused("[1,2]", "a request is a JSON object with a string 'op'");
    expect_refused(R"({"op":"fly"})", "unknown op 'fly'");
    expect_refused(R"({"op":"create_job","workers":2})", "missing field 'gradient_elems'");
    expect_refused(R"({"op":"create_job","workers":65,"gradient_elems":1})",
                   "'workers' must be at most 64");
    expect_refused(R"({"op":"create_job","workers":-1,"gradient_elems":1})",
                   "'workers' must be a non-negative integer");
    expect_refused(R"({"op":"create_job","workers":0,"gradient_elems":1})",
                   "workers must be 1..64");
    expect_refused(R"({"op":"create_job","workers":"2","gradient_elems":1})",
                   "'workers' must be a non-negative integer");
    expect_refused(R"({"op":"create_job","workers":2,"gradient_elems":1,"colour":"red"})",
                   "unknown field 'colour'");
    expect_refused(R"({"op":"create_job","workers":2,"gradient_elems":1,"policy":"panic"})",
                   "'policy' must be \"wait\" or \"evict\"");
    expect_refused(R"({"op":"create_job","id":5,"workers":2,"gradient_elems":1})", "job 5 exists");
    expect_refused(R"({"op":"join","job":9,"rank":0,"addr":"10.0.0.1","port":1})", "no job 9");
    expect_refused(R"({"op":"join","job":5,"rank":2,"addr":"10.0.0.3","port":1})",
                   "rank 2 is not below the job's 2 workers");
    expect_refused(R"({"op":"join","job":5,"rank":1,"addr":"10.0.0.300","port":1})",
                   "'addr' must be an IPv4 address");
    expect_refused(R"({"op":"join","job":5,"rank":0,"addr":"10.0.0.2","port":9872})",
                   "rank 0 is taken by 10.0.0.1:9872; leave first");
    expect_refused(R"({"op":"join","job":5,"rank":1,"addr":"10.0.0.1","port":9872})",
                   "10.0.0.1:9872 already joined as rank 0");
    expect_refused(R"({"op":"leave","job":5,"rank":1})", "rank 1 is not a member of job 5");
    expect_refused(std::string(kMaxRequestBytes + 1, ' '), "request larger than 65536 bytes");
    json stats = call(R"({"op":"stats"})");
    EXPECT_EQ(stats["request_errors"], 18);
    EXPECT_EQ(stats["counters"]["completed"], 42);
}

TEST_F(ControlTest, LogLevelChangesAtRunTime)
{
    json r = call(R"({"op":"set_log_level","level":"debug"})");
    EXPECT_EQ(r["ok"], true) << r;
    EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
    expect_refused(R"({"op":"set_log_level","level":"loud"})",
                   "'level' must be one of trace, debug, info, warn, error");
    EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
    call(R"({"op":"set_log_level","level":"info"})");
    EXPECT_EQ(spdlog::get_level(), spdlog::level::info);
}

TEST_F(ControlTest, TheTableSurvivesARoundTripThroughItsSavedForm)
{
    call(R"({"op":"create_job","workers":3,"gradient_elems":2560,"fanout":true,"weight":2.5})");
    call(R"({"op":"join","job":1,"rank":2,"addr":"10.0.0.3","port":9000})");
    JobTable restored(1000, 8, group_base());
    restored.load_json(jobs_.to_json());
    EXPECT_EQ(restored.to_json(), jobs_.to_json());
    JobTable broken(1000, 8, group_base());
    EXPECT_THROW(broken.load_json(json::parse(R"([{"id":1}])")), std::invalid_argument);
}

}  // namespace
}  // namespace xagg::daemon
