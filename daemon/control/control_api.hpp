// SPDX-License-Identifier: MIT
// The control API: one JSON object per line in, one per line out. Every request is validated in
// full before anything changes; a refused request changes nothing.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/control/control_server.hpp"
#include "daemon/datapath/datapath.hpp"
#include "lib/fastpath/fastpath.hpp"
#include "daemon/jobs/job_table.hpp"
#include "daemon/jobs/stragglers.hpp"
#include "daemon/node_kernel.hpp"
#include "lib/config/tenants.hpp"
#include "xagg/api.hpp"

namespace xagg::daemon {

// What `status` says about the node beyond the job table; the daemon fills it per request.
struct NodeStatus {
    std::string interface;
    std::string datapath;        // xdp | host
    std::string xdp_mode;        // configured: native | skb
    Attachment xdp;              // what the kernel runs on the interface (datapath = xdp)
    std::string control_socket;  // where the API is served
    std::string control_tcp_address;
    std::string metrics_address;
    NodeKernel kernel;
};

// Who may use the API over TCP: the admin token, and the tenants' tokens that each reach only
// their own jobs (lib/config/tenants.hpp).
struct Credentials {
    std::string admin_token;
    std::vector<Tenant> tenants;
};

class ControlApi {
public:
    // `on_change` runs after every request that changed the job table (to persist it).
    ControlApi(JobTable &jobs, Datapath &datapath, uint16_t xagg_port,
               std::function<void()> on_change, StragglerWatch *stragglers = nullptr);

    // One request line in, one response line out (without the newline). With `credentials`
    // (requests over TCP), the request must carry one of their tokens as its "token" field, and
    // a tenant's token reaches only that tenant's jobs. Without, it comes from the Unix socket,
    // whose file mode decides who may connect: it may do everything.
    ControlReply handle_line(const std::string &line, const Credentials *credentials = nullptr);
    // `tenant`: the request came with that tenant's token; null: with the admin's (or none
    // needed).
    nlohmann::json handle(const nlohmann::json &request, const Tenant *tenant = nullptr);

    // The chunk size of a job created without chunk_elems (default_chunk_elems, resolved for
    // this node's interface).
    void set_default_chunk_elems(uint32_t elems) { default_chunk_elems_ = elems; }

    // Where `status` gets the node's description; without one it reports only the job table.
    void set_node_status(std::function<NodeStatus()> node) { node_ = std::move(node); }
    double uptime_seconds() const
    {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    }

    // Evicts these ranks (the straggler watch found them due); logs each.
    void evict_ranks(uint32_t job_id, uint64_t ranks);

    // The rounds each job has completed (from the periodic slot scan). Under the benefit
    // policy a job's rank changes as it nears its end (its phase), so memory is re-divided
    // when that changes the division; the others divide only on arrival and departure.
    void note_progress(const std::map<uint32_t, uint64_t> &rounds_done);
    // Divides fast-path memory as the policy says and moves the jobs there (after a recovery
    // that brought every job to the host path); the table is saved if anything moved.
    void restore_layout();

    uint64_t requests() const { return requests_; }
    uint64_t errors() const { return errors_; }

    uint64_t forbidden() const { return forbidden_; }

private:
    // Each handler gets the request and the tenant it came from (null: the admin).
    nlohmann::json create_job(const nlohmann::json &r, const Tenant *tenant);
    nlohmann::json delete_job(const nlohmann::json &r, const Tenant *tenant);
    nlohmann::json join(const nlohmann::json &r, const Tenant *tenant);
    nlohmann::json leave(const nlohmann::json &r, const Tenant *tenant);
    nlohmann::json list_jobs(const nlohmann::json &r, const Tenant *tenant);
    nlohmann::json show_job(const nlohmann::json &r, const Tenant *tenant);
    nlohmann::json stats(const nlohmann::json &r, const Tenant *tenant);
    nlohmann::json status(const nlohmann::json &r, const Tenant *tenant);
    nlohmann::json set_log_level(const nlohmann::json &r, const Tenant *tenant);
    nlohmann::json evict(const nlohmann::json &r, const Tenant *tenant);
    // Refuses (forbidden) what a tenant's token may not do: an op that is not about one of its
    // own jobs, or a job id outside its range.
    void authorize(const std::string &op, const nlohmann::json &r, const Tenant &tenant) const;
    static bool on_this_host(in_addr addr);
    void serve_on_host_only(uint32_t id, uint32_t rank, const std::string &addr);
    // The lowest free job id in the tenant's range (its create_job without an id).
    uint32_t free_id_of(const Tenant &tenant) const;
    // Evicts in the table, the datapath and the straggler watch; throws if refused.
    const Job &apply_eviction(uint32_t job_id, uint32_t rank);
    // Applies the table's layout: every job whose region changes moves. Whether any did.
    bool rebalance();
    // How a description gets the job's round progress: read from its slots (a pass over them
    // all, costly for large jobs), known to be none (a job just created: its tag is new, so no
    // slot is its), or left out (null).
    enum class Progress { read, none_yet, omitted };
    api::Job describe(uint32_t job_id, Progress progress = Progress::read) const;

    JobTable &jobs_;
    Datapath &datapath_;
    uint16_t xagg_port_;
    std::function<void()> on_change_;
    StragglerWatch *stragglers_;
    std::function<NodeStatus()> node_;
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    uint64_t requests_ = 0, errors_ = 0, forbidden_ = 0;
    uint32_t default_chunk_elems_ = XAGG_CHUNK_ELEMS;
    std::map<uint32_t, uint64_t> rounds_done_;
};

}  // namespace xagg::daemon
