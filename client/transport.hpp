// SPDX-License-Identifier: MIT
// How the engine moves datagrams: send a batch of equal-sized contributions to an aggregator,
// hand over the results that arrived. Two implementations: DatagramSocket (the kernel's UDP
// stack) and XskSocket (AF_XDP, ClientOptions::af_xdp).
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

namespace xagg::client {

class Transport {
public:
    virtual ~Transport() = default;

    // Readable when results arrived; writable when there is room to send.
    virtual int fd() const = 0;

    // Sends `count` datagrams (UDP payloads) of `size` bytes each, back to back in `data`, to
    // `to`. Returns how many left (fewer when full; the rest can be sent later).
    virtual size_t send(const sockaddr_in &to, const uint8_t *data, size_t size, size_t count) = 0;

    // Reads what has arrived (one batch) and hands each datagram's UDP payload to
    // `on_datagram`. Returns the number of datagrams; 0 when there was nothing to read.
    virtual size_t receive(const std::function<void(std::span<const uint8_t>)> &on_datagram) = 0;
};

}  // namespace xagg::client
