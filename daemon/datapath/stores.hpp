// SPDX-License-Identifier: MIT
// What BothPaths and recovery need of the host-side parameter server (HostPs), as an interface;
// the fast path's is lib/fastpath/fast_maps.hpp, which FastPath implements itself. Unit tests put
// fakes behind both to drive the move protocol step by step.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <span>
#include <vector>

#include "daemon/datapath/datapath.hpp"
#include "daemon/jobs/job_table.hpp"
#include "lib/fastpath/fast_maps.hpp"
#include "xagg/counters.hpp"
#include "xagg/fastpath.h"

namespace xagg::daemon {

// The host-side parameter server, as BothPaths drives it.
class HostStore {
public:
    // Slots handed over by export_slots: their positions, and two slots each.
    struct Exported {
        std::vector<uint32_t> positions;
        std::vector<xagg_slot> slots;
    };

    virtual ~HostStore() = default;
    // The job as the host path serves it: its chunks from job.region_positions on (the fast path
    // has the others), members included.
    virtual void put_job(const Job &job) = 0;
    virtual void delete_job(uint32_t job_id) = 0;
    virtual void put_member(uint32_t job_id, const Member &member) = 0;
    virtual void delete_member(uint32_t job_id, uint32_t rank) = 0;
    // While held, datagrams of the job's chunks [first, end) are dropped (counted as
    // drop_moving): their slots are changing hands and retransmission recovers them. hold()
    // returns once nothing can still be adding into those chunks.
    virtual void hold(uint32_t job_id, uint32_t first, uint32_t end) = 0;
    virtual void release(uint32_t job_id) = 0;
    // Takes over the fast path's slots of chunks from `first_chunk` on (two per chunk); slots
    // that do not hold the job's chunk (another owner's tag or chunk) count as empty.
    virtual void import_slots(const Job &job, uint32_t first_chunk,
                              std::span<const xagg_slot> slots) = 0;
    // Takes each of the slots of positions from `first_position` on (two per position) that is
    // newer than the one the host path holds: a later round, or the same round with more
    // contributions (a slot's state only moves that way). Recovery after a crash in the middle
    // of a move merges every copy of a job's slots so.
    virtual void merge_slots(const Job &job, uint32_t first_position,
                             std::span<const xagg_slot> slots) = 0;
    // A copy of the slots of chunks [first, end) that hold anything. The host path keeps its
    // own: it no longer serves those chunks, and should a crash cut the move short, recovery
    // finds the state on one side or the other (merge_slots()); a chunk that comes back later
    // is imported over it.
    virtual Exported export_slots(uint32_t job_id, uint32_t first, uint32_t end) = 0;
    // The slots that hold a round of the job's host-path chunks.
    virtual std::vector<SlotState> slot_states(const Job &job) const = 0;
    virtual Counters counters() const = 0;
};

}  // namespace xagg::daemon
