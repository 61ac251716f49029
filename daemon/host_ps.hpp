// SPDX-License-Identifier: MIT
// The host-side parameter server: the same aggregation as the XDP fast path, in userspace, for
// whatever the fast path hands up (jobs configured for the host path, chunks beyond a job's
// fast-path memory). It applies the very slot rule of the BPF program (include/xagg/slot.h), so
// its sums are the fast path's bit for bit.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <functional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fastpath.hpp"
#include "stragglers.hpp"
#include "jobs.hpp"
#include "xagg/fastpath.h"

namespace xagg::daemon {

class HostPs {
public:
    // Binds `threads` SO_REUSEPORT sockets to the xagg port (in the calling thread's network
    // namespace) and sends multicast results out of `ifname`.
    HostPs(uint16_t port, const std::string &ifname, unsigned threads);
    ~HostPs();
    HostPs(const HostPs &) = delete;
    HostPs &operator=(const HostPs &) = delete;

    // The job as the host path serves it: its chunks from job.region_chunks on (the fast path
    // has the others), members included.
    void put_job(const Job &job);
    void delete_job(uint32_t job_id);
    void put_member(uint32_t job_id, const Member &member);
    void delete_member(uint32_t job_id, uint32_t rank);
    Counters counters() const;

    // Memory moves between the paths (BothPaths in daemon.cpp), a range of chunks at a time.
    // While held, datagrams of the job's chunks [first, end) are dropped (counted as
    // drop_moving): their slots are changing hands and retransmission recovers them. hold()
    // returns once no serving thread can still be adding into those chunks.
    void hold(uint32_t job_id, uint32_t first, uint32_t end);
    void release(uint32_t job_id);
    // Takes over the fast path's slots of chunks from `first_chunk` on (two per chunk); slots
    // that do not hold the job's chunk (another owner's tag or chunk) count as empty.
    void import_slots(const Job &job, uint32_t first_chunk, std::span<const xagg_slot> slots);
    // Hands over and forgets the slots of chunks [first, end) that hold anything: the chunk
    // indices, and two slots each.
    struct Exported {
        std::vector<uint32_t> chunks;
        std::vector<xagg_slot> slots;
    };
    Exported export_slots(uint32_t job_id, uint32_t first, uint32_t end);
    // The slots that hold a round of the job's host-path chunks.
    std::vector<SlotState> slot_states(const Job &job) const;

private:
    struct Jobs : std::map<uint32_t, Job> {
        std::map<uint32_t, std::pair<uint32_t, uint32_t>> held;  // job -> chunks [first, end)
    };
    struct Shard {
        mutable std::mutex lock;
        std::unordered_map<uint64_t, std::array<xagg_slot, 2>> slots;  // key: job << 32 | chunk
    };
    static constexpr unsigned kShards = 64;

    void serve(int fd, size_t thread);
    std::shared_ptr<const Jobs> jobs() const;
    // Publishes a changed job table; returns its version.
    uint64_t publish(const std::function<void(Jobs &)> &edit);
    // Waits until every serving thread is idle or works from `version` or later.
    void wait_for_threads(uint64_t version) const;
    void count(enum xagg_counter c, uint64_t n = 1) { counters_[c].fetch_add(n); }

    uint16_t port_;
    unsigned ifindex_;
    std::vector<int> fds_;
    std::vector<std::thread> threads_;
    std::atomic<bool> stop_{false};
    mutable std::mutex jobs_lock_;
    std::shared_ptr<const Jobs> jobs_ = std::make_shared<Jobs>();
    std::atomic<uint64_t> version_{0};
    // Per serving thread: the table version its current batch works from; kIdle between.
    static constexpr uint64_t kIdle = ~0ull;
    std::unique_ptr<std::atomic<uint64_t>[]> busy_;
    std::array<Shard, kShards> shards_;
    std::array<std::atomic<uint64_t>, XAGG_CNT_MAX> counters_{};
};

}  // namespace xagg::daemon
