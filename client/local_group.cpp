// SPDX-License-Identifier: MIT
#include "client/local_group.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "client/engine.hpp"
#include "xagg/client.hpp"

namespace xagg::client {
namespace {

using Kind = ClientError::Kind;
using Clock = std::chrono::steady_clock;

// Host-local messages, in the machine's order (both ends are on this host).
constexpr uint32_t kMagic = 0x58414c31;  // "XAL1"

struct Greeting {  // a rank to the leader, once
    uint32_t magic = kMagic;
    uint32_t local_rank = 0;
};
struct HelloMessage {  // the leader's answer
    uint32_t magic = kMagic;
    uint32_t members = 0;
    uint32_t chunk_elems = 0;
};
struct CallHeader {  // a rank's call, then n 32-bit values
    uint32_t magic = kMagic;
    uint32_t kind = 0;
    uint64_t n = 0;
};
struct ResultHeader {  // the leader's answer, then n values (status 0) or n bytes of message
    uint32_t magic = kMagic;
    uint32_t status = 0;  // 0: done; else the ClientError kind + 1
    uint64_t n = 0;
    uint32_t contributors = 0;
    uint32_t nonfinite_blocks = 0;
};

void write_all(int fd, const void *data, size_t size)
{
    auto *p = static_cast<const char *>(data);
    while (size) {
        ssize_t sent = send(fd, p, size, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent <= 0)
            throw ClientError(Kind::closed, std::string("local-first reduction: the other side "
                                                        "of the host's socket is gone (") +
                                                std::strerror(errno) + ")");
        p += sent;
        size -= static_cast<size_t>(sent);
    }
}

// False at a clean end before the first byte; throws on a short read.
bool read_all(int fd, void *data, size_t size)
{
    auto *p = static_cast<char *>(data);
    size_t got = 0;
    while (got < size) {
        ssize_t n = recv(fd, p + got, size - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 && got == 0)
            return false;
        if (n <= 0)
            throw ClientError(Kind::closed,
                              "local-first reduction: the host's socket ended mid-message");
        got += static_cast<size_t>(n);
    }
    return true;
}

sockaddr_un address_of(const std::string &name, socklen_t &length)
{
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (name.size() + 1 > sizeof(a.sun_path))
        throw ClientError(Kind::invalid, "local-first reduction: socket name too long: " + name);
    // Abstract namespace: a leading NUL, nothing on disk.
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    return a;
}

int unix_socket()
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        throw ClientError(Kind::invalid, std::string("socket: ") + std::strerror(errno));
    // Tensors cross it whole: large buffers, fewer wake-ups.
    int buffer = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buffer, sizeof(buffer)) == 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof(buffer)) == 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
    return fd;
}

std::pair<Kind, std::string> error_of(const std::exception_ptr &error)
{
    try {
        std::rethrow_exception(error);
    } catch (const ClientError &e) {
        return {e.kind(), e.what()};
    } catch (const std::exception &e) {
        return {Kind::invalid, e.what()};
    }
}

}  // namespace

std::string local_group_name(const std::string &aggregator, uint32_t job,
                             const std::string &local_address)
{
    return "xagg/local-first/" + aggregator + "/" + std::to_string(job) + "/" + local_address;
}

LocalLeader::LocalLeader(const std::string &name, unsigned local_ranks, LocalHello hello,
                         std::chrono::seconds wait)
    : peers_(local_ranks - 1, -1)
{
    socklen_t length = 0;
    const sockaddr_un a = address_of(name, length);
    int listener = unix_socket();
    if (bind(listener, reinterpret_cast<const sockaddr *>(&a), length) != 0 ||
        listen(listener, static_cast<int>(local_ranks)) != 0) {
        const int err = errno;
        close(listener);
        throw ClientError(Kind::invalid, "local-first reduction: cannot listen on @" + name + " (" +
                                             std::strerror(err) +
                                             "; is another leader of this job on this host?)");
    }
    const auto deadline = Clock::now() + wait;
    try {
        for (unsigned joined = 0; joined + 1 < local_ranks;) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
            pollfd p{listener, POLLIN, 0};
            if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0)
                throw ClientError(Kind::timeout,
                                  "local-first reduction: only " + std::to_string(joined + 1) +
                                      " of this host's " + std::to_string(local_ranks) +
                                      " ranks came in " + std::to_string(wait.count()) + " s");
            int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            Greeting g;
            if (!read_all(fd, &g, sizeof(g)) || g.magic != kMagic || g.local_rank == 0 ||
                g.local_rank >= local_ranks || peers_[g.local_rank - 1] >= 0) {
                close(fd);  // not one of ours, or a rank twice: not counted
                continue;
            }
            HelloMessage h;
            h.members = hello.members;
            h.chunk_elems = hello.chunk_elems;
            write_all(fd, &h, sizeof(h));
            peers_[g.local_rank - 1] = fd;
            joined++;
        }
    } catch (...) {
        close(listener);
        for (int fd : peers_)
            if (fd >= 0)
                close(fd);
        throw;
    }
    close(listener);  // every rank is in: no one else may join
    sender_ = std::thread([this] { send_results(); });
}

LocalLeader::~LocalLeader()
{
    {
        std::lock_guard g(lock_);
        stop_ = true;
    }
    queued_.notify_all();
    sender_.join();
    for (int fd : peers_)
        close(fd);
}

std::vector<std::vector<int32_t>> LocalLeader::gather(LocalKind kind, size_t n)
{
    try {
        return read_calls(kind, n);
    } catch (...) {
        // A rank gone, or a call out of step: the host's group is broken. Ending every
        // connection fails each rank's calls (those already read too) instead of leaving them
        // waiting for a result that will not come; the leader's own call throws.
        for (int fd : peers_)
            shutdown(fd, SHUT_RDWR);
        throw;
    }
}

std::vector<std::vector<int32_t>> LocalLeader::read_calls(LocalKind kind, size_t n)
{
    std::vector<std::vector<int32_t>> buffers(peers_.size());
    for (size_t i = 0; i < peers_.size(); i++) {
        CallHeader h;
        if (!read_all(peers_[i], &h, sizeof(h)) || h.magic != kMagic)
            throw ClientError(Kind::closed, "local-first reduction: local rank " +
                                                std::to_string(i + 1) + " hung up");
        if (h.kind != static_cast<uint32_t>(kind) || h.n != n)
            throw ClientError(
                Kind::invalid,
                "local-first reduction: local rank " + std::to_string(i + 1) + " all-reduces " +
                    std::to_string(h.n) +
                    (h.kind == static_cast<uint32_t>(LocalKind::floats) ? " floats" : " int32s") +
                    " where local rank 0 all-reduces " + std::to_string(n) +
                    (kind == LocalKind::floats ? " floats" : " int32s") +
                    ": the ranks of a host must call the same collectives in the "
                    "same order");
        buffers[i].resize(n);
        if (n && !read_all(peers_[i], buffers[i].data(), n * sizeof(int32_t)))
            throw ClientError(Kind::closed, "local-first reduction: local rank " +
                                                std::to_string(i + 1) + " hung up");
    }
    return buffers;
}

void LocalLeader::scatter(std::shared_ptr<Op> op, std::vector<std::vector<int32_t>> buffers)
{
    {
        std::lock_guard g(lock_);
        pending_.push_back({std::move(op), std::move(buffers)});
    }
    queued_.notify_all();
}

void LocalLeader::send_results()
{
    for (;;) {
        Pending next;
        {
            std::unique_lock g(lock_);
            queued_.wait(g, [&] { return stop_ || !pending_.empty(); });
            if (pending_.empty())
                return;
            next = std::move(pending_.front());
            pending_.pop_front();
        }
        ResultHeader h;
        std::string message;
        {
            std::unique_lock g(next.op->lock);
            next.op->finished.wait(g, [&] { return next.op->done; });
            h.contributors = next.op->report.contributors;
            h.nonfinite_blocks = static_cast<uint32_t>(next.op->report.nonfinite_blocks);
            if (next.op->error) {
                auto [kind, what] = error_of(next.op->error);
                h.status = static_cast<uint32_t>(kind) + 1;
                message = what;
            }
        }
        for (size_t i = 0; i < peers_.size(); i++) {
            try {
                h.n = h.status ? message.size() : next.buffers[i].size();
                write_all(peers_[i], &h, sizeof(h));
                if (h.status)
                    write_all(peers_[i], message.data(), message.size());
                else
                    write_all(peers_[i], next.buffers[i].data(), h.n * sizeof(int32_t));
            } catch (const ClientError &) {
                // That rank is gone; its next call finds the leader's gather failing too.
            }
        }
    }
}

LocalMember::LocalMember(const std::string &name, unsigned local_rank, std::chrono::seconds wait)
{
    socklen_t length = 0;
    const sockaddr_un a = address_of(name, length);
    const auto deadline = Clock::now() + wait;
    for (;;) {
        fd_ = unix_socket();
        if (connect(fd_, reinterpret_cast<const sockaddr *>(&a), length) == 0)
            break;
        close(fd_);
        fd_ = -1;
        if (Clock::now() > deadline)
            throw ClientError(Kind::timeout,
                              "local-first reduction: no leader (local rank 0) "
                              "listening on @" +
                                  name + " after " + std::to_string(wait.count()) + " s");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Greeting g;
    g.local_rank = local_rank;
    HelloMessage h;
    try {
        write_all(fd_, &g, sizeof(g));
        if (!read_all(fd_, &h, sizeof(h)) || h.magic != kMagic)
            throw ClientError(Kind::refused,
                              "local-first reduction: the leader turned local "
                              "rank " +
                                  std::to_string(local_rank) +
                                  " away (a rank of that number is in already?)");
    } catch (...) {
        close(fd_);
        throw;
    }
    hello_ = {h.members, h.chunk_elems};
    reader_ = std::thread([this] { read_results(); });
}

LocalMember::~LocalMember()
{
    shutdown(fd_, SHUT_RDWR);  // ends the reader
    reader_.join();
    close(fd_);
}

std::shared_ptr<Op> LocalMember::submit(float *floats, int32_t *ints, size_t n)
{
    auto op = std::make_shared<Op>();
    op->floats = floats;
    op->ints = ints;
    op->n = n;
    op->started = Clock::now();
    CallHeader h;
    h.kind = static_cast<uint32_t>(floats ? LocalKind::floats : LocalKind::ints);
    h.n = n;
    // One call's bytes never interleave with another's, and calls queue in the order sent. The
    // reader takes only lock_, so a write blocked on a full socket never holds up a result.
    std::lock_guard w(write_lock_);
    {
        std::lock_guard g(lock_);
        if (!failure_.empty())
            throw ClientError(Kind::closed, failure_);
        pending_.push_back(op);
    }
    write_all(fd_, &h, sizeof(h));
    write_all(fd_, floats ? static_cast<const void *>(floats) : ints, n * sizeof(int32_t));
    return op;
}

void LocalMember::read_results()
{
    try {
        for (;;) {
            ResultHeader h;
            if (!read_all(fd_, &h, sizeof(h)) || h.magic != kMagic)
                return fail_pending("local-first reduction: the leader (local rank 0) is gone");
            std::shared_ptr<Op> op;
            {
                std::lock_guard g(lock_);
                if (pending_.empty())
                    return fail_pending("local-first reduction: a result for no call");
                op = pending_.front();
                pending_.pop_front();
            }
            std::exception_ptr error;
            if (h.status) {
                std::string message(h.n, '\0');
                read_all(fd_, message.data(), message.size());
                error =
                    std::make_exception_ptr(ClientError(static_cast<Kind>(h.status - 1), message));
            } else if (h.n != op->n) {
                return fail_pending("local-first reduction: a result of another size");
            } else {
                void *into = op->floats ? static_cast<void *>(op->floats) : op->ints;
                read_all(fd_, into, h.n * sizeof(int32_t));
            }
            std::lock_guard g(op->lock);
            op->report.contributors = h.contributors;
            op->report.nonfinite_blocks = h.nonfinite_blocks;
            op->report.seconds = std::chrono::duration<double>(Clock::now() - op->started).count();
            op->error = error;
            op->done = true;
            op->finished.notify_all();
        }
    } catch (const ClientError &e) {
        fail_pending(e.what());
    }
}

void LocalMember::fail_pending(const std::string &why)
{
    std::deque<std::shared_ptr<Op>> failed;
    {
        std::lock_guard g(lock_);
        failure_ = why;
        failed.swap(pending_);
    }
    for (auto &op : failed) {
        std::lock_guard g(op->lock);
        op->error = std::make_exception_ptr(ClientError(Kind::closed, why));
        op->done = true;
        op->finished.notify_all();
    }
}

}  // namespace xagg::client
