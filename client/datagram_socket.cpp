// SPDX-License-Identifier: MIT
#include "client/datagram_socket.hpp"

#include <arpa/inet.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "xagg/proto.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace xagg::client {
namespace {

constexpr size_t kRxSlots = 32;
constexpr size_t kRxBytes = 64 * 1024;  // a GRO batch of results

[[noreturn]] void fail(const std::string &what)
{
    throw std::system_error(errno, std::generic_category(), what);
}

// A UDP socket set up for results and contributions, bound to `port` on every address, joined
// to `groups` on the interface that has `local` (none: it sends and receives unicast only).
int open_socket(in_addr local, uint16_t port, const std::vector<in_addr> &groups,
                bool kernel_timestamps)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        fail("socket");
    int one = 1, buffer = 16 << 20;
    // Ranks of one host all bind the group port, each to receive its copy of every result.
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    // Results arrive in bursts of a window; the default buffers drop some of them.
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof(buffer)) == 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buffer, sizeof(buffer)) == 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
    setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one));  // best effort
    // Never fragment: the fast path sees frames, not reassembled datagrams.
    int pmtu = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
    // ECN-capable transport (ECT(0)) on every contribution; each result's TOS and the kernel's
    // receive time with it. Best effort: without them the controller has loss alone.
    int tos = XAGG_ECN_ECT0;
    setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
    if (kernel_timestamps)
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
        const int err = errno;
        close(fd);
        errno = err;
        fail("binding UDP port " + std::to_string(port));
    }
    for (in_addr group : groups) {
        ip_mreq mreq{};
        mreq.imr_multiaddr = group;
        mreq.imr_interface = local;
        if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof(mreq)) != 0 &&
            errno != EADDRINUSE) {  // several jobs may share a group
            const int err = errno;
            char a[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &group, a, sizeof(a));
            close(fd);
            errno = err;
            fail(std::string("joining multicast group ") + a);
        }
    }
    return fd;
}

}  // namespace

DatagramSocket::DatagramSocket(in_addr local, uint16_t port, uint16_t group_port,
                               const std::vector<in_addr> &groups, bool gso, bool kernel_timestamps)
    : gso_(gso), kernel_timestamps_(kernel_timestamps), rx_(kRxSlots * kRxBytes)
{
    if (port == group_port) {
        fd_ = open_socket(local, port, groups, kernel_timestamps);
        return;
    }
    fd_ = open_socket(local, port, {}, kernel_timestamps);
    try {
        group_fd_ = open_socket(local, group_port, groups, kernel_timestamps);
    } catch (...) {
        close(fd_);
        throw;
    }
}

DatagramSocket::~DatagramSocket()
{
    if (fd_ >= 0)
        close(fd_);
    if (group_fd_ >= 0)
        close(group_fd_);
}

size_t DatagramSocket::send(const sockaddr_in &to, const uint8_t *data, size_t size, size_t count)
{
    if (gso_) {
        size_t sent = send_gso(to, data, size, count);
        if (gso_)
            return sent;
        // The kernel refused GSO (EIO from a device path without it): fall back for good.
    }
    return send_plain(to, data, size, count);
}

size_t DatagramSocket::send_gso(const sockaddr_in &to, const uint8_t *data, size_t size,
                                size_t count)
{
    constexpr size_t kMessages = 16;
    mmsghdr msgs[kMessages];
    iovec iov[kMessages];
    alignas(cmsghdr) char control[kMessages][CMSG_SPACE(sizeof(uint16_t))];
    size_t n = 0, covered = 0;
    for (; n < kMessages && covered < count; n++) {
        size_t segments = std::min({kGsoSegments, kGsoBytes / size, count - covered});
        iov[n] = {const_cast<uint8_t *>(data + covered * size), segments * size};
        msgs[n] = {};
        msgs[n].msg_hdr.msg_name = const_cast<sockaddr_in *>(&to);
        msgs[n].msg_hdr.msg_namelen = sizeof(to);
        msgs[n].msg_hdr.msg_iov = &iov[n];
        msgs[n].msg_hdr.msg_iovlen = 1;
        if (segments > 1) {
            msgs[n].msg_hdr.msg_control = control[n];
            msgs[n].msg_hdr.msg_controllen = sizeof(control[n]);
            cmsghdr *cm = CMSG_FIRSTHDR(&msgs[n].msg_hdr);
            cm->cmsg_level = SOL_UDP;
            cm->cmsg_type = UDP_SEGMENT;
            cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            auto seg = static_cast<uint16_t>(size);
            std::memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
        }
        covered += segments;
    }
    int done = sendmmsg(fd_, msgs, static_cast<unsigned>(n), 0);
    if (done < 0) {
        if (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP)
            gso_ = false;
        return 0;
    }
    size_t sent = 0;
    for (int i = 0; i < done; i++)
        sent += iov[i].iov_len / size;
    return sent;
}

size_t DatagramSocket::send_plain(const sockaddr_in &to, const uint8_t *data, size_t size,
                                  size_t count)
{
    constexpr size_t kMessages = 64;
    mmsghdr msgs[kMessages];
    iovec iov[kMessages];
    size_t n = std::min(count, kMessages);
    for (size_t i = 0; i < n; i++) {
        iov[i] = {const_cast<uint8_t *>(data + i * size), size};
        msgs[i] = {};
        msgs[i].msg_hdr.msg_name = const_cast<sockaddr_in *>(&to);
        msgs[i].msg_hdr.msg_namelen = sizeof(to);
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int done = sendmmsg(fd_, msgs, static_cast<unsigned>(n), 0);
    return done < 0 ? 0 : static_cast<size_t>(done);
}

namespace {

int64_t clock_ns(clockid_t clock)
{
    timespec t;
    clock_gettime(clock, &t);
    return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

size_t DatagramSocket::receive(const DatagramFn &on_datagram)
{
    return receive_from(fd_, on_datagram) +
           (group_fd_ >= 0 ? receive_from(group_fd_, on_datagram) : 0);
}

size_t DatagramSocket::receive_from(int fd, const DatagramFn &on_datagram)
{
    mmsghdr msgs[kRxSlots];
    iovec iov[kRxSlots];
    sockaddr_in from[kRxSlots];
    alignas(cmsghdr) char control[kRxSlots][CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(int)) +
                                            CMSG_SPACE(sizeof(timespec))];
    for (size_t i = 0; i < kRxSlots; i++) {
        iov[i] = {rx_.data() + i * kRxBytes, kRxBytes};
        msgs[i] = {};
        msgs[i].msg_hdr.msg_name = &from[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_control = control[i];
        msgs[i].msg_hdr.msg_controllen = sizeof(control[i]);
    }
    int got = recvmmsg(fd, msgs, kRxSlots, MSG_DONTWAIT, nullptr);
    if (got <= 0)
        return 0;
    // The kernel stamps with CLOCK_REALTIME; the engine keeps time on CLOCK_MONOTONIC. Both read
    // here, back to back, give the offset between them (off by the ~20 ns between the reads);
    // without kernel timestamps, the time of this read is every arrival's.
    const int64_t steady = clock_ns(CLOCK_MONOTONIC);
    const int64_t realtime_to_steady = kernel_timestamps_ ? steady - clock_ns(CLOCK_REALTIME) : 0;
    size_t datagrams = 0;
    for (int i = 0; i < got; i++) {
        size_t len = msgs[i].msg_len, segment = len;
        Arrival arrival{from[i].sin_addr, 0, steady};
        // With GRO, one buffer may hold several datagrams of `segment` bytes (the last shorter),
        // of one TOS (GRO does not merge datagrams whose TOS differs) and one receive time.
        for (cmsghdr *cm = CMSG_FIRSTHDR(&msgs[i].msg_hdr); cm;
             cm = CMSG_NXTHDR(&msgs[i].msg_hdr, cm)) {
            if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
                int s;
                std::memcpy(&s, CMSG_DATA(cm), sizeof(s));
                segment = static_cast<size_t>(s);
            } else if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS) {
                arrival.tos = *CMSG_DATA(cm);
            } else if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
                timespec t;
                std::memcpy(&t, CMSG_DATA(cm), sizeof(t));
                const int64_t at =
                    int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec + realtime_to_steady;
                arrival.at_ns = std::min(at, steady);  // never later than now
            }
        }
        const uint8_t *p = static_cast<const uint8_t *>(iov[i].iov_base);
        for (size_t off = 0; off < len; off += segment, datagrams++)
            on_datagram(arrival, {p + off, std::min(segment, len - off)});
    }
    return datagrams;
}

}  // namespace xagg::client
