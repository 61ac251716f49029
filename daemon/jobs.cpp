// SPDX-License-Identifier: MIT
#include "jobs.hpp"

#include <arpa/inet.h>

#include <stdexcept>

namespace xagg::daemon {
namespace {

[[noreturn]] void refuse(const std::string &why)
{
    throw std::invalid_argument(why);
}

std::string addr_string(in_addr a)
{
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, buf, sizeof(buf));
    return buf;
}

in_addr parse_addr(const std::string &s)
{
    in_addr a{};
    if (inet_pton(AF_INET, s.c_str(), &a) != 1)
        refuse("'" + s + "' is not an IPv4 address");
    return a;
}

}  // namespace

nlohmann::json ranks(uint64_t bitmap)
{
    nlohmann::json out = nlohmann::json::array();
    for (uint32_t r = 0; r < XAGG_MAX_WORKERS; r++)
        if (bitmap >> r & 1)
            out.push_back(r);
    return out;
}

const char *to_string(StragglerPolicy p)
{
    return p == StragglerPolicy::evict ? "evict" : "wait";
}

JobTable::JobTable(uint32_t capacity_chunks, uint32_t max_jobs, in_addr group_base,
                   uint32_t min_job_chunks)
    : capacity_chunks_(capacity_chunks),
      max_jobs_(max_jobs),
      min_job_chunks_(min_job_chunks),
      group_base_(group_base)
{
}

uint32_t JobTable::used_chunks() const
{
    uint32_t used = 0;
    for (const auto &[id, job] : jobs_)
        used += job.region_chunks;
    return used;
}

// Minimums first, in id order, while they fit; then the rest by weight, water-filling: a job
// whose remaining need is below its weighted share gets exactly its need and leaves the rest to
// the others. Host-path jobs take no fast-path memory.
std::map<uint32_t, Region> JobTable::fair_layout() const
{
    std::map<uint32_t, uint64_t> give;
    uint64_t left = capacity_chunks_;
    for (const auto &[id, job] : jobs_) {
        uint64_t minimum = job.host_path ? 0 : std::min<uint64_t>(job.chunks, min_job_chunks_);
        give[id] = minimum <= left ? minimum : 0;
        left -= give[id];
    }
    std::map<uint32_t, const Job *> open;
    for (const auto &[id, job] : jobs_)
        if (!job.host_path && give[id] < job.chunks)
            open[id] = &job;
    while (left > 0 && !open.empty()) {
        long double weights = 0;
        for (const auto &[id, job] : open)
            weights += job->weight;
        std::vector<uint32_t> satisfied;
        for (const auto &[id, job] : open)
            if (job->chunks - give[id] <= static_cast<long double>(left) * job->weight / weights)
                satisfied.push_back(id);
        if (!satisfied.empty()) {
            for (uint32_t id : satisfied) {
                left -= open[id]->chunks - give[id];
                give[id] = open[id]->chunks;
                open.erase(id);
            }
            continue;
        }
        // Nobody's need fits its share: each takes its share, rounded down; the chunks the
        // rounding leaves go one each in id order.
        uint64_t handed = 0;
        for (const auto &[id, job] : open) {
            auto share =
                static_cast<uint64_t>(static_cast<long double>(left) * job->weight / weights);
            give[id] += share;
            handed += share;
        }
        left -= handed;
        for (auto it = open.begin(); left > 0 && it != open.end(); ++it)
            if (give[it->first] < it->second->chunks) {
                give[it->first]++;
                left--;
            }
        break;
    }
    std::map<uint32_t, Region> layout;
    uint32_t base = 0;
    for (const auto &[id, chunks] : give) {
        layout[id] = chunks ? Region{base, static_cast<uint32_t>(chunks)} : Region{};
        base += static_cast<uint32_t>(chunks);
    }
    return layout;
}

void JobTable::set_region(uint32_t id, Region region)
{
    if (uint64_t{region.base} + region.chunks > capacity_chunks_)
        refuse("region lies beyond the fast-path capacity");
    Job &job = get(id);
    job.region_base = region.base;
    job.region_chunks = std::min(region.chunks, job.chunks);
}

const Job &JobTable::create(const JobRequest &r)
{
    if (jobs_.size() >= max_jobs_)
        refuse("the job table is full (" + std::to_string(max_jobs_) + " jobs)");
    if (r.workers < 1 || r.workers > XAGG_MAX_WORKERS)
        refuse("workers must be 1..64");
    if (r.gradient_elems == 0)
        refuse("gradient_elems must be positive");
    uint64_t chunks = (r.gradient_elems + XAGG_CHUNK_ELEMS - 1) / XAGG_CHUNK_ELEMS;
    if (chunks > UINT32_MAX)
        refuse("gradient_elems is too large (at most 2^32 chunks of 256 values)");
    if (r.timeout_ms == 0)
        refuse("timeout_ms must be positive");
    if (r.evict_after == 0)
        refuse("evict_after must be positive");
    if (!(r.weight > 0) || r.weight > 1e6)
        refuse("weight must be in (0, 1e6]");
    uint32_t id = 0;
    if (r.id) {
        id = *r.id;
        if (id == 0 || id > 0xffff)
            refuse("job id must be 1..65535");
        if (jobs_.count(id))
            refuse("job " + std::to_string(id) + " exists");
    } else {
        for (id = 1; jobs_.count(id); id++) {
        }
    }
    Job job;
    job.id = id;
    job.workers = r.workers;
    job.gradient_elems = r.gradient_elems;
    job.chunks = static_cast<uint32_t>(chunks);
    job.policy = r.policy;
    job.timeout_ms = r.timeout_ms;
    job.evict_after = r.evict_after;
    job.weight = r.weight;
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
        refuse("no job " + std::to_string(id));
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
            refuse(addr_string(addr) + ":" + std::to_string(port) + " already joined as rank " +
                   std::to_string(r));
    auto it = job.members.find(rank);
    if (it != job.members.end() &&
        (it->second.addr.s_addr != addr.s_addr || it->second.port != port))
        refuse("rank " + std::to_string(rank) + " is taken by " + addr_string(it->second.addr) +
               ":" + std::to_string(it->second.port) + "; leave first");
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
               " is already evicted");
    if (job.member_bitmap() == bit)
        refuse("rank " + std::to_string(rank) + " is the last of job " + std::to_string(id));
    job.evicted |= bit;
    job.evictions++;
    job.members.erase(rank);
    return job;
}

void JobTable::leave(uint32_t id, uint32_t rank)
{
    Job &job = get(id);
    if (!job.members.erase(rank))
        refuse("rank " + std::to_string(rank) + " is not a member of job " + std::to_string(id));
}

nlohmann::json JobTable::to_json() const
{
    nlohmann::json out = nlohmann::json::array();
    for (const auto &[id, j] : jobs_) {
        nlohmann::json members = nlohmann::json::array();
        for (const auto &[rank, m] : j.members)
            members.push_back({{"rank", rank}, {"addr", addr_string(m.addr)}, {"port", m.port}});
        out.push_back({{"id", id},
                       {"workers", j.workers},
                       {"gradient_elems", j.gradient_elems},
                       {"chunks", j.chunks},
                       {"region_base", j.region_base},
                       {"fast_path_chunks", j.region_chunks},
                       {"host_path_chunks", j.chunks - j.region_chunks},
                       {"policy", to_string(j.policy)},
                       {"timeout_ms", j.timeout_ms},
                       {"evict_after", j.evict_after},
                       {"evicted_ranks", ranks(j.evicted)},
                       {"evictions", j.evictions},
                       {"weight", j.weight},
                       {"host_path", j.host_path},
                       {"fanout", j.fanout},
                       {"group", addr_string(j.group)},
                       {"group_port", j.group_port},
                       {"members", members}});
    }
    return out;
}

void JobTable::load_json(const nlohmann::json &saved)
{
    std::map<uint32_t, Job> jobs;
    try {
        for (const auto &j : saved) {
            Job job;
            job.id = j.at("id").get<uint32_t>();
            job.workers = j.at("workers").get<uint32_t>();
            job.gradient_elems = j.at("gradient_elems").get<uint64_t>();
            job.chunks = j.at("chunks").get<uint32_t>();
            job.region_base = j.at("region_base").get<uint32_t>();
            job.region_chunks = j.at("fast_path_chunks").get<uint32_t>();
            job.policy = j.at("policy").get<std::string>() == "evict" ? StragglerPolicy::evict
                                                                      : StragglerPolicy::wait;
            job.timeout_ms = j.at("timeout_ms").get<uint32_t>();
            job.evict_after = j.value("evict_after", 3u);
            for (uint32_t r : j.value("evicted_ranks", std::vector<uint32_t>{}))
                if (r < XAGG_MAX_WORKERS)
                    job.evicted |= 1ull << r;
            job.evictions = j.value("evictions", uint64_t{0});
            job.weight = j.at("weight").get<double>();
            job.host_path = j.at("host_path").get<bool>();
            job.fanout = j.at("fanout").get<bool>();
            job.group = parse_addr(j.at("group").get<std::string>());
            job.group_port = j.at("group_port").get<uint16_t>();
            if (uint64_t{job.region_base} + job.region_chunks > capacity_chunks_)
                refuse("job " + std::to_string(job.id) + " lies beyond the fast-path capacity");
            for (const auto &m : j.at("members")) {
                Member member{m.at("rank").get<uint32_t>(),
                              parse_addr(m.at("addr").get<std::string>()),
                              m.at("port").get<uint16_t>()};
                job.members[member.rank] = member;
            }
            jobs[job.id] = job;
        }
    } catch (const nlohmann::json::exception &e) {
        refuse(std::string("saved job table is malformed: ") + e.what());
    }
    jobs_ = std::move(jobs);
}

}  // namespace xagg::daemon
