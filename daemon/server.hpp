// SPDX-License-Identifier: MIT
// xaggd's lifecycle: attach, recover state, serve the control API, stop cleanly.
#pragma once

#include "lib/config/config.hpp"

namespace xagg::daemon {

// Runs until SIGTERM/SIGINT; returns the process exit code. SIGHUP re-reads the config file.
//
// State: the maps are pinned under bpffs_dir and the job table is saved in state_dir after each
// change. A daemon that crashed (or was killed) leaves both, and its program stays attached and
// keeps aggregating; the next start reuses them, so jobs in flight continue. A clean stop
// detaches, unpins and forgets the jobs.
int run(const Config &config);

}  // namespace xagg::daemon
