// SPDX-License-Identifier: MIT
#include "daemon/datapath/slot_states.hpp"

namespace xagg::daemon {

std::vector<SlotState> region_states(const std::vector<xagg_slot> &slots)
{
    std::vector<SlotState> out;
    append_region_states(slots, 0, out);
    return out;
}

void append_region_states(std::span<const xagg_slot> slots, uint32_t first,
                          std::vector<SlotState> &out)
{
    for (size_t i = 0; i < slots.size(); i++) {
        // A slot of the region counts only while it holds the chunk it stands for: left-overs
        // of a previous owner or layout carry another tag or chunk.
        const auto chunk = static_cast<uint32_t>((first + i) / 2);
        if (slots[i].seen && slots[i].chunk == chunk)
            out.push_back(
                {chunk, slots[i].tag, slots[i].round, slots[i].seen, slots[i].started_ns});
    }
}

}  // namespace xagg::daemon
