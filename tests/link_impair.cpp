// SPDX-License-Identifier: MIT
// xagg-link-impair: a bad link for tests, in userspace, because this kernel has no netem
// (CONFIG_NET_SCH_NETEM is off). Forwards every Ethernet frame between two interfaces (raw
// AF_PACKET sockets, both directions), dropping, duplicating and delaying a random share of them;
// a delayed frame is overtaken by the frames behind it, which is reordering.
//
//   xagg-link-impair --netns NS --a IF --b IF [--loss P] [--duplicate P] [--reorder P]
//                    [--delay-us D] [--seed S]
//
// Probabilities are in percent. Runs until SIGTERM/SIGINT, then prints what it did as JSON.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "lib/sys/netns.hpp"

namespace {

using Clock = std::chrono::steady_clock;
volatile sig_atomic_t stop = 0;

int open_raw(const std::string &ifname)
{
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
    if (fd < 0)
        throw std::system_error(errno, std::generic_category(), "AF_PACKET socket");
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    if (sll.sll_ifindex == 0 || bind(fd, reinterpret_cast<sockaddr *>(&sll), sizeof(sll)) != 0)
        throw std::system_error(errno, std::generic_category(), "binding to " + ifname);
    int one = 1, buffer = 8 << 20;
    // Our own transmissions on the other side must not come back in as arrivals.
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof(buffer));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buffer, sizeof(buffer));
    return fd;
}

struct Stats {
    uint64_t forwarded = 0, dropped = 0, duplicated = 0, delayed = 0;
};

struct Held {
    Clock::time_point release;
    int out_fd;
    std::vector<uint8_t> frame;
};

}  // namespace

int main(int argc, char **argv)
{
    std::string netns, a, b;
    double loss = 0, duplicate = 0, reorder = 0;
    unsigned delay_us = 2000;
    uint64_t seed = 1;
    CLI::App app("xagg-link-impair: a lossy, duplicating, reordering link between two interfaces");
    app.add_option("--netns", netns, "Namespace both interfaces are in");
    app.add_option("--a", a, "One side")->required();
    app.add_option("--b", b, "The other side")->required();
    app.add_option("--loss", loss, "Percent of frames dropped");
    app.add_option("--duplicate", duplicate, "Percent of frames sent twice");
    app.add_option("--reorder", reorder, "Percent of frames held back by --delay-us");
    app.add_option("--delay-us", delay_us, "How long a reordered frame is held");
    app.add_option("--seed", seed, "Random seed");
    CLI11_PARSE(app, argc, argv);

    signal(SIGTERM, [](int) { stop = 1; });
    signal(SIGINT, [](int) { stop = 1; });
    if (!netns.empty())
        xagg::sys::enter_netns(netns);
    int fa = open_raw(a), fb = open_raw(b);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> percent(0, 100);
    Stats stats;
    std::deque<Held> held;  // release times grow with arrival: a FIFO
    std::vector<uint8_t> frame(65536);

    auto forward = [&](int out, const uint8_t *data, size_t len) {
        if (percent(rng) < loss) {
            stats.dropped++;
            return;
        }
        int copies = percent(rng) < duplicate ? 2 : 1;
        stats.duplicated += copies - 1;
        for (int c = 0; c < copies; c++) {
            if (percent(rng) < reorder) {
                stats.delayed++;
                held.push_back({Clock::now() + std::chrono::microseconds(delay_us), out,
                                std::vector<uint8_t>(data, data + len)});
            } else {
                stats.forwarded += send(out, data, len, 0) == static_cast<ssize_t>(len);
            }
        }
    };

    while (!stop) {
        int timeout_ms = 10;
        if (!held.empty()) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(held.front().release -
                                                                              Clock::now());
            timeout_ms = std::max(0, static_cast<int>(left.count()));
        }
        pollfd fds[2] = {{fa, POLLIN, 0}, {fb, POLLIN, 0}};
        poll(fds, 2, timeout_ms);
        for (int side = 0; side < 2; side++) {
            if (!(fds[side].revents & POLLIN))
                continue;
            int in = side ? fb : fa, out = side ? fa : fb;
            for (int i = 0; i < 256; i++) {
                ssize_t n = recv(in, frame.data(), frame.size(), 0);
                if (n <= 0)
                    break;
                forward(out, frame.data(), static_cast<size_t>(n));
            }
        }
        while (!held.empty() && held.front().release <= Clock::now()) {
            Held &h = held.front();
            stats.forwarded += send(h.out_fd, h.frame.data(), h.frame.size(), 0) ==
                               static_cast<ssize_t>(h.frame.size());
            held.pop_front();
        }
    }
    std::printf(
        "{\"forwarded\":%lu,\"dropped\":%lu,\"duplicated\":%lu,\"delayed\":%lu}\n",
        static_cast<unsigned long>(stats.forwarded), static_cast<unsigned long>(stats.dropped),
        static_cast<unsigned long>(stats.duplicated), static_cast<unsigned long>(stats.delayed));
    return 0;
}
