// SPDX-License-Identifier: MIT
// How far a job's rounds have got, read off its slots on both paths: what an operator asks when a
// job seems slow ("which round is it in, and how many chunks of it are done?"). Pure logic.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "daemon/jobs/job_table.hpp"
#include "daemon/jobs/stragglers.hpp"
#include "xagg/api.hpp"

namespace xagg::daemon {

struct JobProgress {
    // The highest round any chunk has reached, and the lowest round a started chunk is still in
    // (each chunk counted at its latest round); empty before the first contribution.
    std::optional<uint32_t> newest_round, oldest_round;
    uint32_t complete_at_newest = 0;  // chunks whose newest round is the job's and complete
    uint32_t in_flight = 0;           // chunks whose latest round still waits for someone
    uint32_t not_started = 0;         // chunks no contribution has reached yet
};

// `slots` are the job's slots of both paths (unused ones are ignored).
JobProgress job_progress(const Job &job, const std::vector<SlotState> &slots);

// As the API reports it.
api::Progress to_api(const JobProgress &p);

}  // namespace xagg::daemon
