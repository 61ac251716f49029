// SPDX-License-Identifier: MIT
// The job table's Job as the acceptance rule reads it: one pure conversion, used by the fast
// path's maps (lib/fastpath's FastPath) and the host parameter server alike.
#pragma once

#include "daemon/jobs/job_table.hpp"
#include "xagg/job_entry.hpp"

namespace xagg::daemon {

// The job's entry: its members' bitmap (evicted ranks left out), its region, its flags.
JobSpec job_spec(const Job &job);

// The job's map entry (what xagg_job holds), and a member's.
inline xagg_job job_entry(const Job &job)
{
    return job_value(job_spec(job));
}
inline xagg_member member_entry(const Member &member)
{
    return member_value(member.addr, member.port);
}

}  // namespace xagg::daemon
