// SPDX-License-Identifier: MIT
#include "lib/fastpath/fastpath.hpp"

#include <bpf/bpf.h>
#include <endian.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sys/stat.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "lib/fastpath/bpf_log.hpp"
#include "lib/sys/mtu.hpp"
#include "bpf/xagg_fastpath.skel.h"

namespace xagg {
namespace {

[[noreturn]] void fail(int err, const std::string &what)
{
    throw std::system_error(err < 0 ? -err : err, std::generic_category(), what);
}

std::string pin_path(const std::string &dir, const bpf_map *map)
{
    return dir + "/" + bpf_map__name(map);
}

// Why the map pinned at `path` cannot be reused for `map` (layout or size), or "" if it can. A
// map it cannot open is left for libbpf to report.
std::string pin_mismatch(const std::string &path, const bpf_map *map)
{
    int fd = bpf_obj_get(path.c_str());
    if (fd < 0)
        return "";
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    int err = bpf_obj_get_info_by_fd(fd, &info, &len);
    close(fd);
    if (err)
        return "";
    auto differs = [](const char *what, uint32_t pinned, uint32_t wanted) {
        return what + std::string(" ") + std::to_string(pinned) + " pinned, " +
               std::to_string(wanted) + " wanted";
    };
    if (info.type != static_cast<uint32_t>(bpf_map__type(map)))
        return differs("type", info.type, bpf_map__type(map));
    if (info.key_size != bpf_map__key_size(map))
        return differs("key size", info.key_size, bpf_map__key_size(map));
    if (info.value_size != bpf_map__value_size(map))
        return differs("value size", info.value_size, bpf_map__value_size(map));
    if (info.max_entries != bpf_map__max_entries(map))
        return differs("entries", info.max_entries, bpf_map__max_entries(map));
    return "";
}

// Pins left by a build with another map layout (an upgrade that changed a shared struct) or by a
// configuration of another size (max_positions, max_jobs) cannot be reused, and libbpf would refuse
// to load against them: the daemon would fail at every restart. The maps form one state (slots
// are tagged with the jobs map's owners), so when any one does not fit, all pins go; the caller
// then starts with fresh maps and rebuilds the job table from its state file, and sums that were
// in flight are rebuilt by the workers' retransmissions.
template <size_t N>
void remove_incompatible_pins(const std::string &dir, bpf_map *(&maps)[N])
{
    std::string why;
    for (const bpf_map *map : maps) {
        const std::string path = pin_path(dir, map);
        if (std::string m = pin_mismatch(path, map); !m.empty() && why.empty())
            why = path + ": " + m;
    }
    if (why.empty())
        return;
    spdlog::warn(
        "the maps pinned in {} do not fit this build or configuration ({}); removing "
        "them and starting with fresh maps",
        dir, why);
    for (const bpf_map *map : maps) {
        const std::string path = pin_path(dir, map);
        if (unlink(path.c_str()) != 0 && errno != ENOENT)
            fail(errno, "removing the unusable pinned map " + path);
    }
}

void update(int map_fd, const void *key, const void *value, const std::string &what)
{
    if (bpf_map_update_elem(map_fd, key, value, BPF_ANY) != 0)
        fail(errno, what);
}

void remove(int map_fd, const void *key, const std::string &what)
{
    if (bpf_map_delete_elem(map_fd, key) != 0 && errno != ENOENT)
        fail(errno, what);
}

}  // namespace

FastPath::FastPath(const FastPathConfig &config)
    : config_(config),
      kernel_(probe_kernel()),
      variant_(config.variant.value_or(best_variant(kernel_)))
{
    if (config.max_positions == 0 || config.max_positions > (1u << 30))
        throw std::invalid_argument("fast-path capacity must be 1..2^30 chunks");
    // The program would quietly run as copy: the variant it reports must be the one it runs.
    if (std::string why = variant_unavailable(variant_, kernel_); !why.empty())
        throw std::invalid_argument(why);
    LibraryLogCapture log;
    skel_ = xagg_fastpath__open();
    if (!skel_)
        fail(errno, "opening the xagg_fastpath BPF object");
    skel_->rodata->xagg_port = config.port;
    skel_->rodata->xagg_variant = variant_;
    int err = bpf_map__set_max_entries(skel_->maps.jobs, config.max_jobs);
    if (!err)
        err = bpf_map__set_max_entries(skel_->maps.members, config.max_jobs * XAGG_MAX_WORKERS);
    if (!err)
        err = bpf_map__set_max_entries(skel_->maps.slots, 2 * config.max_positions);
    if (err) {
        xagg_fastpath__destroy(skel_);
        fail(err, "sizing the fast-path maps");
    }
    if (!config.pin_dir.empty()) {
        bpf_map *maps[] = {skel_->maps.jobs, skel_->maps.members, skel_->maps.slots,
                           skel_->maps.counters};
        remove_incompatible_pins(config.pin_dir, maps);
        for (bpf_map *map : maps) {
            const std::string path = pin_path(config.pin_dir, map);
            if (access(path.c_str(), F_OK) == 0)
                reused_pins_ = true;
            if (int e = bpf_map__set_pin_path(map, path.c_str())) {
                xagg_fastpath__destroy(skel_);
                fail(e, "pinning " + path);
            }
        }
    }
}

void FastPath::unpin()
{
    bpf_map *maps[] = {skel_->maps.jobs, skel_->maps.members, skel_->maps.slots,
                       skel_->maps.counters};
    for (bpf_map *map : maps)
        if (bpf_map__pin_path(map))
            bpf_map__unpin(map, nullptr);
}

FastPath::~FastPath()
{
    try {
        detach();
    } catch (...) {
        // A destructor cannot report; the interface goes with its namespace or the next attach.
    }
    xagg_fastpath__destroy(skel_);
}

void FastPath::load()
{
    if (loaded_)
        return;
    LibraryLogCapture log;
    if (int err = xagg_fastpath__load(skel_))
        fail(err, "loading the xagg_fastpath BPF program:\n" + log.tail());
    loaded_ = true;
}

namespace {

// What the kernel runs on the interface now: the program id and how it is attached.
bpf_xdp_query_opts query_xdp(int ifindex)
{
    LIBBPF_OPTS(bpf_xdp_query_opts, q);
    if (int err = bpf_xdp_query(ifindex, 0, &q))
        fail(err, "querying the XDP program of interface " + std::to_string(ifindex));
    return q;
}

const char *mode_name(uint8_t attach_mode)
{
    switch (attach_mode) {
    case XDP_ATTACHED_DRV: return "native";
    case XDP_ATTACHED_SKB: return "skb";
    case XDP_ATTACHED_HW: return "hw";
    case XDP_ATTACHED_MULTI: return "multi";
    default: return "none";
    }
}

}  // namespace

// The program is attached through a bpf_link (BPF_LINK_CREATE), pinned in bpffs beside the maps.
// The link, not the process, keeps the program attached: a daemon that crashed leaves it
// aggregating, and the next start reopens the pin (file permissions, no CAP_SYS_ADMIN) and
// swaps its own program in atomically (BPF_LINK_UPDATE), so not a packet goes unprocessed.
// Finding a program by id, as libxdp does, would take CAP_SYS_ADMIN, which xaggd's unit does
// not grant. An XDP program that is not behind our pin is somebody else's: left alone.
int FastPath::take_over_pinned_link(int ifindex, uint8_t wanted_mode)
{
    if (link_pin_.empty() || access(link_pin_.c_str(), F_OK) != 0)
        return -1;
    int fd = bpf_obj_get(link_pin_.c_str());
    if (fd >= 0) {
        bpf_link_info info{};
        uint32_t len = sizeof(info);
        // The link still holds the interface (not defunct after the interface went away), and
        // in the mode wanted (a mode change takes a new link).
        bool usable = bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
                      info.type == BPF_LINK_TYPE_XDP &&
                      info.xdp.ifindex == static_cast<uint32_t>(ifindex) &&
                      query_xdp(ifindex).attach_mode == wanted_mode;
        if (usable && bpf_link_update(fd, prog_fd(), nullptr) == 0)
            return fd;
        bpf_link_detach(fd);
        close(fd);
    }
    spdlog::info("replacing the unusable XDP link pinned at {}", link_pin_);
    unlink(link_pin_.c_str());
    return -1;
}

void FastPath::attach(const std::string &ifname, AttachMode mode)
{
    int ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    if (ifindex == 0)
        fail(errno, "interface " + ifname);
    load();
    LibraryLogCapture log;
    if (!config_.pin_dir.empty())
        link_pin_ = config_.pin_dir + "/xdp_link";
    const uint8_t wanted = mode == AttachMode::native ? XDP_ATTACHED_DRV : XDP_ATTACHED_SKB;
    int fd = take_over_pinned_link(ifindex, wanted);
    if (fd >= 0) {
        spdlog::warn("took over the XDP link a previous run left on {}: program replaced in place",
                     ifname);
    } else {
        bpf_xdp_query_opts q = query_xdp(ifindex);
        if (q.prog_id)
            throw std::runtime_error(
                "interface " + ifname + " already runs XDP program id " +
                std::to_string(q.prog_id) + " (" + mode_name(q.attach_mode) +
                " mode), not attached by xaggd through " +
                (link_pin_.empty() ? std::string("a link") : link_pin_) +
                "; xaggd does not remove other programs. If it is a leftover, remove it with "
                "`ip link set dev " +
                ifname + " xdp off` (see XAGGD.md on sharing an interface)");
        LIBBPF_OPTS(bpf_link_create_opts, opts,
                    .flags = mode == AttachMode::native ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE);
        fd = bpf_link_create(prog_fd(), ifindex, BPF_XDP, &opts);
        if (fd < 0) {
            const int err = errno;
            // What an operator can do about it: the driver's limits are the usual cause.
            std::string hint;
            if (mode == AttachMode::native)
                hint = " (MTU " + std::to_string(sys::interface_mtu(ifname).value_or(0)) +
                       "; a driver without native XDP, or without multi-buffer XDP at this MTU, "
                       "refuses it: lower the MTU to 3200 for standard chunks only, or set "
                       "xdp_mode = skb; docs/KERNELS.md lists the drivers)";
            fail(err, "attaching XDP to " + ifname +
                          (mode == AttachMode::native ? " in native mode" : " in skb mode") + hint +
                          (log.tail().empty() ? "" : ":\n" + log.tail()));
        }
        if (!link_pin_.empty() && bpf_obj_pin(fd, link_pin_.c_str()) != 0) {
            int err = errno;
            bpf_link_detach(fd);
            close(fd);
            fail(err, "pinning the XDP link at " + link_pin_);
        }
    }
    xdp_link_fd_ = fd;
    ifindex_ = ifindex;
    mode_ = mode;
    try {
        attach_fanout();
    } catch (...) {
        detach();
        throw;
    }
}

void FastPath::attach_fanout()
{
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex_, .attach_point = BPF_TC_INGRESS);
    int err = bpf_tc_hook_create(&hook);
    if (err && err != -EEXIST)
        fail(err, "creating the clsact qdisc for the fan-out program");
    tc_hook_created_ = err == 0;
    // A fixed handle and priority, replaced in place, so a restart after a crash swaps the old
    // filter for the new one instead of stacking a second one beside it.
    LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = fanout_prog_fd(), .flags = BPF_TC_F_REPLACE,
                .handle = 1, .priority = 1);
    if (int e = bpf_tc_attach(&hook, &opts))
        fail(e, "attaching the fan-out program to TC ingress");
    tc_handle_ = opts.handle;
    tc_priority_ = opts.priority;
}

void FastPath::detach()
{
    if (xdp_link_fd_ < 0)
        return;
    int link = xdp_link_fd_;
    xdp_link_fd_ = -1;
    // The TC side first, so no result is passed up to a host that would not copy it.
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex_, .attach_point = BPF_TC_INGRESS);
    if (tc_hook_created_) {
        hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
        bpf_tc_hook_destroy(&hook);  // removes the qdisc we made, and our filter with it
        tc_hook_created_ = false;
    } else if (tc_handle_) {
        // Someone else's clsact qdisc (or ours from a previous run): remove only our filter.
        LIBBPF_OPTS(bpf_tc_opts, opts, .handle = tc_handle_, .priority = tc_priority_);
        bpf_tc_detach(&hook, &opts);
    }
    tc_handle_ = tc_priority_ = 0;
    int err = bpf_link_detach(link) ? errno : 0;
    close(link);
    if (!link_pin_.empty())
        unlink(link_pin_.c_str());
    if (err && err != ENOLINK)  // ENOLINK: the interface is gone, and the program with it
        fail(err, "detaching XDP");
}

Attachment FastPath::attachment() const
{
    Attachment a;
    a.mode = "none";
    if (xdp_link_fd_ < 0)
        return a;
    bpf_xdp_query_opts q = query_xdp(ifindex_);
    a.mode = mode_name(q.attach_mode);
    a.prog_id = q.prog_id ? q.prog_id : (q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id);
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    a.attached = a.prog_id != 0 && bpf_obj_get_info_by_fd(prog_fd(), &info, &len) == 0 &&
                 info.id == a.prog_id;
    return a;
}

void FastPath::ensure_loaded() const
{
    if (!loaded_)
        throw std::logic_error("the fast path is not loaded");
}

void FastPath::put_job(const JobSpec &job)
{
    ensure_loaded();
    if (job.id == XAGG_JOB_ID_NONE)
        throw std::invalid_argument("job id 0 is reserved");
    if (job.tag == XAGG_TAG_NONE)
        throw std::invalid_argument("job " + std::to_string(job.id) + " has no slot tag");
    if (uint64_t{job.region_base} + job.region_positions > config_.max_positions)
        throw std::invalid_argument("job region lies beyond the fast-path capacity");
    xagg_job value = job_value(job);
    update(bpf_map__fd(skel_->maps.jobs), &job.id, &value, "writing job " + std::to_string(job.id));
}

std::optional<std::pair<uint32_t, uint32_t>> FastPath::routed_region(uint32_t job_id) const
{
    ensure_loaded();
    xagg_job value{};
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.jobs), &job_id, &value) != 0)
        return std::nullopt;
    return std::pair{value.region_base, value.region_positions};
}

void FastPath::delete_job(uint32_t job_id)
{
    ensure_loaded();
    remove(bpf_map__fd(skel_->maps.jobs), &job_id, "deleting job " + std::to_string(job_id));
}

void FastPath::put_member(uint32_t job_id, uint32_t rank, in_addr addr, uint16_t port)
{
    ensure_loaded();
    if (rank >= XAGG_MAX_WORKERS)
        throw std::invalid_argument("rank must be below " + std::to_string(XAGG_MAX_WORKERS));
    xagg_member_key key{job_id, rank};
    xagg_member value = member_value(addr, port);
    update(bpf_map__fd(skel_->maps.members), &key, &value, "writing a member");
}

void FastPath::delete_member(uint32_t job_id, uint32_t rank)
{
    ensure_loaded();
    xagg_member_key key{job_id, rank};
    remove(bpf_map__fd(skel_->maps.members), &key, "deleting a member");
}

void FastPath::clear_region(uint32_t base, uint32_t positions)
{
    ensure_loaded();
    if (uint64_t{base} + positions > config_.max_positions)
        throw std::invalid_argument("region lies beyond the fast-path capacity");
    std::vector<uint32_t> keys(kSlotBatch);
    const std::vector<xagg_slot> empty(kSlotBatch);
    for (uint32_t first = 2 * base; first < 2 * (base + positions); first += kSlotBatch) {
        uint32_t n = std::min(kSlotBatch, 2 * (base + positions) - first);
        for (uint32_t i = 0; i < n; i++)
            keys[i] = first + i;
        write_slots(std::span(keys.data(), n), std::span(empty.data(), n));
    }
}

Counters FastPath::counters() const
{
    ensure_loaded();
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0)
        fail(ncpu, "counting CPUs");
    std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu));
    Counters total{};
    int fd = bpf_map__fd(skel_->maps.counters);
    for (uint32_t key = 0; key < XAGG_CNT_MAX; key++) {
        if (bpf_map_lookup_elem(fd, &key, per_cpu.data()) != 0)
            fail(errno, "reading counters");
        for (uint64_t v : per_cpu)
            total[key] += v;
    }
    return total;
}

xagg_slot FastPath::slot(uint32_t index) const
{
    ensure_loaded();
    xagg_slot value{};
    if (bpf_map_lookup_elem_flags(bpf_map__fd(skel_->maps.slots), &index, &value, BPF_F_LOCK) != 0)
        fail(errno, "reading slot " + std::to_string(index));
    return value;
}

void FastPath::for_each_slot_batch(uint32_t first, uint32_t count, const SlotBatchFn &fn) const
{
    ensure_loaded();
    if (uint64_t{first} + count > 2ull * config_.max_positions)
        throw std::invalid_argument("slot range beyond the map");
    int fd = bpf_map__fd(skel_->maps.slots);
    // Batched, each slot still copied under its lock: one system call per kSlotBatch slots
    // instead of one per slot. (A profile of a 4-worker 64 MiB all-reduce had xaggd's per-slot
    // lookups for the straggler scan at a fifth of the machine.)
    batch_.resize(kSlotBatch);
    std::vector<uint32_t> keys(kSlotBatch);
    LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_F_LOCK);
    uint32_t done = 0;
    while (done < count) {
        // An array's batch starts after the key given (none: at 0).
        uint32_t before = first + done - 1, last = 0;
        uint32_t n = std::min(kSlotBatch, count - done);
        int err = bpf_map_lookup_batch(fd, first + done == 0 ? nullptr : &before, &last,
                                       keys.data(), batch_.data(), &n, &opts);
        if (err && err != -ENOENT)
            fail(err, "reading slots from " + std::to_string(first + done));
        if (n == 0)
            throw std::runtime_error("read " + std::to_string(done) + " of " +
                                     std::to_string(count) + " slots");
        fn(first + done, std::span<const xagg_slot>(batch_.data(), n));
        done += n;
    }
}

void FastPath::write_slots(std::span<const uint32_t> keys, std::span<const xagg_slot> values)
{
    ensure_loaded();
    if (keys.size() != values.size())
        throw std::invalid_argument("write_slots: as many keys as values");
    for (uint32_t key : keys)
        if (key >= 2ull * config_.max_positions)
            throw std::invalid_argument("slot " + std::to_string(key) + " beyond the map");
    int fd = bpf_map__fd(skel_->maps.slots);
    // BPF_F_LOCK: each slot is copied under its lock, which itself is left alone. One system
    // call per kSlotBatch slots instead of one per slot (a 1 GiB job has 700,000 slots).
    LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_F_LOCK);
    for (size_t done = 0; done < keys.size();) {
        auto n = static_cast<uint32_t>(std::min<size_t>(kSlotBatch, keys.size() - done));
        if (int err = bpf_map_update_batch(fd, keys.data() + done, values.data() + done, &n, &opts))
            fail(err, "writing slots from " + std::to_string(keys[done]));
        done += n;
    }
}

int FastPath::prog_fd() const
{
    ensure_loaded();
    return bpf_program__fd(skel_->progs.xagg_fastpath);
}

int FastPath::fanout_prog_fd() const
{
    ensure_loaded();
    int fd = bpf_program__fd(skel_->progs.xagg_fanout);
    if (fd < 0)
        throw std::runtime_error("the fan-out program was not loaded");
    return fd;
}

}  // namespace xagg
