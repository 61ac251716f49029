// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * An ECN-marking switch port for the bench: this VM's kernel has no marking qdisc (no red,
 * fq_codel or netem), so a TC egress program in front of the port's tbf marks instead. It keeps
 * a phantom queue (HULL, NSDI 2012): a byte counter that every frame leaving the port fills and
 * that drains at `drain_bytes_per_sec` (the port's rate, or a little below it so that marking
 * starts before the real queue builds). A frame that finds the phantom queue above
 * `threshold_bytes` is marked CE if it is ECN-capable (ECT(0) or ECT(1)); a Not-ECT frame passes
 * unmarked, as RFC 3168 has a switch do before its queue overflows. It never drops: the tbf
 * behind it does that, as a switch's buffer would.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <stddef.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

const volatile __u64 drain_bytes_per_sec = 250000000; /* 2 Gbit/s */
const volatile __u64 threshold_bytes = 65536;

struct phantom {
    struct bpf_spin_lock lock;
    __u64 last_ns;
    __u64 queued_bytes;
};

/* What the loader prints: frames seen, ECN-capable ones, and those marked. */
struct marker_stats {
    __u64 frames, ect, marked;
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct phantom);
} queue SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct marker_stats);
} stats SEC(".maps");

#define ECN_MASK 0x03
#define ECN_CE 0x03

SEC("tc")
int ecn_marker(struct __sk_buff *skb)
{
    __u32 zero = 0;
    struct phantom *q = bpf_map_lookup_elem(&queue, &zero);
    struct marker_stats *s = bpf_map_lookup_elem(&stats, &zero);
    if (!q || !s)
        return TC_ACT_OK;
    s->frames++;

    /* The phantom queue, shared by every CPU sending through the port. */
    __u64 now = bpf_ktime_get_ns();
    bpf_spin_lock(&q->lock);
    __u64 drained = q->last_ns ? (now - q->last_ns) * drain_bytes_per_sec / 1000000000ull : 0;
    __u64 queued = q->queued_bytes > drained ? q->queued_bytes - drained : 0;
    queued += skb->len;
    q->queued_bytes = queued;
    q->last_ns = now;
    bpf_spin_unlock(&q->lock);

    void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
    struct ethhdr *eth = data;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
        return TC_ACT_OK;
    __u8 ecn = ip->tos & ECN_MASK;
    if (!ecn)
        return TC_ACT_OK; /* Not-ECT */
    s->ect++;
    if (queued <= threshold_bytes || ecn == ECN_CE)
        return TC_ACT_OK;
    /* The TOS byte shares a 16-bit checksum word with the version/IHL byte. */
    __u16 old_word = *(__u16 *)ip;
    __u8 tos = ip->tos | ECN_CE;
    __u16 new_word = old_word;
    ((__u8 *)&new_word)[1] = tos;
    const __u32 check_at = ETH_HLEN + offsetof(struct iphdr, check);
    const __u32 tos_at = ETH_HLEN + offsetof(struct iphdr, tos);
    if (bpf_l3_csum_replace(skb, check_at, old_word, new_word, sizeof(__u16)) != 0 ||
        bpf_skb_store_bytes(skb, tos_at, &tos, 1, 0) != 0)
        return TC_ACT_OK;
    s->marked++;
    return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
