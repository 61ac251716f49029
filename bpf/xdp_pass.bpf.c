// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Passes every frame. Native XDP_TX or redirect onto a veth only delivers when the peer end runs
 * an XDP program, so the test and demo topologies attach this one to the peers of the
 * aggregator's veth. Also the "no work" baseline of the benchmarks.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp.frags") /* attachable at any MTU, 9000 included */
int xdp_pass(struct xdp_md *ctx)
{
    (void)ctx;
    return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
