// SPDX-License-Identifier: MIT
#include "daemon/control/control_api.hpp"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <map>
#include <set>
#include <stdexcept>

#include "daemon/jobs/progress.hpp"
#include "lib/sys/mtu.hpp"
#include "xagg/job_rules.hpp"
#include "xagg/release.h"

namespace xagg::daemon {
namespace {

using nlohmann::json;

using api::Refusal;

[[noreturn]] void refuse(const std::string &why, Refusal code = Refusal::bad_request)
{
    throw api::Refused(code, why);
}

// Compares in time independent of where the strings differ, so the token cannot be guessed
// byte by byte from response times.
bool same_secret(const std::string &a, const std::string &b)
{
    unsigned char diff = a.size() != b.size();
    for (size_t i = 0; i < a.size() && i < b.size(); i++)
        diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

json refusal(Refusal code, const std::string &why)
{
    return json{{"ok", false}, {"code", api::to_string(code)}, {"error", why}};
}

// A job as the API shows it (api::Job): its own document, not the state file's.
api::Job job_view(const Job &j)
{
    api::Job v;
    v.id = j.id;
    v.workers = j.workers;
    v.gradient_elems = j.gradient_elems;
    v.chunk_elems = j.chunk_elems;
    v.chunks = j.wire_chunks();
    v.region_base = j.region_base;
    v.fast_path_chunks = j.region_positions / j.parts();
    v.host_path_chunks = (j.positions - j.region_positions) / j.parts();
    v.policy = to_string(j.policy);
    v.timeout_ms = j.timeout_ms;
    v.evict_after = j.evict_after;
    v.evicted_ranks = rank_list(j.evicted);
    v.evictions = j.evictions;
    v.weight = j.weight;
    v.iterations = j.iterations;
    v.arrival = j.arrival;
    v.tag = j.tag;
    v.host_path = j.host_path;
    v.fanout = j.fanout;
    v.group = ipv4_string(j.group);
    v.group_port = j.group_port;
    for (const auto &[rank, m] : j.members)
        v.members.push_back({rank, ipv4_string(m.addr), m.port});
    return v;
}

}  // namespace

ControlApi::ControlApi(JobTable &jobs, Datapath &datapath, uint16_t xagg_port,
                       std::function<void()> on_change, StragglerWatch *stragglers)
    : jobs_(jobs),
      datapath_(datapath),
      xagg_port_(xagg_port),
      on_change_(std::move(on_change)),
      stragglers_(stragglers)
{
}

// A job as the API shows it: the table's view plus its straggler events and progress.
api::Job ControlApi::describe(uint32_t job_id, Progress progress) const
{
    const Job *job = jobs_.find(job_id);
    if (!job)
        refuse("no job " + std::to_string(job_id), Refusal::no_such_job);
    api::Job v = job_view(*job);
    if (stragglers_) {
        for (const auto &e : stragglers_->recent(job_id))
            v.straggler_events.push_back({e.chunk, e.round, rank_list(e.missing), e.waited_ms});
        v.straggler_events_total = stragglers_->total(job_id);
    }
    switch (progress) {
    case Progress::read:
        v.progress = to_api(job_progress(*job, datapath_.slot_states(*job)));
        break;
    case Progress::none_yet: v.progress = to_api(job_progress(*job, {})); break;
    case Progress::omitted: break;
    }
    return v;
}

ControlReply ControlApi::handle_line(const std::string &line, const Credentials *credentials)
{
    if (line.size() > kMaxRequestBytes) {
        requests_++;
        errors_++;
        return {refusal(Refusal::bad_request,
                        "request larger than " + std::to_string(kMaxRequestBytes) + " bytes")
                    .dump()};
    }
    json request = json::parse(line, nullptr, false);
    const Tenant *tenant = nullptr;
    if (credentials) {
        // Nothing but a refusal for a request without a token that is known: not even a parse
        // error says more than that. Every token is compared, whichever matches, so the time
        // taken does not tell which one came close.
        bool known = false;
        if (!request.is_discarded() && request.is_object() && request.contains("token") &&
            request["token"].is_string()) {
            const std::string &given = request["token"].get_ref<const std::string &>();
            known = same_secret(given, credentials->admin_token);
            for (const Tenant &t : credentials->tenants)
                if (same_secret(given, t.token)) {
                    known = true;
                    tenant = &t;
                }
        }
        if (!known) {
            requests_++;
            errors_++;
            return {refusal(Refusal::bad_token, "missing or wrong token").dump(), true};
        }
        request.erase("token");
    }
    if (request.is_discarded()) {
        requests_++;
        errors_++;
        return {refusal(Refusal::bad_request, "not a JSON object").dump()};
    }
    return {handle(request, tenant).dump()};
}

void ControlApi::authorize(const std::string &op, const json &r, const Tenant &tenant) const
{
    static const std::set<std::string> kTenantOps = {
        api::op::create_job, api::op::delete_job, api::op::join,  api::op::leave,
        api::op::list_jobs,  api::op::show_job,   api::op::evict, api::op::status};
    if (!kTenantOps.count(op))
        refuse("tenant " + tenant.name + "'s token may not " + op + ": that takes the admin token",
               Refusal::forbidden);
    // The job named (create_job names it "id"; without one the tenant gets a free id of its
    // own), read by the rule every request's parser uses.
    const char *field = op == api::op::create_job ? "id" : "job";
    if (!r.contains(field))
        return;
    const uint32_t job = api::parse::job_id(r, field);
    if (!tenant.owns(job))
        refuse("job " + std::to_string(job) + " is not tenant " + tenant.name +
                   "'s (its jobs are " + tenant.jobs_text() + ")",
               Refusal::forbidden);
}

uint32_t ControlApi::free_id_of(const Tenant &tenant) const
{
    for (uint32_t id = tenant.first_job; id <= tenant.last_job; id++)
        if (!jobs_.find(id))
            return id;
    refuse("tenant " + tenant.name + "'s job ids " + tenant.jobs_text() + " are all taken",
           Refusal::no_room);
}

json ControlApi::handle(const json &request, const Tenant *tenant)
{
    requests_++;
    try {
        if (!request.is_object() || !request.contains("op") || !request.at("op").is_string())
            refuse("a request is a JSON object with a string 'op'");
        const std::string op = request.at("op").get<std::string>();
        // Each op, and whether it changes the job table (then the table is saved).
        struct Op {
            json (ControlApi::*handler)(const json &, const Tenant *);
            bool changes_jobs;
        };
        static const std::map<std::string, Op> kOps = {
            {api::op::create_job, {&ControlApi::create_job, true}},
            {api::op::delete_job, {&ControlApi::delete_job, true}},
            {api::op::join, {&ControlApi::join, true}},
            {api::op::leave, {&ControlApi::leave, true}},
            {api::op::list_jobs, {&ControlApi::list_jobs, false}},
            {api::op::show_job, {&ControlApi::show_job, false}},
            {api::op::stats, {&ControlApi::stats, false}},
            {api::op::status, {&ControlApi::status, false}},
            {api::op::set_log_level, {&ControlApi::set_log_level, false}},
            {api::op::evict, {&ControlApi::evict, true}},
        };
        auto it = kOps.find(op);
        if (it == kOps.end())
            refuse("unknown op '" + op + "'", Refusal::unknown_op);
        if (tenant)
            authorize(op, request, *tenant);
        json reply = (this->*it->second.handler)(request, tenant);
        if (it->second.changes_jobs && on_change_)
            on_change_();
        reply["ok"] = true;
        return reply;
    } catch (const api::Refused &e) {
        errors_++;
        if (e.code() == Refusal::forbidden) {
            forbidden_++;
            spdlog::warn("control API: refused: {}", e.what());
        }
        return refusal(e.code(), e.what());
    } catch (const std::exception &e) {  // a value the datapath would not take
        errors_++;
        return refusal(Refusal::bad_request, e.what());
    }
}

json ControlApi::create_job(const json &j, const Tenant *tenant)
{
    auto r = j.get<api::CreateJob>();
    if (!r.id && tenant)  // a tenant's job takes the lowest free id of its range
        r.id = free_id_of(*tenant);
    const Job &job = jobs_.create(r, default_chunk_elems_);
    const uint32_t id = job.id;
    try {
        datapath_.put_job(job);  // no fast-path memory yet: the host path takes it all
    } catch (...) {
        jobs_.remove(id);
        throw;
    }
    rebalance();
    return api::JobReply{describe(id, Progress::none_yet)};
}

void ControlApi::note_progress(const std::map<uint32_t, uint64_t> &rounds_done)
{
    rounds_done_ = rounds_done;
    if (jobs_.policy() != sched::Policy::benefit || rounds_done.empty())
        return;  // nothing ranked by progress: only arrivals and departures re-divide
    if (rebalance() && on_change_)
        on_change_();
}

void ControlApi::restore_layout()
{
    if (rebalance() && on_change_)
        on_change_();
}

bool ControlApi::rebalance()
{
    auto layout = jobs_.layout(rounds_done_);
    // What stays put: a job whose region keeps its base keeps the positions both layouts give it
    // where they are; one whose region moves goes through the host path whole.
    std::map<uint32_t, uint32_t> keep;
    for (const auto &[id, region] : layout) {
        const Job &job = *jobs_.find(id);
        Region now{job.region_base, job.region_positions};
        if (!(now == region) && (now.positions || region.positions))
            keep[id] = now.base == region.base ? std::min(now.positions, region.positions) : 0;
    }
    // All out first, then all in: a job's new region may be where another job's old one was.
    for (const auto &[id, kept] : keep)
        if (jobs_.find(id)->region_positions > kept)
            datapath_.shrink_fast(*jobs_.find(id), kept);
    for (const auto &[id, kept] : keep) {
        jobs_.set_region(id, layout[id]);
        datapath_.grow_fast(*jobs_.find(id), kept);
        const Job &job = *jobs_.find(id);
        spdlog::info("job {}: {} of its {} chunks on the fast path (slot positions from {})", id,
                     job.region_positions / job.parts(), job.wire_chunks(), job.region_base);
    }
    return !keep.empty();
}

const Job &ControlApi::apply_eviction(uint32_t job_id, uint32_t rank)
{
    const Job &job = jobs_.evict(job_id, rank);
    datapath_.delete_member(job_id, rank);
    datapath_.put_job(job);
    if (stragglers_)
        stragglers_->pardon(job_id, rank);
    return job;
}

void ControlApi::evict_ranks(uint32_t job_id, uint64_t bitmap)
{
    for (uint32_t rank = 0; rank < XAGG_MAX_WORKERS; rank++) {
        if (!(bitmap >> rank & 1))
            continue;
        try {
            const Job &job = apply_eviction(job_id, rank);
            spdlog::warn(
                "evicted rank {} from job {} after {} straggler timeouts; results now "
                "carry the contributions of rank(s) {}",
                rank, job_id, job.evict_after, rank_text(job.member_bitmap()));
            if (on_change_)
                on_change_();
        } catch (const std::invalid_argument &e) {
            spdlog::warn("not evicting rank {} from job {}: {}", rank, job_id, e.what());
        }
    }
}

json ControlApi::evict(const json &j, const Tenant *)
{
    const auto [id, rank] = j.get<api::Evict>();
    apply_eviction(id, rank);
    spdlog::warn("evicted rank {} from job {} over the control API", rank, id);
    return api::JobReply{describe(id)};
}

json ControlApi::delete_job(const json &j, const Tenant *)
{
    const uint32_t id = j.get<api::DeleteJob>().job;
    const Job *job = jobs_.find(id);
    if (!job)
        refuse("no job " + std::to_string(id), Refusal::no_such_job);
    // The fast path first: once the job is gone there, no packet can touch its region.
    datapath_.delete_job(id);
    for (const auto &[rank, m] : job->members)
        datapath_.delete_member(id, rank);
    jobs_.remove(id);
    if (stragglers_)
        stragglers_->forget(id);
    rebalance();  // the others grow into its memory
    return json::object();
}

// An address of this node (its network namespace), or loopback: a rank there sends over
// loopback, where XDP never sees its contributions.
bool ControlApi::on_this_host(in_addr addr)
{
    return (ntohl(addr.s_addr) >> 24) == 127 || sys::interface_with_address(addr).has_value();
}

// A rank on this node's own host: its contributions reach only the host path, so the fast path
// must not hold any of the job's chunks (each would wait for that rank forever, and the host
// path drops a chunk the fast path serves). The job's region moves to the host path by the
// usual steps, which keep every sum in flight, and the job stays there: exact, and as fast as
// the host path (docs/XAGGD.md, "A rank on the aggregator's host").
void ControlApi::serve_on_host_only(uint32_t id, uint32_t rank, const std::string &addr)
{
    if (const Job &job = *jobs_.find(id); job.region_positions)
        datapath_.shrink_fast(job, 0);
    jobs_.serve_on_host_only(id);
    datapath_.put_job(*jobs_.find(id));
    spdlog::warn(
        "job {}: rank {} joined from {}, an address of this node: its contributions come over "
        "loopback, which XDP never sees, so the host path serves the whole job from now on",
        id, rank, addr);
    rebalance();  // the memory it held goes to the others
}

json ControlApi::join(const json &j, const Tenant *)
{
    const auto r = j.get<api::Join>();
    const uint32_t id = r.job, rank = r.rank;
    in_addr addr{};
    inet_pton(AF_INET, r.addr.c_str(), &addr);  // checked by the parser
    const uint16_t port = r.port;
    const uint64_t members_before = jobs_.find(id) ? jobs_.find(id)->member_bitmap() : 0;
    const Member &m = jobs_.join(id, rank, addr, port);
    try {
        datapath_.put_member(id, m);
    } catch (...) {
        jobs_.leave(id, rank);
        throw;
    }
    if (!jobs_.find(id)->host_path && on_this_host(addr))
        serve_on_host_only(id, rank, r.addr);
    if (jobs_.find(id)->member_bitmap() != members_before) {  // an evicted rank came back
        datapath_.put_job(*jobs_.find(id));
        if (stragglers_)
            stragglers_->pardon(id, rank);
    }
    return api::JoinReply{describe(id, Progress::omitted), xagg_port_, jobs_.find(id)->key};
}

json ControlApi::leave(const json &j, const Tenant *)
{
    const auto [id, rank] = j.get<api::Leave>();
    jobs_.leave(id, rank);
    datapath_.delete_member(id, rank);
    return json::object();
}

json ControlApi::list_jobs(const json &j, const Tenant *tenant)
{
    j.get<api::ListJobs>();
    api::JobList list;
    for (const auto &[id, job] : jobs_.jobs())
        if (!tenant || tenant->owns(id))
            list.jobs.push_back(describe(id));
    return list;
}

json ControlApi::show_job(const json &j, const Tenant *)
{
    return api::JobReply{describe(j.get<api::ShowJob>().job)};
}

json ControlApi::set_log_level(const json &j, const Tenant *)
{
    const std::string level = j.get<api::SetLogLevel>().level;
    spdlog::set_level(spdlog::level::from_str(level));
    spdlog::info("log level set to {} over the control API", level);
    return {{"level", level}};
}

json ControlApi::stats(const json &j, const Tenant *)
{
    j.get<api::Stats>();
    auto named = [](const Counters &c) {
        std::map<std::string, uint64_t> out;
        for (int i = 0; i < XAGG_CNT_MAX; i++)
            out[counter_name(static_cast<xagg_counter>(i))] = c[i];
        return out;
    };
    const Counters fast = datapath_.counters(), host = datapath_.host_counters();
    api::StatsReply r;
    r.counters = named(fast);
    r.host_counters = named(host);
    r.aggregated_bytes = {summed_bytes(fast), summed_bytes(host)};
    r.chunks_completed = {completions(fast), completions(host)};
    r.uptime_seconds = uptime_seconds();
    r.jobs = jobs_.jobs().size();
    r.fast_path_positions_capacity = jobs_.capacity_positions();
    r.fast_path_positions_used = jobs_.used_positions();
    r.requests = requests_;
    r.request_errors = errors_;
    return r;
}

json ControlApi::status(const json &j, const Tenant *tenant)
{
    j.get<api::Status>();
    api::StatusReply r{{XAGG_RELEASE, xagg_port_}, std::nullopt};
    if (tenant)  // what a worker needs (the port), nothing about the node's other jobs
        return r;
    const uint64_t slot_bytes = 2 * sizeof(xagg_slot);  // two round slots per chunk
    api::StatusDetails &d = r.details.emplace();
    d.pid = getpid();
    d.uptime_seconds = uptime_seconds();
    d.default_chunk_elems = default_chunk_elems_;
    for (const auto &[id, job] : jobs_.jobs()) {
        d.members += job.members.size();
        d.positions.fast += job.region_positions;
        d.positions.host += job.positions - job.region_positions;
    }
    d.jobs = jobs_.jobs().size();
    d.memory = {sched::to_string(jobs_.policy()), jobs_.capacity_positions(),
                jobs_.used_positions(), jobs_.capacity_positions() * slot_bytes,
                jobs_.used_positions() * slot_bytes};
    const Counters fast = datapath_.counters(), host = datapath_.host_counters();
    d.aggregated_bytes = {summed_bytes(fast), summed_bytes(host)};
    if (node_) {
        const NodeStatus n = node_();
        api::StatusNode &out = d.node.emplace();
        out.interface = n.interface;
        out.datapath = n.datapath;
        if (n.datapath == "xdp")
            out.xdp = api::StatusXdp{n.xdp_mode, n.xdp.mode, n.xdp.attached, n.xdp.prog_id};
        out.control_socket = n.control_socket;
        out.control_tcp_address = n.control_tcp_address;
        out.metrics_address = n.metrics_address;
        out.kernel = api::StatusKernel{n.kernel.release,
                                       n.kernel.fastpath_variant.empty()
                                           ? std::nullopt
                                           : std::optional(n.kernel.fastpath_variant),
                                       n.kernel.jumbo_refusal.empty(), n.kernel.jumbo_refusal};
    }
    return r;
}

}  // namespace xagg::daemon
