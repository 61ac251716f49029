// SPDX-License-Identifier: MIT
#include "daemon/datapath/both_paths.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "daemon/datapath/slot_states.hpp"
#include "daemon/jobs/job_entry.hpp"

namespace xagg::daemon {
namespace {

// How long a move took, and the longest any chunk's traffic was held by one of its steps.
class MoveTimer {
public:
    void hold() { held_ = Clock::now(); }
    void released()
    {
        longest_ = std::max(longest_, Clock::now() - held_);
        steps_++;
    }
    void log(uint32_t job, uint32_t chunks, const char *where) const
    {
        using ms = std::chrono::duration<double, std::milli>;
        spdlog::info("job {}: {} chunks moved {} in {} steps, {:.1f} ms; longest hold {:.2f} ms",
                     job, chunks, where, steps_, ms(Clock::now() - started_).count(),
                     ms(longest_).count());
    }

private:
    using Clock = std::chrono::steady_clock;
    Clock::time_point started_ = Clock::now(), held_;
    Clock::duration longest_{};
    unsigned steps_ = 0;
};

}  // namespace

BothPaths::BothPaths(FastMaps *fast, HostStore &host, std::function<void()> before_move,
                     std::chrono::microseconds grace)
    : fast_(fast), host_(host), before_move_(std::move(before_move)), grace_(grace)
{
}

void BothPaths::put_job(const Job &job)
{
    host_.put_job(job);
    if (fast_)
        fast_->put_job(job_spec(job));
}

void BothPaths::delete_job(uint32_t id)
{
    if (fast_)
        fast_->delete_job(id);
    host_.delete_job(id);
}

void BothPaths::put_member(uint32_t id, const Member &m)
{
    host_.put_member(id, m);
    if (fast_)
        fast_->put_member(id, m.rank, m.addr, m.port);
}

void BothPaths::delete_member(uint32_t id, uint32_t rank)
{
    if (fast_)
        fast_->delete_member(id, rank);
    host_.delete_member(id, rank);
}

// Without a fast path every region is empty and nothing ever moves. Each step, from the end
// of the region backwards: the host path holds the step's chunks (drops their datagrams); the
// fast path stops routing them to their slots (they pass up to the held host path); after the
// grace, the slots are read and imported; the host path takes the chunks and lets go.
void BothPaths::shrink_fast(const Job &job, uint32_t keep)
{
    before_move_();
    MoveTimer timer;
    // Steps of whole chunks: a jumbo chunk's parts move together (keep and the region are
    // multiples of its parts too).
    const uint32_t step_size = kMoveStep / job.parts() * job.parts();
    for (uint32_t end = job.region_positions; end > keep;) {
        const uint32_t first = end - std::min(step_size, end - keep);
        Job step = job;
        step.region_positions = first;
        timer.hold();
        host_.hold(job.id, first, end);
        fast_->put_job(job_spec(step));
        std::this_thread::sleep_for(grace_);
        fast_->for_each_slot_batch(2 * (job.region_base + first), 2 * (end - first),
                                   [&](uint32_t slot, std::span<const xagg_slot> batch) {
                                       host_.import_slots(job, slot / 2 - job.region_base, batch);
                                   });
        host_.put_job(step);
        host_.release(job.id);
        timer.released();
        end = first;
    }
    timer.log(job.id, job.region_positions - keep, "to the host path");
}

// Each step, from `from` forwards: the host path holds the step's chunks (and returns once no
// serving thread adds into them), hands over what it has of them, which is written into the
// fast path's slots before the fast path starts routing the chunks there.
void BothPaths::grow_fast(const Job &job, uint32_t from)
{
    before_move_();
    MoveTimer timer;
    const uint32_t step_size = kMoveStep / job.parts() * job.parts();
    for (uint32_t first = from; first < job.region_positions;) {
        const uint32_t end = first + std::min(step_size, job.region_positions - first);
        Job step = job;
        step.region_positions = end;
        timer.hold();
        host_.hold(job.id, first, end);
        // Only chunks the host path holds something of: a slot without this job's tag and
        // chunk counts as empty on the fast path, so nothing else needs writing.
        HostStore::Exported state = host_.export_slots(job.id, first, end);
        std::vector<uint32_t> keys;
        keys.reserve(state.slots.size());
        for (uint32_t position : state.positions)
            for (uint32_t parity : {0u, 1u})
                keys.push_back(2 * (job.region_base + position) + parity);
        fast_->write_slots(keys, state.slots);
        fast_->put_job(job_spec(step));
        host_.put_job(step);
        host_.release(job.id);
        timer.released();
        first = end;
    }
    if (job.region_positions > from)
        timer.log(job.id, job.region_positions - from, "to the fast path");
    // The job as the table has it now (also when nothing came in: a region that only shrank,
    // or moved to nothing).
    fast_->put_job(job_spec(job));
    host_.put_job(job);
}

std::vector<SlotState> BothPaths::slot_states(const Job &job) const
{
    std::vector<SlotState> states;
    if (fast_ && job.region_positions)  // a batch at a time: no copy of the whole region
        fast_->for_each_slot_batch(2 * job.region_base, 2 * job.region_positions,
                                   [&](uint32_t first, std::span<const xagg_slot> batch) {
                                       append_region_states(batch, first - 2 * job.region_base,
                                                            states);
                                   });
    auto more = host_.slot_states(job);
    states.insert(states.end(), more.begin(), more.end());
    return states;
}

Counters BothPaths::counters() const
{
    return fast_ ? fast_->counters() : Counters{};
}

Counters BothPaths::host_counters() const
{
    return host_.counters();
}

}  // namespace xagg::daemon
