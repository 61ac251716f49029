/* SPDX-License-Identifier: MIT */
/* Maps of the XDP fast path. Sizes here are placeholders: the loader sets the real capacities
 * (bpf_map__set_max_entries) before load, from the daemon's memory budget. */
#ifndef XAGG_BPF_MAPS_H
#define XAGG_BPF_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "xagg/fastpath.h"

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, XAGG_DEFAULT_MAX_JOBS);
    __type(key, __u32);
    __type(value, struct xagg_job);
} jobs SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, XAGG_DEFAULT_MAX_JOBS *XAGG_MAX_WORKERS);
    __type(key, struct xagg_member_key);
    __type(value, struct xagg_member);
} members SEC(".maps");

/* Two slots per chunk of fast-path capacity (see struct xagg_slot). */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 2 * XAGG_DEFAULT_MAX_POSITIONS);
    __type(key, __u32);
    __type(value, struct xagg_slot);
} slots SEC(".maps");

/* A contribution's values copied out of the frame's buffers, to be checked and added, and its
 * result's, to be copied back: a jumbo chunk's always, a standard chunk's when the kernel could
 * not make them linear (the copy variant, include/xagg/fastpath.h). One per CPU, as an XDP
 * program runs to the end on its CPU. The last XAGG_JUMBO_SLOT_PARTS * XAGG_CHUNK_ELEMS -
 * XAGG_JUMBO_CHUNK_ELEMS values are the unused tail of a jumbo chunk's last slot part: added
 * along (one loop size for every part) and never sent. */
struct xagg_payload_copy {
    __s32 vals[XAGG_JUMBO_SLOT_PARTS * XAGG_CHUNK_ELEMS];
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct xagg_payload_copy);
} payload_copy SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, XAGG_CNT_MAX);
    __type(key, __u32);
    __type(value, __u64);
} counters SEC(".maps");

#endif /* XAGG_BPF_MAPS_H */
