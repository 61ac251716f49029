// SPDX-License-Identifier: MIT
// xagg-demo-worker: one synthetic worker speaking the wire protocol over a plain UDP socket.
// Sends every chunk of every round with a window and retransmission, receives the results
// (multicast, or unicast when re-sent), checks each one bit for bit against the sum it computes
// itself, and reports the rate. A stand-in for the client library in demos and tests.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <system_error>
#include <vector>

#include "lib/sys/netns.hpp"
#include "tests/tools/xagg-demo-worker/synthetic.hpp"
#include "xagg/job_key.hpp"
#include "xagg/wire.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::string netns, aggregator, local, group;
    uint16_t port = XAGG_DEFAULT_PORT, group_port = 9872;
    uint32_t job = 1, rank = 0, workers = 1, chunks = 64, rounds = 1, window = 64;
    uint32_t timeout_ms = 50, max_retries = 100;
    uint32_t chunk_elems = XAGG_CHUNK_ELEMS;  // the job's chunk size: 768 or 2048
    uint64_t seed = 1;
    uint64_t key = 0;  // the job key (from the join reply, or xagg-fastpath --job)
    bool json = false;
};

struct Stats {
    uint64_t sent = 0, retransmits = 0, verified = 0, mismatches = 0, resent_results = 0;
    uint64_t partial = 0;  // exact, but without an evicted rank
    uint64_t digest = 0;
    double seconds = 0;
};

[[noreturn]] void fail_errno(const std::string &what)
{
    throw std::system_error(errno, std::generic_category(), what);
}

int open_socket(const Options &o)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        fail_errno("socket");
    int one = 1, buf = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    // One socket gets both kinds of result: bound to the group port on every address, it sees
    // the group's multicast and the unicast re-sends to its own address.
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_port = htons(o.group_port);
    local.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(fd, reinterpret_cast<sockaddr *>(&local), sizeof(local)) != 0)
        fail_errno("bind to port " + std::to_string(o.group_port));
    ip_mreq mreq{};
    inet_pton(AF_INET, o.group.c_str(), &mreq.imr_multiaddr);
    inet_pton(AF_INET, o.local.c_str(), &mreq.imr_interface);
    if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof(mreq)) != 0)
        fail_errno("joining group " + o.group);
    return fd;
}

class Worker {
public:
    Worker(const Options &o, int fd) : o_(o), fd_(fd)
    {
        agg_.sin_family = AF_INET;
        agg_.sin_port = htons(o.port);
        if (inet_pton(AF_INET, o.aggregator.c_str(), &agg_.sin_addr) != 1)
            throw std::invalid_argument("bad aggregator address " + o.aggregator);
    }

    Stats run()
    {
        // Contributions are generated before the clock starts: the rate is the protocol's.
        size_t total = size_t{o_.rounds} * o_.chunks;
        mine_.resize(total * o_.chunk_elems);
        got_.assign(total * o_.chunk_elems, 0);
        contrib_.assign(total, 0);
        for (uint32_t round = 0; round < o_.rounds; round++)
            for (uint32_t chunk = 0; chunk < o_.chunks; chunk++)
                for (uint32_t i = 0; i < o_.chunk_elems; i++)
                    mine_[index(round, chunk) + i] =
                        xagg::synthetic::value(o_.seed, o_.rank, round, chunk, i, o_.workers);
        auto start = Clock::now();
        for (uint32_t round = 0; round < o_.rounds; round++)
            run_round(round);
        stats_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
        verify();
        return stats_;
    }

private:
    struct InFlight {
        uint32_t chunk;
        Clock::time_point sent_at;
        uint32_t tries;
    };

    void send_chunk(uint32_t round, uint32_t chunk, bool retransmit)
    {
        xagg::wire::Header h;
        h.flags = retransmit ? XAGG_F_RETRANSMIT : 0;
        h.rank = static_cast<uint16_t>(o_.rank);
        h.job_id = o_.job;
        h.round = round;
        h.chunk = chunk;
        h.key = o_.key;
        h.nelem = static_cast<uint16_t>(o_.chunk_elems);
        uint8_t buf[xagg::wire::kMaxDatagramBytes];
        size_t len = xagg::wire::encode(h, {&mine_[index(round, chunk)], o_.chunk_elems}, buf);
        // A full socket buffer is loss like any other: the retransmission timer recovers it.
        (void)sendto(fd_, buf, len, 0, reinterpret_cast<const sockaddr *>(&agg_), sizeof(agg_));
        stats_.sent++;
        if (retransmit)
            stats_.retransmits++;
    }

    // Keeps the first result of each chunk of the round; checking waits until the clock stops.
    void accept_result(uint32_t round, const uint8_t *data, size_t len)
    {
        auto h = xagg::wire::decode({data, len});
        if (!h || !(h->flags & XAGG_F_RESULT) || h->job_id != o_.job || h->round != round ||
            h->chunk >= o_.chunks || h->nelem != o_.chunk_elems || done_[h->chunk])
            return;  // not ours, a late duplicate, or a result of another round
        int32_t *out = &got_[index(round, h->chunk)];
        for (uint32_t i = 0; i < o_.chunk_elems; i++)
            out[i] = xagg::wire::value_at({data, len}, i);
        contrib_[size_t{round} * o_.chunks + h->chunk] = h->contrib;
        if (h->flags & XAGG_F_RESENT)
            stats_.resent_results++;
        done_[h->chunk] = true;
        remaining_--;
    }

    // Every result against the sum of its contributors' synthetic values, computed here. A
    // result that lacks a rank is one the aggregator sent after evicting it: exact over the
    // ranks its bitmap names, counted as partial, never passed off as the full sum.
    void verify()
    {
        uint64_t all = o_.workers == 64 ? ~0ull : (1ull << o_.workers) - 1;
        for (uint32_t round = 0; round < o_.rounds; round++) {
            for (uint32_t chunk = 0; chunk < o_.chunks; chunk++) {
                const int32_t *v = &got_[index(round, chunk)];
                uint64_t contrib = contrib_[size_t{round} * o_.chunks + chunk];
                bool ok = (contrib & ~all) == 0 && (contrib >> o_.rank & 1);
                for (uint32_t i = 0; i < o_.chunk_elems && ok; i++) {
                    int32_t want = 0;
                    for (uint32_t r = 0; r < o_.workers; r++)
                        if (contrib >> r & 1)
                            want = xagg::wire::wrapping_add(
                                want,
                                xagg::synthetic::value(o_.seed, r, round, chunk, i, o_.workers));
                    ok = v[i] == want;
                }
                ok ? stats_.verified++ : stats_.mismatches++;
                if (ok && contrib != all)
                    stats_.partial++;
                stats_.digest += xagg::synthetic::result_hash(round, chunk, v, o_.chunk_elems);
            }
        }
    }

    size_t index(uint32_t round, uint32_t chunk) const
    {
        return (size_t{round} * o_.chunks + chunk) * o_.chunk_elems;
    }

    void receive(uint32_t round, int timeout_ms)
    {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0)
            return;
        constexpr unsigned kBatch = 64;
        static uint8_t bufs[kBatch][xagg::wire::kMaxDatagramBytes + 1];
        mmsghdr msgs[kBatch]{};
        iovec iov[kBatch];
        for (unsigned i = 0; i < kBatch; i++) {
            iov[i] = {bufs[i], sizeof(bufs[i])};
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(fd_, msgs, kBatch, MSG_DONTWAIT, nullptr);
        for (int i = 0; i < n; i++)
            accept_result(round, bufs[i], msgs[i].msg_len);
    }

    void run_round(uint32_t round)
    {
        done_.assign(o_.chunks, false);
        remaining_ = o_.chunks;
        std::deque<InFlight> flight;  // in send order, so the oldest is at the front
        uint32_t next = 0;
        const auto timeout = std::chrono::milliseconds(o_.timeout_ms);
        while (remaining_ > 0) {
            while (!flight.empty() && done_[flight.front().chunk])
                flight.pop_front();
            // Fill the window.
            while (flight.size() < o_.window && next < o_.chunks) {
                send_chunk(round, next, false);
                flight.push_back({next++, Clock::now(), 0});
            }
            receive(round, static_cast<int>(o_.timeout_ms));
            // Retransmit what timed out, oldest first.
            auto now = Clock::now();
            for (size_t i = 0, n = flight.size(); i < n; i++) {
                InFlight f = flight.front();
                flight.pop_front();
                if (done_[f.chunk])
                    continue;
                if (now - f.sent_at >= timeout) {
                    if (++f.tries > o_.max_retries)
                        throw std::runtime_error("chunk " + std::to_string(f.chunk) + " of round " +
                                                 std::to_string(round) + " unanswered after " +
                                                 std::to_string(o_.max_retries) + " retries");
                    send_chunk(round, f.chunk, true);
                    f.sent_at = now;
                }
                flight.push_back(f);
            }
        }
    }

    const Options &o_;
    int fd_;
    sockaddr_in agg_{};
    Stats stats_;
    std::vector<int32_t> mine_, got_;  // [round][chunk][element]
    std::vector<uint64_t> contrib_;    // [round][chunk]: the result's contributor bitmap
    std::vector<bool> done_;
    uint32_t remaining_ = 0;
};

}  // namespace

int main(int argc, char **argv)
{
    CLI::App app{
        "One synthetic xagg worker: sends deterministic gradients, verifies every result bit for "
        "bit, reports the rate.\n\nExample:\n"
        "  xagg-demo-worker --aggregator 10.77.0.100 --local 10.77.0.1 --group 239.77.0.1 \\\n"
        "      --job 1 --rank 0 --workers 4 --chunks 1024 --rounds 10"};
    Options o;
    app.add_option("--netns", o.netns, "Network namespace (of `ip netns`) to run in");
    app.add_option("--aggregator", o.aggregator, "Aggregator IPv4 address")->required();
    app.add_option("--port", o.port, "Aggregator UDP port")->default_val(o.port);
    app.add_option("--local", o.local, "This worker's IPv4 address")->required();
    app.add_option("--group", o.group, "Multicast group of the job's results")->required();
    app.add_option("--group-port", o.group_port, "Results port; also this worker's source port")
        ->default_val(o.group_port);
    app.add_option("--job", o.job, "Job id")->default_val(o.job);
    std::string key_text;
    app.add_option("--key", key_text, "The job key, 16 hex digits (from the join reply)")
        ->required();
    app.add_option("--rank", o.rank, "This worker's rank")->default_val(o.rank);
    app.add_option("--workers", o.workers, "Number of workers in the job")
        ->default_val(o.workers)
        ->check(CLI::Range(1u, 64u));
    app.add_option("--chunks", o.chunks, "Chunks per round")
        ->default_val(o.chunks)
        ->check(CLI::Range(1u, 1u << 24));
    app.add_option("--chunk-elems", o.chunk_elems, "Values per chunk: the job's chunk size")
        ->default_val(o.chunk_elems)
        ->check(CLI::IsMember({XAGG_CHUNK_ELEMS, XAGG_JUMBO_CHUNK_ELEMS}));
    app.add_option("--rounds", o.rounds, "Rounds (iterations)")->default_val(o.rounds);
    app.add_option("--window", o.window, "Chunks in flight")
        ->default_val(o.window)
        ->check(CLI::Range(1u, 65536u));
    app.add_option("--timeout-ms", o.timeout_ms, "Retransmission timeout")
        ->default_val(o.timeout_ms);
    app.add_option("--max-retries", o.max_retries, "Give up on a chunk after this many")
        ->default_val(o.max_retries);
    app.add_option("--seed", o.seed, "Seed of the synthetic gradients")->default_val(o.seed);
    app.add_flag("--json", o.json, "Print the summary as one JSON object");
    CLI11_PARSE(app, argc, argv);
    if (const auto key = xagg::parse_job_key(key_text)) {
        o.key = *key;
    } else {
        std::fprintf(stderr, "error: --key %s is not 16 hex digits, not all zero\n",
                     key_text.c_str());
        return 1;
    }
    if (o.rank >= o.workers) {
        std::fprintf(stderr, "error: --rank must be below --workers\n");
        return 1;
    }

    try {
        if (!o.netns.empty())
            xagg::sys::enter_netns(o.netns);
        int fd = open_socket(o);
        Worker w(o, fd);
        Stats s = w.run();
        close(fd);
        double chunks_per_s = static_cast<double>(uint64_t{o.rounds} * o.chunks) / s.seconds;
        double gbit = chunks_per_s * o.chunk_elems * 4 * 8 / 1e9;
        if (o.json) {
            std::printf(
                "{\"rank\": %u, \"rounds\": %u, \"chunks\": %u, \"verified\": %llu, "
                "\"mismatches\": %llu, \"partial\": %llu, \"retransmits\": %llu, "
                "\"resent_results\": %llu, "
                "\"digest\": \"%016llx\", \"seconds\": %.6f, \"chunks_per_s\": %.1f, "
                "\"gbit_per_s\": %.4f}\n",
                o.rank, o.rounds, o.chunks, (unsigned long long)s.verified,
                (unsigned long long)s.mismatches, (unsigned long long)s.partial,
                (unsigned long long)s.retransmits, (unsigned long long)s.resent_results,
                (unsigned long long)s.digest, s.seconds, chunks_per_s, gbit);
        } else {
            std::printf(
                "rank %u: %llu of %llu results exact (%llu without an evicted rank), %llu wrong, "
                "%llu retransmits, digest %016llx, %.3f s, %.0f chunks/s (%.3f Gbit/s of "
                "gradient)\n",
                o.rank, (unsigned long long)s.verified,
                (unsigned long long)(uint64_t{o.rounds} * o.chunks), (unsigned long long)s.partial,
                (unsigned long long)s.mismatches, (unsigned long long)s.retransmits,
                (unsigned long long)s.digest, s.seconds, chunks_per_s, gbit);
        }
        return s.mismatches == 0 ? 0 : 3;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: rank %u: %s\n", o.rank, e.what());
        return 2;
    }
}
