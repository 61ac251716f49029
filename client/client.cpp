// SPDX-License-Identifier: MIT
// The public Client: joins the job on each aggregator through its daemon's control API, then
// hands all-reduces to the engine.
#include <arpa/inet.h>

#include <string>

#include "control_client.hpp"
#include "engine.hpp"
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
    return e;
}

ClientError::Kind kind_of(const control::ControlError &e)
{
    if (e.failure() != control::Failure::refused)
        return ClientError::Kind::unreachable;
    return std::string(e.what()).find("no job") != std::string::npos
               ? ClientError::Kind::job_deleted
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

// Joins (or checks the registration of) this rank, and describes the job for the engine.
client::Engine::Endpoint join(const Aggregator &a, const ClientOptions &o)
{
    control::ControlClient api(control_endpoint(a));
    try {
        json job = api.call({{"op", "show_job"}, {"job", a.job}})["job"];
        client::Engine::Endpoint e;
        e.job = a.job;
        e.chunks = job["chunks"];
        e.workers = job["workers"];
        e.group = ipv4(job["group"].get<std::string>(), "the job's group");
        e.group_port = job["group_port"];
        e.aggregator = ipv4(a.address, "aggregator address");
        e.weight = a.weight;
        if (o.rank >= e.workers)
            throw ClientError(ClientError::Kind::invalid,
                              "rank " + std::to_string(o.rank) + " is not below job " +
                                  std::to_string(a.job) + "'s " + std::to_string(e.workers) +
                                  " workers");
        json reply;
        if (o.join)
            reply = api.call({{"op", "join"},
                              {"job", a.job},
                              {"rank", o.rank},
                              {"addr", o.local_address},
                              {"port", e.group_port}});
        else
            reply = api.call({{"op", "status"}});
        e.port = reply.contains("aggregator") ? reply["aggregator"]["port"].get<uint16_t>()
                                              : reply["port"].get<uint16_t>();
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
    if (options.window == 0 || options.partition_chunks == 0)
        throw ClientError(ClientError::Kind::invalid, "window and partition_chunks must be > 0");
    in_addr local = ipv4(options.local_address, "local address");
    std::vector<client::Engine::Endpoint> endpoints;
    for (const Aggregator &a : options.aggregators) {
        endpoints.push_back(join(a, options));
        if (endpoints.back().group_port != endpoints.front().group_port)
            throw ClientError(ClientError::Kind::invalid,
                              "the jobs' group ports differ; a worker receives on one port");
    }
    engine_ = std::make_unique<client::Engine>(options, endpoints, local);
    // When the engine gives up, the daemon says why: evicted, job gone, or not answering.
    auto aggregators = options.aggregators;
    const uint32_t rank = options.rank;
    engine_->diagnose = [aggregators, rank](const std::string &what, uint32_t job) {
        for (const Aggregator &a : aggregators) {
            if (a.job != job)
                continue;
            try {
                json j = control::ControlClient(control_endpoint(a))
                             .call({{"op", "show_job"}, {"job", job}})["job"];
                for (const auto &r : j["evicted_ranks"])
                    if (r == rank)
                        return ClientError(ClientError::Kind::evicted,
                                           "rank " + std::to_string(rank) +
                                               " was evicted from job " + std::to_string(job) +
                                               " (" + what + ")");
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
}

Client::~Client() = default;

AllReduce Client::allreduce_async(std::span<float> data, int priority)
{
    return AllReduce(engine_->submit(data.data(), nullptr, data.size(), priority));
}

AllReduce Client::allreduce_async(std::span<int32_t> data, int priority)
{
    return AllReduce(engine_->submit(nullptr, data.data(), data.size(), priority));
}

unsigned Client::workers() const
{
    return engine_->workers();
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
