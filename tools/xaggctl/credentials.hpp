// SPDX-License-Identifier: MIT
// xaggctl's credential verbs: `tls init` makes what the TCP control API needs (a CA, xaggd's
// certificate with the addresses workers connect to, the admin token, tenant tokens, client
// certificates); `token tenant` and `token revoke` manage tenant tokens afterwards. They work on
// files only and never talk to a daemon: `systemctl reload xaggd` applies them.
#pragma once

#include "tools/xaggctl/commands.hpp"

namespace xagg::ctl {

void add_tls(CLI::App &app, Cli &cli);
void add_token(CLI::App &app, Cli &cli);

}  // namespace xagg::ctl
