// SPDX-License-Identifier: MIT
#include "fastpath.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <unistd.h>
#include <spdlog/spdlog.h>
#include <xdp/libxdp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "bpf_log.hpp"
#include "xagg_fastpath.skel.h"

namespace xagg {
namespace {

[[noreturn]] void fail(int err, const std::string &what)
{
    throw std::system_error(err < 0 ? -err : err, std::generic_category(), what);
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

const char *counter_name(enum xagg_counter c)
{
    switch (c) {
    case XAGG_CNT_PASS_FOREIGN: return "pass_foreign";
    case XAGG_CNT_DROP_TRUNCATED: return "drop_truncated";
    case XAGG_CNT_DROP_IP_OPTIONS: return "drop_ip_options";
    case XAGG_CNT_DROP_FRAGMENT: return "drop_fragment";
    case XAGG_CNT_DROP_BAD_MAGIC: return "drop_bad_magic";
    case XAGG_CNT_DROP_BAD_VERSION: return "drop_bad_version";
    case XAGG_CNT_DROP_BAD_LENGTH: return "drop_bad_length";
    case XAGG_CNT_DROP_BAD_FLAGS: return "drop_bad_flags";
    case XAGG_CNT_DROP_UNKNOWN_JOB: return "drop_unknown_job";
    case XAGG_CNT_DROP_NOT_MEMBER: return "drop_not_member";
    case XAGG_CNT_PASS_HOST_JOB: return "pass_host_job";
    case XAGG_CNT_PASS_HOST_OVERFLOW: return "pass_host_overflow";
    case XAGG_CNT_AGGREGATED: return "aggregated";
    case XAGG_CNT_COMPLETED: return "completed";
    case XAGG_CNT_DROP_DUPLICATE: return "drop_duplicate";
    case XAGG_CNT_RESENT: return "resent";
    case XAGG_CNT_DROP_STALE_ROUND: return "drop_stale_round";
    case XAGG_CNT_DROP_BAD_EXPONENT: return "drop_bad_exponent";
    case XAGG_CNT_DROP_MOVING: return "drop_moving";
    case XAGG_CNT_COMPLETED_FANOUT: return "completed_fanout";
    case XAGG_CNT_FANOUT_COPIES: return "fanout_copies";
    case XAGG_CNT_FANOUT_FAILED: return "fanout_failed";
    case XAGG_CNT_MAX: break;
    }
    return "unknown";
}

FastPath::FastPath(const FastPathConfig &config) : config_(config)
{
    if (config.max_chunks == 0 || config.max_chunks > (1u << 30))
        throw std::invalid_argument("fast-path capacity must be 1..2^30 chunks");
    LibraryLogCapture log;
    skel_ = xagg_fastpath__open();
    if (!skel_)
        fail(errno, "opening the xagg_fastpath BPF object");
    skel_->rodata->xagg_port = config.port;
    int err = bpf_map__set_max_entries(skel_->maps.jobs, config.max_jobs);
    if (!err)
        err = bpf_map__set_max_entries(skel_->maps.members, config.max_jobs * XAGG_MAX_WORKERS);
    if (!err)
        err = bpf_map__set_max_entries(skel_->maps.slots, 2 * config.max_chunks);
    if (err) {
        xagg_fastpath__destroy(skel_);
        fail(err, "sizing the fast-path maps");
    }
    if (!config.pin_dir.empty()) {
        bpf_map *maps[] = {skel_->maps.jobs, skel_->maps.members, skel_->maps.slots,
                           skel_->maps.counters};
        for (bpf_map *map : maps) {
            std::string path = config.pin_dir + "/" + bpf_map__name(map);
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

// A loader that crashed leaves its program attached (which keeps aggregating). Replace only a
// program of ours; anybody else's XDP program is not ours to remove.
void FastPath::detach_stale(int ifindex, const std::string &ifname)
{
    xdp_multiprog *mp = xdp_multiprog__get_from_ifindex(ifindex);
    if (!mp || libxdp_get_error(mp))
        return;
    xdp_program *main = xdp_multiprog__main_prog(mp);
    bool ours = main && xdp_multiprog__is_legacy(mp) &&
                std::string(xdp_program__name(main)) == "xagg_fastpath";
    if (main && !ours) {
        xdp_multiprog__close(mp);
        throw std::runtime_error("interface " + ifname +
                                 " already runs another XDP program; remove it first");
    }
    if (ours) {
        spdlog::warn("replacing the xagg program left attached to {} by a previous run", ifname);
        int err = xdp_multiprog__detach(mp);
        xdp_multiprog__close(mp);
        if (err)
            fail(err, "detaching the previous xagg program from " + ifname);
        return;
    }
    xdp_multiprog__close(mp);
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

void FastPath::attach(const std::string &ifname, AttachMode mode)
{
    if (loaded_)
        throw std::logic_error("attach() must load the program itself, through libxdp");
    int ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    if (ifindex == 0)
        fail(errno, "interface " + ifname);
    detach_stale(ifindex, ifname);
    LibraryLogCapture log;
    xdp_program *prog = xdp_program__from_bpf_obj(skel_->obj, "xdp");
    if (long err = libxdp_get_error(prog))
        fail(static_cast<int>(err), "preparing the XDP program for libxdp");
    enum xdp_attach_mode xmode = mode == AttachMode::native ? XDP_MODE_NATIVE : XDP_MODE_SKB;
    if (int err = xdp_program__attach(prog, ifindex, xmode, 0)) {
        xdp_program__close(prog);
        fail(err, "attaching XDP to " + ifname +
                      (mode == AttachMode::native ? " in native mode" : " in skb mode") + ":\n" +
                      log.tail());
    }
    if (xdp_multiprog *mp = xdp_multiprog__get_from_ifindex(ifindex); mp && !libxdp_get_error(mp)) {
        if (xdp_multiprog__is_legacy(mp))
            spdlog::info(
                "libxdp could not use its multi-program dispatcher on this kernel; the program is "
                "attached alone, so {} cannot run another XDP program beside it",
                ifname);
        xdp_multiprog__close(mp);
    }
    xdp_prog_ = prog;
    ifindex_ = ifindex;
    mode_ = mode;
    loaded_ = true;
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
    if (!xdp_prog_)
        return;
    xdp_program *prog = xdp_prog_;
    xdp_prog_ = nullptr;
    // The TC side first, so no result is passed up to a host that would not copy it.
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex_, .attach_point = BPF_TC_INGRESS);
    if (tc_hook_created_) {
        hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
        bpf_tc_hook_destroy(&hook);  // removes the qdisc we made, and our filter with it
        tc_hook_created_ = false;
    } else if (tc_handle_) {
        // Someone else's clsact qdisc: remove only our filter from it.
        LIBBPF_OPTS(bpf_tc_opts, opts, .handle = tc_handle_, .priority = tc_priority_);
        bpf_tc_detach(&hook, &opts);
    }
    tc_handle_ = tc_priority_ = 0;
    enum xdp_attach_mode xmode = mode_ == AttachMode::native ? XDP_MODE_NATIVE : XDP_MODE_SKB;
    int err = xdp_program__detach(prog, ifindex_, xmode, 0);
    xdp_program__close(prog);
    if (err)
        fail(err, "detaching XDP");
}

Attachment FastPath::attachment() const
{
    Attachment a;
    a.mode = "none";
    if (!xdp_prog_)
        return a;
    LIBBPF_OPTS(bpf_xdp_query_opts, q);
    if (int err = bpf_xdp_query(ifindex_, 0, &q))
        fail(err, "querying the XDP program of interface " + std::to_string(ifindex_));
    switch (q.attach_mode) {
    case XDP_ATTACHED_DRV: a.mode = "native"; break;
    case XDP_ATTACHED_SKB: a.mode = "skb"; break;
    case XDP_ATTACHED_HW: a.mode = "hw"; break;
    case XDP_ATTACHED_MULTI: a.mode = "multi"; break;
    default: break;
    }
    a.prog_id = q.prog_id ? q.prog_id : (q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id);
    a.attached = a.prog_id != 0 && a.prog_id == xdp_program__id(xdp_prog_);
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
    if (uint64_t{job.region_base} + job.region_chunks > config_.max_chunks)
        throw std::invalid_argument("job region lies beyond the fast-path capacity");
    xagg_job value{};
    value.members = job.members;
    value.region_base = job.region_base;
    value.region_chunks = job.region_chunks;
    value.flags = 0;
    if (job.host_path)
        value.flags |= XAGG_JOB_HOST_PATH;
    if (job.fanout)
        value.flags |= XAGG_JOB_FANOUT;
    value.group_addr = job.group.s_addr;
    value.group_port = htons(job.group_port);
    update(bpf_map__fd(skel_->maps.jobs), &job.id, &value, "writing job " + std::to_string(job.id));
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
    xagg_member value{};
    value.addr = addr.s_addr;
    value.port = htons(port);
    update(bpf_map__fd(skel_->maps.members), &key, &value, "writing a member");
}

void FastPath::delete_member(uint32_t job_id, uint32_t rank)
{
    ensure_loaded();
    xagg_member_key key{job_id, rank};
    remove(bpf_map__fd(skel_->maps.members), &key, "deleting a member");
}

void FastPath::clear_region(uint32_t base, uint32_t chunks)
{
    ensure_loaded();
    if (uint64_t{base} + chunks > config_.max_chunks)
        throw std::invalid_argument("region lies beyond the fast-path capacity");
    const xagg_slot empty{};
    int fd = bpf_map__fd(skel_->maps.slots);
    for (uint32_t i = 2 * base; i < 2 * (base + chunks); i++)
        update(fd, &i, &empty, "clearing a slot");
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

std::vector<xagg_slot> FastPath::slots(uint32_t first, uint32_t count) const
{
    std::vector<xagg_slot> out;
    out.reserve(count);
    for_each_slot_batch(first, count, [&](uint32_t, std::span<const xagg_slot> batch) {
        out.insert(out.end(), batch.begin(), batch.end());
    });
    return out;
}

void FastPath::for_each_slot_batch(
    uint32_t first, uint32_t count,
    const std::function<void(uint32_t, std::span<const xagg_slot>)> &fn) const
{
    ensure_loaded();
    if (uint64_t{first} + count > 2ull * config_.max_chunks)
        throw std::invalid_argument("slot range beyond the map");
    int fd = bpf_map__fd(skel_->maps.slots);
    // Batched, each slot still copied under its lock: one system call per kBatch slots
    // instead of one per slot. (A profile of a 4-worker 64 MiB all-reduce had xaggd's per-slot
    // lookups for the straggler scan at a fifth of the machine.)
    constexpr uint32_t kBatch = 4096;
    batch_.resize(kBatch);
    std::vector<uint32_t> keys(kBatch);
    LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_F_LOCK);
    uint32_t done = 0;
    while (done < count) {
        // An array's batch starts after the key given (none: at 0).
        uint32_t before = first + done - 1, last = 0;
        uint32_t n = std::min(kBatch, count - done);
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

void FastPath::write_slots(uint32_t first, const std::vector<xagg_slot> &values)
{
    ensure_loaded();
    if (uint64_t{first} + values.size() > 2ull * config_.max_chunks)
        throw std::invalid_argument("slot range beyond the map");
    int fd = bpf_map__fd(skel_->maps.slots);
    for (uint32_t i = 0; i < values.size(); i++) {
        uint32_t key = first + i;
        // BPF_F_LOCK: copied under the slot's lock, which itself is left alone.
        if (bpf_map_update_elem(fd, &key, &values[i], BPF_F_LOCK) != 0)
            fail(errno, "writing slot " + std::to_string(key));
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
