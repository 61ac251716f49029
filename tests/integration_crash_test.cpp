// SPDX-License-Identifier: MIT
// The crash fuzzer: xaggd killed with SIGKILL at random moments, over and over, and started again
// at once with the same command and config (what its unit's Restart=on-failure does), while
// workers all-reduce float tensors through it and a side job is created and deleted (so memory
// moves between the paths, and some kills land in the middle of a move, a creation or a
// deletion), over links that lose frames. The workers' jobs span both paths, one of
// 768-value chunks and one of jumbo chunks. Every worker checks every value of every result
// (xagg-worker --verify: bit for bit against the protocol's arithmetic and within the error bound
// of the float64 sum); one wrong value, or a worker that gives up, fails the test.
//
// XAGG_CRASH_CYCLES (default 100) sets the number of kills; scripts/crash-fuzz runs it longer.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "xagg/proto.h"

#include "tests/support/daemon.hpp"
#include "tests/support/process.hpp"
#include "tests/support/topology.hpp"

namespace xagg::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr uint32_t kStandardJob = 7, kJumboJob = 9, kSideJob = 11;
constexpr unsigned kWorkers = 4;

unsigned cycles()
{
    const char *text = std::getenv("XAGG_CRASH_CYCLES");
    return text ? static_cast<unsigned>(std::stoul(text)) : 100;
}

class CrashFuzz : public DaemonTest {
protected:
    // A request that may meet a daemon being killed or restarted: the reply, or null.
    json try_control(const json &request)
    {
        try {
            return control(socket_, request);
        } catch (const std::exception &) {
            return json();
        }
    }

    void create_job(uint32_t id, uint64_t elems, uint32_t chunk_elems)
    {
        json r = control(socket_, {{"op", "create_job"},
                                   {"id", id},
                                   {"workers", kWorkers},
                                   {"gradient_elems", elems},
                                   {"chunk_elems", chunk_elems}});
        ASSERT_EQ(r["ok"], true) << r;
    }

    // Kills begin once every worker has joined and sums are flowing (a join the daemon never
    // answers is the client's error to report, not what this test is about).
    void wait_until_flowing(uint32_t job)
    {
        for (int i = 0;; i++) {
            json j = control(socket_, {{"op", "show_job"}, {"job", job}})["job"];
            // A chunk in its second round: its first was summed, so every worker is past its
            // rendezvous.
            if (j["members"].size() == kWorkers && j["progress"]["newest_round"].is_number() &&
                j["progress"]["newest_round"].get<uint32_t>() >= 1)
                return;
            ASSERT_LT(i, 3000) << j;
            std::this_thread::sleep_for(10ms);
        }
    }

    // After a random time, SIGKILL; one time in three a side job arrives or leaves first, so
    // the kill may land in its creation or deletion or in the memory move that follows.
    void kill_at_random(Process &daemon, std::mt19937 &rng)
    {
        const auto live =
            std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 400)(rng));
        if (std::uniform_int_distribution<int>(0, 2)(rng) != 0) {
            std::this_thread::sleep_for(live);
            daemon.signal(SIGKILL);
            return;
        }
        std::thread side([this] {
            json job = try_control({{"op", "show_job"}, {"job", kSideJob}});
            if (!job.is_null() && job["ok"] == true)
                try_control({{"op", "delete_job"}, {"job", kSideJob}});
            else
                try_control({{"op", "create_job"},
                             {"id", kSideJob},
                             {"workers", 1},
                             {"gradient_elems", 600 * XAGG_CHUNK_ELEMS}});
        });
        std::this_thread::sleep_for(live / 20);
        daemon.signal(SIGKILL);
        side.join();
    }

    // xagg-worker `rank` of job `job`, in the topology's namespace of that rank.
    std::unique_ptr<Process> worker(const Topology &topo, unsigned rank, uint32_t job,
                                    uint64_t elems, const std::string &seed)
    {
        std::vector<std::string> argv = {
            XAGG_BINARY_DIR "/tools/xagg-worker", "--netns", topo.worker(rank), "--rank",
            std::to_string(rank), "--local", worker_addr(rank), "--json", "--aggregator",
            "address=" + kAggAddr + ",job=" + std::to_string(job) + ",socket=" + socket_, "--elems",
            std::to_string(elems), "--iterations",
            // More than the kills last: the workers are stopped
            // (--stop-file) when they end.
            "1000000", "--seed", seed, "--verify", "--stop-file", dir_ + "/stop",
            // A restart takes a fraction of a second; a worker
            // keeps trying for well over that.
            "--max-retries", "1000"};
        return std::make_unique<Process>(
            argv, dir_ + "/worker-" + std::to_string(job) + "-" + std::to_string(rank));
    }
};

TEST_F(CrashFuzz, KilledAtRandomMomentsTheDaemonNeverDeliversAWrongSum)
{
    const unsigned kCycles = cycles();
    Topology topo("c", kWorkers);
    // 1024 slot positions: each job needs more than its share, so it spans both paths, and the
    // side job's arrivals and departures move its memory between them.
    const std::string config = write_config(topo, 1024, 64);
    auto daemon = start_daemon(config, "xaggd-0.log");
    // Lossy links (5% of the frames each way on every worker's link, tests/xdp_lossy.bpf.c), as
    // a busy fabric is: results reach some workers of a chunk and not others, which is the state
    // a crash must not lose.
    const std::string lossy = XAGG_BINARY_DIR "/bpf/xdp_lossy.bpf.o";
    for (unsigned r = 0; r < kWorkers; r++)
        for (const auto &[ns, dev] : {std::pair{topo.worker(r), std::string("eth0")},
                                      std::pair{topo.sw(), "w" + std::to_string(r)}})
            ASSERT_EQ(run_command("ip -n " + ns + " link set dev " + dev + " xdpdrv obj " + lossy +
                                  " sec xdp.frags"),
                      "");
    std::mt19937 rng(20261206);
    unsigned restarts = 0;
    uint64_t checked = 0;
    // Half the kills on a job of 768-value chunks, half on one of jumbo chunks (1600 standard
    // chunks and 600 jumbo ones, 1800 positions; a float all-reduce adds exponent chunks).
    for (const auto &[job, chunk_elems, elems] :
         {std::tuple{kStandardJob, uint32_t{XAGG_CHUNK_ELEMS}, uint64_t{1600} * XAGG_CHUNK_ELEMS},
          std::tuple{kJumboJob, uint32_t{XAGG_JUMBO_CHUNK_ELEMS},
                     uint64_t{600} * XAGG_JUMBO_CHUNK_ELEMS}}) {
        SCOPED_TRACE("job " + std::to_string(job));
        create_job(job, elems, chunk_elems);
        std::filesystem::remove(dir_ + "/stop");
        std::vector<std::unique_ptr<Process>> procs;
        for (unsigned r = 0; r < kWorkers; r++)
            procs.push_back(worker(topo, r, job, elems - 1000, std::to_string(job)));
        wait_until_flowing(job);
        for (unsigned cycle = 0; cycle < kCycles / 2; cycle++) {
            kill_at_random(*daemon, rng);
            ASSERT_EQ(daemon->wait(10s), 128 + SIGKILL) << daemon->output();
            for (auto &p : procs)
                ASSERT_TRUE(p->running())
                    << "a worker gave up at kill " << restarts << ": " << p->output();
            std::this_thread::sleep_for(
                std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 150)(rng)));
            restarts++;
            daemon = start_daemon(config, "xaggd-" + std::to_string(restarts) + ".log");
        }
        // The workers stop together at their next iteration and report: every value of every
        // result checked.
        std::ofstream(dir_ + "/stop") << "stop\n";
        for (auto &p : procs) {
            ASSERT_EQ(p->wait(120s), 0) << p->output();
            json r = json::parse(p->output());
            EXPECT_EQ(r["wrong"], 0) << r;
            EXPECT_EQ(r["beyond_bound"], 0) << r;
            EXPECT_GT(r["iterations"].get<uint64_t>(), 0u) << r;
            checked += r["exact"].get<uint64_t>();
        }
        ASSERT_EQ(control(socket_, {{"op", "delete_job"}, {"job", job}})["ok"], true);
    }
    std::printf("%u kills and restarts; %lu values checked bit-exact\n", restarts,
                static_cast<unsigned long>(checked));
    daemon->signal(SIGTERM);
    EXPECT_EQ(daemon->wait(10s), 0) << daemon->output();
}

}  // namespace
}  // namespace xagg::test
