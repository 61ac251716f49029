// SPDX-License-Identifier: MIT
// One request to xaggd's control API and its reply, over the Unix socket or TCP with a token.
// Every failure becomes a CtlError: the exit code a script sees and one line saying what to do.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "exit_codes.hpp"

namespace xagg::ctl {

class CtlError : public std::runtime_error {
public:
    CtlError(ExitCode code, const std::string &message) : std::runtime_error(message), code_(code)
    {
    }
    ExitCode code() const { return code_; }

private:
    ExitCode code_;
};

struct Endpoint {
    std::string socket_path = "/run/xagg/xaggd.sock";
    std::string host;   // HOST:PORT of control_tcp_address; when set, used instead of the socket
    std::string token;  // sent with every request over TCP
    std::chrono::milliseconds timeout{5000};  // to connect, and again to get the reply

    // How the endpoint is named in messages.
    std::string where() const { return host.empty() ? socket_path : "tcp " + host; }
};

class ApiClient {
public:
    explicit ApiClient(Endpoint endpoint) : endpoint_(std::move(endpoint)) {}

    // Sends the request and returns the reply of a request the daemon accepted (without "ok").
    // Throws CtlError for anything else.
    nlohmann::json call(nlohmann::json request) const;

    const Endpoint &endpoint() const { return endpoint_; }

private:
    int connect_unix() const;
    int connect_tcp() const;
    std::string exchange(int fd, const std::string &line) const;

    Endpoint endpoint_;
};

// The reply line's meaning: accepted (returned), refused or not understood (thrown).
nlohmann::json interpret_reply(const std::string &line, const Endpoint &endpoint);

}  // namespace xagg::ctl
