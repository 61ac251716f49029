// SPDX-License-Identifier: MIT
// Tenant tokens for the control API over TCP (docs/XAGGD.md, "Tokens"). The admin token
// (control_token_file) may do everything; a tenant's token may create, join, leave, evict in,
// show and delete only the jobs whose ids lie in its range, and list only those. A job's id
// is what names its owner, so ownership needs no state of its own: it holds across restarts,
// recoveries and the nodes of a cluster, which all read the same file.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace xagg::daemon {

struct Tenant {
    std::string name;        // [a-z0-9_-], at most 32 characters: what logs and errors say
    uint32_t first_job = 0;  // the ids of its jobs: first_job..last_job, within 1..65535
    uint32_t last_job = 0;
    std::string token;  // at least 16 characters, unlike every other token
    bool owns(uint64_t job) const { return job >= first_job && job <= last_job; }
    std::string jobs_text() const;  // "100-199"
};

// control_tenants_file: one tenant a line, "NAME FIRST-LAST TOKEN"; '#' starts a comment. A
// file anyone may read is refused (as the admin token's is), and so are duplicate names,
// ranges that overlap and tokens that repeat or equal `admin_token`. Throws std::runtime_error
// naming the file and line.
std::vector<Tenant> read_tenants_file(const std::string &path, const std::string &admin_token);
// The same rules over text already in hand (what xaggctl is about to write), errors named
// `source`:LINE; the file's mode is the caller's to check.
std::vector<Tenant> parse_tenants(std::istream &in, const std::string &source,
                                  const std::string &admin_token);

// One tenant's line of that file.
std::string tenant_line(const Tenant &tenant);

// "FIRST-LAST" (or one id) as job ids; throws std::invalid_argument saying what is wrong.
void parse_job_range(const std::string &text, uint32_t &first, uint32_t &last);

// A fresh token: 32 hex digits, 128 bits from the kernel's random pool (getrandom).
std::string new_token();

}  // namespace xagg::daemon
