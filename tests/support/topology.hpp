// SPDX-License-Identifier: MIT
// The namespace topology of scripts/netns-topology.sh, owned by a test: built in the
// constructor, always removed in the destructor, under a name unique to the test process.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

#include "lib/sys/netns.hpp"
#include "tests/support/process.hpp"

namespace xagg::test {

inline const std::string kAggAddr = "10.77.0.100";
inline std::string worker_addr(unsigned rank)
{
    return "10.77.0." + std::to_string(rank + 1);
}

class Topology {
public:
    Topology(const std::string &tag, unsigned workers)
        : prefix_("xaggt" + std::to_string(getpid()) + tag)
    {
        down();
        std::string out = run_command(script() + " up " + prefix_ + " " + std::to_string(workers) +
                                      " " + XAGG_BINARY_DIR "/bpf/xdp_pass.bpf.o");
        if (!run_command("ip netns list | grep -c '^" + prefix_ + "-agg'").starts_with("1")) {
            down();
            throw std::runtime_error("building the namespace topology failed: " + out);
        }
    }
    ~Topology() { down(); }
    Topology(const Topology &) = delete;
    Topology &operator=(const Topology &) = delete;

    std::string agg() const { return prefix_ + "-agg"; }
    // A further aggregator node, PREFIX-aggN at 10.77.0.(100+N).
    std::string add_aggregator(unsigned n) const
    {
        run_command(script() + " aggregator " + prefix_ + " " + std::to_string(n) + " " +
                    XAGG_BINARY_DIR "/bpf/xdp_pass.bpf.o");
        return prefix_ + "-agg" + std::to_string(n);
    }
    // Worker `rank`'s traffic now crosses sw's wRANK <-> kRANK, for a link impairer to carry.
    void detour(unsigned rank) const
    {
        run_command(script() + " detour " + prefix_ + " " + std::to_string(rank));
    }
    std::string worker(unsigned rank) const { return prefix_ + "-w" + std::to_string(rank); }
    // A token bucket (tbf: rate, a 64 KB burst, a `queue`-byte queue) on what `dev` in `ns`
    // sends: a worker's eth0 (its uplink), sw's wRANK (its downlink) or agg (what reaches the
    // aggregator).
    void shape(const std::string &ns, const std::string &dev, const std::string &rate,
               const std::string &queue = "512kb") const
    {
        run_command("ip netns exec " + ns + " tc qdisc replace dev " + dev + " root tbf rate " +
                    rate + " burst 64kb limit " + queue);
        if (run_command("ip netns exec " + ns + " tc qdisc show dev " + dev).find("tbf") ==
            std::string::npos)
            throw std::runtime_error("tbf on " + ns + "/" + dev + " did not take");
    }
    std::string sw() const { return prefix_ + "-sw"; }
    const std::string &prefix() const { return prefix_; }

    static void in_netns(const std::string &ns, const std::function<void()> &fn)
    {
        sys::run_in_netns(ns, fn);
    }

private:
    static std::string script() { return XAGG_SOURCE_DIR "/scripts/netns-topology.sh"; }
    void down() const { run_command(script() + " down " + prefix_); }

    std::string prefix_;
};

}  // namespace xagg::test
