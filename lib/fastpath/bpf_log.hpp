// SPDX-License-Identifier: MIT
// Where libbpf's own messages go. They are chatty, so they are logged at debug level, except while
// a LibraryLogCapture is alive on the thread: then they are collected, so that a failed load can
// carry the verifier's words in its error message instead of scattering them over stderr.
#pragma once

#include <string>

namespace xagg {

// Installs the print callbacks once per process; idempotent.
void route_library_logs();

class LibraryLogCapture {
public:
    LibraryLogCapture();
    ~LibraryLogCapture();
    LibraryLogCapture(const LibraryLogCapture &) = delete;
    LibraryLogCapture &operator=(const LibraryLogCapture &) = delete;

    // The last `max_lines` lines captured so far.
    std::string tail(size_t max_lines = 30) const;

private:
    std::string text_;
    LibraryLogCapture *outer_;
};

}  // namespace xagg
