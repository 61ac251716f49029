// SPDX-License-Identifier: MIT
// The datapath layer's contract with the rest of the daemon: where job changes are mirrored
// (both paths in xaggd, a recorder in unit tests) and what a scan reads of a slot
// (jobs/slot_state.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "daemon/jobs/job_table.hpp"
#include "daemon/jobs/slot_state.hpp"
#include "xagg/counters.hpp"

namespace xagg::daemon {

class Datapath {
public:
    virtual ~Datapath() = default;
    virtual void put_job(const Job &job) = 0;
    virtual void delete_job(uint32_t job_id) = 0;
    virtual void put_member(uint32_t job_id, const Member &member) = 0;
    virtual void delete_member(uint32_t job_id, uint32_t rank) = 0;
    // Re-dividing memory moves a job's chunks between the paths with their sums in flight, in
    // steps of a few hundred chunks, so that no chunk's traffic is held (dropped, counted as
    // drop_moving, recovered by retransmission) for longer than one step's copy.
    // shrink_fast: chunks [keep, job.region_positions) of the job's current region leave the fast
    // path for the host path; the fast path keeps the prefix [0, keep) where it is.
    // grow_fast: `job` carries its new region; chunks [from, job.region_positions) come to the
    // fast path there, with the host path's state of them; [0, from) are there already.
    virtual void shrink_fast(const Job &job, uint32_t keep) = 0;
    virtual void grow_fast(const Job &job, uint32_t from) = 0;
    // The job's slots on both paths that hold a round (for its progress and stragglers).
    virtual std::vector<SlotState> slot_states(const Job &) const { return {}; }
    virtual Counters counters() const = 0;
    // The host-side parameter server's outcomes, by the same names; zero where there is none.
    virtual Counters host_counters() const { return {}; }
};

}  // namespace xagg::daemon
