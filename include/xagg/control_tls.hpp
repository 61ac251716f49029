// SPDX-License-Identifier: MIT
// How a client secures a control connection over TCP (xaggd's control_tcp_address): TLS, with
// the daemon's certificate checked against a CA and the host name (or IP address) connected to,
// unless the daemon serves plain TCP (control_tcp_plaintext) and the client says so too. Shared
// by xaggctl, the client library and its front ends.
#pragma once

#include <string>

namespace xagg {

struct ControlTls {
    std::string ca_file;     // PEM CA that signed the daemon's certificate; empty: the system's
    std::string cert_file;   // this client's PEM certificate, for a daemon that asks for one
    std::string key_file;    // its PEM key (empty: in cert_file)
    bool plaintext = false;  // no TLS: the token travels in clear
};

}  // namespace xagg
