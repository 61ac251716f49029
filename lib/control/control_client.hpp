// SPDX-License-Identifier: MIT
// One request to xaggd's control API and its reply, over the Unix socket or TCP with a token.
// Used by xaggctl and by the worker client library. Every failure becomes a ControlError: what
// kind of failure (xaggctl's exit code, the client's error kind) and one line saying what to do.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "xagg/control_tls.hpp"

namespace xagg::control {

enum class Failure {
    usage,         // the endpoint itself is malformed (e.g. --host without a port)
    unreachable,   // no daemon at the socket or address, or no reply in time
    refused,       // the daemon refused the request (no such job, bad value, ...)
    permission,    // not allowed to open the control socket
    unauthorized,  // TCP: missing or wrong token
    protocol,      // the reply was not the control API's
};

class ControlError : public std::runtime_error {
public:
    ControlError(Failure failure, const std::string &message)
        : std::runtime_error(message), failure_(failure)
    {
    }
    Failure failure() const { return failure_; }

private:
    Failure failure_;
};

struct Endpoint {
    std::string socket_path = "/run/xagg/xaggd.sock";
    std::string host;   // HOST:PORT of control_tcp_address; when set, used instead of the socket
    std::string token;  // sent with every request over TCP
    ControlTls tls;     // how TCP is secured
    std::chrono::milliseconds timeout{5000};  // to connect, and again to get the reply

    // How the endpoint is named in messages.
    std::string where() const { return host.empty() ? socket_path : "tcp " + host; }
};

class ControlClient {
public:
    explicit ControlClient(Endpoint endpoint) : endpoint_(std::move(endpoint)) {}

    // Sends the request and returns the reply of a request the daemon accepted (without "ok").
    // Throws ControlError for anything else.
    nlohmann::json call(nlohmann::json request) const;

    const Endpoint &endpoint() const { return endpoint_; }

private:
    int connect_unix() const;
    int connect_tcp() const;
    std::string exchange(int fd, const std::string &line) const;
    std::string exchange_tls(int fd, const std::string &line) const;

    Endpoint endpoint_;
};

// The reply line's meaning: accepted (returned), refused or not understood (thrown).
nlohmann::json interpret_reply(const std::string &line, const Endpoint &endpoint);

}  // namespace xagg::control
