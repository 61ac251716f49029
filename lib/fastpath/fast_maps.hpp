// SPDX-License-Identifier: MIT
// What the daemon does to the fast path's maps while the program runs: jobs, members and slots,
// in the structs the BPF program reads (include/xagg/job_entry.hpp, include/xagg/fastpath.h).
// FastPath implements it over the real maps; the daemon's unit tests put a fake behind it to
// drive moves between the paths step by step. Slot indices are map keys: two per position,
// 2 * (region base + position) + round parity.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>

#include "xagg/counters.hpp"
#include "xagg/fastpath.h"
#include "xagg/job_entry.hpp"

namespace xagg {

class FastMaps {
public:
    // fn(index of the batch's first slot, its slots).
    using SlotBatchFn = std::function<void(uint32_t, std::span<const xagg_slot>)>;

    virtual ~FastMaps() = default;

    virtual void put_job(const JobSpec &job) = 0;
    virtual void delete_job(uint32_t job_id) = 0;
    // The region the program routes job `job_id`'s chunks to now (base, positions), if the
    // jobs map holds the job.
    virtual std::optional<std::pair<uint32_t, uint32_t>> routed_region(uint32_t job_id) const = 0;
    virtual void put_member(uint32_t job_id, uint32_t rank, in_addr addr, uint16_t port) = 0;
    virtual void delete_member(uint32_t job_id, uint32_t rank) = 0;
    // Zeroes the slots of positions [base, base + positions), so whatever they held is gone.
    virtual void clear_region(uint32_t base, uint32_t positions) = 0;
    // Slots [first, first + count), each read under its lock, a batch at a time: for scans and
    // moves of large regions (hundreds of MB), which need not hold a copy of them all.
    virtual void for_each_slot_batch(uint32_t first, uint32_t count,
                                     const SlotBatchFn &fn) const = 0;
    // Overwrites slot keys[i] with values[i], each under its lock; keys need not be contiguous.
    virtual void write_slots(std::span<const uint32_t> keys, std::span<const xagg_slot> values) = 0;
    virtual Counters counters() const = 0;
};

}  // namespace xagg
