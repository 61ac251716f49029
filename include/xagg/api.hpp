// SPDX-License-Identifier: MIT
// The control API's contract (docs/XAGGD.md, "Control API"), typed both ways: the op names,
// the refusal codes, the requests (written by the callers, read and validated by the daemon)
// and the replies that other processes read (the client library, xaggctl, the cluster agent),
// with their JSON form defined once, here. The daemon writes these structs and the
// callers read them; nobody looks into a reply by a key of their own, and nobody reads a
// refusal's message text to decide anything: the code says what happened, the message is for
// people.
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "xagg/defaults.h"
#include "xagg/job_key.hpp"
#include "xagg/job_rules.hpp"
#include "xagg/proto.h"

namespace xagg::api {

// Where xaggd serves the API unless configured otherwise (control_socket).
inline constexpr const char *kDefaultControlSocket = XAGG_DEFAULT_CONTROL_SOCKET;

// The ops, as they appear in a request's "op".
namespace op {
inline constexpr const char *create_job = "create_job";
inline constexpr const char *delete_job = "delete_job";
inline constexpr const char *join = "join";
inline constexpr const char *leave = "leave";
inline constexpr const char *evict = "evict";
inline constexpr const char *list_jobs = "list_jobs";
inline constexpr const char *show_job = "show_job";
inline constexpr const char *stats = "stats";
inline constexpr const char *status = "status";
inline constexpr const char *set_log_level = "set_log_level";
}  // namespace op

// Why a request was refused: a reply's "code".
enum class Refusal {
    bad_request,  // not a request the API understands: malformed, unknown field, bad value
    unknown_op,   // "op" names no operation
    no_such_job,  // the job (or the rank in it) is not there
    conflict,     // the request contradicts the table: id or rank taken, address already joined
    no_room,      // the job table or the fast path is full
    bad_token,    // TCP: the request lacks the right token (nothing else is said)
    unsupported,  // this node cannot serve it: jumbo chunks where its interface cannot carry them
    forbidden,    // TCP: a tenant's token asked for another tenant's job or a node-wide op
};

inline constexpr std::string_view to_string(Refusal r)
{
    switch (r) {
    case Refusal::bad_request: return "bad_request";
    case Refusal::unknown_op: return "unknown_op";
    case Refusal::no_such_job: return "no_such_job";
    case Refusal::conflict: return "conflict";
    case Refusal::no_room: return "no_room";
    case Refusal::bad_token: return "bad_token";
    case Refusal::unsupported: return "unsupported";
    case Refusal::forbidden: return "forbidden";
    }
    return "bad_request";
}

// The code of a reply; nullopt for a code this build does not know (a newer daemon's).
inline std::optional<Refusal> refusal_named(std::string_view name)
{
    for (Refusal r :
         {Refusal::bad_request, Refusal::unknown_op, Refusal::no_such_job, Refusal::conflict,
          Refusal::no_room, Refusal::bad_token, Refusal::unsupported, Refusal::forbidden})
        if (to_string(r) == name)
            return r;
    return std::nullopt;
}

// Thrown where a request is refused (the job table, the API), caught by the API and written as
// {"ok": false, "code": ..., "error": message}.
class Refused : public std::invalid_argument {
public:
    Refused(Refusal code, const std::string &message) : std::invalid_argument(message), code_(code)
    {
    }
    Refusal code() const { return code_; }

private:
    Refusal code_;
};

// --- Requests ------------------------------------------------------------------------------
// Each serializes with its "op"; a TCP caller's token is added by the transport.

struct ShowJob {
    uint32_t job = 0;
};
struct DeleteJob {
    uint32_t job = 0;
};
struct ListJobs {};
struct Status {};
struct Join {
    uint32_t job = 0, rank = 0;
    std::string addr;   // the worker's IPv4 source address
    uint16_t port = 0;  // and UDP source port
};
struct Leave {
    uint32_t job = 0, rank = 0;
};
struct Evict {
    uint32_t job = 0, rank = 0;
};
struct Stats {};
struct CreateJob {
    std::optional<uint32_t> id;  // assigned when absent
    uint32_t workers = 0;
    uint64_t gradient_elems = 0;
    std::optional<std::string> policy;  // wait | evict
    std::optional<uint32_t> timeout_ms, evict_after;
    std::optional<double> weight;
    std::optional<uint64_t> iterations;
    std::optional<bool> host_path, fanout;
    std::optional<uint32_t> chunk_elems;  // 768 or 2048; absent: the node's default_chunk_elems
};

inline void to_json(nlohmann::json &j, const ShowJob &r)
{
    j = {{"op", op::show_job}, {"job", r.job}};
}
inline void to_json(nlohmann::json &j, const DeleteJob &r)
{
    j = {{"op", op::delete_job}, {"job", r.job}};
}
inline void to_json(nlohmann::json &j, const ListJobs &)
{
    j = {{"op", op::list_jobs}};
}
inline void to_json(nlohmann::json &j, const Status &)
{
    j = {{"op", op::status}};
}
inline void to_json(nlohmann::json &j, const Join &r)
{
    j = {{"op", op::join}, {"job", r.job}, {"rank", r.rank}, {"addr", r.addr}, {"port", r.port}};
}
inline void to_json(nlohmann::json &j, const Leave &r)
{
    j = {{"op", op::leave}, {"job", r.job}, {"rank", r.rank}};
}
inline void to_json(nlohmann::json &j, const Evict &r)
{
    j = {{"op", op::evict}, {"job", r.job}, {"rank", r.rank}};
}
inline void to_json(nlohmann::json &j, const Stats &)
{
    j = {{"op", op::stats}};
}
inline void to_json(nlohmann::json &j, const CreateJob &r)
{
    j = {{"op", op::create_job}, {"workers", r.workers}, {"gradient_elems", r.gradient_elems}};
    const auto put = [&j](const char *key, const auto &v) {
        if (v)
            j[key] = *v;
    };
    put("id", r.id);
    put("policy", r.policy);
    put("timeout_ms", r.timeout_ms);
    put("evict_after", r.evict_after);
    put("weight", r.weight);
    put("iterations", r.iterations);
    put("host_path", r.host_path);
    put("fanout", r.fanout);
    put("chunk_elems", r.chunk_elems);
}

// --- Requests, read (the daemon's side) ------------------------------------------------------
// Every field checked, and nothing else allowed: a request that names a field the op does not
// take is a mistake worth reporting. Bounds and choices are the job rules'
// (xagg/job_rules.hpp); a field left out stays an empty optional, and the daemon states its
// default. A bad request throws Refused(bad_request) saying which field and why.

struct SetLogLevel {
    std::string level;  // trace | debug | info | warn | error
};
inline void to_json(nlohmann::json &j, const SetLogLevel &r)
{
    j = {{"op", op::set_log_level}, {"level", r.level}};
}

namespace parse {

[[noreturn]] inline void refuse(const std::string &why)
{
    throw Refused(Refusal::bad_request, why);
}

// The request may carry "op" and exactly the fields named.
inline void allow_only(const nlohmann::json &r, std::initializer_list<const char *> fields)
{
    for (const auto &[key, value] : r.items()) {
        bool known = key == "op";
        for (const char *f : fields)
            known = known || key == f;
        if (!known)
            refuse("unknown field '" + key + "'");
    }
}

inline uint64_t number(const nlohmann::json &r, const char *field, uint64_t max)
{
    if (!r.contains(field))
        refuse(std::string("missing field '") + field + "'");
    const nlohmann::json &v = r.at(field);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        refuse(std::string("'") + field + "' must be a non-negative integer");
    const uint64_t n = v.get<uint64_t>();
    if (n > max)
        refuse(std::string("'") + field + "' must be at most " + std::to_string(max));
    return n;
}

template <typename T>
std::optional<T> optional_number(const nlohmann::json &r, const char *field, uint64_t max)
{
    if (!r.contains(field))
        return std::nullopt;
    return static_cast<T>(number(r, field, max));
}

inline std::optional<bool> optional_flag(const nlohmann::json &r, const char *field)
{
    if (!r.contains(field))
        return std::nullopt;
    if (!r.at(field).is_boolean())
        refuse(std::string("'") + field + "' must be true or false");
    return r.at(field).get<bool>();
}

inline std::string text(const nlohmann::json &r, const char *field)
{
    if (!r.contains(field) || !r.at(field).is_string())
        refuse(std::string("'") + field + "' must be a string");
    return r.at(field).get<std::string>();
}

inline uint32_t job_id(const nlohmann::json &r, const char *field = "job")
{
    return static_cast<uint32_t>(number(r, field, job_rules::kMaxJobId));
}
inline uint32_t rank(const nlohmann::json &r)
{
    return static_cast<uint32_t>(number(r, "rank", job_rules::kMaxWorkers - 1));
}

}  // namespace parse

inline void from_json(const nlohmann::json &j, ShowJob &r)
{
    parse::allow_only(j, {"job"});
    r.job = parse::job_id(j);
}
inline void from_json(const nlohmann::json &j, DeleteJob &r)
{
    parse::allow_only(j, {"job"});
    r.job = parse::job_id(j);
}
inline void from_json(const nlohmann::json &j, ListJobs &)
{
    parse::allow_only(j, {});
}
inline void from_json(const nlohmann::json &j, Status &)
{
    parse::allow_only(j, {});
}
inline void from_json(const nlohmann::json &j, Stats &)
{
    parse::allow_only(j, {});
}
inline void from_json(const nlohmann::json &j, Join &r)
{
    parse::allow_only(j, {"job", "rank", "addr", "port"});
    r.job = parse::job_id(j);
    r.rank = parse::rank(j);
    r.addr = parse::text(j, "addr");
    in_addr a{};
    if (inet_pton(AF_INET, r.addr.c_str(), &a) != 1)
        parse::refuse("'addr' must be an IPv4 address");
    r.port = static_cast<uint16_t>(parse::number(j, "port", 65535));
}
inline void from_json(const nlohmann::json &j, Leave &r)
{
    parse::allow_only(j, {"job", "rank"});
    r.job = parse::job_id(j);
    r.rank = parse::rank(j);
}
inline void from_json(const nlohmann::json &j, Evict &r)
{
    parse::allow_only(j, {"job", "rank"});
    r.job = parse::job_id(j);
    r.rank = parse::rank(j);
}
inline void from_json(const nlohmann::json &j, SetLogLevel &r)
{
    parse::allow_only(j, {"level"});
    r.level = parse::text(j, "level");
    for (const char *level : {"trace", "debug", "info", "warn", "error"})
        if (r.level == level)
            return;
    parse::refuse("'level' must be one of trace, debug, info, warn, error");
}
inline void from_json(const nlohmann::json &j, CreateJob &r)
{
    parse::allow_only(j, {"id", "workers", "gradient_elems", "policy", "timeout_ms", "evict_after",
                          "weight", "iterations", "host_path", "fanout", "chunk_elems"});
    if (j.contains("id"))
        r.id = parse::job_id(j, "id");
    r.workers = static_cast<uint32_t>(parse::number(j, "workers", job_rules::kMaxWorkers));
    r.gradient_elems = parse::number(j, "gradient_elems", job_rules::kMaxGradientElems);
    if (j.contains("policy")) {
        r.policy = parse::text(j, "policy");
        if (*r.policy != "wait" && *r.policy != "evict")
            parse::refuse("'policy' must be \"wait\" or \"evict\"");
    }
    r.timeout_ms = parse::optional_number<uint32_t>(j, "timeout_ms", 3600000);
    r.evict_after = parse::optional_number<uint32_t>(j, "evict_after", 1000);
    if (j.contains("weight")) {
        if (!j.at("weight").is_number())
            parse::refuse("'weight' must be a number");
        r.weight = j.at("weight").get<double>();
    }
    r.iterations = parse::optional_number<uint64_t>(j, "iterations", uint64_t{1} << 40);
    r.host_path = parse::optional_flag(j, "host_path");
    r.fanout = parse::optional_flag(j, "fanout");
    r.chunk_elems = parse::optional_number<uint32_t>(j, "chunk_elems", XAGG_MAX_CHUNK_ELEMS);
}

// --- Replies -------------------------------------------------------------------------------

struct Member {
    uint32_t rank = 0;
    std::string addr;  // IPv4, dotted
    uint16_t port = 0;
};

struct StragglerEvent {
    uint32_t chunk = 0;
    uint32_t round = 0;
    std::vector<uint32_t> missing_ranks;
    uint64_t waited_ms = 0;
};

// How far a job's rounds have got (null rounds before the first contribution).
struct Progress {
    std::optional<uint32_t> newest_round, oldest_round;
    uint32_t chunks_complete_at_newest = 0;
    uint32_t chunks_in_flight = 0;
    uint32_t chunks_not_started = 0;
};

// A job as create_job, show_job, evict, join and list_jobs describe it.
struct Job {
    uint32_t id = 0;
    uint32_t workers = 0;
    uint64_t gradient_elems = 0;
    uint32_t chunk_elems = XAGG_CHUNK_ELEMS;  // values per chunk: 768, or 2048 (jumbo)
    uint32_t chunks = 0;                      // chunks of that size
    uint32_t region_base = 0;                 // first slot position (768 values each)
    uint32_t fast_path_chunks = 0;
    uint32_t host_path_chunks = 0;
    std::string policy;  // wait | evict
    uint32_t timeout_ms = 0;
    uint32_t evict_after = 0;
    std::vector<uint32_t> evicted_ranks;
    uint64_t evictions = 0;
    double weight = 1.0;
    uint64_t iterations = 0;
    uint64_t arrival = 0;
    uint32_t tag = 0;
    bool host_path = false;
    bool fanout = false;
    std::string group;  // IPv4 multicast group of results
    uint16_t group_port = 0;
    std::vector<Member> members;
    std::vector<StragglerEvent> straggler_events;
    uint64_t straggler_events_total = 0;
    std::optional<Progress> progress;  // left out of join's reply

    // The ranks whose contributions complete a chunk: every rank not evicted.
    size_t expected_members() const { return workers - evicted_ranks.size(); }
};

struct JobReply {  // create_job, show_job, evict
    Job job;
};

struct JoinReply {
    Job job;
    uint16_t aggregator_port = XAGG_DEFAULT_PORT;  // where the job's chunks go
    uint64_t key = 0;  // the job key every contribution carries (only a join hands it out)
};

struct JobList {  // list_jobs
    std::vector<Job> jobs;
};

// What a worker needs of status's reply; all a tenant's token is told.
struct StatusBrief {
    std::string version;
    uint16_t port = XAGG_DEFAULT_PORT;
};

// The same quantity on each path.
struct PerPath {
    uint64_t fast = 0, host = 0;
};

// status, in full (the admin's token, or the Unix socket). Its JSON is one flat object:
// StatusBrief's fields, these beside them, and the node's when the daemon describes its node.
struct StatusMemory {
    std::string policy;
    uint64_t capacity_positions = 0, used_positions = 0;
    uint64_t capacity_bytes = 0, used_bytes = 0;  // of the slot maps
};
struct StatusXdp {  // as the kernel reports it now
    std::string configured_mode, mode;
    bool attached = false;  // the program the kernel runs there is xaggd's
    uint32_t prog_id = 0;
};
struct StatusKernel {
    std::string release;
    std::optional<std::string> fastpath_variant;  // pull | copy; none with datapath = host
    bool jumbo_chunks = false;
    std::string jumbo_refused_because;
};
struct StatusNode {
    std::string interface, datapath;  // datapath: xdp | host
    std::optional<StatusXdp> xdp;     // none with datapath = host
    std::string control_socket, control_tcp_address, metrics_address;
    std::optional<StatusKernel> kernel;
};
struct StatusDetails {
    int64_t pid = 0;
    double uptime_seconds = 0;
    std::optional<uint32_t> default_chunk_elems;
    uint64_t jobs = 0, members = 0;
    StatusMemory memory;
    PerPath positions, aggregated_bytes;  // positions: slot positions of the jobs, by path
    std::optional<StatusNode> node;
};
struct StatusReply {
    StatusBrief brief;
    std::optional<StatusDetails> details;  // none for a tenant's token
};

// stats: both paths' counters by name, and what they add up to.
struct StatsReply {
    std::map<std::string, uint64_t> counters, host_counters;
    PerPath aggregated_bytes, chunks_completed;
    double uptime_seconds = 0;
    uint64_t jobs = 0, fast_path_positions_capacity = 0, fast_path_positions_used = 0;
    uint64_t requests = 0, request_errors = 0;
};

// --- JSON ----------------------------------------------------------------------------------

namespace detail {
template <typename T>
nlohmann::json optional_json(const std::optional<T> &v)
{
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
template <typename T>
std::optional<T> optional_from(const nlohmann::json &j, const char *key)
{
    if (!j.contains(key) || j.at(key).is_null())
        return std::nullopt;
    return j.at(key).get<T>();
}
}  // namespace detail

inline void to_json(nlohmann::json &j, const Member &m)
{
    j = {{"rank", m.rank}, {"addr", m.addr}, {"port", m.port}};
}
inline void from_json(const nlohmann::json &j, Member &m)
{
    j.at("rank").get_to(m.rank);
    j.at("addr").get_to(m.addr);
    j.at("port").get_to(m.port);
}

inline void to_json(nlohmann::json &j, const StragglerEvent &e)
{
    j = {{"chunk", e.chunk},
         {"round", e.round},
         {"missing_ranks", e.missing_ranks},
         {"waited_ms", e.waited_ms}};
}
inline void from_json(const nlohmann::json &j, StragglerEvent &e)
{
    j.at("chunk").get_to(e.chunk);
    j.at("round").get_to(e.round);
    j.at("missing_ranks").get_to(e.missing_ranks);
    j.at("waited_ms").get_to(e.waited_ms);
}

inline void to_json(nlohmann::json &j, const Progress &p)
{
    j = {{"newest_round", detail::optional_json(p.newest_round)},
         {"oldest_round", detail::optional_json(p.oldest_round)},
         {"chunks_complete_at_newest", p.chunks_complete_at_newest},
         {"chunks_in_flight", p.chunks_in_flight},
         {"chunks_not_started", p.chunks_not_started}};
}
inline void from_json(const nlohmann::json &j, Progress &p)
{
    p.newest_round = detail::optional_from<uint32_t>(j, "newest_round");
    p.oldest_round = detail::optional_from<uint32_t>(j, "oldest_round");
    j.at("chunks_complete_at_newest").get_to(p.chunks_complete_at_newest);
    j.at("chunks_in_flight").get_to(p.chunks_in_flight);
    j.at("chunks_not_started").get_to(p.chunks_not_started);
}

inline void to_json(nlohmann::json &j, const Job &x)
{
    j = {{"id", x.id},
         {"workers", x.workers},
         {"gradient_elems", x.gradient_elems},
         {"chunk_elems", x.chunk_elems},
         {"chunks", x.chunks},
         {"region_base", x.region_base},
         {"fast_path_chunks", x.fast_path_chunks},
         {"host_path_chunks", x.host_path_chunks},
         {"policy", x.policy},
         {"timeout_ms", x.timeout_ms},
         {"evict_after", x.evict_after},
         {"evicted_ranks", x.evicted_ranks},
         {"evictions", x.evictions},
         {"weight", x.weight},
         {"iterations", x.iterations},
         {"arrival", x.arrival},
         {"tag", x.tag},
         {"host_path", x.host_path},
         {"fanout", x.fanout},
         {"group", x.group},
         {"group_port", x.group_port},
         {"members", x.members},
         {"straggler_events", x.straggler_events},
         {"straggler_events_total", x.straggler_events_total},
         {"progress", x.progress ? nlohmann::json(*x.progress) : nlohmann::json(nullptr)}};
}
inline void from_json(const nlohmann::json &j, Job &x)
{
    j.at("id").get_to(x.id);
    j.at("workers").get_to(x.workers);
    j.at("gradient_elems").get_to(x.gradient_elems);
    j.at("chunk_elems").get_to(x.chunk_elems);
    j.at("chunks").get_to(x.chunks);
    j.at("region_base").get_to(x.region_base);
    j.at("fast_path_chunks").get_to(x.fast_path_chunks);
    j.at("host_path_chunks").get_to(x.host_path_chunks);
    j.at("policy").get_to(x.policy);
    j.at("timeout_ms").get_to(x.timeout_ms);
    j.at("evict_after").get_to(x.evict_after);
    j.at("evicted_ranks").get_to(x.evicted_ranks);
    j.at("evictions").get_to(x.evictions);
    j.at("weight").get_to(x.weight);
    j.at("iterations").get_to(x.iterations);
    j.at("arrival").get_to(x.arrival);
    j.at("tag").get_to(x.tag);
    j.at("host_path").get_to(x.host_path);
    j.at("fanout").get_to(x.fanout);
    j.at("group").get_to(x.group);
    j.at("group_port").get_to(x.group_port);
    j.at("members").get_to(x.members);
    j.at("straggler_events").get_to(x.straggler_events);
    j.at("straggler_events_total").get_to(x.straggler_events_total);
    x.progress = detail::optional_from<Progress>(j, "progress");
}

inline void to_json(nlohmann::json &j, const JobReply &r)
{
    j = {{"job", r.job}};
}
inline void from_json(const nlohmann::json &j, JobReply &r)
{
    j.at("job").get_to(r.job);
}

inline void to_json(nlohmann::json &j, const JoinReply &r)
{
    j = {{"job", r.job},
         {"aggregator", {{"port", r.aggregator_port}}},
         {"key", job_key_text(r.key)}};
}
inline void from_json(const nlohmann::json &j, JoinReply &r)
{
    j.at("job").get_to(r.job);
    j.at("aggregator").at("port").get_to(r.aggregator_port);
    const auto key = parse_job_key(j.at("key").get<std::string>());
    if (!key)
        throw nlohmann::json::type_error::create(302, "key is not 16 hex digits", &j);
    r.key = *key;
}

inline void to_json(nlohmann::json &j, const JobList &r)
{
    j = {{"jobs", r.jobs}};
}
inline void from_json(const nlohmann::json &j, JobList &r)
{
    j.at("jobs").get_to(r.jobs);
}

inline void to_json(nlohmann::json &j, const StatusBrief &r)
{
    j = {{"version", r.version}, {"port", r.port}};
}
inline void from_json(const nlohmann::json &j, StatusBrief &r)
{
    j.at("version").get_to(r.version);
    j.at("port").get_to(r.port);
}

inline void to_json(nlohmann::json &j, const PerPath &r)
{
    j = {{"fast", r.fast}, {"host", r.host}};
}
inline void from_json(const nlohmann::json &j, PerPath &r)
{
    j.at("fast").get_to(r.fast);
    j.at("host").get_to(r.host);
}
inline void to_json(nlohmann::json &j, const StatusReply &r)
{
    j = r.brief;
    if (!r.details)
        return;
    const StatusDetails &d = *r.details;
    j["pid"] = d.pid;
    j["uptime_seconds"] = d.uptime_seconds;
    if (d.default_chunk_elems)
        j["default_chunk_elems"] = *d.default_chunk_elems;
    j["jobs"] = d.jobs;
    j["members"] = d.members;
    j["memory"] = {{"policy", d.memory.policy},
                   {"capacity_positions", d.memory.capacity_positions},
                   {"used_positions", d.memory.used_positions},
                   {"capacity_bytes", d.memory.capacity_bytes},
                   {"used_bytes", d.memory.used_bytes}};
    j["positions"] = d.positions;
    j["aggregated_bytes"] = d.aggregated_bytes;
    if (!d.node)
        return;
    const StatusNode &n = *d.node;
    j["interface"] = n.interface;
    j["datapath"] = n.datapath;
    j["xdp"] = n.xdp ? nlohmann::json{{"configured_mode", n.xdp->configured_mode},
                                      {"mode", n.xdp->mode},
                                      {"attached", n.xdp->attached},
                                      {"prog_id", n.xdp->prog_id}}
                     : nlohmann::json(nullptr);
    j["control"] = {{"socket", n.control_socket}, {"tcp_address", n.control_tcp_address}};
    j["metrics_address"] = n.metrics_address;
    if (n.kernel)
        j["kernel"] = {{"release", n.kernel->release},
                       {"fastpath_variant", detail::optional_json(n.kernel->fastpath_variant)},
                       {"jumbo_chunks", n.kernel->jumbo_chunks},
                       {"jumbo_refused_because", n.kernel->jumbo_refused_because}};
}
inline void from_json(const nlohmann::json &j, StatusReply &r)
{
    j.get_to(r.brief);
    if (!j.contains("pid"))  // a tenant's token is told the brief only
        return;
    StatusDetails &d = r.details.emplace();
    j.at("pid").get_to(d.pid);
    j.at("uptime_seconds").get_to(d.uptime_seconds);
    d.default_chunk_elems = detail::optional_from<uint32_t>(j, "default_chunk_elems");
    j.at("jobs").get_to(d.jobs);
    j.at("members").get_to(d.members);
    const nlohmann::json &m = j.at("memory");
    d.memory.policy = m.value("policy", std::string());
    m.at("capacity_positions").get_to(d.memory.capacity_positions);
    m.at("used_positions").get_to(d.memory.used_positions);
    m.at("capacity_bytes").get_to(d.memory.capacity_bytes);
    m.at("used_bytes").get_to(d.memory.used_bytes);
    j.at("positions").get_to(d.positions);
    j.at("aggregated_bytes").get_to(d.aggregated_bytes);
    if (!j.contains("interface"))  // a daemon that does not describe its node
        return;
    StatusNode &n = d.node.emplace();
    j.at("interface").get_to(n.interface);
    j.at("datapath").get_to(n.datapath);
    if (const nlohmann::json &x = j.at("xdp"); !x.is_null())
        n.xdp = StatusXdp{x.at("configured_mode"), x.at("mode"), x.at("attached"), x.at("prog_id")};
    j.at("control").at("socket").get_to(n.control_socket);
    j.at("control").at("tcp_address").get_to(n.control_tcp_address);
    j.at("metrics_address").get_to(n.metrics_address);
    if (j.contains("kernel")) {
        const nlohmann::json &k = j.at("kernel");
        n.kernel =
            StatusKernel{k.at("release"), detail::optional_from<std::string>(k, "fastpath_variant"),
                         k.at("jumbo_chunks"), k.at("jumbo_refused_because")};
    }
}

inline void to_json(nlohmann::json &j, const StatsReply &r)
{
    j = {{"counters", r.counters},
         {"host_counters", r.host_counters},
         {"aggregated_bytes", r.aggregated_bytes},
         {"chunks_completed", r.chunks_completed},
         {"uptime_seconds", r.uptime_seconds},
         {"jobs", r.jobs},
         {"fast_path_positions_capacity", r.fast_path_positions_capacity},
         {"fast_path_positions_used", r.fast_path_positions_used},
         {"requests", r.requests},
         {"request_errors", r.request_errors}};
}
inline void from_json(const nlohmann::json &j, StatsReply &r)
{
    j.at("counters").get_to(r.counters);
    j.at("host_counters").get_to(r.host_counters);
    j.at("aggregated_bytes").get_to(r.aggregated_bytes);
    j.at("chunks_completed").get_to(r.chunks_completed);
    j.at("uptime_seconds").get_to(r.uptime_seconds);
    j.at("jobs").get_to(r.jobs);
    j.at("fast_path_positions_capacity").get_to(r.fast_path_positions_capacity);
    j.at("fast_path_positions_used").get_to(r.fast_path_positions_used);
    j.at("requests").get_to(r.requests);
    j.at("request_errors").get_to(r.request_errors);
}

}  // namespace xagg::api
