// SPDX-License-Identifier: MIT
#include "daemon/datapath/host_slots.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace xagg::daemon {
namespace {

namespace fs = std::filesystem;

// The file: one page of header, then two slots per position.
struct FileHeader {
    char magic[8];
    uint32_t version;
    uint32_t job_id;
    uint32_t tag;
    uint32_t positions;
    uint32_t slot_bytes;  // sizeof(xagg_slot): a build with another slot layout starts afresh
};
constexpr char kMagic[8] = {'X', 'A', 'G', 'G', 'S', 'L', 'O', 'T'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 4096;
constexpr size_t kPairBytes = 2 * sizeof(xagg_slot);

[[noreturn]] void fail(const std::string &what)
{
    throw std::system_error(errno, std::generic_category(), what);
}

// A job's file: job-ID.slots.
std::string file_name(uint32_t job_id)
{
    return "job-" + std::to_string(job_id) + ".slots";
}

}  // namespace

std::string HostSlots::path(const std::string &dir, uint32_t job_id)
{
    return dir + "/" + file_name(job_id);
}

void HostSlots::remove_files(const std::string &dir, const std::function<bool(uint32_t)> &keep)
{
    std::error_code ec;
    for (const auto &entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename();
        uint32_t job_id = 0;
        if (std::sscanf(name.c_str(), "job-%u", &job_id) == 1 && name == file_name(job_id) &&
            !(keep && keep(job_id)))
            fs::remove(entry.path(), ec);
    }
}

HostSlots::HostSlots(const std::string &dir, uint32_t job_id, uint32_t tag, uint32_t positions,
                     uint32_t parts)
    : tag_(tag), positions_(positions), reserved_from_(positions)
{
    const size_t slot_bytes = size_t{positions} * kPairBytes;
    if (dir.empty()) {
        bytes_ = slot_bytes ? slot_bytes : 1;
        map_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (map_ == MAP_FAILED)
            fail("mapping the host path's slots of job " + std::to_string(job_id));
        slots_ = static_cast<xagg_slot *>(map_);
        return;
    }
    fs::create_directories(dir);
    path_ = path(dir, job_id);
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0)
        fail("opening " + path_);
    bytes_ = kHeaderBytes + slot_bytes;
    FileHeader want{};
    std::memcpy(want.magic, kMagic, sizeof(kMagic));
    want.version = kVersion;
    want.job_id = job_id;
    want.tag = tag;
    want.positions = positions;
    want.slot_bytes = sizeof(xagg_slot);
    FileHeader have{};
    const off_t size = lseek(fd_, 0, SEEK_END);
    recovered_ = size == static_cast<off_t>(bytes_) &&
                 pread(fd_, &have, sizeof(have), 0) == static_cast<ssize_t>(sizeof(have)) &&
                 std::memcmp(&have, &want, sizeof(want)) == 0;
    if (!recovered_) {
        // Another job's, an older layout's, or new: from nothing (the file is sparse; reserve()
        // allocates what the host path serves).
        if (ftruncate(fd_, 0) != 0 || ftruncate(fd_, static_cast<off_t>(bytes_)) != 0 ||
            pwrite(fd_, &want, sizeof(want), 0) != static_cast<ssize_t>(sizeof(want)))
            fail("initialising " + path_);
    }
    map_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (map_ == MAP_FAILED) {
        map_ = nullptr;
        fail("mapping " + path_);
    }
    slots_ = reinterpret_cast<xagg_slot *>(static_cast<char *>(map_) + kHeaderBytes);
    if (recovered_)
        clear_torn(parts);
}

HostSlots::~HostSlots()
{
    if (map_)
        munmap(map_, bytes_);
    if (fd_ >= 0)
        close(fd_);
}

// Only the parts of the file that hold data are read (SEEK_DATA): reading a hole of a tmpfs file
// through the mapping would allocate it.
void HostSlots::clear_torn(uint32_t parts)
{
    for (off_t at = kHeaderBytes; at < static_cast<off_t>(bytes_);) {
        const off_t data = lseek(fd_, at, SEEK_DATA);
        if (data < 0)
            break;  // ENXIO: no data beyond
        off_t hole = lseek(fd_, data, SEEK_HOLE);
        if (hole < 0)
            hole = static_cast<off_t>(bytes_);
        const auto first = static_cast<uint32_t>((data - kHeaderBytes) / kPairBytes);
        const auto end = static_cast<uint32_t>(
            std::min<size_t>(positions_, (hole - kHeaderBytes + kPairBytes - 1) / kPairBytes));
        for (uint32_t position = first; position < end; position++)
            for (uint32_t parity : {0u, 1u}) {
                if (pair(position)[parity].lock.val == 0)
                    continue;
                // A jumbo chunk's parts are written as one: all of them go.
                const uint32_t lead = position / parts * parts;
                for (uint32_t p = lead; p < lead + parts && p < positions_; p++)
                    pair(p)[parity] = xagg_slot{};
                torn_++;
            }
        at = hole;
    }
}

void HostSlots::reserve(uint32_t first, uint32_t end)
{
    // The host path serves a suffix of the positions, which only moves: what lies at or beyond
    // reserved_from_ is allocated already, and a suffix that grows downwards allocates only what
    // it adds.
    if (end >= reserved_from_)
        end = reserved_from_;
    if (fd_ < 0 || end <= first)
        return;
    const off_t offset = static_cast<off_t>(kHeaderBytes + size_t{first} * kPairBytes);
    const off_t length = static_cast<off_t>(size_t{end - first} * kPairBytes);
    if (int err = posix_fallocate(fd_, offset, length))
        throw std::runtime_error(path_ + ": no room for the host path's slots of positions " +
                                 std::to_string(first) + "-" + std::to_string(end - 1) + " (" +
                                 std::strerror(err) + ")");
    if (end == reserved_from_)
        reserved_from_ = first;
}

void HostSlots::remove_file()
{
    if (!path_.empty())
        unlink(path_.c_str());
}

}  // namespace xagg::daemon
