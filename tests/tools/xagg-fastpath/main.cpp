// SPDX-License-Identifier: MIT
// xagg-fastpath: attaches the XDP fast path to one interface, registers jobs and members given on
// the command line, reports the outcome counters, and detaches on SIGINT/SIGTERM. The minimal
// loader for tests and the demo; xaggd does the same and much more for production.
#include <arpa/inet.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/fastpath/fastpath.hpp"
#include "lib/sys/netns.hpp"
#include "xagg/job_key.hpp"

namespace {

std::vector<std::string> split(const std::string &s, char sep)
{
    std::vector<std::string> parts;
    std::stringstream in(s);
    std::string part;
    while (std::getline(in, part, sep))
        parts.push_back(part);
    return parts;
}

uint32_t to_u32(const std::string &s, const std::string &what)
{
    size_t used = 0;
    unsigned long v = 0;
    try {
        v = std::stoul(s, &used, 10);
    } catch (const std::exception &) {
        used = 0;
    }
    if (used != s.size() || s.empty() || v > UINT32_MAX)
        throw std::invalid_argument(what + ": '" + s + "' is not a number");
    return static_cast<uint32_t>(v);
}

in_addr to_addr(const std::string &s, const std::string &what)
{
    in_addr a{};
    if (inet_pton(AF_INET, s.c_str(), &a) != 1)
        throw std::invalid_argument(what + ": '" + s + "' is not an IPv4 address");
    return a;
}

uint16_t to_port(const std::string &s, const std::string &what)
{
    uint32_t v = to_u32(s, what);
    if (v == 0 || v > 65535)
        throw std::invalid_argument(what + ": port " + s + " is out of range");
    return static_cast<uint16_t>(v);
}

// "ID:CHUNKS:GROUP:PORT:KEY[:host|:fanout]"
xagg::JobSpec parse_job(const std::string &text)
{
    auto p = split(text, ':');
    if (p.size() != 5 && !(p.size() == 6 && (p[5] == "host" || p[5] == "fanout")))
        throw std::invalid_argument("--job '" + text +
                                    "': expected ID:CHUNKS:GROUP:PORT:KEY[:host|:fanout]");
    xagg::JobSpec job;
    job.id = to_u32(p[0], "job id");
    job.region_positions = to_u32(p[1], "job chunks");
    job.group = to_addr(p[2], "job group");
    if (!IN_MULTICAST(ntohl(job.group.s_addr)))
        throw std::invalid_argument("--job '" + text + "': " + p[2] + " is not a multicast group");
    job.group_port = to_port(p[3], "job group port");
    const auto key = xagg::parse_job_key(p[4]);
    if (!key)
        throw std::invalid_argument("--job '" + text + "': key " + p[4] +
                                    " is not 16 hex digits, not all zero");
    job.key = *key;
    job.host_path = p.size() == 6 && p[5] == "host";
    job.fanout = p.size() == 6 && p[5] == "fanout";
    job.tag = job.id;  // one process owns the maps: the id tells its jobs' slots apart
    return job;
}

struct MemberSpec {
    uint32_t job, rank;
    in_addr addr;
    uint16_t port;
};

// "JOB:RANK:ADDR:PORT"
MemberSpec parse_member(const std::string &text)
{
    auto p = split(text, ':');
    if (p.size() != 4)
        throw std::invalid_argument("--member '" + text + "': expected JOB:RANK:ADDR:PORT");
    MemberSpec m{to_u32(p[0], "member job"), to_u32(p[1], "member rank"),
                 to_addr(p[2], "member address"), to_port(p[3], "member port")};
    if (m.rank >= XAGG_MAX_WORKERS)
        throw std::invalid_argument("--member '" + text + "': rank must be below 64");
    return m;
}

std::string counters_json(const xagg::Counters &c)
{
    std::string out = "{";
    for (int i = 0; i < XAGG_CNT_MAX; i++) {
        out += (i ? ", \"" : "\"") + std::string(xagg::counter_name(static_cast<xagg_counter>(i))) +
               "\": " + std::to_string(c[i]);
    }
    return out + "}";
}

// Waits for SIGINT/SIGTERM, or `seconds` if positive; logs counters every `interval` seconds.
void wait_for_stop(const xagg::FastPath &fp, double seconds, double interval)
{
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
        double wait = interval > 0 ? interval : 3600;
        if (seconds > 0) {
            double left =
                std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
            if (left <= 0)
                return;
            wait = std::min(wait, left);
        }
        timespec ts{
            static_cast<time_t>(wait),
            static_cast<long>((wait - static_cast<double>(static_cast<time_t>(wait))) * 1e9)};
        if (sigtimedwait(&stop, nullptr, &ts) > 0)
            return;
        if (interval > 0)
            spdlog::info("counters {}", counters_json(fp.counters()));
    }
}

}  // namespace

int main(int argc, char **argv)
{
    CLI::App app{
        "Attach the xagg XDP fast path to an interface, register jobs and members, report the "
        "outcome counters and detach on SIGINT/SIGTERM.\n\n"
        "Example:\n"
        "  xagg-fastpath --interface eth0 --job 1:1024:239.1.1.1:9872:5ec2e79a41b03d16 \\\n"
        "      --member 1:0:10.0.0.1:9872 --member 1:1:10.0.0.2:9872"};
    std::string ifname, netns, mode = "native", stats_file, ready_file;
    xagg::FastPathConfig config;
    std::vector<std::string> job_texts, member_texts;
    double seconds = 0, interval = 0;
    app.add_option("-i,--interface", ifname, "Interface to attach to")->required();
    app.add_option("--netns", netns, "Network namespace (of `ip netns`) the interface is in");
    app.add_option("--mode", mode, "XDP attach mode")->check(CLI::IsMember({"native", "skb"}));
    app.add_option("--port", config.port, "UDP port of xagg traffic")->default_val(config.port);
    app.add_option("--max-positions", config.max_positions, "Fast-path capacity in chunks")
        ->default_val(config.max_positions)
        ->check(CLI::Range(1u, 1u << 30));
    app.add_option("--max-jobs", config.max_jobs, "Capacity of the job table")
        ->default_val(config.max_jobs)
        ->check(CLI::Range(1u, 65536u));
    app.add_option("--job", job_texts,
                   "A job: ID:CHUNKS:GROUP:PORT:KEY[:host|:fanout] (repeatable)");
    app.add_option("--member", member_texts, "A member: JOB:RANK:ADDR:PORT (repeatable)");
    app.add_option("--duration", seconds, "Detach after this many seconds (0: on signal only)");
    app.add_option("--stats-interval", interval, "Log counters every this many seconds");
    app.add_option("--stats-file", stats_file, "Write the final counters as JSON to this file");
    app.add_option("--ready-file", ready_file, "Create this file once attached and registered");
    CLI11_PARSE(app, argc, argv);

    // Signals are handled synchronously by sigtimedwait; block them before anything can race.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop, nullptr);

    try {
        std::vector<xagg::JobSpec> jobs;
        for (const auto &t : job_texts)
            jobs.push_back(parse_job(t));
        std::vector<MemberSpec> members;
        for (const auto &t : member_texts)
            members.push_back(parse_member(t));
        // Regions are laid out one after another; each job's members bitmap is what was given.
        uint32_t next_base = 0;
        std::map<uint32_t, xagg::JobSpec *> by_id;
        for (auto &job : jobs) {
            if (!by_id.emplace(job.id, &job).second)
                throw std::invalid_argument("job " + std::to_string(job.id) + " given twice");
            job.region_base = next_base;
            next_base += job.region_positions;
        }
        if (next_base > config.max_positions)
            throw std::invalid_argument("jobs need " + std::to_string(next_base) +
                                        " chunks, more than --max-positions " +
                                        std::to_string(config.max_positions));
        for (const auto &m : members) {
            auto it = by_id.find(m.job);
            if (it == by_id.end())
                throw std::invalid_argument("member of unknown job " + std::to_string(m.job));
            it->second->members |= 1ull << m.rank;
        }

        if (!netns.empty())
            xagg::sys::enter_netns(netns);
        xagg::FastPath fp(config);
        fp.attach(ifname, mode == "native" ? xagg::AttachMode::native : xagg::AttachMode::skb);
        spdlog::info("attached to {} in {} mode, port {}, capacity {} chunks", ifname, mode,
                     config.port, config.max_positions);
        for (const auto &job : jobs) {
            fp.clear_region(job.region_base, job.region_positions);
            fp.put_job(job);
            spdlog::info("job {}: {} members, chunks [0, {}) at slots base {}{}", job.id,
                         __builtin_popcountll(job.members), job.region_positions, job.region_base,
                         job.host_path ? ", host path"
                         : job.fanout  ? ", unicast fan-out"
                                       : "");
        }
        for (const auto &m : members)
            fp.put_member(m.job, m.rank, m.addr, m.port);
        if (!ready_file.empty())
            std::ofstream(ready_file) << "ready\n";

        wait_for_stop(fp, seconds, interval);

        xagg::Counters final_counters = fp.counters();
        fp.detach();
        spdlog::info("detached from {}; counters {}", ifname, counters_json(final_counters));
        if (!stats_file.empty())
            std::ofstream(stats_file) << counters_json(final_counters) << "\n";
    } catch (const std::exception &e) {
        spdlog::error("{}", e.what());
        return 1;
    }
    return 0;
}
