// SPDX-License-Identifier: MIT
// The host-side parameter server: the same aggregation as the XDP fast path, in userspace, for
// whatever the fast path hands up (jobs configured for the host path, chunks beyond a job's
// fast-path memory). It applies the BPF program's acceptance rule (include/xagg/check.h) and
// slot rule (include/xagg/slot.h), so it refuses what the fast path refuses, with the same
// counter, and its sums are the fast path's bit for bit.
#pragma once

#include <netinet/in.h>

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "daemon/datapath/host_slots.hpp"
#include "daemon/datapath/stores.hpp"
#include "daemon/jobs/job_table.hpp"
#include "xagg/counters.hpp"
#include "xagg/fastpath.h"
#include "xagg/wire.hpp"

namespace xagg::daemon {

class HostPs : public HostStore {
public:
    // Binds `threads` SO_REUSEPORT sockets to the xagg port (in the calling thread's network
    // namespace) and sends multicast results out of `ifname`. With no threads nothing is bound:
    // datagrams come in through handle() alone (the unit tests). Each job's slots are kept in a
    // file in `slots_dir`, which a restart picks up (host_slots.hpp); without one, in memory.
    HostPs(uint16_t port, const std::string &ifname, unsigned threads,
           const std::string &slots_dir = {});
    ~HostPs() override;
    HostPs(const HostPs &) = delete;
    HostPs &operator=(const HostPs &) = delete;

    void put_job(const Job &job) override;
    void delete_job(uint32_t job_id) override;
    void put_member(uint32_t job_id, const Member &member) override;
    void delete_member(uint32_t job_id, uint32_t rank) override;
    Counters counters() const override;
    void hold(uint32_t job_id, uint32_t first, uint32_t end) override;
    void release(uint32_t job_id) override;
    void import_slots(const Job &job, uint32_t first_chunk,
                      std::span<const xagg_slot> slots) override;
    void merge_slots(const Job &job, uint32_t first_position,
                     std::span<const xagg_slot> slots) override;
    Exported export_slots(uint32_t job_id, uint32_t first, uint32_t end) override;
    std::vector<SlotState> slot_states(const Job &job) const override;

    // A datagram to send: a result, to the group, a member, or the one who asked again.
    struct Reply {
        std::array<uint8_t, wire::kMaxDatagramBytes> data;
        size_t size = 0;  // of data: a standard or a jumbo chunk's datagram
        sockaddr_in to;
        // The source address it leaves from: the one its contribution was sent to, since
        // workers tell aggregators' results apart by it (0: the kernel's choice).
        in_addr source{};
    };
    // One datagram received from `from` in an IP packet whose TOS byte was `tos`: checked by
    // the acceptance rule (xagg/check.h, the fast path's own), added into its slot (a CE mark
    // counted), the replies it causes appended to `replies`. Returns its outcome, which is
    // also counted.
    enum xagg_counter handle(std::span<const uint8_t> datagram, const sockaddr_in &from,
                             uint8_t tos, std::vector<Reply> &replies);

private:
    // A job as the serving threads see it: the table's view and the very map entries the fast
    // path reads, so xagg/check.h decides on the same data on both paths.
    struct ServedJob {
        Job job;
        xagg_job entry{};
        std::unordered_map<uint32_t, xagg_member> members;  // by rank
        std::shared_ptr<HostSlots> slots;  // every position of the job, two slots each
    };
    struct Jobs : std::map<uint32_t, ServedJob> {
        std::map<uint32_t, std::pair<uint32_t, uint32_t>> held;  // job -> chunks [first, end)
    };
    // The locks of the slots, by position; a jumbo chunk's parts share one.
    struct Shard {
        mutable std::mutex lock;
    };
    static constexpr unsigned kShards = 64;

    void serve(int fd, size_t thread);
    enum xagg_counter handle(const Jobs &jobs, std::span<const uint8_t> datagram,
                             const sockaddr_in &from, uint8_t tos, std::vector<Reply> &replies);
    static void refresh_entries(ServedJob &served);
    std::shared_ptr<const Jobs> jobs() const;
    std::shared_ptr<HostSlots> slots_of(uint32_t job_id) const;
    // Writes the job's slots from `first_position` on: all of them, or only those newer than
    // the host path's (merge_slots()).
    void take_slots(const Job &job, uint32_t first_position, std::span<const xagg_slot> slots,
                    bool only_later);
    // Publishes a changed job table; returns its version.
    uint64_t publish(const std::function<void(Jobs &)> &edit);
    // Waits until every serving thread is idle or works from `version` or later.
    void wait_for_threads(uint64_t version) const;
    void count(enum xagg_counter c, uint64_t n = 1) { counters_[c].fetch_add(n); }
    Shard &shard_of(uint32_t position)
    {
        return shards_[position / XAGG_JUMBO_SLOT_PARTS % kShards];
    }
    const Shard &shard_of(uint32_t position) const
    {
        return shards_[position / XAGG_JUMBO_SLOT_PARTS % kShards];
    }

    uint16_t port_;
    unsigned ifindex_;
    std::string slots_dir_;
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
