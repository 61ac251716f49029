/* SPDX-License-Identifier: MIT */
/*
 * One chunk slot's update: the core of aggregation, compiled into the BPF program and into the
 * daemon's host-side parameter server alike. Plain C on plain memory, no helpers, no locking.
 */
#ifndef XAGG_SLOT_H
#define XAGG_SLOT_H

#include <linux/types.h>

#include "xagg/fastpath.h"
#include "xagg/proto.h"

#ifdef __cplusplus
#define XAGG_INLINE inline
#else
#define XAGG_INLINE inline __attribute__((always_inline))
#endif
#ifdef __clang__
#define XAGG_UNROLL _Pragma("unroll")
#else
#define XAGG_UNROLL
#endif

/* What a slot update decided; the caller builds the reply. */
enum xagg_slot_verdict {
    XAGG_SLOT_ADDED,     /* counted, chunk incomplete: consume the packet */
    XAGG_SLOT_COMPLETED, /* counted, chunk complete: packet now carries the sum, send to the group
                          */
    XAGG_SLOT_DUPLICATE, /* already counted, incomplete: drop */
    XAGG_SLOT_RESEND,    /* already counted, complete: packet now carries the sum, send back */
    XAGG_SLOT_STALE,     /* round older than the slot's: drop */
    XAGG_SLOT_BAD_EXP,   /* exponent disagrees with the round's: drop */
};

/*
 * The four payload loops. Fully unrolled with plain 32-bit adds (wrapping, as the protocol
 * specifies): measured faster than per-element atomics or bpf_loop (docs/ARCHITECTURE.md,
 * "Concurrency"). The caller holds the slot's lock, which makes each packet's update atomic as a
 * whole.
 */
static XAGG_INLINE void xagg_payload_store(__s32 *sum, const __s32 *vals)
{
    XAGG_UNROLL
    for (int i = 0; i < XAGG_CHUNK_ELEMS; i++)
        sum[i] = vals[i];
}

static XAGG_INLINE void xagg_payload_add(__s32 *sum, const __s32 *vals)
{
    XAGG_UNROLL
    for (int i = 0; i < XAGG_CHUNK_ELEMS; i++)
        sum[i] = (__s32)((__u32)sum[i] + (__u32)vals[i]);
}

/* The last contribution: add and write the final sum into the packet in the same pass. */
static XAGG_INLINE void xagg_payload_add_and_emit(__s32 *sum, __s32 *vals)
{
    XAGG_UNROLL
    for (int i = 0; i < XAGG_CHUNK_ELEMS; i++) {
        __s32 s = (__s32)((__u32)sum[i] + (__u32)vals[i]);
        sum[i] = s;
        vals[i] = s;
    }
}

static XAGG_INLINE void xagg_payload_emit(const __s32 *sum, __s32 *vals)
{
    XAGG_UNROLL
    for (int i = 0; i < XAGG_CHUNK_ELEMS; i++)
        vals[i] = sum[i];
}

/* What a slot update does with the payload, decided by xagg_slot_decide(). */
enum xagg_payload_op {
    XAGG_PAYLOAD_NONE,     /* nothing: the packet is dropped */
    XAGG_PAYLOAD_STORE,    /* the first contribution of a round: the sum is its values */
    XAGG_PAYLOAD_ADD,      /* added into the sum */
    XAGG_PAYLOAD_ADD_EMIT, /* added, and the complete sum written into the packet */
    XAGG_PAYLOAD_EMIT,     /* the complete sum written into the packet (a re-send) */
};

static XAGG_INLINE void xagg_payload_apply(enum xagg_payload_op op, __s32 *sum, __s32 *vals)
{
    switch (op) {
    case XAGG_PAYLOAD_STORE: xagg_payload_store(sum, vals); break;
    case XAGG_PAYLOAD_ADD: xagg_payload_add(sum, vals); break;
    case XAGG_PAYLOAD_ADD_EMIT: xagg_payload_add_and_emit(sum, vals); break;
    case XAGG_PAYLOAD_EMIT: xagg_payload_emit(sum, vals); break;
    case XAGG_PAYLOAD_NONE: break;
    }
}

/* Whether the slot holds something of this job's position (else it is free to claim). */
static XAGG_INLINE int xagg_slot_owned(const struct xagg_slot *slot, __u32 tag, __u32 position)
{
    return slot->tag == tag && slot->chunk == position && slot->seen != 0;
}

/* What one contribution brings to the slot rule besides its values. */
struct xagg_contribution {
    __u32 tag;      /* the job's slot owner tag */
    __u32 position; /* its chunk times the job's parts (include/xagg/fastpath.h) */
    __u32 round;
    __s32 exponent;
    __u64 bit;     /* the sender's rank bit */
    __u64 members; /* the ranks whose contributions complete the chunk */
    __u32 marked;  /* 1 when it arrived with IP ECN = CE, else 0 */
};

/* What the slot holds once the contribution is decided: what a result carries. */
struct xagg_slot_outcome {
    __u64 seen;   /* the ranks summed */
    __u32 marked; /* how many of them arrived marked CE */
};

/*
 * The slot rule: what contribution `c` does to the slot of its position. Updates the slot's
 * bookkeeping, returns the verdict, sets `*op` to what the caller must then do with the payload
 * under the same lock, and `*out` to the slot's bitmap and mark count after it.
 */
static XAGG_INLINE enum xagg_slot_verdict xagg_slot_decide(struct xagg_slot *slot, __u64 now_ns,
                                                           const struct xagg_contribution *c,
                                                           enum xagg_payload_op *op,
                                                           struct xagg_slot_outcome *out)
{
    const __u32 tag = c->tag, position = c->position, round = c->round;
    const __s32 exponent = c->exponent;
    const __u64 bit = c->bit, members = c->members;
    enum xagg_slot_verdict verdict;

    *op = XAGG_PAYLOAD_NONE;
    /* Serial-number order (RFC 1982): a round up to 2^31 - 1 ahead of the slot's is newer. */
    if (!xagg_slot_owned(slot, tag, position) || (__s32)(round - slot->round) > 0) {
        /* First contribution of a newer round: claim the slot. Under the send rule that round is
         * slot->round + 2 and every member has the old result; a larger jump only happens when
         * whole rounds were lost or skipped, and then the old result is not wanted either. */
        slot->tag = tag;
        slot->chunk = position;
        slot->round = round;
        slot->exponent = exponent;
        slot->seen = bit;
        slot->marked = c->marked;
        slot->started_ns = now_ns; /* straggler timeouts count from here */
        *op = XAGG_PAYLOAD_STORE;
        /* In a one-worker job the first contribution is the sum, already in the packet. */
        verdict = (bit & members) == members ? XAGG_SLOT_COMPLETED : XAGG_SLOT_ADDED;
    } else if (slot->round != round) {
        verdict = XAGG_SLOT_STALE;
    } else if (slot->exponent != exponent) {
        verdict = XAGG_SLOT_BAD_EXP;
    } else if (slot->seen & bit) {
        if ((slot->seen & members) == members) {
            *op = XAGG_PAYLOAD_EMIT;
            verdict = XAGG_SLOT_RESEND;
        } else {
            verdict = XAGG_SLOT_DUPLICATE;
        }
    } else {
        slot->seen |= bit;
        slot->marked += c->marked;
        if ((slot->seen & members) == members) {
            *op = XAGG_PAYLOAD_ADD_EMIT;
            verdict = XAGG_SLOT_COMPLETED;
        } else {
            *op = XAGG_PAYLOAD_ADD;
            verdict = XAGG_SLOT_ADDED;
        }
    }
    out->seen = slot->seen;
    out->marked = slot->marked;
    return verdict;
}

/*
 * A further part of a jumbo chunk (parts 1 and 2), after xagg_slot_decide() on its first part
 * `lead`: the same bookkeeping, so every part reads as its own position's slot to the daemon,
 * which moves and scans slots one position at a time. The caller then applies the lead's payload
 * step to the part's values.
 */
static XAGG_INLINE void xagg_slot_follow(struct xagg_slot *part, const struct xagg_slot *lead,
                                         __u32 position)
{
    part->tag = lead->tag;
    part->chunk = position;
    part->round = lead->round;
    part->exponent = lead->exponent;
    part->seen = lead->seen;
    part->marked = lead->marked;
    part->started_ns = lead->started_ns;
}

#endif /* XAGG_SLOT_H */
