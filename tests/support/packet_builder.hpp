// SPDX-License-Identifier: MIT
// Builds Ethernet/IPv4/UDP/xagg frames byte by byte, at the offsets docs/PROTOCOL.md gives, so the
// tests check the wire format itself rather than trusting the structs in include/xagg/.
#pragma once

#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xagg/proto.h"

namespace xagg::test {

using Bytes = std::vector<uint8_t>;
using Mac = std::array<uint8_t, 6>;

inline uint32_t ip4(const char *dotted)
{
    in_addr a{};
    inet_pton(AF_INET, dotted, &a);
    return ntohl(a.s_addr);
}

// Offsets within a frame without IP options (PROTOCOL.md, "Frame layout").
namespace off {
inline constexpr size_t eth_dst = 0, eth_src = 6, eth_type = 12;
inline constexpr size_t ip = 14, ip_tos = 15, ip_tot_len = 16, ip_frag = 20, ip_ttl = 22,
                        ip_proto = 23, ip_csum = 24, ip_src = 26, ip_dst = 30;
inline constexpr size_t udp = 34, udp_sport = 34, udp_dport = 36, udp_len = 38, udp_csum = 40;
inline constexpr size_t x = 42, x_magic = 42, x_version = 46, x_flags = 47, x_rank = 48, x_job = 50,
                        x_round = 54, x_chunk = 58, x_nelem = 62, x_exp = 64, x_marked = 65,
                        x_contrib = 66, x_key = 74, payload = 82;
}  // namespace off

inline void put_be16(Bytes &b, size_t at, uint16_t v)
{
    b[at] = static_cast<uint8_t>(v >> 8);
    b[at + 1] = static_cast<uint8_t>(v);
}
inline void put_be32(Bytes &b, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
inline void put_be64(Bytes &b, size_t at, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[at + i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
inline void put_le32(Bytes &b, size_t at, int32_t v)
{
    auto u = static_cast<uint32_t>(v);
    for (int i = 0; i < 4; i++)
        b[at + i] = static_cast<uint8_t>(u >> (8 * i));
}
// The xagg header's nelem of a frame built above.
inline uint16_t nelem_of(const Bytes &frame)
{
    return static_cast<uint16_t>((frame[off::x_nelem] << 8) | frame[off::x_nelem + 1]);
}
// Whether a frame built above arrived marked Congestion Experienced.
inline bool ce_marked(const Bytes &frame)
{
    return (frame[off::ip_tos] & XAGG_ECN_MASK) == XAGG_ECN_CE;
}
inline int32_t get_le32(const Bytes &b, size_t at)
{
    uint32_t u = 0;
    for (int i = 0; i < 4; i++)
        u |= uint32_t{b[at + i]} << (8 * i);
    return static_cast<int32_t>(u);
}

// RFC 791 header checksum over the 20 bytes at `at`, with the checksum field taken as zero.
inline uint16_t ipv4_checksum(const Bytes &b, size_t at)
{
    uint32_t sum = 0;
    for (size_t i = 0; i < 20; i += 2) {
        if (i == 10)
            continue;
        sum += (uint32_t{b[at + i]} << 8) | b[at + i + 1];
    }
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(~sum);
}

// RFC 768 checksum of the UDP datagram of a frame (IPv4 without options), over the pseudo-header
// and the datagram with its checksum field taken as zero; a result of 0 is sent as 0xffff.
inline uint16_t udp_checksum(const Bytes &b)
{
    const size_t len = (size_t{b[off::udp_len]} << 8) | b[off::udp_len + 1];
    uint64_t sum = 17 + len;
    for (size_t i = off::ip_src; i < off::udp; i += 2)  // source and destination addresses
        sum += (uint32_t{b[i]} << 8) | b[i + 1];
    for (size_t i = 0; i < len; i += 2) {
        if (off::udp + i == off::udp_csum)
            continue;
        const uint32_t hi = b[off::udp + i], lo = i + 1 < len ? b[off::udp + i + 1] : 0;
        sum += (hi << 8) | lo;
    }
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    const auto check = static_cast<uint16_t>(~sum);
    return check == 0 ? 0xffff : check;
}

// The frame with its UDP checksum filled in (the builder sends none, 0, as IPv4 allows).
inline Bytes with_udp_checksum(Bytes b)
{
    put_be16(b, off::udp_csum, udp_checksum(b));
    return b;
}

// The key the test fixtures give job `job` (any non-zero 64 bits would do; distinct per job).
inline constexpr uint64_t test_job_key(uint32_t job)
{
    return 0x5ec2e79a41b03d16ull ^ (uint64_t{job} * 0x9e3779b97f4a7c15ull);
}

struct Frame {
    Mac src_mac{0x02, 0, 0, 0, 0, 0x01};
    Mac dst_mac{0x02, 0, 0, 0, 0, 0xaa};
    uint32_t src_ip = ip4("10.0.0.1");
    uint32_t dst_ip = ip4("10.0.0.100");
    uint16_t src_port = 5000;
    uint16_t dst_port = XAGG_DEFAULT_PORT;
    uint8_t ttl = 64;
    uint8_t tos = XAGG_ECN_ECT0;  // as a worker sends (DSCP 0, ECT(0)); XAGG_ECN_CE: marked
    uint32_t magic = XAGG_MAGIC;
    uint8_t version = XAGG_VERSION;
    uint8_t flags = 0;
    uint16_t rank = 0;
    uint32_t job = 1;
    uint32_t round = 0;
    uint32_t chunk = 0;
    uint16_t nelem = XAGG_CHUNK_ELEMS;
    int8_t exponent = 0;
    uint64_t contrib = 0;
    std::optional<uint64_t> key;  // unset: test_job_key(job), the fixtures' key of the job
    std::vector<int32_t> values = std::vector<int32_t>(XAGG_CHUNK_ELEMS, 0);

    Bytes build() const
    {
        size_t udp_len = 8 + 40 + 4 * values.size();
        Bytes b(14 + 20 + udp_len, 0);
        std::copy(dst_mac.begin(), dst_mac.end(), b.begin() + off::eth_dst);
        std::copy(src_mac.begin(), src_mac.end(), b.begin() + off::eth_src);
        put_be16(b, off::eth_type, 0x0800);
        b[off::ip] = 0x45;
        put_be16(b, off::ip_tot_len, static_cast<uint16_t>(20 + udp_len));
        b[off::ip_tos] = tos;
        b[off::ip_ttl] = ttl;
        b[off::ip_proto] = 17;
        put_be32(b, off::ip_src, src_ip);
        put_be32(b, off::ip_dst, dst_ip);
        put_be16(b, off::ip_csum, ipv4_checksum(b, off::ip));
        put_be16(b, off::udp_sport, src_port);
        put_be16(b, off::udp_dport, dst_port);
        put_be16(b, off::udp_len, static_cast<uint16_t>(udp_len));
        put_be32(b, off::x_magic, magic);
        b[off::x_version] = version;
        b[off::x_flags] = flags;
        put_be16(b, off::x_rank, rank);
        put_be32(b, off::x_job, job);
        put_be32(b, off::x_round, round);
        put_be32(b, off::x_chunk, chunk);
        put_be16(b, off::x_nelem, nelem);
        b[off::x_exp] = static_cast<uint8_t>(exponent);
        put_be64(b, off::x_contrib, contrib);
        put_be64(b, off::x_key, key ? *key : test_job_key(job));
        for (size_t i = 0; i < values.size(); i++)
            put_le32(b, off::payload + 4 * i, values[i]);
        return b;
    }
};

}  // namespace xagg::test
