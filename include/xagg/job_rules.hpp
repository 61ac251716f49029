// SPDX-License-Identifier: MIT
// A job's rules, written once: what a job may be (its bounds and chunk sizes), what it is when a
// request leaves something out (the defaults), and its arithmetic: a gradient's blocks and wire
// chunks, the exponent chunks a float all-reduce adds, and the slot positions (the unit of
// fast-path memory, include/xagg/fastpath.h) they take. The control API's parser, the job
// table, the state file's loader, the cluster's etcd records, xaggctl and the client all call
// these; `xaggctl job size` prints the arithmetic for scripts (bench/run, scripts/demo).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "xagg/check.h"
#include "xagg/proto.h"
#include "xagg/wire.hpp"

namespace xagg::job_rules {

// --- Bounds ---------------------------------------------------------------------------------

inline constexpr uint32_t kMinJobId = 1, kMaxJobId = XAGG_MAX_JOB_ID;
inline constexpr uint32_t kMaxWorkers = XAGG_MAX_WORKERS;
inline constexpr uint64_t kMaxGradientElems = uint64_t{1} << 40;

inline constexpr bool valid_chunk_elems(uint64_t elems)
{
    return elems == XAGG_CHUNK_ELEMS || elems == XAGG_JUMBO_CHUNK_ELEMS;
}
// What valid_chunk_elems says, for people: "768 or 2048".
inline std::string chunk_elems_choices(const char *conjunction = "or")
{
    return std::to_string(XAGG_CHUNK_ELEMS) + " " + conjunction + " " +
           std::to_string(XAGG_JUMBO_CHUNK_ELEMS);
}
inline constexpr bool valid_workers(uint64_t workers)
{
    return workers >= 1 && workers <= kMaxWorkers;
}
inline constexpr bool valid_job_id(uint64_t id)
{
    return id >= kMinJobId && id <= kMaxJobId;
}

// --- Defaults: what a request that leaves a field out gets ----------------------------------

inline constexpr uint32_t kDefaultTimeoutMs = 1000;  // a slot partial this long: a straggler
inline constexpr uint32_t kDefaultEvictAfter = 3;    // under `evict`: timeouts before removal
inline constexpr double kDefaultWeight = 1.0;        // share of fast-path memory
inline constexpr uint64_t kDefaultPartitionChunks = 16384;  // a cluster job's placed unit
// chunk_elems has no fixed default: the node's default_chunk_elems decides (lib/config).

// --- Arithmetic -----------------------------------------------------------------------------

// Blocks (chunks of values) of a tensor of `elems` values.
inline constexpr uint64_t blocks(uint64_t elems, uint32_t chunk_elems)
{
    return (elems + chunk_elems - 1) / chunk_elems;
}
// The wire chunks a float all-reduce of `elems` values sends: its blocks and their exponent
// chunks (an int32 all-reduce sends the blocks alone).
inline constexpr uint64_t float_wire_chunks(uint64_t elems, uint32_t chunk_elems)
{
    const uint64_t b = blocks(elems, chunk_elems);
    return b + wire::exponent_chunks(b, chunk_elems);
}
// Slot positions one chunk of `chunk_elems` values takes: 1, or XAGG_JUMBO_SLOT_PARTS.
inline uint32_t positions_per_chunk(uint32_t chunk_elems)
{
    return xagg_chunk_parts(chunk_elems);
}
// Slot positions of a job of `gradient_elems` values (its wire size, exponent chunks included).
inline uint64_t positions(uint64_t gradient_elems, uint32_t chunk_elems)
{
    return blocks(gradient_elems, chunk_elems) * positions_per_chunk(chunk_elems);
}

}  // namespace xagg::job_rules
