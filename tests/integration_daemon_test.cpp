// SPDX-License-Identifier: MIT
// xaggd as a real process in the aggregator namespace: jobs created and joined over its control
// socket, workers aggregating through it, and a kill -9 mid-job that the job survives.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <set>
#include <thread>
#include <vector>

#include "xagg/proto.h"

#include "tests/support/daemon.hpp"
#include "tests/support/demo_worker.hpp"
#include "tests/support/process.hpp"
#include "tests/support/topology.hpp"

namespace xagg::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr uint32_t kJob = 7;  // results go to group_base + 7 = 239.77.0.7

// Stands in for systemd's notification socket (NOTIFY_SOCKET) to see what xaggd reports.
class NotifySocket {
public:
    explicit NotifySocket(const std::string &path) : path_(path)
    {
        fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
        unlink(path.c_str());
        if (bind(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0)
            throw std::runtime_error("cannot bind " + path);
        timeval tv{0, 200000};
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    ~NotifySocket()
    {
        close(fd_);
        unlink(path_.c_str());
    }
    // Everything received until `want` shows up or a few seconds pass.
    std::string wait_for(const std::string &want)
    {
        for (int i = 0; i < 25 && received_.find(want) == std::string::npos; i++) {
            char buf[1024];
            ssize_t n = recv(fd_, buf, sizeof(buf), 0);
            if (n > 0)
                received_.append(buf, static_cast<size_t>(n)).append("\n");
        }
        return received_;
    }

private:
    std::string path_;
    int fd_;
    std::string received_;
};

// GET /metrics from xaggd's default address, inside its namespace.
std::string scrape(const Topology &topo)
{
    std::string body;
    Topology::in_netns(topo.agg(), [&] {
        httplib::Client client("127.0.0.1", 9873);
        auto res = client.Get("/metrics");
        if (!res || res->status != 200)
            throw std::runtime_error("scraping /metrics failed");
        body = res->body;
    });
    return body;
}

uint64_t sample(const std::string &metrics, const std::string &series)
{
    size_t at = metrics.find("\n" + series + " ");
    if (at == std::string::npos)
        throw std::runtime_error("no sample " + series);
    return std::stoull(metrics.substr(at + series.size() + 2));
}

class DaemonIntegration : public DaemonTest {
protected:
    // Creates job kJob and joins every worker; returns the job as the API describes it. The job
    // key the joins hand out is kept in key_.
    json create_and_join(unsigned workers, uint32_t chunks, bool host_path = false)
    {
        json r = control(socket_, {{"op", "create_job"},
                                   {"id", kJob},
                                   {"workers", workers},
                                   {"gradient_elems", chunks * XAGG_CHUNK_ELEMS},
                                   {"host_path", host_path}});
        EXPECT_EQ(r["ok"], true) << r;
        EXPECT_EQ(r["job"]["group"], "239.77.0.7") << r;
        json job = r["job"];
        join_all(workers);
        return job;
    }

    // Joins ranks 0..workers-1 of kJob, rank r from worker namespace r; keeps the job key in key_.
    void join_all(unsigned workers)
    {
        for (unsigned rank = 0; rank < workers; rank++) {
            json r = control(socket_, {{"op", "join"},
                                       {"job", kJob},
                                       {"rank", rank},
                                       {"addr", worker_addr(rank)},
                                       {"port", 9872}});
            EXPECT_EQ(r["ok"], true) << r;
            if (rank > 0) {
                EXPECT_EQ(r["key"], key_) << "every member of a job gets the same key";
            }
            key_ = r.value("key", "");
        }
    }

    std::vector<std::unique_ptr<Process>> start_workers(const Topology &topo, unsigned workers,
                                                        uint32_t chunks, uint32_t rounds)
    {
        return start_demo_workers(
            topo, worker_run(kJob, workers, chunks, rounds, "239.77.0.7", key_), dir_);
    }

    static void expect_all_exact(std::vector<std::unique_ptr<Process>> &procs, uint64_t results)
    {
        std::string digest;
        for (auto &p : procs) {
            ASSERT_EQ(p->wait(120s), 0) << p->output();
            json out = json::parse(p->output());
            EXPECT_EQ(out["verified"], results) << out;
            EXPECT_EQ(out["mismatches"], 0) << out;
            EXPECT_EQ(out["partial"], 0) << out;
            if (digest.empty())
                digest = out["digest"];
            EXPECT_EQ(out["digest"], digest) << "workers disagree";
        }
    }

    // Creates job `id` of `chunks` chunks of `chunk_elems` values, joins its two workers (from
    // worker namespaces first_host and first_host + 1) and returns the job key.
    std::string create_pair(uint32_t id, uint32_t chunks, uint32_t chunk_elems, unsigned first_host)
    {
        json r = control(socket_, {{"op", "create_job"},
                                   {"id", id},
                                   {"workers", 2},
                                   {"gradient_elems", chunks * chunk_elems},
                                   {"chunk_elems", chunk_elems}});
        EXPECT_EQ(r["ok"], true) << r;
        std::string key;
        for (unsigned rank = 0; rank < 2; rank++) {
            json joined = control(socket_, {{"op", "join"},
                                            {"job", id},
                                            {"rank", rank},
                                            {"addr", worker_addr(first_host + rank)},
                                            {"port", 9872}});
            EXPECT_EQ(joined["ok"], true) << joined;
            EXPECT_EQ(joined["job"]["chunk_elems"], chunk_elems) << joined;
            key = joined.value("key", "");
        }
        return key;
    }

    // Runs job `standard` (of standard chunks, ranks in worker namespaces 0-1) and job `jumbo`
    // (of jumbo chunks, namespaces 2-3), made by create_pair(), side by side for `rounds`
    // rounds of demo workers; every result must be the exact sum.
    void run_standard_and_jumbo(const Topology &topo, uint32_t standard, uint32_t standard_chunks,
                                const std::string &standard_key, uint32_t jumbo,
                                uint32_t jumbo_chunks, const std::string &jumbo_key,
                                uint32_t rounds)
    {
        const auto group = [](uint32_t job) { return "239.77.0." + std::to_string(job); };
        WorkerRun a_run =
            worker_run(standard, 2, standard_chunks, rounds, group(standard), standard_key);
        WorkerRun b_run = worker_run(jumbo, 2, jumbo_chunks, rounds, group(jumbo), jumbo_key);
        b_run.first_host = 2;
        b_run.chunk_elems = XAGG_JUMBO_CHUNK_ELEMS;
        std::filesystem::create_directories(dir_ + "/a");
        std::filesystem::create_directories(dir_ + "/b");
        auto a = start_demo_workers(topo, a_run, dir_ + "/a");
        auto b = start_demo_workers(topo, b_run, dir_ + "/b");
        expect_all_exact(a, uint64_t{rounds} * standard_chunks);
        expect_all_exact(b, uint64_t{rounds} * jumbo_chunks);
    }

    std::string key_;  // kJob's key, from the last join_all
};

TEST_F(DaemonIntegration, JobCreatedOverTheApiGivesExactSums)
{
    constexpr unsigned kWorkers = 3;
    constexpr uint32_t kChunks = 128, kRounds = 10;
    Topology topo("d", kWorkers);
    NotifySocket notify(dir_ + "/notify");
    setenv("NOTIFY_SOCKET", (dir_ + "/notify").c_str(), 1);
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    unsetenv("NOTIFY_SOCKET");
    EXPECT_NE(notify.wait_for("READY=1").find("READY=1"), std::string::npos);
    create_and_join(kWorkers, kChunks);
    std::string before = scrape(topo);
    EXPECT_EQ(sample(before, "xagg_chunks_completed_total{path=\"fast\"}"), 0u) << before;
    EXPECT_EQ(sample(before, "xagg_job_members{xagg_job=\"7\"}"), kWorkers) << before;
    auto workers = start_workers(topo, kWorkers, kChunks, kRounds);
    expect_all_exact(workers, uint64_t{kRounds} * kChunks);

    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["counters"]["completed"], kRounds * kChunks) << stats;
    EXPECT_EQ(stats["counters"]["aggregated"], kRounds * kChunks * (kWorkers - 1)) << stats;
    EXPECT_EQ(stats["jobs"], 1);
    std::string after = scrape(topo);
    EXPECT_EQ(sample(after, "xagg_chunks_completed_total{path=\"fast\"}"), kRounds * kChunks);
    EXPECT_EQ(sample(after, "xagg_aggregated_bytes_total{path=\"fast\"}"),
              uint64_t{kRounds} * kChunks * kWorkers * XAGG_CHUNK_BYTES);
    // What xaggd really serves passes Prometheus's own checker.
    std::string file = dir_ + "/scraped.txt";
    std::ofstream(file) << after;
    EXPECT_NE(run_command("promtool check metrics < " + file + "; echo rc=$?").find("rc=0"),
              std::string::npos);

    // A clean stop: no program attached, no pins, no socket left behind.
    daemon->signal(SIGTERM);
    ASSERT_EQ(daemon->wait(10s), 0) << daemon->output();
    EXPECT_NE(notify.wait_for("STOPPING=1").find("STOPPING=1"), std::string::npos);
    std::string link = run_command("ip -n " + topo.agg() + " link show eth0");
    EXPECT_EQ(link.find("xdp"), std::string::npos) << link;
    EXPECT_FALSE(std::filesystem::exists(bpffs_ + "/slots"));
    EXPECT_FALSE(std::filesystem::exists(socket_));
}

TEST_F(DaemonIntegration, RefusesToStartOnAnInterfaceThatCannotCarryAChunk)
{
    Topology topo("m", 1);
    ASSERT_EQ(run_command("ip -n " + topo.agg() + " link set eth0 mtu 1500 && echo ok"), "ok\n");
    Process daemon(xaggd_as_unit(topo.agg(), write_config(topo)), dir_ + "/xaggd.log");
    EXPECT_EQ(daemon.wait(std::chrono::seconds(10)), 1) << daemon.output();
    EXPECT_NE(daemon.output().find("interface eth0 has MTU 1500; xagg's frames need at least 3140"),
              std::string::npos)
        << daemon.output();
}

// At MTU 3200 standard chunks fit and jumbo ones do not: the daemon runs, says so at start and in
// its status, and refuses a job of jumbo chunks at creation instead of dropping its every frame.
TEST_F(DaemonIntegration, RefusesJumboJobsWhereTheInterfaceCannotCarryThem)
{
    Topology topo("u", 1);
    ASSERT_EQ(run_command("ip -n " + topo.agg() + " link set eth0 mtu 3200 && echo ok"), "ok\n");
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    const std::string why =
        "interface eth0 has MTU 3200; a job of jumbo chunks needs at least "
        "8260 (ip link set dev eth0 mtu 9000, and the same on every link "
        "between workers and aggregator)";
    json jumbo = control(socket_, {{"op", "create_job"},
                                   {"workers", 1},
                                   {"gradient_elems", 4096},
                                   {"chunk_elems", XAGG_JUMBO_CHUNK_ELEMS}});
    EXPECT_EQ(jumbo["ok"], false) << jumbo;
    EXPECT_EQ(jumbo["code"], "unsupported") << jumbo;
    EXPECT_EQ(jumbo["error"], "this node cannot serve jumbo chunks: " + why) << jumbo;
    json status = control(socket_, {{"op", "status"}});
    EXPECT_EQ(status["kernel"]["jumbo_chunks"], false) << status;
    EXPECT_EQ(status["kernel"]["jumbo_refused_because"], why) << status;
    EXPECT_EQ(control(socket_, {{"op", "list_jobs"}})["jobs"].size(), 0u);
    json standard =
        control(socket_, {{"op", "create_job"}, {"workers", 1}, {"gradient_elems", 4096}});
    EXPECT_EQ(standard["ok"], true) << standard;
    EXPECT_NE(daemon->output().find("jumbo chunks cannot be served: " + why), std::string::npos)
        << daemon->output();
}

TEST_F(DaemonIntegration, LeavesAnotherXdpProgramOnTheInterfaceAloneAndSaysSo)
{
    Topology topo("o", 1);
    ASSERT_EQ(run_command("ip -n " + topo.agg() + " link set dev eth0 xdpdrv obj " +
                          XAGG_BINARY_DIR "/bpf/xdp_pass.bpf.o sec xdp.frags && echo ok"),
              "ok\n");
    Process daemon(xaggd_as_unit(topo.agg(), write_config(topo)), dir_ + "/xaggd.log");
    EXPECT_EQ(daemon.wait(std::chrono::seconds(10)), 1) << daemon.output();
    EXPECT_NE(daemon.output().find("interface eth0 already runs XDP program id"), std::string::npos)
        << daemon.output();
    std::string link = run_command("ip -n " + topo.agg() + " link show eth0");
    EXPECT_NE(link.find("name xdp_pass"), std::string::npos) << link;
}

TEST_F(DaemonIntegration, HostPathJobGetsTheSameExactSums)
{
    constexpr unsigned kWorkers = 3;
    constexpr uint32_t kChunks = 64, kRounds = 10;
    Topology topo("h", kWorkers);
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    json job = create_and_join(kWorkers, kChunks, true);
    EXPECT_EQ(job["fast_path_chunks"], 0) << job;
    EXPECT_EQ(job["host_path_chunks"], kChunks) << job;
    auto workers = start_workers(topo, kWorkers, kChunks, kRounds);
    expect_all_exact(workers, uint64_t{kRounds} * kChunks);
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["counters"]["completed"], 0) << stats;
    EXPECT_GE(stats["counters"]["pass_host_job"], kRounds * kChunks * kWorkers) << stats;
    EXPECT_EQ(stats["host_counters"]["completed"], kRounds * kChunks) << stats;
    EXPECT_EQ(stats["host_counters"]["aggregated"], kRounds * kChunks * (kWorkers - 1)) << stats;
}

TEST_F(DaemonIntegration, JobLargerThanItsFastPathShareIsSplitAndExact)
{
    constexpr unsigned kWorkers = 3;
    constexpr uint32_t kChunks = 128, kFast = 48, kRounds = 10;
    Topology topo("s", kWorkers);
    auto daemon = start_daemon(write_config(topo, kFast), "xaggd.log");
    json job = create_and_join(kWorkers, kChunks);
    EXPECT_EQ(job["fast_path_chunks"], kFast) << job;
    EXPECT_EQ(job["host_path_chunks"], kChunks - kFast) << job;
    auto workers = start_workers(topo, kWorkers, kChunks, kRounds);
    expect_all_exact(workers, uint64_t{kRounds} * kChunks);
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["counters"]["completed"], kRounds * kFast) << stats;
    EXPECT_EQ(stats["host_counters"]["completed"], kRounds * (kChunks - kFast)) << stats;
}

TEST_F(DaemonIntegration, KilledDaemonIsRestartedAndTheJobCompletesExactly)
{
    constexpr unsigned kWorkers = 3;
    constexpr uint32_t kChunks = 32, kRounds = 1500;
    Topology topo("k", kWorkers);
    std::string config = write_config(topo);
    auto daemon = start_daemon(config, "xaggd-1.log");
    create_and_join(kWorkers, kChunks);
    auto workers = start_workers(topo, kWorkers, kChunks, kRounds);

    // Killed mid-job: once the workers are well into their rounds.
    for (int i = 0; i < 2000; i++) {
        json stats = control(socket_, {{"op", "stats"}});
        if (stats["counters"]["completed"].get<uint64_t>() >= 100 * kChunks)
            break;
        std::this_thread::sleep_for(5ms);
    }
    daemon->signal(SIGKILL);
    EXPECT_EQ(daemon->wait(5s), 128 + SIGKILL);
    auto restarted = start_daemon(config, "xaggd-2.log");
    json job = control(socket_, {{"op", "show_job"}, {"job", kJob}});
    EXPECT_EQ(job["ok"], true) << job;
    EXPECT_EQ(job["job"]["members"].size(), kWorkers) << job;
    EXPECT_NE(restarted->output().find("with their pinned maps"), std::string::npos)
        << restarted->output();
    // With only the unit's capabilities it took over the XDP link the killed run left.
    EXPECT_NE(restarted->output().find("took over the XDP link"), std::string::npos)
        << restarted->output();
    EXPECT_EQ(control(socket_, {{"op", "status"}})["xdp"]["attached"], true);

    expect_all_exact(workers, uint64_t{kRounds} * kChunks);
    // The counters live in the pinned maps too: each contribution counted once across both runs.
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["counters"]["completed"], kRounds * kChunks) << stats;
    EXPECT_EQ(stats["counters"]["aggregated"], kRounds * kChunks * (kWorkers - 1)) << stats;
    restarted->signal(SIGTERM);
    EXPECT_EQ(restarted->wait(10s), 0) << restarted->output();
}

TEST_F(DaemonIntegration, StragglerIsReportedByRankAndNoPartialSumIsSent)
{
    constexpr unsigned kWorkers = 3;
    constexpr uint32_t kChunks = 4;
    Topology topo("t", kWorkers);
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    json r = control(socket_, {{"op", "create_job"},
                               {"id", kJob},
                               {"workers", kWorkers},
                               {"gradient_elems", kChunks * XAGG_CHUNK_ELEMS},
                               {"timeout_ms", 200}});
    ASSERT_EQ(r["ok"], true) << r;
    join_all(kWorkers);
    // Rank 2 never sends. Ranks 0 and 1 retry for ~1 s and then give up: under `wait` no result
    // is ever sent without rank 2 in it.
    WorkerRun run = worker_run(kJob, kWorkers, kChunks, 1, "239.77.0.7", key_);
    run.timeout_ms = 50;
    run.max_retries = 20;
    std::vector<std::unique_ptr<Process>> present;
    for (unsigned rank = 0; rank < 2; rank++)
        present.push_back(
            start_demo_worker(topo, run, rank, dir_ + "/worker" + std::to_string(rank) + ".json"));
    for (auto &p : present) {
        EXPECT_EQ(p->wait(30s), 2) << p->output();
        EXPECT_NE(p->output().find("unanswered"), std::string::npos) << p->output();
    }
    // The straggler scan runs at most every 100 ms, less often when a scan is slow (it keeps
    // to a twentieth of a core): wait for it to have seen the overdue chunks.
    json job;
    for (int i = 0; i < 500; i++) {
        job = control(socket_, {{"op", "show_job"}, {"job", kJob}})["job"];
        if (job["straggler_events_total"] == kChunks)
            break;
        std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(job["straggler_events_total"], kChunks) << job;  // each chunk reported once
    ASSERT_EQ(job["straggler_events"].size(), kChunks) << job;
    for (const auto &e : job["straggler_events"]) {
        EXPECT_EQ(e["missing_ranks"], json::array({2})) << e;
        EXPECT_EQ(e["round"], 0) << e;
        EXPECT_GE(e["waited_ms"], 200) << e;
    }
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["counters"]["completed"], 0) << stats;
    EXPECT_EQ(sample(scrape(topo), "xagg_straggler_events_total{xagg_job=\"7\"}"), kChunks);
    EXPECT_NE(daemon->output().find("has waited"), std::string::npos);
}

TEST_F(DaemonIntegration, EvictedStragglerIsRemovedAndTheJobCompletesWithTheOthers)
{
    constexpr unsigned kWorkers = 3;
    constexpr uint32_t kChunks = 4, kRounds = 6, kStragglerRounds = 2;
    Topology topo("e", kWorkers);
    // Two chunks of fast-path memory: chunks 0-1 on the fast path, 2-3 on the host path.
    auto daemon = start_daemon(write_config(topo, 2), "xaggd.log");
    json r = control(socket_, {{"op", "create_job"},
                               {"id", kJob},
                               {"workers", kWorkers},
                               {"gradient_elems", kChunks * XAGG_CHUNK_ELEMS},
                               {"policy", "evict"},
                               {"timeout_ms", 100},
                               {"evict_after", 2}});
    ASSERT_EQ(r["ok"], true) << r;
    ASSERT_EQ(r["job"]["fast_path_chunks"], 2) << r;
    join_all(kWorkers);
    // Rank 2 does two rounds and is gone; the others do six.
    WorkerRun run = worker_run(kJob, kWorkers, kChunks, kRounds, "239.77.0.7", key_);
    std::vector<std::unique_ptr<Process>> procs;
    for (unsigned rank = 0; rank < kWorkers; rank++) {
        WorkerRun mine = run;
        mine.rounds = rank == 2 ? kStragglerRounds : kRounds;
        procs.push_back(
            start_demo_worker(topo, mine, rank, dir_ + "/worker" + std::to_string(rank) + ".json"));
    }
    for (unsigned rank = 0; rank < kWorkers; rank++) {
        ASSERT_EQ(procs[rank]->wait(60s), 0) << procs[rank]->output();
        json out = json::parse(procs[rank]->output());
        uint32_t rounds = rank == 2 ? kStragglerRounds : kRounds;
        EXPECT_EQ(out["verified"], rounds * kChunks) << out;
        EXPECT_EQ(out["mismatches"], 0) << out;
        // Every result after the eviction says it lacks rank 2, and is exact without it.
        EXPECT_EQ(out["partial"], rank == 2 ? 0 : (kRounds - kStragglerRounds) * kChunks) << out;
    }
    json job = control(socket_, {{"op", "show_job"}, {"job", kJob}})["job"];
    EXPECT_EQ(job["evicted_ranks"], json::array({2})) << job;
    EXPECT_EQ(job["evictions"], 1) << job;
    EXPECT_EQ(job["members"].size(), 2u) << job;
    // Round 2 stalled on both paths, each chunk reported once, naming rank 2.
    std::set<uint32_t> chunks;
    for (const auto &e : job["straggler_events"]) {
        EXPECT_EQ(e["missing_ranks"], json::array({2})) << e;
        EXPECT_EQ(e["round"], kStragglerRounds) << e;
        chunks.insert(e["chunk"].get<uint32_t>());
    }
    EXPECT_EQ(chunks, (std::set<uint32_t>{0, 1, 2, 3})) << job;
    std::string metrics = scrape(topo);
    EXPECT_EQ(sample(metrics, "xagg_evictions_total{xagg_job=\"7\"}"), 1u) << metrics;
    EXPECT_EQ(sample(metrics, "xagg_job_evicted_ranks{xagg_job=\"7\"}"), 1u) << metrics;
    EXPECT_NE(daemon->output().find("evicted rank 2 from job 7"), std::string::npos);
}

TEST_F(DaemonIntegration, MemoryMovesBetweenLiveJobsAndEverySumStaysExact)
{
    constexpr uint32_t kChunks = 48, kRoundsA = 5000, kRoundsB = 300;
    Topology topo("m", 4);
    // 64 chunks, 16 guaranteed per job: job 7 alone holds all its 48; with job 8 beside it each
    // gets 32, and job 7 grows back when job 8 is deleted. Both moves happen under traffic.
    auto daemon = start_daemon(write_config(topo, 64, 16), "xaggd.log");
    auto create = [&](uint32_t id, unsigned first_host) {
        return create_pair(id, kChunks, XAGG_CHUNK_ELEMS, first_host);
    };
    auto fast_chunks = [&](uint32_t id) {
        return control(socket_, {{"op", "show_job"}, {"job", id}})["job"]["fast_path_chunks"];
    };
    const std::string key7 = create(7, 0);
    EXPECT_EQ(fast_chunks(7), 48);
    std::filesystem::create_directories(dir_ + "/a");
    auto a = start_demo_workers(topo, worker_run(7, 2, kChunks, kRoundsA, "239.77.0.7", key7),
                                dir_ + "/a");
    std::this_thread::sleep_for(300ms);
    const std::string key8 = create(8, 2);
    EXPECT_NE(key8, key7) << "each job its own key";
    EXPECT_EQ(fast_chunks(7), 32);
    EXPECT_EQ(fast_chunks(8), 32);
    WorkerRun run_b = worker_run(8, 2, kChunks, kRoundsB, "239.77.0.8", key8);
    run_b.first_host = 2;
    std::filesystem::create_directories(dir_ + "/b");
    auto b = start_demo_workers(topo, run_b, dir_ + "/b");
    expect_all_exact(b, uint64_t{kRoundsB} * kChunks);
    EXPECT_EQ(a[0]->running(), true) << "job 7 ended before the second move";
    EXPECT_EQ(control(socket_, {{"op", "delete_job"}, {"job", 8}})["ok"], true);
    EXPECT_EQ(fast_chunks(7), 48);
    // The mid-move marker a crash would leave is gone once a move is done.
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/state/moving"));
    expect_all_exact(a, uint64_t{kRoundsA} * kChunks);
    // Each chunk-round completed exactly once, on one path or the other.
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["counters"]["completed"].get<uint64_t>() +
                  stats["host_counters"]["completed"].get<uint64_t>(),
              uint64_t{kRoundsA + kRoundsB} * kChunks)
        << stats;
    EXPECT_GT(stats["host_counters"]["completed"], 0) << stats;
}

// Jumbo chunks (2048 values, 8274-byte frames, multi-buffer XDP on MTU-9000 veths) beside
// standard ones on one aggregator, both jobs split between the fast path and the host path, with
// 5% loss on every worker link: every result exact.
TEST_F(DaemonIntegration, JumboAndStandardJobsShareTheAggregatorUnderLossAndStayExact)
{
    constexpr uint32_t kStandardChunks = 40, kJumboChunks = 20, kRounds = 20;
    Topology topo("j", 4);
    const std::string lossy = XAGG_BINARY_DIR "/bpf/xdp_lossy.bpf.o";
    for (unsigned r = 0; r < 4; r++)
        for (const auto &[ns, dev] : {std::pair{topo.worker(r), std::string("eth0")},
                                      std::pair{topo.sw(), "w" + std::to_string(r)}})
            ASSERT_EQ(run_command("ip -n " + ns + " link set dev " + dev + " xdpdrv obj " + lossy +
                                  " sec xdp.frags"),
                      "");
    // 64 slot positions, 16 guaranteed per job. The standard job wants 40, the jumbo job 60
    // (three per chunk); the 32 left are shared evenly: 32 positions each, which for the jumbo
    // job is 10 whole chunks (30 positions).
    auto daemon = start_daemon(write_config(topo, 64, 16), "xaggd.log");
    const std::string key7 = create_pair(7, kStandardChunks, XAGG_CHUNK_ELEMS, 0);
    const std::string key8 = create_pair(8, kJumboChunks, XAGG_JUMBO_CHUNK_ELEMS, 2);
    json job7 = control(socket_, {{"op", "show_job"}, {"job", 7}})["job"];
    json job8 = control(socket_, {{"op", "show_job"}, {"job", 8}})["job"];
    EXPECT_EQ(job7["fast_path_chunks"], 32) << job7;
    EXPECT_EQ(job7["host_path_chunks"], 8) << job7;
    EXPECT_EQ(job8["fast_path_chunks"], 10) << job8;
    EXPECT_EQ(job8["host_path_chunks"], 10) << job8;

    run_standard_and_jumbo(topo, 7, kStandardChunks, key7, 8, kJumboChunks, key8, kRounds);

    // Each chunk-round completed exactly once, on the path that holds it: the fast path the
    // regions, the host path the rest.
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["counters"]["completed"], uint64_t{kRounds} * (32 + 10)) << stats;
    EXPECT_EQ(stats["host_counters"]["completed"], uint64_t{kRounds} * (8 + 10)) << stats;
    EXPECT_EQ(stats["counters"]["drop_bad_length"], 0) << stats;
    // The gradient bytes summed, by each job's own chunk size (two contributions a chunk-round),
    // in the API and in the metrics Prometheus scrapes.
    const uint64_t fast_bytes =
        uint64_t{kRounds} * 2 * (32 * XAGG_CHUNK_BYTES + 10 * XAGG_JUMBO_CHUNK_BYTES);
    const uint64_t host_bytes =
        uint64_t{kRounds} * 2 * (8 * XAGG_CHUNK_BYTES + 10 * XAGG_JUMBO_CHUNK_BYTES);
    EXPECT_EQ(stats["aggregated_bytes"]["fast"], fast_bytes) << stats;
    EXPECT_EQ(stats["aggregated_bytes"]["host"], host_bytes) << stats;
    const std::string metrics = scrape(topo);
    EXPECT_EQ(sample(metrics, "xagg_aggregated_bytes_total{path=\"fast\"}"), fast_bytes);
    EXPECT_EQ(sample(metrics, "xagg_aggregated_bytes_total{path=\"host\"}"), host_bytes);
    EXPECT_EQ(sample(metrics, "xagg_job_chunks{xagg_job=\"8\",path=\"fast\"}"), 10u) << metrics;
}

// A GET of Prometheus's HTTP API inside the aggregator's namespace: the JSON reply's `data`.
json prometheus_get(const Topology &topo, uint16_t port, const std::string &path)
{
    json data;
    Topology::in_netns(topo.agg(), [&] {
        httplib::Client client("127.0.0.1", port);
        auto res = client.Get(path);
        if (res && res->status == 200) {
            json reply = json::parse(res->body, nullptr, false);
            if (reply.is_object() && reply["status"] == "success")
                data = reply["data"];
        }
    });
    return data;
}

// The real thing an operator runs: Prometheus, with the shipped rules and a default scrape
// config, scraping xaggd while a jumbo job and a standard one run. Per-job series keep their job
// id (xagg_job) beside the scrape job's own `job` label, the bytes are the jobs' own chunk
// sizes', and every shipped rule loads and evaluates.
TEST_F(DaemonIntegration, ARealPrometheusScrapesTheJobsLabelsAndBytesRight)
{
    constexpr uint32_t kStandardChunks = 12, kJumboChunks = 6, kRounds = 10;
    constexpr uint16_t kPromPort = 19090;
    Topology topo("p", 4);
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    const std::string config = dir_ + "/prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                             "rule_files: ['" XAGG_SOURCE_DIR
                             "/monitoring/prometheus/xagg-rules.yml']\n"
                             "scrape_configs:\n  - job_name: xaggd\n    static_configs:\n"
                             "      - targets: ['127.0.0.1:9873']\n";
    Process prometheus({"/usr/bin/ip", "netns", "exec", topo.agg(), "/usr/bin/prometheus",
                        "--config.file=" + config, "--storage.tsdb.path=" + dir_ + "/tsdb",
                        "--web.listen-address=127.0.0.1:" + std::to_string(kPromPort)},
                       dir_ + "/prometheus.log");

    const std::string key7 = create_pair(7, kStandardChunks, XAGG_CHUNK_ELEMS, 0);
    const std::string key9 = create_pair(9, kJumboChunks, XAGG_JUMBO_CHUNK_ELEMS, 2);
    run_standard_and_jumbo(topo, 7, kStandardChunks, key7, 9, kJumboChunks, key9, kRounds);

    // Wait until a scrape after the last contribution is in: the bytes reach their final value.
    const uint64_t bytes =
        uint64_t{kRounds} * 2 *
        (kStandardChunks * XAGG_CHUNK_BYTES + kJumboChunks * XAGG_JUMBO_CHUNK_BYTES);
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    json summed;
    for (;;) {
        ASSERT_TRUE(prometheus.running()) << prometheus.output();
        summed = prometheus_get(
            topo, kPromPort,
            "/api/v1/query?query=xagg_aggregated_bytes_total%7Bpath%3D%22fast%22%7D");
        if (summed.is_object() && summed["result"].size() == 1 &&
            summed["result"][0]["value"][1] == std::to_string(bytes))
            break;
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << summed << prometheus.output();
        std::this_thread::sleep_for(200ms);
    }
    EXPECT_EQ(summed["result"][0]["metric"]["job"], "xaggd") << summed;

    // Each job's series: the scrape's job label and the job's own id side by side, nothing
    // renamed to exported_job.
    json members = prometheus_get(topo, kPromPort, "/api/v1/query?query=xagg_job_members");
    ASSERT_TRUE(members.is_object()) << prometheus.output();
    std::map<std::string, std::string> by_job;
    for (const json &r : members["result"]) {
        EXPECT_EQ(r["metric"]["job"], "xaggd") << r;
        EXPECT_FALSE(r["metric"].contains("exported_job")) << r;
        by_job[r["metric"]["xagg_job"].get<std::string>()] = r["value"][1].get<std::string>();
    }
    EXPECT_EQ(by_job, (std::map<std::string, std::string>{{"7", "2"}, {"9", "2"}}));

    // Every shipped rule loaded and evaluates.
    json rules = prometheus_get(topo, kPromPort, "/api/v1/rules");
    ASSERT_TRUE(rules.is_object()) << prometheus.output();
    size_t evaluated = 0;
    for (const json &group : rules["groups"])
        for (const json &rule : group["rules"]) {
            EXPECT_EQ(rule["health"], "ok") << rule;
            evaluated++;
        }
    EXPECT_GE(evaluated, 9u) << rules;
}

// One request over the TCP control API, sent from a worker's namespace as a remote worker would.
json tcp_request(const Topology &topo, const json &request)
{
    std::string out = run_command(
        "ip netns exec " + topo.worker(0) + " bash -c 'exec 3<>/dev/tcp/" + std::string(kAggAddr) +
        "/9874; echo \"$0\" >&3; head -n 1 <&3' '" + request.dump() + "'");
    return json::parse(out, nullptr, false);
}

TEST_F(DaemonIntegration, HostOnlyNodeServesJobsCreatedOverTcpWithAToken)
{
    constexpr unsigned kWorkers = 3;
    constexpr uint32_t kChunks = 64, kRounds = 10;
    const std::string kToken = "0123456789abcdef-test-token";
    Topology topo("p", kWorkers);
    std::string config = write_config(topo);
    std::ofstream(config, std::ios::app) << "datapath = host\n"
                                         << "control_tcp_address = 0.0.0.0:9874\n"
                                         << "control_tcp_plaintext = true\n"
                                         << "control_token_file = " << dir_ << "/token\n";
    std::ofstream(dir_ + "/token") << kToken << "\n";
    std::filesystem::permissions(dir_ + "/token", std::filesystem::perms::owner_read);
    auto daemon = start_daemon(config, "xaggd.log");

    json create = {{"op", "create_job"},
                   {"id", kJob},
                   {"workers", kWorkers},
                   {"gradient_elems", kChunks * XAGG_CHUNK_ELEMS}};
    json refused = tcp_request(topo, create);
    EXPECT_EQ(refused,
              json::parse(R"({"ok":false,"code":"bad_token","error":"missing or wrong token"})"));
    create["token"] = "0123456789abcdef-test-tokeN";
    EXPECT_EQ(tcp_request(topo, create)["error"], "missing or wrong token");
    EXPECT_EQ(control(socket_, {{"op", "list_jobs"}})["jobs"].size(), 0u);
    create["token"] = kToken;
    json r = tcp_request(topo, create);
    ASSERT_EQ(r["ok"], true) << r;
    EXPECT_EQ(r["job"]["fast_path_chunks"], 0) << r;  // there is no fast path
    for (unsigned rank = 0; rank < kWorkers; rank++) {
        json joined = tcp_request(topo, {{"op", "join"},
                                         {"job", kJob},
                                         {"rank", rank},
                                         {"addr", worker_addr(rank)},
                                         {"port", 9872},
                                         {"token", kToken}});
        EXPECT_EQ(joined["ok"], true) << joined;
        key_ = joined.value("key", "");
    }
    auto workers = start_workers(topo, kWorkers, kChunks, kRounds);
    // Garbage on the data port and a bad request while the job runs: counted, refused, harmless.
    run_command("ip netns exec " + topo.worker(0) + " bash -c 'for i in 1 2 3; do printf hello " +
                ">/dev/udp/" + kAggAddr + "/9871; head -c 1056 /dev/zero >/dev/udp/" + kAggAddr +
                "/9871; done'");
    EXPECT_EQ(control(socket_, {{"op", "delete_job"}, {"job", kJob}, {"force", true}})["ok"],
              false);
    expect_all_exact(workers, uint64_t{kRounds} * kChunks);
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["host_counters"]["completed"], kRounds * kChunks) << stats;
    EXPECT_EQ(stats["host_counters"]["drop_truncated"], 3) << stats;
    EXPECT_EQ(stats["host_counters"]["drop_bad_magic"], 3) << stats;
    EXPECT_EQ(stats["counters"]["completed"], 0) << stats;
    EXPECT_EQ(stats["request_errors"], 3) << stats;
    std::string link = run_command("ip -n " + topo.agg() + " link show eth0");
    EXPECT_EQ(link.find("xdp"), std::string::npos) << link;
}

TEST_F(DaemonIntegration, BadConfigLineIsRefusedWithFileAndLine)
{
    std::string path = dir_ + "/bad.conf";
    std::ofstream(path) << "interface = eth0\nmax_chunks = lots\n";
    Process p({XAGG_BINARY_DIR "/daemon/xaggd", "--config", path}, dir_ + "/bad.log");
    EXPECT_EQ(p.wait(10s), 1);
    EXPECT_NE(p.output().find(path + ":2: "), std::string::npos) << p.output();
    EXPECT_NE(p.output().find("lots"), std::string::npos) << p.output();
}

}  // namespace
}  // namespace xagg::test
