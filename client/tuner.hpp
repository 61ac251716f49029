// SPDX-License-Identifier: MIT
// Automatic configuration of the two send-side knobs (the AutoByte/ByteScheduler idea;
// docs/CLIENT.md, "Automatic configuration"): the credit (`window`, chunks in flight per
// aggregator) and the batch (`partition_chunks`, chunks sent back to back). Pure: it proposes a
// setting, is told the averaged time measured with it, and proposes the next. No clock, no
// randomness: every worker that is told the same measurements makes the same choices, which is how
// all workers switch at the same iteration (the client all-reduces the measurements through the
// aggregator before telling it).
//
// The search is a pattern search over the powers of two in a bounded box (Hooke-Jeeves on a
// log grid): from the start point, try each neighbour (one knob doubled or halved), move to the
// best one that is faster by more than `min_gain` and keep going that way while each step pays
// off, then look around again; stop at a point none of whose neighbours is faster, or when the
// trial budget is spent. Step times are unimodal enough in these
// knobs (too small: idle links; too large: queues and losses) for a local search to find the
// best in few trials, and every trial is a real training step, so few trials matter more than
// global guarantees. A point is measured once; the caller averages several steps per trial.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace xagg::client {

struct TuneSetting {
    unsigned window = 0;
    unsigned partition_chunks = 0;
    bool operator==(const TuneSetting &) const = default;
    auto operator<=>(const TuneSetting &) const = default;
};

struct TuneSpace {
    unsigned min_window = 32, max_window = 4096;      // powers of two
    unsigned min_partition = 4, max_partition = 256;  // powers of two
    unsigned trials = 16;                             // settings measured at most
    double min_gain = 0.03;                           // a move must be 3% faster
};

class Tuner {
public:
    // `start` is rounded to the grid and clamped to the box.
    Tuner(const TuneSpace &space, TuneSetting start);

    // The setting to measure next, or the chosen one once done().
    TuneSetting current() const;
    // The averaged time (any unit, lower is better) measured with current().
    void record(double seconds);
    bool done() const { return done_; }
    unsigned trials() const { return static_cast<unsigned>(measured_.size()); }
    // The best setting measured so far and its time.
    std::pair<TuneSetting, double> best() const;

private:
    void plan_next();
    bool inside(TuneSetting s) const;
    static TuneSetting step(TuneSetting from, int direction);  // 0-3: window x2, /2, batch x2, /2
    void explore();            // queue the incumbent's unmeasured neighbours
    bool line(int direction);  // queue the next step that way; false if there is none

    TuneSpace space_;
    TuneSetting center_;                // the incumbent
    int direction_ = -1;                // of the line being followed, or -1 when looking around
    std::vector<TuneSetting> pending_;  // settings still to measure
    std::map<TuneSetting, double> measured_;
    bool done_ = false;
};

}  // namespace xagg::client
