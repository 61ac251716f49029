// SPDX-License-Identifier: MIT
// Several aggregator nodes as one service, through etcd (docs/SCHEDULING.md, "Several nodes").
//
// The keys are include/xagg/cluster_keys.hpp's: a node's record under its lease (so it vanishes
// within the lease's TTL when the node dies), the operators' job specs, and the placements
// (where each partition of a job is aggregated, with the nodes' addresses: what workers read).
//
// Every xaggd with `etcd_endpoint` set runs a ClusterAgent: it registers its node under a lease
// and keeps it alive; it (re)places jobs whose placement is missing, names a node that is gone, or
// is older than the job's spec, writing with a compare-and-put on the placement's revision, so
// that when several nodes try at once etcd lets exactly one win; and it creates, resizes and
// deletes the local jobs that its placements say it holds, through its own control API. The
// placement itself is the pure core of placement.hpp; consensus is etcd's.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "xagg/cluster_records.hpp"

namespace xagg::etcd {
class Client;
}

namespace xagg::daemon {

using cluster_records::parse_job;
using cluster_records::parse_node;
using cluster_records::parse_placement;
using cluster_records::to_json;

// The slot positions `job` takes in all: its partitions are cut from these.
uint64_t job_chunks(const ClusterJob &job);

// The placement `job` should have: partitions already on live nodes stay there (moving them
// would cost a round of all its workers); the others (all of a new job's, a dead node's) are
// placed by sched::place over the live nodes, given the memory and load `others` already put
// on them. A placement whose partitions all live is redone from scratch only when that makes
// its slowest node at least 25% faster (a node joined later, or others' load left). Returns
// nullopt when `current` needs no change; empty partitions when no node lives.
std::optional<ClusterPlacement> replace(const ClusterJob &job,
                                        const std::optional<ClusterPlacement> &current,
                                        const std::vector<ClusterNode> &live,
                                        const std::vector<ClusterPlacement> &others,
                                        const std::vector<ClusterJob> &jobs);

// What node `me` must hold of `p` as a local job: its gradient_elems (0: nothing).
uint64_t local_share(const ClusterJob &job, const ClusterPlacement &p, const std::string &me);

struct ClusterConfig {
    std::string etcd_endpoint;
    std::string prefix = "/xagg";
    int lease_ttl = 5;  // seconds
    ClusterNode self;
    std::string own_control_socket;  // the agent changes local jobs through it
};

class ClusterAgent {
public:
    explicit ClusterAgent(ClusterConfig config);
    ~ClusterAgent();  // stops, and revokes the lease so that the node is gone at once
    void start();     // a thread: step() every 300 ms
    // One pass: keep the registration, place, reconcile. Throws on etcd or API failures.
    void step();

private:
    void register_node();
    void reconcile(const std::vector<ClusterJob> &jobs,
                   const std::map<uint32_t, ClusterPlacement> &placements);

    ClusterConfig config_;
    std::unique_ptr<etcd::Client> etcd_;  // the agent thread's; the destructor's once it ended
    int64_t lease_ = 0;
    std::set<uint32_t> managed_;  // local jobs this agent created
    std::atomic<bool> stop_{false};
    std::thread thread_;
    std::string last_error_;
};

}  // namespace xagg::daemon
