// SPDX-License-Identifier: MIT
// `xaggctl stats`: rates from two samples of the daemon's counters. A frame is the JSON that
// `stats --json` prints (schema in docs/XAGGCTL.md).
#pragma once

#include <nlohmann/json.hpp>

#include "xagg/api.hpp"

namespace xagg::ctl {

// `before` and `after` are replies of the `stats` op taken `seconds` apart (the client's clock).
// A counter that went down (its maps were re-created) counts as a rate of 0.
nlohmann::json stats_frame(const api::StatsReply &before, const api::StatsReply &after,
                           double seconds);

}  // namespace xagg::ctl
