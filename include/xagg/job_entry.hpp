// SPDX-License-Identifier: MIT
// A job and a member as the acceptance rule reads them (include/xagg/fastpath.h's xagg_job and
// xagg_member): JobSpec is the entry in host order, and job_value/member_value the pure
// conversions to what the maps, and the host parameter server's copies of them, hold. Both
// paths build their entries here, so neither goes through the other's code to get them.
#pragma once

#include <endian.h>
#include <netinet/in.h>

#include <cstdint>

#include "xagg/fastpath.h"
#include "xagg/proto.h"

namespace xagg {

// A job as both paths' acceptance rule sees it (host order).
struct JobSpec {
    uint32_t id = 0;
    uint64_t members = 0;                     // bitmap of ranks
    uint32_t region_base = 0;                 // first slot position of its region
    uint32_t region_positions = 0;            // slot positions held on the fast path (xagg_job)
    uint16_t chunk_elems = XAGG_CHUNK_ELEMS;  // or XAGG_JUMBO_CHUNK_ELEMS
    uint32_t tag = 0;         // owner tag of its slots (xagg_job.tag); never XAGG_TAG_NONE
    uint64_t key = 0;         // the job key (host order; xagg_job.key is wire order)
    bool host_path = false;   // everything to the host-side parameter server
    bool fanout = false;      // results by one unicast copy per member, not multicast
    in_addr group{};          // multicast group of results
    uint16_t group_port = 0;  // host order
};

// The map entries of a job and of a member, as the XDP program reads them. The host-side
// parameter server holds the same values, so both paths apply xagg/check.h to the same data.
inline xagg_job job_value(const JobSpec &job)
{
    xagg_job value{};
    value.members = job.members;
    value.region_base = job.region_base;
    value.region_positions = job.region_positions;
    value.chunk_elems = job.chunk_elems;
    value.flags = 0;
    if (job.host_path)
        value.flags |= XAGG_JOB_HOST_PATH;
    if (job.fanout)
        value.flags |= XAGG_JOB_FANOUT;
    value.group_addr = job.group.s_addr;
    value.group_port = htons(job.group_port);
    value.tag = job.tag;
    value.key = htobe64(job.key);
    return value;
}

inline xagg_member member_value(in_addr addr, uint16_t port)
{
    xagg_member value{};
    value.addr = addr.s_addr;
    value.port = htons(port);
    return value;
}

}  // namespace xagg
