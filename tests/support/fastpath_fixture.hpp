// SPDX-License-Identifier: MIT
// The fast path under BPF_PROG_TEST_RUN, as a fixture: five jobs in the maps, frames built for
// their members, each run checked for its action, its bytes and exactly one counter. Also the
// table of frames that must be refused or passed, which tests/acceptance_cross_path_test.cpp
// runs through the host path too.
#pragma once

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <climits>

#include "lib/fastpath/fastpath.hpp"
#include "tests/support/packet_builder.hpp"

namespace xagg::test {

// The fast-path variant under test (tests/support/variant_main.cpp); unset: the kernel's best.
extern std::optional<xagg_fastpath_variant> g_tested_variant;

// The loader's configuration for a test, on the variant under test.
inline FastPathConfig test_fastpath_config(uint32_t max_jobs, uint32_t max_positions)
{
    FastPathConfig config;
    config.max_jobs = max_jobs;
    config.max_positions = max_positions;
    config.variant = g_tested_variant;
    return config;
}

// Why the variant under test cannot run on this kernel, or "" if it can.
inline std::string untestable_variant()
{
    return g_tested_variant ? variant_unavailable(*g_tested_variant, probe_kernel()) : "";
}

constexpr uint32_t kJobA = 1, kJobB = 2, kJobHost = 3, kJobSolo = 4, kJobFanout = 5;
constexpr uint32_t kRegionChunks = 4;
constexpr uint16_t kGroupPort = 9872;
const Mac kAggMac{0x02, 0, 0, 0, 0, 0xaa};

struct Member {
    uint32_t ip;
    uint16_t port;
    Mac mac;
};

inline Member member_of(uint32_t job, uint32_t rank)
{
    return {ip4("10.0.0.0") + (job << 8) + rank + 1, static_cast<uint16_t>(5000 + rank),
            Mac{0x02, 0, 0, 0, static_cast<uint8_t>(job), static_cast<uint8_t>(rank + 1)}};
}

inline uint32_t group_of(uint32_t job)
{
    return ip4("239.1.0.0") + job;
}

inline Frame contribution(uint32_t job, uint32_t rank, uint32_t round, uint32_t chunk,
                          std::vector<int32_t> values = std::vector<int32_t>(XAGG_CHUNK_ELEMS, 7))
{
    Member m = member_of(job, rank);
    Frame f;
    f.src_mac = m.mac;
    f.dst_mac = kAggMac;
    f.src_ip = m.ip;
    f.src_port = m.port;
    f.job = job;
    f.rank = static_cast<uint16_t>(rank);
    f.round = round;
    f.chunk = chunk;
    f.values = std::move(values);
    return f;
}

struct Result {
    uint32_t action;
    Bytes out;
};

class FastPathTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (geteuid() != 0)
            GTEST_SKIP() << "BPF_PROG_TEST_RUN needs root (CAP_BPF + CAP_NET_ADMIN)";
        if (std::string why = untestable_variant(); !why.empty())
            GTEST_SKIP() << why;
        fp_ = std::make_unique<FastPath>(test_fastpath_config(16, 64));
        fp_->load();
        add_job(kJobA, 3, 0, kRegionChunks);
        add_job(kJobB, 2, kRegionChunks, kRegionChunks);
        add_job(kJobHost, 2, 0, 0, true);
        add_job(kJobSolo, 1, 2 * kRegionChunks, kRegionChunks);
        add_job(kJobFanout, 3, 4 * kRegionChunks, kRegionChunks, false, true);
    }

    void add_job(uint32_t id, uint32_t workers, uint32_t base, uint32_t chunks, bool host = false,
                 bool fanout = false, uint16_t chunk_elems = XAGG_CHUNK_ELEMS)
    {
        JobSpec job;
        job.chunk_elems = chunk_elems;
        job.id = id;
        job.members = workers == 64 ? ~0ull : (1ull << workers) - 1;
        job.region_base = base;
        job.region_positions = chunks;
        job.host_path = host;
        job.fanout = fanout;
        job.group.s_addr = htonl(group_of(id));
        job.group_port = kGroupPort;
        job.tag = id;  // each job its own owner tag
        job.key = test_job_key(id);
        fp_->put_job(job);
        jobs_.push_back({job, workers});
        for (uint32_t r = 0; r < workers; r++) {
            Member m = member_of(id, r);
            fp_->put_member(id, r, in_addr{htonl(m.ip)}, m.port);
        }
    }

    // What the aggregator must send when `last` completes a chunk: written independently of the
    // BPF code, from PROTOCOL.md ("Results").
    static Bytes multicast_result(const Frame &last, const std::vector<int32_t> &sum,
                                  uint64_t contrib)
    {
        Frame r = last;
        uint32_t g = group_of(last.job);
        r.dst_mac = Mac{0x01,
                        0x00,
                        0x5e,
                        static_cast<uint8_t>((g >> 16) & 0x7f),
                        static_cast<uint8_t>(g >> 8),
                        static_cast<uint8_t>(g)};
        r.src_mac = last.dst_mac;
        r.src_ip = last.dst_ip;
        r.dst_ip = g;
        r.src_port = last.dst_port;
        r.dst_port = kGroupPort;
        r.flags = XAGG_F_RESULT;
        r.rank = XAGG_RANK_AGGREGATOR;
        r.contrib = contrib;
        r.key = 0;  // results never carry the key
        r.values = sum;
        return with_udp_checksum(r.build());  // results carry a UDP checksum
    }

    static Bytes unicast_result(const Frame &asker, const std::vector<int32_t> &sum,
                                uint64_t contrib)
    {
        Frame r = asker;
        std::swap(r.src_mac, r.dst_mac);
        std::swap(r.src_ip, r.dst_ip);
        std::swap(r.src_port, r.dst_port);
        r.flags = XAGG_F_RESULT | XAGG_F_RESENT;
        r.rank = XAGG_RANK_AGGREGATOR;
        r.contrib = contrib;
        r.key = 0;
        r.values = sum;
        return with_udp_checksum(r.build());
    }

    // `linear`: how many of the frame's bytes the kernel puts in the linear part, the rest in
    // page-sized frags (0: as many as fit, about 3.5 KB), as a driver with small buffers would.
    Result run(const Bytes &in, uint32_t linear = 0) const
    {
        return run_prog(fp_->prog_fd(), in, linear);
    }

    static Result run_prog(int prog_fd, const Bytes &in, uint32_t linear = 0)
    {
        Bytes out(in.size() + 256);
        xdp_md ctx{};
        ctx.data_end = linear;
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = in.data(), .data_out = out.data(),
                    .data_size_in = static_cast<uint32_t>(in.size()),
                    .data_size_out = static_cast<uint32_t>(out.size()),
                    .ctx_in = linear ? &ctx : nullptr,
                    .ctx_size_in = linear ? uint32_t{sizeof(ctx)} : 0u, .repeat = 1);
        int err = bpf_prog_test_run_opts(prog_fd, &opts);
        EXPECT_EQ(err, 0) << "BPF_PROG_TEST_RUN failed: " << strerror(errno);
        out.resize(opts.data_size_out);
        return {opts.retval, out};
    }

    // Runs one frame and checks the action and that exactly `counter` moved, by one.
    Result expect(const Bytes &in, uint32_t action, enum xagg_counter counter,
                  uint32_t linear = 0) const
    {
        Counters before = fp_->counters();
        Result r = run(in, linear);
        Counters after = fp_->counters();
        EXPECT_EQ(r.action, action) << "counter expected: " << counter_name(counter);
        for (int c = 0; c < XAGG_CNT_MAX; c++) {
            uint64_t want = before[c] + (c == counter ? 1 : 0);
            if (c == XAGG_CNT_SUMMED_VALUES)  // beside the outcome: the values it added
                want = before[c] + (adds_values(counter) ? nelem_of(in) : 0);
            if (c == XAGG_CNT_CE_MARKED)  // and whether it came marked
                want = before[c] + (adds_values(counter) && ce_marked(in) ? 1 : 0);
            EXPECT_EQ(after[c], want) << "counter " << counter_name(static_cast<xagg_counter>(c));
        }
        return r;
    }

    void expect_unchanged(const Bytes &in, uint32_t action, enum xagg_counter counter,
                          uint32_t linear = 0) const
    {
        Result r = expect(in, action, counter, linear);
        EXPECT_EQ(r.out, in) << "a passed or dropped frame must leave the program untouched";
    }

    std::unique_ptr<FastPath> fp_;
    // The jobs in the maps, in the order added (members are ranks [0, workers), member_of).
    struct AddedJob {
        JobSpec spec;
        uint32_t workers;
    };
    std::vector<AddedJob> jobs_;
};

inline std::vector<int32_t> filled(int32_t v)
{
    return std::vector<int32_t>(XAGG_CHUNK_ELEMS, v);
}

inline std::vector<int32_t> random_values(uint32_t seed, size_t n = XAGG_CHUNK_ELEMS)
{
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> dist(INT32_MIN / 64, INT32_MAX / 64);
    std::vector<int32_t> v(n);
    for (auto &x : v)
        x = dist(rng);
    return v;
}

inline Frame jumbo_contribution(uint32_t job, uint32_t rank, uint32_t round, uint32_t chunk,
                                std::vector<int32_t> values)
{
    Frame f = contribution(job, rank, round, chunk, std::move(values));
    f.nelem = static_cast<uint16_t>(f.values.size());
    return f;
}

inline std::vector<int32_t> jumbo_random(uint32_t seed)
{
    return random_values(seed, XAGG_JUMBO_CHUNK_ELEMS);
}

inline std::vector<int32_t> sum_of(const std::vector<std::vector<int32_t>> &parts)
{
    std::vector<int32_t> s(parts.empty() ? XAGG_CHUNK_ELEMS : parts[0].size(), 0);
    for (const auto &p : parts)
        for (size_t i = 0; i < s.size(); i++)
            s[i] = static_cast<int32_t>(static_cast<uint32_t>(s[i]) + static_cast<uint32_t>(p[i]));
    return s;
}

// --- Frames that must be dropped or passed untouched ------------------------------------------

// A frame whose IP layer is wrong never reaches the host path as it is: the kernel drops,
// trims or reassembles it first. Only the fast path parses IP itself.
inline constexpr std::optional<enum xagg_counter> kIpLayerOnly = std::nullopt;

struct BadFrameCase {
    const char *name;
    std::function<Bytes()> make;
    uint32_t action;
    enum xagg_counter counter;  // the fast path's outcome
    // The host path's outcome for the same datagram (the UDP payload, from the same source):
    // the same counter for every refusal; a chunk the fast path passes up is the host's to add.
    std::optional<enum xagg_counter> host;
};

// gtest prints the case by name rather than as raw bytes.
inline void PrintTo(const BadFrameCase &c, std::ostream *os)
{
    *os << c.name;
}

inline Bytes a0()
{
    return contribution(kJobA, 0, 0, 0).build();
}

inline Bytes a0_with(const std::function<void(Frame &)> &edit)
{
    Frame f = contribution(kJobA, 0, 0, 0);
    edit(f);
    return f.build();
}

inline Bytes cut(Bytes b, size_t len)
{
    b.resize(len);
    return b;
}

// Inserts `n` bytes of IPv4 options (NOPs) and fixes lengths and checksum, so only the options
// are wrong.
inline Bytes with_ip_options(Bytes b, size_t n)
{
    b.insert(b.begin() + off::udp, n, 0x01);
    b[off::ip] = static_cast<uint8_t>(0x40 | (5 + n / 4));
    put_be16(b, off::ip_tot_len, static_cast<uint16_t>(b.size() - 14));
    return b;
}

// A well-formed frame around a datagram of `len` bytes: the contribution's first `len` bytes,
// with IP and UDP lengths (and checksum) saying so.
inline Bytes datagram_of_length(size_t len)
{
    Bytes b = a0();
    b.resize(off::x + len);
    put_be16(b, off::ip_tot_len, static_cast<uint16_t>(b.size() - off::ip));
    put_be16(b, off::udp_len, static_cast<uint16_t>(8 + len));
    put_be16(b, off::ip_csum, ipv4_checksum(b, off::ip));
    return b;
}

// Bytes after the IP packet's end, as a NIC's minimum-size padding leaves them.
inline Bytes padded(Bytes b, size_t n)
{
    b.resize(b.size() + n, 0);
    return b;
}

inline Bytes with_frag(Bytes b, uint16_t frag_field)
{
    put_be16(b, off::ip_frag, frag_field);
    put_be16(b, off::ip_csum, ipv4_checksum(b, off::ip));
    return b;
}

const BadFrameCase kBadFrames[] = {
    // Not xagg traffic: the host keeps working.
    {"cut_inside_ip_header", [] { return cut(a0(), off::ip + 10); }, XDP_PASS,
     XAGG_CNT_PASS_FOREIGN, kIpLayerOnly},
    {"ipv6",
     [] {
         auto b = a0();
         put_be16(b, off::eth_type, 0x86dd);
         return b;
     },
     XDP_PASS, XAGG_CNT_PASS_FOREIGN, kIpLayerOnly},
    {"arp",
     [] {
         auto b = a0();
         put_be16(b, off::eth_type, 0x0806);
         return b;
     },
     XDP_PASS, XAGG_CNT_PASS_FOREIGN, kIpLayerOnly},
    {"tcp",
     [] {
         auto b = a0();
         b[off::ip_proto] = 6;
         return b;
     },
     XDP_PASS, XAGG_CNT_PASS_FOREIGN, kIpLayerOnly},
    {"other_udp_port", [] { return a0_with([](Frame &f) { f.dst_port = 53; }); }, XDP_PASS,
     XAGG_CNT_PASS_FOREIGN, kIpLayerOnly},
    {"cut_inside_udp_header", [] { return cut(a0(), off::udp + 4); }, XDP_PASS,
     XAGG_CNT_PASS_FOREIGN, kIpLayerOnly},
    {"later_fragment", [] { return with_frag(a0(), 0x0010); }, XDP_PASS, XAGG_CNT_PASS_FOREIGN,
     kIpLayerOnly},
    // Addressed to xagg but malformed: counted and dropped, never summed.
    {"cut_after_udp_header", [] { return cut(a0(), off::x); }, XDP_DROP, XAGG_CNT_DROP_TRUNCATED,
     kIpLayerOnly},
    {"cut_inside_xagg_header", [] { return cut(a0(), off::x_nelem); }, XDP_DROP,
     XAGG_CNT_DROP_TRUNCATED, kIpLayerOnly},
    {"cut_inside_payload", [] { return cut(a0(), off::payload + 500); }, XDP_DROP,
     XAGG_CNT_DROP_TRUNCATED, kIpLayerOnly},
    {"cut_last_byte",
     [] {
         auto b = a0();
         return cut(b, b.size() - 1);
     },
     XDP_DROP, XAGG_CNT_DROP_TRUNCATED, kIpLayerOnly},
    {"udp_len_disagrees_with_ip",
     [] {
         auto b = a0();
         put_be16(b, off::udp_len, 8 + 32 + 4 * 255);
         return b;
     },
     XDP_DROP, XAGG_CNT_DROP_TRUNCATED, kIpLayerOnly},
    {"ip_options", [] { return with_ip_options(a0(), 4); }, XDP_DROP, XAGG_CNT_DROP_IP_OPTIONS,
     kIpLayerOnly},
    {"first_fragment", [] { return with_frag(a0(), 0x2000); }, XDP_DROP, XAGG_CNT_DROP_FRAGMENT,
     kIpLayerOnly},
    // The IPv4 header checksum: a flipped bit anywhere in the header, or the field zeroed (no
    // "checksum not computed" in IPv4, unlike UDP).
    {"bad_ip_checksum",
     [] {
         auto b = a0();
         b[off::ip_csum + 1] ^= 0x01;
         return b;
     },
     XDP_DROP, XAGG_CNT_DROP_BAD_IP_CHECKSUM, kIpLayerOnly},
    // A UDP checksum is checked when one was sent: a payload changed on the way (here one bit),
    // or a checksum field that is off, is dropped before anything is added. The host path's
    // kernel drops the same datagrams before its socket.
    {"udp_checksum_with_a_payload_bit_flipped",
     [] {
         auto b = with_udp_checksum(a0());
         b[off::payload + 1000] ^= 0x10;
         return b;
     },
     XDP_DROP, XAGG_CNT_DROP_BAD_UDP_CHECKSUM, kIpLayerOnly},
    {"udp_checksum_off_by_one",
     [] {
         auto b = with_udp_checksum(a0());
         b[off::udp_csum + 1] ^= 0x01;
         return b;
     },
     XDP_DROP, XAGG_CNT_DROP_BAD_UDP_CHECKSUM, kIpLayerOnly},
    {"ip_checksum_zero",
     [] {
         auto b = a0();
         put_be16(b, off::ip_csum, 0);
         return b;
     },
     XDP_DROP, XAGG_CNT_DROP_BAD_IP_CHECKSUM, kIpLayerOnly},
    {"source_address_changed_checksum_not",
     [] {
         auto b = a0();
         b[off::ip_src + 3] ^= 0x40;
         return b;
     },
     XDP_DROP, XAGG_CNT_DROP_BAD_IP_CHECKSUM, kIpLayerOnly},
    // The datagram: include/xagg/check.h, the same rule on both paths.
    {"datagram_empty", [] { return datagram_of_length(0); }, XDP_DROP, XAGG_CNT_DROP_TRUNCATED,
     XAGG_CNT_DROP_TRUNCATED},
    {"datagram_shorter_than_header", [] { return datagram_of_length(20); }, XDP_DROP,
     XAGG_CNT_DROP_TRUNCATED, XAGG_CNT_DROP_TRUNCATED},
    {"short_datagram_in_padded_frame", [] { return padded(datagram_of_length(20), 40); }, XDP_DROP,
     XAGG_CNT_DROP_TRUNCATED, XAGG_CNT_DROP_TRUNCATED},
    {"header_only", [] { return datagram_of_length(40); }, XDP_DROP, XAGG_CNT_DROP_BAD_LENGTH,
     XAGG_CNT_DROP_BAD_LENGTH},
    {"payload_one_value_short", [] { return datagram_of_length(40 + XAGG_CHUNK_BYTES - 4); },
     XDP_DROP, XAGG_CNT_DROP_BAD_LENGTH, XAGG_CNT_DROP_BAD_LENGTH},
    // Multi-buffer frames (an MTU-9000 link): BPF_PROG_TEST_RUN puts what is beyond 3520 bytes
    // in frags. A datagram longer than a contribution is a bad length, wherever its bytes lie.
    {"jumbo_datagram_spanning_frags", [] { return datagram_of_length(8000); }, XDP_DROP,
     XAGG_CNT_DROP_BAD_LENGTH, XAGG_CNT_DROP_BAD_LENGTH},
    {"jumbo_frame_cut_inside_its_frags", [] { return cut(datagram_of_length(8000), 6000); },
     XDP_DROP, XAGG_CNT_DROP_TRUNCATED, kIpLayerOnly},
    {"bad_magic", [] { return a0_with([](Frame &f) { f.magic = 0x58414748; }); }, XDP_DROP,
     XAGG_CNT_DROP_BAD_MAGIC, XAGG_CNT_DROP_BAD_MAGIC},
    {"magic_byte_swapped", [] { return a0_with([](Frame &f) { f.magic = 0x47474158; }); }, XDP_DROP,
     XAGG_CNT_DROP_BAD_MAGIC, XAGG_CNT_DROP_BAD_MAGIC},
    {"bad_version", [] { return a0_with([](Frame &f) { f.version = XAGG_VERSION + 1; }); },
     XDP_DROP, XAGG_CNT_DROP_BAD_VERSION, XAGG_CNT_DROP_BAD_VERSION},
    {"nelem_below_payload", [] { return a0_with([](Frame &f) { f.nelem = 255; }); }, XDP_DROP,
     XAGG_CNT_DROP_BAD_LENGTH, XAGG_CNT_DROP_BAD_LENGTH},
    {"nelem_above_payload", [] { return a0_with([](Frame &f) { f.nelem = 257; }); }, XDP_DROP,
     XAGG_CNT_DROP_BAD_LENGTH, XAGG_CNT_DROP_BAD_LENGTH},
    {"nelem_byte_swapped", [] { return a0_with([](Frame &f) { f.nelem = 0x0001; }); }, XDP_DROP,
     XAGG_CNT_DROP_BAD_LENGTH, XAGG_CNT_DROP_BAD_LENGTH},
    {"short_chunk_consistent_lengths",
     [] {
         return a0_with([](Frame &f) {
             f.nelem = 16;
             f.values.resize(16);
         });
     },
     XDP_DROP, XAGG_CNT_DROP_BAD_LENGTH, XAGG_CNT_DROP_BAD_LENGTH},
    {"result_flag_from_worker", [] { return a0_with([](Frame &f) { f.flags = XAGG_F_RESULT; }); },
     XDP_DROP, XAGG_CNT_DROP_BAD_FLAGS, XAGG_CNT_DROP_BAD_FLAGS},
    {"unknown_flag", [] { return a0_with([](Frame &f) { f.flags = 0x80; }); }, XDP_DROP,
     XAGG_CNT_DROP_BAD_FLAGS, XAGG_CNT_DROP_BAD_FLAGS},
    // Membership and isolation.
    {"unknown_job", [] { return a0_with([](Frame &f) { f.job = 99; }); }, XDP_DROP,
     XAGG_CNT_DROP_UNKNOWN_JOB, XAGG_CNT_DROP_UNKNOWN_JOB},
    // The job key (PROTOCOL.md, "The job key"): checked before membership, so a host that
    // forges a member's address and port but never joined is counted as lacking the key.
    {"no_key", [] { return a0_with([](Frame &f) { f.key = 0; }); }, XDP_DROP, XAGG_CNT_DROP_BAD_KEY,
     XAGG_CNT_DROP_BAD_KEY},
    {"key_one_bit_off",
     [] { return a0_with([](Frame &f) { f.key = test_job_key(kJobA) ^ (1ull << 63); }); }, XDP_DROP,
     XAGG_CNT_DROP_BAD_KEY, XAGG_CNT_DROP_BAD_KEY},
    {"key_byte_swapped",
     [] { return a0_with([](Frame &f) { f.key = __builtin_bswap64(test_job_key(kJobA)); }); },
     XDP_DROP, XAGG_CNT_DROP_BAD_KEY, XAGG_CNT_DROP_BAD_KEY},
    {"another_jobs_key", [] { return a0_with([](Frame &f) { f.key = test_job_key(kJobB); }); },
     XDP_DROP, XAGG_CNT_DROP_BAD_KEY, XAGG_CNT_DROP_BAD_KEY},
    {"member_of_job_b_with_its_key_claims_job_a",
     [] {
         auto f = contribution(kJobB, 0, 0, 0);
         f.key = test_job_key(kJobB);
         f.job = kJobA;
         return f.build();
     },
     XDP_DROP, XAGG_CNT_DROP_BAD_KEY, XAGG_CNT_DROP_BAD_KEY},
    {"wrong_source_address", [] { return a0_with([](Frame &f) { f.src_ip += 50; }); }, XDP_DROP,
     XAGG_CNT_DROP_NOT_MEMBER, XAGG_CNT_DROP_NOT_MEMBER},
    {"wrong_source_port", [] { return a0_with([](Frame &f) { f.src_port = 5999; }); }, XDP_DROP,
     XAGG_CNT_DROP_NOT_MEMBER, XAGG_CNT_DROP_NOT_MEMBER},
    {"unregistered_rank", [] { return a0_with([](Frame &f) { f.rank = 5; }); }, XDP_DROP,
     XAGG_CNT_DROP_NOT_MEMBER, XAGG_CNT_DROP_NOT_MEMBER},
    {"rank_beyond_bitmap", [] { return a0_with([](Frame &f) { f.rank = 200; }); }, XDP_DROP,
     XAGG_CNT_DROP_NOT_MEMBER, XAGG_CNT_DROP_NOT_MEMBER},
    {"member_of_job_b_claims_job_a",
     [] {
         auto f = contribution(kJobB, 0, 0, 0);
         f.job = kJobA;
         return f.build();
     },
     XDP_DROP, XAGG_CNT_DROP_NOT_MEMBER, XAGG_CNT_DROP_NOT_MEMBER},
    // Handed to the host-side parameter server, untouched.
    {"host_path_job", [] { return contribution(kJobHost, 1, 0, 0).build(); }, XDP_PASS,
     XAGG_CNT_PASS_HOST_JOB, XAGG_CNT_AGGREGATED},
    {"chunk_beyond_region", [] { return contribution(kJobA, 0, 0, kRegionChunks).build(); },
     XDP_PASS, XAGG_CNT_PASS_HOST_OVERFLOW, XAGG_CNT_AGGREGATED},
    // ... and past the job's chunks too: the host path keeps no state for it.
    {"chunk_far_beyond_region", [] { return contribution(kJobA, 0, 0, 0xffffffff).build(); },
     XDP_PASS, XAGG_CNT_PASS_HOST_OVERFLOW, XAGG_CNT_DROP_BEYOND_JOB},
};

}  // namespace xagg::test
