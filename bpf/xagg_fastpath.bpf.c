// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * xagg fast path: sums quantized gradient chunks into BPF maps and answers with the result from
 * XDP, before the kernel stack sees the packet. docs/PROTOCOL.md specifies what happens to every
 * kind of packet; the counters in include/xagg/counters.h name every outcome, and
 * include/xagg/check.h is the acceptance rule it shares with the host parameter server.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xagg/check.h"
#include "xagg/fastpath.h"
#include "xagg/proto.h"
#include "xagg/slot.h"
#include "bpf/xagg_maps.h"
#include "bpf/xagg_parse.h"
#include "bpf/xagg_reply.h"
#include "bpf/xagg_udp_csum.h"

/* Set by the loader before load; the defaults make an unconfigured object usable in tests. */
const volatile __u16 xagg_port = XAGG_DEFAULT_PORT;

static __always_inline void count_n(enum xagg_counter which, __u64 n)
{
    __u32 key = which;
    __u64 *value = bpf_map_lookup_elem(&counters, &key);

    if (value)
        *value += n;
}

static __always_inline int count(enum xagg_counter which, int action)
{
    count_n(which, 1);
    return action;
}

/* clang turns __builtin_memcmp into a call of memcmp, which BPF does not have. */
static __always_inline int mac_equal(const unsigned char *a, const unsigned char *b)
{
    int same = 1;
#pragma unroll
    for (int i = 0; i < ETH_ALEN; i++)
        same &= a[i] == b[i];
    return same;
}

/* When the unlocked peek shows that this packet may start a round, the clock: no helper may be
 * called under the lock, and reading the clock on every packet costs ~10%. The peek is safe: if
 * it sees the packet's round, that round was claimed already and cannot be claimed again. */
static __always_inline __u64 clock_if_claiming(const struct xagg_slot *slot, __u32 tag,
                                               __u32 position, __u32 round)
{
    return slot->round != round || !xagg_slot_owned(slot, tag, position) ? bpf_ktime_get_ns() : 0;
}

/*
 * A chunk's update: its `parts` slot positions (1, or XAGG_JUMBO_SLOT_PARTS for a jumbo chunk;
 * include/xagg/fastpath.h), looked up before the lock (no helper may be called under it),
 * decided on the first part, and the same payload step applied to every part's third of `vals`,
 * all under the first part's lock, so each contribution is added whole or not at all. `vals` is
 * the frame's payload or its copy in the payload_copy map.
 *
 * One loop for both sizes, so the payload step (four unrolled loops) is inlined once: Linux
 * before 6.9 refuses any call, subprograms included, while a lock is held, and a copy per part
 * would put the program's jumps beyond BPF's 16-bit offsets.
 */
static __always_inline enum xagg_slot_verdict update_chunk(const struct xagg_job *job,
                                                           const struct xagg_contribution *c,
                                                           __u32 parts, __s32 *vals,
                                                           struct xagg_slot_outcome *out,
                                                           int *found)
{
    struct xagg_slot *part[XAGG_JUMBO_SLOT_PARTS] = {};
    const __u32 position = c->position;
    __u32 index = 2 * (job->region_base + position) + (c->round & 1);
    for (__u32 p = 0; p < XAGG_JUMBO_SLOT_PARTS && p < parts; p++, index += 2) {
        part[p] = bpf_map_lookup_elem(&slots, &index);
        if (!part[p]) {
            *found = 0;
            return XAGG_SLOT_STALE;
        }
    }
    struct xagg_slot *lead = part[0];
    *found = lead != NULL;
    if (!lead)
        return XAGG_SLOT_STALE;

    __u64 now = clock_if_claiming(lead, job->tag, position, c->round);
    enum xagg_payload_op op;
    bpf_spin_lock(&lead->lock);
    enum xagg_slot_verdict verdict = xagg_slot_decide(lead, now, c, &op, out);
    for (__u32 p = 0; p < XAGG_JUMBO_SLOT_PARTS && p < parts; p++) {
        struct xagg_slot *slot = part[p];
        if (!slot) /* looked up above; the verifier wants it said */
            break;
        if (p > 0)
            xagg_slot_follow(slot, lead, position + p);
        xagg_payload_apply(op, slot->sum, vals + p * XAGG_CHUNK_ELEMS);
    }
    bpf_spin_unlock(&lead->lock);
    return verdict;
}

/* Linux 6.18: makes the first `len` bytes of a multi-buffer frame linear. Weak: on an older
 * kernel libbpf leaves it unresolved (address 0) and the program takes the copy variant. */
extern int bpf_xdp_pull_data(struct xdp_md *xdp, __u32 len) __ksym __weak;

/* The loader's choice (enum xagg_fastpath_variant), from what the kernel offers. The kfunc's
 * own presence is checked too: a pull the kernel cannot resolve is then dead code, which the
 * verifier removes rather than refuses. */
const volatile __u32 xagg_variant = XAGG_VARIANT_COPY;

static __always_inline int can_pull(void)
{
    return xagg_variant == XAGG_VARIANT_PULL && !!bpf_xdp_pull_data;
}

/* Whether an Ethernet/IPv4/UDP header set (no IP options) is addressed to xagg's port. */
static __always_inline int addressed_to_xagg(const struct ethhdr *eth, const struct iphdr *ip,
                                             const struct udphdr *udp)
{
    return eth->h_proto == bpf_htons(ETH_P_IP) && ip->ihl == 5 && ip->protocol == IPPROTO_UDP &&
           udp->dest == bpf_htons(xagg_port);
}

/*
 * A multi-buffer program (xdp.frags) may be attached to an interface of any MTU, 9000 included,
 * but then a frame may arrive spread over several receive buffers (a driver whose buffers are
 * smaller than the frame, e.g. 3 KiB on i40e). The parser reads the headers (up to the end of the
 * xagg header) from the linear part only; values beyond it are copied out later
 * (bpf_xdp_load_bytes) and the result copied back. Every driver puts at least its first buffer, 2-4
 * KiB, in the linear part; only header-split receive puts less, even less than the UDP header.
 *
 * PULL variant (Linux 6.18): headers the driver left outside the linear part are pulled into it,
 * the UDP header's first to see whether the frame is ours at all, then the rest of a
 * contribution's. Only the headers: pulling a standard contribution's values too, to sum them in
 * place, was measured no faster than copying them (bench/chunk_cost: 941-1120 ns against
 * 885-1121 for a contribution split at 3072 bytes), and a linear 8 KiB would not fit the one page
 * most drivers give a buffer. Other traffic is left as it came.
 *
 * COPY variant: nothing can be pulled, so a frame to xagg's port whose headers are not all linear
 * is refused; the headers are copied out to tell whether it is one.
 *
 * Returns 0 when the parser may go on, -1 when a frame to xagg could not be given the linear
 * headers it needs.
 */
static __always_inline int pull_headers(struct xdp_md *ctx)
{
    const __u32 l4 = sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr);
    __u32 linear = (__u32)(ctx->data_end - ctx->data);
    if (linear >= XAGG_FRAME_HDR_BYTES)
        return 0; /* the headers are there (the helper call below costs every packet ~10 ns) */
    __u64 have = bpf_xdp_get_buff_len(ctx);
    if (linear >= have)
        return 0; /* all there is */
    if (!can_pull()) {
        /* Two bytes ahead of the Ethernet header put the IP header at a 4-byte boundary, with
         * no padding between the three: the stack allows no unaligned access. */
        struct {
            __u16 align;
            struct ethhdr eth;
            struct iphdr ip;
            struct udphdr udp;
        } h;
        _Static_assert(__builtin_offsetof(typeof(h), udp) + sizeof(h.udp) - 2 ==
                           sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr),
                       "the headers lie back to back");
        if (bpf_xdp_load_bytes(ctx, 0, &h.eth, l4) != 0)
            return 0; /* shorter than a UDP header: not recognisably ours */
        return addressed_to_xagg(&h.eth, &h.ip, &h.udp) ? -1 : 0;
    }
    if (linear < l4 && have >= l4 && bpf_xdp_pull_data(ctx, l4) != 0)
        return -1;
    struct cursor c = {.pos = (void *)(long)ctx->data, .end = (void *)(long)ctx->data_end};
    struct ethhdr *eth = CURSOR_TAKE(&c, struct ethhdr);
    struct iphdr *ip = CURSOR_TAKE(&c, struct iphdr);
    struct udphdr *udp = CURSOR_TAKE(&c, struct udphdr);
    if (!eth || !ip || !udp || !addressed_to_xagg(eth, ip, udp))
        return 0;
    __u64 want = have < XAGG_FRAME_HDR_BYTES ? have : XAGG_FRAME_HDR_BYTES;
    if ((__u64)(ctx->data_end - ctx->data) >= want)
        return 0;
    return bpf_xdp_pull_data(ctx, (__u32)want) == 0 ? 0 : -1;
}

/* The ones'-complement sum of a datagram whose values were copied to `vals`, for either size. */
static __always_inline int udp_ones_sum_of_copy(const struct iphdr *ip, struct udphdr *udp,
                                                const void *end, const __s32 *vals, int jumbo)
{
    return jumbo ? udp_ones_sum_copied(ip, udp, end, vals, XAGG_JUMBO_CHUNK_BYTES)
                 : udp_ones_sum_copied(ip, udp, end, vals, XAGG_CHUNK_BYTES);
}

SEC("xdp.frags")
int xagg_fastpath(struct xdp_md *ctx)
{
    if (pull_headers(ctx) < 0)
        return count(XAGG_CNT_DROP_NOT_LINEAR, XDP_DROP);
    struct cursor c = {.pos = (void *)(long)ctx->data, .end = (void *)(long)ctx->data_end};
    struct ethhdr *eth;
    struct iphdr *ip;
    struct udphdr *udp;
    struct xagg_hdr *hdr;

    /* Layers 2-4: anything that is not IPv4/UDP to our port is somebody else's traffic. A frame
     * cut short before its UDP header cannot be recognised as ours and is left to the kernel. */
    eth = CURSOR_TAKE(&c, struct ethhdr);
    if (!eth || eth->h_proto != bpf_htons(ETH_P_IP))
        return count(XAGG_CNT_PASS_FOREIGN, XDP_PASS);
    ip = CURSOR_TAKE(&c, struct iphdr);
    if (!ip || ip->version != 4 || ip->protocol != IPPROTO_UDP || ip->ihl < 5)
        return count(XAGG_CNT_PASS_FOREIGN, XDP_PASS);
    /* A non-first fragment carries no UDP header: it cannot be told apart from other traffic. */
    if (ip->frag_off & bpf_htons(0x1fff))
        return count(XAGG_CNT_PASS_FOREIGN, XDP_PASS);
    if (ip->ihl > 5) {
        /* Skip the options only far enough to see whether the packet is ours. */
        __u32 options = (ip->ihl - 5) * 4;
        if (options > 40 || !cursor_take(&c, options))
            return count(XAGG_CNT_PASS_FOREIGN, XDP_PASS);
    }
    udp = CURSOR_TAKE(&c, struct udphdr);
    if (!udp || udp->dest != bpf_htons(xagg_port))
        return count(XAGG_CNT_PASS_FOREIGN, XDP_PASS);

    /* From here on the packet is addressed to xagg: whatever is wrong with it is counted. The
     * IP layer's checks are the fast path's own (on the host path the kernel makes them). */
    if (ip->ihl != 5)
        return count(XAGG_CNT_DROP_IP_OPTIONS, XDP_DROP);
    if (!ipv4_checksum_ok(ip))
        return count(XAGG_CNT_DROP_BAD_IP_CHECKSUM, XDP_DROP);
    if (ip->frag_off & bpf_htons(0x2000)) /* more fragments */
        return count(XAGG_CNT_DROP_FRAGMENT, XDP_DROP);
    /* Beyond the frame, not beyond its linear part: a datagram longer than a contribution may
     * sit partly in frags (it was not pulled), and it is a bad length, not a truncated one. */
    if (sizeof(*eth) + bpf_ntohs(ip->tot_len) > bpf_xdp_get_buff_len(ctx) ||
        bpf_ntohs(ip->tot_len) != sizeof(*ip) + bpf_ntohs(udp->len) ||
        bpf_ntohs(udp->len) < sizeof(*udp))
        return count(XAGG_CNT_DROP_TRUNCATED, XDP_DROP);

    /* The datagram: include/xagg/check.h, the rule the host path applies too. The UDP length
     * lies inside the frame (checked above), so a header it covers is there to read. */
    __u32 len = bpf_ntohs(udp->len) - sizeof(*udp);
    hdr = CURSOR_TAKE(&c, struct xagg_hdr);
    if (!hdr)
        return count(XAGG_CNT_DROP_TRUNCATED, XDP_DROP);
    enum xagg_counter refused = xagg_check_datagram(hdr, len);
    if (refused != XAGG_ACCEPT)
        return count(refused, XDP_DROP);
    /* A standard chunk's values are summed where they are when they are linear. A jumbo chunk's
     * values, and a standard chunk's that the driver split over buffers, are copied out of the
     * frame's buffers, wherever the driver put them: after the headers, so from the linear part
     * or not (ihl is 5 here). */
    const int jumbo = xagg_is_jumbo(hdr);
    const __u32 payload_bytes = jumbo ? XAGG_JUMBO_CHUNK_BYTES : XAGG_CHUNK_BYTES;
    struct xagg_payload_copy *copy = NULL;
    __s32 *vals = jumbo ? NULL : cursor_take(&c, XAGG_CHUNK_BYTES);
    int sum_ok;
    if (vals) {
        sum_ok = udp_checksum_ok(ip, udp, XAGG_UDP_BYTES, c.end);
    } else {
        __u32 zero = 0;
        copy = bpf_map_lookup_elem(&payload_copy, &zero);
        if (!copy || bpf_xdp_load_bytes(ctx, XAGG_FRAME_HDR_BYTES, copy->vals, payload_bytes) != 0)
            return count(XAGG_CNT_DROP_TRUNCATED, XDP_DROP);
        vals = copy->vals;
        sum_ok = udp->check == 0 || udp_ones_sum_of_copy(ip, udp, c.end, vals, jumbo) == 0xffff;
    }
    /* Checked once the length is known to be a contribution's, before anything is added: a
     * payload corrupted between the sender's checksum and here (a switch's or NIC's memory, which
     * the per-link Ethernet FCS does not cover) is not summed. The host path's kernel drops the
     * same datagrams. */
    if (!sum_ok)
        return count(XAGG_CNT_DROP_BAD_UDP_CHECKSUM, XDP_DROP);

    /* The sender: the job must exist, the frame carry its key, and the rank be sent from its
     * registered source. */
    __u32 job_id = bpf_ntohl(hdr->job_id);
    struct xagg_job *job = bpf_map_lookup_elem(&jobs, &job_id);
    struct xagg_member_key mkey = {.job_id = job_id, .rank = bpf_ntohs(hdr->rank)};
    struct xagg_member *member = job ? bpf_map_lookup_elem(&members, &mkey) : NULL;
    refused = xagg_check_sender(job, member, mkey.rank, hdr->key, ip->saddr, udp->source);
    if (refused != XAGG_ACCEPT || !job || !member)
        return count(refused, XDP_DROP);
    refused = xagg_check_chunk_size(job, hdr);
    if (refused != XAGG_ACCEPT)
        return count(refused, XDP_DROP);
    __u64 bit = 1ull << (mkey.rank & (XAGG_MAX_WORKERS - 1));
    /* Learn the member's MAC for the unicast fan-out; written only when it changes. */
    if (!mac_equal(member->mac, eth->h_source))
        __builtin_memcpy(member->mac, eth->h_source, ETH_ALEN);

    /* The host-side parameter server listens on the same port: passing is handing it over. */
    __u32 chunk = bpf_ntohl(hdr->chunk);
    enum xagg_counter handed_over = xagg_route(job, chunk);
    if (handed_over != XAGG_ACCEPT)
        return count(handed_over, XDP_PASS);

    /* A jumbo chunk's values are always a copy: tying its parts to the copy lets the verifier
     * see that values in the frame are one part, never read past it (Linux 6.1's verifier does
     * not link `jumbo` to where `vals` points). */
    const __u32 parts = copy && jumbo ? XAGG_JUMBO_SLOT_PARTS : 1;
    const struct xagg_contribution contribution = {
        .tag = job->tag,
        .position = chunk * parts,
        .round = bpf_ntohl(hdr->round),
        .exponent = hdr->exponent,
        .bit = bit,
        .members = job->members,
        .marked = xagg_tos_marked(ip->tos),
    };
    struct xagg_slot_outcome slot = {};
    int found;
    enum xagg_slot_verdict verdict = update_chunk(job, &contribution, parts, vals, &slot, &found);
    /* region_base + region_positions never exceeds the map's capacity (the loader checks it), and
     * the array lookup bounds-checks the index anyway, so no job reaches beyond its region. */
    if (!found)
        return count(XAGG_CNT_PASS_HOST_OVERFLOW, XDP_PASS);
    enum xagg_counter outcome = xagg_verdict_counter(verdict, job);
    if (verdict == XAGG_SLOT_ADDED || verdict == XAGG_SLOT_COMPLETED) {
        count_n(XAGG_CNT_SUMMED_VALUES, payload_bytes / sizeof(__s32));
        if (contribution.marked)
            count_n(XAGG_CNT_CE_MARKED, 1);
    }
    if (verdict != XAGG_SLOT_COMPLETED && verdict != XAGG_SLOT_RESEND)
        return count(outcome, XDP_DROP);

    ip->tos = xagg_result_tos(ip->tos);
    if (verdict == XAGG_SLOT_RESEND) {
        xagg_make_result_hdr(hdr, slot.seen, slot.marked, XAGG_F_RESENT);
        address_to_sender(eth, ip, udp);
    } else {
        xagg_make_result_hdr(hdr, slot.seen, slot.marked, 0);
        /* XDP cannot copy a frame: a fan-out job's result goes up as it came, and TC ingress
         * copies it to each member. */
        if (outcome != XAGG_CNT_COMPLETED_FANOUT)
            address_to_group(eth, ip, udp, job);
    }
    ip->check = ipv4_csum(ip);
    if (copy) {
        /* The headers are final: checksum them with the sum in the copy, then copy the
         * sum into the frame's buffers (the last access to the frame). */
        udp->check = 0;
        udp->check = udp_check_of(udp_ones_sum_of_copy(ip, udp, c.end, copy->vals, jumbo));
        if (bpf_xdp_store_bytes(ctx, XAGG_FRAME_HDR_BYTES, copy->vals, payload_bytes) != 0)
            return count(XAGG_CNT_DROP_TRUNCATED, XDP_DROP); /* cannot happen: it was loaded */
    } else {
        udp_checksum_fill(ip, udp, XAGG_UDP_BYTES, c.end);
    }
    return count(outcome, outcome == XAGG_CNT_COMPLETED_FANOUT ? XDP_PASS : XDP_TX);
}

/*
 * Unicast fan-out, for jobs with XAGG_JOB_FANOUT: the XDP program above passes the completed
 * result up, still addressed as the last contribution was, with the RESULT flag set. Only it can
 * produce such a packet (it drops any RESULT flag a worker sends), so TC ingress recognises it by
 * that flag, copies it once per member with bpf_clone_redirect out of the same interface, and
 * drops the original.
 */
SEC("tc")
int xagg_fanout(struct __sk_buff *skb)
{
    struct cursor c = {.pos = (void *)(long)skb->data, .end = (void *)(long)skb->data_end};
    struct ethhdr *eth = CURSOR_TAKE(&c, struct ethhdr);
    struct iphdr *ip;
    struct udphdr *udp;
    struct xagg_hdr *hdr;

    if (!eth || eth->h_proto != bpf_htons(ETH_P_IP))
        return TC_ACT_OK;
    ip = CURSOR_TAKE(&c, struct iphdr);
    if (!ip || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
        return TC_ACT_OK;
    udp = CURSOR_TAKE(&c, struct udphdr);
    if (!udp || udp->dest != bpf_htons(xagg_port))
        return TC_ACT_OK;
    hdr = CURSOR_TAKE(&c, struct xagg_hdr);
    if (!hdr || !(hdr->flags & XAGG_F_RESULT) || hdr->magic != bpf_htonl(XAGG_MAGIC))
        return TC_ACT_OK;

    __u32 job_id = bpf_ntohl(hdr->job_id);
    struct xagg_job *job = bpf_map_lookup_elem(&jobs, &job_id);
    if (!job) {
        count(XAGG_CNT_FANOUT_FAILED, 0);
        return TC_ACT_SHOT;
    }
    __u64 member_set = job->members;
    __be32 self_addr = ip->daddr;
    __be16 self_port = udp->dest;
    unsigned char self_mac[ETH_ALEN];
    __builtin_memcpy(self_mac, eth->h_dest, ETH_ALEN);

    for (__u32 rank = 0; rank < XAGG_MAX_WORKERS; rank++) {
        if (!(member_set & (1ull << rank)))
            continue;
        struct xagg_member_key key = {.job_id = job_id, .rank = rank};
        struct xagg_member *m = bpf_map_lookup_elem(&members, &key);
        if (!m) {
            count(XAGG_CNT_FANOUT_FAILED, 0);
            continue;
        }
        /* Every clone invalidates packet pointers: find the headers again. */
        void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
        if (data + XAGG_FRAME_HDR_BYTES > end)
            return TC_ACT_SHOT;
        eth = data;
        ip = (void *)(eth + 1);
        udp = (void *)(ip + 1);
        __builtin_memcpy(eth->h_dest, m->mac, ETH_ALEN);
        __builtin_memcpy(eth->h_source, self_mac, ETH_ALEN);
        /* The XDP program summed the checksum over the whole result; each copy changes only
         * addresses and ports, so it is adjusted, not summed again per member. */
        udp_checksum_replace(udp, ip->saddr, self_addr);
        udp_checksum_replace(udp, ip->daddr, m->addr);
        udp_checksum_replace(udp, udp->source, self_port);
        udp_checksum_replace(udp, udp->dest, m->port);
        ip->saddr = self_addr;
        ip->daddr = m->addr;
        ip->check = ipv4_csum(ip);
        udp->source = self_port;
        udp->dest = m->port;
        if (bpf_clone_redirect(skb, skb->ifindex, 0) == 0)
            count(XAGG_CNT_FANOUT_COPIES, 0);
        else
            count(XAGG_CNT_FANOUT_FAILED, 0);
    }
    return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
