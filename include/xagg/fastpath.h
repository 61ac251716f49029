/* SPDX-License-Identifier: MIT */
/*
 * The contract between the XDP fast path and the userspace that loads it: the layout of every map
 * key and value (the outcome counters it fills are in counters.h). Defined once, here, and compiled
 * into both the BPF program and the C++ side (unlike Katran, nothing is duplicated "to keep in
 * sync").
 */
#ifndef XAGG_FASTPATH_H
#define XAGG_FASTPATH_H

#include <linux/bpf.h>
#include <linux/types.h>

#include "xagg/counters.h"
#include "xagg/proto.h"

/* Slot owner tags are non-zero: zero marks a slot that no job has claimed yet. */
#define XAGG_TAG_NONE 0u

/* Map capacities the loader uses unless told otherwise (it may resize before load). */
#define XAGG_DEFAULT_MAX_JOBS 256
#define XAGG_DEFAULT_MAX_POSITIONS 65536 /* 64 MiB of gradient held at once */

/*
 * How the program reads a contribution that the driver spread over several receive buffers (a
 * multi-buffer frame): set by the loader before load (the program's `xagg_variant`), from what
 * the running kernel offers. docs/KERNELS.md says which kernel has which. On both, values that
 * are not in the linear part are copied out (bpf_xdp_load_bytes), summed from the copy and the
 * result copied back (bpf_xdp_store_bytes), as jumbo chunks always are.
 */
enum xagg_fastpath_variant {
    /* Linux 6.18+: headers a driver left outside the linear part (header-split receive) are
     * pulled into it with bpf_xdp_pull_data(). */
    XAGG_VARIANT_PULL = 0,
    /* Linux 6.1+ (multi-buffer XDP since 5.18): the headers must arrive in the first buffer. */
    XAGG_VARIANT_COPY = 1,
};

/* Job flags (struct xagg_job.flags). */
enum xagg_job_flags {
    /* Every chunk of this job goes to the host-side parameter server. */
    XAGG_JOB_HOST_PATH = 1u << 0,
    /* Deliver results by one unicast copy per member (TC bpf_clone_redirect) instead of one
     * multicast frame: for networks without multicast. */
    XAGG_JOB_FANOUT = 1u << 1,
};

/* Value of the `jobs` hash map; key: the job id (host order __u32). */
struct xagg_job {
    __u64 members; /* bitmap of the ranks whose contribution completes a chunk */
    /* The job's region of fast-path memory, counted in slot positions of XAGG_CHUNK_ELEMS values
     * (two slots each, see struct xagg_slot): chunk c of a job whose chunks take p positions
     * (1, or XAGG_JUMBO_SLOT_PARTS) lives at positions region_base + p * c .. + p - 1, and the
     * chunks whose positions lie below region_positions are aggregated here; the rest pass to the
     * host path. */
    __u32 region_base;
    __u32 region_positions;
    __u32 flags;       /* enum xagg_job_flags */
    __be32 group_addr; /* IPv4 multicast group results are sent to */
    __be16 group_port; /* UDP port results are sent to */
    __u16 chunk_elems; /* the job's chunk size: XAGG_CHUNK_ELEMS or XAGG_JUMBO_CHUNK_ELEMS */
    /* The owner tag of the job's slots: random and fresh for every job created. A slot counts
     * as this job's chunk only while it carries this tag and the chunk's index, so whatever a
     * previous owner left in the memory (another job, this id's previous job, this job's own
     * chunks before its region moved) is never mistaken for it: a new job needs no clearing. */
    __u32 tag;
    __u32 reserved2;
    /* The job's key as it sits in a contribution's header (wire order, compared without a
     * swap): a random secret, never zero, fresh for every job created and handed to members at
     * join. A frame without it is not added, whatever address it claims (docs/PROTOCOL.md, "The
     * job key"). */
    __be64 key;
};

/* Key of the `members` hash map. */
struct xagg_member_key {
    __u32 job_id;
    __u32 rank;
};

/* Value of the `members` hash map: the only source a rank's contributions are accepted from. */
struct xagg_member {
    __be32 addr; /* IPv4 source address */
    __be16 port; /* UDP source port */
    __u8 mac[6]; /* learned by the fast path from the member's frames (for fan-out) */
};

/*
 * One aggregation slot: a standard chunk's sum for one round, or a third of a jumbo chunk's
 * (XAGG_JUMBO_SLOT_PARTS consecutive positions, claimed, added and completed together under the
 * lock of the first, each carrying the same round, exponent and bitmap). Each position owns two
 * slots, used by rounds of alternating parity (slot index = 2 * position + (round & 1)). A worker
 * only sends round r of a chunk after it has the result of round r-1, which every worker
 * contributed to only after having the result of round r-2. So when round r reuses the slot of
 * round r-2, every member already has that result, while the result of round r-1, which a worker
 * may still be missing, stays intact in the other slot and can be re-sent. This is SwitchML's
 * shadow copy.
 */
struct xagg_slot {
    struct bpf_spin_lock lock;
    __u32 tag;        /* owner: the xagg_job.tag of the job that claimed it; 0 until claimed */
    __u32 round;      /* round whose sum this slot holds */
    __s32 exponent;   /* block exponent every contribution of the round must carry */
    __u32 chunk;      /* the owner's position, region-relative: chunk * parts + part */
    __u32 marked;     /* of the contributions added, how many arrived marked CE (XAGG_ECN_CE) */
    __u64 seen;       /* bitmap of ranks already added */
    __u64 started_ns; /* CLOCK_MONOTONIC when the round's first contribution arrived */
    __s32 sum[XAGG_CHUNK_ELEMS];
};
/* `marked` took what was padding before `seen`: the slot, and a pinned map of them, keep their
 * size. */
XAGG_STATIC_ASSERT(__builtin_offsetof(struct xagg_slot, seen) == 24 &&
                       sizeof(struct xagg_slot) == 40 + XAGG_CHUNK_BYTES,
                   "a slot is 40 bytes of bookkeeping and a standard chunk's sum");

#endif /* XAGG_FASTPATH_H */
