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
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "control.hpp"
#include "stragglers.hpp"
#include "jobs.hpp"
#include "xagg/fastpath.h"

namespace xagg::daemon {

class HostPs : public Datapath {
public:
    // Binds `threads` SO_REUSEPORT sockets to the xagg port (in the calling thread's network
    // namespace) and sends multicast results out of `ifname`.
    HostPs(uint16_t port, const std::string &ifname, unsigned threads);
    ~HostPs() override;
    HostPs(const HostPs &) = delete;
    HostPs &operator=(const HostPs &) = delete;

    void put_job(const Job &job) override;
    void delete_job(uint32_t job_id) override;
    void put_member(uint32_t job_id, const Member &member) override;
    void delete_member(uint32_t job_id, uint32_t rank) override;
    // Memory moves (see Datapath): the host path's half of them.
    void move_to_host(const Job &job) override { hold(job.id); }
    void move_to_fast(const Job &job) override;
    Counters counters() const override;

    // While held, the job's datagrams are dropped (counted as drop_moving): its slots are
    // changing hands and retransmission recovers what is dropped.
    void hold(uint32_t job_id);
    // Takes over slots (two per chunk, from `first_chunk` on) from the fast path.
    void import_slots(uint32_t job_id, uint32_t first_chunk, const std::vector<xagg_slot> &slots);
    // Hands over and forgets the slots of chunks [0, chunks): two per chunk, zero where none.
    std::vector<xagg_slot> export_slots(uint32_t job_id, uint32_t chunks);
    // The slots that hold a round of the job's host-path chunks.
    std::vector<SlotState> slot_states(const Job &job) const override;

private:
    struct Jobs : std::map<uint32_t, Job> {
        std::set<uint32_t> held;
    };
    struct Shard {
        mutable std::mutex lock;
        std::unordered_map<uint64_t, std::array<xagg_slot, 2>> slots;  // key: job << 32 | chunk
    };
    static constexpr unsigned kShards = 64;

    void serve(int fd);
    std::shared_ptr<const Jobs> jobs() const;
    void publish(const std::function<void(Jobs &)> &edit);
    void count(enum xagg_counter c, uint64_t n = 1) { counters_[c].fetch_add(n); }

    uint16_t port_;
    unsigned ifindex_;
    std::vector<int> fds_;
    std::vector<std::thread> threads_;
    std::atomic<bool> stop_{false};
    mutable std::mutex jobs_lock_;
    std::shared_ptr<const Jobs> jobs_ = std::make_shared<Jobs>();
    std::array<Shard, kShards> shards_;
    std::array<std::atomic<uint64_t>, XAGG_CNT_MAX> counters_{};
};

}  // namespace xagg::daemon
