// SPDX-License-Identifier: MIT
// The Datapath xaggd runs: every change goes to the fast path's maps (unless the node runs the
// host path only) and to the host-side parameter server, and memory moves between the two with
// the sums in flight. The move protocol is in both_paths.cpp; its unit tests drive it against
// fakes (tests/daemon_both_paths_test.cpp).
#pragma once

#include <chrono>
#include <functional>

#include "daemon/datapath/datapath.hpp"
#include "daemon/datapath/stores.hpp"

namespace xagg::daemon {

class BothPaths : public Datapath {
public:
    // Chunks moved per step: each chunk's traffic is held only while its own step copies.
    static constexpr uint32_t kMoveStep = 512;  // 3 MiB of slots
    // How long a step waits, after the fast path stopped routing its chunks to their slots,
    // before reading them: a program that looked the job up before the update may still be
    // adding. XDP runs to completion in softirq within microseconds; this outlasts it.
    static constexpr std::chrono::microseconds kGrace{2000};

    // `fast` is null on a host-path-only node. `before_move` runs before any slot moves (to
    // mark the maps as mid-move on disk, so that a crash during the move is recovered from).
    BothPaths(FastMaps *fast, HostStore &host, std::function<void()> before_move,
              std::chrono::microseconds grace = kGrace);

    void put_job(const Job &job) override;
    void delete_job(uint32_t job_id) override;
    void put_member(uint32_t job_id, const Member &member) override;
    void delete_member(uint32_t job_id, uint32_t rank) override;
    void shrink_fast(const Job &job, uint32_t keep) override;
    void grow_fast(const Job &job, uint32_t from) override;
    std::vector<SlotState> slot_states(const Job &job) const override;
    Counters counters() const override;
    Counters host_counters() const override;

private:
    FastMaps *fast_;
    HostStore &host_;
    std::function<void()> before_move_;
    std::chrono::microseconds grace_;
};

}  // namespace xagg::daemon
