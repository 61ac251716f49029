// SPDX-License-Identifier: MIT
#include "daemon/jobs/stragglers.hpp"

namespace xagg::daemon {

std::vector<StragglerEvent> StragglerWatch::scan(const Job &job,
                                                 const std::vector<SlotState> &slots,
                                                 uint64_t now_ns)
{
    PerJob &state = jobs_[job.id];
    std::set<std::pair<uint32_t, uint32_t>> overdue;
    std::vector<StragglerEvent> events;
    const uint64_t full = job.member_bitmap();
    const uint64_t timeout_ns = uint64_t{job.timeout_ms} * 1000000;
    uint64_t waiting_for = 0;
    for (const SlotState &s : slots) {
        if (s.tag != job.tag || s.seen == 0 || (s.seen & full) == full)
            continue;  // unused, or complete
        if (now_ns < s.started_ns || now_ns - s.started_ns < timeout_ns)
            continue;
        // Reported by the job's chunk: a jumbo chunk's parts are one chunk, late as one.
        auto key = std::pair{s.chunk / job.parts(), s.round};
        waiting_for |= full & ~s.seen;
        if (!overdue.insert(key).second || state.overdue.count(key))
            continue;  // a further part, or already reported
        StragglerEvent e{job.id, key.first, s.round, full & ~s.seen,
                         (now_ns - s.started_ns) / 1000000};
        events.push_back(e);
        state.recent.push_back(e);
        if (state.recent.size() > kRecent)
            state.recent.pop_front();
        state.total++;
    }
    state.overdue = std::move(overdue);
    for (uint32_t r = 0; r < XAGG_MAX_WORKERS; r++) {
        if (!(waiting_for >> r & 1)) {
            state.strikes[r] = 0;
        } else if (state.strikes[r] == 0 || now_ns - state.last_strike_ns[r] >= timeout_ns) {
            state.strikes[r]++;
            state.last_strike_ns[r] = now_ns;
        }
    }
    return events;
}

uint64_t StragglerWatch::due_for_eviction(const Job &job) const
{
    auto it = jobs_.find(job.id);
    if (job.policy != StragglerPolicy::evict || it == jobs_.end())
        return 0;
    uint64_t due = 0;
    for (uint32_t r = 0; r < XAGG_MAX_WORKERS; r++)
        if (it->second.strikes[r] >= job.evict_after)
            due |= 1ull << r;
    return due & job.member_bitmap();
}

void StragglerWatch::pardon(uint32_t job, uint32_t rank)
{
    auto it = jobs_.find(job);
    if (it != jobs_.end() && rank < XAGG_MAX_WORKERS)
        it->second.strikes[rank] = 0;
}

void StragglerWatch::forget(uint32_t job)
{
    jobs_.erase(job);
}

const std::deque<StragglerEvent> &StragglerWatch::recent(uint32_t job) const
{
    static const std::deque<StragglerEvent> none;
    auto it = jobs_.find(job);
    return it == jobs_.end() ? none : it->second.recent;
}

uint64_t StragglerWatch::total(uint32_t job) const
{
    auto it = jobs_.find(job);
    return it == jobs_.end() ? 0 : it->second.total;
}

}  // namespace xagg::daemon
