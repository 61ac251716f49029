// SPDX-License-Identifier: MIT
// One request to xaggd's control API and its reply, over the Unix socket or TCP with a token.
// Used by xaggctl and by the worker client library. Every failure becomes a ControlError: what
// kind of failure (xaggctl's exit code, the client's error kind) and one line saying what to do.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "xagg/api.hpp"
#include "xagg/control_tls.hpp"

namespace xagg::control {

enum class Failure {
    usage,         // the endpoint itself is malformed (e.g. --host without a port)
    unreachable,   // no daemon at the socket or address, or no reply in time
    refused,       // the daemon refused the request (no such job, bad value, ...)
    permission,    // not allowed to open the control socket
    unauthorized,  // TCP: missing or wrong token
    forbidden,     // TCP: a tenant's token, for another tenant's job or a node-wide request
    protocol,      // the reply was not the control API's
};

class ControlError : public std::runtime_error {
public:
    ControlError(Failure failure, const std::string &message,
                 std::optional<api::Refusal> refusal = std::nullopt)
        : std::runtime_error(message), failure_(failure), refusal_(refusal)
    {
    }
    Failure failure() const { return failure_; }
    // Failure::refused and unauthorized: the daemon's code for it (nullopt: a code this build
    // does not know).
    std::optional<api::Refusal> refusal() const { return refusal_; }

private:
    Failure failure_;
    std::optional<api::Refusal> refusal_;
};

struct Endpoint {
    std::string socket_path = api::kDefaultControlSocket;
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
    // A typed request (xagg/api.hpp) and its typed reply; a reply that does not read as one is
    // a Failure::protocol.
    template <typename Reply, typename Request>
    Reply call_as(const Request &request) const
    {
        const nlohmann::json reply = call(nlohmann::json(request));
        try {
            return reply.get<Reply>();
        } catch (const nlohmann::json::exception &e) {
            throw ControlError(Failure::protocol, "the reply from " + endpoint_.where() +
                                                      " lacks what this client reads: " + e.what());
        }
    }

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
