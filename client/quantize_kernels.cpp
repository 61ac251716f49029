// SPDX-License-Identifier: MIT
#include "client/quantize_kernels.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace xagg::client {
namespace {

// The loop bodies, written once and inlined into each variant below, which the compiler then
// vectorizes for that variant's instruction set. They work on bit patterns and doubles so that
// the vector code is exact: without the sign, a larger finite float has a larger pattern, NaN
// and infinity are those from 0x7f800000 up (signed compares: SSE2 has no unsigned ones).

#define XAGG_KERNEL_BODY [[gnu::always_inline]] inline

XAGG_KERNEL_BODY int32_t largest_finite_bits_body(const float *values, size_t n, int32_t *any_out)
{
    constexpr int32_t kInfinity = 0x7f800000;
    int32_t largest = 0, any = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t bits;
        std::memcpy(&bits, values + i, sizeof(bits));
        bits &= 0x7fffffff;
        any = any > bits ? any : bits;
        int32_t finite = bits < kInfinity ? bits : 0;
        largest = largest > finite ? largest : finite;
    }
    *any_out = any;
    return largest;
}

// v * scale is exact in double (a float times a power of two, far from double's limits).
// Adding and removing 1.5 * 2^52 rounds it to the nearest integer, ties to even, as nearbyint()
// does in the default rounding mode, without a library call per value. The clamp keeps a
// buffer changed since its exponent was agreed from overflowing the conversion.
XAGG_KERNEL_BODY void quantize_body(const float *values, size_t n, double scale, int32_t *out)
{
    constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52
    constexpr double kLimit = 1 << 30;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        std::memcpy(&bits, values + i, sizeof(bits));
        // NaN and infinities send 0. A mask and std::max/min rather than branches: GCC 12
        // vectorizes only this form (checked with -fopt-info-vec).
        bits &= (bits & 0x7f800000) == 0x7f800000 ? 0u : ~0u;
        float v;
        std::memcpy(&v, &bits, sizeof(v));
        double q = (static_cast<double>(v) * scale + kRound) - kRound;
        q = std::min(std::max(q, -kLimit), kLimit);
        out[i] = static_cast<int32_t>(q);
    }
}

XAGG_KERNEL_BODY void dequantize_body(const int32_t *sums, size_t n, double unit, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = static_cast<float>(static_cast<double>(sums[i]) * unit);
}

// One variant: three functions with the same attributes around the bodies.
#define XAGG_KERNEL_VARIANT(name, attributes)                                              \
    attributes int32_t name##_largest(const float *v, size_t n, int32_t *any)              \
    {                                                                                      \
        return largest_finite_bits_body(v, n, any);                                        \
    }                                                                                      \
    attributes void name##_quantize(const float *v, size_t n, double scale, int32_t *out)  \
    {                                                                                      \
        quantize_body(v, n, scale, out);                                                   \
    }                                                                                      \
    attributes void name##_dequantize(const int32_t *s, size_t n, double unit, float *out) \
    {                                                                                      \
        dequantize_body(s, n, unit, out);                                                  \
    }

// The reference: the same bodies, one value at a time.
XAGG_KERNEL_VARIANT(scalar, [[gnu::optimize("no-tree-vectorize")]])
// The build's baseline (SSE2 on x86-64), vectorized at -O3.
XAGG_KERNEL_VARIANT(baseline, )
#if defined(__x86_64__)
XAGG_KERNEL_VARIANT(avx2, [[gnu::target("avx2")]])
XAGG_KERNEL_VARIANT(avx512,
                    [[gnu::target("avx512f,avx512vl,avx512bw,avx512dq,prefer-vector-width=512")]])
#endif

const QuantizeKernels kScalar{Isa::scalar, scalar_largest, scalar_quantize, scalar_dequantize};
const QuantizeKernels kBaseline{Isa::sse2, baseline_largest, baseline_quantize,
                                baseline_dequantize};
#if defined(__x86_64__)
const QuantizeKernels kAvx2{Isa::avx2, avx2_largest, avx2_quantize, avx2_dequantize};
const QuantizeKernels kAvx512{Isa::avx512, avx512_largest, avx512_quantize, avx512_dequantize};
#endif

Isa widest_supported()
{
    for (Isa isa : {Isa::avx512, Isa::avx2})
        if (isa_supported(isa))
            return isa;
    return isa_supported(Isa::sse2) ? Isa::sse2 : Isa::scalar;
}

}  // namespace

bool isa_supported(Isa isa)
{
    switch (isa) {
    case Isa::scalar: return true;
#if defined(__x86_64__)
    case Isa::sse2: return true;
    case Isa::avx2: return __builtin_cpu_supports("avx2");
    case Isa::avx512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
#else
    // Elsewhere the baseline is whatever the build targets, filed under sse2's name.
    case Isa::sse2: return true;
    case Isa::avx2:
    case Isa::avx512: return false;
#endif
    }
    return false;
}

const QuantizeKernels &kernels_for(Isa isa)
{
    if (!isa_supported(isa))
        throw std::invalid_argument("this CPU cannot run the " + std::string(isa_name(isa)) +
                                    " quantization kernels");
    switch (isa) {
    case Isa::scalar: return kScalar;
    case Isa::sse2: return kBaseline;
#if defined(__x86_64__)
    case Isa::avx2: return kAvx2;
    case Isa::avx512: return kAvx512;
#else
    default: break;
#endif
    }
    return kBaseline;
}

const QuantizeKernels &kernels()
{
    static const QuantizeKernels &chosen = [&]() -> const QuantizeKernels & {
        const char *wanted = std::getenv("XAGG_QUANTIZE_ISA");
        if (!wanted || !*wanted)
            return kernels_for(widest_supported());
        auto isa = isa_named(wanted);
        if (!isa)
            throw std::invalid_argument(std::string("XAGG_QUANTIZE_ISA=") + wanted +
                                        ": not one of scalar, sse2, avx2, avx512");
        return kernels_for(*isa);
    }();
    return chosen;
}

std::string_view isa_name(Isa isa)
{
    switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::sse2: return "sse2";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    }
    return "?";
}

std::optional<Isa> isa_named(std::string_view name)
{
    for (Isa isa : {Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512})
        if (isa_name(isa) == name)
            return isa;
    return std::nullopt;
}

}  // namespace xagg::client
