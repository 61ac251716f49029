// SPDX-License-Identifier: MIT
// The control API: one JSON object per line in, one per line out. Every request is validated in
// full before anything changes; a refused request changes nothing.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "fastpath.hpp"
#include "jobs.hpp"
#include "stragglers.hpp"

namespace xagg::daemon {

// Where job changes are mirrored: the fast path's maps in the daemon, a recorder in unit tests.
class Datapath {
public:
    virtual ~Datapath() = default;
    virtual void put_job(const Job &job) = 0;
    virtual void delete_job(uint32_t job_id) = 0;
    virtual void put_member(uint32_t job_id, const Member &member) = 0;
    virtual void delete_member(uint32_t job_id, uint32_t rank) = 0;
    virtual void clear_region(uint32_t base, uint32_t chunks) = 0;
    virtual Counters counters() const = 0;
    // The host-side parameter server's outcomes, by the same names; zero where there is none.
    virtual Counters host_counters() const { return {}; }
};

// Requests longer than this are refused without being parsed.
inline constexpr size_t kMaxRequestBytes = 64 * 1024;

class ControlApi {
public:
    // `on_change` runs after every request that changed the job table (to persist it).
    ControlApi(JobTable &jobs, Datapath &datapath, uint16_t xagg_port,
               std::function<void()> on_change, StragglerWatch *stragglers = nullptr);

    // One request line in, one response line out (without the newline).
    std::string handle_line(const std::string &line);
    nlohmann::json handle(const nlohmann::json &request);

    uint64_t requests() const { return requests_; }
    uint64_t errors() const { return errors_; }

private:
    nlohmann::json create_job(const nlohmann::json &r);
    nlohmann::json delete_job(const nlohmann::json &r);
    nlohmann::json join(const nlohmann::json &r);
    nlohmann::json leave(const nlohmann::json &r);
    nlohmann::json list_jobs(const nlohmann::json &r);
    nlohmann::json show_job(const nlohmann::json &r);
    nlohmann::json stats(const nlohmann::json &r);
    nlohmann::json set_log_level(const nlohmann::json &r);
    nlohmann::json describe(uint32_t job_id) const;

    JobTable &jobs_;
    Datapath &datapath_;
    uint16_t xagg_port_;
    std::function<void()> on_change_;
    StragglerWatch *stragglers_;
    uint64_t requests_ = 0, errors_ = 0;
};

}  // namespace xagg::daemon
