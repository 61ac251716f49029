// SPDX-License-Identifier: MIT
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "lib/config/config.hpp"
#include "lib/config/preflight.hpp"
#include "daemon/server.hpp"

int main(int argc, char **argv)
{
    xagg::daemon::Config config;
    auto app = xagg::daemon::make_cli(config);
    // A bad config line is reported with its file and line before anything else happens.
    for (int i = 1; i + 1 < argc; i++)
        if (std::string(argv[i]) == "--config") {
            auto problems = xagg::daemon::check_config_file(argv[i + 1]);
            for (const auto &p : problems)
                spdlog::error("{}", p);
            if (!problems.empty())
                return 1;
            config.config_file = argv[i + 1];
        }
    CLI11_PARSE(*app, argc, argv);
    // The whole config, then this host (the checks `xaggctl config check` makes too): every
    // problem said at once, before anything is attached or bound.
    auto problems = xagg::daemon::check_config(config);
    if (problems.empty())
        if (std::string p = xagg::daemon::enter_config_netns(config); !p.empty())
            problems.push_back(p);
    if (problems.empty())
        problems = xagg::daemon::check_host(config);
    for (const auto &p : problems)
        spdlog::error("{}", p);
    if (!problems.empty())
        return 1;
    try {
        return xagg::daemon::run(config);
    } catch (const std::exception &e) {
        spdlog::error("{}", e.what());
        return 1;
    }
}
