// SPDX-License-Identifier: MIT
// What survives a crash and how a start picks it up: the job table on disk (its own versioned
// schema, daemon/state_schema.hpp), the marker that says a memory move was under way, and the
// replay of the saved table into both paths.
#pragma once

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

struct Recovery {
    size_t jobs = 0;
    bool maps_rebuilt = false;  // the fast path's maps were written from the table
    bool crashed_mid_move = false;
};

// Loads the saved table (if any) and replays it: into the host path always, into the fast
// path (`fast`, null on a host-only node) when its maps are new (`maps_reused` false: e.g.
// after a reboot) or a move was cut short. Rebuilt regions are cleared: sums in flight are
// lost and the workers' retransmissions rebuild them. Clears the marker.
Recovery recover(const StateFile &state, const MoveMarker &marker, JobTable &jobs, FastStore *fast,
                 HostStore &host, bool maps_reused);

}  // namespace xagg::daemon
