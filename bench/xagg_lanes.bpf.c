// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * DESIGN.md's lane-packing idea, measured alone: the cost of adding one packet's payload (768
 * values, 3 KiB) into a slot as 768 32-bit adds (what the fast path does) or as 384 64-bit adds
 * (two lanes of 32 bits per add: what packing narrower, biased values would allow). Same frame,
 * same bounds check; lanes_none is the program without the adds, so the differences are the adds'
 * cost.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "xagg/proto.h"

#define PAYLOAD_OFF XAGG_FRAME_HDR_BYTES
#define PAYLOAD_BYTES XAGG_CHUNK_BYTES

struct sum {
    __u64 v[PAYLOAD_BYTES / 8];
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct sum);
} sums SEC(".maps");

static __always_inline void *payload(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    if (data + PAYLOAD_OFF + PAYLOAD_BYTES > end)
        return 0;
    return data + PAYLOAD_OFF;
}

SEC("xdp")
int lanes_none(struct xdp_md *ctx)
{
    __u32 key = 0;
    struct sum *s = bpf_map_lookup_elem(&sums, &key);
    if (!s || !payload(ctx))
        return XDP_ABORTED;
    return XDP_DROP;
}

SEC("xdp")
int lanes_u32(struct xdp_md *ctx)
{
    __u32 key = 0;
    struct sum *s = bpf_map_lookup_elem(&sums, &key);
    __u32 *p = payload(ctx);
    if (!s || !p)
        return XDP_ABORTED;
    __u32 *acc = (__u32 *)s->v;
#pragma unroll
    for (int i = 0; i < PAYLOAD_BYTES / 4; i++)
        acc[i] += p[i];
    return XDP_DROP;
}

SEC("xdp")
int lanes_u64(struct xdp_md *ctx)
{
    __u32 key = 0;
    struct sum *s = bpf_map_lookup_elem(&sums, &key);
    __u64 *p = payload(ctx);
    if (!s || !p)
        return XDP_ABORTED;
#pragma unroll
    for (int i = 0; i < PAYLOAD_BYTES / 8; i++)
        s->v[i] += p[i];
    return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
