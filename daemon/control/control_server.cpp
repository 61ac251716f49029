// SPDX-License-Identifier: MIT
#include "daemon/control/control_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "daemon/control/control_api.hpp"

namespace xagg::daemon {
namespace {

[[noreturn]] void fail_errno(const std::string &what)
{
    throw std::system_error(errno, std::generic_category(), what);
}

// A line too long to be a request; the connection closes after the refusal.
std::string oversized_reply()
{
    return R"({"ok":false,"code":"refused","error":"request larger than )" +
           std::to_string(kMaxRequestBytes) + R"( bytes"})";
}

}  // namespace

const char *to_string(ControlEvent e)
{
    switch (e) {
    case ControlEvent::accepted: return "accepted";
    case ControlEvent::over_limit: return "over_limit";
    case ControlEvent::timed_out: return "timed_out";
    case ControlEvent::oversized: return "oversized";
    case ControlEvent::unauthorized: return "unauthorized";
    case ControlEvent::unauthorized_silent: return "unauthorized_silent";
    case ControlEvent::reply_overflow: return "reply_overflow";
    case ControlEvent::tls_failed: return "tls_failed";
    case ControlEvent::count_: break;
    }
    return "unknown";
}

ControlEventCounts ControlServer::counts() const
{
    ControlEventCounts out{};
    for (size_t i = 0; i < kControlEvents; i++)
        out[i] = events_[i].load(std::memory_order_relaxed);
    return out;
}

ControlServer::ControlServer(Handler handler, ControlLimits limits)
    : handler_(std::move(handler)), limits_(limits), refusal_tokens_(limits.unauthorized_burst)
{
}

ControlServer::~ControlServer()
{
    for (auto &c : connections_)
        close_connection(c);
    for (auto &l : listeners_)
        close(l.fd);
}

void ControlServer::listen_unix(const std::string &path, const std::string &mode)
{
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        fail_errno("socket");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) {
        close(fd);
        throw std::runtime_error("control_socket path is too long: " + path);
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    unlink(path.c_str());
    if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0 ||
        chmod(path.c_str(), static_cast<mode_t>(std::stoul(mode, nullptr, 8))) != 0 ||
        listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        fail_errno("serving the control socket " + path);
    }
    listeners_.push_back({fd, false, nullptr});
}

void ControlServer::listen_tcp(const std::string &address, tls::Context tls)
{
    size_t colon = address.rfind(':');
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(std::stoul(address.substr(colon + 1))));
    if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1)
        throw std::runtime_error("control_tcp_address: '" + address.substr(0, colon) +
                                 "' is not an IPv4 address");
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        fail_errno("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0 ||
        listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        fail_errno("serving the control API on " + address);
    }
    listeners_.push_back({fd, true, std::move(tls)});
}

void ControlServer::replace_tls(tls::Context tls)
{
    for (Listener &l : listeners_)
        if (l.tls) {
            SSL_CTX_up_ref(tls.get());
            l.tls.reset(tls.get());
        }
}

void ControlServer::poll_fds(std::vector<pollfd> &fds) const
{
    for (const auto &l : listeners_)
        fds.push_back({l.fd, POLLIN, 0});
    for (const auto &c : connections_) {
        // A connection with a reply to write is not read from until it is written: one request
        // at a time per client, so a client that only sends cannot pile up replies.
        short events = c.out.empty() && !c.wants_write ? POLLIN : POLLOUT;
        fds.push_back({c.fd, events, 0});
    }
}

void ControlServer::serve(const std::vector<pollfd> &fds, size_t first)
{
    size_t i = first;
    for (const auto &l : listeners_)
        if (fds[i++].revents & POLLIN)
            accept_all(l);
    // Only the connections that were polled: accept_all appended new ones after them.
    auto it = connections_.begin();
    for (; i < fds.size() && it != connections_.end(); i++, ++it) {
        if (it->closed || fds[i].fd != it->fd)
            continue;
        short re = fds[i].revents;
        if (!(re & (POLLIN | POLLOUT | POLLHUP | POLLERR)))
            continue;
        if (it->handshaking && !handshake(*it))
            continue;
        if (it->handshaking)
            continue;  // more of the handshake to come
        if (!it->out.empty())
            write_to(*it);
        else
            read_from(*it);
    }
    expire(Clock::now());
    connections_.remove_if([](const Connection &c) { return c.closed; });
}

void ControlServer::accept_all(const Listener &l)
{
    for (;;) {
        int fd = accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;  // EAGAIN, or a connection reset before we got to it
        count(ControlEvent::accepted);
        size_t open =
            static_cast<size_t>(std::count_if(connections_.begin(), connections_.end(),
                                              [](const Connection &c) { return !c.closed; }));
        if (open >= limits_.max_connections) {
            // Make room by closing the oldest connection that is not mid-request; without one,
            // the newcomer waits for nobody: it is closed.
            auto idle = std::find_if(connections_.begin(), connections_.end(),
                                     [](const auto &c) { return !c.closed && !c.busy(); });
            count(ControlEvent::over_limit);
            if (idle == connections_.end()) {
                close(fd);
                continue;
            }
            close_connection(*idle);
        }
        auto now = Clock::now();
        Connection &c = connections_.emplace_back();
        c.fd = fd;
        c.remote = l.remote;
        c.opened = c.last_activity = now;
        if (l.tls) {
            c.ssl.reset(SSL_new(l.tls.get()));
            if (!c.ssl || SSL_set_fd(c.ssl.get(), fd) != 1) {
                tls::last_error();
                close_connection(c);
                continue;
            }
            SSL_set_accept_state(c.ssl.get());
            c.handshaking = true;  // the request timeout runs from here
        }
    }
}

bool ControlServer::handshake(Connection &c)
{
    int r = SSL_do_handshake(c.ssl.get());
    if (r == 1) {
        c.handshaking = c.wants_write = false;
        c.opened = c.last_activity = Clock::now();
        return true;
    }
    int err = SSL_get_error(c.ssl.get(), r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        c.wants_write = err == SSL_ERROR_WANT_WRITE;
        return true;
    }
    // Not TLS, a certificate refused, a peer gone: nothing was read as a request.
    spdlog::debug("control: TLS handshake failed: {}", tls::last_error());
    count(ControlEvent::tls_failed);
    close_connection(c);
    return false;
}

ssize_t ControlServer::receive(Connection &c, char *buf, size_t len)
{
    if (!c.ssl) {
        ssize_t n = recv(c.fd, buf, len, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        return n > 0 ? n : -1;
    }
    int n = SSL_read(c.ssl.get(), buf, static_cast<int>(len));
    if (n > 0)
        return n;
    int err = SSL_get_error(c.ssl.get(), n);
    c.wants_write = err == SSL_ERROR_WANT_WRITE;
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return 0;
    tls::last_error();
    return -1;
}

ssize_t ControlServer::transmit(Connection &c, const char *buf, size_t len)
{
    if (!c.ssl) {
        ssize_t n = send(c.fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        return n > 0 ? n : -1;
    }
    int n = SSL_write(c.ssl.get(), buf, static_cast<int>(len));
    if (n > 0)
        return n;
    int err = SSL_get_error(c.ssl.get(), n);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return 0;
    tls::last_error();
    return -1;
}

void ControlServer::read_from(Connection &c)
{
    char buf[16384];
    for (;;) {
        ssize_t n = receive(c, buf, sizeof(buf));
        if (n > 0) {
            if (c.in.empty())
                c.opened = Clock::now();  // the request's clock starts at its first byte
            c.in.append(buf, static_cast<size_t>(n));
            c.last_activity = Clock::now();
            handle_lines(c);
            if (c.closed || !c.out.empty())
                return;  // the reply goes first; the rest of the input waits for it
            continue;
        }
        if (n == 0)
            return;
        // End of stream or an error: whatever complete request came was served; a partial line
        // is dropped, having changed nothing.
        close_connection(c);
        return;
    }
}

void ControlServer::handle_lines(Connection &c)
{
    size_t nl;
    while (c.out.empty() && !c.closing && (nl = c.in.find('\n')) != std::string::npos) {
        if (nl > kMaxRequestBytes)
            break;
        ControlReply reply = handler_(c.in.substr(0, nl), c.remote);
        c.in.erase(0, nl + 1);
        if (reply.unauthorized) {
            count(ControlEvent::unauthorized);
            c.closing = true;
            c.in.clear();
            if (!allow_unauthorized_reply(Clock::now())) {
                count(ControlEvent::unauthorized_silent);
                close_connection(c);
                return;
            }
        }
        c.out = std::move(reply.text) + "\n";
        write_to(c);
        if (c.closed)
            return;
    }
    if (c.out.empty() && !c.closing && c.in.size() > kMaxRequestBytes &&
        c.in.find('\n') > kMaxRequestBytes) {
        count(ControlEvent::oversized);
        c.in.clear();
        c.closing = true;
        c.out = oversized_reply() + "\n";
        write_to(c);
    }
}

void ControlServer::write_to(Connection &c)
{
    while (!c.out.empty()) {
        ssize_t n = transmit(c, c.out.data(), c.out.size());
        if (n > 0) {
            c.out.erase(0, static_cast<size_t>(n));
            c.last_activity = Clock::now();
            continue;
        }
        if (n == 0) {
            if (c.out.size() > limits_.max_reply_backlog) {
                count(ControlEvent::reply_overflow);
                close_connection(c);
            }
            return;
        }
        close_connection(c);  // EPIPE, ECONNRESET: the client is gone, the request was applied
        return;
    }
    if (c.closing) {
        close_connection(c);
        return;
    }
    c.opened = Clock::now();
    handle_lines(c);  // requests that came behind the one just answered
    // TLS may hold decrypted bytes the socket will not signal again.
    if (!c.closed && c.out.empty() && c.ssl && SSL_pending(c.ssl.get()) > 0)
        read_from(c);
}

void ControlServer::expire(Clock::time_point now)
{
    for (auto &c : connections_) {
        if (c.closed)
            continue;
        bool mid_request = c.busy();
        if ((mid_request && now - c.opened > limits_.request_timeout) ||
            (!mid_request && now - c.last_activity > limits_.idle_timeout)) {
            count(ControlEvent::timed_out);
            close_connection(c);
        }
    }
}

int ControlServer::next_deadline_ms() const
{
    auto now = Clock::now();
    auto next = Clock::time_point::max();
    for (const auto &c : connections_) {
        if (c.closed)
            continue;
        bool mid_request = c.busy();
        next = std::min(next, mid_request ? c.opened + limits_.request_timeout
                                          : c.last_activity + limits_.idle_timeout);
    }
    if (next == Clock::time_point::max())
        return -1;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
    return static_cast<int>(std::clamp<int64_t>(ms, 0, 60000));
}

// A token bucket: a peer that guesses tokens gets a refusal now and then, and closed
// connections otherwise, for no more work than accept and close.
bool ControlServer::allow_unauthorized_reply(Clock::time_point now)
{
    double elapsed = std::chrono::duration<double>(now - refusal_refill_).count();
    refusal_refill_ = now;
    refusal_tokens_ = std::min(limits_.unauthorized_burst,
                               refusal_tokens_ + elapsed * limits_.unauthorized_per_second);
    if (refusal_tokens_ < 1)
        return false;
    refusal_tokens_ -= 1;
    return true;
}

void ControlServer::close_connection(Connection &c)
{
    if (c.closed)
        return;
    if (c.ssl && !c.handshaking)
        SSL_shutdown(c.ssl.get());  // close_notify, best effort: never waited for
    c.ssl.reset();
    close(c.fd);
    c.closed = true;
    c.in.clear();
    c.out.clear();
}

}  // namespace xagg::daemon
