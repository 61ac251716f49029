// SPDX-License-Identifier: MIT
// xaggctl against a real xaggd in the aggregator namespace, after real traffic from demo
// workers: every subcommand's table and JSON checked against what the daemon holds (its own
// control API, the kernel's view of the NIC), and every error case's exit code and message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <thread>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "lib/fastpath/kernel_probe.hpp"
#include "xagg/proto.h"

#include "tests/support/daemon.hpp"
#include "tests/support/demo_worker.hpp"
#include "tests/support/tls.hpp"
#include "tests/support/topology.hpp"

namespace xagg::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr uint32_t kJob = 7;
constexpr unsigned kWorkers = 3;
constexpr uint32_t kChunks = 128, kFast = 96, kRounds = 1000;
const std::string kToken = "xaggctl-integration-token-0123456789";

struct Result {
    int code;
    std::string out;  // stdout and stderr
};

// Runs a shell command line; its exit code and everything it printed.
Result sh(const std::string &cmd)
{
    Result r{-1, {}};
    FILE *p = popen(("{ " + cmd + "; } 2>&1").c_str(), "r");
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof(buf), p))
        r.out.append(buf, n);
    int status = pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

// The words of each line, so a table row can be compared without its padding.
std::vector<std::string> words(const std::string &line)
{
    std::istringstream in(line);
    std::vector<std::string> out;
    for (std::string w; in >> w;)
        out.push_back(w);
    return out;
}

std::string line_starting(const std::string &text, const std::string &start)
{
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(start, 0) == 0)
            return line;
    return "(no line starting with '" + start + "' in:\n" + text + ")";
}

// A reply of the control API without its "ok", as xaggctl prints it.
json without_ok(json reply)
{
    EXPECT_EQ(reply["ok"], true) << reply;
    reply.erase("ok");
    return reply;
}

class XaggctlIntegration : public DaemonTest {
protected:
    // xaggctl talking to this test's daemon over its socket.
    Result ctl(const std::string &args) const
    {
        return sh(std::string(XAGG_BINARY_DIR "/tools/xaggctl --socket ") + socket_ + " " + args);
    }
    json ctl_json(const std::string &args) const
    {
        Result r = ctl(args + " --json");
        EXPECT_EQ(r.code, 0) << args << ": " << r.out;
        return json::parse(r.out, nullptr, false);
    }
    json api(const json &request) const { return without_ok(control(socket_, request)); }
};

TEST_F(XaggctlIntegration, EverySubcommandShowsWhatTheDaemonHoldsAfterRealTraffic)
{
    Topology topo("c", kWorkers);
    std::string config = write_config(topo, kFast, 16);
    auto daemon = start_daemon(config, "xaggd.log");

    Result created =
        ctl("job create --id 7 --workers 3 --elems 98304 --policy evict "
            "--timeout-ms 5000");
    ASSERT_EQ(created.code, 0) << created.out;
    EXPECT_EQ(line_starting(created.out, "job 7"),
              "job 7: 3 workers, 98304 values (128 chunks of 768)");
    EXPECT_EQ(line_starting(created.out, "memory"),
              "memory    96 chunks on the fast path (slot positions 0-95), 32 on the host path; "
              "weight 1.0");
    EXPECT_EQ(line_starting(created.out, "progress"), "progress  no contribution yet");
    std::string key;
    for (unsigned rank = 0; rank < kWorkers; rank++) {
        Result joined =
            ctl("worker join 7 " + std::to_string(rank) + " " + worker_addr(rank) + " 9872");
        EXPECT_EQ(joined.code, 0) << joined.out;
        const std::string key_line = line_starting(joined.out, "job key ");
        ASSERT_EQ(key_line.size(), 8u + 16u) << joined.out;
        key = key_line.substr(8);
        EXPECT_EQ(joined.out, "rank " + std::to_string(rank) + " of job 7 joined from " +
                                  worker_addr(rank) + ":9872\njob key " + key + "\n");
    }

    auto workers = start_demo_workers(
        topo, worker_run(kJob, kWorkers, kChunks, kRounds, "239.77.0.7", key), dir_);
    // While they run: rates, not only totals. (Sampled once traffic has started: the workers
    // take a moment to start, longer under the sanitizers.)
    // Every worker is sending once chunks complete (one alone only gets retransmissions in).
    for (int i = 0; i < 1000 && api({{"op", "stats"}})["counters"]["completed"] == 0; i++)
        std::this_thread::sleep_for(10ms);
    json live = ctl_json("stats --interval 0.2");
    EXPECT_GT(live["fast"]["rates"]["aggregated"].get<double>(), 0.0) << live;
    EXPECT_GT(live["fast"]["chunks_completed_per_s"].get<double>(), 0.0) << live;
    EXPECT_GT(live["fast"]["aggregated_gbit_per_s"].get<double>(), 0.0) << live;
    for (auto &w : workers) {
        ASSERT_EQ(w->wait(120s), 0) << w->output();
        EXPECT_EQ(json::parse(w->output())["verified"], kRounds * kChunks);
    }

    // status: the daemon's view, the kernel's program id, memory and the per-path shares.
    json status = ctl_json("status");
    json truth = api({{"op", "status"}});
    status.erase("uptime_seconds");
    truth.erase("uptime_seconds");
    EXPECT_EQ(status, truth);
    std::smatch m;
    std::string link = run_command("ip -n " + topo.agg() + " link show eth0");
    ASSERT_TRUE(std::regex_search(link, m, std::regex("prog/xdp id (\\d+)"))) << link;
    EXPECT_EQ(status["xdp"], json({{"configured_mode", "native"},
                                   {"mode", "native"},
                                   {"attached", true},
                                   {"prog_id", std::stoul(m[1])}}));
    EXPECT_EQ(status["memory"]["used_positions"], kFast);
    EXPECT_EQ(status["positions"], json({{"fast", kFast}, {"host", kChunks - kFast}}));
    EXPECT_EQ(status["aggregated_bytes"]["fast"],
              uint64_t{kRounds} * kFast * kWorkers * XAGG_CHUNK_BYTES);
    EXPECT_EQ(status["aggregated_bytes"]["host"],
              uint64_t{kRounds} * (kChunks - kFast) * kWorkers * XAGG_CHUNK_BYTES);
    Result table = ctl("status");
    EXPECT_EQ(table.code, 0);
    EXPECT_EQ(line_starting(table.out, "XDP"),
              "XDP        native mode, program id " + m[1].str() + ", attached");
    EXPECT_EQ(line_starting(table.out, "positions"),
              "positions  96 on the fast path (75.0%), 32 on the host path (25.0%)");
    EXPECT_EQ(line_starting(table.out, "new jobs"),
              "new jobs   768-value chunks unless they say (default_chunk_elems)");
    EXPECT_EQ(line_starting(table.out, "jobs"), "jobs       1 (3 members joined)");
    // The kernel as the kernel itself says (uname, its BTF), and the topology's MTU 9000.
    const KernelOffers kernel = probe_kernel();
    EXPECT_EQ(status["kernel"], json({{"release", kernel.release},
                                      {"fastpath_variant", variant_name(best_variant(kernel))},
                                      {"jumbo_chunks", true},
                                      {"jumbo_refused_because", ""}}));
    EXPECT_EQ(line_starting(table.out, "kernel"),
              "kernel     " + kernel.release + ", fast path variant " +
                  variant_name(best_variant(kernel)) + ", jumbo chunks yes");

    // job list and job show: the same jobs, the same numbers.
    EXPECT_EQ(ctl_json("job list"), api({{"op", "list_jobs"}}));
    Result list = ctl("job list");
    EXPECT_EQ(words(line_starting(list.out, "JOB")).size(), 11u) << list.out;
    EXPECT_EQ(words(line_starting(list.out, "  7")),
              (std::vector<std::string>{"7", "3", "3", "128", "96", "32", "evict", "multicast",
                                        "239.77.0.7:9872", "0", "-"}))
        << list.out;
    json shown = ctl_json("job show 7");
    EXPECT_EQ(shown, api({{"op", "show_job"}, {"job", kJob}}));
    EXPECT_EQ(shown["job"]["progress"], json({{"newest_round", kRounds - 1},
                                              {"oldest_round", kRounds - 1},
                                              {"chunks_complete_at_newest", kChunks},
                                              {"chunks_in_flight", 0},
                                              {"chunks_not_started", 0}}));
    Result show = ctl("job show 7");
    EXPECT_EQ(line_starting(show.out, "progress"),
              "progress  round " + std::to_string(kRounds - 1) +
                  ": 128 of 128 chunks complete, 0 in flight, 0 not started; oldest chunk at "
                  "round " +
                  std::to_string(kRounds - 1));
    EXPECT_EQ(line_starting(show.out, "members"), "members: 3 of 3");
    for (unsigned rank = 0; rank < kWorkers; rank++)
        EXPECT_EQ(words(line_starting(show.out, "     " + std::to_string(rank))),
                  (std::vector<std::string>{std::to_string(rank), worker_addr(rank), "9872"}));

    // stats: the daemon's totals; idle now, so every rate is 0. (Not xagg traffic, such as the
    // kernel's IPv6 and IGMP chatter, may still arrive: pass_foreign is left out.)
    auto xagg_only = [](json counters) {
        counters.erase("pass_foreign");
        return counters;
    };
    json stats = ctl_json("stats --interval 0.2");
    json counters = api({{"op", "stats"}});
    EXPECT_EQ(xagg_only(stats["fast"]["counters"]), xagg_only(counters["counters"]));
    EXPECT_EQ(xagg_only(stats["host"]["counters"]), xagg_only(counters["host_counters"]));
    EXPECT_EQ(stats["fast"]["chunks_completed"], uint64_t{kRounds} * kFast);
    EXPECT_EQ(stats["host"]["chunks_completed"], uint64_t{kRounds} * (kChunks - kFast));
    EXPECT_EQ(stats["fast"]["counters"]["aggregated"], uint64_t{kRounds} * kFast * 2);
    const json rates = xagg_only(stats["fast"]["rates"]);
    for (const auto &[name, rate] : rates.items())
        EXPECT_EQ(rate, 0.0) << name;
    Result watched = ctl("stats --watch 0.1 --count 3 --json");
    EXPECT_EQ(watched.code, 0);
    std::istringstream frames(watched.out);
    int n = 0;
    for (std::string line; std::getline(frames, line); n++)
        EXPECT_EQ(json::parse(line)["fast"]["chunks_completed"], uint64_t{kRounds} * kFast);
    EXPECT_EQ(n, 3);
    Result stats_table = ctl("stats --interval 0.1");
    EXPECT_EQ(
        words(line_starting(stats_table.out, "chunks completed")),
        (std::vector<std::string>{"chunks", "completed", std::to_string(kRounds * kFast), "0.0",
                                  std::to_string(kRounds * (kChunks - kFast)), "0.0"}));

    // worker evict / leave, job delete: done, and the daemon agrees.
    Result evicted = ctl("worker evict 7 2");
    EXPECT_EQ(evicted.out, "evicted rank 2 from job 7; results now sum rank(s) 0,1\n");
    EXPECT_EQ(api({{"op", "show_job"}, {"job", kJob}})["job"]["evicted_ranks"], json({2}));
    EXPECT_EQ(ctl("worker leave 7 1").out, "rank 1 left job 7\n");
    EXPECT_EQ(api({{"op", "show_job"}, {"job", kJob}})["job"]["members"].size(), 1u);
    EXPECT_EQ(ctl("job delete 7").out, "deleted job 7\n");
    EXPECT_EQ(api({{"op", "list_jobs"}})["jobs"], json::array());
    EXPECT_EQ(ctl("job list").out, "no jobs\n");

    // version: ours and the daemon's.
    json pid = api({{"op", "status"}})["pid"];
    EXPECT_EQ(ctl("version").out, "xaggctl " XAGG_TEST_RELEASE "\nxaggd " XAGG_TEST_RELEASE
                                  " (pid " +
                                      pid.dump() + ", at " + socket_ + ")\n");
    EXPECT_EQ(ctl_json("version"),
              json({{"xaggctl", XAGG_TEST_RELEASE}, {"xaggd", XAGG_TEST_RELEASE}}));

    // config check, where xaggd runs (it checks the host too: the interface's MTU, the
    // addresses): the running config is good; a bad one gets xaggd's own messages.
    const auto check = [&](const std::string &file) {
        return sh("ip netns exec " + topo.agg() +
                  " " XAGG_BINARY_DIR "/tools/xaggctl config check " + file);
    };
    Result good = check(config);
    EXPECT_EQ(good.code, 0) << good.out;
    EXPECT_EQ(good.out, config + ": ok\n");
    std::string bad = dir_ + "/bad.conf";
    std::ofstream(bad) << "interface = eth0\nmax_chunks = lots\nbogus = 1\n";
    Result checked = check(bad);
    EXPECT_EQ(checked.code, 6) << checked.out;
    Result refused = sh(std::string(XAGG_BINARY_DIR "/daemon/xaggd --config ") + bad);
    EXPECT_EQ(refused.code, 1);
    std::istringstream problems(checked.out);
    n = 0;
    for (std::string line; std::getline(problems, line); n++)
        EXPECT_NE(refused.out.find(line), std::string::npos) << line << "\n" << refused.out;
    EXPECT_EQ(n, 2) << checked.out;
    Result as_json = ctl("config check " + bad + " --json");
    EXPECT_EQ(as_json.code, 6);
    EXPECT_EQ(json::parse(as_json.out)["problems"].size(), 2u) << as_json.out;
}

// SIGHUP, as `systemctl reload xaggd` sends it: a renewed TLS certificate and a rotated token
// take effect for new connections without a restart, and every other changed key is named in
// the log as one that takes a restart, with the value still in force.
TEST_F(XaggctlIntegration, ReloadTakesNewCertificatesAndTokensAndNamesWhatNeedsARestart)
{
    Topology topo("r", 1);
    std::string config = write_config(topo);
    std::filesystem::create_directories(dir_ + "/a");
    std::filesystem::create_directories(dir_ + "/b");
    const TestPki old_pki = make_test_pki(dir_ + "/a", kAggAddr);
    const TestPki new_pki = make_test_pki(dir_ + "/b", kAggAddr);
    const std::string cert = dir_ + "/server.pem", key = dir_ + "/server.key";
    const auto install = [&](const TestPki &pki) {
        std::filesystem::copy_file(pki.server_cert, cert,
                                   std::filesystem::copy_options::overwrite_existing);
        std::filesystem::copy_file(pki.server_key, key,
                                   std::filesystem::copy_options::overwrite_existing);
    };
    const auto write_token = [&](const std::string &token) {
        std::filesystem::remove(dir_ + "/token");
        std::ofstream(dir_ + "/token") << token << "\n";
        std::filesystem::permissions(dir_ + "/token", std::filesystem::perms::owner_read);
    };
    install(old_pki);
    write_token(kToken);
    const std::string tcp_lines =
        "control_tcp_address = 0.0.0.0:9874\ncontrol_token_file = " + dir_ +
        "/token\ncontrol_tls_cert = " + cert + "\ncontrol_tls_key = " + key + "\n";
    std::ofstream(config, std::ios::app) << tcp_lines;
    auto daemon = start_daemon(config, "xaggd.log");
    const auto remote = [&](const std::string &ca, const std::string &token) {
        return sh("ip netns exec " + topo.worker(0) + " " XAGG_BINARY_DIR "/tools/xaggctl --host " +
                  kAggAddr + ":9874 --ca " + ca + " --token " + token + " status");
    };
    EXPECT_EQ(remote(old_pki.ca, kToken).code, 0);
    EXPECT_EQ(remote(new_pki.ca, kToken).code, 2);

    // Renewed: a certificate of another CA, a new token, and a key that takes a restart.
    const std::string new_token = "rotated-token-abcdefghijklmnopqrstuvwxyz";
    install(new_pki);
    write_token(new_token);
    std::ofstream(config, std::ios::app) << "host_ps_threads = 3\n";
    daemon->signal(SIGHUP);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (daemon->output().find("SIGHUP: TLS certificate") == std::string::npos) {
        ASSERT_TRUE(daemon->running()) << daemon->output();
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << daemon->output();
        std::this_thread::sleep_for(20ms);
    }
    const std::string log = daemon->output();
    EXPECT_NE(log.find("SIGHUP: host_ps_threads changed (2 -> 3) but takes a restart; still 2"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("SIGHUP: control tokens read again: the admin's from " + dir_ +
                       "/token, 0 tenant(s)\n"),
              std::string::npos)
        << log;
    EXPECT_EQ(remote(new_pki.ca, new_token).code, 0);
    EXPECT_EQ(remote(old_pki.ca, new_token).code, 2);  // the old certificate is gone
    EXPECT_EQ(remote(new_pki.ca, kToken).code, 5);     // and the old token
}

TEST_F(XaggctlIntegration, EachErrorHasItsExitCodeAndSaysWhatToDo)
{
    Topology topo("x", 1);
    std::string config = write_config(topo);
    const TestPki pki = make_test_pki(dir_, kAggAddr);
    std::ofstream(config, std::ios::app) << "control_tcp_address = 0.0.0.0:9874\n"
                                         << "control_token_file = " << dir_ << "/token\n"
                                         << "control_tls_cert = " << pki.server_cert << "\n"
                                         << "control_tls_key = " << pki.server_key << "\n";
    std::ofstream(dir_ + "/token") << kToken << "\n";
    std::filesystem::permissions(dir_ + "/token", std::filesystem::perms::owner_read);
    auto daemon = start_daemon(config, "xaggd.log");

    Result r = sh(XAGG_BINARY_DIR "/tools/xaggctl --socket " + dir_ + "/nobody.sock status");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_EQ(r.out, "xaggctl: cannot reach xaggd at " + dir_ +
                         "/nobody.sock (No such file or directory): is it running? (systemctl "
                         "status xaggd) If it uses another control_socket, pass --socket PATH\n");
    EXPECT_EQ(ctl("job show").code, 1);
    EXPECT_EQ(ctl("job frobnicate").code, 1);
    r = ctl("job show 999");
    EXPECT_EQ(r.code, 3);
    EXPECT_EQ(r.out, "xaggctl: xaggd refused: no job 999\n");
    EXPECT_EQ(ctl("job create --id 5 --workers 2 --elems 1536").code, 0);
    r = ctl("job create --id 5 --workers 2 --elems 1536");
    EXPECT_EQ(r.code, 3);
    EXPECT_EQ(r.out, "xaggctl: xaggd refused: job 5 exists\n");

    // Someone who may not use the socket (mode 0660, root's): a copy of xaggctl run as nobody.
    std::string copy = dir_ + "/xaggctl";
    std::filesystem::copy_file(XAGG_BINARY_DIR "/tools/xaggctl", copy);
    r = sh("setpriv --reuid=65534 --regid=65534 --clear-groups " + copy + " --socket " + socket_ +
           " status");
    EXPECT_EQ(r.code, 4) << r.out;
    EXPECT_NE(r.out.find("xaggctl: permission denied on " + socket_ + ": run xaggctl as root"),
              std::string::npos)
        << r.out;

    // Over TCP (TLS) from a worker's namespace, as from another host: the daemon's certificate
    // must check out against the CA given, then the token decides.
    const std::string tcp = "ip netns exec " + topo.worker(0) + " " +
                            XAGG_BINARY_DIR "/tools/xaggctl --host " + kAggAddr + ":9874 ";
    r = sh(tcp + "--token-file " + dir_ + "/token status");
    EXPECT_EQ(r.code, 2) << r.out;  // the system's CAs do not know the test CA
    EXPECT_NE(r.out.find("xaggctl: TLS handshake with xaggd at tcp " + kAggAddr +
                         ":9874 failed (unable to get local issuer certificate): pass the CA of "
                         "its control_tls_cert with --ca FILE"),
              std::string::npos)
        << r.out;
    r = sh(tcp + "--ca " + pki.other_ca + " --token-file " + dir_ + "/token status");
    EXPECT_EQ(r.code, 2) << r.out;
    // Plain TCP to the TLS port: the daemon closes it (a failed handshake), nothing else.
    r = sh(tcp + "--plaintext --token-file " + dir_ + "/token status");
    EXPECT_EQ(r.code, 7) << r.out;
    const std::string remote = tcp + "--ca " + pki.ca + " ";
    r = sh(remote + "status");
    EXPECT_EQ(r.code, 5) << r.out;
    EXPECT_NE(r.out.find("refused the token (missing or wrong token): pass the first line of "
                         "its control_token_file with --token-file FILE"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(sh(remote + "--token wrong-token-0123456789 status").code, 5);
    r = sh(remote + "--token-file " + dir_ + "/token job list --json");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(json::parse(r.out)["jobs"][0]["id"], 5) << r.out;
    r = sh("XAGG_TOKEN=" + kToken + " " + remote + "job show 5 --json");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(json::parse(r.out)["job"], api({{"op", "show_job"}, {"job", 5}})["job"]);
    r = sh("ip netns exec " + topo.worker(0) + " " + XAGG_BINARY_DIR "/tools/xaggctl --host " +
           kAggAddr + ":9875 --ca " + pki.ca + " --token x status");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("Connection refused"), std::string::npos) << r.out;
    // Something that is not the control API (the metrics endpoint speaks HTTP).
    r = sh("ip netns exec " + topo.agg() + " " + XAGG_BINARY_DIR "/tools/xaggctl --host " +
           "127.0.0.1:9873 --plaintext --token x status");
    EXPECT_EQ(r.code, 7) << r.out;
    EXPECT_NE(r.out.find("is not xaggd's control API"), std::string::npos) << r.out;
}

// default_chunk_elems = auto, the shipped default: a job created without a chunk size gets
// jumbo chunks where the aggregator's interface carries them (MTU 9000) and standard ones where
// it does not (MTU 3200); a size said outright is kept, or refused where it cannot be served;
// and 2048 fixed on a small MTU is a config problem, found before a start.
TEST_F(XaggctlIntegration, AJobWithoutAChunkSizeTakesTheLargestTheInterfaceCarries)
{
    Topology topo("k", 1);
    const std::string config = write_config(topo);
    const auto set_default = [&](const std::string &value) {
        std::ifstream in(config);
        std::string text, line;
        while (std::getline(in, line))
            if (line.rfind("default_chunk_elems", 0) != 0)
                text += line + "\n";
        std::ofstream(config) << text << "default_chunk_elems = " << value << "\n";
    };
    const auto created_chunk = [&](const std::string &args) {
        Result r = ctl("job create --workers 1 --elems 8192 --json " + args);
        EXPECT_EQ(r.code, 0) << r.out;
        const json job = json::parse(r.out, nullptr, false)["job"];
        EXPECT_EQ(ctl("job delete " + job["id"].dump()).code, 0);
        return job["chunk_elems"];
    };
    set_default("auto");
    auto daemon = start_daemon(config, "xaggd-9000.log");
    EXPECT_EQ(ctl_json("status")["default_chunk_elems"], XAGG_JUMBO_CHUNK_ELEMS);
    EXPECT_EQ(created_chunk(""), XAGG_JUMBO_CHUNK_ELEMS);
    EXPECT_EQ(created_chunk("--chunk-elems 768"), XAGG_CHUNK_ELEMS);
    daemon->signal(SIGTERM);
    ASSERT_EQ(daemon->wait(30s), 0) << daemon->output();

    ASSERT_EQ(run_command("ip -n " + topo.agg() + " link set dev eth0 mtu 3200"), "");
    daemon = start_daemon(config, "xaggd-3200.log");
    EXPECT_EQ(ctl_json("status")["default_chunk_elems"], XAGG_CHUNK_ELEMS);
    EXPECT_EQ(created_chunk(""), XAGG_CHUNK_ELEMS);
    Result r = ctl("job create --workers 1 --elems 8192 --chunk-elems 2048");
    EXPECT_EQ(r.code, 3) << r.out;
    EXPECT_NE(r.out.find("this node cannot serve jumbo chunks"), std::string::npos) << r.out;
    daemon->signal(SIGTERM);
    ASSERT_EQ(daemon->wait(30s), 0) << daemon->output();

    set_default("2048");
    r = sh("ip netns exec " + topo.agg() + " " XAGG_BINARY_DIR "/tools/xaggctl config check " +
           config);
    EXPECT_EQ(r.code, 6) << r.out;
    EXPECT_NE(r.out.find("default_chunk_elems = 2048, but this node cannot serve jumbo chunks: "
                         "interface eth0 has MTU 3200"),
              std::string::npos)
        << r.out;
}

// From `xaggctl tls init` to tenants at work, over TLS from a worker's namespace as from
// another host: the daemon serves the certificate made for its address; each tenant's token
// creates, lists and shows only its own jobs, and is refused (exit 8) for another tenant's and
// for what is the node's; two workers with one tenant's token all-reduce through its job, every
// value exact; a tenant added and one revoked take effect on reload.
TEST_F(XaggctlIntegration, TlsInitMakesWhatXaggdServesAndATenantTokenReachesOnlyItsOwnJobs)
{
    Topology topo("n", 2);
    std::string config = write_config(topo);
    const std::string pki = dir_ + "/pki";
    Result r = ctl("tls init --dir " + pki + " --ip " + kAggAddr +
                   " --tenant vision=100-199 --tenant speech=200-299 --json");
    ASSERT_EQ(r.code, 0) << r.out;
    const json made = json::parse(r.out);
    ASSERT_EQ(made["tenants"].size(), 2u) << made;
    const std::string vision = made["tenants"][0]["token"], speech = made["tenants"][1]["token"];
    EXPECT_EQ(made["names"], json::array({"IP:" + kAggAddr}));
    // Nothing is replaced by a second run.
    r = ctl("tls init --dir " + pki + " --ip " + kAggAddr);
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.out, "xaggctl: " + pki +
                         "/ca.pem exists (not replaced; remove it first to make a new one)\n");
    std::ofstream(config, std::ios::app)
        << "control_tcp_address = 0.0.0.0:9874\ncontrol_token_file = " << pki
        << "/token\ncontrol_tenants_file = " << pki << "/tenants\ncontrol_tls_cert = " << pki
        << "/server.pem\ncontrol_tls_key = " << pki << "/server.key\n";
    r = ctl("config check " + config);  // in the config's netns, as xaggd runs there
    EXPECT_EQ(r.code, 0) << r.out;
    auto daemon = start_daemon(config, "xaggd.log");
    const auto as = [&](const std::string &token, const std::string &args) {
        return sh("ip netns exec " + topo.worker(0) + " " XAGG_BINARY_DIR "/tools/xaggctl --host " +
                  kAggAddr + ":9874 --ca " + pki + "/ca.pem --token " + token + " " + args);
    };
    const std::string admin = "$(cat " + pki + "/token)";
    r = as(vision, "job create --workers 2 --elems 76800 --json");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(json::parse(r.out)["job"]["id"], 100) << r.out;
    r = as(speech, "job create --workers 1 --elems 768 --json");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(json::parse(r.out)["job"]["id"], 200) << r.out;
    r = as(vision, "job show 200");
    EXPECT_EQ(r.code, 8) << r.out;
    EXPECT_EQ(r.out,
              "xaggctl: xaggd refused: job 200 is not tenant vision's (its jobs are "
              "100-199) (a tenant's token reaches only that tenant's jobs)\n");
    EXPECT_EQ(as(vision, "job delete 200").code, 8);
    EXPECT_EQ(as(vision, "worker evict 200 0").code, 8);
    EXPECT_EQ(as(vision, "job create --id 250 --workers 1 --elems 768").code, 8);
    EXPECT_EQ(as(vision, "stats").code, 8);
    EXPECT_EQ(as(speech, "job delete 100").code, 8);
    r = as(vision, "job list --json");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(json::parse(r.out)["jobs"].size(), 1u) << r.out;
    EXPECT_EQ(json::parse(r.out)["jobs"][0]["id"], 100) << r.out;
    r = as(vision, "status");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(r.out, std::string("xaggd ") + XAGG_TEST_RELEASE +
                         ", port 9871/udp\n(a tenant's token: the node's details take the admin "
                         "token)\n");
    r = as(admin, "job list --json");
    EXPECT_EQ(json::parse(r.out)["jobs"].size(), 2u) << r.out;

    // Two workers of the tenant join its job with its token over TLS, and every value is exact.
    std::ofstream(dir_ + "/vision-token") << vision << "\n";
    std::vector<std::unique_ptr<Process>> workers;
    for (unsigned rank = 0; rank < 2; rank++)
        workers.push_back(std::make_unique<Process>(
            std::vector<std::string>{
                XAGG_BINARY_DIR "/tools/xagg-worker", "--netns", topo.worker(rank), "--rank",
                std::to_string(rank), "--local", worker_addr(rank), "--json", "--aggregator",
                "address=" + kAggAddr + ",job=100,host=" + kAggAddr + ":9874,token-file=" + dir_ +
                    "/vision-token,ca=" + pki + "/ca.pem",
                "--elems", "76800", "--iterations", "20", "--verify"},
            dir_ + "/worker-" + std::to_string(rank)));
    for (auto &w : workers) {
        ASSERT_EQ(w->wait(120s), 0) << w->output();
        json report = json::parse(w->output());
        EXPECT_EQ(report["wrong"], 0) << report;
        EXPECT_EQ(report["exact"], 20 * 76800) << report;
    }

    // A tenant added and one revoked, applied by a reload.
    r = ctl("token tenant music --jobs 300-399 --file " + pki + "/tenants --admin-token-file " +
            pki + "/token --json");
    ASSERT_EQ(r.code, 0) << r.out;
    const std::string music = json::parse(r.out)["token"];
    ASSERT_EQ(ctl("token revoke speech --file " + pki + "/tenants").code, 0);
    daemon->signal(SIGHUP);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (daemon->output().find("SIGHUP: control tokens read again") == std::string::npos) {
        ASSERT_TRUE(daemon->running()) << daemon->output();
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << daemon->output();
        std::this_thread::sleep_for(20ms);
    }
    EXPECT_NE(daemon->output().find("SIGHUP: control tokens read again: the admin's from " + pki +
                                    "/token, 2 tenant(s) from " + pki + "/tenants"),
              std::string::npos)
        << daemon->output();
    EXPECT_EQ(as(speech, "job list").code, 5);
    r = as(music, "job create --workers 1 --elems 768 --json");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(json::parse(r.out)["job"]["id"], 300) << r.out;
    // The speech job outlives its tenant's token: the admin's reaches it.
    EXPECT_EQ(as(admin, "job delete 200").code, 0);
}

}  // namespace
}  // namespace xagg::test
