// SPDX-License-Identifier: MIT
// The fast path on real interfaces: a namespace per worker and one for the aggregator, the XDP
// program attached in native mode by xagg-fastpath, xagg-demo-worker processes sending real UDP,
// every worker checking it received the bit-exact sum.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/demo_worker.hpp"
#include "tests/support/packet_builder.hpp"
#include "tests/support/process.hpp"
#include "tests/support/topology.hpp"
#include "tests/tools/xagg-demo-worker/synthetic.hpp"
#include "xagg/job_key.hpp"
#include "xagg/proto.h"

namespace xagg::test {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kJob = 7;
constexpr uint16_t kGroupPort = 9872;
const std::string kGroup = "239.77.0.7";
const std::string kKey = "3c6ef372fe94f82b";  // the job key given to xagg-fastpath and workers

uint64_t json_number(const std::string &json, const std::string &key)
{
    std::smatch m;
    if (!std::regex_search(json, m, std::regex("\"" + key + "\": \"?([0-9a-f.]+)\"?")))
        throw std::runtime_error("no '" + key + "' in: " + json);
    return key == "digest" ? std::stoull(m[1].str(), nullptr, 16) : std::stoull(m[1].str());
}

uint64_t expected_digest(uint64_t seed, uint32_t workers, uint32_t rounds, uint32_t chunks)
{
    uint64_t digest = 0;
    int32_t v[XAGG_CHUNK_ELEMS];
    for (uint32_t round = 0; round < rounds; round++)
        for (uint32_t chunk = 0; chunk < chunks; chunk++) {
            for (uint32_t i = 0; i < XAGG_CHUNK_ELEMS; i++)
                v[i] = synthetic::expected_sum(seed, workers, round, chunk, i);
            digest += synthetic::result_hash(round, chunk, v, XAGG_CHUNK_ELEMS);
        }
    return digest;
}

void send_udp(const std::string &ns, const std::string &addr, uint16_t port, const void *data,
              size_t len)
{
    Topology::in_netns(ns, [&] {
        int fd = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(port);
        inet_pton(AF_INET, addr.c_str(), &to.sin_addr);
        ssize_t n = sendto(fd, data, len, 0, reinterpret_cast<sockaddr *>(&to), sizeof(to));
        close(fd);
        if (n != static_cast<ssize_t>(len))
            throw std::runtime_error("sendto failed");
    });
}

// Sends `frame`'s IPv4 packet from namespace `ns` through a raw socket, so its source address and
// port are whatever the frame says: what a host on the segment can forge without any privilege
// on the aggregator.
void send_forged(const std::string &ns, const Frame &frame)
{
    const Bytes bytes = frame.build();
    Topology::in_netns(ns, [&] {
        int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_addr.s_addr = htonl(frame.dst_ip);
        const size_t len = bytes.size() - off::ip;
        ssize_t n = sendto(fd, bytes.data() + off::ip, len, 0, reinterpret_cast<sockaddr *>(&to),
                           sizeof(to));
        close(fd);
        if (n != static_cast<ssize_t>(len))
            throw std::runtime_error("raw sendto failed");
    });
}

class FastPathIntegration : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (geteuid() != 0)
            GTEST_SKIP() << "needs root: network namespaces and XDP attach";
        dir_ = ::testing::TempDir() + "xagg-it-" + std::to_string(getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name();
        run_command("rm -rf " + dir_ + " && mkdir -p " + dir_);
    }
    void TearDown() override { run_command("rm -rf " + dir_); }

    std::unique_ptr<Process> start_fastpath(const Topology &topo, unsigned workers, uint32_t chunks,
                                            const std::string &delivery = "")
    {
        std::vector<std::string> argv = {XAGG_BINARY_DIR "/tests/xagg-fastpath",
                                         "--netns",
                                         topo.agg(),
                                         "--interface",
                                         "eth0",
                                         "--max-positions",
                                         "4096",
                                         "--job",
                                         std::to_string(kJob) + ":" + std::to_string(chunks) + ":" +
                                             kGroup + ":" + std::to_string(kGroupPort) + ":" +
                                             kKey + delivery,
                                         "--ready-file",
                                         dir_ + "/ready",
                                         "--stats-file",
                                         dir_ + "/stats.json"};
        for (unsigned r = 0; r < workers; r++) {
            argv.push_back("--member");
            argv.push_back(std::to_string(kJob) + ":" + std::to_string(r) + ":" + worker_addr(r) +
                           ":" + std::to_string(kGroupPort));
        }
        auto p = std::make_unique<Process>(argv, dir_ + "/fastpath.log");
        // Generous: under scripts/kernel-matrix's emulated CPUs loading takes 20-50 times longer.
        EXPECT_TRUE(wait_for_file_from(*p, dir_ + "/ready", 300s)) << p->output();
        return p;
    }

    std::vector<std::unique_ptr<Process>> start_workers(const Topology &topo, unsigned workers,
                                                        uint32_t chunks, uint32_t rounds)
    {
        return start_demo_workers(topo, worker_run(kJob, workers, chunks, rounds, kGroup, kKey),
                                  dir_);
    }

    // Every worker exits cleanly having verified every result and all saw the same sums.
    void expect_exact_results(std::vector<std::unique_ptr<Process>> &procs, unsigned workers,
                              uint32_t chunks, uint32_t rounds)
    {
        uint64_t want = expected_digest(42, workers, rounds, chunks);
        for (unsigned r = 0; r < procs.size(); r++) {
            ASSERT_EQ(procs[r]->wait(300s), 0) << "worker " << r << ": " << procs[r]->output();
            std::string out = procs[r]->output();
            EXPECT_EQ(json_number(out, "verified"), uint64_t{rounds} * chunks) << out;
            EXPECT_EQ(json_number(out, "mismatches"), 0u) << out;
            EXPECT_EQ(json_number(out, "digest"), want) << "worker " << r;
        }
    }

    // Stops the loader as an operator would (SIGTERM) and returns its final counters.
    std::string stop(Process &fastpath) const
    {
        EXPECT_EQ((fastpath.signal(SIGTERM), fastpath.wait(60s)), 0) << fastpath.output();
        std::ifstream in(dir_ + "/stats.json");
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }

    std::string dir_;
};

TEST_F(FastPathIntegration, WorkersReceiveTheBitExactSumInNativeMode)
{
    constexpr unsigned kWorkers = 3;
    constexpr uint32_t kChunks = 256, kRounds = 10;
    Topology topo("a", kWorkers);
    auto fastpath = start_fastpath(topo, kWorkers, kChunks);
    std::string link = run_command("ip -n " + topo.agg() + " link show eth0");
    EXPECT_NE(link.find(" xdp "), std::string::npos) << "not attached in native mode: " << link;
    EXPECT_EQ(link.find("xdpgeneric"), std::string::npos) << link;

    // The host keeps working: other UDP traffic reaches a socket in the aggregator namespace.
    int listener = -1;
    Topology::in_netns(topo.agg(), [&] {
        listener = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(7777);
        ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
    });
    const char hello[] = "not xagg";
    send_udp(topo.worker(0), kAggAddr, 7777, hello, sizeof(hello));
    // Garbage on the xagg port is counted and dropped while the job runs.
    send_udp(topo.worker(1), kAggAddr, XAGG_DEFAULT_PORT, hello, sizeof(hello));

    auto workers = start_workers(topo, kWorkers, kChunks, kRounds);
    expect_exact_results(workers, kWorkers, kChunks, kRounds);

    char buf[64] = {};
    pollfd ready{listener, POLLIN, 0};
    EXPECT_EQ(poll(&ready, 1, 10000), 1) << "the kernel stack never delivered the datagram";
    EXPECT_EQ(recv(listener, buf, sizeof(buf), 0), static_cast<ssize_t>(sizeof(hello)));
    EXPECT_STREQ(buf, hello);
    close(listener);

    std::string s = stop(*fastpath);
    // Each contribution is counted exactly once, however many times it was sent.
    EXPECT_EQ(json_number(s, "completed"), uint64_t{kRounds} * kChunks) << s;
    EXPECT_EQ(json_number(s, "aggregated"), uint64_t{kRounds} * kChunks * (kWorkers - 1)) << s;
    EXPECT_EQ(json_number(s, "drop_truncated"), 1u) << s;
    EXPECT_GE(json_number(s, "pass_foreign"), 1u) << s;
    EXPECT_EQ(json_number(s, "drop_not_member"), 0u) << s;
    // A clean stop leaves no program attached.
    link = run_command("ip -n " + topo.agg() + " link show eth0");
    EXPECT_EQ(link.find("xdp"), std::string::npos) << link;
}

TEST_F(FastPathIntegration, UnicastFanoutDeliversTheBitExactSumToEveryWorker)
{
    constexpr unsigned kWorkers = 3;
    constexpr uint32_t kChunks = 128, kRounds = 10;
    Topology topo("f", kWorkers);
    auto fastpath = start_fastpath(topo, kWorkers, kChunks, ":fanout");
    std::string tc = run_command("tc -n " + topo.agg() + " filter show dev eth0 ingress");
    EXPECT_NE(tc.find("xagg_fanout"), std::string::npos) << tc;
    auto workers = start_workers(topo, kWorkers, kChunks, kRounds);
    expect_exact_results(workers, kWorkers, kChunks, kRounds);
    std::string s = stop(*fastpath);
    EXPECT_EQ(json_number(s, "completed"), 0u) << s;
    EXPECT_EQ(json_number(s, "completed_fanout"), uint64_t{kRounds} * kChunks) << s;
    EXPECT_EQ(json_number(s, "fanout_copies"), uint64_t{kRounds} * kChunks * kWorkers) << s;
    EXPECT_EQ(json_number(s, "fanout_failed"), 0u) << s;
    // Detaching removed the TC program as well.
    tc = run_command("tc -n " + topo.agg() + " filter show dev eth0 ingress");
    EXPECT_EQ(tc.find("xagg_fanout"), std::string::npos) << tc;
}

// A host on the same bridge that never joined forges rank 0's address and source port and sends
// contributions for every rank, with no key, a wrong key, or the key one bit off. Had any been
// added, rank 0's real contribution would be refused as a duplicate and the sums would be wrong.
TEST_F(FastPathIntegration, AHostThatNeverJoinedCannotContributeUnderAMembersAddress)
{
    constexpr unsigned kWorkers = 3;
    constexpr uint32_t kChunks = 64, kRounds = 4;
    Topology topo("k", kWorkers + 1);  // the last worker namespace is the intruder's
    const std::string intruder = topo.worker(kWorkers);
    auto fastpath = start_fastpath(topo, kWorkers, kChunks);
    // The aggregator's MAC, known in advance, so that no forged packet waits in (or is dropped
    // from) the neighbour queue: every one of them must reach the fast path.
    std::string agg_mac =
        run_command("ip netns exec " + topo.agg() + " cat /sys/class/net/eth0/address");
    agg_mac.erase(agg_mac.find_last_not_of('\n') + 1);
    std::string neigh = run_command("ip -n " + intruder + " neigh replace " + kAggAddr +
                                    " lladdr " + agg_mac + " dev eth0 nud permanent");
    ASSERT_EQ(neigh, "") << neigh;
    const uint64_t key = *parse_job_key(kKey);
    uint64_t forged = 0;
    for (uint64_t wrong : {uint64_t{0}, key ^ 1, key ^ (uint64_t{1} << 63), ~key})
        for (uint32_t rank = 0; rank < kWorkers; rank++)
            for (uint32_t chunk = 0; chunk < 4; chunk++) {
                Frame f;
                f.src_ip = ip4(worker_addr(rank).c_str());
                f.dst_ip = ip4(kAggAddr.c_str());
                f.src_port = kGroupPort;
                f.rank = static_cast<uint16_t>(rank);
                f.job = kJob;
                f.chunk = chunk;
                f.key = wrong;
                f.values.assign(XAGG_CHUNK_ELEMS, 1 << 20);
                send_forged(intruder, f);
                forged++;
            }
    auto workers = start_workers(topo, kWorkers, kChunks, kRounds);
    expect_exact_results(workers, kWorkers, kChunks, kRounds);
    std::string s = stop(*fastpath);
    EXPECT_EQ(json_number(s, "drop_bad_key"), forged) << s;
    EXPECT_EQ(json_number(s, "completed"), uint64_t{kRounds} * kChunks) << s;
    EXPECT_EQ(json_number(s, "aggregated"), uint64_t{kRounds} * kChunks * (kWorkers - 1)) << s;
}

TEST_F(FastPathIntegration, LossOnEveryWorkerLinkStillGivesExactSums)
{
    constexpr unsigned kWorkers = 4;
    constexpr uint32_t kChunks = 128, kRounds = 5;
    Topology topo("b", kWorkers);
    // About 5% loss both ways on every worker's link: lost contributions are retransmitted,
    // lost results are re-sent to the one worker that asks.
    const std::string lossy = XAGG_BINARY_DIR "/bpf/xdp_lossy.bpf.o";
    for (unsigned r = 0; r < kWorkers; r++) {
        for (const auto &[ns, dev] : {std::pair{topo.worker(r), std::string("eth0")},
                                      std::pair{topo.sw(), "w" + std::to_string(r)}}) {
            std::string out = run_command("ip -n " + ns + " link set dev " + dev + " xdpdrv obj " +
                                          lossy + " sec xdp.frags");
            ASSERT_EQ(out, "") << "attaching the lossy link to " << dev << ": " << out;
        }
    }
    auto fastpath = start_fastpath(topo, kWorkers, kChunks);
    auto workers = start_workers(topo, kWorkers, kChunks, kRounds);
    expect_exact_results(workers, kWorkers, kChunks, kRounds);
    std::string s = stop(*fastpath);
    EXPECT_EQ(json_number(s, "completed"), uint64_t{kRounds} * kChunks) << s;
    EXPECT_EQ(json_number(s, "aggregated"), uint64_t{kRounds} * kChunks * (kWorkers - 1)) << s;
    EXPECT_GT(json_number(s, "resent") + json_number(s, "drop_duplicate"), 0u)
        << "5% loss must have caused retransmissions: " << s;
}

}  // namespace
}  // namespace xagg::test
