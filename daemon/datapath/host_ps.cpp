// SPDX-License-Identifier: MIT
#include "daemon/datapath/host_ps.hpp"

#include <arpa/inet.h>
#include <endian.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <cstring>
#include <system_error>
#include <thread>

#include "daemon/jobs/job_entry.hpp"
#include "xagg/check.h"
#include "xagg/slot.h"

namespace xagg::daemon {
namespace {

static_assert(__BYTE_ORDER == __LITTLE_ENDIAN,
              "the payload is little-endian and is summed in place: port the copy loops first");

constexpr unsigned kBatch = 64;
// Room for more than a chunk's datagram, so that an oversized one is seen (and refused) as such.
constexpr size_t kMaxDatagram = wire::kMaxDatagramBytes + 1;

int bind_socket(uint16_t port, unsigned ifindex)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        throw std::system_error(errno, std::generic_category(), "host PS socket");
    int one = 1, buf = 16 << 20;
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
    ip_mreqn mif{};
    mif.imr_ifindex = static_cast<int>(ifindex);
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mif, sizeof(mif));
    // A rank on this node's own host gets its results by the loopback copy of each multicast
    // result (ControlApi::serve_on_host_only); with none, the copy finds no socket and is freed.
    unsigned char loop = 1;
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof(loop));
    // Each datagram's local address, for its replies to leave from (Reply::source).
    setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
    // Each datagram's TOS byte, whose ECN bits say whether the network marked it CE; and the
    // results' own, ECT(0) as the fast path's (xagg_result_tos()).
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
    int tos = xagg_result_tos(0);
    setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
        int err = errno;
        close(fd);
        throw std::system_error(err, std::generic_category(),
                                "binding the host PS to UDP port " + std::to_string(port));
    }
    return fd;
}

// The clock bpf_ktime_get_ns() reads, so both paths' slot times compare alike.
uint64_t monotonic_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

}  // namespace

HostPs::HostPs(uint16_t port, const std::string &ifname, unsigned threads,
               const std::string &slots_dir)
    : port_(port), slots_dir_(slots_dir)
{
    ifindex_ = if_nametoindex(ifname.c_str());
    if (ifindex_ == 0)
        throw std::system_error(errno, std::generic_category(), "interface " + ifname);
    for (unsigned i = 0; i < threads; i++)
        fds_.push_back(bind_socket(port, ifindex_));
    busy_ = std::make_unique<std::atomic<uint64_t>[]>(threads);
    for (unsigned i = 0; i < threads; i++)
        busy_[i] = kIdle;
    for (size_t i = 0; i < fds_.size(); i++)
        threads_.emplace_back([this, i] { serve(fds_[i], i); });
    spdlog::info("host parameter server on UDP port {} with {} threads", port, threads);
}

HostPs::~HostPs()
{
    stop_ = true;
    for (auto &t : threads_)
        t.join();
    for (int fd : fds_)
        close(fd);
}

std::shared_ptr<const HostPs::Jobs> HostPs::jobs() const
{
    std::lock_guard g(jobs_lock_);
    return jobs_;
}

std::shared_ptr<HostSlots> HostPs::slots_of(uint32_t job_id) const
{
    auto now = jobs();
    auto it = now->find(job_id);
    return it != now->end() ? it->second.slots : nullptr;
}

// Jobs are read per batch by the serving threads: each change publishes a new snapshot.
uint64_t HostPs::publish(const std::function<void(Jobs &)> &edit)
{
    std::lock_guard g(jobs_lock_);
    auto next = std::make_shared<Jobs>(*jobs_);
    edit(*next);
    jobs_ = std::move(next);
    return ++version_;
}

void HostPs::wait_for_threads(uint64_t version) const
{
    for (size_t i = 0; i < threads_.size(); i++)
        for (uint64_t v; (v = busy_[i].load()) != kIdle && v < version;)
            std::this_thread::yield();  // a batch of at most 64 datagrams: microseconds
}

// The map entries the acceptance rule reads, rebuilt from the table's view of the job.
void HostPs::refresh_entries(ServedJob &served)
{
    served.entry = job_entry(served.job);
    served.members.clear();
    for (const auto &[rank, m] : served.job.members)
        served.members[rank] = member_entry(m);
}

void HostPs::put_job(const Job &job)
{
    // The job's slots: the ones a previous run left if they are this job's (a restart), else
    // new. Room is made for the positions this path serves before it serves them.
    std::shared_ptr<HostSlots> slots = slots_of(job.id);
    if (!slots || slots->tag() != job.tag || slots->positions() != job.positions) {
        slots =
            std::make_shared<HostSlots>(slots_dir_, job.id, job.tag, job.positions, job.parts());
        if (slots->recovered())
            spdlog::info("job {}: host-path slots recovered from {}{}", job.id,
                         HostSlots::path(slots_dir_, job.id),
                         slots->torn() ? fmt::format(" ({} cut short by the crash, cleared: "
                                                     "retransmission rebuilds them)",
                                                     slots->torn())
                                       : "");
    }
    slots->reserve(job.region_positions, job.positions);
    publish([&](Jobs &j) {
        auto it = j.find(job.id);
        auto members = it != j.end() ? it->second.job.members : job.members;
        ServedJob &served = j[job.id];
        served.job = job;
        served.job.members = members;
        served.slots = slots;
        refresh_entries(served);
    });
}

void HostPs::delete_job(uint32_t job_id)
{
    // A job id can be reused: its slots go with it (a serving thread that still holds them
    // finishes its batch on the mapping, which goes with the last reference).
    if (auto slots = slots_of(job_id))
        slots->remove_file();
    publish([&](Jobs &j) { j.erase(job_id); });
}

void HostPs::put_member(uint32_t job_id, const Member &member)
{
    publish([&](Jobs &j) {
        if (auto it = j.find(job_id); it != j.end()) {
            it->second.job.members[member.rank] = member;
            refresh_entries(it->second);
        }
    });
}

void HostPs::delete_member(uint32_t job_id, uint32_t rank)
{
    publish([&](Jobs &j) {
        if (auto it = j.find(job_id); it != j.end()) {
            it->second.job.members.erase(rank);
            refresh_entries(it->second);
        }
    });
}

void HostPs::hold(uint32_t job_id, uint32_t first, uint32_t end)
{
    wait_for_threads(publish([&](Jobs &j) { j.held[job_id] = {first, end}; }));
}

void HostPs::release(uint32_t job_id)
{
    publish([&](Jobs &j) { j.held.erase(job_id); });
}

namespace {

// Whether `a` holds a later state of the job's position than `b` (see merge_slots()).
bool later_state(const xagg_slot &a, const xagg_slot &b, uint32_t tag, uint32_t position)
{
    if (!xagg_slot_owned(&a, tag, position))
        return false;
    if (!xagg_slot_owned(&b, tag, position))
        return true;
    if (a.round != b.round)
        return static_cast<int32_t>(a.round - b.round) > 0;
    return (a.seen & b.seen) == b.seen && a.seen != b.seen;
}

}  // namespace

void HostPs::take_slots(const Job &job, uint32_t first_position, std::span<const xagg_slot> slots,
                        bool only_later)
{
    std::shared_ptr<HostSlots> mine = slots_of(job.id);
    if (!mine)
        return;
    const auto count = std::min(static_cast<uint32_t>(slots.size() / 2),
                                mine->positions() - std::min(first_position, mine->positions()));
    mine->reserve(first_position, first_position + count);
    for (uint32_t i = 0; i < count; i++) {
        const uint32_t position = first_position + i;
        Shard &shard = shard_of(position);
        std::lock_guard g(shard.lock);
        xagg_slot *pair = mine->pair(position);
        for (uint32_t parity : {0u, 1u}) {
            // A slot that does not hold the job's position (another owner's tag or position) is
            // empty here.
            const xagg_slot &from = slots[2 * i + parity];
            if (only_later && !later_state(from, pair[parity], job.tag, position))
                continue;
            begin_slot_write(pair[parity]);
            pair[parity] = xagg_slot_owned(&from, job.tag, position) ? from : xagg_slot{};
            end_slot_write(pair[parity]);
        }
    }
}

void HostPs::import_slots(const Job &job, uint32_t first_chunk, std::span<const xagg_slot> slots)
{
    take_slots(job, first_chunk, slots, false);
}

void HostPs::merge_slots(const Job &job, uint32_t first_position, std::span<const xagg_slot> slots)
{
    take_slots(job, first_position, slots, true);
}

HostStore::Exported HostPs::export_slots(uint32_t job_id, uint32_t first, uint32_t end)
{
    Exported out;
    std::shared_ptr<HostSlots> mine = slots_of(job_id);
    if (!mine)
        return out;
    for (uint32_t position = first; position < end; position++) {
        Shard &shard = shard_of(position);
        std::lock_guard g(shard.lock);
        xagg_slot *pair = mine->pair(position);
        if (!pair[0].seen && !pair[1].seen)
            continue;
        out.positions.push_back(position);
        out.slots.push_back(pair[0]);
        out.slots.push_back(pair[1]);
    }
    return out;
}

std::vector<SlotState> HostPs::slot_states(const Job &job) const
{
    std::vector<SlotState> out;
    std::shared_ptr<HostSlots> mine = slots_of(job.id);
    if (!mine || mine->positions() != job.positions)
        return out;
    for (uint32_t position = job.region_positions; position < job.positions; position++) {
        const Shard &shard = shard_of(position);
        std::lock_guard g(shard.lock);
        for (uint32_t parity : {0u, 1u}) {
            const xagg_slot &slot = mine->pair(position)[parity];
            if (slot.seen)
                out.push_back({position, slot.tag, slot.round, slot.seen, slot.started_ns});
        }
    }
    return out;
}

Counters HostPs::counters() const
{
    Counters c{};
    for (int i = 0; i < XAGG_CNT_MAX; i++)
        c[i] = counters_[i].load();
    return c;
}

enum xagg_counter HostPs::handle(std::span<const uint8_t> datagram, const sockaddr_in &from,
                                 uint8_t tos, std::vector<Reply> &replies)
{
    return handle(*jobs(), datagram, from, tos, replies);
}

// The fast path's sequence (bpf/xagg_fastpath.bpf.c) from the datagram on; the kernel has made
// the IP and UDP checks.
enum xagg_counter HostPs::handle(const Jobs &jobs, std::span<const uint8_t> datagram,
                                 const sockaddr_in &from, uint8_t tos, std::vector<Reply> &replies)
{
    const auto outcome = [&](enum xagg_counter c) {
        count(c);
        return c;
    };
    xagg_hdr h{};
    // An empty datagram has no buffer at all (data() may be null, and memcpy from null is
    // undefined even for zero bytes); the zeroed header then fails the length check.
    if (!datagram.empty())
        std::memcpy(&h, datagram.data(), std::min(sizeof(h), datagram.size()));
    if (auto refused = xagg_check_datagram(&h, static_cast<__u32>(datagram.size()));
        refused != XAGG_ACCEPT)
        return outcome(refused);

    const uint32_t job_id = be32toh(h.job_id), rank = be16toh(h.rank);
    auto job_it = jobs.find(job_id);
    const ServedJob *served = job_it != jobs.end() ? &job_it->second : nullptr;
    const xagg_member *member = nullptr;
    if (served)
        if (auto m = served->members.find(rank); m != served->members.end())
            member = &m->second;
    if (auto refused = xagg_check_sender(served ? &served->entry : nullptr, member, rank, h.key,
                                         from.sin_addr.s_addr, from.sin_port);
        refused != XAGG_ACCEPT)
        return outcome(refused);

    if (auto refused = xagg_check_chunk_size(&served->entry, &h); refused != XAGG_ACCEPT)
        return outcome(refused);

    const Job &job = served->job;
    const uint32_t chunk = be32toh(h.chunk), round = be32toh(h.round);
    const uint32_t parts = xagg_job_parts(&served->entry);
    const uint64_t position = uint64_t{chunk} * parts;
    // Only the job's own chunks get a slot here: a member (it holds the key) could otherwise
    // make the daemon keep state for every index it sends.
    if (position + parts > job.positions)
        return outcome(XAGG_CNT_DROP_BEYOND_JOB);
    // Held, or a chunk the fast path serves (a datagram passed up before it took over).
    auto held = jobs.held.find(job_id);
    if ((held != jobs.held.end() && position >= held->second.first &&
         position < held->second.second) ||
        xagg_route(&served->entry, chunk) == XAGG_ACCEPT)
        return outcome(XAGG_CNT_DROP_MOVING);

    // The values, padded to whole slot parts (the last part's tail is added along, never sent).
    const size_t values = be16toh(h.nelem);
    alignas(64) int32_t vals[XAGG_JUMBO_SLOT_PARTS * XAGG_CHUNK_ELEMS] = {};
    std::memcpy(vals, datagram.data() + sizeof(h), values * sizeof(int32_t));
    const bool marked = xagg_tos_marked(tos);
    xagg_slot_outcome slot{};
    enum xagg_slot_verdict verdict;
    {
        const auto first = static_cast<uint32_t>(position);
        Shard &shard = shard_of(first);
        std::lock_guard g(shard.lock);
        HostSlots &slots = *served->slots;
        xagg_slot &lead = slots.pair(first)[round & 1];
        // Marked while it changes, so that a kill half way is seen at the next start.
        for (uint32_t part = 0; part < parts; part++)
            begin_slot_write(slots.pair(first + part)[round & 1]);
        enum xagg_payload_op op;
        const xagg_contribution c{job.tag,
                                  first,
                                  round,
                                  h.exponent,
                                  1ull << rank,
                                  served->entry.members,
                                  static_cast<__u32>(marked)};
        verdict = xagg_slot_decide(&lead, monotonic_ns(), &c, &op, &slot);
        xagg_payload_apply(op, lead.sum, vals);
        for (uint32_t part = 1; part < parts; part++) {
            xagg_slot &next = slots.pair(first + part)[round & 1];
            xagg_slot_follow(&next, &lead, first + part);
            xagg_payload_apply(op, next.sum, vals + part * XAGG_CHUNK_ELEMS);
        }
        for (uint32_t part = 0; part < parts; part++)
            end_slot_write(slots.pair(first + part)[round & 1]);
    }
    auto reply = [&](const sockaddr_in &to, uint8_t extra_flags) {
        Reply &r = replies.emplace_back();
        xagg_hdr result = h;
        xagg_make_result_hdr(&result, slot.seen, slot.marked, XAGG_F_FALLBACK | extra_flags);
        std::memcpy(r.data.data(), &result, sizeof(result));
        std::memcpy(r.data.data() + sizeof(result), vals, values * sizeof(int32_t));
        r.size = sizeof(result) + values * sizeof(int32_t);
        r.to = to;
    };
    const enum xagg_counter result = xagg_verdict_counter(verdict, &served->entry);
    if (verdict == XAGG_SLOT_ADDED || verdict == XAGG_SLOT_COMPLETED) {
        counters_[XAGG_CNT_SUMMED_VALUES] += values;
        if (marked)
            counters_[XAGG_CNT_CE_MARKED]++;
    }
    switch (verdict) {
    case XAGG_SLOT_RESEND: reply(from, XAGG_F_RESENT); break;
    case XAGG_SLOT_COMPLETED:
        if (result == XAGG_CNT_COMPLETED_FANOUT) {
            // The fast path copies in TC; here one datagram per member.
            for (const auto &[r, m] : job.members) {
                sockaddr_in to{};
                to.sin_family = AF_INET;
                to.sin_addr = m.addr;
                to.sin_port = htons(m.port);
                reply(to, 0);
                count(XAGG_CNT_FANOUT_COPIES);
            }
        } else {
            sockaddr_in to{};
            to.sin_family = AF_INET;
            to.sin_addr = job.group;
            to.sin_port = htons(job.group_port);
            reply(to, 0);
        }
        break;
    default: break;
    }
    return outcome(result);
}

void HostPs::serve(int fd, size_t thread)
{
    static thread_local uint8_t in[kBatch][kMaxDatagram];
    std::vector<Reply> out;
    out.reserve(kBatch * 4);
    while (!stop_) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        mmsghdr msgs[kBatch]{};
        iovec iov[kBatch];
        sockaddr_in from[kBatch];
        alignas(
            cmsghdr) char info[kBatch][CMSG_SPACE(sizeof(in_pktinfo)) + CMSG_SPACE(sizeof(int))];
        for (unsigned i = 0; i < kBatch; i++) {
            iov[i] = {in[i], kMaxDatagram};
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = &from[i];
            msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
            msgs[i].msg_hdr.msg_control = info[i];
            msgs[i].msg_hdr.msg_controllen = sizeof(info[i]);
        }
        int n = recvmmsg(fd, msgs, kBatch, MSG_DONTWAIT, nullptr);
        if (n <= 0)
            continue;
        // Which table version this batch works from, so that hold() can wait it out.
        busy_[thread] = version_.load();
        auto jobs_now = jobs();
        out.clear();
        for (int i = 0; i < n; i++) {
            const size_t first_reply = out.size();
            // The kernel's local address of the datagram (ip(7): for unicast the one it was
            // sent to; for a broadcast, the interface's): its replies' source. And its TOS.
            in_addr local{};
            uint8_t tos = 0;
            for (cmsghdr *cm = CMSG_FIRSTHDR(&msgs[i].msg_hdr); cm;
                 cm = CMSG_NXTHDR(&msgs[i].msg_hdr, cm)) {
                if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
                    in_pktinfo pi;
                    std::memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
                    local = pi.ipi_spec_dst;
                } else if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS) {
                    tos = *CMSG_DATA(cm);  // one byte (ip(7), IP_RECVTOS)
                }
            }
            handle(*jobs_now, {in[i], msgs[i].msg_len}, from[i], tos, out);
            for (size_t r = first_reply; r < out.size(); r++)
                out[r].source = local;
        }
        // Batched sends; a full buffer is loss the workers' retransmission recovers.
        for (size_t sent = 0; sent < out.size();) {
            mmsghdr omsgs[kBatch]{};
            iovec oiov[kBatch];
            alignas(cmsghdr) char oinfo[kBatch][CMSG_SPACE(sizeof(in_pktinfo))];
            unsigned k = 0;
            for (; k < kBatch && sent + k < out.size(); k++) {
                Reply &o = out[sent + k];
                oiov[k] = {o.data.data(), o.size};
                omsgs[k].msg_hdr.msg_iov = &oiov[k];
                omsgs[k].msg_hdr.msg_iovlen = 1;
                omsgs[k].msg_hdr.msg_name = &o.to;
                omsgs[k].msg_hdr.msg_namelen = sizeof(o.to);
                if (o.source.s_addr != 0) {
                    omsgs[k].msg_hdr.msg_control = oinfo[k];
                    omsgs[k].msg_hdr.msg_controllen = sizeof(oinfo[k]);
                    cmsghdr *cm = CMSG_FIRSTHDR(&omsgs[k].msg_hdr);
                    cm->cmsg_level = IPPROTO_IP;
                    cm->cmsg_type = IP_PKTINFO;
                    cm->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
                    in_pktinfo pi{};
                    pi.ipi_spec_dst = o.source;
                    std::memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
                }
            }
            int s = sendmmsg(fd, omsgs, k, 0);
            sent += s > 0 ? static_cast<size_t>(s) : k;
        }
        busy_[thread] = kIdle;
    }
}

}  // namespace xagg::daemon
