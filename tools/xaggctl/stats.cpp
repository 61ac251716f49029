// SPDX-License-Identifier: MIT
#include "tools/xaggctl/stats.hpp"

namespace xagg::ctl {
namespace {

using nlohmann::json;

double rate(uint64_t before, uint64_t after, double seconds)
{
    return after < before || seconds <= 0 ? 0.0 : static_cast<double>(after - before) / seconds;
}

// One path's totals and rates.
json path_frame(const std::map<std::string, uint64_t> &before,
                const std::map<std::string, uint64_t> &after, const api::PerPath &bytes_before,
                const api::PerPath &bytes_after, const api::PerPath &chunks_before,
                const api::PerPath &chunks_after, bool fast, double seconds)
{
    json counters = json::object(), rates = json::object();
    for (const auto &[name, total] : after) {
        counters[name] = total;
        const auto was = before.find(name);
        rates[name] = rate(was == before.end() ? 0 : was->second, total, seconds);
    }
    const auto on = [fast](const api::PerPath &p) { return fast ? p.fast : p.host; };
    return {{"counters", counters},
            {"rates", rates},
            {"aggregated_bytes", on(bytes_after)},
            {"aggregated_gbit_per_s", rate(on(bytes_before), on(bytes_after), seconds) * 8 / 1e9},
            {"chunks_completed", on(chunks_after)},
            {"chunks_completed_per_s", rate(on(chunks_before), on(chunks_after), seconds)}};
}

}  // namespace

json stats_frame(const api::StatsReply &before, const api::StatsReply &after, double seconds)
{
    return {{"interval_seconds", seconds},
            {"uptime_seconds", after.uptime_seconds},
            {"fast", path_frame(before.counters, after.counters, before.aggregated_bytes,
                                after.aggregated_bytes, before.chunks_completed,
                                after.chunks_completed, true, seconds)},
            {"host", path_frame(before.host_counters, after.host_counters, before.aggregated_bytes,
                                after.aggregated_bytes, before.chunks_completed,
                                after.chunks_completed, false, seconds)}};
}

}  // namespace xagg::ctl
