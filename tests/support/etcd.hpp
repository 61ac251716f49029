// SPDX-License-Identifier: MIT
// A real etcd (Debian's etcd-server) for a test: its own data directory and ports, in the test's
// own namespace or the host's loopback, up before the constructor returns and killed with it.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "lib/etcd/etcd_client.hpp"
#include "lib/sys/netns.hpp"
#include "tests/support/process.hpp"

namespace xagg::test {

class EtcdServer {
public:
    // Listens on `ip`:`port` (and `port` + 1 for peers), in namespace `netns` if given.
    EtcdServer(const std::string &dir, const std::string &ip, int port,
               const std::string &netns = "")
        : endpoint_("http://" + ip + ":" + std::to_string(port))
    {
        std::filesystem::create_directories(dir);
        const std::string peer = "http://" + ip + ":" + std::to_string(port + 1);
        std::vector<std::string> argv;
        if (!netns.empty())
            argv = {"/usr/sbin/ip", "netns", "exec", netns};
        const std::vector<std::string> etcd{"/usr/bin/etcd",
                                            "--name",
                                            "xaggtest",
                                            "--data-dir",
                                            dir + "/data",
                                            "--listen-client-urls",
                                            endpoint_,
                                            "--advertise-client-urls",
                                            endpoint_,
                                            "--listen-peer-urls",
                                            peer,
                                            "--initial-advertise-peer-urls",
                                            peer,
                                            "--initial-cluster",
                                            "xaggtest=" + peer,
                                            "--log-level",
                                            "error"};
        argv.insert(argv.end(), etcd.begin(), etcd.end());
        process_ = std::make_unique<Process>(argv, dir + "/etcd.log");
        for (int i = 0; i < 200; i++) {
            bool up = false;
            auto ping = [&] {
                try {
                    etcd::Client(endpoint_).get("/ping");
                    up = true;
                } catch (const etcd::Error &) {
                }
            };
            if (netns.empty())
                ping();
            else
                sys::run_in_netns(netns, ping);
            if (up)
                return;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        throw std::runtime_error("etcd did not start: " + process_->output());
    }

    const std::string &endpoint() const { return endpoint_; }

private:
    std::string endpoint_;
    std::unique_ptr<Process> process_;
};

}  // namespace xagg::test
