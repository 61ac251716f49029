// SPDX-License-Identifier: MIT
#include "daemon/server.hpp"

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

#include "daemon/cluster/cluster_agent.hpp"
#include "daemon/control/control_api.hpp"
#include "daemon/control/control_server.hpp"
#include "lib/fastpath/fastpath.hpp"
#include "lib/fastpath/kernel_probe.hpp"
#include "daemon/datapath/both_paths.hpp"
#include "daemon/datapath/host_ps.hpp"
#include "daemon/datapath/host_slots.hpp"
#include "daemon/recovery.hpp"
#include "daemon/jobs/job_table.hpp"
#include "daemon/metrics.hpp"
#include "lib/sys/mtu.hpp"
#include "lib/sys/netns.hpp"
#include "daemon/jobs/progress.hpp"
#include "daemon/jobs/stragglers.hpp"
#include "lib/tls/tls.hpp"

namespace xagg::daemon {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail_errno(const std::string &what)
{
    throw std::system_error(errno, std::generic_category(), what);
}

void set_log_level(const std::string &level)
{
    spdlog::set_level(spdlog::level::from_str(level));
}

class Server {
public:
    explicit Server(const Config &config) : config_(config) {}

    int run()
    {
        const int signal_fd = block_signals();
        if (!config_.netns.empty())
            sys::enter_netns(config_.netns);
        start_datapath();
        start_control();
        // systemd (Type=notify): ready once attached and serving. Outside systemd a no-op.
        sd_notifyf(0, "READY=1\nSTATUS=attached to %s, %zu jobs", config_.interface.c_str(),
                   jobs_->jobs().size());
        serve(signal_fd);
        stop();
        return 0;
    }

private:
    static constexpr int kScanIntervalMs = 100;
    static constexpr int kScanShare = 20;

    // SIGTERM, SIGINT and SIGHUP arrive through a descriptor the loop polls.
    static int block_signals()
    {
        sigset_t signals;
        sigemptyset(&signals);
        for (int s : {SIGTERM, SIGINT, SIGHUP})
            sigaddset(&signals, s);
        sigprocmask(SIG_BLOCK, &signals, nullptr);
        int fd = signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd < 0)
            fail_errno("signalfd");
        return fd;
    }

    // Attaches the fast path (unless host only), starts the host path, and recovers what a
    // previous run left (daemon/recovery.hpp).
    void start_datapath()
    {
        fs::create_directories(config_.bpffs_dir);
        fs::create_directories(config_.state_dir);
        forget_orphaned_maps(state_, config_.bpffs_dir);

        const bool host_only = config_.datapath == "host";
        if (std::string problem = sys::chunk_mtu_problem(config_.interface); !problem.empty())
            throw std::runtime_error(problem);
        if (host_only) {
            spdlog::warn(
                "datapath = host: no XDP fast path; the host parameter server serves "
                "every job on {}",
                config_.interface);
        } else {
            FastPathConfig fpc;
            fpc.port = config_.port;
            fpc.max_positions = config_.max_positions;
            fpc.max_jobs = config_.max_jobs;
            fpc.pin_dir = config_.bpffs_dir;
            fast_ = std::make_unique<FastPath>(fpc);
            fast_->attach(config_.interface,
                          config_.xdp_mode == "skb" ? AttachMode::skb : AttachMode::native);
            if (config_.xdp_mode == "skb")
                spdlog::warn("XDP attached in skb (generic) mode: 3-4x slower than native");
            spdlog::info("attached to {} ({} mode), port {}, {} slot positions of fast-path memory",
                         config_.interface, config_.xdp_mode, config_.port, config_.max_positions);
        }
        kernel_.release = fast_ ? fast_->kernel().release : probe_kernel().release;
        kernel_.fastpath_variant = fast_ ? variant_name(fast_->variant()) : "";
        kernel_.jumbo_refusal = sys::chunk_mtu_problem(config_.interface, XAGG_JUMBO_MIN_MTU);
        log_kernel();

        in_addr group_base{};
        inet_pton(AF_INET, config_.group_base.c_str(), &group_base);
        jobs_ = std::make_unique<JobTable>(host_only ? 0 : config_.max_positions, config_.max_jobs,
                                           group_base, config_.min_job_positions,
                                           *sched::parse_policy(config_.memory_policy));
        jobs_->set_jumbo_refusal(kernel_.jumbo_refusal);
        host_ = std::make_unique<HostPs>(config_.port, config_.interface, config_.host_ps_threads,
                                         config_.host_slots_dir);
        datapath_ = std::make_unique<BothPaths>(fast_.get(), *host_, [this] { marker_.set(); });

        const Recovery r = recover(state_, marker_, *jobs_, fast_.get(), *host_,
                                   fast_ && fast_->reused_pinned_maps());
        // The host path's slots of a previous run are kept only with the job table they belong
        // to: without one, none are.
        forget_host_slots_of_other_jobs(*jobs_, config_.host_slots_dir);
        layout_to_restore_ = r.layout_to_restore;
        if (r.crashed_mid_move)
            spdlog::warn(
                "the last run stopped while moving fast-path memory: every job's slots were "
                "merged on the host path, and the jobs move back to the fast path now");
        else if (state_.exists())
            spdlog::info("recovered {} jobs from {}{}", r.jobs, state_.path(),
                         r.maps_rebuilt ? "" : " with their pinned maps");
    }

    // The control API, its transports, the metrics endpoint and the cluster agent.
    void start_control()
    {
        api_ = std::make_unique<ControlApi>(
            *jobs_, *datapath_, config_.port,
            [this] {
                state_.save(*jobs_);
                marker_.clear();
            },
            &stragglers_);
        api_->set_node_status([this] { return node_status(); });
        const uint32_t chunk_elems =
            resolve_default_chunk_elems(config_.default_chunk_elems, kernel_.jumbo_refusal.empty());
        api_->set_default_chunk_elems(chunk_elems);
        spdlog::info(
            "jobs created without chunk_elems get {}-value chunks (default_chunk_elems = {})",
            chunk_elems, config_.default_chunk_elems);
        control_ = std::make_unique<ControlServer>(
            [this](const std::string &line, bool remote) {
                std::lock_guard g(state_lock_);
                return api_->handle_line(line, remote ? &credentials_ : nullptr);
            },
            ControlLimits{
                .max_connections = config_.control_max_connections,
                .request_timeout = std::chrono::milliseconds(config_.control_request_timeout_ms)});
        if (!config_.metrics_address.empty())
            metrics_ = std::make_unique<MetricsServer>(config_.metrics_address, [this] {
                std::lock_guard g(state_lock_);  // the job table belongs to the main loop
                return metrics_snapshot();
            });
        control_->listen_unix(config_.control_socket, config_.control_socket_mode);
        spdlog::info("control API on {}", config_.control_socket);
        if (layout_to_restore_)
            api_->restore_layout();
        if (!config_.etcd_endpoint.empty())
            cluster_ = start_cluster_agent(config_.datapath == "host" ? 0 : config_.max_positions);
        if (!config_.control_tcp_address.empty())
            listen_tcp();
    }

    void listen_tcp()
    {
        credentials_ = read_credentials(config_);
        spdlog::info("control API over tcp: the admin token and {} tenant token(s)",
                     credentials_.tenants.size());
        if (config_.control_tcp_plaintext) {
            control_->listen_tcp(config_.control_tcp_address);
            spdlog::warn(
                "control API on tcp {} WITHOUT TLS (control_tcp_plaintext): the token travels "
                "in clear",
                config_.control_tcp_address);
            return;
        }
        control_->listen_tcp(config_.control_tcp_address,
                             tls::server_context(config_.control_tls_cert, config_.control_tls_key,
                                                 config_.control_tls_client_ca));
        spdlog::info("control API on tcp {} (TLS{}, token required)", config_.control_tcp_address,
                     config_.control_tls_client_ca.empty() ? "" : ", client certificates");
    }

    // The TCP API's tokens: the admin's and the tenants' (each checked against the others).
    static Credentials read_credentials(const Config &config)
    {
        Credentials c;
        c.admin_token = read_token_file(config.control_token_file);
        if (!config.control_tenants_file.empty())
            c.tenants = read_tenants_file(config.control_tenants_file, c.admin_token);
        return c;
    }

    // What the kernel gives the fast path, said once at start (docs/KERNELS.md).
    void log_kernel() const
    {
        if (!fast_)
            spdlog::info("kernel {}: no fast path (datapath = host)", kernel_.release);
        else if (fast_->variant() == XAGG_VARIANT_PULL)
            spdlog::info(
                "kernel {}: fast path variant pull (bpf_xdp_pull_data pulls headers a driver "
                "left outside the first receive buffer)",
                kernel_.release);
        else
            spdlog::info(
                "kernel {}: fast path variant copy (no bpf_xdp_pull_data, Linux 6.18: headers "
                "must arrive in the first receive buffer)",
                kernel_.release);
        if (kernel_.jumbo_refusal.empty())
            spdlog::info("jumbo chunks (2048 values) can be served on {}", config_.interface);
        else
            spdlog::warn("jumbo chunks cannot be served: {}; jobs of them are refused",
                         kernel_.jumbo_refusal);
    }

    NodeStatus node_status() const
    {
        NodeStatus n;
        n.interface = config_.interface;
        n.datapath = config_.datapath;
        n.xdp_mode = config_.xdp_mode;
        if (fast_)
            n.xdp = fast_->attachment();
        n.control_socket = config_.control_socket;
        n.control_tcp_address = config_.control_tcp_address;
        n.metrics_address = config_.metrics_address;
        n.kernel = kernel_;
        return n;
    }

    MetricsSnapshot metrics_snapshot() const
    {
        MetricsSnapshot m;
        m.fast = datapath_->counters();
        m.host = datapath_->host_counters();
        for (const auto &[id, job] : jobs_->jobs()) {
            m.jobs.push_back(job);
            m.straggler_events[id] = stragglers_.total(id);
        }
        m.capacity_positions = jobs_->capacity_positions();
        m.used_positions = jobs_->used_positions();
        m.api_requests = api_->requests();
        m.api_errors = api_->errors();
        m.api_forbidden = api_->forbidden();
        m.uptime_seconds = api_->uptime_seconds();
        m.control_events = control_->counts();
        m.kernel = kernel_;
        return m;
    }

    // Until SIGTERM/SIGINT: control requests, signals, the straggler scan, and the watchdog
    // (fed from this loop, so a hung loop gets the daemon restarted).
    void serve(int signal_fd)
    {
        uint64_t watchdog_usec = 0;
        const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
        const int poll_ms = watchdog
                                ? std::min(kScanIntervalMs, static_cast<int>(watchdog_usec / 2000))
                                : kScanIntervalMs;
        auto last_scan = std::chrono::steady_clock::now();
        std::chrono::milliseconds scan_every(kScanIntervalMs);
        for (bool stop = false; !stop;) {
            std::vector<pollfd> fds{{signal_fd, POLLIN, 0}};
            control_->poll_fds(fds);
            if (watchdog)
                sd_notify(0, "WATCHDOG=1");
            if (std::chrono::steady_clock::now() - last_scan >= scan_every) {
                last_scan = std::chrono::steady_clock::now();
                {
                    std::lock_guard g(state_lock_);
                    scan_stragglers(*jobs_, *datapath_, stragglers_, *api_);
                }
                // A scan copies every slot of every region (3 KiB each): large regions make
                // it costly, so it never takes more than 1/kScanShare of a core.
                scan_every =
                    std::max(std::chrono::milliseconds(kScanIntervalMs),
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                 (std::chrono::steady_clock::now() - last_scan) * kScanShare));
            }
            const int deadline = control_->next_deadline_ms();
            if (poll(fds.data(), fds.size(), deadline < 0 ? poll_ms : std::min(poll_ms, deadline)) <
                0) {
                if (errno == EINTR)
                    continue;
                fail_errno("poll");
            }
            if (fds[0].revents & POLLIN)
                stop = handle_signal(signal_fd);
            control_->serve(fds, 1);
        }
    }

    // A clean stop ends every job: leave the cluster, detach, unpin, forget the table.
    void stop()
    {
        sd_notify(0, "STOPPING=1");
        cluster_.reset();  // leaves etcd first: the other nodes re-place this node's partitions
        unlink(config_.control_socket.c_str());
        if (fast_) {
            fast_->detach();
            fast_->unpin();
        }
        state_.remove();
        HostSlots::remove_files(config_.host_slots_dir);
        spdlog::info("detached from {}; jobs ended, maps unpinned", config_.interface);
    }

    std::unique_ptr<ClusterAgent> start_cluster_agent(uint32_t capacity_positions) const
    {
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
        c.self.capacity_positions = capacity_positions;
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
                             e.job, e.chunk, e.round, e.waited_ms, rank_text(e.missing));
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

    // Applies what can change at run time (the log level, the TCP API's token and TLS files);
    // names every other changed key, which takes a restart.
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
        // What can change without a restart is applied; every other changed key is named.
        for (const ConfigChange &change : changed_keys(config_, fresh)) {
            const std::string &key = change.key;
            if (key == "log_level") {
                config_.log_level = fresh.log_level;
                set_log_level(fresh.log_level);
                spdlog::info("SIGHUP: log_level is now {}", fresh.log_level);
            } else if (key == "control_token_file" || key == "control_tenants_file" ||
                       key == "control_tls_cert" || key == "control_tls_key" ||
                       key == "control_tls_client_ca") {
                continue;  // below, together
            } else {
                spdlog::warn("SIGHUP: {} changed ({} -> {}) but takes a restart; still {}", key,
                             change.before, change.after, change.before);
            }
        }
        reload_credentials(fresh);
    }

    // The TCP API's token and TLS files, read again (a renewed certificate, a rotated token)
    // whether or not their paths changed: the files themselves are what is renewed. A file that
    // does not load keeps the running one, said in the log.
    void reload_credentials(const Config &fresh)
    {
        if (config_.control_tcp_address.empty())
            return;
        try {
            Credentials credentials = read_credentials(fresh);
            std::lock_guard g(state_lock_);
            credentials_ = std::move(credentials);
            config_.control_token_file = fresh.control_token_file;
            config_.control_tenants_file = fresh.control_tenants_file;
            spdlog::info(
                "SIGHUP: control tokens read again: the admin's from {}, {} tenant(s){}",
                fresh.control_token_file, credentials_.tenants.size(),
                fresh.control_tenants_file.empty() ? "" : " from " + fresh.control_tenants_file);
        } catch (const std::exception &e) {
            spdlog::error("SIGHUP: {}; keeping the running tokens", e.what());
        }
        if (config_.control_tcp_plaintext || fresh.control_tls_cert.empty())
            return;
        try {
            control_->replace_tls(tls::server_context(fresh.control_tls_cert, fresh.control_tls_key,
                                                      fresh.control_tls_client_ca));
            config_.control_tls_cert = fresh.control_tls_cert;
            config_.control_tls_key = fresh.control_tls_key;
            config_.control_tls_client_ca = fresh.control_tls_client_ca;
            spdlog::info("SIGHUP: TLS certificate {} loaded for new control connections",
                         fresh.control_tls_cert);
        } catch (const std::exception &e) {
            spdlog::error("SIGHUP: {}; keeping the running certificate", e.what());
        }
    }

    Config config_;
    StateFile state_{config_.state_dir};
    MoveMarker marker_{config_.state_dir};
    std::unique_ptr<FastPath> fast_;  // null on a host-path-only node
    NodeKernel kernel_;
    std::unique_ptr<JobTable> jobs_;
    std::unique_ptr<HostPs> host_;
    std::unique_ptr<BothPaths> datapath_;
    StragglerWatch stragglers_;
    std::unique_ptr<ControlApi> api_;
    std::unique_ptr<ControlServer> control_;
    std::unique_ptr<MetricsServer> metrics_;
    std::unique_ptr<ClusterAgent> cluster_;
    bool layout_to_restore_ = false;  // recovery left every job on the host path
    Credentials credentials_;         // the TCP control API's tokens
    std::mutex state_lock_;           // the job table and API counters, shared with metrics scrapes
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
