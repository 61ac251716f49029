// SPDX-License-Identifier: MIT
#include "daemon/recovery.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/datapath/host_slots.hpp"
#include "daemon/jobs/job_entry.hpp"
#include "daemon/state_schema.hpp"

namespace xagg::daemon {

namespace fs = std::filesystem;

bool StateFile::exists() const
{
    return fs::exists(path_);
}

void StateFile::load_into(JobTable &jobs) const
{
    std::ifstream in(path_);
    nlohmann::json saved = nlohmann::json::parse(in, nullptr, false);
    if (saved.is_discarded())
        throw std::runtime_error(path_ + " is not valid JSON");
    try {
        jobs.restore(state::load(saved));
    } catch (const std::exception &e) {
        throw std::runtime_error(path_ + ": " + e.what());
    }
}

void StateFile::save(const JobTable &jobs) const
{
    const std::string tmp = path_ + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        // The table holds the job keys: readable by the daemon's user alone, set before they
        // are written.
        fs::permissions(tmp, fs::perms::owner_read | fs::perms::owner_write,
                        fs::perm_options::replace);
        out << state::save(jobs.jobs()).dump(2) << "\n";
        if (!out)
            throw std::runtime_error("cannot write " + tmp);
    }
    fs::rename(tmp, path_);
}

void StateFile::remove() const
{
    fs::remove(path_);
}

void MoveMarker::set() const
{
    std::ofstream{path_};
}

void MoveMarker::clear() const
{
    fs::remove(path_);
}

bool MoveMarker::present() const
{
    return fs::exists(path_);
}

void forget_orphaned_maps(const StateFile &state, const std::string &bpffs_dir)
{
    if (!state.exists())
        for (const char *name : kPinnedMapNames)
            fs::remove(bpffs_dir + "/" + name);
}

void forget_host_slots_of_other_jobs(const JobTable &jobs, const std::string &dir)
{
    HostSlots::remove_files(dir, [&](uint32_t id) { return jobs.find(id) != nullptr; });
}

// The job with no fast-path memory: the host path serves all of it.
static Job whole_on_host(const Job &job)
{
    Job on_host = job;
    on_host.region_positions = 0;
    return on_host;
}

// Every copy of the job's slots to the host path, which then serves the whole job.
static void merge_to_host(const Job &job, std::optional<std::pair<uint32_t, uint32_t>> routed,
                          FastMaps &fast, HostStore &host)
{
    host.put_job(whole_on_host(job));
    std::vector<std::pair<uint32_t, uint32_t>> copies{{job.region_base, job.region_positions}};
    if (routed && *routed != copies.front())
        copies.push_back(*routed);
    for (const auto &[base, positions] : copies)
        if (positions)
            fast.for_each_slot_batch(2 * base, 2 * positions,
                                     [&](uint32_t first_slot, std::span<const xagg_slot> batch) {
                                         host.merge_slots(job, first_slot / 2 - base, batch);
                                     });
}

Recovery recover(const StateFile &state, const MoveMarker &marker, JobTable &jobs, FastMaps *fast,
                 HostStore &host, bool maps_reused, std::chrono::microseconds grace)
{
    Recovery r;
    r.crashed_mid_move = marker.present();
    if (state.exists()) {
        state.load_into(jobs);
        r.jobs = jobs.jobs().size();
        if (fast && maps_reused && r.crashed_mid_move) {
            std::map<uint32_t, std::optional<std::pair<uint32_t, uint32_t>>> routed;
            for (const auto &[id, job] : jobs.jobs()) {
                routed[id] = fast->routed_region(id);
                fast->put_job(
                    job_spec(whole_on_host(job)));  // the programs stop adding into its slots
            }
            std::this_thread::sleep_for(grace);
            for (const auto &[id, job] : jobs.jobs()) {
                merge_to_host(job, routed[id], *fast, host);
                jobs.set_region(id, Region{0, 0});
            }
            r.layout_to_restore = true;
        } else {
            for (const auto &[id, job] : jobs.jobs())
                host.put_job(job);  // members included
        }
        if (fast && !maps_reused) {
            for (const auto &[id, job] : jobs.jobs()) {
                fast->clear_region(job.region_base, job.region_positions);
                fast->put_job(job_spec(job));
                for (const auto &[rank, m] : job.members)
                    fast->put_member(id, m.rank, m.addr, m.port);
            }
            r.maps_rebuilt = true;
        }
    }
    marker.clear();
    return r;
}

}  // namespace xagg::daemon
