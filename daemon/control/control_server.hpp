// SPDX-License-Identifier: MIT
// The control API's transport: listening sockets (Unix, TCP), their connections, and the limits
// that keep any one client from hurting the daemon. A request is one line; the handler applies
// it whole before its reply is written, so a client that goes away mid-request gets nothing but
// changes nothing by half. No peer behaviour raises a signal (every send is MSG_NOSIGNAL), and
// each connection costs bounded memory and time:
//  - at most `max_connections` at once; past that the oldest idle one is closed for the new one,
//    or, when none is idle, the new one is closed at once;
//  - a request must be complete (its newline read) within `request_timeout` of its first byte or
//    of the connection's opening; a connection idle for `idle_timeout` is closed;
//  - a line longer than kMaxRequestBytes is refused and the connection closed;
//  - a reply the client does not read is kept up to `max_reply_backlog` bytes, then dropped
//    with the connection.
// Everything runs in the daemon's one poll loop: nothing here blocks.
#pragma once

#include <poll.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <vector>

#include "lib/tls/tls.hpp"

namespace xagg::daemon {

// Requests longer than this are refused without being parsed.
inline constexpr size_t kMaxRequestBytes = 64 * 1024;

struct ControlLimits {
    size_t max_connections = 256;
    std::chrono::milliseconds request_timeout{10000};
    std::chrono::milliseconds idle_timeout{60000};
    size_t max_reply_backlog = 16u << 20;
    // Refusals for a missing or wrong token (TCP), per second and in a burst; past that, such a
    // connection is closed without a reply.
    double unauthorized_per_second = 20;
    double unauthorized_burst = 40;
};

// What the handler made of one request line.
struct ControlReply {
    std::string text;           // the reply, without its newline
    bool unauthorized = false;  // refused for its token: the connection closes after the reply
};

// What the transport did, counted (exported as metrics).
enum class ControlEvent {
    accepted,             // connections accepted
    over_limit,           // closed because max_connections were open
    timed_out,            // closed for a request not completed in time, or idle too long
    oversized,            // closed for a line over kMaxRequestBytes
    unauthorized,         // refused for a missing or wrong token (TCP)
    unauthorized_silent,  // of those, closed without a reply (rate limit)
    reply_overflow,       // closed for not reading their replies
    tls_failed,           // TLS handshake failed (not TLS, a bad or missing client certificate)
    count_,
};
inline constexpr size_t kControlEvents = static_cast<size_t>(ControlEvent::count_);
using ControlEventCounts = std::array<uint64_t, kControlEvents>;
// The name of an event in metrics, e.g. "timed_out".
const char *to_string(ControlEvent e);

class ControlServer {
public:
    using Handler = std::function<ControlReply(const std::string &line, bool remote)>;
    using Clock = std::chrono::steady_clock;

    ControlServer(Handler handler, ControlLimits limits = {});
    ~ControlServer();
    ControlServer(const ControlServer &) = delete;
    ControlServer &operator=(const ControlServer &) = delete;

    // Listens on a Unix socket (created with `mode`, octal text) or a TCP address HOST:PORT;
    // with `tls`, every TCP connection is TLS (handshake first, within the request timeout).
    void listen_unix(const std::string &path, const std::string &mode);
    void listen_tcp(const std::string &address, tls::Context tls = nullptr);
    // New certificates for the TLS listeners (SIGHUP): connections from now on use `tls`; open
    // ones keep the context they were accepted with (OpenSSL counts its references).
    void replace_tls(tls::Context tls);

    // The poll loop's part: append what to wait for; then, after poll(), serve what is ready
    // (fds[first..] are the ones poll_fds appended) and close what timed out.
    void poll_fds(std::vector<pollfd> &fds) const;
    void serve(const std::vector<pollfd> &fds, size_t first);
    // How long poll() may sleep before a connection's deadline passes (-1: none).
    int next_deadline_ms() const;

    // Read from any thread (the metrics endpoint's).
    ControlEventCounts counts() const;
    size_t open_connections() const { return connections_.size(); }

private:
    struct Listener {
        int fd;
        bool remote;
        tls::Context tls;  // null: plain
    };
    struct Connection {
        int fd;
        bool remote;
        std::string in, out;
        Clock::time_point opened, last_activity;
        bool closing = false;  // close once `out` is written
        bool closed = false;
        tls::Connection ssl;       // null: plain
        bool handshaking = false;  // TLS: accepting
        bool wants_write = false;  // TLS: the library waits to write (a handshake message)
        bool busy() const { return handshaking || !in.empty() || !out.empty(); }
    };

    void accept_all(const Listener &l);
    // TLS: moves the handshake on; false when the connection was closed.
    bool handshake(Connection &c);
    // recv/send, or their TLS counterparts: >0 bytes, 0 would block, <0 closed or failed.
    ssize_t receive(Connection &c, char *buf, size_t len);
    ssize_t transmit(Connection &c, const char *buf, size_t len);
    void read_from(Connection &c);
    void write_to(Connection &c);
    void handle_lines(Connection &c);
    void expire(Clock::time_point now);
    bool allow_unauthorized_reply(Clock::time_point now);
    static void close_connection(Connection &c);

    Handler handler_;
    ControlLimits limits_;
    std::vector<Listener> listeners_;
    std::list<Connection> connections_;  // stable addresses; oldest first
    void count(ControlEvent e)
    {
        events_[static_cast<size_t>(e)].fetch_add(1, std::memory_order_relaxed);
    }
    std::array<std::atomic<uint64_t>, kControlEvents> events_{};
    double refusal_tokens_;
    Clock::time_point refusal_refill_ = Clock::now();
};

}  // namespace xagg::daemon
