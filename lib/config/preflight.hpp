// SPDX-License-Identifier: MIT
// What xaggd checks against the host it runs on before it starts, beyond the config file itself:
// the interface's MTU, the TLS files, and that the addresses it binds are this host's. One
// function, called by xaggd at start and by `xaggctl config check`, so that the two cannot
// disagree about a config.
#pragma once

#include <string>
#include <vector>

#include "lib/config/config.hpp"

namespace xagg::daemon {

// The problems `config` would meet on this host, one line each; empty when xaggd can start.
// Run after check_config() found none. Reads the TLS files, binds nothing it keeps.
std::vector<std::string> check_host(const Config &config);

// Enters the config's `netns` (when it names one) for good, as xaggd runs there: the host
// checks are then that namespace's. The problem, or "".
std::string enter_config_netns(const Config &config);

// The whole check of a config file, as xaggd makes it before it starts: the file, line by line
// (check_config_file), the whole config (check_config), the token file, then this host
// (check_host), in the config's `netns` when it names one (entered for good, as xaggd enters
// it). Empty when the file is good.
std::vector<std::string> validate_for_start(const std::string &path);

}  // namespace xagg::daemon
