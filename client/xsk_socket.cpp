// SPDX-License-Identifier: MIT
#include "client/xsk_socket.hpp"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <ifaddrs.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xdp/xsk.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "bpf/xsk_steer.skel.h"

// Multi-buffer AF_XDP (Linux 6.6); Debian 12's kernel headers predate it.
#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif

namespace xagg::client {
namespace {

constexpr uint32_t kFrame = 4096;     // one UMEM frame: a page, what aligned mode allows
constexpr uint32_t kRingSize = 2048;  // every ring; also the frames on each side
constexpr size_t kUdpAt = sizeof(ethhdr) + sizeof(iphdr);  // option-less IPv4 only
constexpr size_t kHeaders = kUdpAt + sizeof(udphdr);
constexpr size_t kRxBatch = 64;

[[noreturn]] void fail(const std::string &what, int error = errno)
{
    throw std::system_error(error, std::generic_category(), what);
}

// The ones'-complement sum of `len` bytes (RFC 1071), not yet folded, copying them to `to`
// (when not null) in the same pass, as the kernel's csum_and_copy does: 32-bit words into a
// 64-bit accumulator, which GCC vectorizes (this file is built at -O3) and which cannot
// overflow below 16 GiB.
uint64_t ones_sum(const uint8_t *p, size_t len, uint64_t sum = 0, uint8_t *to = nullptr)
{
    size_t i = 0;
    if (to) {
        for (; i + 4 <= len; i += 4) {
            uint32_t w;
            std::memcpy(&w, p + i, 4);
            std::memcpy(to + i, &w, 4);
            sum += w;
        }
        std::memcpy(to + i, p + i, len - i);
    } else {
        for (; i + 4 <= len; i += 4) {
            uint32_t w;
            std::memcpy(&w, p + i, 4);
            sum += w;
        }
    }
    if (i + 2 <= len) {
        uint16_t w;
        std::memcpy(&w, p + i, 2);
        sum += w;
        i += 2;
    }
    if (i < len)
        sum += p[i];  // the odd byte, padded with a zero after it (little-endian: low byte)
    return sum;
}

uint16_t fold(uint64_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(sum);
}

// The UDP checksum's pseudo-header part, in the same (network-order words) summation.
uint64_t pseudo_header_sum(uint32_t saddr, uint32_t daddr, uint16_t udp_len_be)
{
    return uint64_t{saddr & 0xffff} + (saddr >> 16) + (daddr & 0xffff) + (daddr >> 16) +
           htons(IPPROTO_UDP) + udp_len_be;
}

}  // namespace

struct XskSocket::Rings {
    xsk_ring_prod fill{};
    xsk_ring_cons comp{};
    xsk_ring_cons rx{};
    xsk_ring_prod tx{};
    xsk_umem *umem = nullptr;
    xsk_socket *xsk = nullptr;
};

XskSocket::XskSocket(in_addr local, uint16_t port, const std::vector<in_addr> &groups)
    : kernel_(local, port, groups, true), local_(local), port_(port), rings_(new Rings)
{
    // The interface that has `local`: its index, link address and netmask.
    ifaddrs *all = nullptr;
    if (getifaddrs(&all) != 0)
        fail("getifaddrs");
    std::string ifname;
    for (ifaddrs *a = all; a; a = a->ifa_next)
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET &&
            reinterpret_cast<sockaddr_in *>(a->ifa_addr)->sin_addr.s_addr == local.s_addr) {
            ifname = a->ifa_name;
            netmask_ = reinterpret_cast<sockaddr_in *>(a->ifa_netmask)->sin_addr.s_addr;
        }
    freeifaddrs(all);
    if (ifname.empty())
        throw std::runtime_error("af_xdp: no interface has the worker's address");
    ifindex_ = static_cast<int>(if_nametoindex(ifname.c_str()));
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname.c_str());
    if (ioctl(kernel_.fd(), SIOCGIFHWADDR, &ifr) != 0)
        fail("reading the link address of " + ifname);
    std::memcpy(mac_.data(), ifr.ifr_hwaddr.sa_data, mac_.size());

    // The steering program, for this worker's port.
    steer_ = xsk_steer__open();
    if (!steer_)
        fail("opening the AF_XDP steering program");
    steer_->rodata->port_be = htons(port);
    if (int err = xsk_steer__load(steer_))
        fail("loading the AF_XDP steering program (needs CAP_BPF)", -err);

    // UMEM: receive frames first, send frames after them.
    umem_bytes_ = size_t{2} * kRingSize * kFrame;
    umem_area_ = mmap(nullptr, umem_bytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (umem_area_ == MAP_FAILED) {
        umem_area_ = nullptr;
        fail("mapping the AF_XDP frames");
    }
    xsk_umem_config ucfg{kRingSize, kRingSize, kFrame, 0, 0};
    if (int err = xsk_umem__create(&rings_->umem, umem_area_, umem_bytes_, &rings_->fill,
                                   &rings_->comp, &ucfg))
        fail("registering the AF_XDP frames", -err);
    xsk_socket_config scfg{};
    scfg.rx_size = kRingSize;
    scfg.tx_size = kRingSize;
    scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;  // ours steers, not libxdp's
    scfg.bind_flags = XDP_USE_NEED_WAKEUP | XDP_USE_SG;
    if (int err = xsk_socket__create(&rings_->xsk, ifname.c_str(), 0, rings_->umem, &rings_->rx,
                                     &rings_->tx, &scfg))
        fail("creating the AF_XDP socket on " + ifname + " queue 0 (needs CAP_NET_RAW)", -err);
    if (int err = xsk_socket__update_xskmap(rings_->xsk, bpf_map__fd(steer_->maps.xsks)))
        fail("registering the AF_XDP socket with the steering program", -err);
    for (uint32_t i = 0; i < kRingSize; i++)  // receive frames: the first half of the UMEM
        to_fill_.push_back(uint64_t{i} * kFrame);
    refill();
    for (uint32_t i = 0; i < kRingSize; i++)
        free_tx_.push_back(uint64_t{kRingSize + i} * kFrame);

    if (int err = bpf_xdp_attach(ifindex_, bpf_program__fd(steer_->progs.xsk_steer),
                                 XDP_FLAGS_DRV_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST, nullptr))
        fail("attaching the AF_XDP steering program to " + ifname +
                 " (native XDP; one worker an interface)",
             -err);
    attached_ = true;

    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0)
        fail("epoll_create1");
    for (int fd : {xsk_socket__fd(rings_->xsk), kernel_.fd()}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
            fail("epoll_ctl");
    }
}

XskSocket::~XskSocket()
{
    if (attached_)
        bpf_xdp_detach(ifindex_, XDP_FLAGS_DRV_MODE, nullptr);
    if (epoll_fd_ >= 0)
        close(epoll_fd_);
    if (rings_->xsk)
        xsk_socket__delete(rings_->xsk);
    if (rings_->umem)
        xsk_umem__delete(rings_->umem);
    if (umem_area_)
        munmap(umem_area_, umem_bytes_);
    if (steer_)
        xsk_steer__destroy(steer_);
}

void XskSocket::refill()
{
    // Frames read go back on the fill ring. The kernel publishes what it took from the ring
    // lazily, so the ring may look fuller than it is: what does not fit waits for the next turn.
    auto room = std::min<uint32_t>(xsk_prod_nb_free(&rings_->fill, kRingSize),
                                   static_cast<uint32_t>(to_fill_.size()));
    uint32_t idx;
    if (room == 0 || xsk_ring_prod__reserve(&rings_->fill, room, &idx) != room)
        return;
    for (uint32_t i = 0; i < room; i++) {
        *xsk_ring_prod__fill_addr(&rings_->fill, idx + i) = to_fill_.back();
        to_fill_.pop_back();
    }
    xsk_ring_prod__submit(&rings_->fill, room);
}

const XskSocket::Mac *XskSocket::neighbour(in_addr to)
{
    auto it = neighbours_.find(to.s_addr);
    if (it != neighbours_.end())
        return &it->second;
    if ((to.s_addr & netmask_) != (local_.s_addr & netmask_))
        throw std::runtime_error("af_xdp: the aggregator is not on the worker's link");
    // The kernel's neighbour table; the kernel path's first sends fill it (ARP).
    std::ifstream arp("/proc/net/arp");
    std::string line;
    char want[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &to, want, sizeof(want));
    std::getline(arp, line);  // the column titles
    while (std::getline(arp, line)) {
        std::istringstream in(line);
        std::string ip, hwtype, flags, hw;
        in >> ip >> hwtype >> flags >> hw;
        if (ip != want || std::stoul(flags, nullptr, 16) != 0x2)  // ATF_COM: complete
            continue;
        Mac mac;
        unsigned b[6];
        if (std::sscanf(hw.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4],
                        &b[5]) != 6)
            continue;
        for (int i = 0; i < 6; i++)
            mac[i] = static_cast<uint8_t>(b[i]);
        return &neighbours_.emplace(to.s_addr, mac).first->second;
    }
    return nullptr;
}

void XskSocket::reclaim_completions()
{
    uint32_t idx;
    uint32_t n = xsk_ring_cons__peek(&rings_->comp, kRingSize, &idx);
    for (uint32_t i = 0; i < n; i++)
        free_tx_.push_back(*xsk_ring_cons__comp_addr(&rings_->comp, idx + i));
    xsk_ring_cons__release(&rings_->comp, n);
}

void XskSocket::kick()
{
    // Copy mode sends at most a budget (32) of descriptors a call and says EAGAIN for more.
    const int fd = xsk_socket__fd(rings_->xsk);
    for (uint32_t i = 0; i < kRingSize / 16 && xsk_ring_prod__needs_wakeup(&rings_->tx); i++)
        if (sendto(fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0 || errno != EAGAIN)
            break;
}

size_t XskSocket::send(const sockaddr_in &to, const uint8_t *data, size_t size, size_t count)
{
    const Mac *dst = neighbour(to.sin_addr);
    if (!dst)
        return kernel_.send(to, data, size, count);
    reclaim_completions();
    const size_t frame_len = kHeaders + size;
    const auto descs = static_cast<uint32_t>((frame_len + kFrame - 1) / kFrame);
    const auto udp_len = htons(static_cast<uint16_t>(sizeof(udphdr) + size));
    const uint64_t pseudo = pseudo_header_sum(local_.s_addr, to.sin_addr.s_addr, udp_len);
    auto *area = static_cast<uint8_t *>(umem_area_);
    size_t sent = 0;
    uint32_t reserved = 0;
    for (; sent < count && free_tx_.size() >= descs; sent++) {
        uint32_t idx;
        if (xsk_ring_prod__reserve(&rings_->tx, descs, &idx) != descs)
            break;
        reserved += descs;
        const uint8_t *payload = data + sent * size;
        udphdr *first_udp = nullptr;
        uint64_t sum = 0;
        for (uint32_t d = 0; d < descs; d++) {
            uint64_t addr = free_tx_.back();
            free_tx_.pop_back();
            uint8_t *f = area + addr;
            size_t len;
            if (d == 0) {
                auto *eth = reinterpret_cast<ethhdr *>(f);
                std::memcpy(eth->h_dest, dst->data(), 6);
                std::memcpy(eth->h_source, mac_.data(), 6);
                eth->h_proto = htons(ETH_P_IP);
                auto *ip = reinterpret_cast<iphdr *>(f + sizeof(ethhdr));
                *ip = {};
                ip->ihl = 5;
                ip->version = 4;
                ip->tot_len = htons(static_cast<uint16_t>(sizeof(iphdr) + sizeof(udphdr) + size));
                ip->frag_off = htons(IP_DF);
                ip->ttl = 64;
                ip->protocol = IPPROTO_UDP;
                ip->saddr = local_.s_addr;
                ip->daddr = to.sin_addr.s_addr;
                ip->check =
                    static_cast<uint16_t>(~fold(ones_sum(f + sizeof(ethhdr), sizeof(iphdr))));
                auto *udp = reinterpret_cast<udphdr *>(f + sizeof(ethhdr) + sizeof(iphdr));
                udp->source = htons(port_);
                udp->dest = to.sin_port;
                udp->len = udp_len;
                udp->check = 0;
                first_udp = udp;
                sum = pseudo + udp->source + udp->dest + udp_len;
                len = std::min<size_t>(kFrame - kHeaders, size);
                sum = ones_sum(payload, len, sum, f + kHeaders);
                len += kHeaders;
            } else {
                // Every part but the last has an even length, so the sums of the parts add up.
                size_t off = kFrame - kHeaders + (d - 1) * size_t{kFrame};
                len = std::min<size_t>(kFrame, size - off);
                sum = ones_sum(payload + off, len, sum, f);
            }
            xdp_desc *desc = xsk_ring_prod__tx_desc(&rings_->tx, idx + d);
            desc->addr = addr;
            desc->len = static_cast<uint32_t>(len);
            desc->options = d + 1 < descs ? XDP_PKT_CONTD : 0;
        }
        auto check = static_cast<uint16_t>(~fold(sum));
        first_udp->check = check ? check : 0xffff;  // 0 would mean "none"
    }
    if (reserved) {
        xsk_ring_prod__submit(&rings_->tx, reserved);
        kick();
    }
    return sent;
}

void XskSocket::deliver(const uint8_t *frame, size_t len, std::optional<uint64_t> udp_sum,
                        const std::function<void(std::span<const uint8_t>)> &on_datagram)
{
    if (len < kHeaders) {
        dropped_++;
        return;
    }
    const auto *ip = reinterpret_cast<const iphdr *>(frame + sizeof(ethhdr));
    const auto *udp = reinterpret_cast<const udphdr *>(frame + kUdpAt);
    const size_t udp_len = ntohs(udp->len);
    // The UDP length must reach the frame's end: the sum taken while copying covered all of it.
    if (udp_len < sizeof(udphdr) || kUdpAt + udp_len != len ||
        ntohs(ip->tot_len) != sizeof(iphdr) + udp_len) {
        dropped_++;
        return;
    }
    if (udp->check != 0) {
        uint64_t sum = pseudo_header_sum(ip->saddr, ip->daddr, udp->len);
        sum += udp_sum ? *udp_sum : ones_sum(reinterpret_cast<const uint8_t *>(udp), udp_len);
        if (fold(sum) != 0xffff) {
            dropped_++;
            return;
        }
    }
    on_datagram({frame + kHeaders, udp_len - sizeof(udphdr)});
}

size_t XskSocket::receive(const std::function<void(std::span<const uint8_t>)> &on_datagram)
{
    size_t datagrams = 0;
    uint32_t idx;
    uint32_t n = xsk_ring_cons__peek(&rings_->rx, kRxBatch, &idx);
    if (n) {
        auto *area = static_cast<const uint8_t *>(umem_area_);
        for (uint32_t i = 0; i < n; i++) {
            const xdp_desc *desc = xsk_ring_cons__rx_desc(&rings_->rx, idx + i);
            const uint8_t *p = area + desc->addr;
            const size_t len = desc->len;
            const bool more = desc->options & XDP_PKT_CONTD;
            to_fill_.push_back(desc->addr & ~uint64_t{kFrame - 1});
            if (!continuing_ && !more) {
                deliver(p, len, std::nullopt, on_datagram);
                datagrams++;
                continue;
            }
            // A frame in several parts is copied together, its UDP sum taken in the same pass.
            if (!continuing_) {
                packet_len_ = 0;
                packet_sum_ = 0;
                packet_summed_ = true;
            }
            continuing_ = more;
            if (packet_len_ + len > packet_.size()) {
                packet_len_ = packet_.size() + 1;  // too long for any MTU: dropped at its end
            } else {
                size_t head = packet_len_ < kUdpAt ? std::min(kUdpAt - packet_len_, len) : 0;
                std::memcpy(packet_.data() + packet_len_, p, head);
                // Parts after an odd-length one would sum their bytes in the wrong halves.
                packet_summed_ = packet_summed_ && (packet_len_ + head - kUdpAt) % 2 == 0;
                packet_sum_ = ones_sum(p + head, len - head, packet_sum_,
                                       packet_.data() + packet_len_ + head);
                packet_len_ += len;
            }
            if (!more) {
                if (packet_len_ > packet_.size())
                    dropped_++;
                else
                    deliver(packet_.data(), packet_len_,
                            packet_summed_ ? std::optional(packet_sum_) : std::nullopt,
                            on_datagram);
                datagrams++;
            }
        }
        xsk_ring_cons__release(&rings_->rx, n);
    }
    refill();
    // What the steering program left to the kernel.
    return datagrams + kernel_.receive(on_datagram);
}

}  // namespace xagg::client
