// SPDX-License-Identifier: MIT
#include "client/tuner.hpp"

#include <algorithm>
#include <bit>

namespace xagg::client {
namespace {

unsigned to_grid(unsigned v, unsigned lo, unsigned hi)
{
    v = std::clamp(v, lo, hi);
    return std::bit_floor(v);
}

}  // namespace

Tuner::Tuner(const TuneSpace &space, TuneSetting start) : space_(space)
{
    space_.min_window = std::bit_ceil(std::max(space_.min_window, 1u));
    space_.max_window = std::max(space_.min_window, std::bit_floor(space_.max_window));
    space_.min_partition = std::bit_ceil(std::max(space_.min_partition, 1u));
    space_.max_partition = std::max(space_.min_partition, std::bit_floor(space_.max_partition));
    space_.trials = std::max(space_.trials, 1u);
    center_ = {to_grid(start.window, space_.min_window, space_.max_window),
               to_grid(start.partition_chunks, space_.min_partition, space_.max_partition)};
}

TuneSetting Tuner::current() const
{
    if (done_ || !measured_.count(center_))
        return center_;
    return pending_.front();
}

std::pair<TuneSetting, double> Tuner::best() const
{
    // The incumbent wins ties: a setting is only better if it is measured faster.
    auto it = measured_.find(center_);
    std::pair<TuneSetting, double> b{center_, it == measured_.end() ? 0 : it->second};
    bool any = it != measured_.end();
    for (const auto &[s, t] : measured_)
        if (!any || t < b.second) {
            b = {s, t};
            any = true;
        }
    return b;
}

void Tuner::record(double seconds)
{
    if (done_)
        return;
    measured_[current()] = seconds;
    if (!pending_.empty() && measured_.count(pending_.front()))
        pending_.erase(pending_.begin());
    plan_next();
}

bool Tuner::inside(TuneSetting s) const
{
    return s.window >= space_.min_window && s.window <= space_.max_window &&
           s.partition_chunks >= space_.min_partition && s.partition_chunks <= space_.max_partition;
}

TuneSetting Tuner::step(TuneSetting from, int direction)
{
    switch (direction) {
    case 0: return {from.window * 2, from.partition_chunks};
    case 1: return {from.window / 2, from.partition_chunks};
    case 2: return {from.window, from.partition_chunks * 2};
    default: return {from.window, from.partition_chunks / 2};
    }
}

void Tuner::explore()
{
    direction_ = -1;
    for (int d = 0; d < 4; d++)
        if (TuneSetting n = step(center_, d); inside(n) && !measured_.count(n))
            pending_.push_back(n);
}

bool Tuner::line(int direction)
{
    direction_ = direction;
    TuneSetting n = step(center_, direction);
    if (!inside(n) || measured_.count(n))
        return false;
    pending_.push_back(n);
    return true;
}

void Tuner::plan_next()
{
    if (measured_.size() >= space_.trials) {
        center_ = best().first;
        done_ = true;
        return;
    }
    if (!pending_.empty())
        return;
    const double bar = measured_.at(center_) * (1 - space_.min_gain);
    if (direction_ >= 0) {
        // A step along a line that paid off: take it and try the next one in the same
        // direction; else look around the incumbent.
        TuneSetting n = step(center_, direction_);
        if (measured_.at(n) < bar) {
            center_ = n;
            if (line(direction_))
                return;
        }
        explore();
        if (!pending_.empty())
            return;
    } else if (measured_.size() == 1) {
        explore();
        if (!pending_.empty())
            return;
    }
    // The whole neighbourhood is measured: follow the best direction that pays off, if any.
    int best_direction = -1;
    double best_time = measured_.at(center_) * (1 - space_.min_gain);
    for (int d = 0; d < 4; d++) {
        auto it = measured_.find(step(center_, d));
        if (inside(step(center_, d)) && it != measured_.end() && it->second < best_time) {
            best_direction = d;
            best_time = it->second;
        }
    }
    if (best_direction < 0) {
        done_ = true;  // a local optimum
        return;
    }
    center_ = step(center_, best_direction);
    if (line(best_direction))
        return;
    explore();
    if (pending_.empty())
        plan_next();  // everything around the new incumbent is known: decide from there
}

}  // namespace xagg::client
