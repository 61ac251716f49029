// SPDX-License-Identifier: MIT
// Where a cluster of xaggd nodes keeps its state in etcd, under its prefix (docs/SCHEDULING.md):
// the one definition used by the nodes' agents, xaggctl and the client library.
//
//   PREFIX/nodes/NAME      a live node (under its lease)
//   PREFIX/jobs/ID         a cluster job's spec
//   PREFIX/placement/ID    where the job's partitions are aggregated
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace xagg::cluster_keys {

inline std::string nodes(const std::string &prefix)
{
    return prefix + "/nodes/";
}
inline std::string jobs(const std::string &prefix)
{
    return prefix + "/jobs/";
}
inline std::string placements(const std::string &prefix)
{
    return prefix + "/placement/";
}

inline std::string node(const std::string &prefix, const std::string &name)
{
    return nodes(prefix) + name;
}
inline std::string job(const std::string &prefix, uint32_t id)
{
    return jobs(prefix) + std::to_string(id);
}
inline std::string placement(const std::string &prefix, uint32_t id)
{
    return placements(prefix) + std::to_string(id);
}

// The job id a key under `dir` (jobs() or placements()) ends in; nullopt if it is not one.
inline std::optional<uint32_t> id_in(const std::string &dir, const std::string &key)
{
    if (key.size() <= dir.size() || key.compare(0, dir.size(), dir) != 0)
        return std::nullopt;
    uint64_t id = 0;
    for (char c : key.substr(dir.size())) {
        if (c < '0' || c > '9' || (id = id * 10 + uint64_t(c - '0')) > UINT32_MAX)
            return std::nullopt;
    }
    return static_cast<uint32_t>(id);
}

}  // namespace xagg::cluster_keys
