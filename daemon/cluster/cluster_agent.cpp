// SPDX-License-Identifier: MIT
#include "daemon/cluster/cluster_agent.hpp"

#include "xagg/job_rules.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "lib/control/control_client.hpp"
#include "lib/etcd/etcd_client.hpp"
#include "lib/sched/placement.hpp"
#include "xagg/api.hpp"
#include "xagg/check.h"
#include "xagg/cluster_keys.hpp"
#include "xagg/proto.h"
#include "xagg/wire.hpp"

namespace xagg::daemon {
namespace {

using nlohmann::json;

// A live placement is redone when that makes its slowest node at least this much faster.
constexpr double kRebalanceGain = 0.25;

std::vector<uint64_t> partition_sizes(const ClusterJob &job)
{
    std::vector<uint64_t> sizes;
    for (const sched::Partition &p : sched::cut(job_chunks(job), job.workers, job.partition_chunks))
        sizes.push_back(p.chunks);
    return sizes;
}

}  // namespace

uint64_t job_chunks(const ClusterJob &job)
{
    return job_rules::float_wire_chunks(job.gradient_elems, job.chunk_elems) *
           job_rules::positions_per_chunk(job.chunk_elems);
}

std::optional<ClusterPlacement> replace(const ClusterJob &job,
                                        const std::optional<ClusterPlacement> &current,
                                        const std::vector<ClusterNode> &live,
                                        const std::vector<ClusterPlacement> &others,
                                        const std::vector<ClusterJob> &jobs)
{
    if (live.empty())
        return std::nullopt;  // nowhere to go: keep what there is
    const std::vector<uint64_t> sizes = partition_sizes(job);
    std::vector<sched::Node> nodes;
    std::map<std::string, size_t> index;
    for (const ClusterNode &n : live) {
        index[n.name] = nodes.size();
        nodes.push_back({static_cast<uint32_t>(nodes.size()), n.capacity_positions, n.rate, 0});
    }
    auto occupy = [&](const std::string &name, uint64_t chunks, uint32_t workers) {
        auto it = index.find(name);
        if (it == index.end())
            return false;
        sched::Node &n = nodes[it->second];
        n.free_chunks -= std::min(n.free_chunks, chunks);
        n.load += double(chunks) * workers;
        return true;
    };
    for (const ClusterPlacement &o : others) {
        auto spec = std::find_if(jobs.begin(), jobs.end(),
                                 [&](const ClusterJob &j) { return j.id == o.job; });
        if (spec == jobs.end())
            continue;
        std::vector<uint64_t> s = partition_sizes(*spec);
        for (size_t i = 0; i < o.partitions.size() && i < s.size(); i++)
            occupy(o.partitions[i], s[i], spec->workers);
    }
    const bool same_spec = current && current->job_revision == job.revision &&
                           current->partitions.size() == sizes.size();
    const std::vector<sched::Node> before_this_job = nodes;
    ClusterPlacement next{job.id, job.revision, std::vector<std::string>(sizes.size())};
    std::vector<sched::Partition> orphans;
    std::vector<size_t> orphan_of;
    for (size_t i = 0; i < sizes.size(); i++) {
        if (same_spec && occupy(current->partitions[i], sizes[i], job.workers)) {
            next.partitions[i] = current->partitions[i];
        } else {
            orphans.push_back({static_cast<uint32_t>(i), sizes[i], job.workers});
            orphan_of.push_back(i);
        }
    }
    if (orphans.empty()) {
        // Every partition is on a live node, for this spec. Still, a node that joined since
        // (or one that was busy then) may finish this job's work much sooner: placed afresh,
        // the slowest node's time must improve by a clear margin to be worth moving partitions
        // (each move costs the job's workers a rendezvous), so placements do not flap.
        std::vector<sched::Node> fresh_nodes = before_this_job;
        std::vector<sched::Partition> all;
        for (size_t i = 0; i < sizes.size(); i++)
            all.push_back({static_cast<uint32_t>(i), sizes[i], job.workers});
        std::vector<uint32_t> fresh = sched::place(fresh_nodes, all);
        auto slowest = [](const std::vector<sched::Node> &ns) {
            double t = 0;
            for (const sched::Node &n : ns)
                t = std::max(t, n.load / n.rate);
            return t;
        };
        if (slowest(fresh_nodes) >= (1 - kRebalanceGain) * slowest(nodes))
            return std::nullopt;
        for (size_t i = 0; i < sizes.size(); i++)
            next.partitions[i] = live[fresh[i]].name;
        return next;
    }
    std::vector<uint32_t> where = sched::place(nodes, orphans);
    for (size_t k = 0; k < orphans.size(); k++)
        next.partitions[orphan_of[k]] = live[where[k]].name;
    return next;
}

uint64_t local_share(const ClusterJob &job, const ClusterPlacement &p, const std::string &me)
{
    auto k = static_cast<uint64_t>(std::count(p.partitions.begin(), p.partitions.end(), me));
    if (!k || p.partitions.empty())
        return 0;
    // The client splits every tensor by weight (partitions per node); this node's slots hold
    // its share of the largest tensor, one block rounded up, and its exponent chunks; a block
    // is a chunk of the job's size.
    const uint64_t blocks = job_rules::blocks(job.gradient_elems, job.chunk_elems);
    uint64_t mine = (blocks * k + p.partitions.size() - 1) / p.partitions.size() + 1;
    return job_rules::float_wire_chunks(mine * job.chunk_elems, job.chunk_elems) * job.chunk_elems;
}

ClusterAgent::ClusterAgent(ClusterConfig config)
    : config_(std::move(config)), etcd_(std::make_unique<etcd::Client>(config_.etcd_endpoint))
{
}

ClusterAgent::~ClusterAgent()
{
    stop_ = true;
    if (thread_.joinable())
        thread_.join();
    if (lease_) {
        try {
            etcd_->revoke(lease_);
        } catch (const std::exception &e) {
            spdlog::warn("cluster: leaving etcd: {}", e.what());
        }
    }
}

void ClusterAgent::start()
{
    thread_ = std::thread([this] {
        while (!stop_) {
            try {
                step();
                if (!last_error_.empty())
                    spdlog::info("cluster: etcd at {} answers again", config_.etcd_endpoint);
                last_error_.clear();
            } catch (const std::exception &e) {
                if (e.what() != last_error_)  // once per distinct failure, not every pass
                    spdlog::warn("cluster: {}", e.what());
                last_error_ = e.what();
            }
            for (int i = 0; i < 6 && !stop_; i++)
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
}

void ClusterAgent::register_node()
{
    if (lease_ && etcd_->keepalive(lease_))
        return;
    if (lease_)
        spdlog::warn("cluster: this node's lease expired; registering again");
    lease_ = etcd_->grant(config_.lease_ttl);
    etcd_->put(cluster_keys::node(config_.prefix, config_.self.name), to_json(config_.self).dump(),
               lease_);
    spdlog::info("cluster: node {} registered in etcd at {} (lease {} s)", config_.self.name,
                 config_.etcd_endpoint, config_.lease_ttl);
}

void ClusterAgent::step()
{
    register_node();
    etcd::Client &etcd = *etcd_;
    const std::string &pre = config_.prefix;
    std::vector<ClusterNode> live;
    for (const etcd::KeyValue &kv : etcd.range(cluster_keys::nodes(pre))) {
        try {
            live.push_back(parse_node(kv.value));
        } catch (const std::invalid_argument &e) {
            spdlog::debug("cluster: ignoring {}: {}", kv.key, e.what());
        }
    }
    std::vector<ClusterJob> jobs;
    for (const etcd::KeyValue &kv : etcd.range(cluster_keys::jobs(pre))) {
        try {
            std::optional<uint32_t> id = cluster_keys::id_in(cluster_keys::jobs(pre), kv.key);
            if (!id)
                throw std::invalid_argument("not a job id");
            ClusterJob j = parse_job(*id, kv.value);
            j.revision = kv.mod_revision;
            jobs.push_back(j);
        } catch (const std::exception &e) {
            spdlog::debug("cluster: ignoring {}: {}", kv.key, e.what());
        }
    }
    std::map<uint32_t, ClusterPlacement> placements;
    std::map<uint32_t, int64_t> revisions;
    for (const etcd::KeyValue &kv : etcd.range(cluster_keys::placements(pre))) {
        try {
            ClusterPlacement p = parse_placement(kv.value);
            placements[p.job] = p;
            revisions[p.job] = kv.mod_revision;
        } catch (const std::invalid_argument &e) {
            spdlog::debug("cluster: ignoring {}: {}", kv.key, e.what());
        }
    }
    for (const ClusterJob &job : jobs) {
        std::vector<ClusterPlacement> others;
        for (const auto &[id, p] : placements)
            if (id != job.id)
                others.push_back(p);
        auto current = placements.count(job.id) ? std::optional(placements[job.id]) : std::nullopt;
        auto next = replace(job, current, live, others, jobs);
        if (!next)
            continue;
        if (etcd.put_if_revision(cluster_keys::placement(pre, job.id), to_json(*next, live).dump(),
                                 current ? revisions[job.id] : 0)) {
            spdlog::info("cluster: job {} placed: {}", job.id, json(next->partitions).dump());
            placements[job.id] = *next;
        } else {
            placements.erase(job.id);  // another node placed it first; read it next pass
        }
    }
    for (const auto &[id, p] : placements)
        if (std::none_of(jobs.begin(), jobs.end(), [&](const ClusterJob &j) { return j.id == id; }))
            etcd.erase(cluster_keys::placement(pre, id));
    reconcile(jobs, placements);
}

void ClusterAgent::reconcile(const std::vector<ClusterJob> &jobs,
                             const std::map<uint32_t, ClusterPlacement> &placements)
{
    control::Endpoint endpoint;
    endpoint.socket_path = config_.own_control_socket;
    endpoint.timeout = std::chrono::milliseconds(2000);  // a daemon stopping answers no more
    control::ControlClient api(endpoint);
    std::map<uint32_t, api::Job> local;
    for (api::Job &j : api.call_as<api::JobList>(api::ListJobs{}).jobs)
        local[j.id] = std::move(j);
    std::map<uint32_t, const ClusterJob *> by_id;
    for (const ClusterJob &j : jobs)
        by_id[j.id] = &j;
    auto mine = [&](uint32_t id) { return managed_.count(id) || by_id.count(id); };
    // Local jobs this node should no longer hold.
    for (const auto &[id, j] : local) {
        auto p = placements.find(id);
        bool wanted = by_id.count(id) && p != placements.end() &&
                      local_share(*by_id[id], p->second, config_.self.name) > 0;
        if (mine(id) && !wanted) {
            api.call(api::DeleteJob{id});
            managed_.erase(id);
            spdlog::info("cluster: job {} is no longer placed here; deleted", id);
        }
    }
    // And those it should, at their current size.
    for (const auto &[id, p] : placements) {
        auto spec = by_id.find(id);
        if (spec == by_id.end())
            continue;
        uint64_t share = local_share(*spec->second, p, config_.self.name);
        if (!share)
            continue;
        auto have = local.find(id);
        if (have != local.end() && have->second.gradient_elems == share &&
            have->second.workers == spec->second->workers &&
            have->second.chunk_elems == spec->second->chunk_elems)
            continue;
        if (have != local.end())
            api.call(api::DeleteJob{id});
        api::CreateJob create;
        create.id = id;
        create.workers = spec->second->workers;
        create.gradient_elems = share;
        create.chunk_elems = spec->second->chunk_elems;
        api.call(create);
        managed_.insert(id);
        spdlog::info("cluster: job {}: holding {} values here in chunks of {}", id, share,
                     spec->second->chunk_elems);
    }
}

}  // namespace xagg::daemon
