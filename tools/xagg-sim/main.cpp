// SPDX-License-Identifier: MIT
// xagg-sim: replays a trace of training jobs through xaggd's memory scheduler and placement at
// cluster scale, one run per policy, and prints them side by side (docs/SCHEDULING.md).
//
//   xagg-sim generate --jobs 1000 --seed 1 --out trace.csv
//   xagg-sim run --trace trace.csv --nodes 100 [--policy all] [--json results.json]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tools/xagg-sim/simulator.hpp"
#include "tools/xagg-sim/trace.hpp"

using namespace xagg;

namespace {

nlohmann::json to_json(const sim::PolicyResult &r)
{
    nlohmann::json jct = nlohmann::json::array(), eff = nlohmann::json::array();
    for (const sim::JobResult &j : r.jobs) {
        jct.push_back(j.jct());
        eff.push_back(j.efficiency());
    }
    return {{"policy", sched::to_string(r.policy)},
            {"mean_jct_s", r.mean_jct},
            {"p50_jct_s", r.p50_jct},
            {"p95_jct_s", r.p95_jct},
            {"p99_jct_s", r.p99_jct},
            {"mean_efficiency", r.mean_efficiency},
            {"utilization", r.utilization},
            {"makespan_s", r.makespan_s},
            {"divisions", r.divisions},
            {"over_budget", r.over_budget},
            {"jct_s", jct},
            {"efficiency", eff}};
}

void print_table(const std::vector<sim::PolicyResult> &results, size_t jobs,
                 const sim::ClusterParams &c)
{
    const sim::PolicyResult &base = results.front();
    std::printf("%zu jobs on %u nodes of %llu chunks each\n\n", jobs, c.nodes,
                static_cast<unsigned long long>(c.node_chunks));
    std::printf(
        "| policy | mean JCT (s) | p50 | p95 | p99 | efficiency | utilization | "
        "mean JCT vs %s |\n",
        sched::to_string(base.policy));
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const sim::PolicyResult &r : results)
        std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.3f | %.3f | %.2fx |\n",
                    sched::to_string(r.policy), r.mean_jct, r.p50_jct, r.p95_jct, r.p99_jct,
                    r.mean_efficiency, r.utilization, r.mean_jct / base.mean_jct);
}

}  // namespace

int main(int argc, char **argv)
{
    CLI::App app("xagg-sim: xaggd's memory scheduler and placement, replayed at cluster scale");
    app.require_subcommand(1);

    sim::TraceParams tp;
    std::string out;
    CLI::App *gen = app.add_subcommand("generate", "Write a synthetic trace (CSV)");
    gen->add_option("--jobs", tp.jobs, "Jobs in the trace")->capture_default_str();
    gen->add_option("--seed", tp.seed, "Random seed (same seed, same trace)")
        ->capture_default_str();
    gen->add_option("--mean-interarrival", tp.mean_interarrival_s,
                    "Mean seconds between arrivals (Poisson)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    gen->add_option("--out", out, "Output file (default: standard output)");

    sim::ClusterParams c;
    std::string trace_file, policy = "all", json_file;
    CLI::App *run = app.add_subcommand("run", "Replay a trace under each policy");
    run->add_option("--trace", trace_file, "Trace CSV (from generate)")->required();
    run->add_option("--nodes", c.nodes, "Aggregator nodes")
        ->check(CLI::Range(1u, 100000u))
        ->capture_default_str();
    run->add_option("--node-chunks", c.node_chunks, "Fast-path memory per node, in chunks")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    run->add_option("--fast-rate", c.fast_rate, "Fast-path contributions/s per node")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    run->add_option("--host-rate", c.host_rate, "Host-path contributions/s per node")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    run->add_option("--min-job-chunks", c.min_job_chunks, "Guaranteed chunks per partition")
        ->capture_default_str();
    run->add_option("--partition-chunks", c.partition_chunks, "Chunks per placed partition")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    run->add_option("--reschedule", c.reschedule_s, "Seconds between periodic re-divisions")
        ->capture_default_str();
    run->add_option("--policy", policy, "A policy, or all (benefit, fair, equal, fcfs, hashed)")
        ->check([](const std::string &v) {
            return v == "all" || sched::parse_policy(v) ? std::string()
                                                        : "unknown policy '" + v + "'";
        })
        ->capture_default_str();
    run->add_option("--json", json_file, "Write every figure, per job too, as JSON here");

    CLI11_PARSE(app, argc, argv);
    try {
        if (gen->parsed()) {
            auto jobs = sim::generate(tp);
            if (out.empty()) {
                sim::write_csv(std::cout, jobs);
            } else {
                std::ofstream f(out);
                sim::write_csv(f, jobs);
                if (!f)
                    throw std::runtime_error("cannot write " + out);
            }
            return 0;
        }
        std::ifstream in(trace_file);
        if (!in)
            throw std::runtime_error("cannot read " + trace_file);
        auto trace = sim::read_csv(in);
        std::vector<sim::PolicyResult> results;
        for (sched::Policy p : sched::all_policies())
            if (policy == "all" || policy == sched::to_string(p))
                results.push_back(sim::simulate(trace, c, p));
        print_table(results, trace.size(), c);
        if (!json_file.empty()) {
            nlohmann::json all = nlohmann::json::array();
            for (const auto &r : results)
                all.push_back(to_json(r));
            std::ofstream(json_file) << nlohmann::json{{"jobs", trace.size()},
                                                       {"nodes", c.nodes},
                                                       {"node_chunks", c.node_chunks},
                                                       {"fast_rate", c.fast_rate},
                                                       {"host_rate", c.host_rate},
                                                       {"min_job_chunks", c.min_job_chunks},
                                                       {"partition_chunks", c.partition_chunks},
                                                       {"reschedule_s", c.reschedule_s},
                                                       {"policies", all}}
                                            .dump(1)
                                     << "\n";
        }
        for (const auto &r : results)
            if (r.over_budget)
                throw std::runtime_error(std::string(sched::to_string(r.policy)) +
                                         " handed out more memory than a node has");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "xagg-sim: %s\n", e.what());
        return 1;
    }
    return 0;
}
