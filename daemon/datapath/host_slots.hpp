// SPDX-License-Identifier: MIT
// The host path's slots of one job, in a file mapped shared (in a tmpfs directory, /run/xagg by
// default), so that they outlive the process as the fast path's slots outlive it in their pinned
// map: a daemon killed and started again finds every host-path sum where it was.
//
// Why it matters: a chunk's result is sent once and kept in its slot until every member has
// moved on (docs/PROTOCOL.md, "Rounds, loss and duplicates"). When a worker missed the result
// and the others already sent the next round, only that slot can answer it: they no longer hold
// their contributions to sum again. Slots kept in the process died with it, and such a worker
// then waited forever on a round nobody else would send (found by the crash fuzzer,
// tests/integration_crash_test.cpp, and in training through the torch backend).
//
// A kill can land in the middle of an update. Every update marks its slots as being written
// (the slot's lock word, which the host path does not otherwise use) before it changes them and
// clears the mark after; on opening, a slot still marked is cleared. That is safe: the slot then
// held a round whose result nobody has yet (an update that completes a chunk sends the result
// after it), or a round every member has the result of (a newer round was claiming it), and the
// workers' retransmissions rebuild it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "xagg/fastpath.h"

namespace xagg::daemon {

class HostSlots {
public:
    // The slots of job `job_id` (owner tag `tag`): `positions` slot positions of two slots each,
    // `parts` positions a chunk. With a directory, its file there is opened and kept if it holds
    // this very job (same id, tag and size), else made anew; without one, plain memory.
    HostSlots(const std::string &dir, uint32_t job_id, uint32_t tag, uint32_t positions,
              uint32_t parts);
    ~HostSlots();
    HostSlots(const HostSlots &) = delete;
    HostSlots &operator=(const HostSlots &) = delete;

    // The two slots (even and odd rounds) of a position.
    xagg_slot *pair(uint32_t position) { return slots_ + 2 * size_t{position}; }
    const xagg_slot *pair(uint32_t position) const { return slots_ + 2 * size_t{position}; }
    // Makes room for positions [first, end) on the filesystem before they are written, so that
    // a full tmpfs is an error here (std::runtime_error, naming the file) and never a SIGBUS
    // while summing.
    void reserve(uint32_t first, uint32_t end);
    // The job is gone: its file too (the mapping lives on while a serving thread still uses it).
    void remove_file();

    uint32_t tag() const { return tag_; }
    uint32_t positions() const { return positions_; }
    // Whether the slots were found from a previous run, and how many were cleared as torn.
    bool recovered() const { return recovered_; }
    uint32_t torn() const { return torn_; }

    // The file of a job in `dir`; and removing the files there of every job `keep` says no to
    // (none given: all of them).
    static std::string path(const std::string &dir, uint32_t job_id);
    static void remove_files(const std::string &dir,
                             const std::function<bool(uint32_t job_id)> &keep = {});

private:
    void clear_torn(uint32_t parts);

    std::string path_;
    uint32_t tag_, positions_;
    uint32_t reserved_from_;  // positions from here on have their room on the filesystem
    int fd_ = -1;
    size_t bytes_ = 0;
    void *map_ = nullptr;
    xagg_slot *slots_ = nullptr;
    bool recovered_ = false;
    uint32_t torn_ = 0;
};

// An update's mark (see above). The fences keep the compiler from moving the slot's writes
// across the mark; a killed process's stores are in memory in program order.
inline void begin_slot_write(xagg_slot &slot)
{
    slot.lock.val = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
}

inline void end_slot_write(xagg_slot &slot)
{
    std::atomic_signal_fence(std::memory_order_seq_cst);
    slot.lock.val = 0;
}

}  // namespace xagg::daemon
