// SPDX-License-Identifier: MIT
#include "lib/control/control_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lib/tls/tls.hpp"

namespace xagg::control {
namespace {

using nlohmann::json;

// Closes the descriptor however the exchange ends.
class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd()
    {
        if (fd_ >= 0)
            close(fd_);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

// Waits for `events` on fd; false on timeout.
bool wait_for(int fd, short events, std::chrono::milliseconds timeout)
{
    pollfd p{fd, events, 0};
    int n;
    do {
        n = poll(&p, 1, static_cast<int>(timeout.count()));
    } while (n < 0 && errno == EINTR);
    return n > 0;
}

std::string seconds(std::chrono::milliseconds t)
{
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g s", static_cast<double>(t.count()) / 1000.0);
    return buf;
}

}  // namespace

json ControlClient::call(json request) const
{
    if (!endpoint_.host.empty())
        request["token"] = endpoint_.token;
    Fd fd(endpoint_.host.empty() ? connect_unix() : connect_tcp());
    const std::string line = request.dump() + "\n";
    if (endpoint_.host.empty() || endpoint_.tls.plaintext)
        return interpret_reply(exchange(fd.get(), line), endpoint_);
    return interpret_reply(exchange_tls(fd.get(), line), endpoint_);
}

namespace {

// OpenSSL writes to the socket without MSG_NOSIGNAL: a daemon that closes the connection early
// would end the calling process (a training job) with SIGPIPE. Blocked on this thread while
// TLS writes, and a SIGPIPE raised meanwhile taken off again.
class NoSigpipe {
public:
    NoSigpipe()
    {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        sigpending(&pending_before_);
        pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    }
    ~NoSigpipe()
    {
        sigset_t pending;
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE) && !sigismember(&pending_before_, SIGPIPE)) {
            timespec zero{};
            sigtimedwait(&pipe_, nullptr, &zero);
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    NoSigpipe(const NoSigpipe &) = delete;
    NoSigpipe &operator=(const NoSigpipe &) = delete;

private:
    sigset_t pipe_, old_, pending_before_;
};

}  // namespace

std::string ControlClient::exchange_tls(int fd, const std::string &line) const
{
    const std::string where = endpoint_.where();
    tls::Context ctx;
    try {
        ctx = tls::client_context(endpoint_.tls.ca_file, endpoint_.tls.cert_file,
                                  endpoint_.tls.key_file);
    } catch (const tls::TlsError &e) {
        throw ControlError(Failure::usage, e.what());
    }
    tls::Connection ssl(SSL_new(ctx.get()));
    if (!ssl || SSL_set_fd(ssl.get(), fd) != 1)
        throw ControlError(Failure::unreachable, "TLS: " + tls::last_error());
    // The certificate must name what we connected to: a host name, or an IP address.
    std::string host = endpoint_.host.substr(0, endpoint_.host.rfind(':'));
    if (host.size() > 2 && host.front() == '[')
        host = host.substr(1, host.size() - 2);
    in6_addr ip{};
    if (inet_pton(AF_INET, host.c_str(), &ip) == 1 || inet_pton(AF_INET6, host.c_str(), &ip) == 1)
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), host.c_str());
    else {
        SSL_set_tlsext_host_name(ssl.get(), host.c_str());
        SSL_set1_host(ssl.get(), host.c_str());
    }
    // The socket is blocking: each read and write waits at most the timeout.
    timeval tv{};
    tv.tv_sec = endpoint_.timeout.count() / 1000;
    tv.tv_usec = (endpoint_.timeout.count() % 1000) * 1000;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    NoSigpipe guard;
    if (SSL_connect(ssl.get()) != 1) {
        long verify = SSL_get_verify_result(ssl.get());
        std::string why =
            verify != X509_V_OK ? X509_verify_cert_error_string(verify) : tls::last_error();
        throw ControlError(
            Failure::unreachable,
            "TLS handshake with xaggd at " + where + " failed (" +
                (why.empty() ? std::string("connection closed") : why) +
                "): pass the CA of its control_tls_cert with --ca FILE (and a client "
                "certificate with --cert/--key if it sets control_tls_client_ca); --plaintext "
                "only for a daemon with control_tcp_plaintext = true");
    }
    for (size_t sent = 0; sent < line.size();) {
        int n = SSL_write(ssl.get(), line.data() + sent, static_cast<int>(line.size() - sent));
        if (n <= 0)
            throw ControlError(
                Failure::unreachable,
                "xaggd at " + where + " closed the connection: " + tls::last_error());
        sent += static_cast<size_t>(n);
    }
    std::string reply;
    char buf[4096];
    while (reply.find('\n') == std::string::npos) {
        int n = SSL_read(ssl.get(), buf, sizeof(buf));
        if (n <= 0) {
            int err = SSL_get_error(ssl.get(), n);
            if (err == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))
                throw ControlError(Failure::unreachable,
                                   "no reply from xaggd at " + where + " within " +
                                       seconds(endpoint_.timeout) +
                                       ": is it overloaded or stopped? (--timeout)");
            // With TLS 1.3 the daemon checks a client certificate after the client's side of
            // the handshake is done: its refusal arrives as an alert here.
            if (err == SSL_ERROR_SSL)
                throw ControlError(Failure::unreachable,
                                   "TLS with xaggd at " + where + " failed (" + tls::last_error() +
                                       "): a daemon with control_tls_client_ca wants a client "
                                       "certificate it trusts (--cert FILE --key FILE)");
            throw ControlError(Failure::protocol,
                               "xaggd at " + where + " closed the connection without a reply");
        }
        reply.append(buf, static_cast<size_t>(n));
    }
    SSL_shutdown(ssl.get());
    return reply.substr(0, reply.find('\n'));
}

int ControlClient::connect_unix() const
{
    const std::string &path = endpoint_.socket_path;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path))
        throw ControlError(Failure::usage,
                           "--socket " + path + " is too long for a Unix socket path");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        throw ControlError(Failure::unreachable, std::string("socket: ") + std::strerror(errno));
    if (connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0)
        return fd;
    int err = errno;
    close(fd);
    if (err == EACCES || err == EPERM)
        throw ControlError(Failure::permission,
                           "permission denied on " + path +
                               ": run xaggctl as root, or as a user of the socket's group (xaggd's "
                               "control_socket_mode decides who may)");
    throw ControlError(Failure::unreachable,
                       "cannot reach xaggd at " + path + " (" + std::strerror(err) +
                           "): is it running? (systemctl status xaggd) If it uses "
                           "another control_socket, pass --socket PATH");
}

int ControlClient::connect_tcp() const
{
    const std::string &hp = endpoint_.host;
    size_t colon = hp.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == hp.size())
        throw ControlError(Failure::usage, "--host " + hp + ": expected HOST:PORT");
    std::string host = hp.substr(0, colon), port = hp.substr(colon + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    if (int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &found))
        throw ControlError(Failure::unreachable, "cannot resolve " + hp + ": " + gai_strerror(e));
    std::string last = "no address";
    for (addrinfo *ai = found; ai; ai = ai->ai_next) {
        int fd =
            socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0)
            continue;
        int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (r != 0 && errno == EINPROGRESS) {
            if (wait_for(fd, POLLOUT, endpoint_.timeout)) {
                int err = 0;
                socklen_t len = sizeof(err);
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                errno = err;
                r = err ? -1 : 0;
            } else {
                errno = ETIMEDOUT;
            }
        }
        if (r == 0) {
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            freeaddrinfo(found);
            return fd;
        }
        last = std::strerror(errno);
        close(fd);
    }
    freeaddrinfo(found);
    throw ControlError(Failure::unreachable,
                       "cannot reach xaggd at " + hp + " (" + last +
                           "): is it running there with control_tcp_address set, "
                           "and is the port open?");
}

std::string ControlClient::exchange(int fd, const std::string &line) const
{
    for (size_t sent = 0; sent < line.size();) {
        ssize_t n = send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            throw ControlError(Failure::unreachable,
                               "xaggd at " + endpoint_.where() +
                                   " closed the connection: " + std::strerror(errno));
        sent += static_cast<size_t>(n);
    }
    std::string reply;
    char buf[4096];
    auto deadline = std::chrono::steady_clock::now() + endpoint_.timeout;
    while (reply.find('\n') == std::string::npos) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0 || !wait_for(fd, POLLIN, left))
            throw ControlError(Failure::unreachable,
                               "no reply from xaggd at " + endpoint_.where() + " within " +
                                   seconds(endpoint_.timeout) +
                                   ": is it overloaded or stopped? (--timeout)");
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            throw ControlError(Failure::protocol, "xaggd at " + endpoint_.where() +
                                                      " closed the connection without a reply");
        reply.append(buf, static_cast<size_t>(n));
    }
    return reply.substr(0, reply.find('\n'));
}

json interpret_reply(const std::string &line, const Endpoint &endpoint)
{
    json reply = json::parse(line, nullptr, false);
    if (reply.is_discarded() || !reply.is_object() || !reply.contains("ok") ||
        !reply["ok"].is_boolean())
        throw ControlError(Failure::protocol, "the reply from " + endpoint.where() +
                                                  " is not xaggd's control API; is that the right "
                                                  "socket or port?");
    if (reply["ok"].get<bool>()) {
        reply.erase("ok");
        return reply;
    }
    const std::string error = reply.value("error", std::string("no reason given"));
    const std::optional<api::Refusal> code = api::refusal_named(reply.value("code", ""));
    if (code == api::Refusal::bad_token)
        throw ControlError(Failure::unauthorized,
                           "xaggd at " + endpoint.where() + " refused the token (" + error +
                               "): pass the first line of its control_token_file with --token-file "
                               "FILE, --token or XAGG_TOKEN",
                           code);
    if (code == api::Refusal::forbidden)
        throw ControlError(
            Failure::forbidden,
            "xaggd refused: " + error + " (a tenant's token reaches only that tenant's jobs)",
            code);
    throw ControlError(Failure::refused, "xaggd refused: " + error, code);
}

}  // namespace xagg::control
