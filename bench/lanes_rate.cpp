// SPDX-License-Identifier: MIT
// lanes_rate: the fast path's per-byte costs per packet (bench/xagg_lanes.bpf.c): the add loop as
// 32-bit adds or 64-bit adds of two packed lanes, and a UDP checksum pass over the payload, by
// BPF_PROG_TEST_RUN (the kernel times `repeat` runs of each program on the same frame). Prints
// one JSON line per program: median ns per packet over several trials.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "xagg/proto.h"
#include "bpf/xagg_lanes.skel.h"

int main(int argc, char **argv)
{
    int repeat = 1000000;
    unsigned trials = 5;
    CLI::App app("lanes_rate: per-byte costs of one packet in XDP (adds, packed adds, checksums)");
    app.add_option("--repeat", repeat, "Runs per trial")->capture_default_str();
    app.add_option("--trials", trials, "Trials (the median is reported)")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    xagg_lanes *skel = xagg_lanes__open_and_load();
    if (!skel) {
        std::fprintf(stderr, "lanes_rate: loading the programs failed (root?)\n");
        return 1;
    }
    std::vector<unsigned char> frame(XAGG_FRAME_BYTES);
    for (size_t i = XAGG_FRAME_HDR_BYTES; i < frame.size(); i += 4)
        frame[i] = static_cast<unsigned char>(i % 7);  // small values: no lane overflows
    struct {
        const char *name;
        bpf_program *prog;
    } progs[] = {{"none", skel->progs.lanes_none},
                 {"u32_adds", skel->progs.lanes_u32},
                 {"u64_packed_adds", skel->progs.lanes_u64},
                 {"udp_csum_u32_words", skel->progs.csum_u32},
                 {"udp_csum_u64_words", skel->progs.csum_u64},
                 {"udp_csum_helper_512", skel->progs.csum_helper_512},
                 {"udp_csum_u32_then_u32_adds", skel->progs.csum_u32_then_adds},
                 {"udp_csum_u64_then_u32_adds", skel->progs.csum_u64_then_adds}};
    for (auto &p : progs) {
        std::vector<double> ns;
        for (unsigned t = 0; t < trials; t++) {
            LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(),
                        .data_size_in = static_cast<__u32>(frame.size()), .repeat = repeat);
            if (bpf_prog_test_run_opts(bpf_program__fd(p.prog), &opts) != 0) {
                std::perror("BPF_PROG_TEST_RUN");
                return 1;
            }
            ns.push_back(opts.duration);
        }
        std::sort(ns.begin(), ns.end());
        std::printf("{\"program\":\"%s\",\"ns_per_packet\":%.1f}\n", p.name, ns[ns.size() / 2]);
    }
    xagg_lanes__destroy(skel);
    return 0;
}
