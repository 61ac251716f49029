// SPDX-License-Identifier: MIT
// xagg-ecn-mark: makes an interface an ECN-marking switch port for the bench (bench/
// ecn_marker.bpf.c: a phantom queue draining at the port's rate, CE above a threshold), because
// this VM's kernel has no marking qdisc. Attaches at TC egress of the interface, in front of
// whatever qdisc shapes it, until SIGTERM/SIGINT; then detaches and prints what it did as JSON.
//
//   xagg-ecn-mark --netns NS --dev IF --rate-mbit R --threshold-bytes K
#include <bpf/libbpf.h>
#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <system_error>
#include <vector>

#include "bpf/ecn_marker.skel.h"
#include "lib/sys/netns.hpp"

namespace {

volatile sig_atomic_t stop = 0;

struct marker_stats {
    __u64 frames, ect, marked;
};

}  // namespace

int main(int argc, char **argv)
{
    CLI::App app{"An ECN-marking switch port for the bench (phantom queue, TC egress)"};
    std::string netns, dev;
    double rate_mbit = 2000;
    uint64_t threshold = 65536;
    app.add_option("--netns", netns, "Namespace the interface is in");
    app.add_option("--dev", dev, "Interface whose egress marks")->required();
    app.add_option("--rate-mbit", rate_mbit, "Rate the phantom queue drains at, Mbit/s");
    app.add_option("--threshold-bytes", threshold, "Phantom queue above which frames are marked");
    CLI11_PARSE(app, argc, argv);
    signal(SIGTERM, [](int) { stop = 1; });
    signal(SIGINT, [](int) { stop = 1; });
    if (!netns.empty())
        xagg::sys::enter_netns(netns);
    const int ifindex = static_cast<int>(if_nametoindex(dev.c_str()));
    if (ifindex == 0)
        throw std::system_error(errno, std::generic_category(), "interface " + dev);

    ecn_marker *skel = ecn_marker__open();
    if (!skel)
        throw std::system_error(errno, std::generic_category(), "opening ecn_marker");
    skel->rodata->drain_bytes_per_sec = static_cast<__u64>(rate_mbit * 1e6 / 8);
    skel->rodata->threshold_bytes = threshold;
    if (ecn_marker__load(skel) != 0)
        throw std::system_error(errno, std::generic_category(), "loading ecn_marker");
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_EGRESS);
    LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = bpf_program__fd(skel->progs.ecn_marker));
    // libbpf logs the kernel's refusal when a clsact qdisc is there already; that is fine.
    libbpf_set_print(nullptr);
    int err = bpf_tc_hook_create(&hook);
    const bool created = err == 0;  // then it goes with us, leaving the port as it was
    if (err && err != -EEXIST)
        throw std::system_error(-err, std::generic_category(), "clsact on " + dev);
    if ((err = bpf_tc_attach(&hook, &opts)) != 0)
        throw std::system_error(-err, std::generic_category(), "attaching to " + dev);
    std::fprintf(stderr, "xagg-ecn-mark: %s marks above %llu bytes draining at %.0f Mbit/s\n",
                 dev.c_str(), static_cast<unsigned long long>(threshold), rate_mbit);
    while (!stop)
        pause();

    opts.prog_fd = opts.prog_id = opts.flags = 0;
    bpf_tc_detach(&hook, &opts);
    if (created) {
        hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
        bpf_tc_hook_destroy(&hook);
    }
    const int cpus = libbpf_num_possible_cpus();
    std::vector<marker_stats> per_cpu(static_cast<size_t>(cpus > 0 ? cpus : 1));
    __u32 zero = 0;
    marker_stats total{};
    if (bpf_map__lookup_elem(skel->maps.stats, &zero, sizeof(zero), per_cpu.data(),
                             per_cpu.size() * sizeof(marker_stats), 0) == 0)
        for (const marker_stats &s : per_cpu) {
            total.frames += s.frames;
            total.ect += s.ect;
            total.marked += s.marked;
        }
    std::printf("{\"frames\": %llu, \"ect\": %llu, \"marked\": %llu}\n",
                static_cast<unsigned long long>(total.frames),
                static_cast<unsigned long long>(total.ect),
                static_cast<unsigned long long>(total.marked));
    ecn_marker__destroy(skel);
    return 0;
}
