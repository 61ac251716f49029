// SPDX-License-Identifier: MIT
// xaggctl's command tree (CLI11) and what each command does. main() only parses and maps
// failures to exit codes; the tree is also what the bash completion is generated from.
#pragma once

#include <functional>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/control/control_client.hpp"
#include "xagg/job_rules.hpp"
#include "xagg/proto.h"

namespace CLI {
class App;
}

namespace xagg::ctl {

struct Globals {
    control::Endpoint endpoint;
    std::string token_file;
    double timeout_seconds = 30;  // a re-division of GiB-sized jobs takes seconds (XAGGD.md)
    bool json = false;
};

// What the subcommands parse into (each uses its own part).
struct Args {
    uint32_t job = 0, rank = 0;  // job show/delete, worker *
    std::string addr;            // worker join
    uint16_t port = 0;
    struct {
        uint32_t id = 0, workers = 0, timeout_ms = job_rules::kDefaultTimeoutMs,
                 evict_after = job_rules::kDefaultEvictAfter;
        uint64_t elems = 0, iterations = 0;
        std::string policy = "wait";
        double weight = job_rules::kDefaultWeight;
        bool host_path = false, fanout = false;
        uint32_t chunk_elems = 0;  // 0: the daemon's default_chunk_elems
    } create;
    struct {
        double interval = 1, watch = 0;
        unsigned count = 0;
        bool all = false;
    } stats;
    struct {
        std::string etcd, prefix = "/xagg";
        uint32_t id = 0, workers = 0;
        uint64_t elems = 0, partition_chunks = job_rules::kDefaultPartitionChunks;
        uint32_t chunk_elems = XAGG_CHUNK_ELEMS;
    } cluster;
    std::string file;  // config check; token tenant/revoke: the tenants file
    struct {
        std::string dir;
        std::vector<std::string> ips, dns, tenants, clients;
        unsigned days = 825;
    } tls;
    struct {
        std::string name, jobs, admin_token_file;
    } token;
    struct {
        uint64_t elems = 0;
        uint32_t chunk_elems = 0;
        std::string dtype = "float";
    } size;             // job size
    std::string shell;  // completion
};

struct Cli {
    std::unique_ptr<CLI::App> app;
    Globals globals;
    Args args;
    // Set by the subcommand that was given; returns the exit code.
    std::function<int()> action;
};

std::unique_ptr<Cli> make_cli();

// Prints a reply: as one line of JSON (--json), or as `render` makes it for people. kOk.
int print(const Globals &g, const nlohmann::json &data, const std::function<std::string()> &render);

}  // namespace xagg::ctl
