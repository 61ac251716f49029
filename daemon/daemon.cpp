// SPDX-License-Identifier: MIT
#include "daemon.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <cctype>
#include <cerrno>
#include <ctime>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <fstream>
#include <system_error>
#include <thread>
#include <vector>

#include "cluster.hpp"
#include "control.hpp"
#include "control_server.hpp"
#include "fastpath.hpp"
#include "host_ps.hpp"
#include "jobs.hpp"
#include "metrics.hpp"
#include "mtu.hpp"
#include "netns.hpp"
#include "progress.hpp"
#include "stragglers.hpp"
#include "tls.hpp"

namespace xagg::daemon {
namespace {

namespace fs = std::filesystem;

constexpr const char *kMapNames[] = {"jobs", "members", "slots", "counters"};

[[noreturn]] void fail_errno(const std::string &what)
{
    throw std::system_error(errno, std::generic_category(), what);
}

JobSpec job_spec(const Job &job)
{
    JobSpec spec;
    spec.id = job.id;
    spec.members = job.member_bitmap();
    spec.region_base = job.region_base;
    spec.region_chunks = job.region_chunks;
    spec.host_path = job.host_path;
    spec.fanout = job.fanout;
    spec.group = job.group;
    spec.group_port = job.group_port;
    spec.tag = job.tag;
    return spec;
}

// How long a move took, and the longest any chunk's traffic was held by one of its steps.
class MoveTimer {
public:
    void hold() { held_ = Clock::now(); }
    void released()
    {
        longest_ = std::max(longest_, Clock::now() - held_);
        steps_++;
    }
    void log(uint32_t job, uint32_t chunks, const char *where) const
    {
        using ms = std::chrono::duration<double, std::milli>;
        spdlog::info("job {}: {} chunks moved {} in {} steps, {:.1f} ms; longest hold {:.2f} ms",
                     job, chunks, where, steps_, ms(Clock::now() - started_).count(),
                     ms(longest_).count());
    }

private:
    using Clock = std::chrono::steady_clock;
    Clock::time_point started_ = Clock::now(), held_;
    Clock::duration longest_{};
    unsigned steps_ = 0;
};

// Every change goes to the fast path's maps (unless the node runs host path only) and to the
// host-side parameter server.
class BothPaths : public Datapath {
public:
    // `before_move` runs before any slot moves (to mark the maps as mid-move on disk).
    BothPaths(FastPath *fast, HostPs &host, std::function<void()> before_move)
        : fast_(fast), host_(host), before_move_(std::move(before_move))
    {
    }
    void put_job(const Job &job) override
    {
        host_.put_job(job);
        if (fast_)
            fast_->put_job(job_spec(job));
    }
    void delete_job(uint32_t id) override
    {
        if (fast_)
            fast_->delete_job(id);
        host_.delete_job(id);
    }
    void put_member(uint32_t id, const Member &m) override
    {
        host_.put_member(id, m);
        if (fast_)
            fast_->put_member(id, m.rank, m.addr, m.port);
    }
    void delete_member(uint32_t id, uint32_t rank) override
    {
        if (fast_)
            fast_->delete_member(id, rank);
        host_.delete_member(id, rank);
    }
    // Without a fast path every region is empty and nothing ever moves. Both moves go a step
    // of kMoveStep chunks at a time, so that each chunk is held only while its own step copies
    // (a few milliseconds), however large the job.
    void shrink_fast(const Job &job, uint32_t keep) override
    {
        before_move_();
        MoveTimer timer;
        for (uint32_t end = job.region_chunks; end > keep;) {
            const uint32_t first = end - std::min(kMoveStep, end - keep);
            Job step = job;
            step.region_chunks = first;
            timer.hold();
            host_.hold(job.id, first, end);
            fast_->put_job(job_spec(step));
            // A program that looked the job up before the update may still be adding into
            // these slots: XDP runs to completion in softirq within microseconds, so this wait
            // outlasts any such packet before the slots are read.
            std::this_thread::sleep_for(kGrace);
            fast_->for_each_slot_batch(2 * (job.region_base + first), 2 * (end - first),
                                       [&](uint32_t slot, std::span<const xagg_slot> batch) {
                                           host_.import_slots(job, slot / 2 - job.region_base,
                                                              batch);
                                       });
            host_.put_job(step);
            host_.release(job.id);
            timer.released();
            end = first;
        }
        timer.log(job.id, job.region_chunks - keep, "to the host path");
    }
    void grow_fast(const Job &job, uint32_t from) override
    {
        before_move_();
        MoveTimer timer;
        for (uint32_t first = from; first < job.region_chunks;) {
            const uint32_t end = first + std::min(kMoveStep, job.region_chunks - first);
            Job step = job;
            step.region_chunks = end;
            timer.hold();
            host_.hold(job.id, first, end);  // returns once no host thread adds into them
            // Only chunks the host path holds something of: a slot without this job's tag and
            // chunk counts as empty on the fast path, so nothing else needs writing.
            HostPs::Exported state = host_.export_slots(job.id, first, end);
            std::vector<uint32_t> keys;
            keys.reserve(state.slots.size());
            for (uint32_t chunk : state.chunks)
                for (uint32_t parity : {0u, 1u})
                    keys.push_back(2 * (job.region_base + chunk) + parity);
            fast_->write_slots(keys, state.slots);
            fast_->put_job(job_spec(step));
            host_.put_job(step);
            host_.release(job.id);
            timer.released();
            first = end;
        }
        if (job.region_chunks > from)
            timer.log(job.id, job.region_chunks - from, "to the fast path");
        // The job as the table has it now (also when nothing came in: a region that only
        // shrank, or moved to nothing).
        fast_->put_job(job_spec(job));
        host_.put_job(job);
    }
    std::vector<SlotState> slot_states(const Job &job) const override
    {
        std::vector<SlotState> states;
        if (fast_ && job.region_chunks)  // a batch at a time: no copy of the whole region
            fast_->for_each_slot_batch(2 * job.region_base, 2 * job.region_chunks,
                                       [&](uint32_t first, std::span<const xagg_slot> batch) {
                                           append_region_states(batch, first - 2 * job.region_base,
                                                                states);
                                       });
        auto more = host_.slot_states(job);
        states.insert(states.end(), more.begin(), more.end());
        return states;
    }
    Counters counters() const override { return fast_ ? fast_->counters() : Counters{}; }
    Counters host_counters() const override { return host_.counters(); }

private:
    static constexpr auto kGrace = std::chrono::milliseconds(2);
    static constexpr uint32_t kMoveStep = 512;  // chunks: 3 MiB of slots
    FastPath *fast_;
    HostPs &host_;
    std::function<void()> before_move_;
};

// The job table on disk: written to a temporary file and renamed, so a crash mid-write leaves
// the previous version.
class StateFile {
public:
    explicit StateFile(const std::string &dir) : path_(dir + "/jobs.json") {}
    bool exists() const { return fs::exists(path_); }
    nlohmann::json read() const
    {
        std::ifstream in(path_);
        nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_discarded())
            throw std::runtime_error(path_ + " is not valid JSON");
        return j;
    }
    void write(const nlohmann::json &j) const
    {
        std::string tmp = path_ + ".tmp";
        {
            std::ofstream out(tmp, std::ios::trunc);
            out << j.dump(2) << "\n";
            if (!out)
                throw std::runtime_error("cannot write " + tmp);
        }
        fs::rename(tmp, path_);
    }
    void remove() const { fs::remove(path_); }
    const std::string &path() const { return path_; }

private:
    std::string path_;
};

void set_log_level(const std::string &level)
{
    spdlog::set_level(spdlog::level::from_str(level));
}

class Server {
public:
    Server(const Config &config) : config_(config) {}

    int run()
    {
        sigset_t signals;
        sigemptyset(&signals);
        for (int s : {SIGTERM, SIGINT, SIGHUP})
            sigaddset(&signals, s);
        sigprocmask(SIG_BLOCK, &signals, nullptr);
        int sfd = signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0)
            fail_errno("signalfd");

        if (!config_.netns.empty())
            sys::enter_netns(config_.netns);
        fs::create_directories(config_.bpffs_dir);
        fs::create_directories(config_.state_dir);
        StateFile state(config_.state_dir);
        // Pinned maps without a saved job table hold jobs nobody knows: start from nothing.
        if (!state.exists())
            for (const char *name : kMapNames)
                fs::remove(config_.bpffs_dir + "/" + name);

        const bool host_only = config_.datapath == "host";
        if (std::string problem = sys::chunk_mtu_problem(config_.interface); !problem.empty())
            throw std::runtime_error(problem);
        std::unique_ptr<FastPath> fast;
        if (host_only) {
            spdlog::warn(
                "datapath = host: no XDP fast path; the host parameter server serves "
                "every job on {}",
                config_.interface);
        } else {
            FastPathConfig fpc;
            fpc.port = config_.port;
            fpc.max_chunks = config_.max_chunks;
            fpc.max_jobs = config_.max_jobs;
            fpc.pin_dir = config_.bpffs_dir;
            fast = std::make_unique<FastPath>(fpc);
            fast->attach(config_.interface,
                         config_.xdp_mode == "skb" ? AttachMode::skb : AttachMode::native);
            if (config_.xdp_mode == "skb")
                spdlog::warn("XDP attached in skb (generic) mode: 3-4x slower than native");
            spdlog::info("attached to {} ({} mode), port {}, {} chunks of fast-path memory",
                         config_.interface, config_.xdp_mode, config_.port, config_.max_chunks);
        }

        in_addr group_base{};
        inet_pton(AF_INET, config_.group_base.c_str(), &group_base);
        JobTable jobs(host_only ? 0 : config_.max_chunks, config_.max_jobs, group_base,
                      config_.min_job_chunks, *sched::parse_policy(config_.memory_policy));
        HostPs host(config_.port, config_.interface, config_.host_ps_threads);
        // A crash in the middle of moving memory leaves the pinned maps in neither the saved
        // layout nor the next: this marker says so, and the next start rebuilds the maps from
        // the saved table rather than trust them.
        const std::string moving_marker = config_.state_dir + "/moving";
        BothPaths datapath(fast.get(), host, [&] { std::ofstream{moving_marker}; });
        const bool crashed_mid_move = fs::exists(moving_marker);
        if (state.exists()) {
            jobs.load_json(state.read());
            for (const auto &[id, job] : jobs.jobs())
                host.put_job(job);  // members included
            if (fast && (!fast->reused_pinned_maps() || crashed_mid_move)) {
                // The maps are new (e.g. after a reboot): write the jobs back into them. Sums in
                // flight are lost; workers' retransmissions rebuild them.
                for (const auto &[id, job] : jobs.jobs()) {
                    fast->clear_region(job.region_base, job.region_chunks);
                    fast->put_job(job_spec(job));
                    for (const auto &[rank, m] : job.members)
                        fast->put_member(id, rank, m.addr, m.port);
                }
            }
            if (crashed_mid_move)
                spdlog::warn(
                    "the last run stopped while moving fast-path memory: the maps were "
                    "rebuilt from {}; sums in flight are rebuilt by retransmission",
                    state.path());
            else
                spdlog::info("recovered {} jobs from {}{}", jobs.jobs().size(), state.path(),
                             fast && fast->reused_pinned_maps() ? " with their pinned maps" : "");
        }
        fs::remove(moving_marker);
        StragglerWatch stragglers;
        ControlApi api(
            jobs, datapath, config_.port,
            [&] {
                state.write(jobs.to_json());
                fs::remove(moving_marker);
            },
            &stragglers);
        api.set_node_status([&] {
            NodeStatus n;
            n.interface = config_.interface;
            n.datapath = config_.datapath;
            n.xdp_mode = config_.xdp_mode;
            if (fast)
                n.xdp = fast->attachment();
            n.control_socket = config_.control_socket;
            n.control_tcp_address = config_.control_tcp_address;
            n.metrics_address = config_.metrics_address;
            return n;
        });
        ControlServer control(
            [&](const std::string &line, bool remote) {
                std::lock_guard g(state_lock_);
                return api.handle_line(line, remote ? token_ : "");
            },
            ControlLimits{
                .max_connections = config_.control_max_connections,
                .request_timeout = std::chrono::milliseconds(config_.control_request_timeout_ms)});
        std::unique_ptr<MetricsServer> metrics;
        if (!config_.metrics_address.empty())
            metrics = std::make_unique<MetricsServer>(config_.metrics_address, [&] {
                std::lock_guard g(state_lock_);  // the job table belongs to the main loop
                MetricsSnapshot m;
                m.fast = datapath.counters();
                m.host = datapath.host_counters();
                for (const auto &[id, job] : jobs.jobs())
                    m.jobs.push_back(job);
                m.capacity_chunks = jobs.capacity_chunks();
                m.used_chunks = jobs.used_chunks();
                m.api_requests = api.requests();
                m.api_errors = api.errors();
                for (const auto &[id, job] : jobs.jobs())
                    m.straggler_events[id] = stragglers.total(id);
                m.uptime_seconds = api.uptime_seconds();
                m.control_events = control.counts();
                return m;
            });
        control.listen_unix(config_.control_socket, config_.control_socket_mode);
        spdlog::info("control API on {}", config_.control_socket);
        std::unique_ptr<ClusterAgent> cluster;
        if (!config_.etcd_endpoint.empty())
            cluster = start_cluster_agent(host_only ? 0 : config_.max_chunks);
        if (!config_.control_tcp_address.empty()) {
            token_ = read_token_file(config_.control_token_file);
            if (config_.control_tcp_plaintext) {
                control.listen_tcp(config_.control_tcp_address);
                spdlog::warn(
                    "control API on tcp {} WITHOUT TLS (control_tcp_plaintext): the "
                    "token travels in clear",
                    config_.control_tcp_address);
            } else {
                control.listen_tcp(
                    config_.control_tcp_address,
                    tls::server_context(config_.control_tls_cert, config_.control_tls_key,
                                        config_.control_tls_client_ca));
                spdlog::info("control API on tcp {} (TLS{}, token required)",
                             config_.control_tcp_address,
                             config_.control_tls_client_ca.empty() ? "" : ", client certificates");
            }
        }
        // systemd (Type=notify): ready once attached and serving; the watchdog is fed from
        // the main loop, so a hung loop gets the daemon restarted. Outside systemd these are
        // no-ops.
        sd_notifyf(0, "READY=1\nSTATUS=attached to %s, %zu jobs", config_.interface.c_str(),
                   jobs.jobs().size());
        uint64_t watchdog_usec = 0;
        const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
        // The loop wakes at least this often: to feed the watchdog and to look for stragglers.
        const int poll_ms = watchdog
                                ? std::min(kScanIntervalMs, static_cast<int>(watchdog_usec / 2000))
                                : kScanIntervalMs;
        auto last_scan = std::chrono::steady_clock::now();
        std::chrono::milliseconds scan_every(kScanIntervalMs);

        bool stop = false;
        while (!stop) {
            std::vector<pollfd> fds{{sfd, POLLIN, 0}};
            control.poll_fds(fds);
            if (watchdog)
                sd_notify(0, "WATCHDOG=1");
            if (std::chrono::steady_clock::now() - last_scan >= scan_every) {
                last_scan = std::chrono::steady_clock::now();
                std::lock_guard g(state_lock_);
                scan_stragglers(jobs, datapath, stragglers, api);
                // A scan copies every slot of every region (3 KiB each): large regions make
                // it costly, so it never takes more than 1/kScanShare of a core.
                scan_every =
                    std::max(std::chrono::milliseconds(kScanIntervalMs),
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                 (std::chrono::steady_clock::now() - last_scan) * kScanShare));
            }
            int deadline = control.next_deadline_ms();
            if (poll(fds.data(), fds.size(), deadline < 0 ? poll_ms : std::min(poll_ms, deadline)) <
                0) {
                if (errno == EINTR)
                    continue;
                fail_errno("poll");
            }
            if (fds[0].revents & POLLIN)
                stop = handle_signal(sfd);
            control.serve(fds, 1);
        }

        sd_notify(0, "STOPPING=1");
        cluster.reset();  // leaves etcd first: the other nodes re-place this node's partitions
        unlink(config_.control_socket.c_str());
        if (fast) {
            fast->detach();
            fast->unpin();
        }
        state.remove();
        spdlog::info("detached from {}; jobs ended, maps unpinned", config_.interface);
        return 0;
    }

private:
    static constexpr int kScanIntervalMs = 100;
    static constexpr int kScanShare = 20;

    std::unique_ptr<ClusterAgent> start_cluster_agent(uint32_t capacity_chunks) const
    {
        if (config_.advertise_address.empty())
            throw std::runtime_error(
                "etcd_endpoint needs advertise_address: the IPv4 workers "
                "send this node's chunks to");
        ClusterConfig c;
        c.etcd_endpoint = config_.etcd_endpoint;
        c.prefix = config_.etcd_prefix;
        c.lease_ttl = config_.etcd_lease_ttl;
        c.own_control_socket = config_.control_socket;
        c.self.name = config_.node_name;
        if (c.self.name.empty()) {
            char host[256] = {};
            gethostname(host, sizeof(host) - 1);
            c.self.name = host;
        }
        c.self.address = config_.advertise_address;
        c.self.port = config_.port;
        c.self.control_socket = config_.control_socket;
        c.self.control_tcp_address = config_.control_tcp_address;
        c.self.capacity_chunks = capacity_chunks;
        c.self.rate = config_.node_rate;
        auto agent = std::make_unique<ClusterAgent>(c);
        agent->start();
        spdlog::info("cluster: node {} joins through etcd at {}", c.self.name, c.etcd_endpoint);
        return agent;
    }

    // Both paths' slots; then the evict policy acts on what the scan found.
    static void scan_stragglers(const JobTable &jobs, const Datapath &datapath,
                                StragglerWatch &watch, ControlApi &api)
    {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
        std::map<uint32_t, uint64_t> evict, rounds_done;
        for (const auto &[id, job] : jobs.jobs()) {
            std::vector<SlotState> slots = datapath.slot_states(job);
            // Only the benefit policy ranks by remaining rounds, and only of jobs that said how
            // many they run. Every chunk that has started is at least in its oldest round: the
            // rounds before it are done everywhere.
            if (jobs.policy() == sched::Policy::benefit && job.iterations)
                rounds_done[id] = job_progress(job, slots).oldest_round.value_or(0);
            for (const auto &e : watch.scan(job, slots, now))
                spdlog::warn("straggler: job {} chunk {} round {} has waited {} ms for rank(s) {}",
                             e.job, e.chunk, e.round, e.waited_ms, ranks(e.missing).dump());
            if (uint64_t due = watch.due_for_eviction(job))
                evict[id] = due;
        }
        for (const auto &[id, due] : evict)
            api.evict_ranks(id, due);
        api.note_progress(rounds_done);
    }

    bool handle_signal(int sfd)
    {
        signalfd_siginfo si{};
        while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
            if (si.ssi_signo == SIGHUP) {
                reload();
                continue;
            }
            spdlog::info("{}: stopping", strsignal(static_cast<int>(si.ssi_signo)));
            return true;
        }
        return false;
    }

    // Applies what can change at run time (the log level); reports the rest.
    void reload()
    {
        if (config_.config_file.empty()) {
            spdlog::info("SIGHUP: no config file to reload");
            return;
        }
        auto problems = check_config_file(config_.config_file);
        if (!problems.empty()) {
            for (const auto &p : problems)
                spdlog::error("SIGHUP: {}; keeping the running configuration", p);
            return;
        }
        Config fresh;
        auto app = make_cli(fresh);
        std::ifstream in(config_.config_file);
        try {
            app->parse_from_stream(in);
        } catch (const CLI::Error &e) {
            spdlog::error("SIGHUP: {}; keeping the running configuration", e.what());
            return;
        }
        if (fresh.log_level != config_.log_level) {
            config_.log_level = fresh.log_level;
            set_log_level(fresh.log_level);
            spdlog::info("SIGHUP: log_level is now {}", fresh.log_level);
        }
        if (fresh.interface != config_.interface || fresh.port != config_.port ||
            fresh.max_chunks != config_.max_chunks || fresh.xdp_mode != config_.xdp_mode ||
            fresh.memory_policy != config_.memory_policy ||
            fresh.etcd_endpoint != config_.etcd_endpoint || fresh.node_name != config_.node_name ||
            fresh.advertise_address != config_.advertise_address)
            spdlog::warn(
                "SIGHUP: interface, port, xdp_mode, max_chunks, memory_policy and the "
                "etcd keys take a restart");
    }

    Config config_;
    std::string token_;      // of the TCP control API
    std::mutex state_lock_;  // the job table and API counters, shared with metrics scrapes
};

}  // namespace

int run(const Config &config)
{
    // No peer's behaviour may end the daemon: a write to a socket whose peer went away fails
    // with EPIPE instead of raising SIGPIPE (every send is MSG_NOSIGNAL too; this covers the
    // libraries' writes).
    signal(SIGPIPE, SIG_IGN);
    set_log_level(config.log_level);
    Server server(config);
    return server.run();
}

}  // namespace xagg::daemon
