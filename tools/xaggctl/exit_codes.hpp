// SPDX-License-Identifier: MIT
// xaggctl's exit codes: what a script needs to tell apart without parsing messages. Documented
// in docs/XAGGCTL.md; the numbers never change meaning.
#pragma once

#include "lib/control/control_client.hpp"

namespace xagg::ctl {

enum ExitCode : int {
    kOk = 0,
    kUsage = 1,          // bad command line
    kUnreachable = 2,    // no daemon at the socket or address (or no reply in time)
    kRefused = 3,        // the daemon refused the request (no such job, bad value, ...)
    kPermission = 4,     // not allowed to open the control socket
    kUnauthorized = 5,   // TCP: missing or wrong token
    kConfigInvalid = 6,  // `config check` found problems
    kProtocol = 7,       // the reply was not the control API's (wrong port, version skew)
    kForbidden = 8,      // TCP: a tenant's token asked beyond its own jobs
};

// The exit code of each way a request to the daemon can fail.
constexpr ExitCode exit_code(control::Failure f)
{
    switch (f) {
    case control::Failure::usage: return kUsage;
    case control::Failure::unreachable: return kUnreachable;
    case control::Failure::refused: return kRefused;
    case control::Failure::permission: return kPermission;
    case control::Failure::unauthorized: return kUnauthorized;
    case control::Failure::protocol: return kProtocol;
    case control::Failure::forbidden: return kForbidden;
    }
    return kProtocol;
}

}  // namespace xagg::ctl
