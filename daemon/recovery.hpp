// SPDX-License-Identifier: MIT
// What survives a crash and how a start picks it up: the job table on disk (its own versioned
// schema, daemon/state_schema.hpp), the marker that says a memory move was under way, and the
// replay of the saved table into both paths.
#pragma once

#include <chrono>
#include <string>

#include "daemon/datapath/stores.hpp"
#include "daemon/jobs/job_table.hpp"

namespace xagg::daemon {

// The job table on disk: written to a temporary file and renamed, so a crash mid-write leaves
// the previous version.
class StateFile {
public:
    explicit StateFile(const std::string &dir) : path_(dir + "/jobs.json") {}
    bool exists() const;
    // Throws std::runtime_error naming the file on anything it cannot take.
    void load_into(JobTable &jobs) const;
    void save(const JobTable &jobs) const;
    void remove() const;
    const std::string &path() const { return path_; }

private:
    std::string path_;
};

// A crash in the middle of moving memory leaves the pinned maps in neither the saved layout nor
// the next: this file says so, and the next start rebuilds the maps from the saved table
// rather than trust them. Set before a move's first slot changes hands, cleared once the table
// after the move is saved.
class MoveMarker {
public:
    explicit MoveMarker(const std::string &dir) : path_(dir + "/moving") {}
    void set() const;
    void clear() const;
    bool present() const;

private:
    std::string path_;
};

// The maps a previous run pinned, by name (under bpffs_dir).
inline constexpr const char *kPinnedMapNames[] = {"jobs", "members", "slots", "counters"};

// Pinned maps without a saved job table hold jobs nobody knows: removes them, so the fast path
// starts from nothing.
void forget_orphaned_maps(const StateFile &state, const std::string &bpffs_dir);

// Host-path slot files (daemon/datapath/host_slots.hpp) of jobs the table does not hold: a job
// deleted, or created, by a run that stopped before its table was saved.
void forget_host_slots_of_other_jobs(const JobTable &jobs, const std::string &dir);

struct Recovery {
    size_t jobs = 0;
    bool maps_rebuilt = false;  // the fast path's maps were new and written from the table
    bool crashed_mid_move = false;
    // Every job was brought whole to the host path (a move had been cut short): the caller
    // divides the fast path's memory again (ControlApi::restore_layout()).
    bool layout_to_restore = false;
};

// Loads the saved table (if any) and replays it: into the host path always (whose slots a
// restart finds where they were, host_slots.hpp), into the fast path (`fast`, null on a
// host-only node) when its maps are new (`maps_reused` false: after a reboot or an upgrade that
// changed their layout; the sums in flight are then lost, and workers that already had a result
// others miss wait for it in vain, which is why an upgrade drains its jobs first).
// After a crash in the middle of a move, with the maps reused, nothing is lost either: the fast
// path stops routing every job, waits `grace` for programs still adding, and every copy of
// each job's slots (in the region the table saved, in the one the fast path routed, on the host
// path) is merged on the host path, the latest state of each slot winning (a later round, or
// more contributions of the same one); the jobs then hold no fast-path memory until the caller
// restores the layout. Clears the marker.
Recovery recover(const StateFile &state, const MoveMarker &marker, JobTable &jobs, FastMaps *fast,
                 HostStore &host, bool maps_reused,
                 std::chrono::microseconds grace = std::chrono::microseconds(2000));

}  // namespace xagg::daemon
