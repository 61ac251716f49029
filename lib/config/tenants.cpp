// SPDX-License-Identifier: MIT
#include "lib/config/tenants.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "lib/config/config.hpp"
#include "xagg/proto.h"

namespace xagg::daemon {

std::string Tenant::jobs_text() const
{
    return std::to_string(first_job) + "-" + std::to_string(last_job);
}

void parse_job_range(const std::string &text, uint32_t &first, uint32_t &last)
{
    const auto id = [](const std::string &s) {
        if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos)
            throw std::invalid_argument("'" + s + "' is not a job id");
        unsigned long v = std::stoul(s);
        if (v < 1 || v > XAGG_MAX_JOB_ID)
            throw std::invalid_argument("job ids are 1.." + std::to_string(XAGG_MAX_JOB_ID));
        return static_cast<uint32_t>(v);
    };
    const size_t dash = text.find('-');
    first = id(text.substr(0, dash));
    last = dash == std::string::npos ? first : id(text.substr(dash + 1));
    if (last < first)
        throw std::invalid_argument("'" + text + "': the range ends before it starts");
}

namespace {

bool valid_name(const std::string &name)
{
    if (name.empty() || name.size() > 32)
        return false;
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    return true;
}

}  // namespace

std::vector<Tenant> read_tenants_file(const std::string &path, const std::string &admin_token)
{
    require_private_file("control_tenants_file", path);
    std::ifstream in(path);
    if (!in)
        throw std::runtime_error("control_tenants_file " + path + ": cannot be read");
    return parse_tenants(in, path, admin_token);
}

std::vector<Tenant> parse_tenants(std::istream &in, const std::string &source,
                                  const std::string &admin_token)
{
    std::vector<Tenant> tenants;
    std::string line;
    for (unsigned number = 1; std::getline(in, line); number++) {
        const auto fail = [&](const std::string &why) {
            throw std::runtime_error(source + ":" + std::to_string(number) + ": " + why);
        };
        if (const size_t hash = line.find('#'); hash != std::string::npos)
            line.resize(hash);
        std::istringstream words(line);
        std::string name, range, token, extra;
        if (!(words >> name))
            continue;  // blank or comment
        if (!(words >> range >> token) || (words >> extra))
            fail("expected NAME FIRST-LAST TOKEN");
        if (!valid_name(name))
            fail("tenant name '" + name + "': 1-32 of a-z, 0-9, '_' and '-'");
        Tenant t{name, 0, 0, token};
        try {
            parse_job_range(range, t.first_job, t.last_job);
        } catch (const std::invalid_argument &e) {
            fail(std::string("tenant ") + name + ": " + e.what());
        }
        if (token.size() < 16)
            fail("tenant " + name + ": the token must be at least 16 characters");
        if (token == admin_token)
            fail("tenant " + name + ": the token is the admin token (control_token_file)");
        for (const Tenant &other : tenants) {
            if (other.name == name)
                fail("tenant " + name + " is named twice");
            if (other.token == token)
                fail("tenant " + name + " has the token of tenant " + other.name);
            if (t.first_job <= other.last_job && other.first_job <= t.last_job)
                fail("tenant " + name + "'s jobs " + t.jobs_text() + " overlap tenant " +
                     other.name + "'s " + other.jobs_text());
        }
        tenants.push_back(std::move(t));
    }
    return tenants;
}

std::string tenant_line(const Tenant &t)
{
    return t.name + " " + t.jobs_text() + " " + t.token;
}

std::string new_token()
{
    unsigned char bytes[16];
    if (getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes)))
        throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    static const char kHex[] = "0123456789abcdef";
    std::string token;
    for (unsigned char b : bytes) {
        token += kHex[b >> 4];
        token += kHex[b & 15];
    }
    return token;
}

}  // namespace xagg::daemon
