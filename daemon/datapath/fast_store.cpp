// SPDX-License-Identifier: MIT
#include "daemon/datapath/fast_store.hpp"

#include "daemon/jobs/job_entry.hpp"

namespace xagg::daemon {

void FastPathStore::put_job(const Job &job)
{
    fast_.put_job(job_spec(job));
}

void FastPathStore::delete_job(uint32_t job_id)
{
    fast_.delete_job(job_id);
}

void FastPathStore::put_member(uint32_t job_id, const Member &member)
{
    fast_.put_member(job_id, member.rank, member.addr, member.port);
}

void FastPathStore::delete_member(uint32_t job_id, uint32_t rank)
{
    fast_.delete_member(job_id, rank);
}

std::optional<std::pair<uint32_t, uint32_t>> FastPathStore::routed(uint32_t job_id) const
{
    return fast_.routed_region(job_id);
}

void FastPathStore::clear_region(uint32_t base, uint32_t chunks)
{
    fast_.clear_region(base, chunks);
}

void FastPathStore::read_slots(uint32_t first, uint32_t count, const SlotBatchFn &fn) const
{
    fast_.for_each_slot_batch(first, count, fn);
}

void FastPathStore::write_slots(std::span<const uint32_t> keys, std::span<const xagg_slot> values)
{
    fast_.write_slots(keys, values);
}

Counters FastPathStore::counters() const
{
    return fast_.counters();
}

}  // namespace xagg::daemon
