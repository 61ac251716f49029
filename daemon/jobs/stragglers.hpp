// SPDX-License-Identifier: MIT
// Straggler detection: a chunk-round partial for longer than its job's timeout is an event that
// names the ranks it waits for. Pure logic over slot snapshots; the daemon feeds it periodically.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "daemon/jobs/job_table.hpp"
#include "daemon/jobs/slot_state.hpp"
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

    // `slots` are the job's partial or complete slots on both paths. Returns the events that
    // are new since the previous scan: each overdue chunk-round is reported once.
    std::vector<StragglerEvent> scan(const Job &job, const std::vector<SlotState> &slots,
                                     uint64_t now_ns);
    void forget(uint32_t job);
    // After a job's scan: its ranks that have been missing for `evict_after` consecutive
    // timeouts (a rank earns one strike per timeout_ms it keeps an overdue round waiting, and
    // loses them all at the first scan it keeps none waiting). Only under the evict policy.
    uint64_t due_for_eviction(const Job &job) const;
    // Clears a rank's strikes (after it was evicted, or when it joins again).
    void pardon(uint32_t job, uint32_t rank);

    const std::deque<StragglerEvent> &recent(uint32_t job) const;
    uint64_t total(uint32_t job) const;

private:
    struct PerJob {
        std::set<std::pair<uint32_t, uint32_t>> overdue;  // (chunk, round) seen overdue last scan
        std::deque<StragglerEvent> recent;
        uint64_t total = 0;
        std::array<uint32_t, XAGG_MAX_WORKERS> strikes{};
        std::array<uint64_t, XAGG_MAX_WORKERS> last_strike_ns{};
    };
    std::map<uint32_t, PerJob> jobs_;
};

}  // namespace xagg::daemon
