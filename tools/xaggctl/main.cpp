// SPDX-License-Identifier: MIT
// xaggctl: the operator's command line for xaggd (docs/XAGGCTL.md).
#include <CLI/CLI.hpp>
#include <iostream>

#include "tools/xaggctl/commands.hpp"
#include "tools/xaggctl/exit_codes.hpp"

int main(int argc, char **argv)
{
    using namespace xagg::ctl;
    auto cli = make_cli();
    try {
        cli->app->parse(argc, argv);
    } catch (const CLI::CallForHelp &e) {
        return cli->app->exit(e);
    } catch (const CLI::CallForAllHelp &e) {
        return cli->app->exit(e);
    } catch (const CLI::ParseError &e) {
        cli->app->exit(e);
        return kUsage;
    }
    try {
        return cli->action();
    } catch (const xagg::control::ControlError &e) {
        std::cerr << "xaggctl: " << e.what() << "\n";
        return exit_code(e.failure());
    }
}
