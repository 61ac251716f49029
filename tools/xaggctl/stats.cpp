// SPDX-License-Identifier: MIT
#include "tools/xaggctl/stats.hpp"

namespace xagg::ctl {
namespace {

using nlohmann::json;

double rate(const json &before, const json &after, double seconds)
{
    uint64_t a = after.get<uint64_t>(), b = before.is_number() ? before.get<uint64_t>() : 0;
    return a < b || seconds <= 0 ? 0.0 : static_cast<double>(a - b) / seconds;
}

// One path's totals and rates; `counters_key` is where the stats reply keeps its counters.
json path_frame(const json &before, const json &after, const char *counters_key, const char *path,
                double seconds)
{
    json counters = after.at(counters_key), rates = json::object();
    for (const auto &[name, total] : counters.items())
        rates[name] = rate(before.at(counters_key).value(name, json()), total, seconds);
    const json &bytes = after.at("aggregated_bytes").at(path);
    const json &chunks = after.at("chunks_completed").at(path);
    return {
        {"counters", counters},
        {"rates", rates},
        {"aggregated_bytes", bytes},
        {"aggregated_gbit_per_s",
         rate(before.at("aggregated_bytes").at(path), bytes, seconds) * 8 / 1e9},
        {"chunks_completed", chunks},
        {"chunks_completed_per_s", rate(before.at("chunks_completed").at(path), chunks, seconds)}};
}

}  // namespace

json stats_frame(const json &before, const json &after, double seconds)
{
    return {{"interval_seconds", seconds},
            {"uptime_seconds", after.at("uptime_seconds")},
            {"fast", path_frame(before, after, "counters", "fast", seconds)},
            {"host", path_frame(before, after, "host_counters", "host", seconds)}};
}

}  // namespace xagg::ctl
