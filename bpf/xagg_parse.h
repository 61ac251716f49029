/* SPDX-License-Identifier: MIT */
/* Header parsing with a cursor, in the style of xdp-tools: each step checks that the header it
 * returns lies inside the frame, so the verifier sees every access bounded. */
#ifndef XAGG_BPF_PARSE_H
#define XAGG_BPF_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>

#include "xagg/proto.h"

struct cursor {
    void *pos;
    void *end;
};

/* Returns a pointer to `len` bytes at the cursor and advances it, or NULL if the frame is
 * shorter. */
static __always_inline void *cursor_take(struct cursor *c, __u32 len)
{
    void *start = c->pos;

    if (start + len > c->end)
        return NULL;
    c->pos = start + len;
    return start;
}

#define CURSOR_TAKE(c, type) ((type *)cursor_take((c), sizeof(type)))

/* Whether an option-less IPv4 header's checksum is right: the ones'-complement sum of its ten
 * 16-bit words, the checksum field included, is all ones (RFC 1071). A NIC may have checked it
 * already, but XDP sees the frame before anything tells it so, and a header that fails is not
 * to be trusted: not its addresses (the membership check) and not its lengths. */
static __always_inline int ipv4_checksum_ok(const struct iphdr *ip)
{
    const __u16 *words = (const __u16 *)ip;
    __u32 sum = 0;

#pragma unroll
    for (int i = 0; i < (int)(sizeof(*ip) / 2); i++)
        sum += words[i];
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return sum == 0xffff;
}

#endif /* XAGG_BPF_PARSE_H */
