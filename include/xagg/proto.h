/* SPDX-License-Identifier: MIT */
/*
 * xagg wire protocol, version 3: the one definition used by the XDP program, the daemon and the
 * client. docs/PROTOCOL.md is the prose specification of everything here.
 *
 * Byte order: every header field wider than a byte is big-endian (network order). The payload is
 * the one exception: its int32 values are little-endian, the native order of every machine that
 * trains models, so neither the fast path nor the workers swap bytes per element. Both rules are
 * checked by the tests, which build packets byte by byte from PROTOCOL.md rather than from these
 * structs.
 *
 * This file must stay valid C for the BPF target and valid C++ for userspace: plain structs of
 * fixed-width kernel types, no padding (checked below), no behaviour.
 */
#ifndef XAGG_PROTO_H
#define XAGG_PROTO_H

#include <linux/types.h>

#ifdef __cplusplus
#define XAGG_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define XAGG_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* "XAGG" in ASCII; read as a big-endian u32. */
#define XAGG_MAGIC 0x58414747u
/* Version 3 adds the job key to the header (version 2 had none; version 1 carried 256 values
 * per chunk). */
#define XAGG_VERSION 3

/* Default UDP port of the aggregator; the daemon can load the program with another. */
#define XAGG_DEFAULT_PORT 9871

/*
 * Values per chunk: a job's chunks are all of one of two sizes, chosen when the job is created
 * (docs/PROTOCOL.md, "Chunk sizes"). Fixed per size so the fast path adds with fully unrolled
 * loops (a variable bound costs a compare per element and a verifier-proof bound anyway). A
 * worker pads the last chunk of a tensor with zeros.
 *
 * Why chunks are large: the cost that limits an all-reduce is per packet (the workers' UDP send
 * and receive path, the aggregator's parse and lock), not per byte, so a chunk should be as large
 * as one frame can be. Measured on veth, 4 workers, 64 MiB: 0.66 s per all-reduce with 256-value
 * chunks, 0.33 s with 768 (bench/run, see its README).
 *
 * Standard, 768 values: 768 x 4 bytes + headers = a 3154-byte frame, the largest round size that
 * still fits the linear (single-buffer) XDP frame every native-XDP driver gives a program: about
 * 3.5 KB of a 4 KiB page after headroom and skb_shared_info. Needs an IP MTU of 3140.
 *
 * Jumbo, 2048 values: 8 KiB of values, a 8274-byte frame that fits the standard 9000-byte MTU of
 * data-centre fabrics. It spans several receive buffers on most drivers, so the fast path reads
 * and writes it through the multi-buffer helpers (bpf/xagg_fastpath.bpf.c).
 */
#define XAGG_CHUNK_ELEMS 768
#define XAGG_CHUNK_BYTES (XAGG_CHUNK_ELEMS * 4)
#define XAGG_JUMBO_CHUNK_ELEMS 2048
#define XAGG_JUMBO_CHUNK_BYTES (XAGG_JUMBO_CHUNK_ELEMS * 4)
#define XAGG_MAX_CHUNK_ELEMS XAGG_JUMBO_CHUNK_ELEMS

/*
 * The aggregator's memory is counted in slots of XAGG_CHUNK_ELEMS values (include/xagg/
 * fastpath.h). A jumbo chunk occupies this many consecutive ones, the last of them only in part
 * (2048 of 2304 values: 11% of a jumbo job's memory unused, against one pool that every job,
 * whatever its chunk size, is sized from without a second budget).
 */
#define XAGG_JUMBO_SLOT_PARTS 3
XAGG_STATIC_ASSERT(XAGG_JUMBO_SLOT_PARTS *XAGG_CHUNK_ELEMS >= XAGG_JUMBO_CHUNK_ELEMS &&
                       (XAGG_JUMBO_SLOT_PARTS - 1) * XAGG_CHUNK_ELEMS < XAGG_JUMBO_CHUNK_ELEMS,
                   "a jumbo chunk fills its slots but the last");

/*
 * A float all-reduce first agrees on its blocks' exponents: each block (chunk of values) takes
 * XAGG_EXPONENT_GROUPS int32 of an "exponent chunk" (docs/CLIENT.md), which therefore serves
 * XAGG_BLOCKS_PER_EXPONENT_CHUNK blocks. Workers send those chunks like any other, so whoever
 * sizes a job's slots (the daemon's cluster agent) counts them too.
 */
#define XAGG_EXPONENT_GROUPS 12
#define XAGG_BLOCKS_PER_EXPONENT_CHUNK (XAGG_CHUNK_ELEMS / XAGG_EXPONENT_GROUPS)

/* Job ids are 1..XAGG_MAX_JOB_ID: the wire has 32 bits for them, but a job's default multicast
 * group is the daemon's group base plus its id, within a /16. */
#define XAGG_JOB_ID_NONE 0u
#define XAGG_MAX_JOB_ID 0xffffu

/* Ranks are bits of a 64-bit contributor bitmap. */
#define XAGG_MAX_WORKERS 64

/* The rank field of a packet sent by the aggregator. */
#define XAGG_RANK_AGGREGATOR 0xffffu

/* Header flags. */
enum xagg_flags {
    /* Set by the aggregator on every result; a worker never sets it. */
    XAGG_F_RESULT = 1u << 0,
    /* Set by a worker on a contribution it has sent before (informational: the aggregator relies
     * on its contributor bitmap, not on this bit, to avoid adding a value twice). */
    XAGG_F_RETRANSMIT = 1u << 1,
    /* Set on results computed by the host-side parameter server rather than the XDP fast path. */
    XAGG_F_FALLBACK = 1u << 2,
    /* Set on a result that was re-sent to one worker alone (a lost result recovered). */
    XAGG_F_RESENT = 1u << 3,
};

/*
 * Explicit Congestion Notification (RFC 3168), the two low bits of the IPv4 TOS byte. Workers send
 * contributions ECT(0); a switch whose queue builds marks them CE; the aggregator counts the marked
 * contributions of a chunk's round and echoes the count in the result's `marked` byte, so that
 * every worker learns of a congested path within a round trip (docs/PROTOCOL.md, "Congestion
 * echo"). Results leave the aggregator ECT(0) too, so the path back can be marked as well.
 */
#define XAGG_ECN_MASK 0x03u
#define XAGG_ECN_ECT0 0x02u
#define XAGG_ECN_CE 0x03u

/* Flags a worker may set on a contribution; any other bit makes the packet malformed. */
#define XAGG_F_WORKER_MASK (XAGG_F_RETRANSMIT)

struct xagg_hdr {
    __be32 magic;   /* XAGG_MAGIC */
    __u8 version;   /* XAGG_VERSION */
    __u8 flags;     /* enum xagg_flags */
    __be16 rank;    /* sender's rank in the job, XAGG_RANK_AGGREGATOR on results */
    __be32 job_id;  /* job the chunk belongs to */
    __be32 round;   /* iteration number; rounds of a chunk advance by one, wrapping at 2^32 */
    __be32 chunk;   /* chunk index within the job's gradient */
    __be16 nelem;   /* int32 values that follow: the job's chunk size, 768 or 2048 */
    __s8 exponent;  /* block exponent: value = int32 * 2^exponent; all ranks must agree */
    __u8 marked;    /* results: of the contributions summed, how many arrived marked CE; else 0 */
    __be64 contrib; /* results: bitmap of the ranks summed (bit r = rank r); zero otherwise */
    __be64 key;     /* contributions: the job's key, handed out at join; zero on results */
};

/* Every field sits at its natural alignment, so the struct has no padding and needs no packing
 * attribute (packing would make clang emit byte-by-byte loads in the BPF program). */
XAGG_STATIC_ASSERT(sizeof(struct xagg_hdr) == 40, "xagg header is 40 bytes on the wire");
XAGG_STATIC_ASSERT(__builtin_offsetof(struct xagg_hdr, job_id) == 8, "job_id at offset 8");
XAGG_STATIC_ASSERT(__builtin_offsetof(struct xagg_hdr, nelem) == 20, "nelem at offset 20");
XAGG_STATIC_ASSERT(__builtin_offsetof(struct xagg_hdr, marked) == 23, "marked at offset 23");
XAGG_STATIC_ASSERT(__builtin_offsetof(struct xagg_hdr, contrib) == 24, "contrib at offset 24");
XAGG_STATIC_ASSERT(__builtin_offsetof(struct xagg_hdr, key) == 32, "key at offset 32");

/* A contribution's UDP datagram: UDP header (8) + xagg header (40) + payload. */
#define XAGG_UDP_BYTES (8 + 40 + XAGG_CHUNK_BYTES)
#define XAGG_JUMBO_UDP_BYTES (8 + 40 + XAGG_JUMBO_CHUNK_BYTES)
/* Ethernet (14) + IPv4 without options (20) + UDP (8) + xagg header (40) + payload. */
#define XAGG_FRAME_HDR_BYTES (14 + 20 + 8 + 40)
#define XAGG_FRAME_BYTES (XAGG_FRAME_HDR_BYTES + XAGG_CHUNK_BYTES)
#define XAGG_JUMBO_FRAME_BYTES (XAGG_FRAME_HDR_BYTES + XAGG_JUMBO_CHUNK_BYTES)
/* The IP MTU a chunk's frame needs on every link between a worker and its aggregator: 3140 for
 * standard chunks, 8260 for jumbo ones. */
#define XAGG_MIN_MTU (XAGG_FRAME_BYTES - 14)
#define XAGG_JUMBO_MIN_MTU (XAGG_JUMBO_FRAME_BYTES - 14)

#endif /* XAGG_PROTO_H */
