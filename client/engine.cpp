// SPDX-License-Identifier: MIT
#include "client/engine.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>

#include "xagg/check.h"

namespace xagg::client {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the payload is little-endian and is quantized straight into the datagram");

using Clock = std::chrono::steady_clock;

int64_t now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
}

}  // namespace

Engine::Engine(const ClientOptions &options, std::vector<Endpoint> endpoints, in_addr local)
    : options_(options),
      block_(endpoints.front().chunk_elems),
      blocks_per_exponent_chunk_(wire::blocks_per_exponent_chunk(block_)),
      datagram_bytes_(wire::kHeaderBytes + block_ * sizeof(int32_t))
{
    std::vector<in_addr> groups;
    for (const Endpoint &e : endpoints) {
        auto ch = std::make_unique<Channel>();
        ch->job = e.job;
        ch->key = e.key;
        ch->ring = e.chunks;
        ch->workers = e.workers;
        ch->weight = e.weight;
        ch->aggregator.sin_family = AF_INET;
        ch->aggregator.sin_addr = e.aggregator;
        ch->aggregator.sin_port = htons(e.port);
        ch->next_round.assign(e.chunks, e.first_round);
        ch->holder.assign(e.chunks, nullptr);
        ch->waiting_tail.assign(e.chunks, nullptr);
        CongestionParams congestion;
        congestion.delay_target_ns =
            std::chrono::nanoseconds(options.delay_target.value_or(default_delay_target(block_)))
                .count();
        ch->credit = CreditController(congestion, options.window);
        channels_.push_back(std::move(ch));
        groups.push_back(e.group);
    }
    // Kernel receive timestamps only for the delay signal, the one reader that needs times a
    // busy worker cannot stretch: they cost up to 6% of a 768-value all-reduce in one A/B here
    // (4 alternations, 16 MiB x 4 workers: 0.101 s with them, 0.093 s without; the next A/B
    // was within noise), so nobody pays for them unasked.
    const bool delay_signal =
        options.congestion_control &&
        options.delay_target.value_or(default_delay_target(block_)).count() > 0;
    socket_ = std::make_unique<DatagramSocket>(local, endpoints.front().member_port,
                                               endpoints.front().group_port, groups, options.gso,
                                               delay_signal);
    set_tuning(options_.window, options_.partition_chunks);
    tx_.resize(size_t{kMaxPartition} * datagram_bytes_);
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0)
        throw std::system_error(errno, std::generic_category(), "eventfd");
    thread_ = std::thread([this] { run(); });
}

void Engine::set_tuning(unsigned window, unsigned partition_chunks)
{
    window_.store(std::max(window, 1u), std::memory_order_relaxed);
    partition_.store(std::clamp(partition_chunks, 1u, kMaxPartition), std::memory_order_relaxed);
}

Engine::~Engine()
{
    stop_ = true;
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
    fail_all(std::make_exception_ptr(
        ClientError(ClientError::Kind::closed, "the xagg client was closed")));
    close(wake_fd_);
}

std::shared_ptr<Op> Engine::submit(float *floats, int32_t *ints, size_t n, int priority,
                                   std::vector<float *> more_floats,
                                   std::vector<int32_t *> more_ints)
{
    auto op = std::make_shared<Op>();
    op->floats = floats;
    op->ints = ints;
    op->more_floats = std::move(more_floats);
    op->more_ints = std::move(more_ints);
    op->n = n;
    op->priority = priority;
    op->started = Clock::now();
    op->report.partition_chunks = partition_chunks();
    // This worker's block exponents, scanned on the caller's thread: callers on several threads
    // spread the scanning over their cores.
    const size_t blocks = (n + block_ - 1) / block_;
    double total_weight = 0;
    for (const auto &ch : channels_)
        total_weight += ch->weight;
    double before = 0;
    size_t first = 0;
    op->subs.resize(channels_.size());
    for (size_t c = 0; c < channels_.size(); c++) {
        before += channels_[c]->weight;
        size_t end = c + 1 == channels_.size()
                         ? blocks
                         : static_cast<size_t>(static_cast<double>(blocks) * before / total_weight);
        SubOp &sub = op->subs[c];
        sub.op = op.get();
        sub.channel = channels_[c].get();
        sub.first_block = first;
        sub.blocks = end - first;
        if (floats) {
            sub.exponent_chunks = static_cast<uint32_t>(wire::exponent_chunks(sub.blocks, block_));
            sub.scans.resize(sub.blocks);
            sub.scales.resize(sub.blocks);
            for (size_t b = 0; b < sub.blocks; b++) {
                size_t at = (first + b) * block_, len = std::min(block_, n - at);
                sub.scans[b] = scan_block(floats + at, len);
                for (const float *more : op->more_floats)  // the host's: the largest of them
                    sub.scans[b] = combine(sub.scans[b], scan_block(more + at, len));
            }
        }
        first = end;
    }
    {
        std::lock_guard g(submit_lock_);
        if (failed_)
            std::rethrow_exception(failure_);
        op->seq = next_seq_++;
        submitted_.push_back(op);
    }
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    return op;
}

UseKey Engine::key(const Use &u) const
{
    return {-u.sub->op->priority, u.sub->op->seq, u.position};
}

unsigned Engine::credit(const Channel &ch) const
{
    return options_.congestion_control ? ch.credit.window() : window();
}

void Engine::accept_submissions()
{
    std::deque<std::shared_ptr<Op>> taken;
    {
        std::lock_guard g(submit_lock_);
        taken.swap(submitted_);
    }
    for (auto &op : taken) {
        assign(*op);
        if (op->open_uses == 0)
            complete(*op);
        else
            active_.push_back(op);
    }
}

// Chunk indices and rounds, in submission order: every worker makes the same assignment.
void Engine::assign(Op &op)
{
    op.report.window = credit(*channels_.front());
    for (SubOp &sub : op.subs) {
        Channel &ch = *sub.channel;
        const size_t count = sub.exponent_chunks + sub.blocks;
        sub.uses.resize(count);
        for (size_t i = 0; i < count; i++) {
            Use &u = sub.uses[i];
            u.sub = &sub;
            u.exponent = i < sub.exponent_chunks;
            u.item = static_cast<uint32_t>(u.exponent ? i : i - sub.exponent_chunks);
            u.scale_known = !u.exponent && sub.exponent_chunks == 0;  // int32: nothing to agree
            u.position = ch.cursor++;
            u.index = static_cast<uint32_t>(u.position % ch.ring);
            u.round = ch.next_round[u.index]++;
            ch.unanswered.emplace(u.position, &u);
            // The send rule: round r of a chunk only after the result of round r - 1.
            if (ch.holder[u.index] == nullptr) {
                ch.holder[u.index] = &u;
                u.holds_index = true;
                make_ready(u);
            } else {
                Use *tail = ch.waiting_tail[u.index];
                (tail ? tail : ch.holder[u.index])->next_waiting = &u;
                ch.waiting_tail[u.index] = &u;
            }
        }
        op.open_uses += count;
        op.report.chunks += count;
    }
}

void Engine::make_ready(Use &u)
{
    if (u.state != Use::State::waiting || !u.holds_index || (!u.exponent && !u.scale_known))
        return;
    u.state = Use::State::ready;
    u.sub->channel->ready.insert({key(u), &u});
}

size_t Engine::encode(const Use &u, bool retransmit, uint8_t *out) const
{
    const SubOp &sub = *u.sub;
    const Op &op = *sub.op;
    wire::Header h;
    h.flags = retransmit ? XAGG_F_RETRANSMIT : 0;
    h.rank = static_cast<uint16_t>(options_.rank);
    h.job_id = sub.channel->job;
    h.key = sub.channel->key;
    h.round = u.round;
    h.chunk = u.index;
    h.nelem = static_cast<uint16_t>(block_);
    // The payload goes straight into the datagram, in the machine's order, which is the wire's
    // (little-endian, checked below): no staging copy, no zeroing of what is written anyway.
    if (!u.exponent && op.floats)
        h.exponent = sub.scales[u.item].exponent;
    const size_t header = wire::encode(h, {}, {out, datagram_bytes_});
    auto *values = reinterpret_cast<int32_t *>(out + header);
    if (u.exponent) {
        std::fill(values, values + block_, 0);
        size_t first = size_t{u.item} * blocks_per_exponent_chunk_;
        size_t last = std::min(sub.blocks, first + blocks_per_exponent_chunk_);
        for (size_t b = first; b < last; b++)
            encode_scan(sub.scans[b], values + (b - first) * kExponentGroups);
    } else {
        size_t at = (sub.first_block + u.item) * block_, len = std::min(block_, op.n - at);
        if (op.floats) {
            quantize(op.floats + at, len, h.exponent, values, block_);
            int32_t more[XAGG_MAX_CHUNK_ELEMS];
            for (const float *m : op.more_floats) {
                quantize(m + at, len, h.exponent, more, block_);
                add_wrapping(values, more, len);
            }
        } else {
            std::memcpy(values, op.ints + at, len * sizeof(int32_t));
            std::fill(values + len, values + block_, 0);
            for (const int32_t *m : op.more_ints)
                add_wrapping(values, m + at, len);
        }
    }
    return header + block_ * sizeof(int32_t);
}

// The oldest chunks not yet answered that a worker sends whatever its credit holds: enough to
// keep the workers' picks together (tests/integration_client_api_test.cpp, rising priorities),
// few enough that looking at them each turn costs nothing measurable.
constexpr unsigned kOldestSent = 64;

// How many of the channel's chunks in flight are of `key`'s priority or a higher one, counted up
// to `limit`.
static size_t in_flight_at_or_above(const Channel &ch, const UseKey &key, size_t limit)
{
    size_t n = 0;
    for (auto it = ch.in_flight.begin();
         it != ch.in_flight.end() && n < limit && it->first.neg_priority <= key.neg_priority; ++it)
        n++;
    return n;
}

// Sends what the credit allows, best first; a partition at a time.
void Engine::send_ready(Channel &ch)
{
    std::vector<Use *> batch;
    ch.credit.set_maximum(window());  // the configured (or tuned) ceiling
    const unsigned allowed = credit(ch);
    ch.credit_limited = false;
    while (!ch.ready.empty()) {
        batch.clear();
        // First the oldest chunks not yet answered (as many as the credit, up to kOldestSent),
        // whatever the credit holds. Oldest by assignment, which is the same on every worker,
        // whereas what each picks by priority may differ (its results came a little sooner or
        // later): with a small credit, one worker's credit can fill with chunks of a high-priority
        // call that wait for the others, while theirs fill with chunks of another call that wait
        // for it, and only timers (read as losses, cutting the credit further) move them on.
        // The oldest never wait for an earlier round of their index (it is older, so
        // answered); every worker sends them, so they complete. In the steady state they are in
        // flight already and this adds nothing.
        unsigned looked = 0;
        for (auto it = ch.unanswered.begin();
             it != ch.unanswered.end() && looked < std::min(std::max(allowed, 1u), kOldestSent) &&
             batch.size() < partition_chunks();
             ++it, ++looked) {
            Use *old = it->second;
            if (old->state == Use::State::ready && ch.ready.erase({key(*old), old}) == 1)
                batch.push_back(old);
        }
        while (batch.size() < partition_chunks() && !ch.ready.empty()) {
            // The credit counts the chunks in flight of this one's priority or higher: a call of
            // higher priority takes the place of lower ones already out rather than waiting
            // behind them. Every worker lets it through at once, so it completes; left waiting,
            // each worker's credit could hold chunks of a call the others had not reached.
            const UseKey &next = ch.ready.begin()->first;
            if (ch.in_flight.size() + batch.size() >= allowed &&
                batch.size() + in_flight_at_or_above(ch, next, allowed) >= allowed) {
                ch.credit_limited = true;
                break;
            }
            batch.push_back(ch.ready.begin()->second);
            ch.ready.erase(ch.ready.begin());
        }
        if (batch.empty())
            return;
        transmit(ch, batch, false);
        if (!batch.empty())  // the socket is full: try again at the next turn
            return;
    }
}

// Sends the batch; what could not be sent stays in it (and ready).
void Engine::transmit(Channel &ch, std::vector<Use *> &batch, bool retransmit)
{
    for (size_t i = 0; i < batch.size(); i++)
        encode(*batch[i], retransmit, tx_.data() + i * datagram_bytes_);
    // The send time, as near the wire as a socket gets: just before the system call that hands
    // the batch to the kernel.
    const int64_t now = now_ns();
    size_t sent = socket_->send(ch.aggregator, tx_.data(), datagram_bytes_, batch.size());
    const int64_t floor = std::chrono::nanoseconds(options_.timeout).count();
    const int64_t rto = std::min(std::max(floor, ch.srtt_ns + 4 * ch.rttvar_ns), 2'000'000'000l);
    for (size_t i = 0; i < sent; i++) {
        Use &u = *batch[i];
        if (retransmit) {
            u.retries++;
            u.sub->op->report.retransmits++;
            ch.sent_order.erase(u.sent_at);
        } else {
            u.state = Use::State::in_flight;
            u.sent_ns = now;
            ch.in_flight.insert({key(u), &u});
        }
        u.last_sent_ns = now;
        u.sent_at = ch.sent_order.insert(ch.sent_order.end(), &u);
        arm(u, now + rto * (int64_t{1} << std::min(u.retries, 3u)));  // backs off up to 8x
    }
    if (!retransmit)
        for (size_t i = sent; i < batch.size(); i++)
            ch.ready.insert({key(*batch[i]), batch[i]});
    batch.erase(batch.begin(), batch.begin() + static_cast<ptrdiff_t>(sent));
}

void Engine::on_datagram(const DatagramSocket::Arrival &arrival, std::span<const uint8_t> datagram)
{
    const in_addr from = arrival.from;
    auto h = wire::decode(datagram);
    if (!h || !(h->flags & XAGG_F_RESULT) || h->nelem != block_)
        return;
    // A result is its aggregator's by the address it comes from (the one the contributions went
    // to): the shares of one tensor on several aggregators may have one job id, as a cluster
    // job's do, and the same chunk indexes.
    for (auto &ch : channels_) {
        if (ch->aggregator.sin_addr.s_addr != from.s_addr || ch->job != h->job_id ||
            h->chunk >= ch->ring)
            continue;
        Use *u = ch->holder[h->chunk];
        // Only the answer to the round in flight counts; duplicates and late copies do not.
        if (u && u->state == Use::State::in_flight && u->round == h->round)
            on_result(*u, *h, arrival, datagram);
        return;
    }
}

void Engine::on_result(Use &u, const wire::Header &h, const DatagramSocket::Arrival &arrival,
                       std::span<const uint8_t> datagram)
{
    SubOp &sub = *u.sub;
    Op &op = *sub.op;
    Channel &ch = *sub.channel;
    if (!(h.contrib >> options_.rank & 1))
        throw diagnose("a result of job " + std::to_string(ch.job) + " without this worker (rank " +
                           std::to_string(options_.rank) + ") in it",
                       ch.job, std::nullopt);
    int32_t sums[XAGG_MAX_CHUNK_ELEMS];
    std::memcpy(sums, datagram.data() + wire::kHeaderBytes,
                block_ * sizeof(int32_t));  // little-endian; the length was checked
    const uint64_t full = ch.workers == 64 ? ~0ull : (1ull << ch.workers) - 1;
    if (u.exponent) {
        size_t first = size_t{u.item} * blocks_per_exponent_chunk_;
        size_t last = std::min(sub.blocks, first + blocks_per_exponent_chunk_);
        for (size_t b = first; b < last; b++) {
            // Fraction bits for every rank summed: each member's contribution is the integer sum
            // of its host's op.ranks() tensors.
            sub.scales[b] =
                decode_scale(sums + (b - first) * kExponentGroups, ch.workers * op.ranks());
            Use &values = sub.uses[sub.exponent_chunks + b];
            values.scale_known = true;
            make_ready(values);
        }
    } else {
        size_t at = (sub.first_block + u.item) * block_, len = std::min(block_, op.n - at);
        if (op.floats) {
            dequantize(sums, len, sub.scales[u.item], op.floats + at);
            op.report.nonfinite_blocks += sub.scales[u.item].nonfinite;
            for (float *m : op.more_floats)
                std::memcpy(m + at, op.floats + at, len * sizeof(float));
        } else {
            std::memcpy(op.ints + at, sums, len * sizeof(int32_t));
            for (int32_t *m : op.more_ints)
                std::memcpy(m + at, sums, len * sizeof(int32_t));
        }
    }
    op.report.fallback_chunks += (h.flags & XAGG_F_FALLBACK) != 0;
    op.report.partial_chunks += (h.contrib & full) != full;
    auto summed = static_cast<unsigned>(std::popcount(h.contrib)) * op.ranks();
    op.report.contributors =
        op.report.contributors ? std::min(op.report.contributors, summed) : summed;
    // The congestion the network marked on this chunk's way: the share of its contributions
    // marked on the way in, or all of it when the result itself was marked on the way back.
    double marked = summed ? std::min(1.0, double(h.marked) / summed) : 0;
    if (xagg_tos_marked(arrival.tos))
        marked = 1;
    op.report.marked_chunks += marked > 0;
    finish_use(u, arrival.at_ns, marked);
}

void Engine::finish_use(Use &u, int64_t now, double marked)
{
    Channel &ch = *u.sub->channel;
    if (u.retries == 0) {  // Karn: a resent chunk's answer may be to either copy
        int64_t sample = now - u.sent_ns;
        ch.min_rtt_ns = ch.min_rtt_ns ? std::min(ch.min_rtt_ns, sample) : sample;
        if (ch.srtt_ns == 0) {
            ch.srtt_ns = sample;
            ch.rttvar_ns = sample / 2;
        } else {
            ch.rttvar_ns += (std::abs(ch.srtt_ns - sample) - ch.rttvar_ns) / 4;
            ch.srtt_ns += (sample - ch.srtt_ns) / 8;
        }
    }
    // The latest transmission answered, for early loss detection. An answer quicker than any
    // round trip seen is to an earlier copy of a resent chunk, which dates nothing.
    const int64_t rtt = now - u.last_sent_ns;
    if (u.last_sent_ns > ch.rack_sent_ns && (u.retries == 0 || rtt >= ch.min_rtt_ns)) {
        ch.rack_sent_ns = u.last_sent_ns;
        ch.rack_rtt_ns = rtt;
    }
    if (options_.congestion_control) {
        const uint64_t cuts = ch.credit.cuts();
        ch.credit.on_answer(Answer{.window_full = ch.credit_limited,
                                   .rtt_ns = u.retries == 0 ? now - u.sent_ns : 0,
                                   .sent_ns = u.last_sent_ns,
                                   .at_ns = now,
                                   .marked = marked});
        u.sub->op->report.credit_cuts += ch.credit.cuts() - cuts;
    }
    ch.sent_order.erase(u.sent_at);
    ch.in_flight.erase({key(u), &u});
    ch.unanswered.erase(u.position);
    u.state = Use::State::done;
    u.timer_generation++;
    // The index passes to the next use in line, which may now be sent.
    Use *next = u.next_waiting;
    ch.holder[u.index] = next;
    if (next) {
        if (ch.waiting_tail[u.index] == next)
            ch.waiting_tail[u.index] = nullptr;
        next->holds_index = true;
        make_ready(*next);
    }
    Op &op = *u.sub->op;
    if (--op.open_uses == 0)
        complete(op);
}

void Engine::complete(Op &op)
{
    std::lock_guard g(op.lock);
    op.report.seconds = std::chrono::duration<double>(Clock::now() - op.started).count();
    op.done = true;
    op.finished.notify_all();
}

void Engine::arm(Use &u, int64_t deadline)
{
    timers_.push({deadline, ++u.timer_generation, &u, u.sub->op->shared_from_this()});
}

void Engine::check_timers()
{
    const int64_t now = now_ns();
    std::map<Channel *, std::vector<Use *>> resend;
    while (!timers_.empty() && timers_.top().deadline <= now) {
        Timer t = timers_.top();
        timers_.pop();
        const uint32_t generation = t.generation;
        Use *use = t.use;
        if (generation != use->timer_generation || use->state != Use::State::in_flight)
            continue;  // answered, or re-armed since
        on_loss(*use, now);
        resend[use->sub->channel].push_back(use);
    }
    for (auto &[channel, list] : resend) {
        const size_t per_batch = partition_chunks();
        for (size_t i = 0; i < list.size(); i += per_batch) {
            std::vector<Use *> batch(
                list.begin() + static_cast<ptrdiff_t>(i),
                list.begin() + static_cast<ptrdiff_t>(std::min(list.size(), i + per_batch)));
            transmit(*channel, batch, true);
            for (Use *u : batch)  // not sent (socket full): try again soon
                arm(*u, now + 1000000);
        }
    }
}

// A chunk is to be sent again: the end if it has been too often, else a loss for the credit.
void Engine::on_loss(Use &u, int64_t now)
{
    if (u.retries >= options_.max_retries)
        throw diagnose("no result for chunk " + std::to_string(u.index) + " round " +
                           std::to_string(u.round) + " after " + std::to_string(u.retries) +
                           " retransmissions",
                       u.sub->channel->job, u.round);
    if (options_.congestion_control && u.sub->channel->credit.on_loss(u.last_sent_ns, now))
        u.sub->op->report.credit_cuts++;
}

// RACK's rule (RFC 8985, section 6.2) without its timer: a chunk sent before the latest one
// answered, and unanswered for that one's round trip plus a reordering allowance, is lost. The
// allowance is a quarter of the smoothed round trip: results come back reordered by a veth
// queue's batch or by another worker's late contribution, by a fraction of a round trip.
void Engine::detect_losses(Channel &ch, int64_t now)
{
    const int64_t allowance = std::max<int64_t>(ch.srtt_ns / 4, 50'000);
    std::vector<Use *> lost;
    for (Use *u : ch.sent_order) {
        if (u->last_sent_ns >= ch.rack_sent_ns ||
            now < u->last_sent_ns + ch.rack_rtt_ns + allowance)
            break;  // sent_order is by transmission time: the rest are later still
        lost.push_back(u);
    }
    if (!lost.empty())
        retransmit_lost(ch, lost, now);
}

void Engine::retransmit_lost(Channel &ch, std::vector<Use *> &lost, int64_t now)
{
    for (Use *u : lost)
        on_loss(*u, now);
    const size_t per_batch = partition_chunks();
    for (size_t i = 0; i < lost.size(); i += per_batch) {
        std::vector<Use *> batch(
            lost.begin() + static_cast<ptrdiff_t>(i),
            lost.begin() + static_cast<ptrdiff_t>(std::min(lost.size(), i + per_batch)));
        const size_t count = batch.size();
        transmit(ch, batch, true);
        for (size_t k = 0; k < count - batch.size(); k++)
            lost[i + k]->sub->op->report.early_retransmits++;
        if (!batch.empty())  // the socket is full: what is left is found again next turn
            return;
    }
}

void Engine::fail_all(const std::exception_ptr &error)
{
    {
        std::lock_guard g(submit_lock_);
        if (!failed_) {
            failed_ = true;
            failure_ = error;
        }
        for (auto &op : submitted_)
            active_.push_back(op);
        submitted_.clear();
    }
    for (auto &op : active_) {
        std::lock_guard g(op->lock);
        if (op->done)
            continue;
        op->error = error;
        op->done = true;
        op->finished.notify_all();
    }
    active_.clear();
}

void Engine::run()
{
    try {
        while (!stop_) {
            accept_submissions();
            for (auto &ch : channels_)
                send_ready(*ch);
            size_t got = 0;
            bool drained = false;
            for (int i = 0; i < 16 && !drained; i++) {
                size_t n =
                    socket_->receive([this](const DatagramSocket::Arrival &a,
                                            std::span<const uint8_t> d) { on_datagram(a, d); });
                drained = n == 0;
                got += n;
            }
            // Only with every result read: results a busy worker has not read yet are not lost.
            if (options_.congestion_control && drained)
                for (auto &ch : channels_)
                    detect_losses(*ch, now_ns());
            check_timers();
            std::erase_if(active_, [](const std::shared_ptr<Op> &op) {
                std::lock_guard g(op->lock);
                return op->done;
            });
            if (got)
                continue;
            // Idle until a result, a submission or the next timer.
            int wait_ms = 1;
            if (active_.empty()) {
                bool pending;
                {
                    std::lock_guard g(submit_lock_);
                    pending = !submitted_.empty();
                }
                wait_ms = pending ? 0 : 100;
            }
            bool backlog = false;
            for (auto &ch : channels_)
                backlog |= !ch->ready.empty() && ch->in_flight.size() < credit(*ch);
            // The group socket's fd is -1 (ignored by poll) when the rank's own receives all.
            pollfd fds[3] = {{socket_->fd(), POLLIN, 0},
                             {wake_fd_, POLLIN, 0},
                             {socket_->group_fd(), POLLIN, 0}};
            if (backlog)
                fds[0].events |= POLLOUT;
            poll(fds, 3, wait_ms);
            if (fds[1].revents & POLLIN) {
                uint64_t v;
                (void)!read(wake_fd_, &v, sizeof(v));
            }
        }
    } catch (...) {
        fail_all(std::current_exception());
    }
}

}  // namespace xagg::client
