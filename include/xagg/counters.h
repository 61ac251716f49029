/* SPDX-License-Identifier: MIT */
/*
 * The outcome counters, the `counters` per-CPU array's entries: one per outcome, shared by the
 * fast path and the host-side parameter server. Their names are in counters.hpp (userspace);
 * docs/XAGGD.md says what each means. Apart from the map layout (fastpath.h) so that code that
 * only reads counts needs no BPF headers.
 */
#ifndef XAGG_COUNTERS_H
#define XAGG_COUNTERS_H

/*
 * Outcome counters, one per-CPU array entry each. Every packet the XDP program sees increments
 * exactly one of these, so their sum is the number of packets processed, except the two FANOUT_
 * ones, which count the TC fan-out's copies.
 */
enum xagg_counter {
    XAGG_CNT_PASS_FOREIGN = 0,   /* not xagg traffic: passed untouched */
    XAGG_CNT_DROP_TRUNCATED,     /* xagg port, but shorter than its IP/UDP/xagg lengths say */
    XAGG_CNT_DROP_IP_OPTIONS,    /* IPv4 header with options */
    XAGG_CNT_DROP_FRAGMENT,      /* IPv4 fragment */
    XAGG_CNT_DROP_BAD_MAGIC,     /* xagg header magic is wrong */
    XAGG_CNT_DROP_BAD_VERSION,   /* protocol version not supported */
    XAGG_CNT_DROP_BAD_LENGTH,    /* element count does not match the UDP length, or != chunk */
    XAGG_CNT_DROP_BAD_FLAGS,     /* a worker sent a result flag or an unknown flag */
    XAGG_CNT_DROP_UNKNOWN_JOB,   /* job id not registered */
    XAGG_CNT_DROP_NOT_MEMBER,    /* rank unknown, or not from that rank's address and port */
    XAGG_CNT_PASS_HOST_JOB,      /* job configured for the host path: passed to the host PS */
    XAGG_CNT_PASS_HOST_OVERFLOW, /* chunk beyond the job's fast-path region: passed to host PS */
    XAGG_CNT_AGGREGATED,         /* contribution added; chunk still waiting for others */
    XAGG_CNT_COMPLETED,          /* last contribution added; result sent to the group */
    XAGG_CNT_DROP_DUPLICATE,     /* contribution already counted, chunk not yet complete */
    XAGG_CNT_RESENT,             /* contribution already counted, chunk complete: result re-sent */
    XAGG_CNT_DROP_STALE_ROUND,   /* round older than the one its slot holds */
    XAGG_CNT_DROP_BAD_EXPONENT,  /* block exponent differs from the round's first contribution */
    XAGG_CNT_DROP_MOVING,        /* host path only: the job's chunks are moving between the paths */
    XAGG_CNT_COMPLETED_FANOUT,   /* last contribution added; passed to TC to copy per member */
    /* Counted by the TC fan-out program, per copy rather than per packet: */
    XAGG_CNT_FANOUT_COPIES, /* unicast copies of a result sent */
    XAGG_CNT_FANOUT_FAILED, /* copies that could not be made (member gone, clone failed) */
    /* Per packet again, and counted by the fast path only (the kernel drops such a packet before
     * the host path's socket sees it). Last so that the indices above keep their meaning across
     * an upgrade that takes over pinned maps. */
    XAGG_CNT_DROP_BAD_IP_CHECKSUM, /* IPv4 header checksum wrong: the header is not trusted */
    /* Both paths again (appended for the same reason). */
    XAGG_CNT_DROP_BAD_KEY, /* the job exists, but the contribution does not carry its key */
    /* Fast path only, like the IPv4 checksum: the kernel drops these before the host path. */
    XAGG_CNT_DROP_BAD_UDP_CHECKSUM, /* a UDP checksum was sent (non-zero), and it is wrong */
    /* Fast path only: a contribution spread over receive buffers whose headers could not be made
     * linear (bpf_xdp_pull_data failed: the driver leaves too little room in its first buffer;
     * or, before Linux 6.18, the first buffer ends inside the headers: header-split receive). */
    XAGG_CNT_DROP_NOT_LINEAR,
    /* Host path only: a chunk index past the job's chunks (the fast path passes it up as
     * pass_host_overflow). Dropped before it takes any state: a member cannot grow the daemon's
     * memory by sending indexes no job has. */
    XAGG_CNT_DROP_BEYOND_JOB,
    /* Both paths, beside a contribution's outcome rather than one: the values of every
     * contribution added into a sum (aggregated, completed, completed_fanout), 768 or 2048 each,
     * so that the gradient bytes summed are 4 times this whatever the jobs' chunk sizes. */
    XAGG_CNT_SUMMED_VALUES,
    /* Both paths, beside the outcome too: contributions added that arrived marked CE (IP ECN
     * = 11), the marks the results echo (docs/PROTOCOL.md, "Congestion echo"): congestion on
     * the way to this aggregator. */
    XAGG_CNT_CE_MARKED,
    XAGG_CNT_MAX,
};

#endif /* XAGG_COUNTERS_H */
