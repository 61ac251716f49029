// SPDX-License-Identifier: MIT
#include "client/congestion.hpp"

#include <algorithm>

namespace xagg::client {

std::chrono::microseconds default_delay_target(size_t chunk_elems)
{
    (void)chunk_elems;  // the same for both sizes since the ECN echo (congestion.hpp says why)
    return std::chrono::microseconds(0);
}

CreditController::CreditController(const CongestionParams &params, unsigned maximum)
    : params_(params),
      maximum_(std::max(maximum, 1u)),
      cwnd_(std::min(params.initial, maximum_)),
      ssthresh_(maximum_),
      alpha_(params.ecn_alpha_initial)
{
}

unsigned CreditController::window() const
{
    return std::clamp(static_cast<unsigned>(cwnd_), floor(), maximum_);
}

unsigned CreditController::floor() const
{
    return std::min(params_.minimum, maximum_);
}

void CreditController::set_maximum(unsigned maximum)
{
    maximum_ = std::max(maximum, 1u);
    cwnd_ = std::min(cwnd_, double(maximum_));
    ssthresh_ = std::min(ssthresh_, double(maximum_));
}

void CreditController::cut(double keep, int64_t now_ns)
{
    cwnd_ = std::max(double(window()) * keep, double(floor()));
    ssthresh_ = cwnd_;
    acked_ = 0;
    cuts_++;
    last_cut_ns_ = now_ns;
    cut_yet_ = true;
}

bool CreditController::delay_armed(int64_t now_ns) const
{
    return params_.delay_target_ns > 0 && now_ns < delay_armed_until_ns_;
}

int64_t CreditController::base_rtt(int64_t now_ns)
{
    if (now_ns - period_start_ns_ >= params_.base_rtt_period_ns) {
        previous_min_ns_ = period_min_ns_;
        period_min_ns_ = 0;
        period_start_ns_ = now_ns;
    }
    if (!previous_min_ns_)
        return period_min_ns_;
    return period_min_ns_ ? std::min(period_min_ns_, previous_min_ns_) : previous_min_ns_;
}

// Once a window of answers: alpha learns the fraction marked, and the delay signal is read.
// Returns whether the delay signal cut the credit.
bool CreditController::end_of_window(const Answer &a)
{
    const double fraction = epoch_marked_ / epoch_answers_;
    alpha_ = (1 - params_.ecn_gain) * alpha_ + params_.ecn_gain * fraction;
    // The quickest answer of the window is the one that waited least for the other workers'
    // contributions, so what it took beyond the quickest lately is queueing.
    const int64_t base = base_rtt(a.at_ns);
    const bool queued = delay_armed(a.at_ns) && epoch_min_rtt_ns_ > 0 && base > 0 &&
                        epoch_min_rtt_ns_ > base + params_.delay_target_ns;
    epoch_answers_ = 0;
    epoch_length_ = 0;
    epoch_marked_ = 0;
    epoch_min_rtt_ns_ = 0;
    const bool persists = queued && queued_before_;
    queued_before_ = queued;
    if (!persists)
        return false;
    cut(params_.delay_beta, a.at_ns);
    delay_cuts_++;
    return true;
}

void CreditController::on_answer(const Answer &a)
{
    if (period_start_ns_ < 0)
        period_start_ns_ = a.at_ns;
    if (a.rtt_ns > 0) {
        base_rtt(a.at_ns);  // expires the old period first
        period_min_ns_ = period_min_ns_ ? std::min(period_min_ns_, a.rtt_ns) : a.rtt_ns;
        epoch_min_rtt_ns_ = epoch_min_rtt_ns_ ? std::min(epoch_min_rtt_ns_, a.rtt_ns) : a.rtt_ns;
    }
    epoch_marked_ += a.marked;
    if (a.marked > 0)
        last_mark_ns_ = a.at_ns;
    if (epoch_length_ == 0)
        epoch_length_ = window();
    if (++epoch_answers_ >= epoch_length_ && end_of_window(a))
        return;
    if (a.marked > 0) {
        // DCTCP: once per congestion event, by the fraction the network has been marking.
        if (new_event(a.sent_ns)) {
            cut(1 - alpha_ / 2, a.at_ns);
            ecn_cuts_++;
        }
        return;
    }
    if (!a.window_full || cwnd_ >= maximum_)
        return;
    if (slow_start()) {
        cwnd_ = std::min(cwnd_ + 1, ssthresh_);  // +1 an answer: doubles every round trip
    } else if (++acked_ >= window()) {           // +increase a window of answers, counted exactly
        acked_ = 0;
        cwnd_ += params_.increase;
    }
    cwnd_ = std::min(cwnd_, double(maximum_));
}

bool CreditController::on_loss(int64_t sent_ns, int64_t now_ns)
{
    // Sent before the last cut: the queue had it before the cut could act. Same event.
    if (!new_event(sent_ns))
        return false;
    cut(params_.beta, now_ns);
    // A drop with no mark before it: this path's bottleneck does not mark, so the delay signal
    // is what can keep its queue short.
    if (last_mark_ns_ < 0 || now_ns - last_mark_ns_ > params_.mark_memory_ns)
        delay_armed_until_ns_ = now_ns + params_.delay_armed_ns;
    return true;
}

}  // namespace xagg::client
