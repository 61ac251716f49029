// SPDX-License-Identifier: MIT
#include "tools/xagg-sim/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include "lib/sched/placement.hpp"

namespace xagg::sim {
namespace {

struct PlacedPartition {
    uint32_t node = 0;
    uint64_t chunks = 0;
    uint64_t fast = 0;  // chunks the node's policy gives it
};

struct ActiveJob {
    const TraceJob *trace = nullptr;
    double remaining = 0;  // iterations
    double alone_step = 0, host_step = 0;
    std::vector<PlacedPartition> parts;
    double step = 0;  // with the current division
    // The share of an iteration spent communicating, from the last step time.
    double duty() const { return step > 0 ? (step - trace->compute_s) / step : 1; }
};

// How many partitions use a node at once, on average: each counts for the share of its job's
// iteration spent communicating (a job computing does not use the aggregator).
using Users = std::map<uint32_t, double>;

// One iteration's time of a job whose partitions hold `fast` chunks each. Both paths of a node
// run on its CPUs, so a partition costs its fast chunks at the fast rate plus its other chunks at
// the host rate, and shares the node with the job's own partitions there (all communicate at
// once) and with the others using it then: processor sharing.
double step_time(const TraceJob &job, const std::vector<PlacedPartition> &parts,
                 const ClusterParams &c, const Users &users, double own_duty)
{
    Users own;
    for (const PlacedPartition &p : parts)
        own[p.node]++;
    double comm = 0;
    for (const PlacedPartition &p : parts) {
        auto it = users.find(p.node);
        double others = (it == users.end() ? 0 : it->second) - own[p.node] * own_duty;
        double sharing = own[p.node] + std::max(0.0, others);
        double work = double(p.fast) * job.workers / c.fast_rate +
                      double(p.chunks - p.fast) * job.workers / c.host_rate;
        comm = std::max(comm, work * sharing);
    }
    return job.compute_s + comm;
}

std::vector<sched::Node> empty_nodes(const ClusterParams &c)
{
    std::vector<sched::Node> nodes;
    for (uint32_t n = 0; n < c.nodes; n++)
        nodes.push_back({n, c.node_chunks, c.fast_rate, 0});
    return nodes;
}

// Where the partitions go, and what they would take per iteration alone in an empty cluster
// (each node's memory to the job, its partitions on one node sharing that node).
std::vector<PlacedPartition> place_job(const TraceJob &job, std::vector<sched::Node> &nodes,
                                       const ClusterParams &c)
{
    auto parts = sched::cut(job.chunks, job.workers, c.partition_chunks);
    auto where = sched::place(nodes, parts);
    std::vector<PlacedPartition> placed;
    for (size_t i = 0; i < parts.size(); i++)
        placed.push_back({where[i], parts[i].chunks, 0});
    return placed;
}

double alone_step(const TraceJob &job, const ClusterParams &c)
{
    auto nodes = empty_nodes(c);
    auto parts = place_job(job, nodes, c);
    std::map<uint32_t, uint64_t> left;
    for (PlacedPartition &p : parts) {
        auto [it, fresh] = left.try_emplace(p.node, c.node_chunks);
        p.fast = std::min(p.chunks, it->second);
        it->second -= p.fast;
    }
    return step_time(job, parts, c, {}, 1);
}

double host_only_step(const TraceJob &job, std::vector<PlacedPartition> parts,
                      const ClusterParams &c)
{
    for (PlacedPartition &p : parts)
        p.fast = 0;
    return step_time(job, parts, c, {}, 1);
}

double percentile(std::vector<double> v, double q)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    size_t i = static_cast<size_t>(std::ceil(q * double(v.size()))) - 1;
    return v[std::min(i, v.size() - 1)];
}

class Cluster {
public:
    Cluster(const ClusterParams &c, sched::Policy policy)
        : c_(c), policy_(policy), nodes_(empty_nodes(c))
    {
    }

    void arrive(const TraceJob &job)
    {
        ActiveJob a;
        a.trace = &job;
        a.remaining = double(job.iterations);
        a.parts = place_job(job, nodes_, c_);
        a.alone_step = alone_step(job, c_);
        a.host_step = host_only_step(job, a.parts, c_);
        a.step = a.host_step;
        active_.emplace(job.id, std::move(a));
    }

    void finish(uint32_t id)
    {
        const ActiveJob &a = active_.at(id);
        for (const PlacedPartition &p : a.parts) {
            sched::Node &n = nodes_[p.node];
            n.free_chunks = std::min(c_.node_chunks, n.free_chunks + p.chunks);
            n.load -= double(p.chunks) * a.trace->workers;
        }
        active_.erase(id);
    }

    // Every node's memory divided again by the policy; then every job's step time.
    void divide(PolicyResult &r)
    {
        std::map<uint32_t, std::vector<sched::JobDemand>> demands;
        std::map<uint32_t, std::pair<ActiveJob *, size_t>> owner;  // demand id -> partition
        uint32_t key = 0;
        for (auto &[id, a] : active_) {
            // As xaggd ranks: the remaining time as if on the fast path.
            double gain =
                sched::benefit_score(a.host_step, a.alone_step, a.remaining * a.alone_step);
            for (size_t i = 0; i < a.parts.size(); i++) {
                owner[key] = {&a, i};
                demands[a.parts[i].node].push_back(
                    sched::JobDemand{key++, a.parts[i].chunks, a.trace->weight, a.trace->id, gain});
            }
        }
        Users users;
        handed_ = 0;
        for (const auto &[node, list] : demands) {
            auto give = sched::divide(policy_, c_.node_chunks, c_.min_job_chunks, list);
            uint64_t sum = 0;
            for (const auto &[k, chunks] : give) {
                auto [job, i] = owner.at(k);
                PlacedPartition &p = job->parts[i];
                p.fast = chunks;
                sum += chunks;
                users[node] += job->duty();
            }
            r.divisions++;
            if (sum > c_.node_chunks)
                r.over_budget++;
            handed_ += sum;
        }
        for (auto &[id, a] : active_)
            a.step = step_time(*a.trace, a.parts, c_, users, a.duty());
    }

    std::map<uint32_t, ActiveJob> &active() { return active_; }
    uint64_t handed() const { return handed_; }

private:
    const ClusterParams &c_;
    sched::Policy policy_;
    std::vector<sched::Node> nodes_;
    std::map<uint32_t, ActiveJob> active_;
    uint64_t handed_ = 0;
};

}  // namespace

PolicyResult simulate(const std::vector<TraceJob> &trace, const ClusterParams &c,
                      sched::Policy policy)
{
    if (c.nodes == 0 || c.node_chunks == 0 || !(c.fast_rate > 0) || !(c.host_rate > 0))
        throw std::invalid_argument("the cluster needs nodes, memory and positive rates");
    PolicyResult r;
    r.policy = policy;
    Cluster cluster(c, policy);
    constexpr double kInf = std::numeric_limits<double>::infinity();
    double now = 0, memory_time = 0, next_tick = c.reschedule_s > 0 ? c.reschedule_s : kInf;
    size_t next = 0;
    while (next < trace.size() || !cluster.active().empty()) {
        double arrival = next < trace.size() ? trace[next].arrival_s : kInf;
        double completion = kInf;
        uint32_t first_done = 0;
        for (const auto &[id, a] : cluster.active())
            if (now + a.remaining * a.step < completion) {
                completion = now + a.remaining * a.step;
                first_done = id;
            }
        double tick = cluster.active().empty() ? kInf : next_tick;
        double then = std::min({arrival, completion, tick});
        for (auto &[id, a] : cluster.active())
            a.remaining -= (then - now) / a.step;
        memory_time += double(cluster.handed()) * (then - now);
        now = then;
        // Who has finished: the one the clock stopped for, and any within rounding of it.
        std::vector<uint32_t> done;
        for (const auto &[id, a] : cluster.active()) {
            bool stopped_for_it = id == first_done && now == completion;
            if (stopped_for_it || a.remaining <= 1e-9)
                done.push_back(id);
        }
        for (uint32_t id : done) {
            const ActiveJob &a = cluster.active().at(id);
            r.jobs.push_back(
                {id, a.trace->arrival_s, now, a.alone_step * double(a.trace->iterations)});
            cluster.finish(id);
        }
        while (next < trace.size() && trace[next].arrival_s <= now)
            cluster.arrive(trace[next++]);
        if (now >= next_tick)
            next_tick = now + c.reschedule_s;
        cluster.divide(r);
    }
    std::vector<double> jct;
    double eff = 0;
    for (const JobResult &j : r.jobs) {
        jct.push_back(j.jct());
        eff += j.efficiency();
    }
    std::sort(r.jobs.begin(), r.jobs.end(),
              [](const JobResult &a, const JobResult &b) { return a.id < b.id; });
    if (!r.jobs.empty()) {
        double sum = 0;
        for (double x : jct)
            sum += x;
        r.mean_jct = sum / double(jct.size());
        r.mean_efficiency = eff / double(jct.size());
    }
    r.p50_jct = percentile(jct, 0.5);
    r.p95_jct = percentile(jct, 0.95);
    r.p99_jct = percentile(jct, 0.99);
    r.makespan_s = now;
    double span = now - (trace.empty() ? 0 : trace.front().arrival_s);
    r.utilization = span > 0 ? memory_time / (span * double(c.nodes) * double(c.node_chunks)) : 0;
    return r;
}

}  // namespace xagg::sim
