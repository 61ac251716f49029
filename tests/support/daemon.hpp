// SPDX-License-Identifier: MIT
// xaggd as a real process for integration tests: its config, its start (ready once the control
// socket answers), and requests to its control socket. Each test gets its own directory, bpffs
// pin directory and socket, removed afterwards.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/process.hpp"
#include "tests/support/topology.hpp"

namespace xagg::test {

// One request, one reply, over the control socket.
inline nlohmann::json control(const std::string &socket_path, const nlohmann::json &request)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
    if (connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
        close(fd);
        throw std::runtime_error("cannot connect to " + socket_path);
    }
    std::string line = request.dump() + "\n";
    // MSG_NOSIGNAL: a daemon killed between accepting and reading (the crash tests kill it at
    // random) must fail this request, not end the test process with SIGPIPE.
    if (send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
        close(fd);
        throw std::runtime_error("short write to the control socket");
    }
    std::string reply;
    char c;
    while (read(fd, &c, 1) == 1 && c != '\n')
        reply += c;
    close(fd);
    return nlohmann::json::parse(reply);
}

// xaggd's command line as its systemd unit runs it: scripts/xaggd-as-unit enters the namespace,
// then keeps only the capabilities systemd/xaggd.service grants (read from the unit itself).
inline std::vector<std::string> xaggd_as_unit(const std::string &netns, const std::string &config)
{
    return {XAGG_SOURCE_DIR "/scripts/xaggd-as-unit", "--netns",  netns,
            XAGG_BINARY_DIR "/daemon/xaggd",          "--config", config};
}

class DaemonTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (geteuid() != 0)
            GTEST_SKIP() << "needs root: network namespaces and XDP attach";
        std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
        dir_ = ::testing::TempDir() + "xaggd-it-" + std::to_string(getpid()) + "-" + name;
        bpffs_ = "/sys/fs/bpf/xaggt" + std::to_string(getpid()) + name.substr(0, 8);
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        socket_ = dir_ + "/xaggd.sock";
    }
    void TearDown() override
    {
        std::filesystem::remove_all(dir_);
        std::filesystem::remove_all(bpffs_);
        std::filesystem::remove_all(bpffs_ + "-2");  // a second daemon's, where a test runs one
    }

    std::string write_config(const Topology &topo, uint32_t max_positions = 4096,
                             uint32_t min_job_positions = 256)
    {
        netns_ = topo.agg();
        std::string path = dir_ + "/xaggd.conf";
        std::ofstream(path) << "# written by the integration test\n"
                            << "interface = eth0\n"
                            << "netns = " << topo.agg() << "\n"
                            << "max_positions = " << max_positions << "\n"
                            << "min_job_positions = " << min_job_positions
                            << "\n"
                            // These tests count 768-value chunks where a job is created without
                            // a size; the default (auto: jumbo at MTU 9000) is tested by itself.
                            << "default_chunk_elems = 768\n"
                            << "bpffs_dir = " << bpffs_ << "\n"
                            << "state_dir = " << dir_ << "/state\n"
                            << "host_slots_dir = " << dir_ << "/slots\n"
                            << "control_socket = " << socket_ << "\n"
                            << "log_level = debug\n";
        return path;
    }

    // A second node's config (its aggregator namespace `netns`): its own pins (removed by
    // TearDown), state and control socket; no metrics endpoint, the first one has it.
    std::string write_second_config(const std::string &netns, const std::string &socket) const
    {
        std::string path = dir_ + "/xaggd2.conf";
        std::ofstream(path) << "interface = eth0\nnetns = " << netns << "\nbpffs_dir = " << bpffs_
                            << "-2\nstate_dir = " << dir_ << "/state2\nhost_slots_dir = " << dir_
                            << "/slots2\ndefault_chunk_elems = 768\ncontrol_socket = " << socket
                            << "\nmetrics_address =\nlog_level = debug\n";
        return path;
    }

    std::unique_ptr<Process> start_daemon(const std::string &config, const std::string &log)
    {
        std::filesystem::remove(socket_);
        auto p = std::make_unique<Process>(xaggd_as_unit(netns_, config), dir_ + "/" + log);
        // Waits for the state it needs (the control socket answering) while xaggd runs: loading
        // the fast path (the verifier) takes seconds on a loaded machine. A minute is a hang.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (p->running() && std::chrono::steady_clock::now() < deadline) {
            try {
                control(socket_, {{"op", "stats"}});
                return p;
            } catch (const std::exception &) {
                std::this_thread::sleep_for(std::chrono::milliseconds(25));
            }
        }
        ADD_FAILURE() << "xaggd did not open its control socket: " << p->output();
        return p;
    }

    std::string dir_, bpffs_, socket_;
    std::string netns_;  // the aggregator namespace of the last write_config
};

}  // namespace xagg::test
