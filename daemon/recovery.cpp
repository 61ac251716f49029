// SPDX-License-Identifier: MIT
#include "daemon/recovery.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>

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

Recovery recover(const StateFile &state, const MoveMarker &marker, JobTable &jobs, FastStore *fast,
                 HostStore &host, bool maps_reused)
{
    Recovery r;
    r.crashed_mid_move = marker.present();
    if (state.exists()) {
        state.load_into(jobs);
        r.jobs = jobs.jobs().size();
        for (const auto &[id, job] : jobs.jobs())
            host.put_job(job);  // members included
        if (fast && (!maps_reused || r.crashed_mid_move)) {
            for (const auto &[id, job] : jobs.jobs()) {
                fast->clear_region(job.region_base, job.region_chunks);
                fast->put_job(job);
                for (const auto &[rank, m] : job.members)
                    fast->put_member(id, m);
            }
            r.maps_rebuilt = true;
        }
    }
    marker.clear();
    return r;
}

}  // namespace xagg::daemon
