// SPDX-License-Identifier: MIT
// A trace of training jobs for xagg-sim: what arrives when, how large its gradient is, how many
// workers and iterations it has, and how long each iteration computes. CSV, one job a line:
//
//   id,arrival_s,workers,chunks,iterations,compute_s,weight
//
// '#' lines are comments. A generator for synthetic traces ships with it (generate()).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace xagg::sim {

struct TraceJob {
    uint32_t id = 0;
    double arrival_s = 0;
    uint32_t workers = 2;
    uint64_t chunks = 0;  // gradient size in chunks (768 values each)
    uint64_t iterations = 0;
    double compute_s = 0;  // per iteration, overlapped with nothing (a conservative model)
    double weight = 1;
};

struct TraceParams {
    uint32_t jobs = 1000;
    uint64_t seed = 1;
    double mean_interarrival_s = 10.0;  // Poisson arrivals
};

// Synthetic jobs: models from 5 M to 340 M parameters (a CNN, ResNet-50, an LSTM, BERT-base,
// GPT-2 small, VGG-16, BERT-large) with 2 to 32 workers, 200 to 20,000 iterations (log-uniform),
// 50 to 500 ms of compute per iteration, one job in ten of weight 2. Deterministic per seed.
std::vector<TraceJob> generate(const TraceParams &params);

void write_csv(std::ostream &out, const std::vector<TraceJob> &jobs);
// Throws std::runtime_error naming the line and what is wrong with it.
std::vector<TraceJob> read_csv(std::istream &in);

}  // namespace xagg::sim
