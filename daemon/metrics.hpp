// SPDX-License-Identifier: MIT
// Prometheus metrics: the exposition text (a pure function of a snapshot, unit-tested with
// promtool) and the HTTP endpoint that serves it. Debian ships no C++ Prometheus client, so the
// text format (small, stable, documented by Prometheus) is written here and checked by promtool.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/control/control_server.hpp"
#include "daemon/jobs/job_table.hpp"
#include "daemon/node_kernel.hpp"
#include "xagg/counters.hpp"

namespace httplib {
class Server;
}

namespace xagg::daemon {

struct MetricsSnapshot {
    Counters fast{};
    Counters host{};
    std::vector<Job> jobs;
    uint32_t capacity_positions = 0;
    uint32_t used_positions = 0;
    uint64_t api_requests = 0;
    uint64_t api_errors = 0;
    uint64_t api_forbidden = 0;  // of those, a tenant's token beyond its own jobs
    double uptime_seconds = 0;
    std::map<uint32_t, uint64_t> straggler_events;  // by job
    ControlEventCounts control_events{};            // the control API's transport
    NodeKernel kernel;
};

std::string render_metrics(const MetricsSnapshot &s);

// Serves GET /metrics on host:port from a thread of its own; `snapshot` is called per scrape.
class MetricsServer {
public:
    MetricsServer(const std::string &address, std::function<MetricsSnapshot()> snapshot);
    ~MetricsServer();
    MetricsServer(const MetricsServer &) = delete;
    MetricsServer &operator=(const MetricsServer &) = delete;

private:
    std::unique_ptr<httplib::Server> server_;
    std::thread thread_;
};

}  // namespace xagg::daemon
