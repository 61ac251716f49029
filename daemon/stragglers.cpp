// SPDX-License-Identifier: MIT
#include "stragglers.hpp"

namespace xagg::daemon {

std::vector<StragglerEvent> StragglerWatch::scan(const Job &job,
                                                 const std::vector<xagg_slot> &slots,
                                                 uint64_t now_ns)
{
    PerJob &state = jobs_[job.id];
    std::set<std::pair<uint32_t, uint32_t>> overdue;
    std::vector<StragglerEvent> events;
    const uint64_t full = job.member_bitmap();
    const uint64_t timeout_ns = uint64_t{job.timeout_ms} * 1000000;
    for (size_t i = 0; i < slots.size(); i++) {
        const xagg_slot &s = slots[i];
        if (s.job_id != job.id || s.seen == 0 || (s.seen & full) == full)
            continue;  // unused, or complete
        if (now_ns < s.started_ns || now_ns - s.started_ns < timeout_ns)
            continue;
        auto key = std::pair{static_cast<uint32_t>(i / 2), s.round};
        overdue.insert(key);
        if (state.overdue.count(key))
            continue;  // already reported
        StragglerEvent e{job.id, key.first, s.round, full & ~s.seen,
                         (now_ns - s.started_ns) / 1000000};
        events.push_back(e);
        state.recent.push_back(e);
        if (state.recent.size() > kRecent)
            state.recent.pop_front();
        state.total++;
    }
    state.overdue = std::move(overdue);
    return events;
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
