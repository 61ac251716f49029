// SPDX-License-Identifier: MIT
// xaggctl's pieces without a daemon: tables and units, rates, how replies and connection
// failures map to exit codes, the command line and the generated bash completion.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <thread>

#include "lib/control/control_client.hpp"
#include "tools/xaggctl/exit_codes.hpp"
#include "tools/xaggctl/commands.hpp"
#include "tools/xaggctl/completion.hpp"
#include "tools/xaggctl/render.hpp"
#include "tools/xaggctl/stats.hpp"

namespace xagg::ctl {
namespace {

using nlohmann::json;

TEST(RenderTest, TablesAlignColumnsAndRightAlignNumbers)
{
    Table t({"JOB", "ADDRESS", "RATE"});
    t.add({"7", "10.77.0.1", "3193.7"});
    t.add({"12", "10.77.0.100", "0.0"});
    EXPECT_EQ(t.str("  "),
              "  JOB  ADDRESS        RATE\n"
              "    7  10.77.0.1    3193.7\n"
              "   12  10.77.0.100     0.0\n");
}

TEST(RenderTest, Units)
{
    EXPECT_EQ(human_bytes(0), "0 B");
    EXPECT_EQ(human_bytes(1023), "1023 B");
    EXPECT_EQ(human_bytes(1536), "1.5 KiB");
    EXPECT_EQ(human_bytes(204288), "199.5 KiB");
    EXPECT_EQ(human_bytes(3.0 * (1ull << 30)), "3.0 GiB");
    EXPECT_EQ(human_bits_per_second(0), "0 bit/s");
    EXPECT_EQ(human_bits_per_second(1.395e9), "1.40 Gbit/s");
    EXPECT_EQ(human_bits_per_second(78.49e6), "78.49 Mbit/s");
    EXPECT_EQ(human_duration(0.4), "0s");
    EXPECT_EQ(human_duration(133.2), "2m 13s");
    EXPECT_EQ(human_duration(90061), "1d 1h 1m 1s");
}

api::Job sample_job()
{
    return json::
        parse(R"({"id":7,"iterations":0,"arrival":0,"tag":1,"workers":3,"gradient_elems":32768,"chunk_elems":768,"chunks":128,
        "region_base":0,"fast_path_chunks":96,"host_path_chunks":32,"policy":"evict",
        "timeout_ms":5000,"evict_after":3,"evicted_ranks":[2],"evictions":1,"weight":1.0,
        "host_path":false,"fanout":false,"group":"239.77.0.7","group_port":9872,
        "members":[{"rank":0,"addr":"10.77.0.1","port":9872},
                   {"rank":1,"addr":"10.77.0.2","port":9872}],
        "straggler_events":[{"chunk":5,"round":9,"missing_ranks":[2],"waited_ms":5100}],
        "straggler_events_total":1,
        "progress":{"newest_round":10,"oldest_round":9,"chunks_complete_at_newest":100,
                    "chunks_in_flight":28,"chunks_not_started":0}})")
            .get<api::Job>();
}

TEST(RenderTest, JobList)
{
    EXPECT_EQ(render_job_list({}), "no jobs\n");
    EXPECT_EQ(render_job_list({sample_job()}),
              "JOB  WORKERS  MEMBERS  CHUNKS  FAST  HOST  POLICY  DELIVERY   GROUP            "
              "STRAGGLERS  EVICTED\n"
              "  7        3        2     128    96    32  evict   multicast  239.77.0.7:9872  "
              "         1        2\n");
}

TEST(RenderTest, JobShowsMembersProgressAndStragglers)
{
    EXPECT_EQ(render_job(sample_job()),
              "job 7: 3 workers, 32768 values (128 chunks of 768)\n"
              "policy    evict (straggler timeout 5000 ms, evict after 3 timeouts)\n"
              "delivery  multicast to 239.77.0.7:9872\n"
              "memory    96 chunks on the fast path (slot positions 0-95), 32 on the host path; "
              "weight 1.0\n"
              "progress  round 10: 100 of 128 chunks complete, 28 in flight, 0 not started; "
              "oldest chunk at round 9\n"
              "evicted   2 (1 evictions so far)\n"
              "members: 2 of 3\n"
              "  RANK  ADDRESS    PORT\n"
              "     0  10.77.0.1  9872\n"
              "     1  10.77.0.2  9872\n"
              "straggler events: 1 (latest 1)\n"
              "  CHUNK  ROUND  MISSING  WAITED_MS\n"
              "      5      9        2       5100\n");
}

json sample_status(bool attached)
{
    json s = json::parse(R"({"version":"0.1.0","pid":42,"uptime_seconds":133.5,
        "interface":"eth0","datapath":"xdp","port":9871,
        "xdp":{"configured_mode":"native","mode":"native","attached":true,"prog_id":2391},
        "control":{"socket":"/run/xagg/xaggd.sock","tcp_address":""},
        "metrics_address":"127.0.0.1:9873","jobs":1,"members":3,
        "memory":{"policy":"benefit","capacity_positions":96,"used_positions":96,"capacity_bytes":204288,
                  "used_bytes":204288},
        "positions":{"fast":96,"host":32},
        "aggregated_bytes":{"fast":2949120,"host":983040}})");
    if (!attached)
        s["xdp"] = json::parse(R"({"configured_mode":"native","mode":"none","attached":false,
                                   "prog_id":0})");
    return s;
}

TEST(RenderTest, StatusSaysWhatTheKernelRunsAndHowThePathsShare)
{
    EXPECT_EQ(
        render_status(sample_status(true)),
        "xaggd 0.1.0, pid 42, up 2m 13s\n"
        "interface  eth0 (datapath xdp)\n"
        "XDP        native mode, program id 2391, attached\n"
        "port       9871/udp\n"
        "control    /run/xagg/xaggd.sock\n"
        "metrics    http://127.0.0.1:9873/metrics\n"
        "jobs       1 (3 members joined)\n"
        "memory     96 of 96 fast-path slot positions assigned (199.5 KiB of 199.5 KiB of slot "
        "maps), divided by policy benefit\n"
        "positions  96 on the fast path (75.0%), 32 on the host path (25.0%)\n"
        "summed     2.8 MiB of gradient on the fast path (75.0%), 960.0 KiB on the host "
        "path (25.0%)\n");
    std::string detached = render_status(sample_status(false));
    EXPECT_NE(detached.find("XDP        NOT ATTACHED: the kernel reports mode none, program id 0 "
                            "(configured: native)\n"),
              std::string::npos)
        << detached;
}

json stats_reply(uint64_t aggregated, uint64_t completed, uint64_t host_completed)
{
    json counters = {{"aggregated", aggregated}, {"completed", completed}, {"drop_duplicate", 0}};
    json host = {{"aggregated", 0}, {"completed", host_completed}, {"drop_duplicate", 0}};
    return {{"counters", counters},
            {"host_counters", host},
            {"aggregated_bytes",
             {{"fast", (aggregated + completed) * 1024}, {"host", host_completed * 1024}}},
            {"chunks_completed", {{"fast", completed}, {"host", host_completed}}},
            {"uptime_seconds", 10.0},
            {"jobs", 1},
            {"fast_path_positions_capacity", 96},
            {"fast_path_positions_used", 96},
            {"requests", 7},
            {"request_errors", 0}};
}

TEST(StatsTest, RatesAreDifferencesOverTheInterval)
{
    json f = stats_frame(stats_reply(1000, 500, 10), stats_reply(3000, 1500, 10), 2.0);
    EXPECT_EQ(f["interval_seconds"], 2.0);
    EXPECT_EQ(f["fast"]["counters"]["aggregated"], 3000);
    EXPECT_EQ(f["fast"]["rates"]["aggregated"], 1000.0);
    EXPECT_EQ(f["fast"]["rates"]["completed"], 500.0);
    EXPECT_EQ(f["fast"]["chunks_completed_per_s"], 500.0);
    // (2000 + 1000) contributions of 1 KiB in 2 s.
    EXPECT_DOUBLE_EQ(f["fast"]["aggregated_gbit_per_s"].get<double>(), 3000 * 1024 * 8 / 2e9);
    EXPECT_EQ(f["host"]["rates"]["completed"], 0.0);
    EXPECT_EQ(f["host"]["chunks_completed"], 10);
    // Counters that went down (maps re-created) are a rate of 0, not a huge number.
    json reset = stats_frame(stats_reply(3000, 1500, 10), stats_reply(10, 5, 0), 1.0);
    EXPECT_EQ(reset["fast"]["rates"]["aggregated"], 0.0);
    EXPECT_EQ(reset["fast"]["aggregated_gbit_per_s"], 0.0);
    std::string table = render_stats(f, false);
    EXPECT_EQ(table.find("drop_duplicate"), std::string::npos) << table;  // zero on both
    EXPECT_NE(table.find("aggregated           3000        1000.0         0      0.0\n"),
              std::string::npos)
        << table;
    EXPECT_NE(render_stats(f, true).find("drop_duplicate"), std::string::npos);
}

TEST(ReplyTest, EachKindOfReplyHasItsExitCode)
{
    control::Endpoint e;
    e.socket_path = "/run/test.sock";
    EXPECT_EQ(interpret_reply(R"({"ok":true,"jobs":[]})", e), json::parse(R"({"jobs":[]})"));
    auto code_of = [&](const std::string &line) {
        try {
            interpret_reply(line, e);
        } catch (const control::ControlError &err) {
            return std::pair{exit_code(err.failure()), std::string(err.what())};
        }
        return std::pair{kOk, std::string()};
    };
    EXPECT_EQ(code_of(R"({"ok":false,"code":"no_such_job","error":"no job 9"})"),
              std::pair(kRefused, std::string("xaggd refused: no job 9")));
    auto [code, message] =
        code_of(R"({"ok":false,"code":"bad_token","error":"missing or wrong token"})");
    EXPECT_EQ(code, kUnauthorized);
    EXPECT_NE(message.find("--token-file"), std::string::npos) << message;
    EXPECT_EQ(code_of("HTTP/1.1 400 Bad Request").first, kProtocol);
    // Programs decide by the code, never by the message.
    const auto refusal_of = [&](const char *line) -> std::optional<api::Refusal> {
        try {
            interpret_reply(line, e);
        } catch (const control::ControlError &err) {
            return err.refusal();
        }
        return api::Refusal::bad_request;
    };
    EXPECT_EQ(refusal_of(R"({"ok":false,"code":"no_such_job","error":"whatever it says"})"),
              api::Refusal::no_such_job);
    EXPECT_EQ(refusal_of(R"({"ok":false,"code":"conflict","error":"no job 9"})"),
              api::Refusal::conflict);
    EXPECT_EQ(refusal_of(R"({"ok":false,"code":"from_the_future","error":"x"})"), std::nullopt);
    EXPECT_EQ(code_of(R"({"status":"up"})").first, kProtocol);
}

// A stand-in control socket whose one connection gets `reply` (or nothing, then is closed or
// left hanging): only to drive the client's failure paths.
class FakeSocket {
public:
    FakeSocket(std::string reply, bool hang)
    {
        path_ = ::testing::TempDir() + "xaggctl-fake-" + std::to_string(getpid()) + ".sock";
        unlink(path_.c_str());
        fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path_.c_str());
        EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
        listen(fd_, 1);
        thread_ = std::thread([this, reply, hang] {
            int c = accept(fd_, nullptr, nullptr);
            char buf[1024];
            (void)!read(c, buf, sizeof(buf));
            (void)!write(c, reply.data(), reply.size());
            if (hang)
                std::this_thread::sleep_for(std::chrono::milliseconds(400));
            close(c);
        });
    }
    ~FakeSocket()
    {
        thread_.join();
        close(fd_);
        unlink(path_.c_str());
    }
    const std::string &path() const { return path_; }

private:
    std::string path_;
    int fd_;
    std::thread thread_;
};

ExitCode call_code(const control::Endpoint &e)
{
    try {
        control::ControlClient(e).call({{"op", "status"}});
        return kOk;
    } catch (const control::ControlError &err) {
        return exit_code(err.failure());
    }
}

TEST(ClientTest, ConnectionFailuresAreUnreachableOrProtocolErrors)
{
    control::Endpoint e;
    e.socket_path = ::testing::TempDir() + "no-such-xaggd.sock";
    EXPECT_EQ(call_code(e), kUnreachable);
    e.timeout = std::chrono::milliseconds(100);
    {
        FakeSocket closes("", false);
        e.socket_path = closes.path();
        EXPECT_EQ(call_code(e), kProtocol);
    }
    {
        FakeSocket hangs("", true);
        e.socket_path = hangs.path();
        EXPECT_EQ(call_code(e), kUnreachable);  // no reply within --timeout
    }
    {
        FakeSocket answers("{\"ok\":true,\"version\":\"9\"}\n", false);
        e.socket_path = answers.path();
        EXPECT_EQ(control::ControlClient(e).call({{"op", "status"}}),
                  json::parse(R"({"version":"9"})"));
    }
    e.host = "127.0.0.1:1";  // nothing listens on port 1 here
    EXPECT_EQ(call_code(e), kUnreachable);
    e.host = "no-colon";
    EXPECT_EQ(call_code(e), kUsage);
}

int parse(std::vector<std::string> args)
{
    auto cli = make_cli();
    std::vector<const char *> argv{"xaggctl"};
    for (const auto &a : args)
        argv.push_back(a.c_str());
    try {
        cli->app->parse(static_cast<int>(argv.size()), const_cast<char **>(argv.data()));
    } catch (const CLI::ParseError &) {
        return kUsage;
    }
    return kOk;
}

TEST(CommandLineTest, WhatIsAndIsNotACommand)
{
    EXPECT_EQ(parse({"status", "--json"}), kOk);
    EXPECT_EQ(parse({"job", "show", "7", "--json"}), kOk);
    EXPECT_EQ(parse({"--socket", "/tmp/s", "job", "list"}), kOk);
    EXPECT_EQ(parse({"job", "create", "--workers", "4", "--elems", "1024", "--policy", "evict"}),
              kOk);
    EXPECT_EQ(parse({}), kUsage);
    EXPECT_EQ(parse({"job"}), kUsage);
    EXPECT_EQ(parse({"job", "show"}), kUsage);
    EXPECT_EQ(parse({"job", "show", "seven"}), kUsage);
    EXPECT_EQ(parse({"job", "create", "--workers", "65", "--elems", "1"}), kUsage);
    EXPECT_EQ(parse({"job", "create", "--workers", "2", "--elems", "1", "--policy", "panic"}),
              kUsage);
    EXPECT_EQ(parse({"worker", "join", "7", "0", "10.0.0.1"}), kUsage);
    EXPECT_EQ(parse({"frobnicate"}), kUsage);
}

// Runs the generated completion in a real bash for the words typed so far.
std::string complete(const std::string &script, const std::string &words)
{
    std::string file = ::testing::TempDir() + "xaggctl-completion-" + std::to_string(getpid());
    std::ofstream(file) << script;
    std::string cmd = "bash -c 'source " + file + "; COMP_WORDS=(" + words +
                      "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _xaggctl; "
                      "echo \"${COMPREPLY[*]}\"'";
    std::string out;
    FILE *p = popen(cmd.c_str(), "r");
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof(buf), p))
        out.append(buf, n);
    pclose(p);
    unlink(file.c_str());
    return out;
}

TEST(CompletionTest, BashCompletesTheCommandTreeAndChoices)
{
    auto cli = make_cli();
    std::string script = bash_completion(*cli->app, "xaggctl");
    EXPECT_EQ(complete(script, "xaggctl jo"), "job\n");
    EXPECT_EQ(complete(script, "xaggctl job \\\"\\\""), "create delete list show size\n");
    EXPECT_EQ(complete(script, "xaggctl --socket /tmp/s worker e"), "evict\n");
    EXPECT_EQ(complete(script, "xaggctl job create --pol"), "--policy\n");
    EXPECT_EQ(complete(script, "xaggctl job show 7 --j"), "--json\n");
    EXPECT_EQ(complete(script, "xaggctl job create --policy \\\"\\\""), "wait evict\n");
    EXPECT_EQ(complete(script, "xaggctl job create --chunk-elems \\\"\\\""), "768 2048\n");
    EXPECT_EQ(complete(script, "xaggctl stats --w"), "--watch\n");
    EXPECT_EQ(complete(script, "xaggctl completion b"), "bash\n");
}

}  // namespace
}  // namespace xagg::ctl
