// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The ceiling for any program that answers: swap the MAC addresses and XDP_TX, no other work.
 * It counts what it reflects so the benchmark measures it exactly as it measures the fast path.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} reflected SEC(".maps");

SEC("xdp")
int xdp_reflect(struct xdp_md *ctx)
{
    struct ethhdr *eth = (void *)(long)ctx->data;
    unsigned char tmp[ETH_ALEN];
    __u32 zero = 0;

    if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
        return XDP_DROP;
    __builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
    __builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
    __builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
    __u64 *n = bpf_map_lookup_elem(&reflected, &zero);
    if (n)
        *n += 1;
    return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
