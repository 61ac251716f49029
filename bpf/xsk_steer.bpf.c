// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The worker side of the AF_XDP transport (client/xsk_socket.cpp): on the worker's interface,
 * hands the frames for the worker's UDP port (its results, multicast or unicast) to the AF_XDP
 * socket bound to the queue they arrived on, and passes everything else (ARP, the control
 * connection, other traffic) to the kernel. Whole IPv4 datagrams only: a fragment has no UDP
 * header to match past the first, and the kernel reassembles them.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "bpf/xagg_parse.h"

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 256); /* one AF_XDP socket a receive queue */
    __type(key, __u32);
    __type(value, __u32);
} xsks SEC(".maps");

/* The worker's UDP port, network order; set before load. */
const volatile __u16 port_be = 0;

SEC("xdp.frags") /* the results of jumbo-chunk jobs span frags on a 9000-byte MTU */
int xsk_steer(struct xdp_md *ctx)
{
    struct cursor c = {(void *)(long)ctx->data, (void *)(long)ctx->data_end};
    struct ethhdr *eth = CURSOR_TAKE(&c, struct ethhdr);
    struct iphdr *ip;
    struct udphdr *udp;

    if (!eth || eth->h_proto != bpf_htons(ETH_P_IP))
        return XDP_PASS;
    ip = CURSOR_TAKE(&c, struct iphdr);
    if (!ip || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
        (ip->frag_off & bpf_htons(0x3fff)) != 0) /* MF or an offset: a fragment */
        return XDP_PASS;
    udp = CURSOR_TAKE(&c, struct udphdr);
    if (!udp || udp->dest != port_be)
        return XDP_PASS;
    return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
