// SPDX-License-Identifier: MIT
// The public Client: joins the job on each aggregator through its daemon's control API, then
// hands all-reduces to the engine.
#include <arpa/inet.h>
#include <unistd.h>

#include <cstdio>
#include <limits>
#include <string>

#include "lib/control/control_client.hpp"
#include "xagg/api.hpp"
#include "client/engine.hpp"
#include "client/local_group.hpp"
#include "lib/etcd/etcd_client.hpp"
#include "xagg/cluster_keys.hpp"
#include "xagg/cluster_records.hpp"
#include "lib/sys/mtu.hpp"
#include "client/tuner.hpp"
#include "xagg/client.hpp"

namespace xagg {
namespace {

using nlohmann::json;

control::Endpoint control_endpoint(const Aggregator &a)
{
    control::Endpoint e;
    e.socket_path = a.control_socket;
    e.host = a.control_host;
    e.token = a.token;
    e.tls = a.tls;
    return e;
}

ClientError::Kind kind_of(const control::ControlError &e)
{
    if (e.failure() == control::Failure::forbidden)
        return ClientError::Kind::refused;  // the worker was given the wrong tenant's token
    if (e.failure() != control::Failure::refused)
        return ClientError::Kind::unreachable;
    return e.refusal() == api::Refusal::no_such_job ? ClientError::Kind::job_deleted
                                                    : ClientError::Kind::refused;
}

in_addr ipv4(const std::string &text, const char *what)
{
    in_addr a{};
    if (inet_pton(AF_INET, text.c_str(), &a) != 1)
        throw ClientError(ClientError::Kind::invalid,
                          std::string(what) + " '" + text + "' is not an IPv4 address");
    return a;
}

// The port this rank sends from, which the daemon knows it by (ClientOptions::port).
uint16_t member_port(const ClientOptions &o, uint16_t group_port)
{
    if (o.port)
        return o.port;
    if (o.local_ranks <= 1)
        return group_port;
    const uint32_t port = uint32_t{group_port} + 1 + o.local_rank;
    if (port > 65535)
        throw ClientError(ClientError::Kind::invalid,
                          "group port " + std::to_string(group_port) + " + 1 + local rank " +
                              std::to_string(o.local_rank) + " is beyond 65535; give a port");
    return static_cast<uint16_t>(port);
}

// Joins (or checks the registration of) this rank, and describes the job for the engine.
client::Engine::Endpoint join(const Aggregator &a, const ClientOptions &o)
{
    control::ControlClient api(control_endpoint(a));
    try {
        const api::Job job = api.call_as<api::JobReply>(api::ShowJob{a.job}).job;
        client::Engine::Endpoint e;
        e.job = a.job;
        e.chunks = job.chunks;
        e.workers = job.workers;
        e.group = ipv4(job.group, "the job's group");
        e.group_port = job.group_port;
        e.member_port = member_port(o, job.group_port);
        e.aggregator = ipv4(a.address, "aggregator address");
        e.weight = a.weight;
        // A session starts its rounds after whatever an earlier session of this job left in
        // the slots (a round equal to an old one would be answered with the old sum). Read
        // before joining: no worker of this session sends before every rank has joined (the
        // rendezvous in the first all-reduce), so every worker reads the same.
        const std::optional<uint32_t> newest =
            job.progress ? job.progress->newest_round : std::nullopt;
        e.first_round = newest ? *newest + 2 : 0;
        if (o.rank >= e.workers)
            throw ClientError(ClientError::Kind::invalid,
                              "rank " + std::to_string(o.rank) + " is not below job " +
                                  std::to_string(a.job) + "'s " + std::to_string(e.workers) +
                                  " workers");
        e.chunk_elems = job.chunk_elems;
        // A jumbo job's frames need a 9000-byte MTU: said before joining, not found out by
        // every send failing.
        if (job.chunk_elems == XAGG_JUMBO_CHUNK_ELEMS)
            if (auto ifname = sys::interface_with_address(ipv4(o.local_address, "local address")))
                if (std::string problem = sys::chunk_mtu_problem(*ifname, XAGG_JUMBO_MIN_MTU);
                    !problem.empty())
                    throw ClientError(ClientError::Kind::invalid,
                                      "job " + std::to_string(a.job) + ": " + problem);
        if (o.join) {
            const auto joined = api.call_as<api::JoinReply>(
                api::Join{a.job, o.rank, o.local_address, e.member_port});
            e.port = joined.aggregator_port;
            e.key = joined.key;
        } else {
            const auto key = parse_job_key(a.key);
            if (!key)
                throw ClientError(ClientError::Kind::invalid,
                                  "with join off, the job's key must be given as 16 hex digits "
                                  "(xaggctl worker join prints it), not '" +
                                      a.key + "'");
            e.key = *key;
            e.port = api.call_as<api::StatusBrief>(api::Status{}).port;
        }
        return e;
    } catch (const control::ControlError &err) {
        throw ClientError(kind_of(err), "aggregator " + a.address + ", job " +
                                            std::to_string(a.job) + ": " + err.what());
    }
}

}  // namespace

Client::Client(const ClientOptions &options)
{
    if (options.aggregators.empty())
        throw ClientError(ClientError::Kind::invalid, "no aggregator given");
    if (options.local_ranks == 0 || options.local_rank >= options.local_ranks)
        throw ClientError(ClientError::Kind::invalid,
                          "local_rank " + std::to_string(options.local_rank) +
                              " is not below local_ranks " + std::to_string(options.local_ranks));
    if (options.window == 0 || options.partition_chunks == 0)
        throw ClientError(ClientError::Kind::invalid, "window and partition_chunks must be > 0");
    if (options.autotune && (options.tune_calls == 0 || options.tune_trials == 0))
        throw ClientError(ClientError::Kind::invalid, "tune_calls and tune_trials must be > 0");
    if (options.local_ranks == 0 || options.local_rank >= options.local_ranks)
        throw ClientError(ClientError::Kind::invalid,
                          "local_rank " + std::to_string(options.local_rank) +
                              " is not below local_ranks " + std::to_string(options.local_ranks));
    if (options.local_first &&
        (options.local_ranks < 2 || options.rank % options.local_ranks != options.local_rank))
        throw ClientError(ClientError::Kind::invalid,
                          "local_first needs local_ranks above 1 and ranks numbered host by host "
                          "(rank % local_ranks == local_rank; rank " +
                              std::to_string(options.rank) + ", local rank " +
                              std::to_string(options.local_rank) + " of " +
                              std::to_string(options.local_ranks) + ")");
    options_ = options;
    const std::string group =
        options.local_first
            ? client::local_group_name(options.aggregators.front().address,
                                       options.aggregators.front().job, options.local_address)
            : std::string();
    if (options.local_first && options.local_rank != 0) {
        // Not the host's member: the leader does everything that faces the aggregator.
        member_ = std::make_unique<client::LocalMember>(group, options.local_rank,
                                                        std::chrono::seconds(120));
        return;
    }
    ClientOptions as_member = options;
    if (options.local_first)
        as_member.rank = options.rank / options.local_ranks;  // the host's, in the job
    in_addr local = ipv4(options.local_address, "local address");
    // The socket never fragments (the fast path sees frames, not datagrams), so too small an MTU
    // would make every send fail and every all-reduce time out: better said once, up front.
    if (auto ifname = sys::interface_with_address(local))
        if (std::string problem = sys::chunk_mtu_problem(*ifname); !problem.empty())
            throw ClientError(ClientError::Kind::invalid, problem);
    std::vector<client::Engine::Endpoint> endpoints;
    for (const Aggregator &a : options.aggregators) {
        endpoints.push_back(join(a, as_member));
        if (endpoints.back().group_port != endpoints.front().group_port)
            throw ClientError(ClientError::Kind::invalid,
                              "the jobs' group ports differ; a worker receives on one port");
        if (endpoints.back().chunk_elems != endpoints.front().chunk_elems)
            throw ClientError(ClientError::Kind::invalid,
                              "the jobs' chunk sizes differ (" +
                                  std::to_string(endpoints.front().chunk_elems) + " and " +
                                  std::to_string(endpoints.back().chunk_elems) +
                                  " values); a tensor is cut into blocks of one size");
    }
    engine_ = std::make_unique<client::Engine>(as_member, endpoints, local);
    if (options.autotune) {
        client::TuneSpace space;
        space.trials = options.tune_trials;
        space.max_partition = client::Engine::kMaxPartition;
        // Under congestion control the credit follows the network, inside the configured
        // window; what is left to tune is the batch.
        if (options.congestion_control)
            space.min_window = space.max_window = options.window;
        tuner_ = std::make_unique<client::Tuner>(
            space, client::TuneSetting{options.window, options.partition_chunks});
        // The search runs on the grid; start on its point nearest the given values.
        apply(tuner_->current());
    }
    // When the engine gives up, the daemon says why: evicted, job gone, or not answering.
    auto aggregators = options.aggregators;
    const uint32_t rank = as_member.rank;
    engine_->diagnose = [aggregators, rank](const std::string &what, uint32_t job,
                                            std::optional<uint32_t> round) {
        for (const Aggregator &a : aggregators) {
            if (a.job != job)
                continue;
            try {
                const api::Job j = control::ControlClient(control_endpoint(a))
                                       .call_as<api::JobReply>(api::ShowJob{job})
                                       .job;
                for (uint32_t r : j.evicted_ranks)
                    if (r == rank)
                        return ClientError(ClientError::Kind::evicted,
                                           "rank " + std::to_string(rank) +
                                               " was evicted from job " + std::to_string(job) +
                                               " (" + what + ")");
                // The job's slots hold rounds newer than ours: another session was still sending
                // on this job after this one read where to start, and every packet of ours is a
                // stale round to the aggregator.
                const std::optional<uint32_t> newest =
                    j.progress ? j.progress->newest_round : std::nullopt;
                if (round && newest && static_cast<int32_t>(*newest - *round) > 0)
                    return ClientError(ClientError::Kind::timeout,
                                       what + ": job " + std::to_string(job) + " is at round " +
                                           std::to_string(*newest) +
                                           ", moved on by another session that was still "
                                           "sending when this one started: one session at a time "
                                           "per job (or a new job: xaggctl job create)");
            } catch (const control::ControlError &e) {
                if (kind_of(e) == ClientError::Kind::job_deleted)
                    return ClientError(
                        ClientError::Kind::job_deleted,
                        "job " + std::to_string(job) + " was deleted (" + what + ")");
                return ClientError(ClientError::Kind::timeout,
                                   what + "; and the daemon does not answer: " + e.what());
            }
        }
        return ClientError(ClientError::Kind::timeout,
                           what + " from job " + std::to_string(job) +
                               ": is the aggregator's data path reachable?");
    };
    if (options.local_first)
        leader_ = std::make_unique<client::LocalLeader>(
            group, options.local_ranks,
            client::LocalHello{engine_->workers(), static_cast<uint32_t>(engine_->chunk_elems())},
            std::chrono::seconds(120));
}

Client::~Client() = default;

AllReduce Client::submit(float *floats, int32_t *ints, size_t n, int priority)
{
    if (member_)
        return AllReduce(member_->submit(floats, ints, n));
    if (!leader_)
        return AllReduce(engine_->submit(floats, ints, n, priority));
    // The host's other ranks' k-th call with this one, in one contribution.
    auto buffers = leader_->gather(floats ? client::LocalKind::floats : client::LocalKind::ints, n);
    std::vector<float *> more_floats;
    std::vector<int32_t *> more_ints;
    for (auto &b : buffers) {
        if (floats)
            more_floats.push_back(reinterpret_cast<float *>(b.data()));
        else
            more_ints.push_back(b.data());
    }
    auto op =
        engine_->submit(floats, ints, n, priority, std::move(more_floats), std::move(more_ints));
    leader_->scatter(op, std::move(buffers));  // the buffers' memory stays where it is
    return AllReduce(op);
}

// The rendezvous: nothing is sent before every rank of every job has joined, so that every
// worker of the session read the same first round (see join()).
void Client::rendezvous()
{
    if (member_)
        return;  // the host's leader waits for the job's members
    std::call_once(rendezvous_, [this] {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        for (const Aggregator &a : options_.aggregators) {
            for (;;) {
                size_t joined = 0, expected = 0;
                try {
                    const api::Job j = control::ControlClient(control_endpoint(a))
                                           .call_as<api::JobReply>(api::ShowJob{a.job})
                                           .job;
                    joined = j.members.size();
                    expected = j.expected_members();
                } catch (const control::ControlError &e) {
                    throw ClientError(kind_of(e), "waiting for the job's workers to join: " +
                                                      std::string(e.what()));
                }
                if (joined >= expected)
                    break;
                if (std::chrono::steady_clock::now() > deadline)
                    throw ClientError(ClientError::Kind::timeout,
                                      "only " + std::to_string(joined) + " of " +
                                          std::to_string(expected) + " workers joined job " +
                                          std::to_string(a.job) + " in 120 s");
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
    });
}

AllReduce Client::allreduce_async(std::span<float> data, int priority)
{
    rendezvous();
    tune_point();
    return submit(data.data(), nullptr, data.size(), priority);
}

AllReduce Client::allreduce_async(std::span<int32_t> data, int priority)
{
    rendezvous();
    tune_point();
    return submit(nullptr, data.data(), data.size(), priority);
}

uint32_t create_job(const Aggregator &a, const JobRequest &request)
{
    api::CreateJob r;
    r.workers = request.workers;
    r.gradient_elems = request.gradient_elems;
    if (request.chunk_elems)
        r.chunk_elems = request.chunk_elems;
    try {
        return control::ControlClient(control_endpoint(a)).call_as<api::JobReply>(r).job.id;
    } catch (const control::ControlError &e) {
        throw ClientError(kind_of(e), e.what());
    }
}

void delete_job(const Aggregator &a)
{
    try {
        control::ControlClient(control_endpoint(a)).call(nlohmann::json(api::DeleteJob{a.job}));
    } catch (const control::ControlError &e) {
        throw ClientError(kind_of(e), e.what());
    }
}

Placement resolve_placement(const std::string &etcd_endpoint, uint32_t job,
                            const std::string &prefix, const std::string &token)
{
    std::optional<etcd::KeyValue> kv;
    try {
        kv = etcd::Client(etcd_endpoint).get(cluster_keys::placement(prefix, job));
    } catch (const etcd::Error &e) {
        throw ClientError(ClientError::Kind::unreachable, e.what());
    }
    if (!kv)
        throw ClientError(ClientError::Kind::invalid,
                          "job " + std::to_string(job) + " has no placement in etcd at " +
                              etcd_endpoint + " (under " + cluster_keys::placements(prefix) + ")");
    Placement p;
    p.revision = kv->mod_revision;
    try {
        for (const PlacedNode &n : cluster_records::parse_placed_nodes(kv->value)) {
            Aggregator a;
            a.address = n.node.address;
            a.job = job;
            a.weight = n.partitions;
            if (!n.node.control_socket.empty() &&
                access(n.node.control_socket.c_str(), F_OK) == 0) {
                a.control_socket = n.node.control_socket;
            } else {
                a.control_host = n.node.control_tcp_address;
                a.token = token;
            }
            p.aggregators.push_back(a);
        }
    } catch (const std::invalid_argument &e) {
        throw ClientError(ClientError::Kind::invalid,
                          "job " + std::to_string(job) + "'s placement: " + e.what());
    }
    if (p.aggregators.empty())
        throw ClientError(ClientError::Kind::invalid,
                          "job " + std::to_string(job) + "'s placement names no node");
    return p;
}

void Client::barrier()
{
    rendezvous();  // like an all-reduce: nothing is sent before every rank has joined
    int32_t here = 1;
    submit(nullptr, &here, 1, std::numeric_limits<int>::max()).wait();
}

unsigned Client::workers() const
{
    // With local-first reduction the job has a member a host: every rank is counted.
    const unsigned members = member_ ? member_->hello().members : engine_->workers();
    return options_.local_first ? members * options_.local_ranks : members;
}

size_t Client::chunk_elems() const
{
    return member_ ? member_->hello().chunk_elems : engine_->chunk_elems();
}

Tuning Client::tuning() const
{
    if (member_)
        return {};  // the host's leader tunes what it sends
    std::lock_guard g(tune_lock_);
    return tuning_locked();
}

Tuning Client::tuning_locked() const
{
    Tuning t;
    t.window = engine_->window();
    t.partition_chunks = engine_->partition_chunks();
    if (tuner_) {
        t.enabled = true;
        t.done = tuner_->done();
        t.trials = tuner_->trials();
        t.best_call_seconds = t.done ? tuner_->best().second : 0;
        t.start_call_seconds = start_call_seconds_;
    }
    return t;
}

void Client::apply(const client::TuneSetting &setting)
{
    engine_->set_tuning(options_.congestion_control ? options_.window : setting.window,
                        setting.partition_chunks);
}

void Client::tune_point()
{
    std::lock_guard g(tune_lock_);
    if (!tuner_ || tuner_->done())
        return;
    auto now = std::chrono::steady_clock::now();
    if (calls_++ == 0) {
        trial_started_ = now;
        return;
    }
    if ((calls_ - 1) % options_.tune_calls != 0)
        return;
    // A trial ends. Every worker is at this same call, so every worker all-reduces its
    // measurement here, first in line, and all of them get the same mean: they all make the
    // same choice and switch before the same call.
    double seconds = std::chrono::duration<double>(now - trial_started_).count();
    std::vector<int32_t> micros{static_cast<int32_t>(
        std::min(seconds * 1e6, double(std::numeric_limits<int32_t>::max() / XAGG_MAX_WORKERS)))};
    AllReduceReport r =
        AllReduce(engine_->submit(nullptr, micros.data(), 1, std::numeric_limits<int>::max()))
            .wait();
    double mean = double(micros[0]) / std::max(r.contributors, 1u) / 1e6 / options_.tune_calls;
    if (tuner_->trials() == 0)
        start_call_seconds_ = mean;
    tuner_->record(mean);
    apply(tuner_->current());
    if (tuner_->done()) {
        const Tuning t = tuning_locked();
        std::string line = "xagg: tuned after " + std::to_string(t.trials) + " trials: window " +
                           std::to_string(t.window) + ", partition_chunks " +
                           std::to_string(t.partition_chunks) + " (" +
                           std::to_string(t.best_call_seconds * 1e3) + " ms a call; " +
                           std::to_string(t.start_call_seconds * 1e3) +
                           " ms with the starting window " + std::to_string(options_.window) +
                           ", partition_chunks " + std::to_string(options_.partition_chunks) + ")";
        if (options_.log)
            options_.log(line);
        else
            std::fprintf(stderr, "%s\n", line.c_str());
    }
    trial_started_ = std::chrono::steady_clock::now();
}

bool AllReduce::ready() const
{
    std::lock_guard g(op_->lock);
    return op_->done;
}

AllReduceReport AllReduce::wait()
{
    if (!op_)
        throw ClientError(ClientError::Kind::invalid, "waiting on an empty AllReduce");
    std::unique_lock g(op_->lock);
    op_->finished.wait(g, [&] { return op_->done; });
    if (op_->error)
        std::rethrow_exception(op_->error);
    return op_->report;
}

}  // namespace xagg
