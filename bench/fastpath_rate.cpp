// SPDX-License-Identifier: MIT
// Server-side throughput of the XDP fast path and the host parameter server against the
// reflector ceiling, in one run.
//
// Topology: two namespaces joined by one veth pair, gen0 <-> agg0. A generator program run by
// BPF_PROG_TEST_RUN in live-frames mode on gen0 writes W workers' contributions and XDP_TXes them
// to agg0, where the program under test runs in native mode; what it sends back is dropped on
// gen0. "1 core" pins one generator to CPU 0 (the receiver's softirq runs on the same CPU, as veth
// does); "2 cores" runs one generator per CPU, each on its own range of chunks.
//
//   bench/fastpath_rate [--seconds S] [--workers W] [--cores 1,2]
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lib/fastpath/fastpath.hpp"
#include "daemon/datapath/host_ps.hpp"
#include "lib/sys/netns.hpp"
#include "xagg/proto.h"
#include "bpf/xagg_gen.skel.h"
#include "bpf/xdp_reflect.skel.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kGenIp = 0x0a580001;  // 10.88.0.1: rank r sends from 10.88.0.1 + r
constexpr uint32_t kAggIp = 0x0a5800fe;  // 10.88.0.254
constexpr uint16_t kWorkerPort = 9872;
constexpr uint32_t kChunksPerCpu = 4096;
constexpr uint64_t kBenchJobKey = 0x6a09e667f3bcc908ull;  // any non-zero key

int sh(const std::string &cmd)
{
    return std::system(cmd.c_str());
}

std::string capture(const std::string &cmd)
{
    std::string out;
    FILE *p = popen(cmd.c_str(), "r");
    char buf[256];
    while (p && fgets(buf, sizeof(buf), p))
        out += buf;
    if (p)
        pclose(p);
    return out;
}

void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

using xagg::sys::run_in_netns;

struct Mac {
    uint8_t b[6];
};

Mac mac_of(const std::string &ns, const std::string &dev)
{
    std::string s = capture("ip -n " + ns + " -br link show " + dev + " | awk '{print $3}'");
    Mac m{};
    if (std::sscanf(s.c_str(), "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &m.b[0], &m.b[1], &m.b[2], &m.b[3],
                    &m.b[4], &m.b[5]) != 6)
        throw std::runtime_error("no MAC for " + dev + ": " + s);
    return m;
}

uint64_t percpu_sum(int map_fd, uint32_t key)
{
    std::vector<uint64_t> v(static_cast<size_t>(libbpf_num_possible_cpus()));
    if (bpf_map_lookup_elem(map_fd, &key, v.data()) != 0)
        throw std::runtime_error("reading a per-CPU counter");
    uint64_t s = 0;
    for (uint64_t x : v)
        s += x;
    return s;
}

struct Topology {
    std::string gen, agg;
    explicit Topology(const std::string &prefix) : gen(prefix + "-gen"), agg(prefix + "-agg")
    {
        down();
        const std::string mtu = std::to_string(XAGG_MIN_MTU);
        int rc = sh("ip netns add " + gen + " && ip netns add " + agg + " && ip -n " + gen +
                    " link add gen0 mtu " + mtu +
                    " numtxqueues 2 numrxqueues 2 type veth peer name agg0 mtu " + mtu +
                    " numtxqueues 2 numrxqueues 2 netns " + agg + " && ip -n " + gen +
                    " link set gen0 up && ip -n " + agg +
                    " addr add 10.88.0.254/24 dev agg0 && ip -n " + agg + " link set agg0 up");
        if (rc != 0)
            throw std::runtime_error("building the benchmark topology failed");
    }
    ~Topology() { down(); }
    void down() const
    {
        sh("ip netns del " + gen + " 2>/dev/null; ip netns del " + agg + " 2>/dev/null");
    }
};

struct Measurement {
    double seconds = 0;
    uint64_t useful = 0;     // contributions aggregated (or frames reflected)
    uint64_t processed = 0;  // every packet the program saw
    uint64_t sent = 0;       // frames the generators produced
};

class Generator {
public:
    Generator(const Topology &topo, uint32_t workers) : topo_(topo)
    {
        skel_ = xagg_gen__open();
        if (!skel_)
            throw std::runtime_error("opening the generator");
        skel_->rodata->workers = workers;
        skel_->rodata->chunks_per_cpu = kChunksPerCpu;
        skel_->rodata->job_id = 1;
        skel_->rodata->job_key = kBenchJobKey;
        skel_->rodata->src_ip_base = kGenIp;
        skel_->rodata->dst_ip = kAggIp;
        skel_->rodata->src_port = kWorkerPort;
        skel_->rodata->dst_port = XAGG_DEFAULT_PORT;
        Mac src = mac_of(topo.gen, "gen0"), dst = mac_of(topo.agg, "agg0");
        for (int i = 0; i < 6; i++) {
            skel_->rodata->src_mac[i] = src.b[i];
            skel_->rodata->dst_mac[i] = dst.b[i];
        }
        if (xagg_gen__load(skel_))
            throw std::runtime_error("loading the generator");
        run_in_netns(topo.gen, [&] {
            ifindex_ = static_cast<int>(if_nametoindex("gen0"));
            if (bpf_xdp_attach(ifindex_, bpf_program__fd(skel_->progs.xagg_gen_sink),
                               XDP_FLAGS_DRV_MODE, nullptr) != 0)
                throw std::runtime_error("attaching the sink to gen0");
        });
    }
    ~Generator() { xagg_gen__destroy(skel_); }

    // Runs one generator per CPU in [0, cores) for `seconds`; returns frames sent.
    uint64_t run(int cores, double seconds)
    {
        std::atomic<uint64_t> sent{0};
        std::atomic<bool> failed{false};
        std::vector<std::thread> threads;
        for (int cpu = 0; cpu < cores; cpu++) {
            threads.emplace_back([&, cpu] {
                pin(cpu);
                xagg::sys::enter_netns(topo_.gen);
                std::vector<uint8_t> frame(XAGG_FRAME_BYTES, 0);
                xdp_md ctx{};
                ctx.data_end = static_cast<uint32_t>(frame.size());
                ctx.ingress_ifindex = static_cast<uint32_t>(ifindex_);
                auto end = Clock::now() + std::chrono::duration<double>(seconds);
                while (Clock::now() < end) {
                    LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame.data(),
                                .data_size_in = static_cast<uint32_t>(frame.size()), .ctx_in = &ctx,
                                .ctx_size_in = sizeof(ctx), .repeat = 1u << 16,
                                .flags = BPF_F_TEST_XDP_LIVE_FRAMES, .batch_size = 64);
                    if (bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.xagg_gen), &o) != 0) {
                        failed = true;
                        return;
                    }
                    sent += 1u << 16;
                }
            });
        }
        for (auto &t : threads)
            t.join();
        if (failed)
            throw std::runtime_error("BPF_PROG_TEST_RUN live frames failed");
        return sent;
    }

private:
    const Topology &topo_;
    xagg_gen *skel_ = nullptr;
    int ifindex_ = 0;
};

Measurement measure_reflector(const Topology &topo, Generator &gen, int cores, double seconds)
{
    xdp_reflect *skel = xdp_reflect__open_and_load();
    if (!skel)
        throw std::runtime_error("loading the reflector");
    int ifindex = 0;
    run_in_netns(topo.agg, [&] {
        ifindex = static_cast<int>(if_nametoindex("agg0"));
        if (bpf_xdp_attach(ifindex, bpf_program__fd(skel->progs.xdp_reflect), XDP_FLAGS_DRV_MODE,
                           nullptr) != 0)
            throw std::runtime_error("attaching the reflector to agg0");
    });
    int fd = bpf_map__fd(skel->maps.reflected);
    gen.run(cores, 0.2);  // warm-up
    Measurement m;
    uint64_t before = percpu_sum(fd, 0);
    auto t0 = Clock::now();
    m.sent = gen.run(cores, seconds);
    m.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    m.useful = m.processed = percpu_sum(fd, 0) - before;
    run_in_netns(topo.agg, [&] { bpf_xdp_detach(ifindex, XDP_FLAGS_DRV_MODE, nullptr); });
    xdp_reflect__destroy(skel);
    return m;
}

Measurement measure_fastpath(const Topology &topo, Generator &gen, int cores, uint32_t workers,
                             double seconds, bool fanout)
{
    Measurement m;
    run_in_netns(topo.agg, [&] {
        xagg::FastPath fp(
            xagg::FastPathConfig{XAGG_DEFAULT_PORT, 4, 2 * kChunksPerCpu, "", std::nullopt});
        fp.attach("agg0", xagg::AttachMode::native);
        xagg::JobSpec job;
        job.id = 1;
        job.members = (1ull << workers) - 1;
        job.region_positions = 2 * kChunksPerCpu;
        inet_pton(AF_INET, "239.88.0.1", &job.group);
        job.group_port = kWorkerPort;
        job.fanout = fanout;
        job.tag = 1;
        job.key = kBenchJobKey;
        fp.put_job(job);
        for (uint32_t r = 0; r < workers; r++)
            fp.put_member(1, r, in_addr{htonl(kGenIp + r)}, kWorkerPort);
        auto total = [&](const xagg::Counters &c, bool useful_only) {
            if (useful_only)
                return c[XAGG_CNT_AGGREGATED] + c[XAGG_CNT_COMPLETED] +
                       c[XAGG_CNT_COMPLETED_FANOUT];
            uint64_t s = 0;
            for (int i = 0; i < XAGG_CNT_MAX; i++)
                if (xagg::counts_packets(i))  // packets, not fan-out copies
                    s += c[i];
            return s;
        };
        gen.run(cores, 0.2);
        xagg::Counters before = fp.counters();
        auto t0 = Clock::now();
        m.sent = gen.run(cores, seconds);
        m.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        xagg::Counters after = fp.counters();
        m.useful = total(after, true) - total(before, true);
        m.processed = total(after, false) - total(before, false);
        if (std::getenv("XAGG_BENCH_DEBUG"))
            for (int c = 0; c < XAGG_CNT_MAX; c++)
                if (after[c] != before[c])
                    std::fprintf(stderr, "  %s: %llu\n",
                                 xagg::counter_name(static_cast<xagg_counter>(c)),
                                 static_cast<unsigned long long>(after[c] - before[c]));
        if (std::getenv("XAGG_BENCH_DEBUG"))
            for (uint32_t idx : {0u, 1u, 2u, 8192u, 8193u, 8194u}) {
                xagg_slot sl = fp.slot(idx);
                std::fprintf(stderr, "  slot %u: tag %u round %u seen %llx\n", idx, sl.tag,
                             sl.round, static_cast<unsigned long long>(sl.seen));
            }
        fp.detach();
    });
    return m;
}

// The host-side parameter server of xaggd: the fast path passes the host-path job up, the kernel
// stack delivers it to the PS's sockets, `cores` PS threads aggregate it.
Measurement measure_hostpath(const Topology &topo, Generator &gen, int cores, uint32_t workers,
                             double seconds)
{
    Measurement m;
    run_in_netns(topo.agg, [&] {
        xagg::FastPath fp(xagg::FastPathConfig{XAGG_DEFAULT_PORT, 4, 1, "", std::nullopt});
        fp.attach("agg0", xagg::AttachMode::native);
        xagg::daemon::Job job;
        job.id = 1;
        job.workers = workers;
        job.positions = 2 * kChunksPerCpu;
        job.host_path = true;
        job.tag = 1;
        job.key = kBenchJobKey;
        inet_pton(AF_INET, "239.88.0.1", &job.group);
        job.group_port = kWorkerPort;
        for (uint32_t r = 0; r < workers; r++)
            job.members[r] = {r, in_addr{htonl(kGenIp + r)}, kWorkerPort};
        xagg::JobSpec spec;
        spec.id = 1;
        spec.members = job.member_bitmap();
        spec.host_path = true;
        spec.tag = 1;
        spec.key = kBenchJobKey;
        fp.put_job(spec);
        for (uint32_t r = 0; r < workers; r++)  // the fast path checks membership first
            fp.put_member(1, r, in_addr{htonl(kGenIp + r)}, kWorkerPort);
        xagg::daemon::HostPs ps(XAGG_DEFAULT_PORT, "agg0", static_cast<unsigned>(cores));
        ps.put_job(job);
        auto useful = [](const xagg::Counters &c) {
            return c[XAGG_CNT_AGGREGATED] + c[XAGG_CNT_COMPLETED];
        };
        gen.run(cores, 0.2);
        xagg::Counters before = ps.counters();
        auto t0 = Clock::now();
        m.sent = gen.run(cores, seconds);
        m.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        m.useful = useful(ps.counters()) - useful(before);
        m.processed = m.useful;
        if (std::getenv("XAGG_BENCH_DEBUG")) {
            xagg::Counters f = fp.counters(), h = ps.counters();
            for (int c = 0; c < XAGG_CNT_MAX; c++)
                if (f[c] || h[c])
                    std::fprintf(stderr, "  %s: fast %llu host %llu\n",
                                 xagg::counter_name(static_cast<xagg_counter>(c)),
                                 static_cast<unsigned long long>(f[c]),
                                 static_cast<unsigned long long>(h[c]));
        }
        fp.detach();
    });
    return m;
}

}  // namespace

int main(int argc, char **argv)
{
    CLI::App app{
        "Server-side throughput of the xagg XDP fast path and of xaggd's host parameter server "
        "against the XDP_TX reflector ceiling, measured in the same run."};
    double seconds = 2;
    uint32_t workers = 4;
    std::vector<int> core_counts{1, 2};
    std::string json_file;
    app.add_option("--seconds", seconds, "Measurement time per configuration")->default_val(2);
    app.add_option("--json", json_file, "Also write the rows as a JSON array to this file");
    app.add_option("--workers", workers, "Simulated workers per job")
        ->default_val(4)
        ->check(CLI::Range(1u, 64u));
    app.add_option("--cores", core_counts, "Core counts to measure")->delimiter(',');
    CLI11_PARSE(app, argc, argv);
    if (geteuid() != 0) {
        std::fprintf(stderr, "needs root (namespaces, XDP, BPF_PROG_TEST_RUN)\n");
        return 1;
    }
    int ncpu = static_cast<int>(std::thread::hardware_concurrency());
    try {
        Topology topo("xaggb" + std::to_string(getpid()));
        Generator gen(topo, workers);
        std::printf("frames of %d bytes, %u workers per job, %.1f s per point\n\n",
                    XAGG_FRAME_BYTES, workers, seconds);
        std::printf("| path | cores | Mpps in | gradient Gbit/s | ns/packet/core | of ceiling |\n");
        std::printf("|---|---:|---:|---:|---:|---:|\n");
        std::string rows;  // JSON objects, comma-separated
        for (int cores : core_counts) {
            if (cores > ncpu)
                continue;
            Measurement fast = measure_fastpath(topo, gen, cores, workers, seconds, false);
            Measurement fanout = measure_fastpath(topo, gen, cores, workers, seconds, true);
            Measurement host = measure_hostpath(topo, gen, cores, workers, seconds);
            Measurement ceil = measure_reflector(topo, gen, cores, seconds);
            auto row = [&](const char *name, const Measurement &m) {
                double pps = static_cast<double>(m.useful) / m.seconds;
                double ceil_pps = static_cast<double>(ceil.useful) / ceil.seconds;
                std::printf("| %s | %d | %.3f | %.2f | %.0f | %.2f |\n", name, cores, pps / 1e6,
                            pps * XAGG_CHUNK_BYTES * 8 / 1e9, 1e9 * cores / pps, pps / ceil_pps);
                // CPU per GB: the receive cores are busy for the whole measurement (softirq
                // at 100%), so a GB of gradient costs cores / (GB/s) CPU-seconds.
                char row_json[512];
                std::snprintf(row_json, sizeof(row_json),
                              "%s{\"path\":\"%s\",\"cores\":%d,\"workers\":%u,\"pps\":%.0f,"
                              "\"gradient_gbit_s\":%.4f,\"ns_per_packet_core\":%.1f,"
                              "\"of_ceiling\":%.4f,\"cpu_seconds_per_gb\":%.4f}",
                              rows.empty() ? "" : ",", name, cores, workers, pps,
                              pps * XAGG_CHUNK_BYTES * 8 / 1e9, 1e9 * cores / pps, pps / ceil_pps,
                              cores / (pps * XAGG_CHUNK_BYTES / 1e9));
                rows += row_json;
            };
            row("XDP_TX reflector (ceiling)", ceil);
            row("xagg fast path, multicast result", fast);
            row("xagg fast path, TC unicast fan-out", fanout);
            row("xaggd host parameter server", host);
            std::fflush(stdout);
        }
        std::printf("\nreproduce: %s --seconds %g --workers %u\n", argv[0], seconds, workers);
        if (!json_file.empty()) {
            std::FILE *f = std::fopen(json_file.c_str(), "w");
            if (!f)
                throw std::runtime_error("cannot write " + json_file);
            std::fprintf(f, "[%s]\n", rows.c_str());
            std::fclose(f);
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
