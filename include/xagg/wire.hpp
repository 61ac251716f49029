// SPDX-License-Identifier: MIT
// Userspace encoding and decoding of the xagg header and payload (include/xagg/proto.h) as they
// sit inside a UDP datagram. Header fields are big-endian, payload values little-endian.
#pragma once

#include <endian.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

#include "xagg/proto.h"

namespace xagg::wire {

// The xagg header in host byte order.
struct Header {
    uint8_t version = XAGG_VERSION;
    uint8_t flags = 0;
    uint16_t rank = 0;
    uint32_t job_id = 0;
    uint32_t round = 0;
    uint32_t chunk = 0;
    uint16_t nelem = XAGG_CHUNK_ELEMS;
    int8_t exponent = 0;
    uint8_t marked = 0;  // results: how many of the contributions summed arrived marked CE
    uint64_t contrib = 0;
    uint64_t key = 0;  // contributions: the job key (zero on results)
};

inline constexpr size_t kHeaderBytes = sizeof(xagg_hdr);

// Blocks (chunks of values) whose exponent groups one exponent chunk of `chunk_elems` values
// holds: 64 for standard chunks, 170 for jumbo ones (the last 8 values unused).
inline constexpr uint64_t blocks_per_exponent_chunk(uint64_t chunk_elems)
{
    return chunk_elems / XAGG_EXPONENT_GROUPS;
}
// Exponent chunks a float all-reduce of `blocks` blocks sends before its values.
inline constexpr uint64_t exponent_chunks(uint64_t blocks, uint64_t chunk_elems = XAGG_CHUNK_ELEMS)
{
    const uint64_t per = blocks_per_exponent_chunk(chunk_elems);
    return (blocks + per - 1) / per;
}
inline constexpr size_t kDatagramBytes = kHeaderBytes + XAGG_CHUNK_BYTES;
inline constexpr size_t kJumboDatagramBytes = kHeaderBytes + XAGG_JUMBO_CHUNK_BYTES;
inline constexpr size_t kMaxDatagramBytes = kJumboDatagramBytes;

// Writes header and values into `out` (at least kHeaderBytes + 4 * values.size() bytes).
inline size_t encode(const Header &h, std::span<const int32_t> values, std::span<uint8_t> out)
{
    xagg_hdr raw{};
    raw.magic = htobe32(XAGG_MAGIC);
    raw.version = h.version;
    raw.flags = h.flags;
    raw.rank = htobe16(h.rank);
    raw.job_id = htobe32(h.job_id);
    raw.round = htobe32(h.round);
    raw.chunk = htobe32(h.chunk);
    raw.nelem = htobe16(h.nelem);
    raw.exponent = h.exponent;
    raw.marked = h.marked;
    raw.contrib = htobe64(h.contrib);
    raw.key = htobe64(h.key);
    std::memcpy(out.data(), &raw, sizeof(raw));
    uint8_t *p = out.data() + sizeof(raw);
    for (int32_t v : values) {
        uint32_t le = htole32(static_cast<uint32_t>(v));
        std::memcpy(p, &le, 4);
        p += 4;
    }
    return static_cast<size_t>(p - out.data());
}

// Parses a datagram; nullopt unless magic, version and length are consistent.
inline std::optional<Header> decode(std::span<const uint8_t> in)
{
    if (in.size() < kHeaderBytes)
        return std::nullopt;
    xagg_hdr raw;
    std::memcpy(&raw, in.data(), sizeof(raw));
    if (be32toh(raw.magic) != XAGG_MAGIC || raw.version != XAGG_VERSION)
        return std::nullopt;
    Header h;
    h.version = raw.version;
    h.flags = raw.flags;
    h.rank = be16toh(raw.rank);
    h.job_id = be32toh(raw.job_id);
    h.round = be32toh(raw.round);
    h.chunk = be32toh(raw.chunk);
    h.nelem = be16toh(raw.nelem);
    h.exponent = raw.exponent;
    h.marked = raw.marked;
    h.contrib = be64toh(raw.contrib);
    h.key = be64toh(raw.key);
    if (in.size() != kHeaderBytes + size_t{h.nelem} * 4)
        return std::nullopt;
    return h;
}

inline int32_t value_at(std::span<const uint8_t> datagram, size_t i)
{
    uint32_t le;
    std::memcpy(&le, datagram.data() + kHeaderBytes + 4 * i, 4);
    return static_cast<int32_t>(le32toh(le));
}

// The protocol's sum: 32-bit two's-complement addition that wraps (the fast path's ALU32 add).
inline int32_t wrapping_add(int32_t a, int32_t b)
{
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

}  // namespace xagg::wire
