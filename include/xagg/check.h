/* SPDX-License-Identifier: MIT */
/*
 * The acceptance rule: which checks a datagram addressed to xagg must pass, in which order, and
 * the outcome counter each failing check yields; then which path serves a well-formed
 * contribution, and the counter each slot verdict yields. Compiled into the XDP program and into
 * the host-side parameter server alike (like slot.h), so both paths refuse the same datagram
 * with the same counter: tests/acceptance_cross_path_test.cpp runs one table of frames through
 * both. docs/PROTOCOL.md ("What the aggregator does with a datagram") is its prose.
 *
 * What comes before these checks differs by path and stays with each: the fast path parses
 * Ethernet/IPv4/UDP itself (and drops IP options, fragments and lengths that disagree), while
 * the host path gets the datagram from the kernel, which has done that work.
 *
 * Plain C on plain memory, valid for the BPF target and for C++: no helpers, no maps.
 */
#ifndef XAGG_CHECK_H
#define XAGG_CHECK_H

#include <linux/types.h>

#include "xagg/fastpath.h"
#include "xagg/proto.h"
#include "xagg/slot.h"

/* A check that passes yields no counter: the next step decides. */
#define XAGG_ACCEPT XAGG_CNT_MAX

/* Header fields are big-endian; these turn a host-order constant into wire order (folded at
 * compile time), so the checks compare raw fields without a byte swap per packet. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define XAGG_WIRE16(x) ((__u16)__builtin_bswap16(x))
#define XAGG_WIRE32(x) ((__u32)__builtin_bswap32(x))
#define XAGG_WIRE64(x) ((__u64)__builtin_bswap64(x))
#else
#define XAGG_WIRE16(x) ((__u16)(x))
#define XAGG_WIRE32(x) ((__u32)(x))
#define XAGG_WIRE64(x) ((__u64)(x))
#endif

/*
 * The datagram: `len` is the UDP payload's length as the UDP header states it, and `hdr` points
 * at its first bytes (readable whenever len >= sizeof(*hdr); not read otherwise). A version-3
 * contribution is exactly one header and a chunk of either size (XAGG_CHUNK_ELEMS or
 * XAGG_JUMBO_CHUNK_ELEMS values; whether it is its job's size is checked with the job, by
 * xagg_check_chunk_size), with no flag a worker may not set. Checked in this order; the first
 * that fails names the counter.
 */
static XAGG_INLINE enum xagg_counter xagg_check_datagram(const struct xagg_hdr *hdr, __u32 len)
{
    if (len < sizeof(struct xagg_hdr))
        return XAGG_CNT_DROP_TRUNCATED;
    if (hdr->magic != XAGG_WIRE32(XAGG_MAGIC))
        return XAGG_CNT_DROP_BAD_MAGIC;
    if (hdr->version != XAGG_VERSION)
        return XAGG_CNT_DROP_BAD_VERSION;
    if (!(hdr->nelem == XAGG_WIRE16(XAGG_CHUNK_ELEMS) &&
          len == sizeof(struct xagg_hdr) + XAGG_CHUNK_BYTES) &&
        !(hdr->nelem == XAGG_WIRE16(XAGG_JUMBO_CHUNK_ELEMS) &&
          len == sizeof(struct xagg_hdr) + XAGG_JUMBO_CHUNK_BYTES))
        return XAGG_CNT_DROP_BAD_LENGTH;
    if (hdr->flags & ~XAGG_F_WORKER_MASK)
        return XAGG_CNT_DROP_BAD_FLAGS;
    return XAGG_ACCEPT;
}

/* Whether a datagram that passed xagg_check_datagram carries a jumbo chunk. */
static XAGG_INLINE int xagg_is_jumbo(const struct xagg_hdr *hdr)
{
    return hdr->nelem == XAGG_WIRE16(XAGG_JUMBO_CHUNK_ELEMS);
}

/* Slot positions a chunk of `chunk_elems` values takes (include/xagg/fastpath.h): the one rule
 * the fast path, the host path, the daemon's memory accounting and xaggctl apply. */
static XAGG_INLINE __u32 xagg_chunk_parts(__u32 chunk_elems)
{
    return chunk_elems == XAGG_JUMBO_CHUNK_ELEMS ? XAGG_JUMBO_SLOT_PARTS : 1;
}

static XAGG_INLINE __u32 xagg_job_parts(const struct xagg_job *job)
{
    return xagg_chunk_parts(job->chunk_elems);
}

/*
 * The sender: the job must exist (`job` is its entry, NULL if none), the datagram carry the
 * job's key (`key` as on the wire), and the rank be one of its members (`member` is the entry
 * for (job, rank), NULL if none), sending from that member's registered address and port
 * (`saddr`, `sport` as on the wire). The key comes before membership so that a frame from a
 * host that never joined is counted as what it is, whatever address it forges. A rank evicted
 * from the job's bitmap is no longer a member even while its entry stays.
 */
static XAGG_INLINE enum xagg_counter xagg_check_sender(const struct xagg_job *job,
                                                       const struct xagg_member *member, __u32 rank,
                                                       __be64 key, __be32 saddr, __be16 sport)
{
    if (!job)
        return XAGG_CNT_DROP_UNKNOWN_JOB;
    if (key != job->key)
        return XAGG_CNT_DROP_BAD_KEY;
    if (!member || rank >= XAGG_MAX_WORKERS || member->addr != saddr || member->port != sport)
        return XAGG_CNT_DROP_NOT_MEMBER;
    if (!(job->members & (1ull << rank)))
        return XAGG_CNT_DROP_NOT_MEMBER;
    return XAGG_ACCEPT;
}

/* After the sender's checks: a chunk of another size than its job's is a bad length (a worker
 * that joined with the wrong size, or a frame of another job's size under this job's key). */
static XAGG_INLINE enum xagg_counter xagg_check_chunk_size(const struct xagg_job *job,
                                                           const struct xagg_hdr *hdr)
{
    return (job->chunk_elems == XAGG_JUMBO_CHUNK_ELEMS) == (xagg_is_jumbo(hdr) != 0)
               ? XAGG_ACCEPT
               : XAGG_CNT_DROP_BAD_LENGTH;
}

/*
 * Which path serves a chunk: the fast path holds the chunks whose slot positions lie below the
 * job's region_positions, of a job that is not configured for the host path (XAGG_ACCEPT);
 * everything else is the host path's, and the fast path passes it up with the counter returned.
 */
static XAGG_INLINE enum xagg_counter xagg_route(const struct xagg_job *job, __u32 chunk)
{
    if (job->flags & XAGG_JOB_HOST_PATH)
        return XAGG_CNT_PASS_HOST_JOB;
    __u32 parts = xagg_job_parts(job);
    /* 64 bits: a chunk index from the wire times the parts may not fit in 32. */
    if ((__u64)chunk * parts + parts > job->region_positions)
        return XAGG_CNT_PASS_HOST_OVERFLOW;
    return XAGG_ACCEPT;
}

/* The counter of a slot update's verdict (slot.h). */
static XAGG_INLINE enum xagg_counter xagg_verdict_counter(enum xagg_slot_verdict verdict,
                                                          const struct xagg_job *job)
{
    switch (verdict) {
    case XAGG_SLOT_ADDED: return XAGG_CNT_AGGREGATED;
    case XAGG_SLOT_DUPLICATE: return XAGG_CNT_DROP_DUPLICATE;
    case XAGG_SLOT_STALE: return XAGG_CNT_DROP_STALE_ROUND;
    case XAGG_SLOT_BAD_EXP: return XAGG_CNT_DROP_BAD_EXPONENT;
    case XAGG_SLOT_RESEND: return XAGG_CNT_RESENT;
    case XAGG_SLOT_COMPLETED:
        return (job->flags & XAGG_JOB_FANOUT) ? XAGG_CNT_COMPLETED_FANOUT : XAGG_CNT_COMPLETED;
    }
    return XAGG_CNT_DROP_STALE_ROUND;
}

/* A contribution's header turned, in place, into its result's: RESULT set (with `extra_flags`:
 * RESENT, FALLBACK), the aggregator's rank, the bitmap of the ranks summed, the count of them that
 * arrived marked CE, and the key zeroed: results are multicast, and whoever can read them need
 * not learn the key from them. */
static XAGG_INLINE void xagg_make_result_hdr(struct xagg_hdr *hdr, __u64 seen, __u32 marked,
                                             __u8 extra_flags)
{
    hdr->flags = XAGG_F_RESULT | extra_flags;
    hdr->rank = XAGG_WIRE16(XAGG_RANK_AGGREGATOR);
    hdr->marked = (__u8)(marked < XAGG_MAX_WORKERS ? marked : XAGG_MAX_WORKERS);
    hdr->contrib = XAGG_WIRE64(seen);
    hdr->key = 0;
}

/* Whether a contribution's IPv4 TOS byte says the network marked it Congestion Experienced. */
static XAGG_INLINE int xagg_tos_marked(__u8 tos)
{
    return (tos & XAGG_ECN_MASK) == XAGG_ECN_CE;
}

/* The IPv4 TOS byte of a result: ECN-capable, ECT(0), whatever the contribution it was made from
 * carried (a CE mark on that one is echoed in `marked`, not passed on). */
static XAGG_INLINE __u8 xagg_result_tos(__u8 contribution_tos)
{
    return (__u8)((contribution_tos & ~XAGG_ECN_MASK) | XAGG_ECN_ECT0);
}

#endif /* XAGG_CHECK_H */
