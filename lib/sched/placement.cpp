// SPDX-License-Identifier: MIT
#include "lib/sched/placement.hpp"

#include <algorithm>
#include <numeric>

namespace xagg::sched {

std::vector<Partition> cut(uint64_t chunks, uint32_t workers, uint64_t partition_chunks)
{
    std::vector<Partition> out;
    partition_chunks = std::max<uint64_t>(partition_chunks, 1);
    for (uint64_t first = 0; first < chunks; first += partition_chunks)
        out.push_back({static_cast<uint32_t>(out.size()),
                       std::min(partition_chunks, chunks - first), workers});
    return out;
}

std::vector<uint32_t> place(std::vector<Node> &nodes, const std::vector<Partition> &partitions)
{
    std::vector<size_t> order(partitions.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return partitions[a].chunks * partitions[a].workers >
               partitions[b].chunks * partitions[b].workers;
    });
    std::vector<uint32_t> where(partitions.size());
    for (size_t i : order) {
        const Partition &p = partitions[i];
        const double work = double(p.chunks) * p.workers;
        // Soonest finish among the nodes with room; if none has room, soonest finish overall.
        // Ties go to the lower id, so the result does not depend on anything but the inputs.
        auto finish = [&](const Node &n) { return (n.load + work) / n.rate; };
        Node *best = nullptr;
        for (bool need_room : {true, false}) {
            for (Node &n : nodes) {
                if (need_room && n.free_chunks < p.chunks)
                    continue;
                if (!best || finish(n) < finish(*best) ||
                    (finish(n) == finish(*best) && n.id < best->id))
                    best = &n;
            }
            if (best)
                break;
        }
        best->free_chunks -= std::min(best->free_chunks, p.chunks);
        best->load += work;
        where[i] = best->id;
    }
    return where;
}

double makespan(const std::vector<Node> &nodes)
{
    double worst = 0;
    for (const Node &n : nodes)
        worst = std::max(worst, n.load / n.rate);
    return worst;
}

}  // namespace xagg::sched
