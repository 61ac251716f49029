// SPDX-License-Identifier: MIT
// What BothPaths and recovery need of each path, as interfaces: the fast path's maps
// (FastPathStore adapts lib/fastpath's FastPath) and the host-side parameter server (HostPs).
// Unit tests put fakes behind them to drive the move protocol step by step.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <span>
#include <vector>

#include "daemon/datapath/datapath.hpp"
#include "daemon/jobs/job_table.hpp"
#include "xagg/counters.hpp"
#include "xagg/fastpath.h"

namespace xagg::daemon {

// The fast path's maps, in slot indices (two per chunk: 2 * (region_base + chunk) + parity).
class FastStore {
public:
    using SlotBatchFn = std::function<void(uint32_t first_slot, std::span<const xagg_slot>)>;

    virtual ~FastStore() = default;
    virtual void put_job(const Job &job) = 0;
    virtual void delete_job(uint32_t job_id) = 0;
    virtual void put_member(uint32_t job_id, const Member &member) = 0;
    virtual void delete_member(uint32_t job_id, uint32_t rank) = 0;
    // The region (base, positions) the fast path routes the job's chunks to now, if any.
    virtual std::optional<std::pair<uint32_t, uint32_t>> routed(uint32_t job_id) const = 0;
    // Zeroes the slots of chunks [base, base + chunks).
    virtual void clear_region(uint32_t base, uint32_t chunks) = 0;
    // Slots [first, first + count), each read under its lock, a batch at a time.
    virtual void read_slots(uint32_t first, uint32_t count, const SlotBatchFn &fn) const = 0;
    // Overwrites slot keys[i] with values[i], each under its lock.
    virtual void write_slots(std::span<const uint32_t> keys, std::span<const xagg_slot> values) = 0;
    virtual Counters counters() const = 0;
};

// The host-side parameter server, as BothPaths drives it.
class HostStore {
public:
    // Slots handed over by export_slots: the chunk indices, and two slots each.
    struct Exported {
        std::vector<uint32_t> chunks;
        std::vector<xagg_slot> slots;
    };

    virtual ~HostStore() = default;
    // The job as the host path serves it: its chunks from job.region_chunks on (the fast path
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
