// SPDX-License-Identifier: MIT
#include "daemon/state_schema.hpp"

#include "xagg/job_rules.hpp"

#include <stdexcept>
#include <string>

#include "xagg/job_key.hpp"

namespace xagg::daemon::state {
namespace {

using nlohmann::json;

uint64_t parse_key(const std::string &text)
{
    if (auto key = parse_job_key(text))
        return *key;
    throw std::invalid_argument("job key '" + text + "' is not 16 hex digits, not all zero");
}

json save_job(const Job &j)
{
    json members = json::array();
    for (const auto &[rank, m] : j.members)
        members.push_back({{"rank", rank}, {"addr", ipv4_string(m.addr)}, {"port", m.port}});
    return {{"id", j.id},
            {"workers", j.workers},
            {"gradient_elems", j.gradient_elems},
            {"chunk_elems", j.chunk_elems},
            {"chunks", j.positions},
            {"region_base", j.region_base},
            {"region_chunks", j.region_positions},
            {"straggler_policy", to_string(j.policy)},
            {"timeout_ms", j.timeout_ms},
            {"evict_after", j.evict_after},
            {"evicted", j.evicted},
            {"evictions", j.evictions},
            {"weight", j.weight},
            {"iterations", j.iterations},
            {"arrival", j.arrival},
            {"tag", j.tag},
            {"key", job_key_text(j.key)},
            {"host_path", j.host_path},
            {"fanout", j.fanout},
            {"group", ipv4_string(j.group)},
            {"group_port", j.group_port},
            {"members", members}};
}

Member load_member(const json &m)
{
    return Member{m.at("rank").get<uint32_t>(), parse_ipv4(m.at("addr").get<std::string>()),
                  m.at("port").get<uint16_t>()};
}

StragglerPolicy load_policy(const std::string &name)
{
    if (name == "evict")
        return StragglerPolicy::evict;
    if (name == "wait")
        return StragglerPolicy::wait;
    throw std::invalid_argument("unknown straggler policy '" + name + "'");
}

// A job of a version-2 table; of a version-1 one when `keyed` is false (a fresh key: the
// workers re-join after the upgrade, since their protocol version changed with it).
Job load_job(const json &j, bool keyed)
{
    Job job;
    job.id = j.at("id").get<uint32_t>();
    job.workers = j.at("workers").get<uint32_t>();
    job.gradient_elems = j.at("gradient_elems").get<uint64_t>();
    // Files written before jumbo chunks have standard jobs only.
    job.chunk_elems = j.value("chunk_elems", uint32_t{XAGG_CHUNK_ELEMS});
    if (!job_rules::valid_chunk_elems(job.chunk_elems))
        throw std::invalid_argument("job " + std::to_string(job.id) + ": chunk_elems " +
                                    std::to_string(job.chunk_elems) + " is neither " +
                                    job_rules::chunk_elems_choices("nor"));
    job.positions = j.at("chunks").get<uint32_t>();
    job.region_base = j.at("region_base").get<uint32_t>();
    job.region_positions = j.at("region_chunks").get<uint32_t>();
    job.policy = load_policy(j.at("straggler_policy").get<std::string>());
    job.timeout_ms = j.at("timeout_ms").get<uint32_t>();
    job.evict_after = j.at("evict_after").get<uint32_t>();
    job.evicted = j.at("evicted").get<uint64_t>();
    job.evictions = j.at("evictions").get<uint64_t>();
    job.weight = j.at("weight").get<double>();
    job.iterations = j.at("iterations").get<uint64_t>();
    job.arrival = j.at("arrival").get<uint64_t>();
    job.tag = j.at("tag").get<uint32_t>();
    job.key = keyed ? parse_key(j.at("key").get<std::string>()) : new_key();
    job.host_path = j.at("host_path").get<bool>();
    job.fanout = j.at("fanout").get<bool>();
    job.group = parse_ipv4(j.at("group").get<std::string>());
    job.group_port = j.at("group_port").get<uint16_t>();
    for (const auto &m : j.at("members")) {
        Member member = load_member(m);
        job.members[member.rank] = member;
    }
    return job;
}

// xagg 0.1 saved the API's view of each job: other names, optional fields, no tag.
Job load_unversioned_job(const json &j)
{
    Job job;
    job.id = j.at("id").get<uint32_t>();
    job.workers = j.at("workers").get<uint32_t>();
    job.gradient_elems = j.at("gradient_elems").get<uint64_t>();
    job.positions = j.at("chunks").get<uint32_t>();
    job.region_base = j.at("region_base").get<uint32_t>();
    job.region_positions = j.at("fast_path_chunks").get<uint32_t>();
    job.policy = load_policy(j.at("policy").get<std::string>());
    job.timeout_ms = j.at("timeout_ms").get<uint32_t>();
    job.evict_after = j.value("evict_after", 3u);
    for (uint32_t r : j.value("evicted_ranks", std::vector<uint32_t>{}))
        if (r < XAGG_MAX_WORKERS)
            job.evicted |= 1ull << r;
    job.evictions = j.value("evictions", uint64_t{0});
    job.weight = j.at("weight").get<double>();
    job.iterations = j.value("iterations", uint64_t{0});
    job.arrival = j.value("arrival", uint64_t{job.id});
    // A table saved before tags: a fresh one (sums in flight are rebuilt by retransmission, as
    // after a reboot).
    job.tag = j.contains("tag") ? j.at("tag").get<uint32_t>() : new_tag();
    job.key = new_key();
    job.host_path = j.at("host_path").get<bool>();
    job.fanout = j.at("fanout").get<bool>();
    job.group = parse_ipv4(j.at("group").get<std::string>());
    job.group_port = j.at("group_port").get<uint16_t>();
    for (const auto &m : j.at("members")) {
        Member member = load_member(m);
        job.members[member.rank] = member;
    }
    return job;
}

}  // namespace

json save(const std::map<uint32_t, Job> &jobs)
{
    json list = json::array();
    for (const auto &[id, job] : jobs)
        list.push_back(save_job(job));
    return {{"schema", kSchema}, {"version", kVersion}, {"jobs", list}};
}

std::map<uint32_t, Job> load(const json &saved)
{
    std::map<uint32_t, Job> jobs;
    try {
        if (saved.is_array()) {
            for (const auto &j : saved) {
                Job job = load_unversioned_job(j);
                jobs[job.id] = job;
            }
            return jobs;
        }
        if (saved.value("schema", "") != kSchema)
            throw std::invalid_argument("not an xagg state file (no \"schema\": \"xagg-state\")");
        const bool keyed = saved.at("version") == kVersion;
        if (!keyed && saved.at("version") != kVersionBeforeKeys)
            throw std::invalid_argument(
                "state version " + saved.at("version").dump() + " is not one this xaggd reads (" +
                std::to_string(kVersionBeforeKeys) + " or " + std::to_string(kVersion) + ")");
        for (const auto &j : saved.at("jobs")) {
            Job job = load_job(j, keyed);
            jobs[job.id] = job;
        }
    } catch (const json::exception &e) {
        throw std::invalid_argument(std::string("malformed job table: ") + e.what());
    }
    return jobs;
}

}  // namespace xagg::daemon::state
