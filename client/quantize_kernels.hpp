// SPDX-License-Identifier: MIT
// The per-value loops of quantization (client/quantize.hpp), compiled once per x86 vector
// extension and picked at run time: SSE2 (every x86-64), AVX2 and AVX-512 where the CPU has
// them, plus a scalar build that the tests hold every other one to. They are the same source
// and integer or exactly rounded double arithmetic (no contraction into FMA: compiled with
// -ffp-contract=off), so every variant gives the same bits; tests/client_quantize_test.cpp
// checks that on the CPUs it runs on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace xagg::client {

enum class Isa { scalar, sse2, avx2, avx512 };

struct QuantizeKernels {
    Isa isa;
    // The largest masked (sign-cleared) bit pattern among the finite values, and in *any the
    // largest among all of them (>= 0x7f800000 when there is a NaN or an infinity).
    int32_t (*largest_finite_bits)(const float *values, size_t n, int32_t *any);
    // out[i] = v[i] * scale rounded to nearest even, clamped to +-2^30; NaN and infinity send 0.
    void (*quantize)(const float *values, size_t n, double scale, int32_t *out);
    // out[i] = (float)(sums[i] * unit).
    void (*dequantize)(const int32_t *sums, size_t n, double unit, float *out);
};

// Whether this CPU (and build) can run the variant.
bool isa_supported(Isa isa);
// The variant's kernels; isa must be supported.
const QuantizeKernels &kernels_for(Isa isa);
// The kernels every quantization uses: the widest supported variant, or the one the
// XAGG_QUANTIZE_ISA environment variable names (scalar, sse2, avx2, avx512), read once.
const QuantizeKernels &kernels();

std::string_view isa_name(Isa isa);
std::optional<Isa> isa_named(std::string_view name);

}  // namespace xagg::client
