// SPDX-License-Identifier: MIT
// The userspace side of the XDP fast path: a thin adapter over the libbpf skeleton (maps, load)
// and the kernel's bpf_link for XDP (attach, pinned so a restart takes it over). Everything it
// writes into the maps uses the structs of include/xagg/fastpath.h, the same ones the BPF program
// reads.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/fastpath/fast_maps.hpp"
#include "lib/fastpath/kernel_probe.hpp"
#include "xagg/counters.hpp"
#include "xagg/fastpath.h"
#include "xagg/job_entry.hpp"

struct xagg_fastpath;  // the generated skeleton

namespace xagg {

struct FastPathConfig {
    uint16_t port = XAGG_DEFAULT_PORT;
    uint32_t max_jobs = XAGG_DEFAULT_MAX_JOBS;
    uint32_t max_positions = XAGG_DEFAULT_MAX_POSITIONS;  // fast-path capacity
    // When set, the maps are pinned here (a bpffs directory) and reused if already pinned, so a
    // restarted loader continues with the state a crashed one left.
    std::string pin_dir;
    // How multi-buffer contributions are read (include/xagg/fastpath.h); unset: the best the
    // running kernel offers (lib/fastpath/kernel_probe.hpp). Set only to compare the variants
    // (bench/chunk_cost) or to test the one older kernels run; asking for one the kernel lacks
    // throws std::invalid_argument.
    std::optional<xagg_fastpath_variant> variant;
};

enum class AttachMode { native, skb };

// What the kernel reports for the interface the fast path was attached to.
struct Attachment {
    bool attached = false;  // our program is the one the kernel runs there
    std::string mode;       // "native", "skb", "hw" or "none", as the kernel says
    uint32_t prog_id = 0;   // the kernel's id of the program attached (ours or not)
};

class FastPath : public FastMaps {
public:
    // Slots per batched map call (12 MiB of slots).
    static constexpr uint32_t kSlotBatch = 4096;

    // Opens the embedded BPF object, sizes its maps and sets the load-time constants. Nothing is
    // in the kernel yet; call load() (for BPF_PROG_TEST_RUN) or attach() (which loads).
    explicit FastPath(const FastPathConfig &config);
    ~FastPath() override;
    FastPath(const FastPath &) = delete;
    FastPath &operator=(const FastPath &) = delete;

    void load();
    // Whether load found its maps pinned already (state from a previous run).
    bool reused_pinned_maps() const { return reused_pins_; }
    // Removes the pins: the maps die with the last program and fd that hold them.
    void unpin();
    // Loads (if not yet) and attaches XDP to the interface through a bpf_link, pinned in
    // pin_dir when set (so a restarted daemon takes it over), and the fan-out program to its
    // TC ingress. Refuses an interface that runs an XDP program not behind that pin.
    void attach(const std::string &ifname, AttachMode mode);
    void detach();
    bool attached() const { return xdp_link_fd_ >= 0; }
    // Asks the kernel (not our own bookkeeping) what runs on the interface now.
    Attachment attachment() const;

    // The maps (fast_maps.hpp). Slots are read and written a batch of system calls at a time
    // (BPF_MAP_LOOKUP_BATCH / BPF_MAP_UPDATE_BATCH).
    void put_job(const JobSpec &job) override;
    void delete_job(uint32_t job_id) override;
    std::optional<std::pair<uint32_t, uint32_t>> routed_region(uint32_t job_id) const override;
    void put_member(uint32_t job_id, uint32_t rank, in_addr addr, uint16_t port) override;
    void delete_member(uint32_t job_id, uint32_t rank) override;
    void clear_region(uint32_t base, uint32_t positions) override;
    void for_each_slot_batch(uint32_t first, uint32_t count, const SlotBatchFn &fn) const override;
    void write_slots(std::span<const uint32_t> keys, std::span<const xagg_slot> values) override;
    Counters counters() const override;
    xagg_slot slot(uint32_t index) const;

    int prog_fd() const;         // the XDP program
    int fanout_prog_fd() const;  // the TC ingress program that copies results per member
    const FastPathConfig &config() const { return config_; }
    xagg_fastpath_variant variant() const { return variant_; }
    // What the kernel it was opened on offers.
    const KernelOffers &kernel() const { return kernel_; }

private:
    void ensure_loaded() const;
    void attach_fanout();
    // The link a previous run pinned, updated to our program; -1 if there is none to take.
    int take_over_pinned_link(int ifindex, uint8_t wanted_mode);

    FastPathConfig config_;
    KernelOffers kernel_;
    xagg_fastpath_variant variant_;
    xagg_fastpath *skel_ = nullptr;
    int xdp_link_fd_ = -1;
    std::string link_pin_;  // where the XDP link is pinned (empty: not pinned)
    int ifindex_ = 0;
    bool tc_hook_created_ = false;  // we made the clsact qdisc, so we remove it
    uint32_t tc_handle_ = 0, tc_priority_ = 0;
    AttachMode mode_ = AttachMode::native;
    bool loaded_ = false;
    bool reused_pins_ = false;
    mutable std::vector<xagg_slot> batch_;  // for_each_slot_batch's buffer, reused
};

}  // namespace xagg
