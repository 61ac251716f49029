// SPDX-License-Identifier: MIT
#include "tools/xaggctl/render.hpp"

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

// A JSON array of ranks as "0,1,2", or "-" when empty.
std::string rank_list(const json &ranks)
{
    std::string out;
    for (const auto &r : ranks) {
        if (!out.empty())
            out += ',';
        out += r.dump();
    }
    return out.empty() ? "-" : out;
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

std::string render_status(const json &s)
{
    Fields f;
    std::string head = "xaggd " + text(s.at("version")) + ", pid " + text(s.at("pid")) + ", up " +
                       human_duration(s.at("uptime_seconds").get<double>());
    if (s.contains("interface")) {
        f.add("interface", text(s["interface"]) + " (datapath " + text(s["datapath"]) + ")");
        const json &x = s["xdp"];
        if (x.is_null())
            f.add("XDP", "not used: the host parameter server serves every job");
        else if (x["attached"].get<bool>())
            f.add("XDP",
                  text(x["mode"]) + " mode, program id " + text(x["prog_id"]) + ", attached");
        else
            f.add("XDP", "NOT ATTACHED: the kernel reports mode " + text(x["mode"]) +
                             ", program id " + text(x["prog_id"]) +
                             " (configured: " + text(x["configured_mode"]) + ")");
    }
    f.add("port", text(s.at("port")) + "/udp");
    if (s.contains("control")) {
        std::string tcp = text(s["control"]["tcp_address"]);
        f.add("control", text(s["control"]["socket"]) + (tcp.empty() ? "" : ", tcp " + tcp));
        std::string m = text(s["metrics_address"]);
        f.add("metrics", m.empty() ? "off" : "http://" + m + "/metrics");
    }
    f.add("jobs", text(s.at("jobs")) + " (" + text(s.at("members")) + " members joined)");
    const json &mem = s.at("memory");
    f.add("memory", text(mem["used_chunks"]) + " of " + text(mem["capacity_chunks"]) +
                        " fast-path chunks assigned (" +
                        human_bytes(mem["used_bytes"].get<double>()) + " of " +
                        human_bytes(mem["capacity_bytes"].get<double>()) + " of slot maps), " +
                        "divided by policy " + mem.value("policy", std::string("?")));
    uint64_t fast = s.at("chunks")["fast"], host = s.at("chunks")["host"];
    f.add("chunks", text(fast) + " on the fast path (" + percent(fast, fast + host) + "), " +
                        text(host) + " on the host path (" + percent(host, fast + host) + ")");
    uint64_t fb = s.at("aggregated_bytes")["fast"], hb = s.at("aggregated_bytes")["host"];
    f.add("summed", human_bytes(static_cast<double>(fb)) + " of gradient on the fast path (" +
                        percent(fb, fb + hb) + "), " + human_bytes(static_cast<double>(hb)) +
                        " on the host path (" + percent(hb, fb + hb) + ")");
    return head + "\n" + f.str();
}

std::string render_job_list(const json &jobs)
{
    if (jobs.empty())
        return "no jobs\n";
    Table t({"JOB", "WORKERS", "MEMBERS", "CHUNKS", "FAST", "HOST", "POLICY", "DELIVERY", "GROUP",
             "STRAGGLERS", "EVICTED"});
    for (const auto &j : jobs)
        t.add({text(j["id"]), text(j["workers"]), std::to_string(j["members"].size()),
               text(j["chunks"]), text(j["fast_path_chunks"]), text(j["host_path_chunks"]),
               text(j["policy"]), j["fanout"].get<bool>() ? "fanout" : "multicast",
               text(j["group"]) + ":" + text(j["group_port"]),
               text(j.value("straggler_events_total", json(0))), rank_list(j["evicted_ranks"])});
    return t.str();
}

std::string render_job(const json &j)
{
    std::string out = "job " + text(j["id"]) + ": " + text(j["workers"]) + " workers, " +
                      text(j["gradient_elems"]) + " values (" + text(j["chunks"]) + " chunks)\n";
    Fields f;
    f.add("policy",
          text(j["policy"]) + " (straggler timeout " + text(j["timeout_ms"]) + " ms" +
              (j["policy"] == "evict" ? ", evict after " + text(j["evict_after"]) + " timeouts)"
                                      : ")"));
    f.add("delivery", std::string(j["fanout"].get<bool>() ? "unicast fan-out" : "multicast") +
                          " to " + text(j["group"]) + ":" + text(j["group_port"]));
    uint64_t fast = j["fast_path_chunks"], base = j["region_base"];
    f.add(
        "memory",
        (j["host_path"].get<bool>() ? std::string("host path only (configured); ")
                                    : std::string()) +
            text(fast) + " chunks on the fast path" +
            (fast ? " (slots " + std::to_string(base) + "-" + std::to_string(base + fast - 1) + ")"
                  : "") +
            ", " + text(j["host_path_chunks"]) + " on the host path; weight " + text(j["weight"]));
    if (j.contains("progress") && !j["progress"].is_null()) {
        const json &p = j["progress"];
        if (p["newest_round"].is_null())
            f.add("progress", "no contribution yet");
        else
            f.add("progress",
                  "round " + text(p["newest_round"]) + ": " + text(p["chunks_complete_at_newest"]) +
                      " of " + text(j["chunks"]) + " chunks complete, " +
                      text(p["chunks_in_flight"]) + " in flight, " + text(p["chunks_not_started"]) +
                      " not started; oldest chunk at round " + text(p["oldest_round"]));
    }
    f.add("evicted",
          rank_list(j["evicted_ranks"]) + " (" + text(j["evictions"]) + " evictions so far)");
    out += f.str();
    out += "members: " + std::to_string(j["members"].size()) + " of " + text(j["workers"]) + "\n";
    if (!j["members"].empty()) {
        Table m({"RANK", "ADDRESS", "PORT"});
        for (const auto &mem : j["members"])
            m.add({text(mem["rank"]), text(mem["addr"]), text(mem["port"])});
        out += m.str("  ");
    }
    const json &events = j.value("straggler_events", json::array());
    out += "straggler events: " + text(j.value("straggler_events_total", json(0))) +
           (events.empty() ? "" : " (latest " + std::to_string(events.size()) + ")") + "\n";
    if (!events.empty()) {
        Table e({"CHUNK", "ROUND", "MISSING", "WAITED_MS"});
        for (const auto &ev : events)
            e.add({text(ev["chunk"]), text(ev["round"]), rank_list(ev["missing_ranks"]),
                   text(ev["waited_ms"])});
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
