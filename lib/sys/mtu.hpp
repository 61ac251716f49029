// SPDX-License-Identifier: MIT
// Interface MTUs, because a chunk's frame (XAGG_FRAME_BYTES) needs more than a standard 1500.
#pragma once

#include <netinet/in.h>

#include <optional>
#include <string>

#include "xagg/proto.h"

namespace xagg::sys {

// The MTU of interface `ifname` in the current network namespace, if it exists.
std::optional<int> interface_mtu(const std::string &ifname);

// The name of the interface that has IPv4 address `addr`, if any.
std::optional<std::string> interface_with_address(in_addr addr);

// Why `ifname` cannot carry a chunk's frame (its MTU is below XAGG_MIN_MTU), with the command
// that fixes it; "" when it can, or when there is no such interface to ask.
std::string chunk_mtu_problem(const std::string &ifname, int min_mtu = XAGG_MIN_MTU);

}  // namespace xagg::sys
