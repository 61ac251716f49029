// SPDX-License-Identifier: MIT
// Starting xagg-demo-worker processes in a test topology.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.hpp"
#include "tests/support/topology.hpp"
#include "xagg/proto.h"

namespace xagg::test {

struct WorkerRun {
    uint32_t job = 0;
    unsigned workers = 0;  // the job's size (ranks 0..workers-1)
    uint32_t chunks = 0;
    uint32_t rounds = 0;
    std::string group;
    std::string key;  // the job key, 16 hex digits (a join reply's "key")
    uint16_t group_port = 9872;
    uint32_t timeout_ms = 20;
    uint32_t max_retries = 500;
    uint64_t seed = 42;
    unsigned first_host = 0;                  // rank r runs in worker namespace first_host + r
    uint32_t chunk_elems = XAGG_CHUNK_ELEMS;  // the job's chunk size
};

inline WorkerRun worker_run(uint32_t job, unsigned workers, uint32_t chunks, uint32_t rounds,
                            const std::string &group, const std::string &key)
{
    WorkerRun run;
    run.job = job;
    run.workers = workers;
    run.chunks = chunks;
    run.rounds = rounds;
    run.group = group;
    run.key = key;
    return run;
}

// Starts rank `rank` of `run` in its namespace; its JSON summary goes to `output`.
inline std::unique_ptr<Process> start_demo_worker(const Topology &topo, const WorkerRun &run,
                                                  unsigned rank, const std::string &output)
{
    return std::make_unique<Process>(
        std::vector<std::string>{XAGG_BINARY_DIR "/tests/xagg-demo-worker",
                                 "--netns",
                                 topo.worker(run.first_host + rank),
                                 "--aggregator",
                                 kAggAddr,
                                 "--local",
                                 worker_addr(run.first_host + rank),
                                 "--group",
                                 run.group,
                                 "--group-port",
                                 std::to_string(run.group_port),
                                 "--job",
                                 std::to_string(run.job),
                                 "--key",
                                 run.key,
                                 "--rank",
                                 std::to_string(rank),
                                 "--workers",
                                 std::to_string(run.workers),
                                 "--chunks",
                                 std::to_string(run.chunks),
                                 "--rounds",
                                 std::to_string(run.rounds),
                                 "--seed",
                                 std::to_string(run.seed),
                                 "--timeout-ms",
                                 std::to_string(run.timeout_ms),
                                 "--max-retries",
                                 std::to_string(run.max_retries),
                                 "--chunk-elems",
                                 std::to_string(run.chunk_elems),
                                 "--json"},
        output);
}

// Starts every rank of `run`; outputs go to DIR/workerN.json.
inline std::vector<std::unique_ptr<Process>> start_demo_workers(const Topology &topo,
                                                                const WorkerRun &run,
                                                                const std::string &dir)
{
    std::vector<std::unique_ptr<Process>> procs;
    for (unsigned r = 0; r < run.workers; r++)
        procs.push_back(
            start_demo_worker(topo, run, r, dir + "/worker" + std::to_string(r) + ".json"));
    return procs;
}

}  // namespace xagg::test
