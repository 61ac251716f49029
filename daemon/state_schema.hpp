// SPDX-License-Identifier: MIT
// The job table's on-disk schema (state_dir/jobs.json): what a restarted xaggd needs to carry
// on, and nothing else. Versioned and separate from the control API's replies, so that renaming
// an API field never breaks crash recovery; docs/XAGGD.md ("State on disk") documents it.
//
//   {"schema": "xagg-state", "version": 2, "jobs": [ {job}, ... ]}
//
// Version 1 (before job keys) loads too, each job given a fresh key; so does the bare array of
// jobs xagg 0.1 saved (the API's job objects).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>

#include "daemon/jobs/job_table.hpp"

namespace xagg::daemon::state {

inline constexpr const char *kSchema = "xagg-state";
inline constexpr int kVersion = 2;
inline constexpr int kVersionBeforeKeys = 1;

nlohmann::json save(const std::map<uint32_t, Job> &jobs);
// Throws std::invalid_argument saying what is wrong (unknown version, a missing field).
std::map<uint32_t, Job> load(const nlohmann::json &saved);

}  // namespace xagg::daemon::state
