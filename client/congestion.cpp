// SPDX-License-Identifier: MIT
#include "client/congestion.hpp"

#include <algorithm>

#include "xagg/proto.h"

namespace xagg::client {

std::chrono::microseconds default_delay_target(size_t chunk_elems)
{
    using namespace std::chrono_literals;
    return chunk_elems >= XAGG_JUMBO_CHUNK_ELEMS ? 1000us : 0us;
}

CreditController::CreditController(const CongestionParams &params, unsigned maximum)
    : params_(params),
      maximum_(std::max(maximum, 1u)),
      cwnd_(std::min(params.initial, maximum_)),
      ssthresh_(maximum_)
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

void CreditController::cut(double keep)
{
    cwnd_ = std::max(double(window()) * keep, double(floor()));
    ssthresh_ = cwnd_;
    acked_ = 0;
    cuts_++;
}

void CreditController::on_answer(bool window_full, int64_t rtt_ns)
{
    if (rtt_ns > 0) {
        base_rtt_ns_ = base_rtt_ns_ ? std::min(base_rtt_ns_, rtt_ns) : rtt_ns;
        epoch_min_rtt_ns_ = epoch_min_rtt_ns_ ? std::min(epoch_min_rtt_ns_, rtt_ns) : rtt_ns;
    }
    // Once a window of answers (as large as the credit when it began): the quickest of them is
    // the one that waited least for the other workers' contributions, so what it took beyond
    // the quickest ever is queueing.
    if (epoch_length_ == 0)
        epoch_length_ = window();
    if (++epoch_answers_ >= epoch_length_) {
        const bool queued = params_.delay_target_ns > 0 && epoch_min_rtt_ns_ > 0 &&
                            epoch_min_rtt_ns_ > base_rtt_ns_ + params_.delay_target_ns;
        epoch_answers_ = 0;
        epoch_length_ = 0;
        epoch_min_rtt_ns_ = 0;
        const bool persists = queued && queued_before_;
        queued_before_ = queued;
        if (persists) {
            cut(params_.delay_beta);
            return;
        }
    }
    if (!window_full || cwnd_ >= maximum_)
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
    if (cut_yet_ && sent_ns <= last_cut_ns_)
        return false;
    cut(params_.beta);
    last_cut_ns_ = now_ns;
    cut_yet_ = true;
    return true;
}

}  // namespace xagg::client
