// SPDX-License-Identifier: MIT
// Clients that misbehave, as real ones do, against a real xaggd on both control transports: they
// hang up before the reply, send half a line and wait, send lines too long or not text at all,
// open thousands of connections, guess tokens. Each gets its expected outcome, and afterwards the
// daemon still serves and its sums are still exact.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "xagg/proto.h"

#include "tests/support/daemon.hpp"
#include "tests/support/demo_worker.hpp"
#include "tests/support/process.hpp"
#include "tests/support/tls.hpp"
#include "tests/support/topology.hpp"

namespace xagg::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr uint32_t kJob = 7;
const std::string kToken = "0123456789abcdef-abuse-token";

int connect_unix(const std::string &path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// Connects to the aggregator's TCP control address from the calling thread's namespace.
int connect_tcp()
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(9874);
    inet_pton(AF_INET, kAggAddr.c_str(), &addr.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void send_all(int fd, const std::string &data)
{
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
        if (n <= 0)
            return;  // the daemon closed it: what it read is what counts
        done += static_cast<size_t>(n);
    }
}

// Reads until the daemon closes the connection (or `timeout`): everything it sent.
std::string read_until_closed(int fd, std::chrono::milliseconds timeout, bool *closed = nullptr)
{
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0)
            break;
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) {
            if (closed)
                *closed = true;
            return out;
        }
        out.append(buf, static_cast<size_t>(n));
    }
    if (closed)
        *closed = false;
    return out;
}

std::string read_line(int fd)
{
    std::string line;
    char c;
    while (recv(fd, &c, 1, 0) == 1 && c != '\n')
        line += c;
    return line;
}

class ControlAbuse : public DaemonTest {
protected:
    // A daemon on a 3-worker topology with the TCP API on and a short request timeout.
    void start(Topology &topo)
    {
        topo_name_ = topo.worker(0);
        std::string config = write_config(topo);
        std::ofstream(config, std::ios::app)
            << "control_tcp_address = 0.0.0.0:9874\n"
            << (tls_
                    ? "control_tls_cert = " + pki_.server_cert +
                          "\ncontrol_tls_key = " + pki_.server_key + "\n" +
                          (client_ca_.empty() ? "" : "control_tls_client_ca = " + client_ca_ + "\n")
                    : std::string("control_tcp_plaintext = true\n"))
            << "control_token_file = " << dir_ << "/token\n"
            << "control_request_timeout_ms = 500\n"
            << "control_max_connections = 64\n"
            // Without the metrics endpoint: its HTTP library ignores SIGPIPE for the whole
            // process, which would hide a daemon that relies on that by accident.
            << "metrics_address =\n";
        std::ofstream(dir_ + "/token") << kToken << "\n";
        std::filesystem::permissions(dir_ + "/token", std::filesystem::perms::owner_read);
        daemon_ = start_daemon(config, "xaggd.log");
    }

    // The daemon is alive, answers, and sums a 3-worker job exactly.
    void expect_serving_and_exact(const Topology &topo)
    {
        ASSERT_TRUE(daemon_->running()) << daemon_->output();
        constexpr unsigned kWorkers = 3;
        constexpr uint32_t kChunks = 64, kRounds = 20;
        control(socket_, {{"op", "delete_job"}, {"job", kJob}});
        json r = control(socket_, {{"op", "create_job"},
                                   {"id", kJob},
                                   {"workers", kWorkers},
                                   {"gradient_elems", kChunks * XAGG_CHUNK_ELEMS}});
        ASSERT_EQ(r["ok"], true) << r;
        std::string key;
        for (unsigned rank = 0; rank < kWorkers; rank++) {
            json joined = control(socket_, {{"op", "join"},
                                            {"job", kJob},
                                            {"rank", rank},
                                            {"addr", worker_addr(rank)},
                                            {"port", 9872}});
            ASSERT_EQ(joined["ok"], true) << joined;
            key = joined["key"];
        }
        auto workers = start_demo_workers(
            topo, worker_run(kJob, kWorkers, kChunks, kRounds, "239.77.0.7", key), dir_);
        for (auto &p : workers) {
            ASSERT_EQ(p->wait(120s), 0) << p->output();
            json out = json::parse(p->output());
            EXPECT_EQ(out["verified"], kChunks * kRounds) << out;
            EXPECT_EQ(out["mismatches"], 0) << out;
        }
    }

    // The TCP API with TLS (this test PKI's server certificate) instead of plain TCP.
    void use_tls(const std::string &client_ca = {})
    {
        tls_ = true;
        pki_ = make_test_pki(dir_, kAggAddr);
        client_ca_ = client_ca.empty() ? "" : pki_.ca;
    }

    // xaggctl over TCP from worker 0's namespace, as from another host; its exit code.
    int xaggctl_tcp(const std::string &args) const
    {
        std::string out = run_command("ip netns exec " + topo_name_ +
                                      " " XAGG_BINARY_DIR "/tools/xaggctl --host " + kAggAddr +
                                      ":9874 --token-file " + dir_ + "/token " + args +
                                      " >/dev/null 2>&1; echo $?");
        return std::stoi(out);
    }

    std::unique_ptr<Process> daemon_;
    bool tls_ = false;
    TestPki pki_;
    std::string client_ca_;
    std::string topo_name_;
};

TEST_F(ControlAbuse, UnixClientsThatHangUpStallOrSendGarbageCannotHurtTheDaemon)
{
    Topology topo("ua", 3);
    start(topo);

    // Hang up before the reply: the request is applied whole, and the reply's write to a
    // closed socket (EPIPE) ends nothing. The daemon is stopped meanwhile, so that every client
    // is gone before it reads the request, as when a slow request outlives xaggctl's timeout.
    daemon_->signal(SIGSTOP);
    for (uint32_t id = 100; id < 110; id++) {
        int fd = connect_unix(socket_);
        ASSERT_GE(fd, 0);
        send_all(fd,
                 json{{"op", "create_job"}, {"id", id}, {"workers", 2}, {"gradient_elems", 4096}}
                         .dump() +
                     "\n");
        close(fd);
    }
    daemon_->signal(SIGCONT);
    // Each of those jobs exists, whole (created, with its memory), once the daemon got to them.
    for (uint32_t id = 100; id < 110; id++) {
        json r = control(socket_, {{"op", "show_job"}, {"job", id}});
        ASSERT_EQ(r["ok"], true) << r << daemon_->output();
        EXPECT_EQ(r["job"]["chunks"], (4096 + XAGG_CHUNK_ELEMS - 1) / XAGG_CHUNK_ELEMS) << r;
        EXPECT_EQ(control(socket_, {{"op", "delete_job"}, {"job", id}})["ok"], true);
    }

    // Half a line, then silence: other clients are served meanwhile, and the daemon closes the
    // stalled connection once control_request_timeout_ms passes, having changed nothing.
    int stalled = connect_unix(socket_);
    send_all(stalled, R"({"op":"create_job","id":55,"workers":2,"gradient_e)");
    EXPECT_EQ(control(socket_, {{"op", "stats"}})["ok"], true);
    bool closed = false;
    EXPECT_EQ(read_until_closed(stalled, 20s, &closed), "");
    EXPECT_TRUE(closed);
    close(stalled);
    EXPECT_EQ(control(socket_, {{"op", "show_job"}, {"job", 55}})["ok"], false);

    // A line over 64 KiB: refused with a reason, and the connection closed.
    int big = connect_unix(socket_);
    send_all(big, std::string(100000, 'x'));
    std::string reply = read_until_closed(big, 20s, &closed);
    close(big);
    EXPECT_TRUE(closed);
    EXPECT_EQ(json::parse(reply)["error"], "request larger than 65536 bytes") << reply;

    // Binary garbage, newlines in it: every line refused, the connection stays usable.
    int junk = connect_unix(socket_);
    std::mt19937 rng(7);
    std::string garbage;
    for (int i = 0; i < 3; i++) {
        std::string piece;
        for (int j = 0; j < 200; j++)
            piece += static_cast<char>(rng() % 255 + 1);
        std::erase(piece, '\n');
        garbage += piece + '\n';
    }
    send_all(junk, garbage);
    for (int i = 0; i < 3; i++)
        EXPECT_EQ(json::parse(read_line(junk))["error"], "not a JSON object");
    send_all(junk, R"({"op":"stats"})"
                   "\n");
    EXPECT_EQ(json::parse(read_line(junk))["ok"], true);
    close(junk);

    // 10,000 connections at once: the daemon keeps at most control_max_connections open
    // (closing the oldest idle ones) and still answers a new client.
    rlimit nofile{};
    getrlimit(RLIMIT_NOFILE, &nofile);
    nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 12000);
    setrlimit(RLIMIT_NOFILE, &nofile);
    const int kFlood = static_cast<int>(std::min<rlim_t>(10000, nofile.rlim_cur - 200));
    std::vector<int> flood;
    for (int i = 0; i < kFlood; i++)
        if (int fd = connect_unix(socket_); fd >= 0)
            flood.push_back(fd);
    EXPECT_EQ(flood.size(), static_cast<size_t>(kFlood));
    EXPECT_EQ(control(socket_, {{"op", "stats"}})["ok"], true);
    size_t daemon_fds = 0;
    for ([[maybe_unused]] auto &e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(daemon_->pid()) + "/fd"))
        daemon_fds++;
    EXPECT_LE(daemon_fds, 64u + 64u) << "connections are not bounded";
    for (int fd : flood)
        close(fd);

    expect_serving_and_exact(topo);
}

TEST_F(ControlAbuse, TcpPeersWithoutTheTokenGetARefusalAndNothingElse)
{
    Topology topo("ta", 3);
    start(topo);
    uint64_t attempts = 0;
    Topology::in_netns(topo.worker(0), [&] {
        // No token, a wrong one, not JSON, then a hang-up: each is only refused.
        for (const std::string &line :
             {std::string(R"({"op":"create_job","id":9,"workers":1,"gradient_elems":768})"),
              std::string(R"({"op":"delete_job","job":7,"token":"0123456789abcdef-abuse-tokeX"})"),
              std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not a request")}) {
            int fd = connect_tcp();
            ASSERT_GE(fd, 0);
            send_all(fd, line + "\n" + line + "\n");
            bool closed = false;
            std::string reply = read_until_closed(fd, 20s, &closed);
            close(fd);
            attempts++;
            EXPECT_TRUE(closed) << "a peer without the token is not kept";
            EXPECT_EQ(reply, R"({"code":"bad_token","error":"missing or wrong token","ok":false})"
                             "\n");
        }
        // Many guesses in a row: past the rate limit the refusals are silent closes, and every
        // one is counted.
        for (int i = 0; i < 300; i++) {
            int fd = connect_tcp();
            ASSERT_GE(fd, 0);
            send_all(fd, R"({"op":"stats","token":"guess)" + std::to_string(i) + "\"}\n");
            read_until_closed(fd, 20s);
            close(fd);
            attempts++;
        }
        // A peer that sends a request and hangs up at once.
        for (int i = 0; i < 20; i++) {
            int fd = connect_tcp();
            send_all(fd, R"({"op":"list_jobs"})"
                         "\n");
            close(fd);
            attempts++;
        }
    });
    // The last hang-ups may still be in the daemon's queue: ask until it has seen them all.
    json metrics_ok;
    for (int i = 0; i < 200; i++) {
        json stats = control(socket_, {{"op", "stats"}});
        if (stats["request_errors"] == attempts)
            break;
        std::this_thread::sleep_for(20ms);
    }
    json stats = control(socket_, {{"op", "stats"}});
    EXPECT_EQ(stats["request_errors"], attempts) << stats;
    EXPECT_EQ(stats["jobs"], 0) << "a request without the token changed something";
    // With the token, over TCP, it works.
    Topology::in_netns(topo.worker(0), [&] {
        int fd = connect_tcp();
        send_all(fd, json{{"op", "stats"}, {"token", kToken}}.dump() + "\n");
        EXPECT_EQ(json::parse(read_line(fd))["ok"], true);
        close(fd);
    });
    expect_serving_and_exact(topo);
}

TEST_F(ControlAbuse, TheTlsPortServesOnlyTlsAndStalledHandshakesAreCutOff)
{
    Topology topo("tt", 3);
    use_tls();
    start(topo);
    Topology::in_netns(topo.worker(0), [&] {
        // A plain request, handshake garbage, and a client that connects and says nothing: each
        // is closed with nothing of the API said (a TLS alert at most), the last once
        // control_request_timeout_ms has passed.
        for (const std::string &bytes :
             {std::string(R"({"op":"stats","token":"0123456789abcdef-abuse-token"})"
                          "\n"),
              std::string("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00garbage\n", 16),
              std::string()}) {
            int fd = connect_tcp();
            ASSERT_GE(fd, 0);
            send_all(fd, bytes);
            bool closed = false;
            std::string said = read_until_closed(fd, 20s, &closed);
            EXPECT_EQ(said.find('{'), std::string::npos) << said;
            EXPECT_TRUE(said.empty() || said[0] == '\x15') << "not a TLS alert: " << said;
            EXPECT_TRUE(closed);
            close(fd);
        }
    });
    // With the CA, xaggctl gets in; without it, or with another CA, it does not.
    EXPECT_EQ(xaggctl_tcp("--ca " + pki_.ca + " status"), 0);
    EXPECT_EQ(xaggctl_tcp("status"), 2);
    EXPECT_EQ(xaggctl_tcp("--ca " + pki_.other_ca + " status"), 2);
    expect_serving_and_exact(topo);
}

TEST_F(ControlAbuse, ClientCertificatesAreRequiredWhenTheDaemonSaysSo)
{
    Topology topo("tc", 3);
    use_tls("client CA");
    start(topo);
    EXPECT_EQ(xaggctl_tcp("--ca " + pki_.ca + " status"), 2);
    EXPECT_EQ(xaggctl_tcp("--ca " + pki_.ca + " --cert " + pki_.client_cert + " --key " +
                          pki_.client_key + " status"),
              0);
    expect_serving_and_exact(topo);
}

}  // namespace
}  // namespace xagg::test
