// SPDX-License-Identifier: MIT
// A job key (xagg_job.key, docs/PROTOCOL.md "The job key") as text: 16 lowercase hex digits,
// the form the control API's join reply, the state file and `xaggctl worker join` use. Text and
// not a JSON number because 64-bit numbers do not survive every JSON reader (above 2^53).
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace xagg {

inline std::string job_key_text(uint64_t key)
{
    char text[17];
    std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(key));
    return text;
}

// The key written as 16 hex digits (either case), or nullopt; zero is no key (results carry it).
inline std::optional<uint64_t> parse_job_key(const std::string &text)
{
    if (text.size() != 16)
        return std::nullopt;
    uint64_t key = 0;
    for (char c : text) {
        int digit = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
        if (digit < 0)
            return std::nullopt;
        key = key << 4 | static_cast<uint64_t>(digit);
    }
    if (key == 0)
        return std::nullopt;
    return key;
}

}  // namespace xagg
