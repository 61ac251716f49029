// SPDX-License-Identifier: MIT
#include "tools/xagg-sim/trace.hpp"

#include <cmath>
#include <istream>
#include <ostream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "xagg/proto.h"

namespace xagg::sim {
namespace {

struct Model {
    const char *name;
    double params;  // float32 gradients: one value per parameter
    double share;   // of the jobs
};

constexpr Model kModels[] = {
    {"small CNN", 5e6, 0.25},    {"ResNet-50", 25.6e6, 0.25}, {"LSTM", 66e6, 0.15},
    {"BERT-base", 110e6, 0.15},  {"GPT-2 small", 124e6, 0.1}, {"VGG-16", 138e6, 0.05},
    {"BERT-large", 340e6, 0.05},
};

}  // namespace

std::vector<TraceJob> generate(const TraceParams &p)
{
    std::mt19937_64 rng(p.seed);
    std::uniform_real_distribution<double> unit(0, 1);
    std::exponential_distribution<double> gap(1 / p.mean_interarrival_s);
    std::vector<double> shares;
    for (const Model &m : kModels)
        shares.push_back(m.share);
    std::discrete_distribution<size_t> model(shares.begin(), shares.end());
    std::discrete_distribution<size_t> workers_pick({0.2, 0.3, 0.25, 0.15, 0.1});
    constexpr uint32_t kWorkers[] = {2, 4, 8, 16, 32};

    std::vector<TraceJob> jobs;
    double t = 0;
    for (uint32_t i = 0; i < p.jobs; i++) {
        TraceJob j;
        j.id = i + 1;
        j.arrival_s = t;
        t += gap(rng);
        j.workers = kWorkers[workers_pick(rng)];
        j.chunks = static_cast<uint64_t>(std::ceil(kModels[model(rng)].params / XAGG_CHUNK_ELEMS));
        j.iterations = static_cast<uint64_t>(
            std::exp(std::log(200.0) + unit(rng) * std::log(20000.0 / 200.0)));
        j.compute_s = 0.05 + unit(rng) * 0.45;
        j.weight = unit(rng) < 0.1 ? 2 : 1;
        jobs.push_back(j);
    }
    return jobs;
}

void write_csv(std::ostream &out, const std::vector<TraceJob> &jobs)
{
    out << "# id,arrival_s,workers,chunks,iterations,compute_s,weight\n";
    for (const TraceJob &j : jobs)
        out << j.id << ',' << j.arrival_s << ',' << j.workers << ',' << j.chunks << ','
            << j.iterations << ',' << j.compute_s << ',' << j.weight << '\n';
}

std::vector<TraceJob> read_csv(std::istream &in)
{
    std::vector<TraceJob> jobs;
    std::string line;
    for (unsigned number = 1; std::getline(in, line); number++) {
        if (line.empty() || line[0] == '#')
            continue;
        auto fail = [&](const std::string &why) {
            throw std::runtime_error("trace line " + std::to_string(number) + ": " + why + ": '" +
                                     line + "'");
        };
        std::vector<std::string> f;
        std::stringstream s(line);
        for (std::string field; std::getline(s, field, ',');)
            f.push_back(field);
        if (f.size() != 7)
            fail(
                "expected 7 comma-separated fields (id,arrival_s,workers,chunks,iterations,"
                "compute_s,weight), found " +
                std::to_string(f.size()));
        TraceJob j;
        try {
            size_t used = 0;
            auto whole = [&](const std::string &v) {
                if (v.empty() || v[0] == '-')
                    throw std::invalid_argument(v);
                unsigned long long x = std::stoull(v, &used);
                if (used != v.size())
                    throw std::invalid_argument(v);
                return static_cast<uint64_t>(x);
            };
            auto real = [&](const std::string &v) {
                double x = std::stod(v, &used);
                if (used != v.size() || !std::isfinite(x) || x < 0)
                    throw std::invalid_argument(v);
                return x;
            };
            j.id = static_cast<uint32_t>(whole(f[0]));
            j.arrival_s = real(f[1]);
            j.workers = static_cast<uint32_t>(whole(f[2]));
            j.chunks = whole(f[3]);
            j.iterations = whole(f[4]);
            j.compute_s = real(f[5]);
            j.weight = real(f[6]);
        } catch (const std::exception &) {
            fail("every field must be a non-negative number");
        }
        if (j.workers < 1 || j.workers > XAGG_MAX_WORKERS)
            fail("workers must be 1..64");
        if (j.chunks == 0 || j.iterations == 0)
            fail("chunks and iterations must be positive");
        if (!(j.weight > 0))
            fail("weight must be positive");
        if (!jobs.empty() && j.arrival_s < jobs.back().arrival_s)
            fail("arrivals must not go back in time");
        jobs.push_back(j);
    }
    return jobs;
}

}  // namespace xagg::sim
