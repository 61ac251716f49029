// SPDX-License-Identifier: MIT
// The outcome counters (enum xagg_counter, include/xagg/counters.h) as userspace reads them:
// one array of both paths' counts and the names logs, the control API and the metrics use.
// Header-only and free of libbpf, so the control API and metrics need no BPF headers.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "xagg/counters.h"

namespace xagg {

using Counters = std::array<uint64_t, XAGG_CNT_MAX>;

// By counter, in enum order: the name in logs, the API's "counters" objects and the metric's
// `outcome` label (docs/XAGGD.md lists them with their meaning).
inline constexpr std::array<std::string_view, XAGG_CNT_MAX> kCounterNames = {
    "pass_foreign",
    "drop_truncated",
    "drop_ip_options",
    "drop_fragment",
    "drop_bad_magic",
    "drop_bad_version",
    "drop_bad_length",
    "drop_bad_flags",
    "drop_unknown_job",
    "drop_not_member",
    "pass_host_job",
    "pass_host_overflow",
    "aggregated",
    "completed",
    "drop_duplicate",
    "resent",
    "drop_stale_round",
    "drop_bad_exponent",
    "drop_moving",
    "completed_fanout",
    "fanout_copies",
    "fanout_failed",
    "drop_bad_ip_checksum",
    "drop_bad_key",
    "drop_bad_udp_checksum",
    "drop_not_linear",
    "drop_beyond_job",
    "summed_values",
    "ce_marked",
};
static_assert(XAGG_CNT_CE_MARKED == 28 && XAGG_CNT_MAX == 29,
              "a counter was added or moved: name it in kCounterNames, in enum order");

// Name of a counter, e.g. "drop_bad_magic".
inline const char *counter_name(enum xagg_counter c)
{
    return c < XAGG_CNT_MAX ? kCounterNames[c].data() : "unknown";
}

// Whether a counter counts packets (each packet one outcome), rather than the fan-out's copies,
// the values summed or the CE marks among them.
inline constexpr bool counts_packets(int c)
{
    return c != XAGG_CNT_FANOUT_COPIES && c != XAGG_CNT_FANOUT_FAILED &&
           c != XAGG_CNT_SUMMED_VALUES && c != XAGG_CNT_CE_MARKED && c < XAGG_CNT_MAX;
}

// Whether an outcome is a contribution added into a sum (its values counted in summed_values).
inline constexpr bool adds_values(int c)
{
    return c == XAGG_CNT_AGGREGATED || c == XAGG_CNT_COMPLETED || c == XAGG_CNT_COMPLETED_FANOUT;
}

// Gradient bytes added into sums: each contribution's values, whatever its chunk size; and
// chunk-rounds completed.
inline uint64_t summed_bytes(const Counters &c)
{
    return c[XAGG_CNT_SUMMED_VALUES] * sizeof(int32_t);
}
inline uint64_t completions(const Counters &c)
{
    return c[XAGG_CNT_COMPLETED] + c[XAGG_CNT_COMPLETED_FANOUT];
}

}  // namespace xagg
