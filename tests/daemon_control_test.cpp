// SPDX-License-Identifier: MIT
// The control API against the job table, with a recording datapath at its edge: valid requests
// change the table and the maps together, refused ones change neither.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <vector>

#include <unistd.h>

#include "daemon/control/control_api.hpp"
#include "daemon/state_schema.hpp"
#include "xagg/release.h"

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
    void shrink_fast(const Job &job, uint32_t keep) override
    {
        log.push_back("shrink_fast " + region(job) + " to " + std::to_string(keep));
    }
    void grow_fast(const Job &job, uint32_t from) override
    {
        log.push_back("grow_fast " + region(job) + " from " + std::to_string(from));
    }
    static std::string region(const Job &job)
    {
        return std::to_string(job.id) + " " + std::to_string(job.region_base) + "+" +
               std::to_string(job.region_positions);
    }
    std::vector<SlotState> slot_states(const Job &) const override { return states; }
    Counters counters() const override
    {
        Counters c{};
        c[XAGG_CNT_COMPLETED] = 42;
        c[XAGG_CNT_AGGREGATED] = 100;
        c[XAGG_CNT_SUMMED_VALUES] = 142 * XAGG_CHUNK_ELEMS;
        return c;
    }
    Counters host_counters() const override
    {
        Counters c{};
        c[XAGG_CNT_COMPLETED] = 3;
        c[XAGG_CNT_SUMMED_VALUES] = 3 * XAGG_JUMBO_CHUNK_ELEMS;  // a jumbo job's: 8 KiB each
        return c;
    }
    std::vector<std::string> log;
    std::vector<SlotState> states;
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
    json call(const std::string &line) { return json::parse(api_.handle_line(line).text); }

    // A refused request: the error is the expected one and nothing changed anywhere.
    void expect_refused(const std::string &line, const std::string &error)
    {
        json before = state::save(jobs_.jobs());
        size_t log_size = dp_.log.size();
        int saves = saves_;
        json reply = call(line);
        EXPECT_EQ(reply["ok"], false) << line;
        EXPECT_TRUE(api::refusal_named(reply.value("code", "")).has_value()) << line;
        EXPECT_EQ(reply["error"], error) << line;
        EXPECT_EQ(state::save(jobs_.jobs()), before) << line;
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
    json r = call(R"({"op":"create_job","workers":2,"gradient_elems":3000,"policy":"evict"})");
    ASSERT_EQ(r["ok"], true) << r;
    EXPECT_EQ(r["job"]["id"], 1);
    EXPECT_EQ(r["job"]["chunks"], 4);  // ceil(3000 / 768)
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
                           "put_job 1", "grow_fast 1 0+4 from 0", "put_member 1:0 10.0.0.1:9872",
                           "put_member 1:0 10.0.0.1:9872", "delete_member 1:0", "delete_job 1"}));
    EXPECT_EQ(saves_, 5);  // every change, and only changes, is persisted
}

// A jumbo job counts its own chunks to users, and takes three slot positions of memory per chunk,
// whole chunks only, wherever the division of memory would cut one.
TEST_F(ControlTest, JumboJobsCountTheirChunksAndTakeWholeChunksOfMemory)
{
    json r = call(R"({"op":"create_job","workers":2,"gradient_elems":409600,"chunk_elems":2048})");
    ASSERT_EQ(r["ok"], true) << r;
    EXPECT_EQ(r["job"]["chunk_elems"], 2048);
    EXPECT_EQ(r["job"]["chunks"], 200);  // 409600 / 2048
    EXPECT_EQ(r["job"]["fast_path_chunks"], 200);
    EXPECT_EQ(jobs_.find(1)->region_positions, 600u) << "three positions per chunk";
    // A standard job of weight 3 arrives and gets the 600 positions it needs of the 1000; the
    // 400 left are not a whole number of jumbo chunks: the jumbo job keeps 133 (399 positions).
    r = call(R"({"op":"create_job","workers":2,"gradient_elems":460800,"weight":3})");
    ASSERT_EQ(r["ok"], true) << r;
    r = call(R"({"op":"show_job","job":1})");
    EXPECT_EQ(r["job"]["fast_path_chunks"], 133);
    EXPECT_EQ(r["job"]["host_path_chunks"], 67);
    EXPECT_EQ(jobs_.find(1)->region_positions % XAGG_JUMBO_SLOT_PARTS, 0u);
    EXPECT_EQ(call(R"({"op":"list_jobs"})")["jobs"][1]["chunk_elems"], 768);
}

TEST_F(ControlTest, MemoryIsRedividedByWeightAsJobsComeAndGo)
{
    // 1000 chunks of capacity, 256 guaranteed per job. Alone, a 600-chunk job gets all it needs.
    call(R"({"op":"create_job","workers":2,"gradient_elems":460800})");
    EXPECT_EQ(call(R"({"op":"show_job","job":1})")["job"]["fast_path_chunks"], 600);
    // A second one of weight 3: both get 256, the 488 left are shared 1:3. Job 2's 344 more
    // fit in its 366; job 1 gets the other 144. Job 1 moves out and back in, smaller.
    dp_.log.clear();
    json r = call(R"({"op":"create_job","workers":2,"gradient_elems":460800,"weight":3})");
    EXPECT_EQ(r["job"]["region_base"], 400);
    EXPECT_EQ(r["job"]["fast_path_chunks"], 600);
    EXPECT_EQ(r["job"]["host_path_chunks"], 0);
    r = call(R"({"op":"show_job","job":1})");
    EXPECT_EQ(r["job"]["fast_path_chunks"], 400);
    EXPECT_EQ(r["job"]["host_path_chunks"], 200);
    EXPECT_EQ(dp_.log, (std::vector<std::string>{"put_job 2", "shrink_fast 1 0+600 to 400",
                                                 "grow_fast 1 0+400 from 400",
                                                 "grow_fast 2 400+600 from 0"}));
    EXPECT_EQ(call(R"({"op":"stats"})")["fast_path_positions_used"], 1000);
    // A host-path job takes no memory and moves nobody.
    dp_.log.clear();
    call(R"({"op":"create_job","workers":1,"gradient_elems":768,"host_path":true})");
    EXPECT_EQ(dp_.log, (std::vector<std::string>{"put_job 3"}));
    // Job 2 leaves: job 1 grows back into its memory.
    dp_.log.clear();
    call(R"({"op":"delete_job","job":2})");
    // Job 1 keeps its 400 chunks where they are; only the 200 it gains move.
    EXPECT_EQ(dp_.log, (std::vector<std::string>{"delete_job 2", "grow_fast 1 0+600 from 400"}));
}

TEST_F(ControlTest, UnderBenefitTheJobNearestItsEndGetsTheMemoryAndItMovesAsThatChanges)
{
    // 1000 chunks, 256 guaranteed each: job 2 (100 iterations left) outranks job 1 (1000 left)
    // and gets all 600 it needs; job 1 the 400 left.
    call(R"({"op":"create_job","workers":2,"gradient_elems":460800,"iterations":1000})");
    call(R"({"op":"create_job","workers":2,"gradient_elems":460800,"iterations":100})");
    EXPECT_EQ(call(R"({"op":"show_job","job":1})")["job"]["fast_path_chunks"], 400);
    EXPECT_EQ(call(R"({"op":"show_job","job":2})")["job"]["fast_path_chunks"], 600);
    EXPECT_EQ(call(R"({"op":"show_job","job":1})")["job"]["iterations"], 1000);
    // Progress that keeps the order moves nothing.
    dp_.log.clear();
    int saves = saves_;
    api_.note_progress({{1, 500}, {2, 10}});
    EXPECT_TRUE(dp_.log.empty());
    EXPECT_EQ(saves_, saves);
    // Job 1 is now 10 rounds from its end, job 2 still 90: the memory moves, and is saved.
    api_.note_progress({{1, 990}, {2, 10}});
    EXPECT_EQ(call(R"({"op":"show_job","job":1})")["job"]["fast_path_chunks"], 600);
    EXPECT_EQ(call(R"({"op":"show_job","job":2})")["job"]["fast_path_chunks"], 400);
    EXPECT_EQ(dp_.log,
              (std::vector<std::string>{"shrink_fast 2 400+600 to 0", "grow_fast 1 0+600 from 400",
                                        "grow_fast 2 600+400 from 0"}));
    EXPECT_EQ(saves_, saves + 1);
}

TEST(FairLayoutTest, MinimumsWhileTheyFitThenWeightedShares)
{
    in_addr group{};
    inet_pton(AF_INET, "239.77.0.0", &group);
    JobTable table(1000, 8, group, 256);
    for (int i = 0; i < 5; i++) {
        api::CreateJob r;
        r.workers = 2;
        r.gradient_elems = 1000 * XAGG_CHUNK_ELEMS;
        table.create(r);
    }
    // Three minimums fit (768); the 232 left go 46 each, the 2 the rounding leaves to jobs 1, 2.
    auto layout = table.layout();
    EXPECT_EQ(layout[1], (Region{0, 303}));
    EXPECT_EQ(layout[2], (Region{303, 303}));
    EXPECT_EQ(layout[3], (Region{606, 302}));
    EXPECT_EQ(layout[4], (Region{908, 46}));
    EXPECT_EQ(layout[5], (Region{954, 46}));
}

TEST_F(ControlTest, EvictedRankIsNoLongerWaitedForUntilItJoinsAgain)
{
    call(R"({"op":"create_job","workers":3,"gradient_elems":768,"policy":"evict"})");
    for (int rank = 0; rank < 3; rank++)
        call(R"({"op":"join","job":1,"rank":)" + std::to_string(rank) +
             R"(,"addr":"10.0.0.1","port":)" + std::to_string(9000 + rank) + "}");
    dp_.log.clear();
    json r = call(R"({"op":"evict","job":1,"rank":2})");
    ASSERT_EQ(r["ok"], true) << r;
    EXPECT_EQ(r["job"]["evicted_ranks"], json::parse("[2]"));
    EXPECT_EQ(r["job"]["evictions"], 1);
    EXPECT_EQ(r["job"]["members"].size(), 2u);
    EXPECT_EQ(jobs_.find(1)->member_bitmap(), 0b011u);
    EXPECT_EQ(dp_.log, (std::vector<std::string>{"delete_member 1:2", "put_job 1"}));
    expect_refused(R"({"op":"evict","job":1,"rank":2})", "rank 2 of job 1 is already evicted");
    EXPECT_EQ(call(R"({"op":"evict","job":1,"rank":1})")["ok"], true);
    expect_refused(R"({"op":"evict","job":1,"rank":0})", "rank 0 is the last of job 1");
    // Rank 2 comes back: chunks wait for it again.
    dp_.log.clear();
    r = call(R"({"op":"join","job":1,"rank":2,"addr":"10.0.0.1","port":9002})");
    EXPECT_EQ(r["job"]["evicted_ranks"], json::parse("[1]"));
    EXPECT_EQ(jobs_.find(1)->member_bitmap(), 0b101u);
    EXPECT_EQ(dp_.log, (std::vector<std::string>{"put_member 1:2 10.0.0.1:9002", "put_job 1"}));
}

TEST_F(ControlTest, BadRequestsAreRefusedAndChangeNothing)
{
    call(R"({"op":"create_job","id":5,"workers":2,"gradient_elems":1536})");
    call(R"({"op":"join","job":5,"rank":0,"addr":"10.0.0.1","port":9872})");
    expect_refused("not json", "not a JSON object");
    expect_refused("[1,2]", "a request is a JSON object with a string 'op'");
    expect_refused(R"({"op":"fly"})", "unknown op 'fly'");
    expect_refused(R"({"op":"create_job","workers":2})", "missing field 'gradient_elems'");
    expect_refused(R"({"op":"create_job","workers":65,"gradient_elems":3})",
                   "'workers' must be at most 64");
    expect_refused(R"({"op":"create_job","workers":-1,"gradient_elems":3})",
                   "'workers' must be a non-negative integer");
    expect_refused(R"({"op":"create_job","workers":0,"gradient_elems":3})",
                   "workers must be 1..64");
    expect_refused(R"({"op":"create_job","workers":"2","gradient_elems":3})",
                   "'workers' must be a non-negative integer");
    expect_refused(R"({"op":"create_job","workers":2,"gradient_elems":3,"colour":"red"})",
                   "unknown field 'colour'");
    expect_refused(R"({"op":"create_job","workers":2,"gradient_elems":3,"policy":"panic"})",
                   "'policy' must be \"wait\" or \"evict\"");
    expect_refused(R"({"op":"create_job","id":5,"workers":2,"gradient_elems":3})", "job 5 exists");
    expect_refused(R"({"op":"create_job","workers":2,"gradient_elems":3,"chunk_elems":1024})",
                   "chunk_elems must be 768 or 2048");
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
    EXPECT_EQ(stats["request_errors"], 19);
    EXPECT_EQ(stats["counters"]["completed"], 42);
}

TEST_F(ControlTest, AWrongTokenIsRefusedAsUnauthorized)
{
    const Credentials credentials{"0123456789abcdef", {{"vision", 100, 199, "vision-0123456789"}}};
    const auto call_with = [&](const std::string &line) {
        return json::parse(api_.handle_line(line, &credentials).text);
    };
    for (const char *line :
         {R"({"op":"stats","token":"0123456789abcdeF"})", R"({"op":"stats"})",
          R"({"op":"stats","token":7})", R"({"op":"stats","token":""})", R"(not json)"}) {
        ControlReply reply = api_.handle_line(line, &credentials);
        EXPECT_EQ(
            json::parse(reply.text),
            json::parse(R"({"ok":false,"code":"bad_token","error":"missing or wrong token"})"))
            << line;
        EXPECT_TRUE(reply.unauthorized) << line;
    }
    EXPECT_EQ(call_with(R"({"op":"stats","token":"0123456789abcdef"})")["ok"], true);
    // A tenant's token is known, but stats is not its to read.
    EXPECT_EQ(call_with(R"({"op":"stats","token":"vision-0123456789"})")["code"], "forbidden");
}

// What a tenant's token may do, request by request: its own jobs' whole life, and nothing of
// another tenant's jobs or of the node's. The admin token (and the Unix socket) may do all.
TEST_F(ControlTest, ATenantsTokenReachesOnlyItsOwnJobs)
{
    const Credentials credentials{
        "admin-0123456789",
        {{"vision", 100, 101, "vision-0123456789"}, {"speech", 200, 299, "speech-0123456789"}}};
    const auto as = [&](const std::string &token, json request) {
        request["token"] = token;
        return json::parse(api_.handle_line(request.dump(), &credentials).text);
    };
    const std::string vision = "vision-0123456789", speech = "speech-0123456789",
                      admin = "admin-0123456789";
    // Without an id, a tenant's job takes the lowest free id of its range.
    EXPECT_EQ(
        as(vision, {{"op", "create_job"}, {"workers", 2}, {"gradient_elems", 768}})["job"]["id"],
        100);
    EXPECT_EQ(
        as(speech, {{"op", "create_job"}, {"workers", 2}, {"gradient_elems", 768}})["job"]["id"],
        200);
    EXPECT_EQ(
        as(admin, {{"op", "create_job"}, {"id", 7}, {"workers", 1}, {"gradient_elems", 768}})["ok"],
        true);
    struct Case {
        const std::string *token;
        json request;
        std::string expect;  // "ok", or the refusal code
    };
    const std::vector<Case> cases = {
        {&vision, {{"op", "show_job"}, {"job", 100}}, "ok"},
        {&vision,
         {{"op", "join"}, {"job", 100}, {"rank", 0}, {"addr", "10.0.0.1"}, {"port", 1}},
         "ok"},
        {&vision,
         {{"op", "join"}, {"job", 100}, {"rank", 1}, {"addr", "10.0.0.2"}, {"port", 1}},
         "ok"},
        {&vision, {{"op", "evict"}, {"job", 100}, {"rank", 1}}, "ok"},
        {&vision, {{"op", "status"}}, "ok"},
        {&vision, {{"op", "show_job"}, {"job", 200}}, "forbidden"},
        {&vision, {{"op", "show_job"}, {"job", 7}}, "forbidden"},
        {&vision, {{"op", "delete_job"}, {"job", 200}}, "forbidden"},
        {&vision,
         {{"op", "join"}, {"job", 200}, {"rank", 1}, {"addr", "10.0.0.2"}, {"port", 1}},
         "forbidden"},
        {&vision, {{"op", "leave"}, {"job", 200}, {"rank", 0}}, "forbidden"},
        {&vision, {{"op", "evict"}, {"job", 200}, {"rank", 0}}, "forbidden"},
        {&vision,
         {{"op", "create_job"}, {"id", 150}, {"workers", 1}, {"gradient_elems", 768}},
         "forbidden"},
        {&vision, {{"op", "stats"}}, "forbidden"},
        {&vision, {{"op", "set_log_level"}, {"level", "trace"}}, "forbidden"},
        // A job of its range that is not there is said so; one outside, only that it is not its.
        {&vision, {{"op", "show_job"}, {"job", 101}}, "no_such_job"},
        {&vision, {{"op", "show_job"}, {"job", -1}}, "bad_request"},
        {&speech, {{"op", "show_job"}, {"job", 100}}, "forbidden"},
        {&speech, {{"op", "delete_job"}, {"job", 7}}, "forbidden"},
        {&admin, {{"op", "show_job"}, {"job", 200}}, "ok"},
        {&admin, {{"op", "stats"}}, "ok"},
    };
    for (const Case &c : cases) {
        json before = state::save(jobs_.jobs());
        json reply = as(*c.token, c.request);
        const std::string got = reply["ok"] == true ? "ok" : reply.value("code", "?");
        EXPECT_EQ(got, c.expect) << c.request << " -> " << reply;
        if (c.expect != "ok") {
            EXPECT_EQ(state::save(jobs_.jobs()), before) << c.request;
        }
    }
    // A tenant's status says what a worker needs and nothing of the node's other jobs.
    EXPECT_EQ(
        as(vision, {{"op", "status"}}),
        json::parse(std::string(R"({"ok":true,"port":9871,"version":")") + XAGG_RELEASE + "\"}"));
    // Its list holds its own jobs only; the admin's, all of them.
    const auto ids = [](const json &list) {
        std::vector<uint32_t> out;
        for (const json &j : list["jobs"])
            out.push_back(j["id"]);
        return out;
    };
    EXPECT_EQ(ids(as(vision, {{"op", "list_jobs"}})), (std::vector<uint32_t>{100}));
    EXPECT_EQ(ids(as(speech, {{"op", "list_jobs"}})), (std::vector<uint32_t>{200}));
    EXPECT_EQ(ids(as(admin, {{"op", "list_jobs"}})), (std::vector<uint32_t>{7, 100, 200}));
    // Its range full, a tenant's next job has no id to take.
    EXPECT_EQ(
        as(vision, {{"op", "create_job"}, {"workers", 1}, {"gradient_elems", 768}})["job"]["id"],
        101);
    EXPECT_EQ(as(vision, {{"op", "create_job"}, {"workers", 1}, {"gradient_elems", 768}})["code"],
              "no_room");
    EXPECT_EQ(as(vision, {{"op", "delete_job"}, {"job", 100}})["ok"], true);
    EXPECT_EQ(api_.forbidden(), 11u);
}

TEST_F(ControlTest, StatusDescribesTheNodeItsMemoryAndWhatEachPathCarries)
{
    call(R"({"op":"create_job","id":1,"workers":2,"gradient_elems":768000})");  // 1000 chunks
    call(R"({"op":"create_job","id":2,"workers":1,"gradient_elems":7680,"host_path":true})");
    call(R"({"op":"join","job":1,"rank":0,"addr":"10.0.0.1","port":9872})");
    json bare = call(R"({"op":"status"})");
    EXPECT_FALSE(bare.contains("interface")) << bare;  // no node description given
    api_.set_node_status([] {
        NodeStatus n;
        n.interface = "ens1f0";
        n.datapath = "xdp";
        n.xdp_mode = "native";
        n.xdp = {true, "native", 77};
        n.control_socket = "/run/xagg/xaggd.sock";
        n.metrics_address = "127.0.0.1:9873";
        n.kernel = {"6.12.118+deb12-amd64", "copy", ""};
        return n;
    });
    json s = call(R"({"op":"status"})");
    ASSERT_EQ(s["ok"], true) << s;
    EXPECT_EQ(s["version"], XAGG_RELEASE);
    EXPECT_EQ(s["pid"], getpid());
    EXPECT_EQ(s["interface"], "ens1f0");
    EXPECT_EQ(s["port"], 9871);
    EXPECT_EQ(s["xdp"], json::parse(R"({"configured_mode":"native","mode":"native",
                                        "attached":true,"prog_id":77})"));
    EXPECT_EQ(s["kernel"], json::parse(R"({"release":"6.12.118+deb12-amd64",
        "fastpath_variant":"copy","jumbo_chunks":true,"jumbo_refused_because":""})"));
    EXPECT_EQ(s["jobs"], 2);
    EXPECT_EQ(s["members"], 1);
    const uint64_t slot = 2 * sizeof(xagg_slot);
    EXPECT_EQ(s["memory"], json({{"policy", "benefit"},
                                 {"capacity_positions", 1000},
                                 {"used_positions", 1000},
                                 {"capacity_bytes", 1000 * slot},
                                 {"used_bytes", 1000 * slot}}));
    EXPECT_EQ(s["positions"], json::parse(R"({"fast":1000,"host":10})"));
    EXPECT_EQ(s["aggregated_bytes"], json::parse(R"({"fast":436224,"host":24576})"));
    EXPECT_EQ(s["control"]["socket"], "/run/xagg/xaggd.sock");
    EXPECT_GE(s["uptime_seconds"].get<double>(), 0.0);
    expect_refused(R"({"op":"status","verbose":true})", "unknown field 'verbose'");
}

TEST_F(ControlTest, ShowJobReportsRoundProgressFromTheSlots)
{
    json job = call(R"({"op":"create_job","id":3,"workers":2,"gradient_elems":3072})");  // 4 chunks
    const auto tag = job["job"]["tag"].get<uint32_t>();  // the owner tag its slots carry
    EXPECT_NE(tag, XAGG_TAG_NONE);
    EXPECT_EQ(job["job"]["progress"]["chunks_not_started"], 4) << "a new job has no slot yet";
    // chunk 0: round 5 complete; chunk 1: round 5 waiting for rank 1 (round 4 complete beside
    // it); chunk 2: round 4 complete; chunk 3: untouched, but for a slot of another owner.
    dp_.states = {{0, tag, 5, 0b11, 0},
                  {1, tag, 4, 0b11, 0},
                  {1, tag, 5, 0b01, 0},
                  {2, tag, 4, 0b11, 0},
                  {3, tag + 1, 9, 0b11, 0}};
    json p = call(R"({"op":"show_job","job":3})")["job"]["progress"];
    EXPECT_EQ(p, json::parse(R"({"newest_round":5,"oldest_round":4,"chunks_complete_at_newest":1,
                                 "chunks_in_flight":1,"chunks_not_started":1})"));
}

TEST_F(ControlTest, EachRefusalCarriesTheCodeThatSaysWhatWasWrong)
{
    const auto code = [this](const std::string &line) {
        return call(line).value("code", std::string("(accepted)"));
    };
    EXPECT_EQ(code(R"({"op":"show_job","job":9})"), "no_such_job");
    EXPECT_EQ(code(R"({"op":"delete_job","job":9})"), "no_such_job");
    EXPECT_EQ(code(R"({"op":"frobnicate"})"), "unknown_op");
    EXPECT_EQ(code(R"({"op":"create_job","workers":0,"gradient_elems":768})"), "bad_request");
    EXPECT_EQ(code("not json"), "bad_request");
    EXPECT_EQ(code(R"({"op":"create_job","id":3,"workers":2,"gradient_elems":768})"), "(accepted)");
    EXPECT_EQ(code(R"({"op":"create_job","id":3,"workers":2,"gradient_elems":768})"), "conflict");
    EXPECT_EQ(code(R"({"op":"join","job":3,"rank":0,"addr":"10.0.0.1","port":9000})"),
              "(accepted)");
    EXPECT_EQ(code(R"({"op":"join","job":3,"rank":1,"addr":"10.0.0.1","port":9000})"), "conflict");
    EXPECT_EQ(code(R"({"op":"leave","job":3,"rank":1})"), "no_such_job");
    for (int i = 0; i < 7; i++)  // the table holds 8 jobs
        call(R"({"op":"create_job","workers":1,"gradient_elems":768})");
    EXPECT_EQ(code(R"({"op":"create_job","workers":1,"gradient_elems":768})"), "no_room");
}

// A node whose interface cannot carry jumbo frames refuses jobs of jumbo chunks at creation, with
// the reason, rather than accepting them and dropping every frame; standard jobs are unaffected.
TEST_F(ControlTest, JumboJobsAreRefusedWhereTheNodeCannotServeThem)
{
    jobs_.set_jumbo_refusal("interface eth0 has MTU 3200; a job of jumbo chunks needs 8260");
    json r = call(R"({"op":"create_job","workers":2,"gradient_elems":4096,"chunk_elems":2048})");
    EXPECT_EQ(r["ok"], false) << r;
    EXPECT_EQ(r["code"], "unsupported") << r;
    EXPECT_EQ(r["error"],
              "this node cannot serve jumbo chunks: interface eth0 has MTU 3200; a job of jumbo "
              "chunks needs 8260")
        << r;
    EXPECT_TRUE(jobs_.jobs().empty());
    EXPECT_EQ(call(R"({"op":"create_job","workers":2,"gradient_elems":4096})")["ok"], true);
    jobs_.set_jumbo_refusal("");
    EXPECT_EQ(
        call(R"({"op":"create_job","workers":2,"gradient_elems":4096,"chunk_elems":2048})")["ok"],
        true);
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
    call(R"({"op":"create_job","workers":3,"gradient_elems":7680,"fanout":true,"weight":2.5})");
    call(R"({"op":"join","job":1,"rank":2,"addr":"10.0.0.3","port":9000})");
    JobTable restored(1000, 8, group_base());
    restored.restore(state::load(state::save(jobs_.jobs())));
    EXPECT_EQ(state::save(restored.jobs()), state::save(jobs_.jobs()));
    EXPECT_THROW(state::load(json::parse(R"([{"id":1}])")), std::invalid_argument);
}

}  // namespace
}  // namespace xagg::daemon
