// SPDX-License-Identifier: MIT
#include "lib/fastpath/bpf_log.hpp"

#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace xagg {
namespace {

thread_local LibraryLogCapture *current_capture = nullptr;
thread_local std::string *current_text = nullptr;

void emit(const char *library, bool is_debug, const char *fmt, va_list ap)
{
    // The verifier log arrives as one message of many kilobytes: size the buffer to it.
    va_list copy;
    va_copy(copy, ap);
    int len = vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    if (len < 0)
        return;
    std::string line(static_cast<size_t>(len) + 1, '\0');
    vsnprintf(line.data(), line.size(), fmt, ap);
    line.pop_back();
    if (current_text) {
        *current_text += line;
        return;
    }
    if (!is_debug)
        spdlog::debug("{}: {}", library, line);
}

int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    emit("libbpf", level == LIBBPF_DEBUG, fmt, ap);
    return 0;
}

}  // namespace

void route_library_logs()
{
    static std::once_flag once;
    std::call_once(once, [] { libbpf_set_print(libbpf_print); });
}

LibraryLogCapture::LibraryLogCapture() : outer_(current_capture)
{
    route_library_logs();
    current_capture = this;
    current_text = &text_;
}

LibraryLogCapture::~LibraryLogCapture()
{
    current_capture = outer_;
    current_text = outer_ ? &outer_->text_ : nullptr;
    if (!text_.empty())
        spdlog::debug("libbpf said:\n{}", text_);
}

std::string LibraryLogCapture::tail(size_t max_lines) const
{
    size_t pos = text_.size();
    for (size_t n = 0; n <= max_lines && pos > 0; n++) {
        size_t nl = text_.rfind('\n', pos - 1);
        if (nl == std::string::npos) {
            pos = 0;
            break;
        }
        pos = nl;
    }
    return text_.substr(pos);
}

}  // namespace xagg
