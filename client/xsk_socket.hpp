// SPDX-License-Identifier: MIT
// The worker's AF_XDP transport (ClientOptions::af_xdp): contributions leave as whole Ethernet
// frames written into shared memory (no UDP/IP stack, no socket buffer), results arrive the same
// way, handed over by bpf/xsk_steer.bpf.c on the worker's interface. Frames of 9000-byte links
// span several 4 KiB UMEM frames (AF_XDP multi-buffer, XDP_USE_SG).
//
// What it needs and assumes: CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW in the worker (it attaches
// an XDP program to the interface that has `local`), the aggregators on that interface's link
// (their MAC addresses come from the kernel's neighbour table), and one worker process an
// interface (the steering program owns the interface's XDP hook). A kernel UDP socket stays
// bound to the port: it holds the port and the multicast memberships, sends until an
// aggregator's MAC address is known, and receives whatever the steering program passes (a
// queue without an AF_XDP socket, fragments).
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "client/datagram_socket.hpp"
#include "client/transport.hpp"

struct xsk_steer;

namespace xagg::client {

class XskSocket : public Transport {
public:
    // Throws std::system_error (errno) or std::runtime_error (what is missing).
    XskSocket(in_addr local, uint16_t port, const std::vector<in_addr> &groups);
    ~XskSocket() override;
    XskSocket(const XskSocket &) = delete;
    XskSocket &operator=(const XskSocket &) = delete;

    int fd() const override { return epoll_fd_; }
    size_t send(const sockaddr_in &to, const uint8_t *data, size_t size, size_t count) override;
    size_t receive(const std::function<void(std::span<const uint8_t>)> &on_datagram) override;

    // Results dropped for a wrong UDP checksum or a malformed header (the kernel path counts
    // these in its own UDP counters).
    uint64_t dropped() const { return dropped_; }

private:
    struct Rings;
    using Mac = std::array<uint8_t, 6>;

    const Mac *neighbour(in_addr to);
    void reclaim_completions();
    void refill();
    void kick();
    void deliver(const uint8_t *frame, size_t len, std::optional<uint64_t> udp_sum,
                 const std::function<void(std::span<const uint8_t>)> &on_datagram);

    DatagramSocket kernel_;
    in_addr local_;
    uint16_t port_;
    int ifindex_ = 0;
    Mac mac_{};
    uint32_t netmask_ = 0;  // network order
    std::map<uint32_t, Mac> neighbours_;

    void *umem_area_ = nullptr;
    size_t umem_bytes_ = 0;
    std::unique_ptr<Rings> rings_;
    std::vector<uint64_t> free_tx_;  // UMEM frames free for sending
    std::vector<uint64_t> to_fill_;  // receive frames read, not yet back on the fill ring
    xsk_steer *steer_ = nullptr;
    bool attached_ = false;
    int epoll_fd_ = -1;

    // A received frame that spans several UMEM frames, and the UDP sum of what is in it so far.
    std::vector<uint8_t> packet_ = std::vector<uint8_t>(16384);
    size_t packet_len_ = 0;
    uint64_t packet_sum_ = 0;
    bool packet_summed_ = true;
    bool continuing_ = false;
    uint64_t dropped_ = 0;
};

}  // namespace xagg::client
