// SPDX-License-Identifier: MIT
// A worker's own per-value work, alone: the block scan, quantization and dequantization of a
// float32 gradient in blocks of a chunk, with each instruction-set variant of
// client/quantize_kernels.cpp, against the scalar variant measured in the same run. One JSON
// line per variant: {"isa", "scan_gbps", "quantize_gbps", "dequantize_gbps"} (GB/s of float32
// in), and the speed-ups over scalar.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "client/quantize_kernels.hpp"
#include "xagg/proto.h"

using namespace xagg::client;
using Clock = std::chrono::steady_clock;

namespace {

// The best of `repeat` passes over the whole buffer, in GB/s of float32 input.
template <typename Pass>
double best_gbps(size_t bytes, int repeat, Pass pass)
{
    double best = 0;
    for (int r = 0; r < repeat; r++) {
        auto t0 = Clock::now();
        pass();
        double s = std::chrono::duration<double>(Clock::now() - t0).count();
        best = std::max(best, static_cast<double>(bytes) / s / 1e9);
    }
    return best;
}

}  // namespace

int main(int argc, char **argv)
{
    size_t mib = 64;
    int repeat = 5;
    size_t block = XAGG_CHUNK_ELEMS;
    CLI::App app{"quantization kernels per instruction set"};
    app.add_option("--mib", mib, "float32 gradient size (MiB)");
    app.add_option("--repeat", repeat, "passes; the best is reported");
    app.add_option("--block", block, "values per block (a chunk)");
    CLI11_PARSE(app, argc, argv);

    const size_t n = mib * 1024 * 1024 / 4, bytes = n * 4;
    std::vector<float> values(n), restored(n);
    std::vector<int32_t> ints(n);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1e-3f);
    for (auto &v : values)
        v = normal(rng);

    double scalar[3] = {};
    for (Isa isa : {Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512}) {
        if (!isa_supported(isa))
            continue;
        const QuantizeKernels &k = kernels_for(isa);
        volatile int32_t sink = 0;
        double g[3];
        g[0] = best_gbps(bytes, repeat, [&] {
            for (size_t at = 0; at < n; at += block) {
                int32_t any;
                sink =
                    sink + k.largest_finite_bits(values.data() + at, std::min(block, n - at), &any);
            }
        });
        g[1] = best_gbps(bytes, repeat, [&] {
            for (size_t at = 0; at < n; at += block)
                k.quantize(values.data() + at, std::min(block, n - at), 0x1p20, ints.data() + at);
        });
        g[2] = best_gbps(bytes, repeat, [&] {
            for (size_t at = 0; at < n; at += block)
                k.dequantize(ints.data() + at, std::min(block, n - at), 0x1p-20,
                             restored.data() + at);
        });
        if (isa == Isa::scalar)
            std::copy(g, g + 3, scalar);
        std::printf(
            "{\"isa\": \"%s\", \"scan_gbps\": %.2f, \"quantize_gbps\": %.2f, "
            "\"dequantize_gbps\": %.2f, \"scan_vs_scalar\": %.2f, "
            "\"quantize_vs_scalar\": %.2f, \"dequantize_vs_scalar\": %.2f}\n",
            std::string(isa_name(isa)).c_str(), g[0], g[1], g[2], g[0] / scalar[0],
            g[1] / scalar[1], g[2] / scalar[2]);
        std::fflush(stdout);
    }
    return 0;
}
