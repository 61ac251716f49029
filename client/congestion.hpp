// SPDX-License-Identifier: MIT
// The credit of one aggregator's channel under congestion control (docs/CLIENT.md, "Congestion
// control"): how many chunks this worker keeps in flight to it. Three signals, in the order a
// network gives them:
//
// - ECN, the network's own (DCTCP, RFC 8257, counted in chunks). Contributions leave ECT(0); a
//   switch whose queue passes its threshold marks them CE; the aggregator echoes, in each result,
//   how many of the chunk's contributions were marked (docs/PROTOCOL.md, "Congestion echo"). Once
//   a window of answers, alpha <- (1 - g) alpha + g F, F the window's mean fraction marked; the
//   first marked answer of a congestion event keeps 1 - alpha/2 of the credit. A busy host marks
//   nothing, so this signal cannot mistake one for a congested network.
// - Loss, as TCP NewReno (RFC 5681/6582): a loss keeps `beta` of the credit; the losses of one
//   congestion event (chunks sent before the cut, which the queue had already taken) cut it once.
//   The engine finds losses within a round trip (engine.hpp, early loss detection).
// - Delay, only where the network drops without marking. A chunk's round trip includes the wait
//   for the other workers' contributions and whatever delays a busy host adds, so delay is the
//   least trustworthy signal: it is armed by a loss that came with no mark before it (a
//   bottleneck that does not mark, e.g. a tbf or an old switch), for `delay_armed_ns`, and then
//   cuts to `delay_beta` when even the quickest answer of two windows in a row took
//   `delay_target_ns` more than the quickest of the last few seconds (a minimum that expires, so
//   a path that changed is learnt again). Round trips are measured by the kernel's receive
//   timestamp (engine.cpp), so a worker that was not scheduled does not stretch them.
//
// The credit starts small and doubles every round trip (slow start) up to the configured window;
// every window of answers adds `increase` chunks.
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
    // ECN: the gain of alpha's moving average (DCTCP's g, 1/16) and its start (1: the first
    // mark halves the credit, as a loss would, until alpha has learnt how little is marked).
    double ecn_gain = 1.0 / 16;
    double ecn_alpha_initial = 1;
    // Delay: a window of answers whose quickest round trip exceeds the quickest seen lately by
    // more than this is a queue building up; the credit keeps delay_beta of itself (0: off).
    int64_t delay_target_ns = 0;
    double delay_beta = 0.8;
    int64_t delay_armed_ns = 10'000'000'000;     // for this long after a loss without marks
    int64_t mark_memory_ns = 1'000'000'000;      // a loss this soon after a mark: a marking path
    int64_t base_rtt_period_ns = 5'000'000'000;  // the quickest of the last 1-2 periods
};

// The delay target a job gets unless told otherwise (ClientOptions::delay_target): none, for both
// chunk sizes; ECN and loss alone. Measured (bench/run section 9, docs/CLIENT.md): behind a port
// that does not mark, 1 ms cuts jumbo incast resends from 1.3-5.2% to 0.2-0.3%, but on a busy
// host whose own drops arm it, it read the host's scheduling as queueing and cost 4-12% where
// nothing was congested; behind a marking port ECN alone resent nothing. Fabrics that cannot mark
// set it (1 ms).
std::chrono::microseconds default_delay_target(size_t chunk_elems);

// One chunk answered, as the controller sees it.
struct Answer {
    bool window_full = false;  // the credit was in use when it came (in flight >= window)
    int64_t rtt_ns = 0;        // its round trip if answered at its first transmission, else 0
    int64_t sent_ns = 0;       // when its latest transmission left
    int64_t at_ns = 0;         // when the answer arrived
    double marked = 0;         // the fraction of its path marked CE: 0..1
};

class CreditController {
public:
    // `maximum` is the configured window (ClientOptions::window, or the tuner's choice): the
    // credit never exceeds it.
    CreditController(const CongestionParams &params, unsigned maximum);

    // The credit: chunks this worker may have in flight to the aggregator.
    unsigned window() const;
    void set_maximum(unsigned maximum);

    // A chunk was answered. Only an answer that came while the credit was in use grows it (RFC
    // 7661's rule for application-limited senders).
    void on_answer(const Answer &answer);

    // A chunk last sent at `sent_ns` is lost (found early or by its timer), noticed at
    // `now_ns`. Returns whether the credit was cut: only for the first loss of a congestion
    // event, i.e. of a chunk sent after the last cut.
    bool on_loss(int64_t sent_ns, int64_t now_ns);

    bool slow_start() const { return cwnd_ < ssthresh_; }
    uint64_t cuts() const { return cuts_; }
    uint64_t ecn_cuts() const { return ecn_cuts_; }
    uint64_t delay_cuts() const { return delay_cuts_; }
    double alpha() const { return alpha_; }
    bool delay_armed(int64_t now_ns) const;

private:
    unsigned floor() const;
    void cut(double keep, int64_t now_ns);
    bool new_event(int64_t sent_ns) const { return !cut_yet_ || sent_ns > last_cut_ns_; }
    int64_t base_rtt(int64_t now_ns);
    bool end_of_window(const Answer &a);

    CongestionParams params_;
    unsigned maximum_;
    double cwnd_, ssthresh_;
    int64_t last_cut_ns_ = 0;
    bool cut_yet_ = false;
    // The window of answers the once-a-window signals are taken over (as many as the credit
    // when it began).
    unsigned epoch_answers_ = 0, epoch_length_ = 0;
    double epoch_marked_ = 0;       // sum of the answers' marked fractions
    int64_t epoch_min_rtt_ns_ = 0;  // the quickest answer of the window
    bool queued_before_ = false;    // the previous window was over the delay target too
    double alpha_;
    int64_t last_mark_ns_ = -1;  // of the latest marked answer (-1: none yet)
    int64_t delay_armed_until_ns_ = 0;
    // The quickest round trip in this period and the one before (a minimum that expires).
    int64_t period_start_ns_ = -1, period_min_ns_ = 0, previous_min_ns_ = 0;
    unsigned acked_ = 0;  // answers towards the next additive increase
    uint64_t cuts_ = 0, ecn_cuts_ = 0, delay_cuts_ = 0;
};

}  // namespace xagg::client
