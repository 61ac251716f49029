// SPDX-License-Identifier: MIT
// The records a cluster of xaggd nodes keeps in etcd (keys: cluster_keys.hpp), defined once:
// written by the nodes' agents and xaggctl, read by the agents, xaggctl and the client library.
//
//   PREFIX/nodes/NAME      {"name", "address", "port", "control_socket", "control_tcp_address",
//                           "capacity_chunks", "rate"}
//   ("capacity_chunks" counts slot positions; the record keeps the name every node of a
//   cluster being upgraded reads)
//   PREFIX/jobs/ID         {"workers", "gradient_elems", "partition_chunks", "chunk_elems"}
//   PREFIX/placement/ID    {"job", "job_revision", "partitions": [node of each partition],
//                           "nodes": [each node used, its record with "partitions": its count]}
//
// parse_* throw std::invalid_argument saying which record is wrong and how.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "xagg/job_rules.hpp"
#include "xagg/proto.h"

namespace xagg {

struct ClusterNode {
    std::string name, address;  // address: the IPv4 workers send chunks to
    uint16_t port = 0;          // the xagg UDP port
    std::string control_socket, control_tcp_address;
    uint64_t capacity_positions = 0;  // fast-path memory in slot positions
    double rate = 1;  // contributions/s it aggregates: placement's speed of the node
};

struct ClusterJob {
    uint32_t id = 0;  // from the key
    uint32_t workers = 0;
    uint64_t gradient_elems = 0;
    uint64_t partition_chunks =
        job_rules::kDefaultPartitionChunks;  // slot positions (a jumbo chunk takes several)
    // Values per chunk on the wire: XAGG_CHUNK_ELEMS, or XAGG_JUMBO_CHUNK_ELEMS where every
    // worker and node is on a 9000-byte MTU. Every node's share is a local job of this size.
    uint32_t chunk_elems = XAGG_CHUNK_ELEMS;
    int64_t revision = 0;  // of its spec in etcd (from the key's revision)
};

struct ClusterPlacement {
    uint32_t job = 0;
    int64_t job_revision = 0;             // the spec it was computed for
    std::vector<std::string> partitions;  // the node of each partition
};

// A node a placement uses, as workers read it: where to send, and its share of the partitions.
struct PlacedNode {
    ClusterNode node;
    uint32_t partitions = 0;
};

namespace cluster_records {

inline nlohmann::json parse_json(const std::string &value, const std::string &what)
{
    try {
        return nlohmann::json::parse(value);
    } catch (const nlohmann::json::exception &e) {
        throw std::invalid_argument(what + " is not JSON: " + e.what());
    }
}

inline nlohmann::json to_json(const ClusterNode &n)
{
    return {{"name", n.name},
            {"address", n.address},
            {"port", n.port},
            {"control_socket", n.control_socket},
            {"control_tcp_address", n.control_tcp_address},
            {"capacity_chunks", n.capacity_positions},
            {"rate", n.rate}};
}

inline ClusterNode node_from(const nlohmann::json &j)
{
    return {j.at("name").get<std::string>(),
            j.at("address").get<std::string>(),
            j.at("port").get<uint16_t>(),
            j.value("control_socket", ""),
            j.value("control_tcp_address", ""),
            j.at("capacity_chunks").get<uint64_t>(),
            j.value("rate", 1.0)};
}

inline ClusterNode parse_node(const std::string &value)
{
    const nlohmann::json j = parse_json(value, "a node record");
    try {
        return node_from(j);
    } catch (const nlohmann::json::exception &e) {
        throw std::invalid_argument(std::string("a node record lacks a field: ") + e.what());
    }
}

inline nlohmann::json to_json(const ClusterJob &j)
{
    return {{"workers", j.workers},
            {"gradient_elems", j.gradient_elems},
            {"partition_chunks", j.partition_chunks},
            {"chunk_elems", j.chunk_elems}};
}

inline ClusterJob parse_job(uint32_t id, const std::string &value)
{
    const nlohmann::json j = parse_json(value, "job " + std::to_string(id));
    ClusterJob job;
    job.id = id;
    try {
        job.workers = j.at("workers").get<uint32_t>();
        job.gradient_elems = j.at("gradient_elems").get<uint64_t>();
        job.partition_chunks = j.value("partition_chunks", job_rules::kDefaultPartitionChunks);
        job.chunk_elems = j.value("chunk_elems", uint32_t{XAGG_CHUNK_ELEMS});  // before v3: 768
    } catch (const nlohmann::json::exception &e) {
        throw std::invalid_argument("job " + std::to_string(id) + ": " + e.what());
    }
    if (!job_rules::valid_job_id(id) || !job_rules::valid_workers(job.workers) ||
        job.gradient_elems == 0 || job.partition_chunks == 0)
        throw std::invalid_argument("job " + std::to_string(id) + ": id 1-" +
                                    std::to_string(job_rules::kMaxJobId) + ", workers 1-" +
                                    std::to_string(job_rules::kMaxWorkers) +
                                    ", gradient_elems and partition_chunks positive");
    if (!job_rules::valid_chunk_elems(job.chunk_elems))
        throw std::invalid_argument("job " + std::to_string(id) + ": chunk_elems " +
                                    std::to_string(job.chunk_elems) + " is neither " +
                                    job_rules::chunk_elems_choices("nor"));
    return job;
}

// A placement with the nodes it uses (from `nodes`, the live ones), each with its share.
inline nlohmann::json to_json(const ClusterPlacement &p, const std::vector<ClusterNode> &nodes)
{
    nlohmann::json used = nlohmann::json::array();
    for (const ClusterNode &n : nodes) {
        const auto k = std::count(p.partitions.begin(), p.partitions.end(), n.name);
        if (k) {
            nlohmann::json j = to_json(n);
            j["partitions"] = k;
            used.push_back(j);
        }
    }
    return {{"job", p.job},
            {"job_revision", p.job_revision},
            {"partitions", p.partitions},
            {"nodes", used}};
}

inline ClusterPlacement parse_placement(const std::string &value)
{
    const nlohmann::json j = parse_json(value, "a placement");
    try {
        return {j.at("job").get<uint32_t>(), j.at("job_revision").get<int64_t>(),
                j.at("partitions").get<std::vector<std::string>>()};
    } catch (const nlohmann::json::exception &e) {
        throw std::invalid_argument(std::string("a placement lacks a field: ") + e.what());
    }
}

// The nodes a placement record names, with their shares: what a worker needs to send.
inline std::vector<PlacedNode> parse_placed_nodes(const std::string &value)
{
    const nlohmann::json j = parse_json(value, "a placement");
    std::vector<PlacedNode> out;
    try {
        for (const nlohmann::json &n : j.at("nodes"))
            out.push_back({node_from(n), n.at("partitions").get<uint32_t>()});
    } catch (const nlohmann::json::exception &e) {
        throw std::invalid_argument(std::string("a placement's nodes are malformed: ") + e.what());
    }
    return out;
}

}  // namespace cluster_records
}  // namespace xagg
