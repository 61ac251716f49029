// SPDX-License-Identifier: MIT
// Straggler detection: a chunk-round partial for longer than its job's timeout is an event that
// names the ranks it waits for. Pure logic over slot snapshots; the daemon feeds it periodically.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "jobs.hpp"
#include "xagg/fastpath.h"

namespace xagg::daemon {

struct StragglerEvent {
    uint32_t job = 0;
    uint32_t chunk = 0;
    uint32_t round = 0;
    uint64_t missing = 0;    // bitmap of the ranks not yet counted
    uint64_t waited_ms = 0;  // since the round's first contribution
};

class StragglerWatch {
public:
    static constexpr size_t kRecent = 16;

    // `slots` are the job's region, two per chunk (even round, odd round). Returns the events
    // that are new since the previous scan: each overdue chunk-round is reported once.
    std::vector<StragglerEvent> scan(const Job &job, const std::vector<xagg_slot> &slots,
                                     uint64_t now_ns);
    void forget(uint32_t job);

    const std::deque<StragglerEvent> &recent(uint32_t job) const;
    uint64_t total(uint32_t job) const;

private:
    struct PerJob {
        std::set<std::pair<uint32_t, uint32_t>> overdue;  // (chunk, round) seen overdue last scan
        std::deque<StragglerEvent> recent;
        uint64_t total = 0;
    };
    std::map<uint32_t, PerJob> jobs_;
};

}  // namespace xagg::daemon
