// SPDX-License-Identifier: MIT
// The job table: jobs, their members and their share of fast-path memory. Pure bookkeeping, no
// I/O: the control API validates requests against it and then mirrors changes into the maps.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/sched/memory_scheduler.hpp"
#include "xagg/api.hpp"
#include "xagg/check.h"
#include "xagg/fastpath.h"
#include "xagg/job_rules.hpp"
#include "xagg/proto.h"

namespace xagg::daemon {

struct Member {
    uint32_t rank = 0;
    in_addr addr{};
    uint16_t port = 0;
};

enum class StragglerPolicy { wait, evict };

// Memory is counted in slot positions, the unit of fast-path memory (include/xagg/fastpath.h):
// one per standard chunk and XAGG_JUMBO_SLOT_PARTS per jumbo chunk, so that every part of the
// daemon that sizes, moves and scans memory works alike for both sizes. "Chunk" means the wire
// chunk only: what faces users and the wire counts the job's own chunks (wire_chunks()).
struct Job {
    uint32_t id = 0;
    uint32_t workers = 0;
    uint64_t gradient_elems = 0;
    uint32_t chunk_elems = XAGG_CHUNK_ELEMS;  // values per chunk on the wire: 768 or 2048
    uint32_t positions = 0;                   // ceil(gradient_elems / chunk_elems) * parts()
    uint32_t region_base = 0;  // fast-path positions [region_base, region_base + region_positions)
    uint32_t region_positions = 0;  // positions on the fast path (a multiple of parts())
    StragglerPolicy policy = StragglerPolicy::wait;
    uint32_t timeout_ms = 0;
    uint32_t evict_after = 3;
    uint64_t evicted = 0;    // ranks removed by the evict policy; results no longer wait for them
    uint64_t evictions = 0;  // how many times a rank of this job was evicted
    double weight = 1.0;
    uint64_t iterations = 0;  // 0: not said
    uint64_t arrival = 0;     // creation order, for the policies that care
    uint32_t tag = 0;         // owner tag of its slots (xagg_job.tag): random, fresh per job
    uint64_t key = 0;  // the secret every contribution carries (xagg_job.key): random, never 0
    bool host_path = false;
    bool fanout = false;
    in_addr group{};
    uint16_t group_port = 0;
    std::map<uint32_t, Member> members;  // by rank

    // Slot positions one chunk takes.
    uint32_t parts() const { return xagg_chunk_parts(chunk_elems); }
    // The job's chunks as workers count them.
    uint32_t wire_chunks() const { return positions / parts(); }
    uint64_t all_ranks() const { return workers == 64 ? ~0ull : (1ull << workers) - 1; }
    // The ranks whose contributions complete a chunk.
    uint64_t member_bitmap() const { return all_ranks() & ~evicted; }
};

// A job's share of fast-path memory: the job's positions [0, positions) live at the map's
// positions [base, base + positions).
struct Region {
    uint32_t base = 0;
    uint32_t positions = 0;
    bool operator==(const Region &) const = default;
};

class JobTable {
public:
    // Fast-path memory is divided by `policy` (memory_scheduler.hpp); under benefit and fair
    // every job that wants it is guaranteed min(its positions, min_job_positions) while those fit.
    JobTable(uint32_t capacity_positions, uint32_t max_jobs, in_addr group_base,
             uint32_t min_job_positions = 256, sched::Policy policy = sched::Policy::benefit);

    // Each throws std::invalid_argument with a message for the API client. A new job has no
    // fast-path memory until the caller applies a layout().
    // `request` as the control API parsed it; what it leaves out takes the job rules'
    // defaults (xagg/job_rules.hpp), and the chunk size the node's `default_chunk_elems`.
    const Job &create(const api::CreateJob &request,
                      uint32_t default_chunk_elems = XAGG_CHUNK_ELEMS);
    void remove(uint32_t id);
    // Joining clears an eviction of that rank: it is a member again.
    const Member &join(uint32_t id, uint32_t rank, in_addr addr, uint16_t port);
    void leave(uint32_t id, uint32_t rank);
    // Removes a rank from the job's members and from the ranks a chunk waits for.
    const Job &evict(uint32_t id, uint32_t rank);

    // The policy's division of fast-path memory between the current jobs, packed in id order.
    // `rounds_done` (by job id) is how many all-reduce rounds each job has completed, for the
    // benefit policy's remaining time. Deterministic: the same inputs give the same layout.
    std::map<uint32_t, Region> layout(const std::map<uint32_t, uint64_t> &rounds_done = {}) const;
    sched::Policy policy() const { return policy_; }
    void set_region(uint32_t id, Region region);
    // From now on the job is served by the host path alone, as if created with host_path: no
    // fast-path memory, none asked for. The caller has moved its region out first.
    void serve_on_host_only(uint32_t id);

    const Job *find(uint32_t id) const;
    const std::map<uint32_t, Job> &jobs() const { return jobs_; }
    uint32_t capacity_positions() const { return capacity_positions_; }
    uint32_t used_positions() const;
    // Why this node cannot serve jumbo chunks ("" when it can): create() then refuses such jobs
    // (Refusal::unsupported) instead of accepting them and dropping their frames. Jobs already in
    // the table (restored after a restart) are kept.
    void set_jumbo_refusal(std::string why) { jumbo_refusal_ = std::move(why); }

    // Replaces the table with a saved one (after a restart, daemon/recovery.hpp); throws
    // std::invalid_argument if a job lies beyond the capacity.
    void restore(std::map<uint32_t, Job> jobs);

private:
    Job &get(uint32_t id);

    uint32_t capacity_positions_;
    uint32_t max_jobs_;
    uint32_t min_job_positions_;
    sched::Policy policy_;
    uint64_t next_arrival_ = 0;
    in_addr group_base_;
    std::map<uint32_t, Job> jobs_;
    std::string jumbo_refusal_;
};

const char *to_string(StragglerPolicy p);
// A fresh slot owner tag: random (getrandom), never XAGG_TAG_NONE.
uint32_t new_tag();
// A fresh job key: 64 random bits (getrandom), never zero (a zero key is a result's).
uint64_t new_key();
// An IPv4 address in dotted form, and back (throws std::invalid_argument).
std::string ipv4_string(in_addr a);
in_addr parse_ipv4(const std::string &s);
// A rank bitmap as its ranks, lowest first; and as text for logs, "[0,2,5]".
std::vector<uint32_t> rank_list(uint64_t bitmap);
std::string rank_text(uint64_t bitmap);

}  // namespace xagg::daemon
