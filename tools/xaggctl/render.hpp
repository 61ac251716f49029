// SPDX-License-Identifier: MIT
// What xaggctl prints for people: the daemon's JSON replies as aligned tables and key/value
// blocks. Pure functions of the replies, so the unit tests check them line by line.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xagg/api.hpp"

namespace xagg::ctl {

// Columns separated by two spaces, each as wide as its widest cell; numbers right-aligned.
class Table {
public:
    explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
    void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
    std::string str(const std::string &indent = "") const;

private:
    std::vector<std::vector<std::string>> rows_;
};

// 1536 -> "1.5 KiB"; below 1 KiB, "N B".
std::string human_bytes(double bytes);
// 5000 -> "5.00 kbit/s": network rates in SI units, as NICs are sold.
std::string human_bits_per_second(double bits);
// 133.2 -> "2m 13s".
std::string human_duration(double seconds);

// `status`, `job list`, `job show` and a `stats` frame (see stats.hpp) as text.
std::string render_status(const api::StatusReply &status);
std::string render_job_list(const std::vector<api::Job> &jobs);
std::string render_job(const api::Job &job);
// `all`: every counter, not only those that are not zero on either path.
std::string render_stats(const nlohmann::json &frame, bool all);

}  // namespace xagg::ctl
