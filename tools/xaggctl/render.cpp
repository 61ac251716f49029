// SPDX-License-Identifier: MIT
#include "tools/xaggctl/render.hpp"
#include "xagg/check.h"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <sstream>

namespace xagg::ctl {
namespace {

using nlohmann::json;

std::string fmt(const char *format, double v)
{
    char buf[64];
    std::snprintf(buf, sizeof(buf), format, v);
    return buf;
}

// A number, alone or with its unit ("42", "3193.7", "4.4 MiB"); not an address that happens
// to be digits and dots.
bool numeric(const std::string &cell)
{
    static const std::regex kNumber(R"(\d+(\.\d+)?( [A-Za-z/]+)?)");
    return std::regex_match(cell, kNumber);
}

std::string text(const json &v)
{
    if (v.is_string())
        return v.get<std::string>();
    if (v.is_null())
        return "-";
    return v.dump();
}

std::string percent(uint64_t part, uint64_t whole)
{
    return whole ? fmt("%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole))
                 : "-";
}

// "key   value" lines, the keys padded to one width.
class Fields {
public:
    Fields &add(const std::string &key, const std::string &value)
    {
        lines_.emplace_back(key, value);
        return *this;
    }
    std::string str() const
    {
        size_t width = 0;
        for (const auto &[k, v] : lines_)
            width = std::max(width, k.size());
        std::string out;
        for (const auto &[k, v] : lines_)
            out += k + std::string(width - k.size() + 2, ' ') + v + "\n";
        return out;
    }

private:
    std::vector<std::pair<std::string, std::string>> lines_;
};

}  // namespace

std::string Table::str(const std::string &indent) const
{
    // A column whose every cell below the header is a number is right-aligned, header included.
    std::vector<size_t> width;
    std::vector<bool> right;
    for (size_t r = 0; r < rows_.size(); r++)
        for (size_t c = 0; c < rows_[r].size(); c++) {
            if (c >= width.size()) {
                width.resize(c + 1, 0);
                right.resize(c + 1, rows_.size() > 1);
            }
            width[c] = std::max(width[c], rows_[r][c].size());
            if (r > 0 && !numeric(rows_[r][c]))
                right[c] = false;
        }
    std::string out;
    for (const auto &row : rows_) {
        std::string line = indent;
        for (size_t c = 0; c < row.size(); c++) {
            std::string pad(width[c] - row[c].size(), ' ');
            line += right[c] ? pad + row[c] : row[c] + pad;
            line += "  ";
        }
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        out += line + "\n";
    }
    return out;
}

std::string human_bytes(double bytes)
{
    static const char *kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024)
        return fmt("%.0f B", bytes);
    int u = -1;
    while (bytes >= 1024 && u < 3) {
        bytes /= 1024;
        u++;
    }
    return fmt("%.1f ", bytes) + kUnits[u];
}

std::string human_bits_per_second(double bits)
{
    static const char *kUnits[] = {"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"};
    int u = 0;
    while (bits >= 1000 && u < 4) {
        bits /= 1000;
        u++;
    }
    return fmt(u ? "%.2f " : "%.0f ", bits) + kUnits[u];
}

std::string human_duration(double seconds)
{
    auto s = static_cast<uint64_t>(seconds);
    uint64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;
    s %= 60;
    std::string out;
    if (d)
        out += std::to_string(d) + "d ";
    if (d || h)
        out += std::to_string(h) + "h ";
    if (d || h || m)
        out += std::to_string(m) + "m ";
    return out + std::to_string(s) + "s";
}

std::string render_status(const api::StatusReply &s)
{
    if (!s.details)  // what a tenant's token is told
        return "xaggd " + s.brief.version + ", port " + std::to_string(s.brief.port) +
               "/udp\n(a tenant's token: the node's details take the admin token)\n";
    const api::StatusDetails &d = *s.details;
    Fields f;
    std::string head = "xaggd " + s.brief.version + ", pid " + std::to_string(d.pid) + ", up " +
                       human_duration(d.uptime_seconds);
    if (d.node) {
        const api::StatusNode &n = *d.node;
        f.add("interface", n.interface + " (datapath " + n.datapath + ")");
        if (!n.xdp)
            f.add("XDP", "not used: the host parameter server serves every job");
        else if (n.xdp->attached)
            f.add("XDP", n.xdp->mode + " mode, program id " + std::to_string(n.xdp->prog_id) +
                             ", attached");
        else
            f.add("XDP", "NOT ATTACHED: the kernel reports mode " + n.xdp->mode + ", program id " +
                             std::to_string(n.xdp->prog_id) +
                             " (configured: " + n.xdp->configured_mode + ")");
        if (n.kernel) {
            const api::StatusKernel &k = *n.kernel;
            f.add("kernel", k.release +
                                (k.fastpath_variant ? ", fast path variant " + *k.fastpath_variant
                                                    : std::string()) +
                                ", jumbo chunks " +
                                (k.jumbo_chunks ? std::string("yes")
                                                : "no (" + k.jumbo_refused_because + ")"));
        }
    }
    f.add("port", std::to_string(s.brief.port) + "/udp");
    if (d.default_chunk_elems)
        f.add("new jobs", std::to_string(*d.default_chunk_elems) +
                              "-value chunks unless they say (default_chunk_elems)");
    if (d.node) {
        const api::StatusNode &n = *d.node;
        f.add("control",
              n.control_socket +
                  (n.control_tcp_address.empty() ? "" : ", tcp " + n.control_tcp_address));
        f.add("metrics",
              n.metrics_address.empty() ? "off" : "http://" + n.metrics_address + "/metrics");
    }
    f.add("jobs", std::to_string(d.jobs) + " (" + std::to_string(d.members) + " members joined)");
    const api::StatusMemory &mem = d.memory;
    f.add("memory", std::to_string(mem.used_positions) + " of " +
                        std::to_string(mem.capacity_positions) +
                        " fast-path slot positions assigned (" +
                        human_bytes(static_cast<double>(mem.used_bytes)) + " of " +
                        human_bytes(static_cast<double>(mem.capacity_bytes)) + " of slot maps), " +
                        "divided by policy " + (mem.policy.empty() ? "?" : mem.policy));
    const uint64_t fast = d.positions.fast, host = d.positions.host;
    f.add("positions", std::to_string(fast) + " on the fast path (" + percent(fast, fast + host) +
                           "), " + std::to_string(host) + " on the host path (" +
                           percent(host, fast + host) + ")");
    const uint64_t fb = d.aggregated_bytes.fast, hb = d.aggregated_bytes.host;
    f.add("summed", human_bytes(static_cast<double>(fb)) + " of gradient on the fast path (" +
                        percent(fb, fb + hb) + "), " + human_bytes(static_cast<double>(hb)) +
                        " on the host path (" + percent(hb, fb + hb) + ")");
    return head + "\n" + f.str();
}

// Ranks as "0,1,2", or "-" when none.
std::string rank_text(const std::vector<uint32_t> &ranks)
{
    if (ranks.empty())
        return "-";
    std::string out;
    for (uint32_t r : ranks) {
        if (!out.empty())
            out += ',';
        out += std::to_string(r);
    }
    return out;
}

std::string render_job_list(const std::vector<api::Job> &jobs)
{
    if (jobs.empty())
        return "no jobs\n";
    Table t({"JOB", "WORKERS", "MEMBERS", "CHUNKS", "FAST", "HOST", "POLICY", "DELIVERY", "GROUP",
             "STRAGGLERS", "EVICTED"});
    for (const api::Job &j : jobs)
        t.add({std::to_string(j.id), std::to_string(j.workers), std::to_string(j.members.size()),
               std::to_string(j.chunks), std::to_string(j.fast_path_chunks),
               std::to_string(j.host_path_chunks), j.policy, j.fanout ? "fanout" : "multicast",
               j.group + ":" + std::to_string(j.group_port),
               std::to_string(j.straggler_events_total), rank_text(j.evicted_ranks)});
    return t.str();
}

std::string render_job(const api::Job &j)
{
    std::string out = "job " + std::to_string(j.id) + ": " + std::to_string(j.workers) +
                      " workers, " + std::to_string(j.gradient_elems) + " values (" +
                      std::to_string(j.chunks) + " chunks of " + std::to_string(j.chunk_elems) +
                      ")\n";
    Fields f;
    f.add("policy",
          j.policy + " (straggler timeout " + std::to_string(j.timeout_ms) + " ms" +
              (j.policy == "evict" ? ", evict after " + std::to_string(j.evict_after) + " timeouts)"
                                   : ")"));
    f.add("delivery", std::string(j.fanout ? "unicast fan-out" : "multicast") + " to " + j.group +
                          ":" + std::to_string(j.group_port));
    const uint64_t fast = j.fast_path_chunks, base = j.region_base;
    const uint64_t parts = xagg_chunk_parts(j.chunk_elems);
    f.add("memory", (j.host_path ? std::string("host path only (configured); ") : std::string()) +
                        std::to_string(fast) + " chunks on the fast path" +
                        (fast ? " (slot positions " + std::to_string(base) + "-" +
                                    std::to_string(base + fast * parts - 1) + ")"
                              : "") +
                        ", " + std::to_string(j.host_path_chunks) + " on the host path; weight " +
                        text(json(j.weight)));
    if (j.progress) {
        const api::Progress &p = *j.progress;
        if (!p.newest_round)
            f.add("progress", "no contribution yet");
        else
            f.add("progress", "round " + std::to_string(*p.newest_round) + ": " +
                                  std::to_string(p.chunks_complete_at_newest) + " of " +
                                  std::to_string(j.chunks) + " chunks complete, " +
                                  std::to_string(p.chunks_in_flight) + " in flight, " +
                                  std::to_string(p.chunks_not_started) +
                                  " not started; oldest chunk at round " +
                                  std::to_string(p.oldest_round.value_or(*p.newest_round)));
    }
    f.add("evicted",
          rank_text(j.evicted_ranks) + " (" + std::to_string(j.evictions) + " evictions so far)");
    out += f.str();
    out +=
        "members: " + std::to_string(j.members.size()) + " of " + std::to_string(j.workers) + "\n";
    if (!j.members.empty()) {
        Table m({"RANK", "ADDRESS", "PORT"});
        for (const api::Member &mem : j.members)
            m.add({std::to_string(mem.rank), mem.addr, std::to_string(mem.port)});
        out += m.str("  ");
    }
    const auto &events = j.straggler_events;
    out += "straggler events: " + std::to_string(j.straggler_events_total) +
           (events.empty() ? "" : " (latest " + std::to_string(events.size()) + ")") + "\n";
    if (!events.empty()) {
        Table e({"CHUNK", "ROUND", "MISSING", "WAITED_MS"});
        for (const api::StragglerEvent &ev : events)
            e.add({std::to_string(ev.chunk), std::to_string(ev.round), rank_text(ev.missing_ranks),
                   std::to_string(ev.waited_ms)});
        out += e.str("  ");
    }
    return out;
}

std::string render_stats(const json &frame, bool all)
{
    const json &fast = frame.at("fast"), &host = frame.at("host");
    std::string out = "over the last " + fmt("%.2f", frame["interval_seconds"].get<double>()) +
                      " s (xaggd up " + human_duration(frame["uptime_seconds"].get<double>()) +
                      ")\n";
    Table t({"", "FAST", "FAST/S", "HOST", "HOST/S"});
    auto per_s = [](const json &v) { return fmt("%.1f", v.get<double>()); };
    t.add({"gradient summed", human_bytes(fast["aggregated_bytes"].get<double>()),
           human_bits_per_second(fast["aggregated_gbit_per_s"].get<double>() * 1e9),
           human_bytes(host["aggregated_bytes"].get<double>()),
           human_bits_per_second(host["aggregated_gbit_per_s"].get<double>() * 1e9)});
    t.add({"chunks completed", text(fast["chunks_completed"]),
           per_s(fast["chunks_completed_per_s"]), text(host["chunks_completed"]),
           per_s(host["chunks_completed_per_s"])});
    for (const auto &[name, total] : fast["counters"].items()) {
        const json &host_total = host["counters"].at(name);
        if (!all && total == 0 && host_total == 0)
            continue;
        t.add({name, text(total), per_s(fast["rates"][name]), text(host_total),
               per_s(host["rates"][name])});
    }
    return out + t.str();
}

}  // namespace xagg::ctl
