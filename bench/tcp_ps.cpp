// SPDX-License-Identifier: MIT
// tcp_ps: the plain TCP parameter server xagg is measured against, made as fast as a fair
// baseline should be: one epoll loop on the server, large non-blocking reads and writes (the
// kernel's GSO/GRO and TCP do the batching), TCP_NODELAY, big socket buffers, and float sums
// in a vectorizable loop. Each round, every worker sends its whole float32 tensor; the server
// adds them as they arrive and, once all are in, sends the sum back to every worker.
//
//   tcp_ps --server --listen IP:PORT --workers W --elems N [--netns NS]
//   tcp_ps --connect IP:PORT --elems N --iterations I [--netns NS] [--json]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "lib/sys/netns.hpp"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string &what)
{
    throw std::system_error(errno, std::generic_category(), what);
}

sockaddr_in parse(const std::string &hp)
{
    sockaddr_in a{};
    a.sin_family = AF_INET;
    size_t colon = hp.rfind(':');
    a.sin_port = htons(static_cast<uint16_t>(std::stoul(hp.substr(colon + 1))));
    if (inet_pton(AF_INET, hp.substr(0, colon).c_str(), &a.sin_addr) != 1)
        throw std::runtime_error("not IPV4:PORT: " + hp);
    return a;
}

void tune(int fd)
{
    int one = 1, buffer = 8 << 20;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
}

// Blocking full write / read of `len` bytes (the worker side).
void write_all(int fd, const void *data, size_t len)
{
    auto p = static_cast<const char *>(data);
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n <= 0)
            fail("write");
        p += n;
        len -= static_cast<size_t>(n);
    }
}

void read_all(int fd, void *data, size_t len)
{
    auto p = static_cast<char *>(data);
    while (len) {
        ssize_t n = read(fd, p, len);
        if (n <= 0)
            fail("read");
        p += n;
        len -= static_cast<size_t>(n);
    }
}

struct Peer {
    int fd;
    size_t received = 0;  // bytes of this round's tensor
    size_t sent = 0;      // bytes of the sum sent back
    std::vector<float> in;
};

int serve(const std::string &listen_at, unsigned workers, size_t elems)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a = parse(listen_at);
    if (bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0 || listen(lfd, 64) != 0)
        fail("listen on " + listen_at);
    std::printf("ready\n");
    std::fflush(stdout);
    std::vector<Peer> peers;
    for (unsigned w = 0; w < workers; w++) {
        int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            fail("accept");
        tune(fd);
        peers.push_back({fd, 0, 0, std::vector<float>(elems)});
    }
    close(lfd);
    const size_t bytes = elems * sizeof(float);
    std::vector<float> sum(elems);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    for (size_t i = 0; i < peers.size(); i++) {
        epoll_event ev{EPOLLIN | EPOLLOUT | EPOLLET, {.u64 = i}};
        epoll_ctl(ep, EPOLL_CTL_ADD, peers[i].fd, &ev);
    }
    size_t complete = 0;
    bool sending = false;
    // Reads what has come from a worker; adds every whole float as it lands. False when the
    // worker hung up. (Edge-triggered: called until the socket is drained, and for every
    // worker when a round starts, since its next tensor may have come during the last sends.)
    auto pump = [&](Peer &p) {
        while (!sending && p.received < bytes) {
            auto *buf = reinterpret_cast<char *>(p.in.data());
            ssize_t r = read(p.fd, buf + p.received, bytes - p.received);
            if (r == 0)
                return false;
            if (r < 0)
                break;
            size_t from = p.received / sizeof(float);
            p.received += static_cast<size_t>(r);
            size_t to = p.received / sizeof(float);
            for (size_t i = from; i < to; i++)
                sum[i] += p.in[i];
            if (p.received == bytes && ++complete == peers.size())
                sending = true;
        }
        return true;
    };
    for (;;) {  // rounds, until the workers hang up
        std::fill(sum.begin(), sum.end(), 0.0f);
        complete = 0;
        sending = false;
        size_t delivered = 0;
        for (Peer &p : peers)
            if (!pump(p))
                return 0;
        while (delivered < peers.size()) {
            if (!sending) {
                epoll_event events[64];
                int n = epoll_wait(ep, events, 64, -1);
                for (int e = 0; e < n; e++)
                    if (!pump(peers[events[e].data.u64]))
                        return 0;  // a worker is done: so are we
                if (!sending)
                    continue;
            }
            for (Peer &p : peers) {
                while (p.sent < bytes) {
                    ssize_t w =
                        write(p.fd, reinterpret_cast<char *>(sum.data()) + p.sent, bytes - p.sent);
                    if (w <= 0)
                        break;
                    p.sent += static_cast<size_t>(w);
                    if (p.sent == bytes)
                        delivered++;
                }
            }
            if (delivered < peers.size()) {
                epoll_event events[64];
                epoll_wait(ep, events, 64, 100);  // room to write again
            }
        }
        for (Peer &p : peers)
            p.received = p.sent = 0;
    }
}

int work(const std::string &server, size_t elems, unsigned iterations, bool json)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    tune(fd);
    sockaddr_in a = parse(server);
    for (int i = 0; connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0; i++) {
        if (i > 200)
            fail("connect to " + server);
        close(fd);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        tune(fd);
        usleep(10000);
    }
    std::vector<float> data(elems, 1.0f), out(elems);
    std::vector<double> times;
    for (unsigned it = 0; it < iterations; it++) {
        auto t0 = Clock::now();
        // Send and receive at once: the sum comes back only after every worker's tensor is
        // in, but a worker must keep reading or a large tensor deadlocks in the buffers.
        std::thread writer([&] { write_all(fd, data.data(), elems * sizeof(float)); });
        read_all(fd, out.data(), elems * sizeof(float));
        writer.join();
        times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    close(fd);
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    if (json) {
        std::printf("{\"median_seconds\":%.6f,\"best_seconds\":%.6f,\"times\":[",
                    sorted[sorted.size() / 2], sorted[0]);
        for (size_t i = 0; i < times.size(); i++)
            std::printf("%s%.6f", i ? "," : "", times[i]);
        std::printf("],\"first_value\":%g}\n", static_cast<double>(out[0]));
    } else {
        std::printf("tcp_ps: %u x %.1f MiB: median %.3f s, best %.3f s (sum of element 0: %g)\n",
                    iterations, static_cast<double>(elems) * 4 / (1 << 20),
                    sorted[sorted.size() / 2], sorted[0], static_cast<double>(out[0]));
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv)
{
    CLI::App app("tcp_ps: a plain TCP parameter server and its workers (the baseline)");
    bool server = false, json = false;
    std::string listen_at, connect_to, netns;
    unsigned workers = 1, iterations = 1;
    size_t elems = 1 << 20;
    app.add_flag("--server", server, "Run the server");
    app.add_option("--listen", listen_at, "IP:PORT the server listens on");
    app.add_option("--connect", connect_to, "IP:PORT of the server (worker)");
    app.add_option("--workers", workers, "Workers the server waits for");
    app.add_option("--elems", elems, "float32 values per tensor");
    app.add_option("--iterations", iterations, "All-reduces (worker)");
    app.add_option("--netns", netns, "Network namespace to run in");
    app.add_flag("--json", json, "Report as JSON (worker)");
    CLI11_PARSE(app, argc, argv);
    try {
        if (!netns.empty())
            xagg::sys::enter_netns(netns);
        return server ? serve(listen_at, workers, elems)
                      : work(connect_to, elems, iterations, json);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "tcp_ps: %s\n", e.what());
        return 1;
    }
}
