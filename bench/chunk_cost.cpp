// SPDX-License-Identifier: MIT
// chunk_cost: what the fast path program costs per contribution for each chunk size, against a
// userspace reference of the same memory traffic, measured in the same run.
//
// The program: the real xagg_fastpath object, in each variant the kernel can load
// (include/xagg/fastpath.h), run by BPF_PROG_TEST_RUN on a job of 4 workers, one
// contribution per run, every chunk of the job and every round in turn, so each contribution
// lands in a slot that is not in any cache (the job's slots are far larger than the LLC) and
// three of four are added, one completes and is rewritten into the result. The kernel gives a
// jumbo frame the linear part a driver with 4 KiB buffers would (3520 bytes) and the rest in
// frags, so the program reads it through bpf_xdp_load_bytes as on such a NIC. The time is the
// kernel's own measure of the program run (BPF_PROG_TEST_RUN's duration), without the copy of
// the frame in and out, and without what a real driver adds per packet (bench/fastpath_rate
// measures the whole path for standard chunks; live-frame generation cannot send multi-buffer
// frames, so there is no such table for jumbo ones).
//
// The reference: the same sequence of contributions in userspace, each read from a frame buffer
// and stored or added into a slot array of the same size with the widest SIMD loop the CPU has,
// the completing one's sum written out into a result frame. No parsing, no checks, no locks: the
// memory traffic alone, which is the floor the program is compared with (issue: >= 0.8 of it).
//
//   bench/chunk_cost [--rounds R] [--trials T]
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "lib/fastpath/fastpath.hpp"
#include "lib/fastpath/kernel_probe.hpp"
#include "tests/support/packet_builder.hpp"
#include "xagg/proto.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kWorkers = 4;
constexpr uint64_t kKey = 0x6a09e667f3bcc908ull;
// Slot positions per job: 12288 x 2 slots x 3 KiB = 75 MiB each, beyond any cache.
constexpr uint32_t kPositions = 12288;
constexpr uint32_t kLinear = 3520;  // what BPF_PROG_TEST_RUN gives the linear part at most

struct Size {
    const char *name;
    uint32_t job;
    uint16_t elems;
    uint32_t parts;
    // How much of the frame the kernel gives the linear part, the rest in frags.
    uint32_t linear;
    // Headers outside the linear part: only the pull variant takes such frames.
    bool pull_only = false;
};

// Rank r's contribution frame of a chunk size (tests/support/packet_builder.hpp, which builds
// frames byte by byte from PROTOCOL.md); round and chunk are patched in per run.
std::vector<uint8_t> frame_of(const Size &s, uint32_t rank)
{
    xagg::test::Frame f;
    f.src_ip = 0x0a580001 + rank;
    f.dst_ip = 0x0a5800fe;
    f.src_port = 9872;
    f.rank = static_cast<uint16_t>(rank);
    f.job = s.job;
    f.key = kKey;
    f.nelem = s.elems;
    f.values.assign(s.elems, static_cast<int32_t>(rank + 1));
    return f.build();
}

// The program: ns per contribution (the kernel's measure), after checking every result.
double program_ns(xagg::FastPath &fp, const Size &s, uint32_t rounds, uint32_t round0)
{
    std::vector<std::vector<uint8_t>> frames;
    for (uint32_t r = 0; r < kWorkers; r++)
        frames.push_back(frame_of(s, r));
    std::vector<uint8_t> out(frames[0].size() + 256);
    const uint32_t chunks = kPositions / s.parts;
    uint64_t total_ns = 0, runs = 0, results = 0;
    xdp_md ctx{};
    ctx.data_end = std::min<uint32_t>(s.linear, static_cast<uint32_t>(frames[0].size()));
    for (uint32_t round = round0; round < round0 + rounds; round++) {
        for (uint32_t chunk = 0; chunk < chunks; chunk++) {
            for (uint32_t r = 0; r < kWorkers; r++) {
                std::vector<uint8_t> &f = frames[r];
                xagg::test::put_be32(f, xagg::test::off::x_round, round);
                xagg::test::put_be32(f, xagg::test::off::x_chunk, chunk);
                LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f.data(), .data_out = out.data(),
                            .data_size_in = static_cast<uint32_t>(f.size()),
                            .data_size_out = static_cast<uint32_t>(out.size()), .ctx_in = &ctx,
                            .ctx_size_in = sizeof(ctx), .repeat = 1);
                if (bpf_prog_test_run_opts(fp.prog_fd(), &o) != 0)
                    throw std::runtime_error("BPF_PROG_TEST_RUN failed");
                total_ns += o.duration;
                runs++;
                if (o.retval == XDP_TX) {
                    results++;
                    // 1 + 2 + 3 + 4 in every value of the sum.
                    if (xagg::test::get_le32(out, xagg::test::off::payload) != 10 ||
                        xagg::test::get_le32(out, xagg::test::off::payload + 4 * (s.elems - 1)) !=
                            10)
                        throw std::runtime_error("a result with a wrong sum");
                }
            }
        }
    }
    if (results != uint64_t{rounds} * chunks)
        throw std::runtime_error(std::string(s.name) + ": " + std::to_string(results) +
                                 " results for " + std::to_string(uint64_t{rounds} * chunks) +
                                 " chunk-rounds");
    return static_cast<double>(total_ns) / static_cast<double>(runs);
}

// What one run costs without aggregating: a frame of the size to another UDP port, which the
// program parses as far as the port and passes. The floor under every program row (the test
// run's own timing and setup, the parse).
double pass_ns(xagg::FastPath &fp, const Size &s)
{
    std::vector<uint8_t> f = frame_of(s, 0), out(f.size() + 256);
    xagg::test::put_be16(f, xagg::test::off::udp_dport, 9);  // discard
    xdp_md ctx{};
    ctx.data_end = std::min<uint32_t>(s.linear, static_cast<uint32_t>(f.size()));
    uint64_t total = 0;
    constexpr int kRuns = 20000;
    for (int i = 0; i < kRuns; i++) {
        LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f.data(), .data_out = out.data(),
                    .data_size_in = static_cast<uint32_t>(f.size()),
                    .data_size_out = static_cast<uint32_t>(out.size()), .ctx_in = &ctx,
                    .ctx_size_in = sizeof(ctx), .repeat = 1);
        if (bpf_prog_test_run_opts(fp.prog_fd(), &o) != 0 || o.retval != XDP_PASS)
            throw std::runtime_error("the pass run failed");
        total += o.duration;
    }
    return static_cast<double>(total) / kRuns;
}

// The reference's loops: the compiler vectorizes them to the target's widest registers.
#define XAGG_REFERENCE_LOOPS(suffix, attr)                                                         \
    attr void store_##suffix(int32_t *__restrict sum, const int32_t *__restrict v, size_t n)       \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            sum[i] = v[i];                                                                         \
    }                                                                                              \
    attr void add_##suffix(int32_t *__restrict sum, const int32_t *__restrict v, size_t n)         \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            sum[i] =                                                                               \
                static_cast<int32_t>(static_cast<uint32_t>(sum[i]) + static_cast<uint32_t>(v[i])); \
    }                                                                                              \
    attr void add_emit_##suffix(int32_t *__restrict sum, const int32_t *__restrict v,              \
                                int32_t *__restrict out, size_t n)                                 \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            const auto s =                                                                         \
                static_cast<int32_t>(static_cast<uint32_t>(sum[i]) + static_cast<uint32_t>(v[i])); \
            sum[i] = s;                                                                            \
            out[i] = s;                                                                            \
        }                                                                                          \
    }
XAGG_REFERENCE_LOOPS(sse2, )
XAGG_REFERENCE_LOOPS(avx2, [[gnu::target("avx2")]])
XAGG_REFERENCE_LOOPS(avx512, [[gnu::target("avx512f,prefer-vector-width=512")]])

struct Loops {
    const char *isa;
    void (*store)(int32_t *, const int32_t *, size_t);
    void (*add)(int32_t *, const int32_t *, size_t);
    void (*add_emit)(int32_t *, const int32_t *, int32_t *, size_t);
};

Loops best_loops()
{
    if (__builtin_cpu_supports("avx512f"))
        return {"avx512", store_avx512, add_avx512, add_emit_avx512};
    if (__builtin_cpu_supports("avx2"))
        return {"avx2", store_avx2, add_avx2, add_emit_avx2};
    return {"sse2", store_sse2, add_sse2, add_emit_sse2};
}

// The reference: ns per contribution over the same sequence, into a slot array of the same size
// (two slots of 768 values per position, as the map has).
double reference_ns(const Size &s, uint32_t rounds, const Loops &loops)
{
    std::vector<std::vector<uint8_t>> frames;
    for (uint32_t r = 0; r < kWorkers; r++)
        frames.push_back(frame_of(s, r));
    std::vector<int32_t> slots(size_t{kPositions} * 2 * XAGG_CHUNK_ELEMS);
    const uint32_t chunks = kPositions / s.parts;
    const size_t n = s.elems;
    // The result goes into a frame of its own (the program rewrites the last contribution's
    // frame, which here would change the next round's input).
    std::vector<int32_t> result(n);
    uint64_t check = 0;
    auto t0 = Clock::now();
    for (uint32_t round = 0; round < rounds; round++) {
        for (uint32_t chunk = 0; chunk < chunks; chunk++) {
            // A jumbo chunk's parts are consecutive positions, so its sum is one run of memory.
            int32_t *sum =
                &slots[(size_t{chunk} * s.parts * 2 + (round & 1) * s.parts) * XAGG_CHUNK_ELEMS];
            for (uint32_t r = 0; r < kWorkers; r++) {
                const auto *v =
                    reinterpret_cast<const int32_t *>(frames[r].data() + xagg::test::off::payload);
                if (r == 0)
                    loops.store(sum, v, n);
                else if (r + 1 < kWorkers)
                    loops.add(sum, v, n);
                else
                    loops.add_emit(sum, v, result.data(), n);
            }
            check += static_cast<uint32_t>(result[n - 1]);
        }
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    if (check != uint64_t{rounds} * chunks * 10)
        throw std::runtime_error("the reference summed wrong");
    return ns / static_cast<double>(uint64_t{rounds} * chunks * kWorkers);
}

}  // namespace

int main(int argc, char **argv)
{
    uint32_t rounds = 4, trials = 3;
    CLI::App app(
        "chunk_cost: the fast path program's cost per contribution, standard and jumbo chunks, "
        "against a userspace SIMD reference of the same memory traffic in the same run");
    app.add_option("--rounds", rounds, "Rounds over every chunk of the job per trial")
        ->capture_default_str();
    app.add_option("--trials", trials, "Trials (the median is reported)")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    if (geteuid() != 0) {
        std::fprintf(stderr, "chunk_cost: needs root (BPF_PROG_TEST_RUN)\n");
        return 1;
    }
    // A standard frame (3154 bytes) is linear where the driver's first buffer holds it (most
    // drivers at MTU 9000 give a page: 3520 bytes here); a driver with 3 KiB buffers (i40e)
    // splits it inside its values, which are then copied out and back; header-split receive
    // leaves even the headers outside, which only the pull variant takes.
    const Size sizes[] = {
        {"standard (768), linear", 1, XAGG_CHUNK_ELEMS, 1, kLinear},
        {"standard (768), split at 3072", 1, XAGG_CHUNK_ELEMS, 1, 3072},
        {"standard (768), headers split at 60", 1, XAGG_CHUNK_ELEMS, 1, 60, true},
        {"jumbo (2048)", 2, XAGG_JUMBO_CHUNK_ELEMS, XAGG_JUMBO_SLOT_PARTS, kLinear}};
    const Loops loops = best_loops();
    try {
        const xagg::KernelOffers kernel = xagg::probe_kernel();
        std::printf(
            "kernel %s; %u workers, %u slot positions per job (%u MiB of slots), %u rounds x %u "
            "trials, reference loops: %s\n\n",
            kernel.release.c_str(), kWorkers, kPositions,
            static_cast<unsigned>(sizeof(xagg_slot) * 2 * kPositions >> 20), rounds, trials,
            loops.isa);
        std::printf(
            "| variant | chunk | program ns/contribution | of which a pass run | program "
            "Gbit/s/core | reference ns/contribution | reference Gbit/s/core | program / "
            "reference |\n");
        std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
        std::fflush(stdout);
        // Every variant the kernel can load, the best first; each on its own maps.
        std::vector<xagg_fastpath_variant> variants = {xagg::best_variant(kernel)};
        if (variants[0] != XAGG_VARIANT_COPY)
            variants.push_back(XAGG_VARIANT_COPY);
        uint32_t round0 = 0;
        for (xagg_fastpath_variant variant : variants) {
            xagg::FastPathConfig config;
            config.max_jobs = 4;
            config.max_positions = 2 * kPositions;
            config.variant = variant;
            xagg::FastPath fp(config);
            fp.load();
            for (uint32_t id = 1; id <= 2; id++) {
                const Size &s = sizes[id == 1 ? 0 : 3];
                xagg::JobSpec job;
                job.id = id;
                job.members = (1ull << kWorkers) - 1;
                job.region_base = (id - 1) * kPositions;
                job.region_positions = kPositions;
                job.chunk_elems = s.elems;
                job.tag = id;
                job.key = kKey;
                job.group.s_addr = htonl(0xef580001);
                job.group_port = 9872;
                fp.put_job(job);
                for (uint32_t r = 0; r < kWorkers; r++)
                    fp.put_member(id, r, in_addr{htonl(0x0a580001 + r)}, 9872);
            }
            for (const Size &s : sizes) {
                if (s.pull_only && variant != XAGG_VARIANT_PULL)
                    continue;
                std::vector<double> prog, ref;
                for (uint32_t t = 0; t < trials; t++) {
                    prog.push_back(program_ns(fp, s, rounds, round0));
                    round0 += rounds;
                    ref.push_back(reference_ns(s, rounds, loops));
                }
                std::sort(prog.begin(), prog.end());
                std::sort(ref.begin(), ref.end());
                const double p = prog[prog.size() / 2], r = ref[ref.size() / 2];
                const double bits = s.elems * 32.0;
                std::printf("| %s | %s | %.0f | %.0f | %.1f | %.0f | %.1f | %.2f |\n",
                            xagg::variant_name(variant), s.name, p, pass_ns(fp, s), bits / p, r,
                            bits / r, r / p);
                std::fflush(stdout);
            }
        }
        std::printf("\nreproduce: %s --rounds %u --trials %u\n", argv[0], rounds, trials);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "chunk_cost: %s\n", e.what());
        return 1;
    }
    return 0;
}
