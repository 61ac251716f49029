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

#endif /* XAGG_BPF_PARSE_H */
