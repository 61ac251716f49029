// SPDX-License-Identifier: MIT
// Reading SlotStates out of a fast-path region's raw slots.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "daemon/datapath/datapath.hpp"
#include "xagg/fastpath.h"

namespace xagg::daemon {

// The states of a fast-path region's slots (two per chunk, chunk 0 first).
std::vector<SlotState> region_states(const std::vector<xagg_slot> &slots);
// Appends the states of `slots`, the region's slots from `first` on (two per chunk).
void append_region_states(std::span<const xagg_slot> slots, uint32_t first,
                          std::vector<SlotState> &out);

}  // namespace xagg::daemon
