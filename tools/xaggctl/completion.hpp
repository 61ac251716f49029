// SPDX-License-Identifier: MIT
// Bash completion generated from the CLI11 definition itself, so it cannot drift from the
// commands: `xaggctl completion bash` prints it, and the build installs its output.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace xagg::ctl {

// A bash script defining and registering the completion function for `program`: subcommands and
// long options at each level of the command tree, the choices of options that have a fixed set
// (CLI::IsMember), and file names for options whose type is PATH.
std::string bash_completion(const CLI::App &app, const std::string &program);

}  // namespace xagg::ctl
