/* SPDX-License-Identifier: MIT */
/* Turning a received contribution, in place, into the result packet sent back by XDP_TX. */
#ifndef XAGG_BPF_REPLY_H
#define XAGG_BPF_REPLY_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xagg/fastpath.h"

/* IPv4 header checksum of a 20-byte header (no options: the parser drops those). Recomputed in
 * full because it is ten adds, cheaper to reason about than an incremental update. */
static __always_inline __u16 ipv4_csum(struct iphdr *ip)
{
    __u16 *words = (__u16 *)ip;
    __u32 sum = 0;

    ip->check = 0;
#pragma unroll
    for (int i = 0; i < (int)(sizeof(*ip) / 2); i++)
        sum += words[i];
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return (__u16)~sum;
}

/*
 * Address the frame to the job's multicast group: one XDP_TX, and the switch (or bridge) in front
 * of the aggregator's NIC copies it to every worker that joined the group. The checksums are
 * the caller's once the frame is final: IPv4 (the TOS byte changes too) and UDP
 * (bpf/xagg_udp_csum.h), left 0 here.
 */
static __always_inline void address_to_group(struct ethhdr *eth, struct iphdr *ip,
                                             struct udphdr *udp, const struct xagg_job *job)
{
    __u32 group = bpf_ntohl(job->group_addr);

    __builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
    /* RFC 1112: 01:00:5e followed by the low 23 bits of the group address. */
    eth->h_dest[0] = 0x01;
    eth->h_dest[1] = 0x00;
    eth->h_dest[2] = 0x5e;
    eth->h_dest[3] = (group >> 16) & 0x7f;
    eth->h_dest[4] = (group >> 8) & 0xff;
    eth->h_dest[5] = group & 0xff;

    ip->saddr = ip->daddr;
    ip->daddr = job->group_addr;

    udp->source = udp->dest;
    udp->dest = job->group_port;
    udp->check = 0;
}

/* Send the frame back to where it came from: the result re-sent to one worker alone. The
 * checksums are the caller's, as for address_to_group(). */
static __always_inline void address_to_sender(struct ethhdr *eth, struct iphdr *ip,
                                              struct udphdr *udp)
{
    unsigned char mac[ETH_ALEN];
    __be32 addr = ip->saddr;
    __be16 port = udp->source;

    __builtin_memcpy(mac, eth->h_source, ETH_ALEN);
    __builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
    __builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
    ip->saddr = ip->daddr;
    ip->daddr = addr;
    udp->source = udp->dest;
    udp->dest = port;
    udp->check = 0;
}

#endif /* XAGG_BPF_REPLY_H */
