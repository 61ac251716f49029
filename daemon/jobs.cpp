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

const char *to_string(StragglerPolicy p)
{
    return p == StragglerPolicy::evict ? "evict" : "wait";
}

JobTable::JobTable(uint32_t capacity_chunks, uint32_t max_jobs, in_addr group_base)
    : capacity_chunks_(capacity_chunks), max_jobs_(max_jobs), group_base_(group_base)
{
}

uint32_t JobTable::used_chunks() const
{
    uint32_t used = 0;
    for (const auto &[id, job] : jobs_)
        used += job.region_chunks;
    return used;
}

std::pair<uint32_t, uint32_t> JobTable::largest_free_range() const
{
    std::map<uint32_t, uint32_t> taken;  // base -> length
    for (const auto &[id, job] : jobs_)
        if (job.region_chunks)
            taken[job.region_base] = job.region_chunks;
    std::pair<uint32_t, uint32_t> best{0, 0};
    uint32_t cursor = 0;
    auto consider = [&](uint32_t end) {
        if (end > cursor && end - cursor > best.second)
            best = {cursor, end - cursor};
    };
    for (const auto &[base, len] : taken) {
        consider(base);
        cursor = base + len;
    }
    consider(capacity_chunks_);
    return best;
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
    job.weight = r.weight;
    job.host_path = r.host_path;
    job.fanout = r.fanout;
    job.group.s_addr = htonl(ntohl(group_base_.s_addr) + id);
    job.group_port = 9872;
    if (!r.host_path) {
        auto [base, len] = largest_free_range();
        job.region_base = base;
        job.region_chunks = std::min(len, job.chunks);
    }
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
    return job.members[rank] = m;
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
