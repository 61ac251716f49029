// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A lossy link for tests: drops about 5% of the frames it sees, at random. This kernel has no
 * tc netem (CONFIG_NET_SCH_NETEM is off), so the loss tests attach this to both ends of each
 * worker's veth instead.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp.frags") /* attachable at any MTU, 9000 included */
int xdp_lossy(struct xdp_md *ctx)
{
    (void)ctx;
    return bpf_get_prandom_u32() % 100 < 5 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
