// SPDX-License-Identifier: MIT
// The worker's UDP socket: it sends every contribution (from the port the daemon registered for
// its rank) and receives every result (the jobs' multicast groups, and results sent to the rank
// itself). A rank that shares its address with others sends from a port of its own, not the
// group port: a second socket then receives the groups' results on the group port, which every
// rank of the host binds (SO_REUSEADDR: each gets its copy of a multicast datagram), while
// results sent to the rank alone (fan-out) reach its own port.
// Batched both ways, since a worker's kernel stack, not the aggregator, is what limits a
// socket-based worker (one datagram per system call would cap it; docs/CLIENT.md, "Measured"):
//  - send: UDP GSO, up to kGsoSegments datagrams in one sendmsg and several of those in one
//    sendmmsg; without GSO, sendmmsg of single datagrams;
//  - receive: recvmmsg, with UDP GRO on so the kernel may hand over several results at once.
// Contributions leave ECN-capable, ECT(0), so a congested switch can mark them rather than drop
// them (docs/PROTOCOL.md, "Congestion echo"); each result comes with its TOS byte and the
// kernel's receive time.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace xagg::client {

class DatagramSocket {
public:
    static constexpr size_t kGsoSegments = 64;  // the kernel's UDP_MAX_SEGMENTS
    static constexpr size_t kGsoBytes = 65000;  // one UDP send's payload stays below 64 KiB

    // Binds `port` on every address (so results to the groups and to `local` arrive), and
    // `group_port` too when it differs; joins `groups` on the interface that has `local`.
    // Non-blocking. `kernel_timestamps`: each arrival's time is the kernel's receive time, else
    // the time it was read. Throws std::system_error.
    DatagramSocket(in_addr local, uint16_t port, uint16_t group_port,
                   const std::vector<in_addr> &groups, bool gso, bool kernel_timestamps = false);
    ~DatagramSocket();
    DatagramSocket(const DatagramSocket &) = delete;
    DatagramSocket &operator=(const DatagramSocket &) = delete;

    int fd() const { return fd_; }
    int group_fd() const { return group_fd_; }  // -1 when `fd()` receives the groups too

    // Sends `count` datagrams of `size` bytes each, back to back in `data`, to `to`. Returns how
    // many left (fewer when the socket buffer is full; the rest can be sent later).
    size_t send(const sockaddr_in &to, const uint8_t *data, size_t size, size_t count);

    // How a datagram arrived.
    struct Arrival {
        in_addr from{};
        uint8_t tos = 0;  // the IP header's TOS byte: its low two bits are the ECN field
        // When the kernel received it (SO_TIMESTAMPNS, with kernel_timestamps; else when it
        // was read), on the steady clock of `now_ns()` in engine.cpp: a worker that was not
        // scheduled for a while does not stretch it.
        int64_t at_ns = 0;
    };
    using DatagramFn = std::function<void(const Arrival &, std::span<const uint8_t>)>;
    // Reads what has arrived (one batch of each socket) and hands each datagram, with how it
    // arrived, to `on_datagram`. Returns the number of datagrams; 0 when there was nothing.
    size_t receive(const DatagramFn &on_datagram);

    bool gso() const { return gso_; }

private:
    size_t send_gso(const sockaddr_in &to, const uint8_t *data, size_t size, size_t count);
    size_t send_plain(const sockaddr_in &to, const uint8_t *data, size_t size, size_t count);
    size_t receive_from(int fd, const DatagramFn &on_datagram);

    int fd_ = -1;
    int group_fd_ = -1;
    bool gso_;
    bool kernel_timestamps_;
    std::vector<uint8_t> rx_;  // kRxSlots buffers of kRxBytes
};

}  // namespace xagg::client
