// SPDX-License-Identifier: MIT
// The credit of one aggregator's channel under congestion control (docs/CLIENT.md, "Congestion
// control"): how many chunks this worker keeps in flight to it. AIMD on loss, as TCP NewReno
// (RFC 5681/6582) does it, counted in chunks: the credit starts small and doubles every round
// trip (slow start) up to the configured window; every window of answered chunks adds
// `increase` chunks; a loss keeps `beta` of the credit. The losses of one congestion event (the
// chunks sent before the credit was cut, which the queue had already taken) cut it once, so a
// queue overflow that drops a burst halves the credit once, not once per chunk. The engine
// finds losses within a round trip (engine.hpp, early loss detection).
//
// Optionally also on delay, once a window of answers: a chunk's round trip includes the wait
// for the other workers' contributions, which no queue explains, but the quickest answer of a
// window waited least for them; if even it took `delay_target_ns` more than the quickest ever,
// in two windows in a row, a queue is building and the credit keeps `delay_beta` of itself. (One
// window alone is also what a host that did not schedule a worker for a few ms looks like.) Loss
// alone lets every worker fill the bottleneck's queue until it overflows, and since every worker
// sees the missing result, each drop is resent by all of them (docs/CLIENT.md has the
// measurements).
//
// Pure: no clock (times are given), no I/O; client_congestion_test.cpp drives it with synthetic
// signals.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace xagg::client {

struct CongestionParams {
    unsigned initial = 16;  // chunks: the credit before any answer (slow start takes it to the
                            // configured window in a few round trips of tens of microseconds)
    unsigned minimum = 4;   // never below: a cut to 1 would serialize a worker on its RTT
    double beta = 0.5;      // of the credit kept at a loss
    double increase = 1;    // chunks added per window of answers after slow start
    // Delay: a window of answers whose quickest round trip exceeds the quickest ever seen by
    // more than this is a queue building up; the credit keeps delay_beta of itself (0: off).
    int64_t delay_target_ns = 0;
    double delay_beta = 0.8;
};

// The delay target a job gets unless told otherwise (ClientOptions::delay_target): 1 ms with
// jumbo chunks, none (loss alone) with 768-value chunks. Measured (docs/CLIENT.md): a 768-value
// chunk carries 2.7x fewer bytes per packet, so a CPU-bound host's own queueing passes 1 ms at a
// credit of 50-100 chunks, too few to batch its work, and the target cost 11-24% unshaped; with
// jumbo chunks it cost nothing measurable and cut incast resends from 5.5% to under 1%.
std::chrono::microseconds default_delay_target(size_t chunk_elems);

class CreditController {
public:
    // `maximum` is the configured window (ClientOptions::window, or the tuner's choice): the
    // credit never exceeds it.
    CreditController(const CongestionParams &params, unsigned maximum);

    // The credit: chunks this worker may have in flight to the aggregator.
    unsigned window() const;
    void set_maximum(unsigned maximum);

    // A chunk was answered. `window_full`: the credit was in use (in flight >= window when the
    // answer came); an idle or send-rule-limited worker's credit does not grow on answers it
    // did not need the credit for (RFC 7661's rule for application-limited senders).
    // `rtt_ns`: the chunk's round trip if it was answered at its first transmission, else 0.
    void on_answer(bool window_full, int64_t rtt_ns);

    // A chunk last sent at `sent_ns` is lost (found early or by its timer), noticed at
    // `now_ns`. Returns whether the credit was cut: only for the first loss of a congestion
    // event, i.e. of a chunk sent after the last cut.
    bool on_loss(int64_t sent_ns, int64_t now_ns);

    bool slow_start() const { return cwnd_ < ssthresh_; }
    uint64_t cuts() const { return cuts_; }

private:
    unsigned floor() const;
    void cut(double keep);

    CongestionParams params_;
    unsigned maximum_;
    double cwnd_, ssthresh_;
    int64_t last_cut_ns_ = 0;
    int64_t base_rtt_ns_ = 0;       // the quickest round trip seen
    int64_t epoch_min_rtt_ns_ = 0;  // the quickest in the current window of answers
    bool queued_before_ = false;    // the previous window of answers was over the target too
    unsigned epoch_answers_ = 0, epoch_length_ = 0;
    unsigned acked_ = 0;  // answers towards the next additive increase
    bool cut_yet_ = false;
    uint64_t cuts_ = 0;
};

}  // namespace xagg::client
