// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The fast path's per-byte costs, each measured alone on the same frame with the same bounds
 * check (lanes_none is that check without any work, so differences are the work's cost):
 * - the lane-packing idea (bench/README.md, section 5): adding one packet's payload (768 values, 3
 * KiB) into a slot as 768 32-bit adds (what the fast path does) or as 384 64-bit adds (two lanes of
 * 32 bits per add: what packing narrower, biased values would allow);
 * - verifying a UDP checksum over the payload before adding it (the sum must be checked before
 *   anything is added, so it is a pass of its own): 32-bit words into a 64-bit sum, 64-bit words
 *   with an end-around carry, and the kernel's bpf_csum_diff helper in 512-byte pieces (its
 *   largest), each alone and followed by the adds.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "xagg/proto.h"
#include "bpf/xagg_udp_csum.h" /* csum_fold: the fast path's own fold */

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

/* RFC 1071 ones'-complement sum of the payload, 32-bit words into 64 bits: 2^32 words could
 * be added before the accumulator overflows, and the fold at the end puts the carries back. */
static __always_inline __u16 csum_u32_words(const __u32 *p)
{
    __u64 acc = 0;
    /* Partly unrolled: a loop fully unrolled beside the adds' makes clang keep too many loads
     * live and spill past the 512-byte stack. */
#pragma clang loop unroll_count(16)
    for (int i = 0; i < PAYLOAD_BYTES / 4; i++)
        acc += p[i];
    return csum_fold(acc);
}

/* The same sum from 64-bit words: half the loads, but every add needs its carry put back. */
static __always_inline __u16 csum_u64_words(const __u64 *p)
{
    __u64 acc = 0;
#pragma clang loop unroll_count(16)
    for (int i = 0; i < PAYLOAD_BYTES / 8; i++) {
        __u64 x = p[i];
        acc += x;
        acc += acc < x;
    }
    return csum_fold(acc);
}

/* The kernel's helper, whose input is capped at 512 bytes a call. */
static __always_inline __s64 csum_helper(void *p)
{
    __s64 c = 0;
#pragma unroll
    for (int off = 0; off < PAYLOAD_BYTES; off += 512)
        c = bpf_csum_diff(0, 0, (__be32 *)(p + off), 512, (__wsum)c);
    return c;
}

static __always_inline void add_u32(struct sum *s, const __u32 *p)
{
    __u32 *acc = (__u32 *)s->v;
#pragma unroll
    for (int i = 0; i < PAYLOAD_BYTES / 4; i++)
        acc[i] += p[i];
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
    add_u32(s, p);
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

/* The programs below store the checksum where the adds would not touch it, so the compiler
 * cannot drop its computation. */
SEC("xdp")
int csum_u32(struct xdp_md *ctx)
{
    __u32 key = 0;
    struct sum *s = bpf_map_lookup_elem(&sums, &key);
    __u32 *p = payload(ctx);
    if (!s || !p)
        return XDP_ABORTED;
    s->v[0] = csum_u32_words(p);
    return XDP_DROP;
}

SEC("xdp")
int csum_u64(struct xdp_md *ctx)
{
    __u32 key = 0;
    struct sum *s = bpf_map_lookup_elem(&sums, &key);
    __u64 *p = payload(ctx);
    if (!s || !p)
        return XDP_ABORTED;
    s->v[0] = csum_u64_words(p);
    return XDP_DROP;
}

SEC("xdp")
int csum_helper_512(struct xdp_md *ctx)
{
    __u32 key = 0;
    struct sum *s = bpf_map_lookup_elem(&sums, &key);
    void *p = payload(ctx);
    if (!s || !p)
        return XDP_ABORTED;
    __s64 c = csum_helper(p);
    if (c < 0)
        return XDP_ABORTED;
    s->v[0] = (__u64)c;
    return XDP_DROP;
}

SEC("xdp")
int csum_u32_then_adds(struct xdp_md *ctx)
{
    __u32 key = 0;
    struct sum *s = bpf_map_lookup_elem(&sums, &key);
    __u32 *p = payload(ctx);
    if (!s || !p)
        return XDP_ABORTED;
    if (csum_u32_words(p) == 0x1234) /* a checksum that fails: nothing is added */
        return XDP_DROP;
    add_u32(s, p);
    return XDP_DROP;
}

SEC("xdp")
int csum_u64_then_adds(struct xdp_md *ctx)
{
    __u32 key = 0;
    struct sum *s = bpf_map_lookup_elem(&sums, &key);
    __u32 *p = payload(ctx);
    if (!s || !p)
        return XDP_ABORTED;
    if (csum_u64_words((const __u64 *)p) == 0x1234)
        return XDP_DROP;
    add_u32(s, p);
    return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
