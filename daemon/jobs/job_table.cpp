// SPDX-License-Identifier: MIT
#include "daemon/jobs/job_table.hpp"

#include "xagg/job_rules.hpp"

#include "xagg/api.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <random>
#include <stdexcept>

namespace xagg::daemon {
namespace {

using api::Refusal;

[[noreturn]] void refuse(const std::string &why, Refusal code = Refusal::bad_request)
{
    throw api::Refused(code, why);
}

}  // namespace

std::string ipv4_string(in_addr a)
{
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, buf, sizeof(buf));
    return buf;
}

in_addr parse_ipv4(const std::string &s)
{
    in_addr a{};
    if (inet_pton(AF_INET, s.c_str(), &a) != 1)
        refuse("'" + s + "' is not an IPv4 address");
    return a;
}

uint32_t new_tag()
{
    static std::random_device source;  // getrandom(2)
    uint32_t tag;
    do
        tag = source();
    while (tag == XAGG_TAG_NONE);
    return tag;
}

uint64_t new_key()
{
    static std::random_device source;  // getrandom(2): the key is a secret, not a seed
    uint64_t key;
    do
        key = uint64_t{source()} << 32 | source();
    while (key == 0);
    return key;
}

std::vector<uint32_t> rank_list(uint64_t bitmap)
{
    std::vector<uint32_t> out;
    for (uint32_t r = 0; r < XAGG_MAX_WORKERS; r++)
        if (bitmap >> r & 1)
            out.push_back(r);
    return out;
}

std::string rank_text(uint64_t bitmap)
{
    std::string out = "[";
    for (uint32_t r : rank_list(bitmap))
        out += (out.size() > 1 ? "," : "") + std::to_string(r);
    return out + "]";
}

const char *to_string(StragglerPolicy p)
{
    return p == StragglerPolicy::evict ? "evict" : "wait";
}

JobTable::JobTable(uint32_t capacity_positions, uint32_t max_jobs, in_addr group_base,
                   uint32_t min_job_positions, sched::Policy policy)
    : capacity_positions_(capacity_positions),
      max_jobs_(max_jobs),
      min_job_positions_(min_job_positions),
      policy_(policy),
      group_base_(group_base)
{
}

uint32_t JobTable::used_positions() const
{
    uint32_t used = 0;
    for (const auto &[id, job] : jobs_)
        used += job.region_positions;
    return used;
}

// The fast path's costs per chunk relative to each other, from bench/run (4 workers, 64 MiB:
// the host path takes 1.7x the fast path's time). Only their ratio matters to the ranking.
constexpr double kFastStepPerChunk = 1.0, kHostStepPerChunk = 1.7;

std::map<uint32_t, Region> JobTable::layout(const std::map<uint32_t, uint64_t> &rounds_done) const
{
    std::vector<sched::JobDemand> demands;
    for (const auto &[id, job] : jobs_) {
        sched::JobDemand d{id, job.host_path ? 0 : job.positions, job.weight, job.arrival, {}};
        if (job.iterations) {
            auto done = rounds_done.find(id);
            uint64_t left = job.iterations -
                            std::min(job.iterations, done == rounds_done.end() ? 0 : done->second);
            // Remaining time as if on the fast path: what a job that got the memory would take.
            d.benefit = sched::benefit_score(
                job.positions * kHostStepPerChunk, job.positions * kFastStepPerChunk,
                static_cast<double>(left) * job.positions * kFastStepPerChunk);
        }
        demands.push_back(d);
    }
    std::map<uint32_t, Region> out;
    uint32_t base = 0;
    for (const auto &[id, given] :
         sched::divide(policy_, capacity_positions_, min_job_positions_, demands)) {
        // Whole chunks only: a jumbo chunk's parts are never split between the paths.
        const uint32_t parts = jobs_.at(id).parts();
        const auto positions = static_cast<uint32_t>(given / parts * parts);
        out[id] = positions ? Region{base, positions} : Region{};
        base += positions;
    }
    return out;
}

void JobTable::set_region(uint32_t id, Region region)
{
    if (uint64_t{region.base} + region.positions > capacity_positions_)
        refuse("region lies beyond the fast-path capacity", Refusal::no_room);
    Job &job = get(id);
    job.region_base = region.base;
    // Whole chunks only: a jumbo chunk's parts are never split between the paths.
    job.region_positions = std::min(region.positions, job.positions) / job.parts() * job.parts();
}

void JobTable::serve_on_host_only(uint32_t id)
{
    Job &job = get(id);
    job.host_path = true;
    job.region_base = 0;
    job.region_positions = 0;
}

const Job &JobTable::create(const api::CreateJob &request, uint32_t default_chunk_elems)
{
    // What the request left out: the job rules' defaults, and the node's chunk size.
    const struct {
        std::optional<uint32_t> id;
        uint32_t workers;
        uint64_t gradient_elems;
        StragglerPolicy policy;
        uint32_t timeout_ms, evict_after;
        double weight;
        uint64_t iterations;
        bool host_path, fanout;
        uint32_t chunk_elems;
    } r{request.id,
        request.workers,
        request.gradient_elems,
        request.policy == "evict" ? StragglerPolicy::evict : StragglerPolicy::wait,
        request.timeout_ms.value_or(job_rules::kDefaultTimeoutMs),
        request.evict_after.value_or(job_rules::kDefaultEvictAfter),
        request.weight.value_or(job_rules::kDefaultWeight),
        request.iterations.value_or(0),
        request.host_path.value_or(false),
        request.fanout.value_or(false),
        request.chunk_elems.value_or(default_chunk_elems)};
    if (jobs_.size() >= max_jobs_)
        refuse("the job table is full (" + std::to_string(max_jobs_) + " jobs)", Refusal::no_room);
    if (!job_rules::valid_workers(r.workers))
        refuse("workers must be 1.." + std::to_string(job_rules::kMaxWorkers));
    if (r.gradient_elems == 0)
        refuse("gradient_elems must be positive");
    if (!job_rules::valid_chunk_elems(r.chunk_elems))
        refuse("chunk_elems must be " + job_rules::chunk_elems_choices());
    if (r.chunk_elems == XAGG_JUMBO_CHUNK_ELEMS && !jumbo_refusal_.empty())
        refuse("this node cannot serve jumbo chunks: " + jumbo_refusal_, Refusal::unsupported);
    const uint64_t positions = job_rules::positions(r.gradient_elems, r.chunk_elems);
    if (positions > UINT32_MAX)
        refuse("gradient_elems is too large (at most 2^32 slots of 768 values)");
    if (r.timeout_ms == 0)
        refuse("timeout_ms must be positive");
    if (r.evict_after == 0)
        refuse("evict_after must be positive");
    if (!(r.weight > 0) || r.weight > 1e6)
        refuse("weight must be in (0, 1e6]");
    uint32_t id = 0;
    if (r.id) {
        id = *r.id;
        if (!job_rules::valid_job_id(id))
            refuse("job id must be 1.." + std::to_string(job_rules::kMaxJobId));
        if (jobs_.count(id))
            refuse("job " + std::to_string(id) + " exists", Refusal::conflict);
    } else {
        for (id = 1; jobs_.count(id); id++) {
        }
    }
    Job job;
    job.id = id;
    job.workers = r.workers;
    job.gradient_elems = r.gradient_elems;
    job.chunk_elems = r.chunk_elems;
    job.positions = static_cast<uint32_t>(positions);
    job.policy = r.policy;
    job.timeout_ms = r.timeout_ms;
    job.evict_after = r.evict_after;
    job.weight = r.weight;
    job.iterations = r.iterations;
    job.arrival = next_arrival_++;
    job.tag = new_tag();
    job.key = new_key();
    job.host_path = r.host_path;
    job.fanout = r.fanout;
    job.group.s_addr = htonl(ntohl(group_base_.s_addr) + id);
    job.group_port = 9872;
    return jobs_.emplace(id, job).first->second;
}

Job &JobTable::get(uint32_t id)
{
    auto it = jobs_.find(id);
    if (it == jobs_.end())
        refuse("no job " + std::to_string(id), Refusal::no_such_job);
    return it->second;
}

const Job *JobTable::find(uint32_t id) const
{
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : &it->second;
}

void JobTable::remove(uint32_t id)
{
    jobs_.erase(get(id).id);
}

const Member &JobTable::join(uint32_t id, uint32_t rank, in_addr addr, uint16_t port)
{
    Job &job = get(id);
    if (rank >= job.workers)
        refuse("rank " + std::to_string(rank) + " is not below the job's " +
               std::to_string(job.workers) + " workers");
    if (port == 0)
        refuse("port must be 1..65535");
    for (const auto &[r, m] : job.members)
        if (r != rank && m.addr.s_addr == addr.s_addr && m.port == port)
            refuse(ipv4_string(addr) + ":" + std::to_string(port) + " already joined as rank " +
                       std::to_string(r),
                   Refusal::conflict);
    auto it = job.members.find(rank);
    if (it != job.members.end() &&
        (it->second.addr.s_addr != addr.s_addr || it->second.port != port))
        refuse("rank " + std::to_string(rank) + " is taken by " + ipv4_string(it->second.addr) +
                   ":" + std::to_string(it->second.port) + "; leave first",
               Refusal::conflict);
    Member m{rank, addr, port};
    job.evicted &= ~(1ull << rank);
    return job.members[rank] = m;
}

const Job &JobTable::evict(uint32_t id, uint32_t rank)
{
    Job &job = get(id);
    if (rank >= job.workers)
        refuse("rank " + std::to_string(rank) + " is not below the job's " +
               std::to_string(job.workers) + " workers");
    uint64_t bit = 1ull << rank;
    if (!(job.member_bitmap() & bit))
        refuse("rank " + std::to_string(rank) + " of job " + std::to_string(id) +
                   " is already evicted",
               Refusal::conflict);
    if (job.member_bitmap() == bit)
        refuse("rank " + std::to_string(rank) + " is the last of job " + std::to_string(id),
               Refusal::conflict);
    job.evicted |= bit;
    job.evictions++;
    job.members.erase(rank);
    return job;
}

void JobTable::leave(uint32_t id, uint32_t rank)
{
    Job &job = get(id);
    if (!job.members.erase(rank))
        refuse("rank " + std::to_string(rank) + " is not a member of job " + std::to_string(id),
               Refusal::no_such_job);
}

void JobTable::restore(std::map<uint32_t, Job> jobs)
{
    for (const auto &[id, job] : jobs)
        if (uint64_t{job.region_base} + job.region_positions > capacity_positions_)
            refuse("job " + std::to_string(id) + " lies beyond the fast-path capacity",
                   Refusal::no_room);
    jobs_ = std::move(jobs);
    for (const auto &[id, job] : jobs_)
        next_arrival_ = std::max(next_arrival_, job.arrival + 1);
}

}  // namespace xagg::daemon
