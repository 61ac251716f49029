// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <string>

namespace xagg::sys {

// Moves the calling process (it must still be single-threaded) into the named network namespace
// of `ip netns`. Unlike `ip netns exec`, it leaves the mount namespace alone, so /sys/fs/bpf
// (where libxdp keeps its dispatcher) stays the host's. Throws std::system_error.
void enter_netns(const std::string &name);

// Runs `fn` on a new thread moved into the named namespace (network namespaces are per thread),
// and waits for it; sockets it creates stay in that namespace. Rethrows what `fn` throws.
void run_in_netns(const std::string &name, const std::function<void()> &fn);

}  // namespace xagg::sys
