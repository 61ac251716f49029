// SPDX-License-Identifier: MIT
#include "daemon/metrics.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <stdexcept>

namespace xagg::daemon {
namespace {

// One metric family: HELP and TYPE once, then its samples.
class Family {
public:
    Family(std::ostringstream &out, const char *name, const char *type, const char *help)
        : out_(out), name_(name)
    {
        out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
    }
    Family &sample(const std::string &labels, double value)
    {
        out_ << name_ << (labels.empty() ? "" : "{" + labels + "}") << " " << value << "\n";
        return *this;
    }
    Family &sample(const std::string &labels, uint64_t value)
    {
        out_ << name_ << (labels.empty() ? "" : "{" + labels + "}") << " " << value << "\n";
        return *this;
    }

private:
    std::ostringstream &out_;
    const char *name_;
};

// A label value as the exposition format writes it: backslash, quote and newline escaped.
std::string label_value(const std::string &v)
{
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"')
            out += '\\';
        out += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    return out;
}

// A job's label. Not `job`: Prometheus gives every scraped series the scrape config's `job`
// label, and a target's own `job` label is renamed `exported_job` on the way in.
std::string job_label(uint32_t id)
{
    return "xagg_job=\"" + std::to_string(id) + "\"";
}

}  // namespace

std::string render_metrics(const MetricsSnapshot &s)
{
    std::ostringstream out;
    {
        Family f(out, "xagg_packets_total", "counter",
                 "Packets by path (fast: XDP, host: parameter server) and outcome.");
        for (const auto &[path, c] : {std::pair{"fast", &s.fast}, std::pair{"host", &s.host}})
            for (int i = 0; i < XAGG_CNT_MAX; i++)
                if (counts_packets(i))
                    f.sample(std::string("path=\"") + path + "\",outcome=\"" +
                                 counter_name(static_cast<xagg_counter>(i)) + "\"",
                             (*c)[i]);
    }
    Family(out, "xagg_fanout_copies_total", "counter",
           "Unicast copies of results sent by the fan-out delivery.")
        .sample("path=\"fast\"", s.fast[XAGG_CNT_FANOUT_COPIES])
        .sample("path=\"host\"", s.host[XAGG_CNT_FANOUT_COPIES]);
    Family(out, "xagg_fanout_failed_total", "counter",
           "Unicast copies of results that could not be made.")
        .sample("path=\"fast\"", s.fast[XAGG_CNT_FANOUT_FAILED])
        .sample("path=\"host\"", s.host[XAGG_CNT_FANOUT_FAILED]);
    Family(out, "xagg_aggregated_bytes_total", "counter",
           "Gradient bytes added into sums (4 per value of every contribution added).")
        .sample("path=\"fast\"", summed_bytes(s.fast))
        .sample("path=\"host\"", summed_bytes(s.host));
    Family(out, "xagg_ecn_marked_total", "counter",
           "Contributions added that the network marked CE (ECN) on their way here.")
        .sample("path=\"fast\"", s.fast[XAGG_CNT_CE_MARKED])
        .sample("path=\"host\"", s.host[XAGG_CNT_CE_MARKED]);
    Family(out, "xagg_chunks_completed_total", "counter",
           "Chunk-rounds whose sum was completed and sent.")
        .sample("path=\"fast\"", completions(s.fast))
        .sample("path=\"host\"", completions(s.host));
    Family(out, "xagg_jobs", "gauge", "Jobs registered.").sample("", uint64_t{s.jobs.size()});
    {
        Family f(out, "xagg_job_members", "gauge", "Members joined, per job.");
        for (const auto &j : s.jobs)
            f.sample(job_label(j.id), uint64_t{j.members.size()});
    }
    {
        Family f(out, "xagg_job_workers", "gauge", "Workers a job was created for.");
        for (const auto &j : s.jobs)
            f.sample(job_label(j.id), uint64_t{j.workers});
    }
    {
        Family f(out, "xagg_job_chunks", "gauge",
                 "Chunks of a job's gradient (of its chunk size), by the path that serves them.");
        for (const auto &j : s.jobs) {
            std::string job = job_label(j.id);
            f.sample(job + ",path=\"fast\"", uint64_t{j.region_positions / j.parts()});
            f.sample(job + ",path=\"host\"",
                     uint64_t{(j.positions - j.region_positions) / j.parts()});
        }
    }
    {
        Family f(out, "xagg_straggler_events_total", "counter",
                 "Chunk-rounds left partial longer than the job's timeout.");
        for (const auto &[job, n] : s.straggler_events)
            f.sample(job_label(job), n);
    }
    {
        Family f(out, "xagg_evictions_total", "counter",
                 "Ranks removed from a job by its evict straggler policy (or over the API).");
        for (const auto &j : s.jobs)
            f.sample(job_label(j.id), j.evictions);
    }
    {
        Family f(out, "xagg_job_evicted_ranks", "gauge",
                 "Ranks of a job currently evicted: its results carry the others' sums.");
        for (const auto &j : s.jobs)
            f.sample(job_label(j.id), uint64_t(__builtin_popcountll(j.evicted)));
    }
    uint64_t slot_bytes = 2 * sizeof(xagg_slot);
    Family(out, "xagg_fastpath_memory_bytes", "gauge",
           "Fast-path map memory for chunk slots: capacity, and assigned to jobs.")
        .sample("state=\"capacity\"", uint64_t{s.capacity_positions} * slot_bytes)
        .sample("state=\"used\"", uint64_t{s.used_positions} * slot_bytes);
    Family(out, "xagg_api_requests_total", "counter", "Control API requests.")
        .sample("", s.api_requests);
    Family(out, "xagg_api_request_errors_total", "counter", "Control API requests refused.")
        .sample("", s.api_errors);
    Family(out, "xagg_control_connections_total", "counter",
           "Control API connections accepted (Unix socket and TCP).")
        .sample("", s.control_events[static_cast<size_t>(ControlEvent::accepted)]);
    Family(out, "xagg_control_unauthorized_total", "counter",
           "Control API requests refused for a missing or wrong token (TCP).")
        .sample("", s.control_events[static_cast<size_t>(ControlEvent::unauthorized)]);
    Family(out, "xagg_control_forbidden_total", "counter",
           "Control API requests refused because a tenant's token asked for another tenant's job "
           "or a node-wide operation (TCP).")
        .sample("", s.api_forbidden);
    Family closed(out, "xagg_control_closed_total", "counter",
                  "Control API connections the daemon closed, by reason.");
    for (ControlEvent e : {ControlEvent::over_limit, ControlEvent::timed_out,
                           ControlEvent::oversized, ControlEvent::unauthorized_silent,
                           ControlEvent::reply_overflow, ControlEvent::tls_failed})
        closed.sample(std::string("reason=\"") + to_string(e) + "\"",
                      s.control_events[static_cast<size_t>(e)]);
    Family(out, "xagg_uptime_seconds", "gauge", "Seconds since xaggd started.")
        .sample("", s.uptime_seconds);
    Family(out, "xagg_kernel_info", "gauge",
           "Always 1: the kernel release, the fast-path variant it runs (pull, copy; none with "
           "datapath = host) and whether jumbo chunks can be served.")
        .sample("release=\"" + label_value(s.kernel.release) + "\",fastpath_variant=\"" +
                    (s.kernel.fastpath_variant.empty() ? "none" : s.kernel.fastpath_variant) +
                    "\",jumbo_chunks=\"" + (s.kernel.jumbo_refusal.empty() ? "yes" : "no") + "\"",
                uint64_t{1});
    return out.str();
}

MetricsServer::MetricsServer(const std::string &address, std::function<MetricsSnapshot()> snapshot)
    : server_(std::make_unique<httplib::Server>())
{
    size_t colon = address.rfind(':');
    if (colon == std::string::npos)
        throw std::invalid_argument("metrics_address must be HOST:PORT, not " + address);
    std::string host = address.substr(0, colon);
    int port = std::stoi(address.substr(colon + 1));
    server_->Get("/metrics", [snapshot](const httplib::Request &, httplib::Response &res) {
        res.set_content(render_metrics(snapshot()), "text/plain; version=0.0.4; charset=utf-8");
    });
    if (!server_->bind_to_port(host.c_str(), port))
        throw std::runtime_error("cannot listen for metrics on " + address);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    spdlog::info("metrics on http://{}/metrics", address);
}

MetricsServer::~MetricsServer()
{
    server_->stop();
    thread_.join();
}

}  // namespace xagg::daemon
