// SPDX-License-Identifier: MIT
// The client library through real daemons in namespaces, run as xagg-worker processes: many
// rounds of random tensors, every value checked bit for bit against the protocol's arithmetic
// and within the error bound of the float64 sum; links that lose, duplicate and reorder frames;
// a worker killed under the evict policy; a tensor split across two aggregators.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "xagg/proto.h"

#include "lib/etcd/etcd_client.hpp"
#include "tests/support/daemon.hpp"
#include "tests/support/etcd.hpp"
#include "tests/support/process.hpp"
#include "tests/support/topology.hpp"

namespace xagg::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

struct Impairment {
    const char *name;
    double loss, duplicate, reorder;
};

class ClientIntegration : public DaemonTest {
protected:
    // A job of `workers` workers with room for `chunks` chunks, created over the API.
    void create_job(uint32_t id, unsigned workers, uint32_t chunks, const json &extra = {},
                    const std::string &socket = {})
    {
        json req = {{"op", "create_job"},
                    {"id", id},
                    {"workers", workers},
                    {"gradient_elems", uint64_t{chunks} * XAGG_CHUNK_ELEMS}};
        for (const auto &[k, v] : extra.items())
            req[k] = v;
        json r = control(socket.empty() ? socket_ : socket, req);
        ASSERT_EQ(r["ok"], true) << r;
    }

    // xagg-worker rank `rank` in its namespace; its JSON report goes to DIR/worker-TAG-RANK.
    std::unique_ptr<Process> worker(const Topology &topo, unsigned rank,
                                    const std::vector<std::string> &aggregators,
                                    const std::vector<std::string> &args,
                                    const std::string &tag = "w")
    {
        std::vector<std::string> argv = {XAGG_BINARY_DIR "/tools/xagg-worker",
                                         "--netns",
                                         topo.worker(rank),
                                         "--rank",
                                         std::to_string(rank),
                                         "--local",
                                         worker_addr(rank),
                                         "--json"};
        for (const auto &a : aggregators) {
            argv.push_back("--aggregator");
            argv.push_back(a);
        }
        argv.insert(argv.end(), args.begin(), args.end());
        return std::make_unique<Process>(argv, dir_ + "/worker-" + tag + std::to_string(rank));
    }

    // Ranks 0..count-1 on job `job` of this daemon, with the same arguments.
    std::vector<std::unique_ptr<Process>> workers(const Topology &topo, unsigned count,
                                                  uint32_t job,
                                                  const std::vector<std::string> &args)
    {
        std::vector<std::unique_ptr<Process>> procs;
        for (unsigned r = 0; r < count; r++)
            procs.push_back(worker(topo, r, {here(job)}, args));
        return procs;
    }

    std::string here(uint32_t job) const
    {
        return "address=" + kAggAddr + ",job=" + std::to_string(job) + ",socket=" + socket_;
    }

    // Runs `workers` workers to the end; each must verify every value of every iteration.
    void expect_all_verified(std::vector<std::unique_ptr<Process>> &procs, uint64_t values)
    {
        for (auto &p : procs) {
            ASSERT_EQ(p->wait(180s), 0) << p->output();
            json r = json::parse(p->output());
            EXPECT_EQ(r["exact"], values) << r;
            EXPECT_EQ(r["wrong"], 0) << r;
            EXPECT_EQ(r["beyond_bound"], 0) << r;
            EXPECT_LE(r["worst_error_over_bound"].get<double>(), 1.0) << r;
        }
    }

    // --- cluster jobs: a real etcd on the namespaces' own network (the bridge), where every
    // node and worker reaches it; nothing outside the test's namespaces sees it.
    static constexpr const char *kEtcdPrefix = "/xaggtest";

    std::unique_ptr<EtcdServer> start_etcd(const Topology &topo)
    {
        EXPECT_EQ(run_command("ip -n " + topo.sw() + " addr add 10.77.0.250/24 dev br0 && echo ok"),
                  "ok\n");
        return std::make_unique<EtcdServer>(dir_ + "/etcd", "10.77.0.250", 2379, topo.sw());
    }

    // The config lines that make a daemon node `name` of the cluster.
    static std::string cluster_keys(const EtcdServer &etcd, const std::string &name,
                                    const std::string &address)
    {
        return "etcd_endpoint = " + etcd.endpoint() + "\netcd_prefix = " + kEtcdPrefix +
               "\netcd_lease_ttl = 2\nnode_name = " + name + "\nadvertise_address = " + address +
               "\n";
    }

    // `xaggctl cluster ... job create ARGS` as an operator runs it, from the bridge's namespace.
    static std::string create_cluster_job(const Topology &topo, const EtcdServer &etcd,
                                          const std::string &args)
    {
        return run_command("ip netns exec " + topo.sw() +
                           " " XAGG_BINARY_DIR "/tools/xaggctl cluster --etcd " + etcd.endpoint() +
                           " --prefix " + kEtcdPrefix + " job create " + args + " 2>&1");
    }

    // etcd, reached from the bridge's namespace, as the nodes reach it.
    static void in_etcd(const Topology &topo, const EtcdServer &etcd,
                        const std::function<void(etcd::Client &)> &fn)
    {
        sys::run_in_netns(topo.sw(), [&] {
            etcd::Client c(etcd.endpoint());
            fn(c);
        });
    }

    // The node of each partition of cluster job `job`; empty before it is placed.
    static json placement(const Topology &topo, const EtcdServer &etcd, uint32_t job)
    {
        json p = json::array();
        in_etcd(topo, etcd, [&](etcd::Client &c) {
            if (auto kv = c.get(std::string(kEtcdPrefix) + "/placement/" + std::to_string(job)))
                p = json::parse(kv->value)["partitions"];
        });
        return p;
    }

    // The local job `job` of the daemon at `socket` (null when it holds none).
    static json local_job(const std::string &socket, uint32_t job)
    {
        try {
            json j = control(socket, {{"op", "show_job"}, {"job", job}});
            return j["ok"] == true ? j["job"] : json();
        } catch (const std::exception &) {
            return json();
        }
    }

    static uint64_t local_elems(const std::string &socket, uint32_t job)
    {
        json j = local_job(socket, job);
        return j.is_null() ? 0 : j["gradient_elems"].get<uint64_t>();
    }
};

TEST_F(ClientIntegration, EveryWorkerGetsTheBitExactSumForManyRounds)
{
    constexpr unsigned kWorkers = 4, kIterations = 20;
    constexpr uint64_t kElems = 100003;  // a ragged last chunk
    Topology topo("f", kWorkers);
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    create_job(7, kWorkers, 2048);
    auto procs = workers(topo, kWorkers, 7,
                         {"--elems", std::to_string(kElems), "--iterations",
                          std::to_string(kIterations), "--verify", "--seed", "11"});
    expect_all_verified(procs, kElems * kIterations);

    // int32 tensors: the wrapping sum, exact. A new session needs a new job (rounds restart).
    create_job(8, kWorkers, 2048);
    procs.clear();
    for (unsigned r = 0; r < kWorkers; r++)
        procs.push_back(worker(topo, r, {here(8)},
                               {"--elems", std::to_string(kElems), "--iterations", "5", "--dtype",
                                "int32", "--verify"},
                               "i"));
    expect_all_verified(procs, kElems * 5);
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["counters"]["drop_bad_exponent"], 0) << stats;
    EXPECT_EQ(stats["counters"]["drop_not_member"], 0) << stats;
}

// Two hosts of four ranks each (a GPU server runs a rank a GPU), ranks numbered host by host.
constexpr unsigned kHosts = 2, kPerHost = 4, kHostRanks = kHosts * kPerHost;

class TrainingHosts : public ClientIntegration {
protected:
    // Every rank of both hosts on `job`, each with its local rank; `extra` for each.
    std::vector<std::unique_ptr<Process>> host_ranks(const Topology &topo, uint32_t job,
                                                     uint64_t elems, unsigned iterations,
                                                     const std::vector<std::string> &extra = {})
    {
        std::vector<std::unique_ptr<Process>> procs;
        for (unsigned rank = 0; rank < kHostRanks; rank++) {
            const unsigned host = rank / kPerHost;
            std::vector<std::string> argv = {XAGG_BINARY_DIR "/tools/xagg-worker",
                                             "--netns",
                                             topo.worker(host),
                                             "--rank",
                                             std::to_string(rank),
                                             "--local",
                                             worker_addr(host),
                                             "--local-rank",
                                             std::to_string(rank % kPerHost),
                                             "--local-ranks",
                                             std::to_string(kPerHost),
                                             "--aggregator",
                                             here(job),
                                             "--elems",
                                             std::to_string(elems),
                                             "--iterations",
                                             std::to_string(iterations),
                                             "--verify",
                                             "--seed",
                                             "5",
                                             "--json"};
            argv.insert(argv.end(), extra.begin(), extra.end());
            procs.push_back(std::make_unique<Process>(
                argv, dir_ + "/worker-r" + std::to_string(job) + "-" + std::to_string(rank)));
        }
        return procs;
    }

    uint64_t aggregated_bytes()
    {
        const json s = control(socket_, {{"op", "status"}});
        return s["aggregated_bytes"]["fast"].get<uint64_t>() +
               s["aggregated_bytes"]["host"].get<uint64_t>();
    }
};

// Every rank with a port of its own (the group port + 1 + its local rank), the results reaching
// all four of a host: by multicast (each rank's group socket gets its copy) and by unicast
// fan-out (each its own).
TEST_F(TrainingHosts, FourRanksOnEachOfTwoHostsGetTheBitExactSumOnTheirOwnPorts)
{
    constexpr unsigned kIterations = 8;
    constexpr uint64_t kElems = 50003;
    Topology topo("r", kHosts);
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    for (const auto &[job, extra] :
         std::vector<std::pair<uint32_t, json>>{{9, json::object()}, {10, {{"fanout", true}}}}) {
        SCOPED_TRACE(extra.dump());
        create_job(job, kHostRanks, 512, extra);
        auto procs = host_ranks(topo, job, kElems, kIterations);
        expect_all_verified(procs, kElems * kIterations);
        // The daemon knew each rank by its address and its own port.
        const json shown = control(socket_, {{"op", "show_job"}, {"job", job}});
        const uint16_t group_port = shown["job"]["group_port"];
        std::set<std::pair<std::string, uint16_t>> members;
        for (const json &m : shown["job"]["members"]) {
            const unsigned rank = m["rank"];
            EXPECT_EQ(m["addr"], worker_addr(rank / kPerHost)) << m;
            EXPECT_EQ(m["port"], group_port + 1 + rank % kPerHost) << m;
            members.emplace(m["addr"], m["port"]);
        }
        EXPECT_EQ(members.size(), kHostRanks);
    }
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["counters"]["drop_not_member"], 0) << stats;
}

// Local-first: each host's ranks hand their tensors to local rank 0, which alone is the job's
// member for the host and sends their integer sum. The sums are what xagg-worker --verify
// computes for that grouping (bit for bit, within the bound of all eight ranks), and the
// aggregator sums exactly a quarter of the bytes the same all-reduces cost flat.
TEST_F(TrainingHosts, FourRanksOnEachOfTwoHostsReduceInsideTheHostFirst)
{
    constexpr unsigned kIterations = 6;
    constexpr uint64_t kElems = 70001;
    Topology topo("q", kHosts);
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    create_job(20, kHostRanks, 512);
    const uint64_t before_flat = aggregated_bytes();
    auto flat = host_ranks(topo, 20, kElems, kIterations);
    expect_all_verified(flat, kElems * kIterations);
    const uint64_t flat_bytes = aggregated_bytes() - before_flat;

    create_job(21, kHosts, 512);  // a member a host
    const uint64_t before = aggregated_bytes();
    auto procs = host_ranks(topo, 21, kElems, kIterations, {"--local-first"});
    expect_all_verified(procs, kElems * kIterations);
    for (auto &p : procs)
        EXPECT_EQ(json::parse(p->output())["workers"], kHostRanks) << p->output();
    EXPECT_EQ(aggregated_bytes() - before, flat_bytes / kPerHost) << flat_bytes;
    const json members = control(socket_, {{"op", "show_job"}, {"job", 21}})["job"]["members"];
    ASSERT_EQ(members.size(), kHosts) << members;
    for (unsigned host = 0; host < kHosts; host++) {
        EXPECT_EQ(members[host]["rank"], host);
        EXPECT_EQ(members[host]["addr"], worker_addr(host));
    }
}

// Small clusters run the aggregator on a training server. Its rank's contributions come over
// loopback, which XDP never sees: at its join the job moves to the host path whole (its region
// by the usual steps) and stays there, and every rank gets the exact sum.
TEST_F(ClientIntegration, ARankOnTheAggregatorsHostJoinsAJobServedByTheHostPathAndSumsStayExact)
{
    constexpr unsigned kRemote = 2, kIterations = 6;
    constexpr uint64_t kElems = 60001;
    Topology topo("h", kRemote);
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    create_job(11, kRemote + 1, 512);
    json before = control(socket_, {{"op", "show_job"}, {"job", 11}})["job"];
    ASSERT_GT(before["fast_path_chunks"], 0) << before;  // so the join moves a region
    const std::vector<std::string> args = {"--elems",
                                           std::to_string(kElems),
                                           "--iterations",
                                           std::to_string(kIterations),
                                           "--verify",
                                           "--seed",
                                           "3"};
    auto procs = workers(topo, kRemote, 11, args);
    std::vector<std::string> local = {XAGG_BINARY_DIR "/tools/xagg-worker",
                                      "--netns",
                                      topo.agg(),
                                      "--rank",
                                      std::to_string(kRemote),
                                      "--local",
                                      kAggAddr,
                                      "--aggregator",
                                      here(11),
                                      "--json"};
    local.insert(local.end(), args.begin(), args.end());
    procs.push_back(std::make_unique<Process>(local, dir_ + "/worker-local"));
    expect_all_verified(procs, kElems * kIterations);
    json after = control(socket_, {{"op", "show_job"}, {"job", 11}})["job"];
    EXPECT_EQ(after["host_path"], true) << after;
    EXPECT_EQ(after["fast_path_chunks"], 0) << after;
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["counters"]["drop_not_member"], 0) << stats;
    EXPECT_GT(stats["chunks_completed"]["host"], 0) << stats;
}

TEST_F(ClientIntegration, TuningWorkersAllChooseTheSameSettingAndEveryResultStaysExact)
{
    constexpr unsigned kWorkers = 3, kIterations = 24;
    constexpr uint64_t kElems = 300000;
    Topology topo("t", kWorkers);
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    create_job(7, kWorkers, 1024);
    std::vector<std::unique_ptr<Process>> procs;
    for (unsigned r = 0; r < kWorkers; r++)
        procs.push_back(
            worker(topo, r, {here(7)},
                   {"--elems", std::to_string(kElems), "--iterations", std::to_string(kIterations),
                    "--verify", "--tune-calls", "2", "--tune-trials", "5"}));
    std::vector<json> tuning;
    for (auto &p : procs) {
        ASSERT_EQ(p->wait(180s), 0) << p->output();
        json r = json::parse(p->output());
        EXPECT_EQ(r["exact"], kElems * kIterations) << r;
        EXPECT_EQ(r["wrong"], 0) << r;
        tuning.push_back(r["tuning"]);
    }
    // Under congestion control (the default) the credit follows the network and the tuner
    // searches the batch alone: the start and its two neighbours, then further along a line only
    // while each step pays off, within the budget of 5. How far it goes depends on what it
    // measures; that every worker measured the same means (all-reduced), and so chose the same
    // setting, does not.
    EXPECT_EQ(tuning[0]["done"], true) << tuning[0];
    const unsigned trials = tuning[0]["trials"];
    EXPECT_GE(trials, 3u) << tuning[0];
    EXPECT_LE(trials, 5u) << tuning[0];
    for (unsigned r = 0; r < kWorkers; r++) {
        EXPECT_EQ(tuning[r]["window"], 512) << "the credit ceiling is not searched: " << tuning[r];
        EXPECT_EQ(tuning[r]["trials"], tuning[0]["trials"]) << tuning[r];
        EXPECT_EQ(tuning[r]["partition_chunks"], tuning[0]["partition_chunks"]) << tuning[r];
        EXPECT_EQ(tuning[r]["best_call_seconds"], tuning[0]["best_call_seconds"]) << tuning[r];
    }
    EXPECT_NE(tuning[0]["log"].get<std::string>().find("xagg: tuned after " +
                                                       std::to_string(trials) + " trials"),
              std::string::npos)
        << tuning[0];
}

// The last line of a process's output that is a JSON object (warnings may come before it).
json last_json_line(const std::string &output)
{
    size_t at = output.rfind("\n{");
    return json::parse(at == std::string::npos ? output : output.substr(at + 1));
}

TEST_F(ClientIntegration, AClusterJobIsPlacedAcrossTwoNodesAndSurvivesLosingOne)
{
    constexpr unsigned kWorkers = 3, kIterations = 300;
    constexpr uint64_t kElems = 300000;  // 391 blocks + 7 exponent chunks: 2 partitions of 200
    Topology topo("e", kWorkers);
    std::string agg1 = topo.add_aggregator(1);
    auto etcd = start_etcd(topo);
    const std::string endpoint = etcd->endpoint(), prefix = kEtcdPrefix;
    std::ofstream(write_config(topo), std::ios::app) << cluster_keys(*etcd, "n0", kAggAddr);
    auto daemon0 = start_daemon(dir_ + "/xaggd.conf", "xaggd.log");
    std::string socket1 = dir_ + "/xaggd1.sock", config1 = write_second_config(agg1, socket1);
    std::ofstream(config1, std::ios::app) << cluster_keys(*etcd, "n1", "10.77.0.101");

    // The operator creates the job in etcd while node 0 is alone: it takes both partitions.
    std::string created = create_cluster_job(
        topo, *etcd,
        "--id 7 --workers 3 --elems " + std::to_string(kElems) + " --partition-chunks 200");
    EXPECT_EQ(created, "cluster job 7 created; `xaggctl cluster show` shows where it is placed\n");
    auto placement = [&] { return ClientIntegration::placement(topo, *etcd, 7); };
    auto local_elems = [](const std::string &socket) {
        return ClientIntegration::local_elems(socket, 7);
    };
    for (int i = 0; i < 600 && !(placement() == json::array({"n0", "n0"}) && local_elems(socket_));
         i++)
        std::this_thread::sleep_for(50ms);
    ASSERT_EQ(placement(), json::array({"n0", "n0"})) << daemon0->output();
    // Node 1 joins later: the placement follows it, one partition each, and each node holds its
    // share as a local job.
    auto daemon1 = std::make_unique<Process>(xaggd_as_unit(agg1, config1), dir_ + "/xaggd1.log");
    for (int i = 0; i < 600 && !(placement() == json::array({"n0", "n1"}) && local_elems(socket1) &&
                                 local_elems(socket_) == (197 + 4) * XAGG_CHUNK_ELEMS);
         i++)
        std::this_thread::sleep_for(50ms);
    ASSERT_EQ(placement(), json::array({"n0", "n1"})) << daemon1->output();
    // Each holds its half of the 391 blocks, rounded up plus one, and their exponent chunks.
    EXPECT_EQ(local_elems(socket_), (197 + 4) * XAGG_CHUNK_ELEMS);
    EXPECT_EQ(local_elems(socket1), (197 + 4) * XAGG_CHUNK_ELEMS);

    std::vector<std::unique_ptr<Process>> procs;
    for (unsigned r = 0; r < kWorkers; r++)
        procs.push_back(
            worker(topo, r, {},
                   {"--etcd", endpoint, "--etcd-prefix", prefix, "--cluster-job", "7", "--elems",
                    std::to_string(kElems), "--iterations", std::to_string(kIterations), "--verify",
                    "--timeout-ms", "10", "--max-retries", "40", "--no-autotune"}));
    // Both nodes aggregate; then node 1 dies: its daemon is killed and its NIC goes down (the
    // XDP program would otherwise go on aggregating without it).
    for (int i = 0; i < 500; i++) {
        json p = control(socket1, {{"op", "show_job"}, {"job", 7}})["job"]["progress"];
        if (!p["newest_round"].is_null() && p["newest_round"].get<uint32_t>() >= 20)
            break;
        std::this_thread::sleep_for(10ms);
    }
    daemon1->signal(SIGKILL);
    EXPECT_EQ(daemon1->wait(5s), 128 + SIGKILL);
    ASSERT_EQ(run_command("ip -n " + agg1 + " link set eth0 down && echo ok"), "ok\n");

    // Its lease runs out, node 0 takes both partitions, the workers take the new placement and
    // every one of their results, before and after, is exact.
    for (auto &p : procs) {
        ASSERT_EQ(p->wait(180s), 0) << p->output();
        json r = last_json_line(p->output());
        EXPECT_EQ(r["exact"], kElems * kIterations) << r;
        EXPECT_EQ(r["wrong"], 0) << r;
        EXPECT_EQ(r["beyond_bound"], 0) << r;
        EXPECT_NE(p->output().find("waiting for job 7 to be placed again"), std::string::npos)
            << p->output();
    }
    EXPECT_EQ(placement(), json::array({"n0", "n0"}));
    EXPECT_EQ(local_elems(socket_), (391 + 1 + 7) * XAGG_CHUNK_ELEMS) << daemon0->output();
    in_etcd(topo, *etcd, [&](etcd::Client &c) {  // n1's registration expired with it
        EXPECT_EQ(c.range(prefix + "/nodes/").size(), 1u);
    });
}

TEST_F(ClientIntegration, AJumboChunkClusterJobIsHeldInJumboChunksOnEveryNodeAndStaysExact)
{
    constexpr unsigned kWorkers = 3, kIterations = 20;
    // 147 jumbo blocks + 1 exponent chunk, 3 slot positions each: 444, 2 partitions of 222.
    constexpr uint64_t kElems = 300000;
    Topology topo("j", kWorkers);
    std::string agg1 = topo.add_aggregator(1);
    auto etcd = start_etcd(topo);
    std::ofstream(write_config(topo), std::ios::app) << cluster_keys(*etcd, "n0", kAggAddr);
    auto daemon0 = start_daemon(dir_ + "/xaggd.conf", "xaggd.log");
    std::string socket1 = dir_ + "/xaggd1.sock", config1 = write_second_config(agg1, socket1);
    std::ofstream(config1, std::ios::app) << cluster_keys(*etcd, "n1", "10.77.0.101");
    auto daemon1 = std::make_unique<Process>(xaggd_as_unit(agg1, config1), dir_ + "/xaggd1.log");

    EXPECT_EQ(create_cluster_job(topo, *etcd,
                                 "--id 7 --workers 3 --elems " + std::to_string(kElems) +
                                     " --partition-chunks 222 --chunk-elems 2048"),
              "cluster job 7 created; `xaggctl cluster show` shows where it is placed\n");
    // Each node holds ceil(147 / 2) + 1 = 75 blocks and their exponent chunk, in jumbo chunks.
    constexpr uint64_t kShare = (75 + 1) * XAGG_JUMBO_CHUNK_ELEMS;
    for (int i = 0;
         i < 600 && !(local_elems(socket_, 7) == kShare && local_elems(socket1, 7) == kShare); i++)
        std::this_thread::sleep_for(50ms);
    for (const std::string &socket : {socket_, socket1}) {
        json local = local_job(socket, 7);
        ASSERT_FALSE(local.is_null()) << daemon0->output() << daemon1->output();
        EXPECT_EQ(local["gradient_elems"], kShare) << local;
        EXPECT_EQ(local["chunk_elems"], XAGG_JUMBO_CHUNK_ELEMS) << local;
    }
    json where = placement(topo, *etcd, 7);
    std::sort(where.begin(), where.end());
    EXPECT_EQ(where, json::array({"n0", "n1"}));
    // What the operator sees: the job's chunk size beside its size.
    std::string shown = run_command("ip netns exec " + topo.sw() +
                                    " " XAGG_BINARY_DIR "/tools/xaggctl cluster --etcd " +
                                    etcd->endpoint() + " --prefix " + kEtcdPrefix + " show");
    EXPECT_NE(shown.find("\n7    3        300000       2048   n"), std::string::npos) << shown;

    std::vector<std::unique_ptr<Process>> procs;
    for (unsigned r = 0; r < kWorkers; r++)
        procs.push_back(worker(topo, r, {},
                               {"--etcd", etcd->endpoint(), "--etcd-prefix", kEtcdPrefix,
                                "--cluster-job", "7", "--elems", std::to_string(kElems),
                                "--iterations", std::to_string(kIterations), "--verify"}));
    for (auto &p : procs) {
        ASSERT_EQ(p->wait(180s), 0)
            << p->output() << local_job(socket_, 7) << local_job(socket1, 7);
        json r = last_json_line(p->output());
        EXPECT_EQ(r["exact"], kElems * kIterations) << r;
        EXPECT_EQ(r["wrong"], 0) << r;
        EXPECT_EQ(r["beyond_bound"], 0) << r;
    }
    // Both nodes summed on their fast paths, in jumbo chunks.
    for (const std::string &socket : {socket_, socket1})
        EXPECT_GT(local_job(socket, 7)["fast_path_chunks"].get<uint64_t>(), 0u)
            << local_job(socket, 7);
}

TEST_F(ClientIntegration, TheHostPathAnswersFromTheAddressTheWorkersSentTo)
{
    // Workers match results to aggregators by source address; the host PS's socket is bound to
    // every address, so it must answer from the one each contribution came to, not the
    // interface's first (10.77.0.100).
    constexpr unsigned kWorkers = 2;
    constexpr uint64_t kElems = 50000;
    Topology topo("s", kWorkers);
    ASSERT_EQ(run_command("ip -n " + topo.agg() + " addr add 10.77.0.150/24 dev eth0 && echo ok"),
              "ok\n");
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    create_job(7, kWorkers, 1024, {{"host_path", true}});
    std::vector<std::unique_ptr<Process>> procs;
    for (unsigned r = 0; r < kWorkers; r++)
        procs.push_back(worker(topo, r, {"address=10.77.0.150,job=7,socket=" + socket_},
                               {"--elems", std::to_string(kElems), "--iterations", "3", "--verify",
                                "--max-retries", "20"}));
    expect_all_verified(procs, kElems * 3);
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_GT(stats["chunks_completed"]["host"].get<uint64_t>(), 0u) << stats;
    EXPECT_EQ(stats["chunks_completed"]["fast"], 0) << stats;
}

class ImpairedLinks : public ClientIntegration, public ::testing::WithParamInterface<Impairment> {};

TEST_P(ImpairedLinks, ResultsStayExact)
{
    constexpr unsigned kWorkers = 3, kIterations = 4;
    constexpr uint64_t kElems = 40000;
    const Impairment &bad = GetParam();
    Topology topo("l", kWorkers);
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    create_job(7, kWorkers, 1024);
    // Every worker's link, both directions.
    std::vector<std::unique_ptr<Process>> links;
    for (unsigned r = 0; r < kWorkers; r++) {
        topo.detour(r);
        links.push_back(std::make_unique<Process>(
            std::vector<std::string>{XAGG_BINARY_DIR "/tests/xagg-link-impair", "--netns",
                                     topo.sw(), "--a", "w" + std::to_string(r), "--b",
                                     "k" + std::to_string(r), "--loss", std::to_string(bad.loss),
                                     "--duplicate", std::to_string(bad.duplicate), "--reorder",
                                     std::to_string(bad.reorder), "--seed", std::to_string(r)},
            dir_ + "/link" + std::to_string(r)));
    }
    std::this_thread::sleep_for(200ms);
    std::vector<std::unique_ptr<Process>> procs;
    for (unsigned r = 0; r < kWorkers; r++)
        procs.push_back(
            worker(topo, r, {here(7)},
                   {"--elems", std::to_string(kElems), "--iterations", std::to_string(kIterations),
                    "--verify", "--timeout-ms", "10", "--max-retries", "2000"}));
    expect_all_verified(procs, kElems * kIterations);
    // The links really did what they were asked to.
    uint64_t dropped = 0, duplicated = 0, delayed = 0;
    for (auto &l : links) {
        l->signal(SIGTERM);
        ASSERT_EQ(l->wait(5s), 0) << l->output();
        json j = json::parse(l->output());
        dropped += j["dropped"].get<uint64_t>();
        duplicated += j["duplicated"].get<uint64_t>();
        delayed += j["delayed"].get<uint64_t>();
    }
    EXPECT_EQ(dropped > 0, bad.loss > 0);
    EXPECT_EQ(duplicated > 0, bad.duplicate > 0);
    EXPECT_EQ(delayed > 0, bad.reorder > 0);
}

INSTANTIATE_TEST_SUITE_P(Links, ImpairedLinks,
                         ::testing::Values(Impairment{"loss1", 1, 0, 0},
                                           Impairment{"loss10", 10, 0, 0},
                                           Impairment{"duplicate10", 0, 10, 0},
                                           Impairment{"reorder20", 0, 0, 20},
                                           Impairment{"all", 5, 5, 10}),
                         [](const auto &param_info) { return std::string(param_info.param.name); });

// Incast, as on a real aggregator NIC: four workers at 1 Gbit/s into an aggregator link of
// 1 Gbit/s with a 512 KB queue. Every result exact, and the controller keeps the resent share
// small. The bound is a correctness guard, far from the measured figure (well under 1%; bench/run
// section 9): without congestion control the same run resends more than it delivers.
TEST_F(ClientIntegration, UnderAShapedBottleneckResultsStayExactAndFewAreResent)
{
    constexpr unsigned kWorkers = 4, kIterations = 3;
    constexpr uint64_t kElems = 1 << 21;  // 8 MiB
    Topology topo("s", kWorkers);
    for (unsigned r = 0; r < kWorkers; r++) {
        topo.shape(topo.worker(r), "eth0", "1gbit");
        topo.shape(topo.sw(), "w" + std::to_string(r), "1gbit");
    }
    topo.shape(topo.sw(), "agg", "1gbit");
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    create_job(7, kWorkers, 4096);
    auto procs = workers(topo, kWorkers, 7,
                         {"--elems", std::to_string(kElems), "--iterations",
                          std::to_string(kIterations), "--verify", "--no-autotune"});
    expect_all_verified(procs, kElems * kIterations);
    uint64_t sent = 0, resent = 0;
    for (auto &p : procs) {
        json r = json::parse(p->output());
        sent += r["chunks"].get<uint64_t>();
        resent += r["retransmits"].get<uint64_t>();
    }
    ASSERT_GT(sent, 0u);
    EXPECT_LT(double(resent) / double(sent), 0.10) << resent << " of " << sent << " resent";
    // The queue was really the bottleneck: tbf held frames back.
    std::string shown = run_command("ip netns exec " + topo.sw() + " tc -s qdisc show dev agg");
    EXPECT_NE(shown.find("overlimits"), std::string::npos) << shown;
    EXPECT_EQ(shown.find("overlimits 0 "), std::string::npos) << shown;
}

// The congestion echo end to end (docs/PROTOCOL.md, "Congestion echo"): behind an aggregator
// port that marks ECN (bench/ecn_marker.bpf.c, the bench's marking switch port) the workers' ECT
// contributions are marked CE, the fast path echoes the count in its results, the workers'
// controllers see it, and every value stays exact. Without ECT on the workers' frames the port
// would mark nothing; without the echo, no worker would count a marked result.
TEST_F(ClientIntegration, BehindAnEcnMarkingPortTheMarksReachEveryWorkerAndResultsStayExact)
{
    constexpr unsigned kWorkers = 4, kIterations = 3;
    constexpr uint64_t kElems = 1 << 21;  // 8 MiB
    Topology topo("e", kWorkers);
    topo.shape(topo.sw(), "agg", "1gbit");
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    Process marker({XAGG_BINARY_DIR "/bench/xagg-ecn-mark", "--netns", topo.sw(), "--dev", "agg",
                    "--rate-mbit", "950", "--threshold-bytes", "65536"},
                   dir_ + "/ecn-mark");
    // Attached when its filter shows on the port's egress.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (run_command("tc -n " + topo.sw() + " filter show dev agg egress").find("ecn_marker") ==
           std::string::npos) {
        ASSERT_TRUE(marker.running()) << marker.output();
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << marker.output();
        std::this_thread::sleep_for(20ms);
    }
    create_job(7, kWorkers, 4096);
    auto procs = workers(topo, kWorkers, 7,
                         {"--elems", std::to_string(kElems), "--iterations",
                          std::to_string(kIterations), "--verify", "--no-autotune"});
    expect_all_verified(procs, kElems * kIterations);
    marker.signal(SIGTERM);
    ASSERT_EQ(marker.wait(30s), 0) << marker.output();
    const std::string out = marker.output();
    json port = json::parse(out.substr(out.rfind('{')));
    EXPECT_GT(port["marked"].get<uint64_t>(), 0u) << port;
    // Every contribution left the workers ECT(0): the port saw them ECN-capable.
    EXPECT_GE(port["ect"].get<uint64_t>(), kWorkers * kIterations * kElems / XAGG_CHUNK_ELEMS)
        << port;
    for (auto &p : procs) {
        json r = json::parse(p->output());
        EXPECT_GT(r["marked_chunks"].get<uint64_t>(), 0u) << r;
        EXPECT_GT(r["credit_cuts"].get<uint64_t>(), 0u) << r;
    }
    // The aggregator counted the marks it echoed, no more than the port made.
    json stats = control(socket_, {{"op", "stats"}});
    const uint64_t counted = stats["counters"]["ce_marked"].get<uint64_t>();
    EXPECT_GT(counted, 0u) << stats;
    EXPECT_LE(counted, port["marked"].get<uint64_t>()) << stats << port;
}

TEST_F(ClientIntegration, AKilledWorkerIsEvictedAndTheOthersFinish)
{
    constexpr unsigned kWorkers = 3;
    Topology topo("k", kWorkers);
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    create_job(7, kWorkers, 512, {{"policy", "evict"}, {"timeout_ms", 100}, {"evict_after", 2}});
    std::vector<std::unique_ptr<Process>> procs;
    for (unsigned r = 0; r < kWorkers; r++)
        procs.push_back(
            worker(topo, r, {here(7)},
                   {"--elems", "50000", "--iterations", "400", "--max-retries", "1000"}));
    // Rank 2 dies once the job is under way.
    for (int i = 0; i < 500; i++) {
        json p = control(socket_, {{"op", "show_job"}, {"job", 7}})["job"]["progress"];
        if (!p["newest_round"].is_null() && p["newest_round"].get<uint32_t>() >= 5)
            break;
        std::this_thread::sleep_for(10ms);
    }
    procs[2]->signal(SIGKILL);
    EXPECT_EQ(procs[2]->wait(5s), 128 + SIGKILL);
    for (unsigned r = 0; r < 2; r++) {
        ASSERT_EQ(procs[r]->wait(120s), 0) << procs[r]->output();
        json out = json::parse(procs[r]->output());
        EXPECT_GT(out["partial_chunks"].get<uint64_t>(), 0u) << out;  // results without rank 2
    }
    json job = control(socket_, {{"op", "show_job"}, {"job", 7}})["job"];
    EXPECT_EQ(job["evicted_ranks"], json::array({2})) << job;
}

TEST_F(ClientIntegration, ATensorSplitAcrossTwoAggregatorsGetsTheSameResultAsOne)
{
    constexpr unsigned kWorkers = 3;
    constexpr uint64_t kElems = 200000;
    Topology topo("a", kWorkers);
    std::string agg2 = topo.add_aggregator(1);  // 10.77.0.101, its own NIC and XDP program
    auto daemon = start_daemon(write_config(topo), "xaggd.log");
    // The second node's daemon: the same config but for its namespace, pins, state and socket.
    std::string socket2 = dir_ + "/xaggd2.sock", config2 = write_second_config(agg2, socket2);
    Process daemon2(xaggd_as_unit(agg2, config2), dir_ + "/xaggd2.log");
    for (int i = 0; i < 200 && !std::filesystem::exists(socket2); i++)
        std::this_thread::sleep_for(25ms);
    create_job(7, kWorkers, 1024);  // the whole tensor on node 1
    // A share of a split tensor on node 1 and the rest on node 2, under one job id, as a
    // cluster job's shares are: the workers tell the two nodes' results apart by their source.
    create_job(8, kWorkers, 1024);
    create_job(8, kWorkers, 1024, {}, socket2);
    const std::string node2 = "address=10.77.0.101,job=8,socket=" + socket2 + ",weight=2";
    auto run = [&](const std::vector<std::string> &aggs, const std::string &tag) {
        std::vector<std::unique_ptr<Process>> procs;
        for (unsigned r = 0; r < kWorkers; r++)
            procs.push_back(
                worker(topo, r, aggs,
                       {"--elems", std::to_string(kElems), "--iterations", "3", "--verify",
                        "--output", dir_ + "/" + tag + std::to_string(r) + ".bin"},
                       tag));
        expect_all_verified(procs, kElems * 3);
    };
    run({here(7)}, "one");
    run({here(8), node2}, "two");
    auto bytes = [](const std::string &path) {
        std::ifstream in(path, std::ios::binary);
        return std::vector<char>(std::istreambuf_iterator<char>(in), {});
    };
    for (unsigned r = 0; r < kWorkers; r++) {
        auto one = bytes(dir_ + "/one" + std::to_string(r) + ".bin");
        EXPECT_EQ(one.size(), kElems * 4);
        EXPECT_TRUE(one == bytes(dir_ + "/two" + std::to_string(r) + ".bin")) << "rank " << r;
    }
    // Each node carried its share, weights 1 and 2: a third of the blocks on node 1, the rest
    // on node 2, each with its exponent chunks (one per 64 blocks); node 1 also ran the
    // unsplit tensor.
    auto with_exponents = [](uint64_t blocks) { return blocks + (blocks + 63) / 64; };
    const uint64_t blocks = (kElems + XAGG_CHUNK_ELEMS - 1) / XAGG_CHUNK_ELEMS, first = blocks / 3;
    json st1 = control(socket_, {{"op", "stats"}});
    json st2 = control(socket2, {{"op", "stats"}});
    EXPECT_EQ(st1["chunks_completed"]["fast"], 3 * (with_exponents(blocks) + with_exponents(first)))
        << st1;
    EXPECT_EQ(st2["chunks_completed"]["fast"], 3 * with_exponents(blocks - first)) << st2;
    daemon2.signal(SIGTERM);
    EXPECT_EQ(daemon2.wait(10s), 0) << daemon2.output();
}

}  // namespace
}  // namespace xagg::test
