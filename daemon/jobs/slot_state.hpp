// SPDX-License-Identifier: MIT
// What the jobs layer reads of a slot, on either path: whose round it holds and who is in it.
// The datapath fills these from its maps and files (datapath/slot_states); progress and the
// straggler watch read them, without knowing where they came from.
#pragma once

#include <cstdint>

namespace xagg::daemon {

struct SlotState {
    uint32_t chunk = 0;  // the job's chunk index
    uint32_t tag = 0;    // the owner tag the slot carries
    uint32_t round = 0;
    uint64_t seen = 0;
    uint64_t started_ns = 0;
};

}  // namespace xagg::daemon
