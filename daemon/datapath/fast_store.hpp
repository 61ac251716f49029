// SPDX-License-Identifier: MIT
// FastStore over the real maps: lib/fastpath's FastPath, with the daemon's Job turned into the
// map entry the XDP program reads (jobs/job_entry.hpp).
#pragma once

#include "daemon/datapath/stores.hpp"
#include "lib/fastpath/fastpath.hpp"

namespace xagg::daemon {

class FastPathStore : public FastStore {
public:
    explicit FastPathStore(FastPath &fast) : fast_(fast) {}
    void put_job(const Job &job) override;
    void delete_job(uint32_t job_id) override;
    void put_member(uint32_t job_id, const Member &member) override;
    void delete_member(uint32_t job_id, uint32_t rank) override;
    std::optional<std::pair<uint32_t, uint32_t>> routed(uint32_t job_id) const override;
    void clear_region(uint32_t base, uint32_t chunks) override;
    void read_slots(uint32_t first, uint32_t count, const SlotBatchFn &fn) const override;
    void write_slots(std::span<const uint32_t> keys, std::span<const xagg_slot> values) override;
    Counters counters() const override;

private:
    FastPath &fast_;
};

}  // namespace xagg::daemon
