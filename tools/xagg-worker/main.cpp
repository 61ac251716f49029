// SPDX-License-Identifier: MIT
// xagg-worker: one worker of a job, through the client library. All-reduces a float (or int32)
// tensor for a number of iterations, from synthetic data (every worker can compute every
// rank's, so --verify checks each result bit for bit against the protocol's arithmetic and
// within the documented bound of the float64 sum) or from a file, and reports the rate.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <thread>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <numeric>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "lib/sys/netns.hpp"
#include "client/quantize.hpp"
#include "xagg/client.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// CPU time of the whole process, the client's I/O thread included.
double process_cpu_seconds()
{
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

struct Options {
    std::vector<std::string> aggregators;
    std::string etcd, etcd_prefix = "/xagg", token_file;  // a cluster job, placed through etcd
    xagg::ControlTls tls;                                 // for its nodes reached over TCP
    uint32_t cluster_job = 0;
    unsigned recoveries = 5;
    std::string netns, input, output, dtype = "float";
    uint64_t elems = 1 << 20, seed = 1;
    unsigned iterations = 1;
    bool verify = false, json = false;
    bool barrier = false;   // a barrier before each timed all-reduce
    std::string stop_file;  // the workers stop together, before the first iteration that
                            // starts after any of them saw this file
    xagg::ClientOptions client;
    unsigned timeout_ms = 20;
    std::optional<unsigned> delay_target_us;  // unset: the client's default for the job
};

// --aggregator address=10.0.0.5,job=7[,socket=PATH][,host=HOST:PORT][,token-file=F][,ca=F]
//     [,cert=F][,key=F][,plaintext=true][,weight=W][,job-key=HEX]
xagg::Aggregator parse_aggregator(const std::string &spec)
{
    xagg::Aggregator a;
    std::stringstream in(spec);
    for (std::string item; std::getline(in, item, ',');) {
        auto eq = item.find('=');
        if (eq == std::string::npos)
            throw CLI::ValidationError("--aggregator", "'" + item + "' is not key=value");
        std::string k = item.substr(0, eq), v = item.substr(eq + 1);
        if (k == "address")
            a.address = v;
        else if (k == "job")
            a.job = static_cast<uint32_t>(std::stoul(v));
        else if (k == "socket")
            a.control_socket = v;
        else if (k == "host")
            a.control_host = v;
        else if (k == "token-file") {
            std::ifstream f(v);
            std::getline(f, a.token);
        } else if (k == "ca")
            a.tls.ca_file = v;
        else if (k == "cert")
            a.tls.cert_file = v;
        else if (k == "key")
            a.tls.key_file = v;
        else if (k == "plaintext")
            a.tls.plaintext = v == "1" || v == "true";
        else if (k == "weight")
            a.weight = std::stod(v);
        else if (k == "job-key")
            a.key = v;
        else
            throw CLI::ValidationError("--aggregator", "unknown key '" + k + "'");
    }
    if (a.address.empty() || a.job == 0)
        throw CLI::ValidationError("--aggregator", "needs address= and job=");
    return a;
}

// Deterministic synthetic gradients: any worker can compute any rank's. Magnitudes vary by
// block (2^-12 .. 2^7) so the block exponents matter.
uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void synthesize(uint64_t seed, uint32_t rank, unsigned iteration, std::vector<float> &out)
{
    const uint64_t base = mix(seed ^ mix(uint64_t{rank} << 32 | iteration));
    for (size_t block = 0; block * XAGG_CHUNK_ELEMS < out.size(); block++) {
        // u in [-1, 1) times 2^(scale): uniform per block, magnitudes differing by block.
        int scale = static_cast<int>(mix(base ^ block ^ 0x5eed) % 20) - 12;
        const double unit = std::ldexp(2.0 / 9007199254740992.0, scale);
        const double offset = std::ldexp(1.0, scale);
        const size_t end = std::min(out.size(), (block + 1) * XAGG_CHUNK_ELEMS);
        for (size_t i = block * XAGG_CHUNK_ELEMS; i < end; i++)
            out[i] = static_cast<float>(static_cast<double>(mix(base ^ i) >> 11) * unit - offset);
    }
}

void synthesize(uint64_t seed, uint32_t rank, unsigned iteration, std::vector<int32_t> &out,
                unsigned workers)
{
    const uint64_t base = mix(seed ^ mix(uint64_t{rank} << 32 | iteration));
    const int64_t bound = INT32_MAX / workers;
    for (size_t i = 0; i < out.size(); i++)
        out[i] =
            static_cast<int32_t>(static_cast<int64_t>(mix(base ^ i) % (2 * bound + 1)) - bound);
}

struct Verdict {
    uint64_t exact = 0, wrong = 0, beyond_bound = 0;
    double worst = 0;  // largest |error| / bound
};

Verdict verify_float(const Options &o, unsigned workers, size_t chunk_elems, unsigned iteration,
                     const std::vector<float> &got)
{
    std::vector<std::vector<float>> inputs(workers, std::vector<float>(got.size()));
    std::vector<std::span<const float>> views;
    for (unsigned r = 0; r < workers; r++) {
        synthesize(o.seed, r, iteration, inputs[r]);
        views.emplace_back(inputs[r]);
    }
    // With local-first reduction each host's ranks are one member (their scan the largest).
    xagg::client::Expected want = xagg::client::expected_allreduce(
        views, chunk_elems, o.client.local_first ? o.client.local_ranks : 1);
    Verdict v;
    for (size_t i = 0; i < got.size(); i++) {
        (std::memcmp(&got[i], &want.values[i], sizeof(float)) == 0 ? v.exact : v.wrong)++;
        double exact = 0;
        for (unsigned r = 0; r < workers; r++)
            exact += inputs[r][i];
        double bound =
            xagg::client::error_bound(want.scales[i / chunk_elems].exponent, workers, exact);
        double err = std::fabs(double{got[i]} - exact);
        v.beyond_bound += err > bound;
        v.worst = std::max(v.worst, err / bound);
    }
    return v;
}

Verdict verify_int(const Options &o, unsigned workers, unsigned iteration,
                   const std::vector<int32_t> &got)
{
    std::vector<uint32_t> sum(got.size(), 0);
    std::vector<int32_t> mine(got.size());
    for (unsigned r = 0; r < workers; r++) {
        synthesize(o.seed, r, iteration, mine, workers);
        for (size_t i = 0; i < got.size(); i++)
            sum[i] += static_cast<uint32_t>(mine[i]);
    }
    Verdict v;
    for (size_t i = 0; i < got.size(); i++)
        (static_cast<int32_t>(sum[i]) == got[i] ? v.exact : v.wrong)++;
    return v;
}

// A cluster job's aggregators from etcd. After a failure, waits (up to a minute) for a placement
// newer than `failed` (the nodes re-place a dead node's partitions once its lease expires), then
// a moment more for the nodes to resize their local jobs.
xagg::Placement await_placement(const Options &o, int64_t failed)
{
    std::string token;
    if (!o.token_file.empty())
        std::getline(std::ifstream(o.token_file), token);
    auto deadline = Clock::now() + std::chrono::seconds(60);
    for (;;) {
        try {
            xagg::Placement p =
                xagg::resolve_placement(o.etcd, o.cluster_job, o.etcd_prefix, token);
            for (xagg::Aggregator &a : p.aggregators)
                a.tls = o.tls;
            if (p.revision != failed) {
                if (failed)
                    std::this_thread::sleep_for(std::chrono::seconds(1));
                return p;
            }
        } catch (const xagg::ClientError &e) {
            if (Clock::now() > deadline)
                throw;
        }
        if (Clock::now() > deadline)
            throw xagg::ClientError(
                xagg::ClientError::Kind::timeout,
                "job " + std::to_string(o.cluster_job) + " was not placed again within a minute");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

template <typename T>
int run(Options &o)
{
    std::string tuned;  // the client's line when tuning ends; in the JSON report with --json
    if (o.json)
        o.client.log = [&tuned](const std::string &line) { tuned = line; };
    int64_t revision = 0;
    if (!o.etcd.empty()) {
        xagg::Placement p = await_placement(o, 0);
        o.client.aggregators = p.aggregators;
        revision = p.revision;
    }
    auto client_ptr = std::make_unique<xagg::Client>(o.client);
    const unsigned workers = client_ptr->workers();
    unsigned recovered = 0;
    std::vector<T> data(o.elems);
    if (!o.input.empty()) {
        std::ifstream in(o.input, std::ios::binary);
        in.read(reinterpret_cast<char *>(data.data()),
                static_cast<std::streamsize>(data.size() * sizeof(T)));
        if (static_cast<size_t>(in.gcount()) != data.size() * sizeof(T))
            throw std::runtime_error(o.input + ": shorter than " + std::to_string(o.elems) +
                                     " values");
    }
    // Per iteration, so that an iteration done again after a recovery counts once.
    std::vector<double> times(o.iterations, 0), cpu(o.iterations, 0);
    std::vector<Verdict> verdicts(o.iterations);
    xagg::AllReduceReport total;
    unsigned done = o.iterations;
    for (unsigned it = 0; it < o.iterations;) {
        // Whether to stop, agreed by all: each worker's "I saw the file" summed.
        if (!o.stop_file.empty()) {
            int32_t seen = access(o.stop_file.c_str(), F_OK) == 0;
            client_ptr->allreduce(std::span<int32_t>(&seen, 1));
            if (seen) {
                done = it;
                break;
            }
        }
        if (o.input.empty()) {
            if constexpr (std::is_same_v<T, float>)
                synthesize(o.seed, o.client.rank, it, data);
            else
                synthesize(o.seed, o.client.rank, it, data, workers);
        }
        auto start = Clock::now();
        double cpu_start = process_cpu_seconds();
        xagg::AllReduceReport r;
        try {
            // As gloo's baseline passes dist.barrier(): otherwise a worker that prepared its
            // input early counts, as its own all-reduce time, the others still preparing theirs.
            if (o.barrier) {
                client_ptr->barrier();
                start = Clock::now();
                cpu_start = process_cpu_seconds();
            }
            r = client_ptr->allreduce(std::span<T>(data));
        } catch (const xagg::ClientError &e) {
            // A cluster job outlives a node: take the new placement, and start again, with the
            // others, from the earliest iteration any of us did not finish.
            if (o.etcd.empty() || recovered++ >= o.recoveries)
                throw;
            std::cerr << "xagg-worker: rank " << o.client.rank << ": iteration " << it << ": "
                      << e.what() << "; waiting for job " << o.cluster_job
                      << " to be placed again\n";
            client_ptr.reset();
            xagg::Placement p = await_placement(
                o, e.kind() == xagg::ClientError::Kind::job_deleted ? -1 : revision);
            o.client.aggregators = p.aggregators;
            revision = p.revision;
            client_ptr = std::make_unique<xagg::Client>(o.client);
            std::vector<int32_t> where(o.iterations, 0);
            where[it] = 1;
            client_ptr->allreduce(std::span<int32_t>(where));
            it = static_cast<unsigned>(
                std::find_if(where.begin(), where.end(), [](int32_t v) { return v != 0; }) -
                where.begin());
            continue;
        }
        times[it] = std::chrono::duration<double>(Clock::now() - start).count();
        cpu[it] = process_cpu_seconds() - cpu_start;
        total.chunks += r.chunks;
        total.retransmits += r.retransmits;
        total.early_retransmits += r.early_retransmits;
        total.credit_cuts += r.credit_cuts;
        total.marked_chunks += r.marked_chunks;
        total.fallback_chunks += r.fallback_chunks;
        total.nonfinite_blocks += r.nonfinite_blocks;
        total.partial_chunks += r.partial_chunks;
        if (o.verify && o.input.empty()) {
            if constexpr (std::is_same_v<T, float>)
                verdicts[it] = verify_float(o, workers, client_ptr->chunk_elems(), it, data);
            else
                verdicts[it] = verify_int(o, workers, it, data);
        }
        it++;
    }
    Verdict verdict;
    for (const Verdict &v : verdicts) {
        verdict.exact += v.exact;
        verdict.wrong += v.wrong;
        verdict.beyond_bound += v.beyond_bound;
        verdict.worst = std::max(verdict.worst, v.worst);
    }
    xagg::Client &client = *client_ptr;
    if (!o.output.empty())
        std::ofstream(o.output, std::ios::binary)
            .write(reinterpret_cast<const char *>(data.data()),
                   static_cast<std::streamsize>(data.size() * sizeof(T)));
    times.resize(done);
    double seconds = 0, best = times.empty() ? 0 : times[0];
    for (double t : times) {
        seconds += t;
        best = std::min(best, t);
    }
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    const double bytes = static_cast<double>(o.elems) * sizeof(T);
    const bool ok = verdict.wrong == 0 && verdict.beyond_bound == 0;
    if (o.json) {
        nlohmann::json j = {{"rank", o.client.rank},
                            {"workers", workers},
                            {"elems", o.elems},
                            {"iterations", done},
                            {"seconds", seconds},
                            {"median_seconds", median},
                            {"best_seconds", best},
                            {"chunks", total.chunks},
                            {"retransmits", total.retransmits},
                            {"early_retransmits", total.early_retransmits},
                            {"credit_cuts", total.credit_cuts},
                            {"marked_chunks", total.marked_chunks},
                            {"cpu_seconds", std::accumulate(cpu.begin(), cpu.end(), 0.0)},
                            {"fallback_chunks", total.fallback_chunks},
                            {"partial_chunks", total.partial_chunks},
                            {"nonfinite_blocks", total.nonfinite_blocks},
                            {"verified", o.verify},
                            {"exact", verdict.exact},
                            {"wrong", verdict.wrong},
                            {"beyond_bound", verdict.beyond_bound},
                            {"worst_error_over_bound", verdict.worst},
                            {"times", times}};
        xagg::Tuning t = client.tuning();
        j["tuning"] = {{"enabled", t.enabled},
                       {"done", t.done},
                       {"window", t.window},
                       {"partition_chunks", t.partition_chunks},
                       {"trials", t.trials},
                       {"best_call_seconds", t.best_call_seconds},
                       {"start_call_seconds", t.start_call_seconds},
                       {"log", tuned}};
        std::cout << j.dump() << std::endl;
    } else {
        std::printf(
            "rank %u: %u x all-reduce of %.1f MiB (%s) with %u workers: median %.3f s, "
            "best %.3f s, %.2f Gbit/s of tensor; %lu chunks, %lu retransmits, %lu on "
            "the host path",
            o.client.rank, done, bytes / (1 << 20), o.dtype.c_str(), workers, median, best,
            bytes * 8 / median / 1e9, static_cast<unsigned long>(total.chunks),
            static_cast<unsigned long>(total.retransmits),
            static_cast<unsigned long>(total.fallback_chunks));
        if (o.verify)
            std::printf(
                "; verified: %lu values bit-exact, %lu wrong, %lu beyond the bound "
                "(worst %.2f of it)",
                static_cast<unsigned long>(verdict.exact),
                static_cast<unsigned long>(verdict.wrong),
                static_cast<unsigned long>(verdict.beyond_bound), verdict.worst);
        std::printf("\n");
    }
    return ok ? 0 : 3;
}

}  // namespace

int main(int argc, char **argv)
{
    Options o;
    CLI::App app("xagg-worker: one worker of an xagg job, through the client library");
    auto *agg = app.add_option(
        "--aggregator", o.aggregators,
        "address=IPV4,job=ID[,socket=PATH][,host=HOST:PORT][,token-file=F]"
        "[,ca=F][,cert=F][,key=F][,plaintext=true][,weight=W][,job-key=HEX]; repeat to "
        "split tensors across aggregators");
    auto *etcd = app.add_option("--etcd", o.etcd,
                                "http://HOST:PORT of etcd: the aggregators are the placement of "
                                "--cluster-job, and a node that dies is replaced");
    etcd->excludes(agg);
    app.add_option("--cluster-job", o.cluster_job, "The cluster job (with --etcd)")->needs(etcd);
    app.add_option("--etcd-prefix", o.etcd_prefix, "The cluster's key prefix in etcd")
        ->capture_default_str();
    app.add_option("--token-file", o.token_file, "Token for nodes reached over TCP (with --etcd)");
    app.add_option("--ca-file", o.tls.ca_file,
                   "PEM CA of the nodes' control_tls_cert (with --etcd; default: the system's)");
    app.add_flag("--plaintext", o.tls.plaintext,
                 "Nodes serve TCP without TLS (control_tcp_plaintext; with --etcd)");
    app.add_option("--recoveries", o.recoveries, "Placements taken again at most (with --etcd)")
        ->capture_default_str();
    app.add_option("--rank", o.client.rank, "This worker's rank")->required();
    app.add_option("--local", o.client.local_address, "IPv4 address this worker sends from")
        ->required();
    app.add_option("--port", o.client.port,
                   "UDP port this rank sends from (default: the job's group port, or with "
                   "--local-ranks the group port + 1 + --local-rank)")
        ->check(CLI::Range(1, 65535));
    app.add_option("--local-rank", o.client.local_rank,
                   "This rank among those sharing its address (0 .. --local-ranks - 1)")
        ->capture_default_str();
    app.add_option("--local-ranks", o.client.local_ranks,
                   "Ranks sharing this address, each with a port of its own")
        ->check(CLI::Range(1u, 64u))
        ->capture_default_str();
    app.add_flag("--local-first", o.client.local_first,
                 "Reduce inside the host first: local rank 0 sends the sum of the host's "
                 "--local-ranks ranks as the job's member for the host (the job has one worker a "
                 "host; ranks numbered host by host)");
    app.add_option("--netns", o.netns, "Run inside this `ip netns` network namespace");
    app.add_flag("!--no-join", o.client.join, "The rank is registered already (xaggctl)");
    app.add_option("--elems", o.elems, "Values per tensor")->capture_default_str();
    app.add_option("--iterations", o.iterations, "All-reduces to run")->capture_default_str();
    app.add_option("--stop-file", o.stop_file,
                   "Stop early, all workers at the same iteration, once any of them sees this "
                   "file (an int32 all-reduce of one value before each iteration)");
    app.add_option("--dtype", o.dtype, "float or int32")
        ->check(CLI::IsMember({"float", "int32"}))
        ->capture_default_str();
    app.add_option("--input", o.input, "Raw file of the tensor (instead of synthetic data)");
    app.add_option("--output", o.output, "Write the last result here (raw)");
    app.add_option("--seed", o.seed, "Seed of the synthetic data")->capture_default_str();
    app.add_flag("--barrier", o.barrier,
                 "Pass a barrier of all workers before each timed all-reduce (benchmarks: what "
                 "a worker spends preparing its input is then not counted in another's time)");
    app.add_flag("--verify", o.verify,
                 "Check every result: bit for bit against the protocol's arithmetic, and "
                 "within the error bound of the float64 sum (synthetic data only)");
    app.add_option("--window", o.client.window,
                   "Chunks in flight per aggregator (the ceiling under congestion control)")
        ->capture_default_str();
    app.add_flag("!--no-congestion-control", o.client.congestion_control,
                 "Keep --window chunks in flight whatever the network does, and find losses by "
                 "the timer alone");
    app.add_option("--delay-target-us", o.delay_target_us,
                   "Congestion control also cuts the credit when queueing delay exceeds this "
                   "on a path that drops without ECN marks (default 0: ECN and loss alone)");
    app.add_option("--partition", o.client.partition_chunks, "Chunks per scheduling partition")
        ->capture_default_str();
    app.add_option("--timeout-ms", o.timeout_ms, "Retransmission timer")->capture_default_str();
    app.add_option("--max-retries", o.client.max_retries, "Retransmissions before giving up")
        ->capture_default_str();
    app.add_flag("!--no-gso", o.client.gso, "Send without UDP GSO (sendmmsg only)");
    app.add_flag("!--no-autotune", o.client.autotune,
                 "Use --window and --partition as given instead of tuning them online");
    app.add_option("--tune-calls", o.client.tune_calls, "All-reduces per tuning trial")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--tune-trials", o.client.tune_trials, "Settings tried at most")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_flag("--json", o.json, "Print the report as JSON");
    CLI11_PARSE(app, argc, argv);
    if (o.aggregators.empty() && (o.etcd.empty() || !o.cluster_job)) {
        std::cerr << "xagg-worker: give --aggregator, or --etcd with --cluster-job\n";
        return 1;
    }
    try {
        for (const auto &spec : o.aggregators)
            o.client.aggregators.push_back(parse_aggregator(spec));
        o.client.timeout = std::chrono::milliseconds(o.timeout_ms);
        if (o.delay_target_us)
            o.client.delay_target = std::chrono::microseconds(*o.delay_target_us);
        if (!o.netns.empty())
            xagg::sys::enter_netns(o.netns);
        return o.dtype == "float" ? run<float>(o) : run<int32_t>(o);
    } catch (const xagg::ClientError &e) {
        std::cerr << "xagg-worker: rank " << o.client.rank << ": " << e.what() << "\n";
        return 2;
    } catch (const std::exception &e) {
        std::cerr << "xagg-worker: " << e.what() << "\n";
        return 2;
    }
}
