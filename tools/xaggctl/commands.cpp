// SPDX-License-Identifier: MIT
#include "tools/xaggctl/commands.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <thread>

#include "tools/xaggctl/completion.hpp"
#include "tools/xaggctl/credentials.hpp"
#include "tools/xaggctl/exit_codes.hpp"
#include "lib/config/config.hpp"
#include "lib/config/preflight.hpp"
#include "lib/etcd/etcd_client.hpp"
#include "tools/xaggctl/render.hpp"
#include "xagg/api.hpp"
#include "xagg/cluster_keys.hpp"
#include "xagg/cluster_records.hpp"
#include "tools/xaggctl/stats.hpp"
#include "xagg/proto.h"
#include "xagg/release.h"

namespace xagg::ctl {

int print(const Globals &g, const nlohmann::json &data, const std::function<std::string()> &render)
{
    if (g.json)
        std::cout << data.dump() << std::endl;
    else
        std::cout << render() << std::flush;
    return kOk;
}

namespace {

using nlohmann::json;

constexpr const char *kFooter =
    R"(Exit codes: 0 ok, 1 usage, 2 xaggd unreachable, 3 request refused, 4 permission
denied on the socket, 5 wrong or missing token, 6 config file invalid, 7 reply not understood,
8 a tenant's token beyond its own jobs.
Every read command takes --json (one JSON object per line; schema in docs/XAGGCTL.md).

Examples:
  xaggctl status
  xaggctl job list
  xaggctl job create --workers 4 --elems 16777216 --policy evict
  xaggctl job show 7 --json
  xaggctl stats --watch 2
  xaggctl --host 10.0.0.5:9874 --token-file /etc/xagg/token job list
  xaggctl config check /etc/xagg/xaggd.conf
  xaggctl tls init --dir /etc/xagg --ip 10.0.0.5 --tenant vision=100-199)";

// The endpoint as the flags left it, with the token file read and the timeout applied.
control::ControlClient client(const Globals &g)
{
    control::Endpoint e = g.endpoint;
    e.timeout = std::chrono::milliseconds(static_cast<int64_t>(g.timeout_seconds * 1000));
    if (!g.token_file.empty()) {
        try {
            e.token = daemon::read_token_file(g.token_file);
        } catch (const std::runtime_error &err) {
            throw control::ControlError(control::Failure::usage,
                                        std::string("--token-file: ") + err.what());
        }
    }
    return control::ControlClient(e);
}

// --chunk-elems for a job created on `where` (one daemon, or the cluster's nodes), with what
// happens when it is not given.
void add_chunk_elems_option(CLI::App *create, uint32_t &chunk_elems, const std::string &where,
                            const std::string &otherwise)
{
    create
        ->add_option("--chunk-elems", chunk_elems,
                     "Values per chunk: 768, or 2048 (jumbo) where every link between the "
                     "workers and " +
                         where + " has an MTU of 9000. Not given: " + otherwise)
        ->check(CLI::Validator(
            [](const std::string &v) {
                return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos &&
                               v.size() < 10 && job_rules::valid_chunk_elems(std::stoull(v))
                           ? std::string()
                           : "must be " + job_rules::chunk_elems_choices();
            },
            // "{768,2048}", as CLI::IsMember describes itself (the completion reads it).
            "{" + std::to_string(XAGG_CHUNK_ELEMS) + "," + std::to_string(XAGG_JUMBO_CHUNK_ELEMS) +
                "}"));
}

void add_status(CLI::App &app, Cli &cli)
{
    auto *cmd = app.add_subcommand(
        "status",
        "The daemon: release, uptime, the interface and XDP mode the kernel reports, memory "
        "budget and use, and how chunks and traffic divide between the fast and host paths");
    cmd->footer("Example: xaggctl status --json | jq .memory");
    cmd->callback([&cli] {
        cli.action = [&cli] {
            const auto s = client(cli.globals).call_as<api::StatusReply>(api::Status{});
            return print(cli.globals, s, [&] { return render_status(s); });
        };
    });
}

void add_job(CLI::App &app, Cli &cli)
{
    auto *job = app.add_subcommand("job", "List, show, create and delete jobs");
    job->require_subcommand(1);

    auto *list = job->add_subcommand("list",
                                     "Every job: size, members, memory per path, "
                                     "policy, delivery, stragglers, evictions");
    list->callback([&cli] {
        cli.action = [&cli] {
            const auto jobs = client(cli.globals).call_as<api::JobList>(api::ListJobs{});
            return print(cli.globals, jobs, [&] { return render_job_list(jobs.jobs); });
        };
    });

    auto *show = job->add_subcommand(
        "show",
        "One job: members with their addresses, round progress, chunks on each path, "
        "the latest straggler events");
    show->add_option("ID", cli.args.job, "Job id")->required();
    show->footer("Example: xaggctl job show 7");
    show->callback([&cli] {
        cli.action = [&cli] {
            const auto r = client(cli.globals).call_as<api::JobReply>(api::ShowJob{cli.args.job});
            return print(cli.globals, r, [&] { return render_job(r.job); });
        };
    });

    auto &c = cli.args.create;
    auto *create = job->add_subcommand("create", "Create a job; prints it as `job show` does");
    create->add_option("--workers", c.workers, "Workers (ranks 0..N-1)")
        ->required()
        ->check(CLI::Range(1, 64));
    create->add_option("--elems", c.elems, "Gradient size in values (int32, one per float)")
        ->required()
        ->check(CLI::PositiveNumber);
    create->add_option("--id", c.id, "Job id (1-65535); assigned when absent")
        ->check(CLI::Range(1u, XAGG_MAX_JOB_ID));
    create->add_option("--policy", c.policy, "What a straggler timeout does")
        ->check(CLI::IsMember({"wait", "evict"}))
        ->capture_default_str();
    create->add_option("--timeout-ms", c.timeout_ms, "A chunk partial this long is a straggler")
        ->capture_default_str();
    create
        ->add_option("--evict-after", c.evict_after,
                     "Under evict: consecutive timeouts before a rank is removed")
        ->capture_default_str();
    create->add_option("--weight", c.weight, "Share of fast-path memory relative to other jobs")
        ->capture_default_str();
    create
        ->add_option("--iterations", c.iterations,
                     "All-reduces the job will run, so the benefit policy can rank it by its "
                     "remaining time (0: not said)")
        ->capture_default_str();
    create->add_flag("--host-path", c.host_path, "Serve every chunk by the host parameter server");
    create->add_flag("--fanout", c.fanout, "Unicast results to each member instead of multicast");
    add_chunk_elems_option(create, c.chunk_elems, "this node",
                           "the daemon's default_chunk_elems (2048 where its interface's MTU "
                           "carries jumbo chunks, else 768; xaggctl status shows it)");
    create->footer(
        "Example: xaggctl job create --id 7 --workers 4 --elems 16777216 --policy evict");
    create->callback([&cli, &c] {
        cli.action = [&cli, &c] {
            api::CreateJob req;
            if (c.id)
                req.id = c.id;
            req.workers = c.workers;
            req.gradient_elems = c.elems;
            req.policy = c.policy;
            req.timeout_ms = c.timeout_ms;
            req.evict_after = c.evict_after;
            req.weight = c.weight;
            req.iterations = c.iterations;
            req.host_path = c.host_path;
            req.fanout = c.fanout;
            if (c.chunk_elems)
                req.chunk_elems = c.chunk_elems;
            const auto r = client(cli.globals).call_as<api::JobReply>(req);
            return print(cli.globals, r, [&] { return render_job(r.job); });
        };
    });

    auto *size = job->add_subcommand(
        "size",
        "What a tensor takes (offline, the job rules of include/xagg/job_rules.hpp): its blocks, "
        "the exponent chunks a float all-reduce adds, the --elems of a job that holds it and "
        "the slot positions (fast-path memory) that job takes");
    auto &z = cli.args.size;
    size->add_option("--elems", z.elems, "Values of the tensor")
        ->required()
        ->check(CLI::PositiveNumber);
    add_chunk_elems_option(size, z.chunk_elems, "the aggregator", "required here");
    size->get_option("--chunk-elems")->required();
    size->add_option("--dtype", z.dtype, "float (exponent chunks added) or int32")
        ->check(CLI::IsMember({"float", "int32"}))
        ->capture_default_str();
    size->footer("Example: xaggctl job size --elems 4194304 --chunk-elems 2048 --json");
    size->callback([&cli, &z] {
        cli.action = [&cli, &z] {
            const uint64_t blocks = job_rules::blocks(z.elems, z.chunk_elems);
            const uint64_t wire =
                z.dtype == "float" ? job_rules::float_wire_chunks(z.elems, z.chunk_elems) : blocks;
            const uint64_t positions = job_rules::positions(wire * z.chunk_elems, z.chunk_elems);
            json r = {{"tensor_elems", z.elems},
                      {"chunk_elems", z.chunk_elems},
                      {"dtype", z.dtype},
                      {"blocks", blocks},
                      {"exponent_chunks", wire - blocks},
                      {"wire_chunks", wire},
                      {"job_elems", wire * z.chunk_elems},
                      {"positions", positions}};
            return print(cli.globals, r, [&] {
                return std::to_string(z.elems) + " " + z.dtype + " values in chunks of " +
                       std::to_string(z.chunk_elems) + ": " + std::to_string(blocks) +
                       " blocks + " + std::to_string(wire - blocks) +
                       " exponent chunks = " + std::to_string(wire) +
                       " chunks on the wire\njob create --elems " +
                       std::to_string(wire * z.chunk_elems) + " --chunk-elems " +
                       std::to_string(z.chunk_elems) + " holds it in " + std::to_string(positions) +
                       " slot positions of fast-path memory\n";
            });
        };
    });

    auto *del = job->add_subcommand(
        "delete", "Delete a job: its members are dropped and its memory goes to the others");
    del->add_option("ID", cli.args.job, "Job id")->required();
    del->callback([&cli] {
        cli.action = [&cli] {
            const uint32_t id = cli.args.job;
            json r = client(cli.globals).call(api::DeleteJob{id});
            return print(cli.globals, r,
                         [&] { return "deleted job " + std::to_string(id) + "\n"; });
        };
    });
}

void add_worker(CLI::App &app, Cli &cli)
{
    auto *worker = app.add_subcommand("worker", "Add, remove and evict a job's workers");
    worker->require_subcommand(1);
    auto &a = cli.args;

    auto *join = worker->add_subcommand(
        "join",
        "Register rank RANK of JOB as sending from ADDR:PORT (what a client does when "
        "it starts); the only source that rank is accepted from");
    join->add_option("JOB", a.job, "Job id")->required();
    join->add_option("RANK", a.rank, "Rank")->required();
    join->add_option("ADDR", a.addr, "IPv4 address the worker sends from")->required();
    join->add_option("PORT", a.port, "UDP source port of the worker")->required();
    join->footer("Example: xaggctl worker join 7 0 10.0.0.11 9872");
    join->callback([&cli, &a] {
        cli.action = [&cli, &a] {
            const auto r = client(cli.globals)
                               .call_as<api::JoinReply>(api::Join{a.job, a.rank, a.addr, a.port});
            return print(cli.globals, r, [&] {
                // The key is what the worker needs to send (ClientOptions join off).
                return "rank " + std::to_string(a.rank) + " of job " + std::to_string(a.job) +
                       " joined from " + a.addr + ":" + std::to_string(a.port) + "\njob key " +
                       job_key_text(r.key) + "\n";
            });
        };
    });

    auto *leave = worker->add_subcommand("leave", "Remove rank RANK from JOB's members");
    leave->add_option("JOB", a.job, "Job id")->required();
    leave->add_option("RANK", a.rank, "Rank")->required();
    leave->callback([&cli, &a] {
        cli.action = [&cli, &a] {
            json r = client(cli.globals).call(api::Leave{a.job, a.rank});
            return print(cli.globals, r, [&] {
                return "rank " + std::to_string(a.rank) + " left job " + std::to_string(a.job) +
                       "\n";
            });
        };
    });

    auto *evict = worker->add_subcommand(
        "evict",
        "Evict rank RANK from JOB now, as the evict policy would: its packets are dropped and "
        "results no longer wait for it (they say so in their contributor bitmap)");
    evict->add_option("JOB", a.job, "Job id")->required();
    evict->add_option("RANK", a.rank, "Rank")->required();
    evict->footer("Example: xaggctl worker evict 7 2");
    evict->callback([&cli, &a] {
        cli.action = [&cli, &a] {
            const auto r = client(cli.globals).call_as<api::JobReply>(api::Evict{a.job, a.rank});
            return print(cli.globals, r, [&] {
                std::string ranks;
                for (const api::Member &m : r.job.members)
                    ranks += (ranks.empty() ? "" : ",") + std::to_string(m.rank);
                return "evicted rank " + std::to_string(a.rank) + " from job " +
                       std::to_string(a.job) + "; results now sum rank(s) " +
                       (ranks.empty() ? "-" : ranks) + "\n";
            });
        };
    });
}

void add_stats(CLI::App &app, Cli &cli)
{
    auto &s = cli.args.stats;
    auto *cmd = app.add_subcommand(
        "stats", "Counters of both paths, as totals and as rates over an interval");
    cmd->add_option("--interval", s.interval, "Seconds between the two samples of a rate")
        ->check(CLI::Range(0.05, 3600.0))
        ->capture_default_str();
    cmd->add_option("--watch", s.watch,
                    "Refresh every SECONDS (in place on a terminal; with --json, one line each)")
        ->check(CLI::Range(0.05, 3600.0));
    cmd->add_option("--count", s.count, "With --watch: stop after N refreshes (0: never)");
    cmd->add_flag("--all", s.all, "Every counter, not only those that are not zero");
    cmd->footer(
        "Examples:\n  xaggctl stats\n  xaggctl stats --watch 1\n"
        "  xaggctl stats --json --watch 10 >> stats.jsonl");
    cmd->callback([&cli, &s] {
        cli.action = [&cli, &s] {
            control::ControlClient api = client(cli.globals);
            const bool watch = s.watch > 0;
            const double every = watch ? s.watch : s.interval;
            const bool in_place = watch && !cli.globals.json && isatty(STDOUT_FILENO);
            auto sample = [&] {
                return std::pair{api.call_as<api::StatsReply>(api::Stats{}),
                                 std::chrono::steady_clock::now()};
            };
            auto before = sample();
            for (unsigned frame = 1;; frame++) {
                std::this_thread::sleep_for(std::chrono::duration<double>(every));
                auto after = sample();
                double seconds =
                    std::chrono::duration<double>(after.second - before.second).count();
                json f = stats_frame(before.first, after.first, seconds);
                if (in_place)
                    std::cout << "\033[H\033[2J";
                else if (watch && frame > 1 && !cli.globals.json)
                    std::cout << "\n";
                print(cli.globals, f, [&] { return render_stats(f, s.all); });
                if (!watch || (s.count && frame >= s.count))
                    return static_cast<int>(kOk);
                before = after;
            }
        };
    });
}

void add_config(CLI::App &app, Cli &cli)
{
    auto *config = app.add_subcommand("config", "Work with xaggd's config file");
    config->require_subcommand(1);
    auto &file = cli.args.file;
    auto *check = config->add_subcommand(
        "check",
        "Validate FILE as xaggd does at start, this host included (MTU, addresses, TLS files), "
        "without starting anything; problems are reported in xaggd's own words, FILE:LINE "
        "first");
    check->add_option("FILE", file, "Config file")->required()->type_name("PATH");
    check->footer("Example: xaggctl config check /etc/xagg/xaggd.conf && systemctl reload xaggd");
    check->callback([&cli, &file] {
        cli.action = [&cli, &file] {
            auto problems = daemon::validate_for_start(file);
            json r = {{"file", file}, {"valid", problems.empty()}, {"problems", problems}};
            print(cli.globals, r, [&] {
                std::string out;
                for (const auto &p : problems)
                    out += p + "\n";
                return problems.empty() ? file + ": ok\n" : out;
            });
            return static_cast<int>(problems.empty() ? kOk : kConfigInvalid);
        };
    });
}

// Cluster jobs live in etcd, not in one daemon: these verbs talk to etcd directly, and every
// node's agent does the rest (docs/SCHEDULING.md).
void add_cluster(CLI::App &app, Cli &cli)
{
    auto *cluster = app.add_subcommand(
        "cluster", "Cluster jobs served by several xaggd nodes through etcd: show, create, delete");
    cluster->require_subcommand(1);
    auto &a = cli.args.cluster;
    cluster->add_option("--etcd", a.etcd, "http://HOST:PORT of the cluster's etcd")
        ->envname("XAGG_ETCD")
        ->required();
    cluster->add_option("--prefix", a.prefix, "The cluster's key prefix")->capture_default_str();
    auto etcd_call = [&a](const std::function<json(etcd::Client &)> &fn) {
        try {
            etcd::Client c(a.etcd);
            return fn(c);
        } catch (const etcd::Error &e) {
            throw control::ControlError(control::Failure::unreachable,
                                        std::string(e.what()) + " (is etcd running there?)");
        }
    };
    auto *show = cluster->add_subcommand("show", "The live nodes, the jobs and their placement");
    show->callback([&cli, &a, etcd_call] {
        cli.action = [&cli, &a, etcd_call] {
            // Typed from the records (xagg/cluster_records.hpp); --json prints the same.
            std::vector<ClusterNode> nodes;
            std::vector<std::pair<ClusterJob, std::vector<std::string>>> jobs;
            json r = etcd_call([&](etcd::Client &c) {
                for (const auto &kv : c.range(cluster_keys::nodes(a.prefix)))
                    nodes.push_back(cluster_records::parse_node(kv.value));
                std::map<uint32_t, ClusterPlacement> placed;
                for (const auto &kv : c.range(cluster_keys::placements(a.prefix)))
                    if (cluster_keys::id_in(cluster_keys::placements(a.prefix), kv.key)) {
                        ClusterPlacement p = cluster_records::parse_placement(kv.value);
                        placed[p.job] = p;
                    }
                for (const auto &kv : c.range(cluster_keys::jobs(a.prefix)))
                    if (auto id = cluster_keys::id_in(cluster_keys::jobs(a.prefix), kv.key))
                        jobs.emplace_back(cluster_records::parse_job(*id, kv.value),
                                          placed.count(*id) ? placed[*id].partitions
                                                            : std::vector<std::string>{});
                json out = {{"nodes", json::array()}, {"jobs", json::array()}};
                for (const ClusterNode &n : nodes)
                    out["nodes"].push_back(cluster_records::to_json(n));
                for (const auto &[j, partitions] : jobs) {
                    json record = cluster_records::to_json(j);
                    record["id"] = j.id;
                    record["partitions"] = partitions;
                    out["jobs"].push_back(record);
                }
                return out;
            });
            return print(cli.globals, r, [&] {
                std::string out = "NODE            ADDRESS          CAPACITY_CHUNKS\n";
                for (const ClusterNode &n : nodes) {
                    char line[160];
                    std::snprintf(line, sizeof(line), "%-15s %-16s %llu\n", n.name.c_str(),
                                  n.address.c_str(),
                                  static_cast<unsigned long long>(n.capacity_positions));
                    out += line;
                }
                out += "\nJOB  WORKERS  ELEMS        CHUNK  PLACEMENT (node of each partition)\n";
                for (const auto &[j, partitions] : jobs) {
                    char line[96];
                    std::snprintf(line, sizeof(line), "%-4u %-8u %-12llu %-6u ", j.id, j.workers,
                                  static_cast<unsigned long long>(j.gradient_elems), j.chunk_elems);
                    std::string names;
                    for (const std::string &p : partitions)
                        names += (names.empty() ? "" : " ") + p;
                    out += line + (names.empty() ? std::string("(not placed yet)") : names) + "\n";
                }
                return out;
            });
        };
    });
    auto *job = cluster->add_subcommand("job", "Create or delete a cluster job");
    job->require_subcommand(1);
    auto *create = job->add_subcommand(
        "create", "Create a cluster job: the nodes place its partitions and hold their shares");
    create->add_option("--id", a.id, "Job id, 1-65535")
        ->required()
        ->check(CLI::Range(1u, XAGG_MAX_JOB_ID));
    create->add_option("--workers", a.workers, "Workers (1-64)")
        ->required()
        ->check(CLI::Range(1, XAGG_MAX_WORKERS));
    create->add_option("--elems", a.elems, "Gradient size in values")
        ->required()
        ->check(CLI::PositiveNumber);
    create
        ->add_option("--partition-chunks", a.partition_chunks,
                     "Chunks per partition: the unit placed on one node")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    add_chunk_elems_option(
        create, a.chunk_elems, "the nodes",
        "768: a cluster job's chunk size is one for all its nodes, whose links xaggctl cannot "
        "see, so jumbo is said outright");
    create->footer(
        "Example: xaggctl cluster --etcd http://10.0.0.2:2379 job create --id 7 "
        "--workers 8 --elems 110000000 --chunk-elems 2048");
    create->callback([&cli, &a, etcd_call] {
        cli.action = [&cli, &a, etcd_call] {
            ClusterJob record;
            record.workers = a.workers;
            record.gradient_elems = a.elems;
            record.partition_chunks = a.partition_chunks;
            record.chunk_elems = a.chunk_elems;
            json spec = cluster_records::to_json(record);
            bool created = etcd_call([&](etcd::Client &c) {
                return json(c.put_if_revision(cluster_keys::job(a.prefix, a.id), spec.dump(), 0));
            });
            if (!created) {
                std::cerr << "xaggctl: cluster job " << a.id << " exists\n";
                return static_cast<int>(kRefused);
            }
            spec["id"] = a.id;
            return print(cli.globals, spec, [&] {
                return "cluster job " + std::to_string(a.id) +
                       " created; `xaggctl cluster show` shows where it is placed\n";
            });
        };
    });
    auto *del = job->add_subcommand("delete", "Delete a cluster job: every node drops its share");
    del->add_option("ID", a.id, "Job id")->required();
    del->callback([&cli, &a, etcd_call] {
        cli.action = [&cli, &a, etcd_call] {
            etcd_call([&](etcd::Client &c) {
                c.erase(cluster_keys::job(a.prefix, a.id));
                return json();
            });
            return print(cli.globals, {{"deleted", a.id}},
                         [&] { return "cluster job " + std::to_string(a.id) + " deleted\n"; });
        };
    });
}

void add_version(CLI::App &app, Cli &cli)
{
    auto *cmd =
        app.add_subcommand("version", "xaggctl's release, and the daemon's when it can be reached");
    cmd->callback([&cli] {
        cli.action = [&cli] {
            json r = {{"xaggctl", XAGG_RELEASE}, {"xaggd", nullptr}};
            std::string daemon_line;
            try {
                const auto s = client(cli.globals).call_as<api::StatusReply>(api::Status{});
                r["xaggd"] = s.brief.version;
                daemon_line = "xaggd " + s.brief.version +
                              (s.details ? " (pid " + std::to_string(s.details->pid) : " (") +
                              (s.details ? ", at " : "at ") +
                              client(cli.globals).endpoint().where() + ")";
            } catch (const control::ControlError &e) {
                daemon_line = std::string("xaggd: unknown (") + e.what() + ")";
            }
            return print(cli.globals, r, [&] {
                return std::string("xaggctl ") + XAGG_RELEASE + "\n" + daemon_line + "\n";
            });
        };
    });
}

void add_completion(CLI::App &app, Cli &cli)
{
    auto *cmd = app.add_subcommand("completion", "Print a shell completion script");
    cmd->add_option("SHELL", cli.args.shell, "Shell")->required()->check(CLI::IsMember({"bash"}));
    cmd->footer("Example: source <(xaggctl completion bash)");
    cmd->callback([&cli, &app] {
        cli.action = [&app] {
            std::cout << bash_completion(app, "xaggctl");
            return static_cast<int>(kOk);
        };
    });
}

}  // namespace

std::unique_ptr<Cli> make_cli()
{
    auto cli = std::make_unique<Cli>();
    cli->app = std::make_unique<CLI::App>(
        "xaggctl: the operator's command line for xaggd, the xagg gradient aggregation daemon. "
        "It talks to the daemon's control API: the local Unix socket by default, or a remote "
        "daemon with --host and a token.",
        "xaggctl");
    CLI::App &app = *cli->app;
    Globals &g = cli->globals;
    app.fallthrough();  // global options may follow the subcommand: `job show 7 --json`
    app.require_subcommand(1);
    app.footer(kFooter);
    app.add_option("--socket", g.endpoint.socket_path, "Control socket of the local xaggd")
        ->type_name("PATH")
        ->envname("XAGG_SOCKET")
        ->capture_default_str();
    app.add_option("--host", g.endpoint.host,
                   "HOST:PORT of a remote xaggd's control_tcp_address (instead of the socket)")
        ->envname("XAGG_HOST");
    app.add_option("--token", g.endpoint.token,
                   "Token for --host (visible to other users in ps; prefer --token-file)")
        ->envname("XAGG_TOKEN");
    app.add_option("--token-file", g.token_file,
                   "File whose first line is the token for --host (not readable by others)")
        ->type_name("PATH");
    app.add_option("--ca", g.endpoint.tls.ca_file,
                   "PEM CA of the daemon's control_tls_cert, for --host (default: the system's)")
        ->type_name("PATH")
        ->envname("XAGG_CA");
    app.add_option("--cert", g.endpoint.tls.cert_file,
                   "PEM client certificate, for a daemon with control_tls_client_ca")
        ->type_name("PATH");
    app.add_option("--key", g.endpoint.tls.key_file, "PEM key of --cert (default: in --cert)")
        ->type_name("PATH");
    app.add_flag("--plaintext", g.endpoint.tls.plaintext,
                 "--host without TLS, for a daemon with control_tcp_plaintext = true");
    app.add_option("--timeout", g.timeout_seconds, "Seconds to wait to connect and for a reply")
        ->check(CLI::Range(0.01, 3600.0))
        ->capture_default_str();
    app.add_flag("--json", g.json, "Print JSON (one object per line) instead of tables");
    add_status(app, *cli);
    add_job(app, *cli);
    add_worker(app, *cli);
    add_stats(app, *cli);
    add_config(app, *cli);
    add_tls(app, *cli);
    add_token(app, *cli);
    add_cluster(app, *cli);
    add_version(app, *cli);
    add_completion(app, *cli);
    return cli;
}

}  // namespace xagg::ctl
