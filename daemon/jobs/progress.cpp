// SPDX-License-Identifier: MIT
#include "daemon/jobs/progress.hpp"

#include <map>

namespace xagg::daemon {
namespace {

// Rounds compare in serial-number order, as the slot rule does (include/xagg/slot.h).
bool newer(uint32_t a, uint32_t b)
{
    return static_cast<int32_t>(a - b) > 0;
}

}  // namespace

JobProgress job_progress(const Job &job, const std::vector<SlotState> &slots)
{
    struct Latest {
        uint32_t round;
        bool complete;
    };
    const uint64_t members = job.member_bitmap();
    std::map<uint32_t, Latest> latest;  // by the job's chunk (a jumbo chunk's parts are one)
    for (const SlotState &s : slots) {
        if (s.tag != job.tag || s.seen == 0 || s.chunk >= job.positions)
            continue;
        Latest here{s.round, (s.seen & members) == members};
        auto [it, inserted] = latest.emplace(s.chunk / job.parts(), here);
        if (!inserted && newer(s.round, it->second.round))
            it->second = here;
    }
    JobProgress p;
    p.not_started = job.wire_chunks() - static_cast<uint32_t>(latest.size());
    for (const auto &[chunk, l] : latest) {
        if (!p.newest_round || newer(l.round, *p.newest_round))
            p.newest_round = l.round;
        if (!p.oldest_round || newer(*p.oldest_round, l.round))
            p.oldest_round = l.round;
        p.in_flight += !l.complete;
    }
    for (const auto &[chunk, l] : latest)
        p.complete_at_newest += l.complete && l.round == *p.newest_round;
    return p;
}

api::Progress to_api(const JobProgress &p)
{
    return {p.newest_round, p.oldest_round, p.complete_at_newest, p.in_flight, p.not_started};
}

}  // namespace xagg::daemon
