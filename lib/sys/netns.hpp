// SPDX-License-Identifier: MIT
#pragma once

#include <string>

namespace xagg::sys {

// Moves the calling process (it must still be single-threaded) into the named network namespace
// of `ip netns`. Unlike `ip netns exec`, it leaves the mount namespace alone, so /sys/fs/bpf
// (where libxdp keeps its dispatcher) stays the host's. Throws std::system_error.
void enter_netns(const std::string &name);

}  // namespace xagg::sys
