/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* UDP checksums (RFC 768) of xagg datagrams: verified on contributions, filled in on results,
 * adjusted for each fan-out copy. Sums are ones'-complement (RFC 1071) of words loaded in the
 * machine's order from network-order memory, which gives the checksum field's bytes as they
 * are stored, without swapping.
 *
 * Why the fast path pays for it (docs/PROTOCOL.md, Transport): the Ethernet FCS covers one link
 * at a time, the checksum what lies between (switch and NIC memory), where a flipped bit would
 * become a wrong gradient without a trace. Measured by bench/lanes_rate: 80-84 ns for 3 KiB with
 * the kernel's bpf_csum_diff, against 184 ns for the adds. */
#ifndef XAGG_BPF_UDP_CSUM_H
#define XAGG_BPF_UDP_CSUM_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xagg/proto.h"

static __always_inline __u16 csum_fold(__u64 sum)
{
    sum = (sum & 0xffffffff) + (sum >> 32);
    sum = (sum & 0xffffffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return (__u16)sum;
}

/* The ones'-complement sum `sum` with the `len` bytes at `p` added, or -1. `len` is a constant (a
 * multiple of 4, at most 8 KiB), so that the verifier sees each piece's size: bpf_csum_diff takes
 * at most 512 bytes a call. */
static __always_inline __s64 ones_sum_add(__u64 sum, const void *p, __u32 len)
{
    __u32 done = 0;
#pragma unroll
    for (int piece = 0; piece < 16; piece++) {
        __u32 size = len - done > 512 ? 512 : len - done;
        if (size == 0)
            break;
        __s64 s = bpf_csum_diff(0, 0, (__be32 *)(p + done), size,
                                (__wsum)((sum & 0xffffffff) + (sum >> 32)));
        if (s < 0)
            return -1;
        sum = (__u64)s;
        done += size;
    }
    return done == len ? (__s64)sum : -1;
}

static __always_inline __u64 udp_pseudo_sum(const struct iphdr *ip, const struct udphdr *udp)
{
    return (__u64)ip->saddr + ip->daddr + bpf_htons(IPPROTO_UDP) + udp->len;
}

/* The ones'-complement sum of the IPv4 pseudo-header and the `len` bytes of the datagram at
 * `udp`, as the checksum field now holds it, folded to 16 bits; -1 if it cannot be computed. */
static __always_inline int udp_ones_sum(const struct iphdr *ip, struct udphdr *udp, __u32 len,
                                        const void *end)
{
    if ((void *)udp + len > end)
        return -1;
    __s64 sum = ones_sum_add(udp_pseudo_sum(ip, udp), udp, len);
    return sum < 0 ? -1 : csum_fold((__u64)sum);
}

/* The same for a datagram whose values are not read in the frame but at `vals` (a copy in the
 * scratch map: a jumbo chunk always, a standard one the kernel could not make linear): the
 * headers from the frame, the `payload_bytes` values (a constant) from the copy. */
static __always_inline int udp_ones_sum_copied(const struct iphdr *ip, struct udphdr *udp,
                                               const void *end, const __s32 *vals,
                                               __u32 payload_bytes)
{
    const __u32 head = sizeof(struct udphdr) + sizeof(struct xagg_hdr);
    if ((void *)udp + head > end)
        return -1;
    __s64 sum = ones_sum_add(udp_pseudo_sum(ip, udp), udp, head);
    if (sum >= 0)
        sum = ones_sum_add((__u64)sum, vals, payload_bytes);
    return sum < 0 ? -1 : csum_fold((__u64)sum);
}

/* The checksum field for a datagram whose sum with the field zeroed is `sum`. A computed 0 goes
 * out as 0xffff: 0 would mean "none"; a sum that could not be computed leaves "none". */
static __always_inline __u16 udp_check_of(int sum)
{
    if (sum < 0)
        return 0; /* cannot happen for a frame the caller bounded */
    __u16 check = (__u16)~sum;
    return check ? check : 0xffff;
}

/* Whether the datagram's checksum is right, or none was sent. */
static __always_inline int udp_checksum_ok(const struct iphdr *ip, struct udphdr *udp, __u32 len,
                                           const void *end)
{
    return udp->check == 0 || udp_ones_sum(ip, udp, len, end) == 0xffff;
}

/* Fills in the checksum of a datagram whose addresses, ports and bytes are final. */
static __always_inline void udp_checksum_fill(const struct iphdr *ip, struct udphdr *udp, __u32 len,
                                              const void *end)
{
    udp->check = 0;
    udp->check = udp_check_of(udp_ones_sum(ip, udp, len, end));
}

/* RFC 1624 (eqn. 3): the checksum after a 32-bit field covered by it changed from `from` to
 * `to` (a 16-bit field: zero-extended), without summing the datagram again. "None" stays none. */
static __always_inline void udp_checksum_replace(struct udphdr *udp, __u32 from, __u32 to)
{
    if (udp->check == 0)
        return;
    __u64 sum = (__u16)~udp->check;
    sum += (~from & 0xffff) + (~from >> 16) + (to & 0xffff) + (to >> 16);
    __u16 check = (__u16)~csum_fold(sum);
    udp->check = check ? check : 0xffff;
}

#endif /* XAGG_BPF_UDP_CSUM_H */
