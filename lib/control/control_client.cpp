// SPDX-License-Identifier: MIT
#include "control_client.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
    return interpret_reply(exchange(fd.get(), request.dump() + "\n"), endpoint_);
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
    std::string error = reply.value("error", std::string("no reason given"));
    if (reply.value("code", std::string()) == "unauthorized")
        throw ControlError(Failure::unauthorized,
                           "xaggd at " + endpoint.where() + " refused the token (" + error +
                               "): pass the first line of its control_token_file with --token-file "
                               "FILE, --token or XAGG_TOKEN");
    throw ControlError(Failure::refused, "xaggd refused: " + error);
}

}  // namespace xagg::control
