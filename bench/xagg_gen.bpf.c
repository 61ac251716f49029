// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Traffic source for the server-side benchmark, run by BPF_PROG_TEST_RUN in live-frames mode
 * on the generator's veth: each run turns its frame into the next contribution of W simulated
 * workers and sends it with XDP_TX to the aggregator at the other end. Live frames are recycled
 * dirty (the aggregator rewrote them into results), so every header field is written every time.
 * Payload values are left as they come: throughput does not depend on them.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "xagg/proto.h"
#include "bpf/xagg_reply.h"

const volatile __u32 workers = 4;
const volatile __u32 chunks_per_cpu = 1024; /* each CPU's generator owns its own chunk range */
const volatile __u32 job_id = 1;
const volatile __u64 job_key = 0;     /* host order, as xagg::JobSpec::key */
const volatile __u32 src_ip_base = 0; /* host order; rank r sends from base + r */
const volatile __u32 dst_ip = 0;      /* host order */
const volatile __u16 src_port = 9872;
const volatile __u16 dst_port = XAGG_DEFAULT_PORT;
const volatile __u8 src_mac[ETH_ALEN] = {};
const volatile __u8 dst_mac[ETH_ALEN] = {};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} sequence SEC(".maps");

SEC("xdp")
int xagg_gen(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct iphdr *ip = (void *)(eth + 1);
    struct udphdr *udp = (void *)(ip + 1);
    struct xagg_hdr *hdr = (void *)(udp + 1);
    __u32 zero = 0;

    if ((void *)(hdr + 1) + XAGG_CHUNK_BYTES > end)
        return XDP_ABORTED;
    __u64 *seq = bpf_map_lookup_elem(&sequence, &zero);
    if (!seq)
        return XDP_ABORTED;
    __u64 i = (*seq)++;
    __u32 rank = i % workers;
    __u64 per_round = (__u64)workers * chunks_per_cpu;
    __u32 chunk = (i / workers) % chunks_per_cpu + bpf_get_smp_processor_id() * chunks_per_cpu;
    __u32 round = i / per_round;

#pragma unroll
    for (int b = 0; b < ETH_ALEN; b++) {
        eth->h_dest[b] = dst_mac[b];
        eth->h_source[b] = src_mac[b];
    }
    eth->h_proto = bpf_htons(ETH_P_IP);
    ip->version = 4;
    ip->ihl = 5;
    ip->tos = 0;
    ip->tot_len = bpf_htons(20 + XAGG_UDP_BYTES);
    ip->id = 0;
    ip->frag_off = 0;
    ip->ttl = 64;
    ip->protocol = IPPROTO_UDP;
    ip->saddr = bpf_htonl(src_ip_base + rank);
    ip->daddr = bpf_htonl(dst_ip);
    ip->check = ipv4_csum(ip);
    udp->source = bpf_htons(src_port);
    udp->dest = bpf_htons(dst_port);
    udp->len = bpf_htons(XAGG_UDP_BYTES);
    udp->check = 0;
    hdr->magic = bpf_htonl(XAGG_MAGIC);
    hdr->version = XAGG_VERSION;
    hdr->flags = 0;
    hdr->rank = bpf_htons(rank);
    hdr->job_id = bpf_htonl(job_id);
    hdr->round = bpf_htonl(round);
    hdr->chunk = bpf_htonl(chunk);
    hdr->nelem = bpf_htons(XAGG_CHUNK_ELEMS);
    hdr->exponent = 0;
    hdr->marked = 0;
    hdr->contrib = 0;
    hdr->key = bpf_cpu_to_be64(job_key);
    return XDP_TX;
}

/* Sink for what comes back to the generator's veth (results, reflections). */
SEC("xdp")
int xagg_gen_sink(struct xdp_md *ctx)
{
    (void)ctx;
    return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
