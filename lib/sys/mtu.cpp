// SPDX-License-Identifier: MIT
#include "lib/sys/mtu.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "xagg/proto.h"

namespace xagg::sys {

std::optional<int> interface_mtu(const std::string &ifname)
{
    ifreq req{};
    if (ifname.empty() || ifname.size() >= sizeof(req.ifr_name))
        return std::nullopt;
    std::memcpy(req.ifr_name, ifname.c_str(), ifname.size());
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return std::nullopt;
    int got = ioctl(fd, SIOCGIFMTU, &req);
    close(fd);
    if (got != 0)
        return std::nullopt;
    return req.ifr_mtu;
}

std::optional<std::string> interface_with_address(in_addr addr)
{
    ifaddrs *all = nullptr;
    if (getifaddrs(&all) != 0)
        return std::nullopt;
    std::optional<std::string> name;
    for (ifaddrs *a = all; a && !name; a = a->ifa_next)
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET &&
            reinterpret_cast<sockaddr_in *>(a->ifa_addr)->sin_addr.s_addr == addr.s_addr)
            name = a->ifa_name;
    freeifaddrs(all);
    return name;
}

std::string chunk_mtu_problem(const std::string &ifname, int min_mtu)
{
    std::optional<int> mtu = interface_mtu(ifname);
    if (!mtu || *mtu >= min_mtu)
        return {};
    return "interface " + ifname + " has MTU " + std::to_string(*mtu) + "; " +
           (min_mtu > XAGG_MIN_MTU ? "a job of jumbo chunks needs " : "xagg's frames need ") +
           "at least " + std::to_string(min_mtu) + " (ip link set dev " + ifname +
           " mtu 9000, and the same on every link between workers and aggregator)";
}

}  // namespace xagg::sys
