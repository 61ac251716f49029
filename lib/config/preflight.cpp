// SPDX-License-Identifier: MIT
#include "lib/config/preflight.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "lib/sys/mtu.hpp"
#include "lib/sys/netns.hpp"
#include "lib/tls/tls.hpp"

namespace xagg::daemon {
namespace {

// Why `key`'s HOST:PORT cannot be bound here, or "": the host must be an IPv4 address of this
// host (or 0.0.0.0), which binding it to port 0 shows without taking the port itself (xaggd may
// hold it already).
std::string bind_problem(const std::string &key, const std::string &address)
{
    const auto colon = address.rfind(':');
    if (colon == std::string::npos)
        return key + " = " + address + ": not HOST:PORT";
    const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
    char *end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535)
        return key + " = " + address + ": the port must be 1-65535";
    sockaddr_in a{};
    a.sin_family = AF_INET;
    if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1)
        return key + " = " + address + ": the host must be an IPv4 address";
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return "";  // nothing to learn here
    const int rc = bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a));
    const int err = errno;
    close(fd);
    if (rc != 0)
        return key + " = " + address + ": cannot listen on " + host + " here (" +
               std::strerror(err) + "): not an address of this host?";
    return "";
}

}  // namespace

std::vector<std::string> check_host(const Config &c)
{
    std::vector<std::string> problems;
    if (std::string p = sys::chunk_mtu_problem(c.interface); !p.empty())
        problems.push_back(p);
    else if (c.default_chunk_elems == std::to_string(XAGG_JUMBO_CHUNK_ELEMS))
        if (std::string jumbo = sys::chunk_mtu_problem(c.interface, XAGG_JUMBO_MIN_MTU);
            !jumbo.empty())
            problems.push_back("default_chunk_elems = " + c.default_chunk_elems +
                               ", but this node cannot serve jumbo chunks: " + jumbo +
                               " (or default_chunk_elems = auto)");
    if (!c.metrics_address.empty())
        if (std::string p = bind_problem("metrics_address", c.metrics_address); !p.empty())
            problems.push_back(p);
    if (!c.control_tcp_address.empty()) {
        if (std::string p = bind_problem("control_tcp_address", c.control_tcp_address); !p.empty())
            problems.push_back(p);
        if (!c.control_tcp_plaintext) {
            try {
                tls::server_context(c.control_tls_cert, c.control_tls_key, c.control_tls_client_ca);
            } catch (const std::exception &e) {
                problems.push_back(std::string("control_tls_cert/control_tls_key: ") + e.what());
            }
        }
    }
    return problems;
}

std::string enter_config_netns(const Config &config)
{
    if (config.netns.empty())
        return "";
    try {
        sys::enter_netns(config.netns);
        return "";
    } catch (const std::exception &e) {
        return "netns = " + config.netns + ": " + e.what();
    }
}

std::vector<std::string> validate_for_start(const std::string &path)
{
    Config config;
    auto problems = validate_config_file(path, &config);
    if (!problems.empty())
        return problems;
    if (std::string problem = enter_config_netns(config); !problem.empty())
        return {problem};
    return check_host(config);
}

}  // namespace xagg::daemon
