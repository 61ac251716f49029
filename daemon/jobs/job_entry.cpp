// SPDX-License-Identifier: MIT
#include "daemon/jobs/job_entry.hpp"

namespace xagg::daemon {

JobSpec job_spec(const Job &job)
{
    JobSpec spec;
    spec.id = job.id;
    spec.members = job.member_bitmap();
    spec.region_base = job.region_base;
    spec.region_positions = job.region_positions;
    spec.chunk_elems = static_cast<uint16_t>(job.chunk_elems);
    spec.host_path = job.host_path;
    spec.fanout = job.fanout;
    spec.group = job.group;
    spec.group_port = job.group_port;
    spec.tag = job.tag;
    spec.key = job.key;
    return spec;
}

}  // namespace xagg::daemon
