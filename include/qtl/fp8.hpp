#pragma once
/// \file
/// FP8 quantization as sglang's and vLLM's kernels compute it (`scaled_fp8_quant`,
/// `per_token_group_quant_fp8`), the requantization of fused FP8 checkpoints
/// (`requantize_with_max_scale`, `per_tensor_dequantize`) and the byte-distance comparison of the
/// sglang tests (`fp8_all_close`). `research/semantics.md` §2-§3 and §4.6-§4.11 is the spec.
///
/// Scales are *dequantization* scales, as in the reference: `x ≈ float(q) * scale`. Every variant
/// quantizes one element as
///
///     q = rne(clamp(x * (1/scale), -max, max))      in float32, max = 448 (e4m3fn) or 57344 (e5m2)
///
/// with `x` converted exactly to float32 first, `1/scale` an IEEE division and one rounding to the
/// fp8 grid (round to nearest, ties to even). The variants differ only in where the scale comes
/// from:
///
/// | function                      | scale                                         | zero scale  |
/// | ----------------------------- | --------------------------------------------- | ----------- |
/// | `scaled_fp8_quant_static`     | given, one per tensor                          | -> +max     |
/// | `scaled_fp8_quant_dynamic`    | `amax(|x|) / max`, one per tensor, no floor    | -> +max     |
/// | `scaled_fp8_quant_per_token`  | `min(amax_row, upper_bound) / max` per row     | -> 0        |
/// | `per_token_group_quant_fp8`   | `max(amax_group, eps) / max`, opt. 2^ceil(log2) | (eps > 0)   |
///
/// Where the peers disagree, QTL's defaults follow sglang's CUDA kernels (which the golden cases
/// reproduce), and the other behaviour is an option:
///   - **NaN input**: the kernels clamp with `fminf/fmaxf`, which drop a NaN operand, so a NaN
///     becomes `+max` (0x7E for e4m3fn) whatever its sign: `fp8_nan::to_max` (default). torch's
///     `clamp` keeps it and the cast gives the NaN code: `fp8_nan::propagate`, always the positive
///     code 0x7F (device arithmetic makes every NaN +NaN; x86 keeps signs: QTL defines one result).
///   - **zero scale** (static scale 0, or an all-zero tensor under dynamic per-tensor): sglang's
///     per-tensor kernels multiply by `1/0 = inf`, so 0 * inf = NaN -> +max and nonzero -> ±max:
///     `fp8_zero_scale::reciprocal` (default there). sglang's per-token kernels guard
///     `inv = scale == 0 ? 0 : 1/scale`, so the row quantizes to zeros: `fp8_zero_scale::guard`
///     (default for per-token).
///   - **vLLM's per-token recipe** floors the scale at `1/(max * 512)` and divides `x / scale`
///     instead of multiplying by the reciprocal: `vllm_per_token_options<Fp8>()`.
///   - **amax ignores NaN** (CUDA `fmaxf` reductions; torch's `amax` would give NaN). An infinite
///     input gives an infinite scale, `1/scale = 0`, and the Inf element itself becomes NaN -> see
///     the NaN policy.
///   - **padding**: an output with more rows than the input (sglang's `num_token_padding`) has its
///     extra rows written with +0 codes (the peers leave `torch.empty` garbage), and the extra
///     per-token / per-group scales with 0.
///
/// Shapes: inputs are row-major `[M, N]` views whose rows are contiguous (`stride[1] == 1`; any
/// row stride); outputs likewise. Errors (`qtl::shape_error`, `qtl::value_error`) name the argument
/// and value and are thrown before anything is written.
///
/// Host execution: the element functions are `QTL_HOST_DEVICE constexpr`, in `qtl/element/fp8.hpp`
/// (qtl/cuda/fp8.cuh runs them on the GPU). The host row loops run them four lanes at a time in SSE2 where the target has
/// it (same integer and IEEE steps, tested equal on every bf16 code), because g++ vectorizes the
/// scalar form only at -O3; on x86-64 with GCC/Clang, float and bf16 rows go through an AVX-512
/// executor (16 lanes; bf16 per-token-group 16 groups a step; amax, requantization and
/// `fp8_all_close` too) or an AVX2 one (8 lanes), chosen once at run time by CPUID, each doing the
/// same integer and IEEE steps (no FMA) and tested equal to the portable loops on hostile inputs
/// (test/unit/fp8_x86_test.cpp). Per-tensor quantization of large fp16 tensors (and bf16 without
/// AVX2) gathers from a 2^16-entry table of the element function instead (equal by construction);
/// with the UE8M0 recipe, `x / s` is computed as `x * (1/s)`, the same number for a normal power
/// of two. Per-tensor outputs of at least twice the last-level cache are written with
/// non-temporal stores. Results do not depend on `-ffp-contract` or `-march`; `-ffast-math` is not
/// supported (its reciprocal and NaN rewrites change the arithmetic the reference specifies).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <qtl/element/fp8.hpp>
#include <qtl/error.hpp>
#include <qtl/exact.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

#if defined(__SSE2__) && !defined(__CUDA_ARCH__)
#  include <emmintrin.h>
#  define QTL_FP8_SSE2 1
#else
#  define QTL_FP8_SSE2 0
#endif  // ^^^ __SSE2__ ^^^

// x86-64 host compilers with GNU target attributes also get an AVX2 row executor chosen at run
// time (the default build targets baseline x86-64); nvcc's passes do not.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#  include <immintrin.h>
#  include <unistd.h>  // sysconf: the last-level cache size
#  define QTL_FP8_X86_DISPATCH 1
#else
#  define QTL_FP8_X86_DISPATCH 0
#endif  // ^^^ x86-64 GCC/Clang host ^^^

namespace qtl {

// ---------------------------------------------------------------------------------------------
// host loops (the reference executor; qtl/cuda/fp8.cuh runs the same element code on the GPU)
// ---------------------------------------------------------------------------------------------

namespace detail {


template <class Fp8>
void zero_padding_rows(view2d<Fp8> out, index_t from_row) {
  for (index_t i = from_row; i < out.extent[0]; ++i) {
    Fp8* o = &out(i, 0);
    for (index_t j = 0; j < out.extent[1]; ++j) {
      o[j].bits = 0;
    }
  }
}

#if QTL_FP8_SSE2
// SSE2 forms of the element code, 4 lanes at a time, for the host row loops: g++ auto-vectorizes
// the scalar loops only at -O3 (its -O2 cost model refuses them), and the consumer picks the
// flags. Each step is the scalar step of `fp8_saturate_encode` / `fp8_encode_magnitude` on 4
// lanes (same integer and IEEE float operations, so the same codes; tested against the scalar
// element function). Magnitudes stay below 2^31, so SSE2's signed compares are exact.
template <class Fp8, fp8_nan Nan>
inline __m128i fp8_encode4(__m128 v) {
  using F = fp8_format<Fp8>;
  constexpr int drop = 23 - F::mantissa_bits;
  auto const c32 = [](std::uint32_t x) { return _mm_set1_epi32(static_cast<int>(x)); };
  __m128i const bits = _mm_castps_si128(v);
  __m128i sign = _mm_and_si128(_mm_srli_epi32(bits, 24), c32(0x80u));
  __m128i mag = _mm_and_si128(bits, c32(0x7fffffffu));
  __m128i const nan = _mm_cmpgt_epi32(mag, c32(0x7f800000u));
  __m128i const max_bits = c32(float_to_bits(F::max));
  __m128i const over = _mm_cmpgt_epi32(mag, max_bits);
  mag = _mm_or_si128(_mm_and_si128(over, max_bits), _mm_andnot_si128(over, mag));
  // normal: RNE of the mantissa to M bits, re-bias
  __m128i const lsb = _mm_and_si128(_mm_srli_epi32(mag, drop), c32(1u));
  __m128i const rounded = _mm_add_epi32(_mm_add_epi32(mag, c32((1u << (drop - 1)) - 1u)), lsb);
  __m128i const normal =
      _mm_sub_epi32(_mm_srli_epi32(rounded, drop), c32(std::uint32_t(127 - F::bias) << F::mantissa_bits));
  // subnormal: the FPU's RNE on |v| + 2^E
  std::uint32_t const magic_bits = std::uint32_t(127 + 24 - F::bias - F::mantissa_bits) << 23;
  __m128 const sum = _mm_add_ps(_mm_castsi128_ps(mag), _mm_castsi128_ps(c32(magic_bits)));
  __m128i const subnormal = _mm_sub_epi32(_mm_castps_si128(sum), c32(magic_bits));
  __m128i const is_subnormal = _mm_cmplt_epi32(mag, c32(std::uint32_t(127 + 1 - F::bias) << 23));
  __m128i const code = _mm_or_si128(_mm_and_si128(is_subnormal, subnormal), _mm_andnot_si128(is_subnormal, normal));
  if constexpr (Nan == fp8_nan::to_max) {
    sign = _mm_andnot_si128(nan, sign);
    return _mm_or_si128(code, sign);
  } else {
    return _mm_or_si128(_mm_or_si128(code, _mm_andnot_si128(nan, sign)), _mm_and_si128(nan, c32(F::nan_code)));
  }
}

template <fp8_scale_op Op>
inline __m128 fp8_scale4(__m128 x, __m128 scale, __m128 inv) {
  if constexpr (Op == fp8_scale_op::divide) {
    return _mm_div_ps(x, scale);
  } else {
    return _mm_mul_ps(x, inv);
  }
}
#endif  // ^^^ QTL_FP8_SSE2 ^^^

// One row: `out[j] = fp8_quantize_element(in[j])`; SSE2 for float and bf16 where available.
template <class Fp8, fp8_nan Nan, fp8_scale_op Op, class T>
void quantize_row(T const* in, Fp8* out, index_t n, float scale, float inv) {
  index_t j = 0;
#if QTL_FP8_SSE2
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16_t>) {
    __m128 const vs = _mm_set1_ps(scale);
    __m128 const vi = _mm_set1_ps(inv);
    index_t const vec_end = n - n % 8;
    for (; j < vec_end; j += 8) {
      __m128 lo;
      __m128 hi;
      if constexpr (std::is_same_v<T, float>) {
        lo = _mm_loadu_ps(in + j);
        hi = _mm_loadu_ps(in + j + 4);
      } else {  // bf16 bits are the high half of the float
        __m128i const raw = _mm_loadu_si128(reinterpret_cast<__m128i const*>(in + j));
        lo = _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), raw));
        hi = _mm_castsi128_ps(_mm_unpackhi_epi16(_mm_setzero_si128(), raw));
      }
      __m128i const c0 = fp8_encode4<Fp8, Nan>(fp8_scale4<Op>(lo, vs, vi));
      __m128i const c1 = fp8_encode4<Fp8, Nan>(fp8_scale4<Op>(hi, vs, vi));
      __m128i const bytes = _mm_packus_epi16(_mm_packs_epi32(c0, c1), _mm_setzero_si128());  // codes <= 255
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + j), bytes);
    }
  }
#endif  // ^^^ QTL_FP8_SSE2 ^^^
  for (; j < n; ++j) {
    out[j].bits = fp8_quantize_element<Fp8, Nan, Op>(to_float(in[j]), scale, inv);
  }
}

#if QTL_FP8_X86_DISPATCH
// AVX2 row executor: `fp8_encode4` and `quantize_row` on 8 lanes, 16 elements a step. The same
// integer and IEEE float operations, one instruction each (FMA is not enabled here and no product
// feeds an addition), so the same codes as the portable loops (tested on every bf16 code).
// (QTL_FP8_AVX2 stays defined for qtl/fp4.hpp's block executor.)
namespace x86 {
#  define QTL_FP8_AVX2 __attribute__((target("avx2")))

// The x86 executors in order of preference. The CPU's is read once (CPUID, and XGETBV for the
// OS's AVX-512 state, by `__builtin_cpu_supports`); `fp8_isa_limit()` caps the one used, a hook
// through which the unit tests run every executor on the same inputs.
enum class fp8_isa : std::uint8_t { portable, avx2, avx512 };

inline fp8_isa fp8_cpu_isa() {
  static fp8_isa const isa = [] {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vbmi")) {
      return fp8_isa::avx512;
    }
    return __builtin_cpu_supports("avx2") ? fp8_isa::avx2 : fp8_isa::portable;
  }();
  return isa;
}
inline fp8_isa& fp8_isa_limit() {
  static fp8_isa limit = fp8_isa::avx512;
  return limit;
}
inline fp8_isa fp8_active_isa() { return fp8_cpu_isa() < fp8_isa_limit() ? fp8_cpu_isa() : fp8_isa_limit(); }

// True when the AVX2 (at least) / AVX-512 executor runs.
inline bool fp8_has_avx2() { return fp8_active_isa() >= fp8_isa::avx2; }
inline bool fp8_has_avx512() { return fp8_active_isa() >= fp8_isa::avx512; }

QTL_FP8_AVX2 inline __m256i c32(std::uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }

template <class Fp8, fp8_nan Nan>
QTL_FP8_AVX2 inline __m256i fp8_encode8(__m256 v) {
  using F = fp8_format<Fp8>;
  constexpr int drop = 23 - F::mantissa_bits;
  __m256i const bits = _mm256_castps_si256(v);
  __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), c32(0x80u));
  __m256i mag = _mm256_and_si256(bits, c32(0x7fffffffu));
  __m256i const nan = _mm256_cmpgt_epi32(mag, c32(0x7f800000u));
  mag = _mm256_min_epi32(mag, c32(float_to_bits(F::max)));  // signed: magnitudes are below 2^31
  __m256i const lsb = _mm256_and_si256(_mm256_srli_epi32(mag, drop), c32(1u));
  __m256i const rounded = _mm256_add_epi32(_mm256_add_epi32(mag, c32((1u << (drop - 1)) - 1u)), lsb);
  __m256i const normal =
      _mm256_sub_epi32(_mm256_srli_epi32(rounded, drop), c32(std::uint32_t(127 - F::bias) << F::mantissa_bits));
  std::uint32_t const magic_bits = std::uint32_t(127 + 24 - F::bias - F::mantissa_bits) << 23;
  __m256 const sum = _mm256_add_ps(_mm256_castsi256_ps(mag), _mm256_castsi256_ps(c32(magic_bits)));
  __m256i const subnormal = _mm256_sub_epi32(_mm256_castps_si256(sum), c32(magic_bits));
  __m256i const is_subnormal = _mm256_cmpgt_epi32(c32(std::uint32_t(127 + 1 - F::bias) << 23), mag);
  __m256i const code = _mm256_blendv_epi8(normal, subnormal, is_subnormal);
  if constexpr (Nan == fp8_nan::to_max) {
    return _mm256_or_si256(code, _mm256_andnot_si256(nan, sign));
  } else {
    __m256i const signed_code = _mm256_or_si256(code, _mm256_andnot_si256(nan, sign));  // a NaN drops its sign
    return _mm256_or_si256(signed_code, _mm256_and_si256(nan, c32(F::nan_code)));
  }
}

// 8 elements as exact floats (bf16: its bits in the float's high half).
template <class T>
QTL_FP8_AVX2 inline __m256 load8(T const* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(p);
  } else {
    __m128i const raw = _mm_loadu_si128(reinterpret_cast<__m128i const*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  }
}

// The first `n - n % 16` elements of `quantize_row`; returns how many it did.
template <class Fp8, fp8_nan Nan, fp8_scale_op Op, class T>
QTL_FP8_AVX2 index_t quantize_row_avx2(T const* in, Fp8* out, index_t n, float scale, float inv) {
  __m256 const vs = _mm256_set1_ps(scale);
  __m256 const vi = _mm256_set1_ps(inv);
  index_t const vec_end = n - n % 16;
  for (index_t j = 0; j < vec_end; j += 16) {
    __m256 x0 = load8(in + j);
    __m256 x1 = load8(in + j + 8);
    if constexpr (Op == fp8_scale_op::divide) {
      x0 = _mm256_div_ps(x0, vs);
      x1 = _mm256_div_ps(x1, vs);
    } else {
      x0 = _mm256_mul_ps(x0, vi);
      x1 = _mm256_mul_ps(x1, vi);
    }
    __m256i const c0 = fp8_encode8<Fp8, Nan>(x0);
    __m256i const c1 = fp8_encode8<Fp8, Nan>(x1);
    // int16 lanes [0-3 8-11 | 4-7 12-15] -> [0-7 | 8-15] -> 16 bytes (codes <= 255)
    __m256i const w = _mm256_permute4x64_epi64(_mm256_packs_epi32(c0, c1), 0xD8);
    __m128i const bytes = _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), bytes);
  }
  return vec_end;
}

// AVX-512 executor (F, BW, VL, DQ, VBMI): 16 float lanes, the element code's integer and IEEE
// steps again (compares into masks, `vpternlogd` for and/or), one instruction each.
#  define QTL_FP8_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi")))
// g++ 12's AVX-512 intrinsics pass `_mm512_undefined_*()` (a self-initialised local) as the
// merge source of unmasked operations, which -Wuninitialized reports once they are inlined.
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic push
#    pragma GCC diagnostic ignored "-Wuninitialized"
#    pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#  endif  // ^^^ g++ ^^^

QTL_FP8_AVX512 inline __m512i z32(std::uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }

// `fp8_encode_magnitude` of a format with `Bias` and `M` mantissa bits (E4M3: 7, 3; E5M2: 15, 2)
// on 16 lanes; `mag` is at most the format's max and not NaN. One float addition rounds both
// ranges: with e = max(exponent of |v|, e_min), e_min that of the smallest normal, the float
// 2^(e + 23 - M) has ulp 2^(e - M), the format's step at |v| (the subnormal step below e_min), so
// the FPU's RNE of |v| + 2^(e+23-M) is the format's RNE of |v|, and the low bits of the sum
// count steps of 2^(e-M): 2^M + mantissa for a normal |v| (2^(M+1) when it rounds up to the next
// binade), the code itself for a subnormal one. Then
//
//   code = (e - e_min) * 2^M + (bits(sum) - bits(2^(e+23-M)))       (biased exponents)
//
// (the same codes as the element function's integer rounding; tested on every boundary).
template <int Bias, int M>
QTL_FP8_AVX512 inline __m512i encode_magnitude16(__m512i mag) {
  constexpr std::uint32_t e_min = 127 + 1 - Bias;
  __m512i const e = _mm512_max_epu32(_mm512_and_si512(mag, z32(0x7f800000u)), z32(e_min << 23));
  __m512i const magic = _mm512_add_epi32(e, z32(std::uint32_t(23 - M) << 23));
  __m512 const sum = _mm512_add_ps(_mm512_castsi512_ps(mag), _mm512_castsi512_ps(magic));
  __m512i const steps = _mm512_sub_epi32(_mm512_castps_si512(sum), magic);
  return _mm512_add_epi32(_mm512_sub_epi32(_mm512_srli_epi32(e, 23 - M), z32(e_min << M)), steps);
}

// `fp8_saturate_encode` of 16 floats: |v| clamped to max on the bits (a NaN too, whose bits
// exceed Inf's), then `encode_magnitude16`, then the sign. `to_max`: the sign bit where v is a
// negative number, -0 and -Inf included (`vfpclassps`), so a NaN stays +max; `propagate`: v's
// sign bit, and a NaN lane is the positive NaN code.
template <class Fp8, fp8_nan Nan>
QTL_FP8_AVX512 inline __m512i fp8_encode16(__m512 v) {
  using F = fp8_format<Fp8>;
  __m512i const bits = _mm512_castps_si512(v);
  __m512i const mag = _mm512_and_si512(bits, z32(0x7fffffffu));
  __m512i const code =
      encode_magnitude16<F::bias, F::mantissa_bits>(_mm512_min_epu32(mag, z32(float_to_bits(F::max))));
  if constexpr (Nan == fp8_nan::to_max) {
    __mmask16 const negative = _mm512_fpclass_ps_mask(v, 0x04 | 0x10 | 0x40);  // -0, -Inf, negative finite
    return _mm512_mask_or_epi32(code, negative, code, z32(0x80u));
  } else {
    __mmask16 const nan = _mm512_cmpgt_epu32_mask(mag, z32(0x7f800000u));
    // code | ((bits >> 24) & 0x80): A | (B & C)
    __m512i const signed_code = _mm512_ternarylogic_epi32(code, _mm512_srli_epi32(bits, 24), z32(0x80u), 0xF8);
    return _mm512_mask_mov_epi32(signed_code, nan, z32(F::nan_code));  // +NaN code, whatever the sign
  }
}

template <fp8_scale_op Op>
QTL_FP8_AVX512 inline __m512 scale16(__m512 x, __m512 scale, __m512 inv) {
  if constexpr (Op == fp8_scale_op::divide) {
    return _mm512_div_ps(x, scale);
  } else {
    return _mm512_mul_ps(x, inv);
  }
}

// 32 bf16 as two float vectors without a shuffle: the even elements (bits shifted into the high
// half) and the odd ones (their high half kept). Lane j of `even`/`odd` is element 2j / 2j+1.
QTL_FP8_AVX512 inline void load_bf16_pairs(bfloat16_t const* p, __m512& even, __m512& odd) {
  __m512i const raw = _mm512_loadu_si512(p);
  even = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(raw, z32(0xffff0000u)));
}

// The first `n - n % S` elements of `quantize_row` (S = 32 for bf16, 16 for float); returns how
// many it did. bf16: the codes of the even and odd elements meet in 16-bit words
// (odd << 8 | even, little-endian bytes 2j, 2j+1) and `vpmovdw` stores the 32 bytes in order.
// `prefetch` (optional, as long as the row): a row that is read next (per-token quantization's
// next row, whose max is taken before anything else can run), one line per step.
// `Stream` (bf16): non-temporal stores, `out` 32-byte aligned (see `stream_output`).
template <class Fp8, fp8_nan Nan, fp8_scale_op Op, class T, bool Stream = false>
QTL_FP8_AVX512 index_t quantize_row_avx512(T const* in, Fp8* out, index_t n, float scale, float inv,
                                           T const* prefetch = nullptr) {
  __m512 const vs = _mm512_set1_ps(scale);
  __m512 const vi = _mm512_set1_ps(inv);
  if constexpr (std::is_same_v<T, bfloat16_t>) {
    index_t const vec_end = n - n % 32;
    for (index_t j = 0; j < vec_end; j += 32) {
      if (prefetch != nullptr) {
        _mm_prefetch(reinterpret_cast<char const*>(prefetch + j), _MM_HINT_T0);
      }
      __m512 even;
      __m512 odd;
      load_bf16_pairs(in + j, even, odd);
      __m512i const ce = fp8_encode16<Fp8, Nan>(scale16<Op>(even, vs, vi));
      __m512i const co = fp8_encode16<Fp8, Nan>(scale16<Op>(odd, vs, vi));
      __m256i const c = _mm512_cvtepi32_epi16(_mm512_or_si512(ce, _mm512_slli_epi32(co, 8)));
      if constexpr (Stream) {
        _mm256_stream_si256(reinterpret_cast<__m256i*>(out + j), c);
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), c);
      }
    }
    if constexpr (Stream) {
      _mm_sfence();  // the streamed codes are visible before the function returns
    }
    return vec_end;
  } else {
    index_t const vec_end = n - n % 16;
    for (index_t j = 0; j < vec_end; j += 16) {
      if (prefetch != nullptr) {
        _mm_prefetch(reinterpret_cast<char const*>(prefetch + j), _MM_HINT_T0);
      }
      __m512i const c = fp8_encode16<Fp8, Nan>(scale16<Op>(_mm512_loadu_ps(in + j), vs, vi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), _mm512_cvtepi32_epi8(c));
    }
    return vec_end;
  }
}

// max of `amax_bits` over the first `n - n % S` elements (S = 64 for 16-bit inputs, 32 for
// float): |x| by a mask, NaN lanes (|x| above Inf's bits) left out of the max by a mask. Two
// accumulators; their lanes reduced at the end. Returns how many elements it read through `done`.
// `prefetch` (optional, as long as the row): a row read later (see `row_ahead`), two lines a step.
template <class T>
QTL_FP8_AVX512 typename input_bits<T>::word row_amax_bits_avx512(T const* in, index_t n, index_t& done,
                                                                 T const* prefetch) {
  using B = input_bits<T>;
  if constexpr (sizeof(T) == 2) {
    __m512i const abs_mask = _mm512_set1_epi16(0x7fff);
    __m512i const inf = _mm512_set1_epi16(static_cast<short>(B::inf));
    __m512i acc0 = _mm512_setzero_si512();
    __m512i acc1 = _mm512_setzero_si512();
    done = n - n % 64;
    for (index_t j = 0; j < done; j += 64) {
      if (prefetch != nullptr) {
        _mm_prefetch(reinterpret_cast<char const*>(prefetch + j), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<char const*>(prefetch + j + 32), _MM_HINT_T0);
      }
      __m512i const a0 = _mm512_and_si512(_mm512_loadu_si512(in + j), abs_mask);
      __m512i const a1 = _mm512_and_si512(_mm512_loadu_si512(in + j + 32), abs_mask);
      acc0 = _mm512_mask_max_epi16(acc0, _mm512_cmple_epi16_mask(a0, inf), acc0, a0);
      acc1 = _mm512_mask_max_epi16(acc1, _mm512_cmple_epi16_mask(a1, inf), acc1, a1);
    }
    __m512i const acc = _mm512_max_epi16(acc0, acc1);
    __m256i const m256 = _mm256_max_epi16(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
    __m128i m = _mm_max_epi16(_mm256_castsi256_si128(m256), _mm256_extracti128_si256(m256, 1));
    m = _mm_max_epi16(m, _mm_srli_si128(m, 8));  // non-negative lanes: shifted-in zeros are harmless
    m = _mm_max_epi16(m, _mm_srli_si128(m, 4));
    m = _mm_max_epi16(m, _mm_srli_si128(m, 2));
    return static_cast<typename B::word>(_mm_extract_epi16(m, 0));
  } else {
    __m512i const abs_mask = z32(B::abs_mask);
    __m512i const inf = z32(B::inf);
    __m512i acc0 = _mm512_setzero_si512();
    __m512i acc1 = _mm512_setzero_si512();
    done = n - n % 32;
    for (index_t j = 0; j < done; j += 32) {
      if (prefetch != nullptr) {
        _mm_prefetch(reinterpret_cast<char const*>(prefetch + j), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<char const*>(prefetch + j + 16), _MM_HINT_T0);
      }
      __m512i const a0 = _mm512_and_si512(_mm512_loadu_si512(in + j), abs_mask);
      __m512i const a1 = _mm512_and_si512(_mm512_loadu_si512(in + j + 16), abs_mask);
      acc0 = _mm512_mask_max_epu32(acc0, _mm512_cmple_epu32_mask(a0, inf), acc0, a0);
      acc1 = _mm512_mask_max_epu32(acc1, _mm512_cmple_epu32_mask(a1, inf), acc1, a1);
    }
    return static_cast<typename B::word>(_mm512_reduce_max_epu32(_mm512_max_epu32(acc0, acc1)));
  }
}

// Max |x| per 128-bit lane of 8 vectors z0..z7, z_k the elementwise max of the V vectors of 32
// bf16 at x + 32 V k, ...: word w of lane L of the result is the max of lane L of z_w, NaN left
// out. The words are |x| + 0x7F, which turns a NaN's magnitude (0x7F81..0x7FFF) negative and
// keeps the order of the others, so the signed maxima skip NaNs; the result is corrected back
// (a lane of NaNs only gives 0). Three rounds of unpack + max, each halving the words per vector:
//
//   a b -> a b a b a b a b  ->  a b c d a b c d  ->  a b c d e f g h      (per 128-bit lane)
template <int V>
QTL_FP8_AVX512 inline __m512i bf16_lane_max8(bfloat16_t const* x) {
  __m512i const abs_mask = _mm512_set1_epi16(0x7fff);
  __m512i const bias = _mm512_set1_epi16(0x7f);
  __m512i z[8];
  for (int k = 0; k < 8; ++k) {
    z[k] = _mm512_add_epi16(_mm512_and_si512(_mm512_loadu_si512(x + 32 * V * k), abs_mask), bias);
    for (int v = 1; v < V; ++v) {
      z[k] = _mm512_max_epi16(
          z[k], _mm512_add_epi16(_mm512_and_si512(_mm512_loadu_si512(x + 32 * (V * k + v)), abs_mask), bias));
    }
  }
  __m512i t[4];
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_max_epi16(_mm512_unpacklo_epi16(z[2 * k], z[2 * k + 1]),
                            _mm512_unpackhi_epi16(z[2 * k], z[2 * k + 1]));
  }
  __m512i const u0 = _mm512_max_epi16(_mm512_unpacklo_epi32(t[0], t[1]), _mm512_unpackhi_epi32(t[0], t[1]));
  __m512i const u1 = _mm512_max_epi16(_mm512_unpacklo_epi32(t[2], t[3]), _mm512_unpackhi_epi32(t[2], t[3]));
  __m512i const m = _mm512_max_epi16(_mm512_unpacklo_epi64(u0, u1), _mm512_unpackhi_epi64(u0, u1));
  return _mm512_sub_epi16(_mm512_max_epi16(m, bias), bias);
}

// vmax of the 16 consecutive blocks of B (16 or a multiple of 32) bf16 at `x`, as floats (block
// k in lane k).
//   B = 16: vector w holds blocks 2w (lanes 0-1) and 2w+1 (lanes 2-3) -> max of lanes 0,1 and
//           2,3 -> word w of lane 0 is block 2w, of lane 2 block 2w+1
//   B = 32 V: block w is the max of V vectors -> two trees (blocks 0-7, 8-15), max over the 4
//           lanes
// then `vpermw` moves block k's word to the high half of dword k (bf16 bits -> float).
template <int B>
QTL_FP8_AVX512 inline __m512 block_vmax16_bf16(bfloat16_t const* x) {
  alignas(64) std::int16_t idx[32] = {};
  if constexpr (B == 16) {
    __m512i v = bf16_lane_max8<1>(x);
    v = _mm512_max_epi16(v, _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    for (int k = 0; k < 16; ++k) {
      idx[2 * k + 1] = static_cast<std::int16_t>(k % 2 == 0 ? k / 2 : 16 + k / 2);
    }
    return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, _mm512_load_si512(idx), v));
  } else {
    static_assert(B % 32 == 0);
    __m512i r0 = bf16_lane_max8<B / 32>(x);
    __m512i r1 = bf16_lane_max8<B / 32>(x + 8 * B);
    r0 = _mm512_max_epi16(r0, _mm512_shuffle_i32x4(r0, r0, _MM_SHUFFLE(2, 3, 0, 1)));
    r1 = _mm512_max_epi16(r1, _mm512_shuffle_i32x4(r1, r1, _MM_SHUFFLE(2, 3, 0, 1)));
    r0 = _mm512_max_epi16(r0, _mm512_shuffle_i32x4(r0, r0, _MM_SHUFFLE(1, 0, 3, 2)));
    r1 = _mm512_max_epi16(r1, _mm512_shuffle_i32x4(r1, r1, _MM_SHUFFLE(1, 0, 3, 2)));
    for (int k = 0; k < 16; ++k) {
      idx[2 * k + 1] = static_cast<std::int16_t>(k < 8 ? k : 32 + (k - 8));
    }
    return _mm512_castsi512_ps(_mm512_maskz_permutex2var_epi16(0xAAAAAAAAu, r0, _mm512_load_si512(idx), r1));
  }
}

// Per-token-group quantization of the first `groups - groups % 16` groups of one bf16 row (G a
// multiple of 32), 16 groups a step; returns how many. The groups' maxima as
// `block_vmax16_bf16`; their scales `fp8_group_scale` on 16 lanes (`max(amax, eps) / max`; UE8M0:
// exponent + 1 when a fraction bit is set, as `round_up_to_power_of_two`, whose loop a subnormal
// scale, which only an eps below 2^-126 * max allows, still takes); `1/s` (IEEE, ±0 -> ±Inf: 
// `fp8_inverse_scale`'s reciprocal); then each group's elements: `x * (1/s)` when the recipe
// multiplies or s is a normal power of two (`is_normal_power_of_two`: the same as `x / s`), else
// `x / s`. The scales go to `row_scales[g]`. While a step writes its codes it prefetches the
// input of the next one (of `next_row`, when given, after the last): the max of a step reads
// its 16 groups before anything else can run, and would otherwise wait for memory each time.
// `x / s` stays `vdivps`: the correctly rounded quotient by `x * (1/s)` and two FMA corrections
// (Markstein; equal to `vdivps` on 2.7e11 quotients checked) was measured slower on a Sapphire
// Rapids-class guest (L2-resident rows: 2.46 against 2.54-3.02 G elements/s), because its nine
// vector operations compete with the encoder's for the same two ports while the divider works
// beside them.
template <int G, class Fp8, fp8_nan Nan, fp8_scale_op Op>
QTL_FP8_AVX512 index_t group_quantize_row_avx512(bfloat16_t const* x, Fp8* out, index_t groups, float eps,
                                                 bool power_of_two, float* row_scales, bfloat16_t const* next_row) {
  static_assert(G % 32 == 0);
  index_t const end = groups - groups % 16;
  for (index_t b = 0; b < end; b += 16) {
    bfloat16_t const* const prefetch = b + 16 < end ? x + (b + 16) * G : next_row;
    __m512 const vmax = block_vmax16_bf16<G>(x + b * G);
    __m512 s = _mm512_div_ps(_mm512_max_ps(vmax, _mm512_set1_ps(eps)), _mm512_set1_ps(fp8_format<Fp8>::max));
    __m512i bits = _mm512_castps_si512(s);  // s >= +0, not NaN
    __m512i const expo = _mm512_and_si512(bits, z32(0x7f800000u));
    __mmask16 const fraction = _mm512_test_epi32_mask(bits, z32(0x007fffffu));
    __mmask16 const normal = _mm512_cmpneq_epi32_mask(expo, _mm512_setzero_si512()) &
                             _mm512_cmpneq_epi32_mask(expo, z32(0x7f800000u));
    alignas(64) float sv[16];
    if (power_of_two) {
      bits = _mm512_mask_add_epi32(bits, normal & fraction, expo, z32(0x00800000u));
      s = _mm512_castsi512_ps(bits);
      _mm512_store_ps(sv, s);
      auto const subnormal = static_cast<unsigned>(fraction & ~normal);
      if (subnormal != 0) {
        for (int k = 0; k < 16; ++k) {
          if ((subnormal >> k) & 1u) {
            sv[k] = round_up_to_power_of_two(sv[k]);
          }
        }
        s = _mm512_load_ps(sv);
      }
    } else {
      _mm512_store_ps(sv, s);
    }
    alignas(64) float iv[16];
    _mm512_store_ps(iv, _mm512_div_ps(_mm512_set1_ps(1.0f), s));
    _mm512_storeu_ps(row_scales + b, s);
    unsigned multiply = 0xffffu;
    if constexpr (Op == fp8_scale_op::divide) {
      __m512i const sb = _mm512_castps_si512(s);
      __m512i const e = _mm512_and_si512(sb, z32(0x7f800000u));
      multiply = _mm512_testn_epi32_mask(sb, z32(0x007fffffu)) & _mm512_cmpneq_epi32_mask(e, _mm512_setzero_si512()) &
                 _mm512_cmpneq_epi32_mask(e, z32(0x7f800000u));
    }
    for (int k = 0; k < 16; ++k) {
      bfloat16_t const* gx = x + (b + k) * G;
      Fp8* go = out + (b + k) * G;
      __m512 const vs = _mm512_set1_ps(sv[k]);
      __m512 const vi = _mm512_set1_ps(iv[k]);
      bool const mul = (multiply >> k) & 1u;
      for (int j = 0; j < G; j += 32) {
        if (prefetch != nullptr) {  // one 64-byte line of the next step per 32 elements
          _mm_prefetch(reinterpret_cast<char const*>(prefetch + k * G + j), _MM_HINT_T0);
        }
        __m512 even;
        __m512 odd;
        load_bf16_pairs(gx + j, even, odd);
        if (mul) {
          even = _mm512_mul_ps(even, vi);
          odd = _mm512_mul_ps(odd, vi);
        } else {
          even = _mm512_div_ps(even, vs);
          odd = _mm512_div_ps(odd, vs);
        }
        __m512i const ce = fp8_encode16<Fp8, Nan>(even);
        __m512i const co = fp8_encode16<Fp8, Nan>(odd);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(go + j),
                            _mm512_cvtepi32_epi16(_mm512_or_si512(ce, _mm512_slli_epi32(co, 8))));
      }
    }
  }
  return end;
}

// `p[j] = table[p[j]]` for the first `n - n % 64` bytes; returns how many. `vpermi2b` looks 64
// bytes up in a 128-byte half of the table (index bits 0-6), bit 7 picks the half.
QTL_FP8_AVX512 inline index_t translate_bytes_avx512(unsigned char* p, index_t n, unsigned char const* table) {
  __m512i const t0 = _mm512_loadu_si512(table);
  __m512i const t1 = _mm512_loadu_si512(table + 64);
  __m512i const t2 = _mm512_loadu_si512(table + 128);
  __m512i const t3 = _mm512_loadu_si512(table + 192);
  index_t const vec_end = n - n % 64;
  for (index_t j = 0; j < vec_end; j += 64) {
    __m512i const c = _mm512_loadu_si512(p + j);
    __m512i const lo = _mm512_permutex2var_epi8(t0, c, t1);
    __m512i const hi = _mm512_permutex2var_epi8(t2, c, t3);
    _mm512_storeu_si512(p + j, _mm512_mask_blend_epi8(_mm512_movepi8_mask(c), lo, hi));
  }
  return vec_end;
}

// `fp8_compare_codes` of 64 byte pairs at a time, counted into `flips`, `differ`, `large` (the
// first `n - n % 64` pairs; returns how many): byte distance |a - b| as the larger of the two
// saturating differences; a code is a number when its magnitude - 1 (wrapping) is below
// `number_limit` (0x7E for e4m3fn: not 0, not 0x7F; 0x7C for e5m2: not 0, not above Inf).
QTL_FP8_AVX512 inline index_t compare_bytes_avx512(unsigned char const* a, unsigned char const* b, index_t n,
                                                   std::uint8_t number_limit, index_t& flips, index_t& differ,
                                                   index_t& large) {
  __m512i const one = _mm512_set1_epi8(1);
  __m512i const mag_mask = _mm512_set1_epi8(0x7f);
  __m512i const limit = _mm512_set1_epi8(static_cast<char>(number_limit));
  index_t const vec_end = n - n % 64;
  for (index_t j = 0; j < vec_end; j += 64) {
    __m512i const va = _mm512_loadu_si512(a + j);
    __m512i const vb = _mm512_loadu_si512(b + j);
    __m512i const d = _mm512_or_si512(_mm512_subs_epu8(va, vb), _mm512_subs_epu8(vb, va));
    __mmask64 const ne = _mm512_cmpneq_epu8_mask(va, vb);
    __mmask64 const big = _mm512_cmpgt_epu8_mask(d, one);
    __mmask64 const sign_differs = _mm512_movepi8_mask(_mm512_xor_si512(va, vb));
    __mmask64 const a_number =
        _mm512_cmplt_epu8_mask(_mm512_sub_epi8(_mm512_and_si512(va, mag_mask), one), limit);
    __mmask64 const b_number =
        _mm512_cmplt_epu8_mask(_mm512_sub_epi8(_mm512_and_si512(vb, mag_mask), one), limit);
    flips += __builtin_popcountll(sign_differs & a_number & b_number);
    differ += __builtin_popcountll(ne);
    large += __builtin_popcountll(big);
  }
  return vec_end;
}
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic pop
#  endif  // ^^^ g++ ^^^
}  // namespace x86
#endif  // ^^^ QTL_FP8_X86_DISPATCH ^^^

// True when `quantize_row_dispatch` runs T through the AVX2 executor.
template <class T>
bool avx2_quantizes() {
#if QTL_FP8_X86_DISPATCH
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16_t>) {
    return x86::fp8_has_avx2();
  }
#endif  // ^^^ QTL_FP8_X86_DISPATCH ^^^
  return false;
}

// `quantize_row` by the AVX2 executor where the CPU has it (float and bf16), the rest by the
// portable loops.
// `stream`: see `stream_output` (bf16 on the AVX-512 executor; a head up to the first 32-byte
// boundary of `out` goes through the portable loop).
template <class Fp8, fp8_nan Nan, fp8_scale_op Op, class T>
void quantize_row_dispatch(T const* in, Fp8* out, index_t n, float scale, float inv,
                           [[maybe_unused]] T const* prefetch = nullptr, [[maybe_unused]] bool stream = false) {
  index_t j = 0;
#if QTL_FP8_X86_DISPATCH
  if constexpr (std::is_same_v<T, bfloat16_t>) {
    if (stream && n >= 256 && x86::fp8_has_avx512()) {
      auto const head = static_cast<index_t>((32u - reinterpret_cast<std::uintptr_t>(out) % 32u) % 32u);
      quantize_row<Fp8, Nan, Op>(in, out, head, scale, inv);
      j = head + x86::quantize_row_avx512<Fp8, Nan, Op, T, true>(in + head, out + head, n - head, scale, inv,
                                                                prefetch);
      quantize_row<Fp8, Nan, Op>(in + j, out + j, n - j, scale, inv);
      return;
    }
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16_t>) {
    if (x86::fp8_has_avx512()) {
      j = x86::quantize_row_avx512<Fp8, Nan, Op>(in, out, n, scale, inv, prefetch);
    } else if (avx2_quantizes<T>()) {
      j = x86::quantize_row_avx2<Fp8, Nan, Op>(in, out, n, scale, inv);
    }
  }
#endif  // ^^^ QTL_FP8_X86_DISPATCH ^^^
  quantize_row<Fp8, Nan, Op>(in + j, out + j, n - j, scale, inv);
}

// True when an output of `bytes` is better written with non-temporal stores: at least twice the
// last-level cache (as the C library reports it; 32 MiB when it does not), which it could not
// keep anyway while the input streams through; skipping the read-for-ownership of each line
// saves a third of the memory traffic of an fp8 quantization.
// `stream_min_bytes()` is that threshold (a hook through which the unit tests stream small
// outputs).
inline std::size_t& stream_min_bytes() {
  static std::size_t min_bytes = [] {
    long size = 0;
#if defined(_SC_LEVEL3_CACHE_SIZE)
    size = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif  // ^^^ _SC_LEVEL3_CACHE_SIZE ^^^
    return 2 * (size > 0 ? static_cast<std::size_t>(size) : std::size_t{32} << 20);
  }();
  return min_bytes;
}
inline bool stream_output(std::size_t bytes) { return bytes >= stream_min_bytes(); }

// A normal power of two (`2^k`, -126 <= k <= 127): its reciprocal `2^-k` is exact (2^-127 as a
// subnormal), so `x / s` and `x * (1 / s)` are the same real number, rounded once: equal.
constexpr bool is_normal_power_of_two(float s) {
  std::uint32_t const b = float_to_bits(s) & 0x7fffffffu;
  return (b & 0x007fffffu) == 0 && b >= 0x00800000u && b < 0x7f800000u;
}

// `prefetch`: see `quantize_row_avx512`.
template <class Fp8, fp8_scale_op Op, class T>
void quantize_row(T const* in, Fp8* out, index_t n, float scale, float inv, fp8_nan nan,
                  T const* prefetch = nullptr, bool stream = false) {
  if constexpr (Op == fp8_scale_op::divide) {
    if (is_normal_power_of_two(scale)) {  // UE8M0 group scales: a multiply (see above), not a divide
      quantize_row<Fp8, fp8_scale_op::multiply_reciprocal>(in, out, n, scale, div_rn(1.0f, scale), nan, prefetch,
                                                           stream);
      return;
    }
  }
  if (nan == fp8_nan::to_max) {
    quantize_row_dispatch<Fp8, fp8_nan::to_max, Op>(in, out, n, scale, inv, prefetch, stream);
  } else {
    quantize_row_dispatch<Fp8, fp8_nan::propagate, Op>(in, out, n, scale, inv, prefetch, stream);
  }
}

// max of `amax_bits` over a row. The scalar reduction runs on signed integers (the bits of |x|
// never use the top bit), which g++ can vectorize at -O3; SSE2 does 16-bit words directly.
// `prefetch`: see `row_amax_bits_avx512`.
template <class T>
typename input_bits<T>::word row_amax_bits(T const* in, index_t n, [[maybe_unused]] T const* prefetch = nullptr) {
  using signed_word = std::make_signed_t<typename input_bits<T>::word>;
  signed_word m = 0;
  index_t j = 0;
#if QTL_FP8_X86_DISPATCH
  if (n >= 64 && x86::fp8_has_avx512()) {
    m = static_cast<signed_word>(x86::row_amax_bits_avx512(in, n, j, prefetch));
  }
#endif  // ^^^ QTL_FP8_X86_DISPATCH ^^^
#if QTL_FP8_SSE2
  if constexpr (sizeof(T) == 2) {
    __m128i const abs_mask = _mm_set1_epi16(0x7fff);
    __m128i const inf = _mm_set1_epi16(static_cast<short>(input_bits<T>::inf));
    __m128i acc = _mm_setzero_si128();
    index_t const vec_end = n - n % 8;
    for (; j < vec_end; j += 8) {
      __m128i const a = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<__m128i const*>(in + j)), abs_mask);
      acc = _mm_max_epi16(acc, _mm_andnot_si128(_mm_cmpgt_epi16(a, inf), a));  // NaN -> 0
    }
    // horizontal max of the 8 non-negative lanes (shifting in zeros is harmless)
    acc = _mm_max_epi16(acc, _mm_srli_si128(acc, 8));
    acc = _mm_max_epi16(acc, _mm_srli_si128(acc, 4));
    acc = _mm_max_epi16(acc, _mm_srli_si128(acc, 2));
    auto const r = static_cast<signed_word>(_mm_extract_epi16(acc, 0));
    m = r > m ? r : m;
  }
#endif  // ^^^ QTL_FP8_SSE2 ^^^
  for (; j < n; ++j) {
    auto const a = static_cast<signed_word>(amax_bits(in[j]));
    m = a > m ? a : m;
  }
  return static_cast<typename input_bits<T>::word>(m);
}

// The row that the per-tensor loops ask for while they work on row i: the first at least 32 KiB
// further on (nullptr past the end). The hardware prefetcher alone left them waiting on memory
// (measured on a 2-core Xeon guest: static quantization +20-25%, dynamic +10-15% with it).
template <class T>
T const* row_ahead(view2d<T const> in, index_t i) {
  auto const row_bytes = static_cast<index_t>(sizeof(T)) * (in.extent[1] > 0 ? in.extent[1] : 1);
  index_t const ahead = row_bytes >= (index_t{32} << 10) ? 1 : ((index_t{32} << 10) + row_bytes - 1) / row_bytes;
  return i + ahead < in.extent[0] ? &in(i + ahead, 0) : nullptr;
}

}  // namespace detail

/// max |x| over the whole input (NaN ignored), exact.
template <fp8_quant_input T>
float fp8_amax(view2d<T const> in) {
  typename detail::input_bits<T>::word m = 0;
  for (index_t i = 0; i < in.extent[0]; ++i) {
    auto const r = detail::row_amax_bits(&in(i, 0), in.extent[1], detail::row_ahead(in, i));
    m = r > m ? r : m;
  }
  return amax_value<T>(m);
}

/// Static per-tensor quantization: `out[i, j] = q(in[i, j] * (1/scale))`; rows of `out` past the
/// input's are zeroed (padding).
/// @pre `scale` is the dequantization scale (any float; 0, Inf and NaN follow `o`).
template <fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
void scaled_fp8_quant_static(view2d<T const> in, float scale, view2d<Fp8> out, fp8_tensor_options o = {}) {
  detail::check_fp8_shapes("qtl::scaled_fp8_quant_static", in, out);
  float const inv = fp8_inverse_scale(scale, o.zero_scale);
  if constexpr (sizeof(T) == 2) {
    // One scale for the whole tensor and 2^16 possible inputs: past 2^20 elements, tabulating the
    // element function for every fp16/bf16 code and gathering from the table (64 KiB, cache
    // resident) is about twice as fast as the SSE2 arithmetic, and equal by construction. The
    // AVX2 executor (bf16) is faster than the table.
    if (in.extent[0] * in.extent[1] >= (index_t{1} << 20) && !detail::avx2_quantizes<T>()) {
      std::vector<std::uint8_t> table(65536);
      for (std::uint32_t c = 0; c < 65536; ++c) {
        T const x{static_cast<std::uint16_t>(c)};
        table[c] = o.nan == fp8_nan::to_max
                       ? fp8_quantize_element<Fp8, fp8_nan::to_max>(to_float(x), scale, inv)
                       : fp8_quantize_element<Fp8, fp8_nan::propagate>(to_float(x), scale, inv);
      }
      for (index_t i = 0; i < in.extent[0]; ++i) {
        T const* x = &in(i, 0);
        Fp8* q = &out(i, 0);
        for (index_t j = 0; j < in.extent[1]; ++j) {
          q[j].bits = table[x[j].bits];
        }
      }
      detail::zero_padding_rows(out, in.extent[0]);
      return;
    }
  }
  bool const stream = detail::stream_output(static_cast<std::size_t>(in.extent[0] * in.extent[1]) * sizeof(Fp8));
  for (index_t i = 0; i < in.extent[0]; ++i) {
    detail::quantize_row<Fp8, fp8_scale_op::multiply_reciprocal>(&in(i, 0), &out(i, 0), in.extent[1], scale,
                                                                 inv, o.nan, detail::row_ahead(in, i), stream);
  }
  detail::zero_padding_rows(out, in.extent[0]);
}

/// Dynamic per-tensor quantization: `scale = amax(|in|) / max` (no floor), then as static.
/// Returns the scale (sglang returns it as a float32 tensor of shape [1]).
template <fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
float scaled_fp8_quant_dynamic(view2d<T const> in, view2d<Fp8> out, fp8_tensor_options o = {}) {
  detail::check_fp8_shapes("qtl::scaled_fp8_quant_dynamic", in, out);
  float const scale = fp8_scale_from_amax<Fp8>(fp8_amax(in));
  scaled_fp8_quant_static<Fp8>(in, scale, out, o);
  return scale;
}

/// Dynamic per-token quantization: one scale per row, `scales[i] = fp8_token_scale(amax_i)`;
/// `scales` holds at least `out.extent[0]` floats, those of padding rows are set to 0.
template <fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
void scaled_fp8_quant_per_token(view2d<T const> in, view2d<Fp8> out, view1d<float> scales,
                                fp8_token_options o = {}) {
  detail::check_fp8_shapes("qtl::scaled_fp8_quant_per_token", in, out);
  if (scales.extent[0] < out.extent[0]) {
    throw shape_error("qtl::scaled_fp8_quant_per_token: scales has " + std::to_string(scales.extent[0]) +
                      " entries, the output " + std::to_string(out.extent[0]) + " rows");
  }
  if (!(o.upper_bound > 0.0f) || !(o.min_scale >= 0.0f)) {
    throw value_error("qtl::scaled_fp8_quant_per_token: upper_bound must be > 0 and min_scale >= 0 (got " +
                      std::to_string(o.upper_bound) + ", " + std::to_string(o.min_scale) + ")");
  }
  index_t const n = in.extent[1];
  for (index_t i = 0; i < in.extent[0]; ++i) {
    T const* row = &in(i, 0);
    float const s = fp8_token_scale<Fp8>(amax_value<T>(detail::row_amax_bits(row, n)), o);
    float const inv = fp8_inverse_scale(s, o.zero_scale);
    scales(i) = s;
    T const* next = i + 1 < in.extent[0] ? &in(i + 1, 0) : nullptr;  // its max is taken next
    if (o.op == fp8_scale_op::divide) {
      detail::quantize_row<Fp8, fp8_scale_op::divide>(row, &out(i, 0), n, s, inv, o.nan, next);
    } else {
      detail::quantize_row<Fp8, fp8_scale_op::multiply_reciprocal>(row, &out(i, 0), n, s, inv, o.nan, next);
    }
  }
  for (index_t i = in.extent[0]; i < out.extent[0]; ++i) {
    scales(i) = 0.0f;
  }
  detail::zero_padding_rows(out, in.extent[0]);
}

/// Per-token-group quantization (`per_token_group_quant_fp8`): each row is cut into
/// `N / GroupSize` groups of consecutive elements, each with its own scale
/// `fp8_group_scale(amax_group)`, written at `group_scale_offset(o.layout, m, g, ...)` of
/// `scales` (`group_scale_storage_size(...)` floats over the output's rows; padding rows get 0).
///
///   in  [M, N]  ──►  out [M, N] fp8,   scales row-major [M, N/G]  or  column-major [N/G, Mp]
template <int GroupSize, fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
void per_token_group_quant_fp8(view2d<T const> in, view2d<Fp8> out, std::span<float> scales,
                               fp8_group_options o = {}) {
  static_assert(GroupSize > 0, "qtl::per_token_group_quant_fp8: GroupSize must be positive");
  detail::check_fp8_shapes("qtl::per_token_group_quant_fp8", in, out);
  index_t const n = in.extent[1];
  if (n % GroupSize != 0) {
    throw shape_error("qtl::per_token_group_quant_fp8: the input's " + std::to_string(n) +
                      " columns are not a multiple of the group size " + std::to_string(GroupSize));
  }
  if (o.row_align < 1) {
    throw value_error("qtl::per_token_group_quant_fp8: row_align must be >= 1, got " + std::to_string(o.row_align));
  }
  if (!(o.eps >= 0.0f)) {
    throw value_error("qtl::per_token_group_quant_fp8: eps must be >= 0, got " + std::to_string(o.eps));
  }
  index_t const groups = n / GroupSize;
  index_t const rows = out.extent[0];
  index_t const need = group_scale_storage_size(o.layout, rows, groups, o.row_align);
  if (static_cast<index_t>(scales.size()) < need) {
    throw shape_error("qtl::per_token_group_quant_fp8: scales has " + std::to_string(scales.size()) +
                      " floats, the layout needs " + std::to_string(need));
  }
  [[maybe_unused]] std::vector<float> row_scales;
  for (index_t i = 0; i < in.extent[0]; ++i) {
    index_t g0 = 0;
#if QTL_FP8_X86_DISPATCH
    if constexpr (std::is_same_v<T, bfloat16_t> && GroupSize % 32 == 0) {
      if (groups >= 16 && detail::x86::fp8_has_avx512()) {  // 16 groups a step
        row_scales.resize(static_cast<std::size_t>(groups));
        auto const run = [&]<fp8_nan Nan, fp8_scale_op Op>() {
          return detail::x86::group_quantize_row_avx512<GroupSize, Fp8, Nan, Op>(
              &in(i, 0), &out(i, 0), groups, o.eps, o.power_of_two_scale, row_scales.data(),
              i + 1 < in.extent[0] ? &in(i + 1, 0) : nullptr);
        };
        if (o.op == fp8_scale_op::divide) {
          g0 = o.nan == fp8_nan::to_max ? run.template operator()<fp8_nan::to_max, fp8_scale_op::divide>()
                                        : run.template operator()<fp8_nan::propagate, fp8_scale_op::divide>();
        } else {
          g0 = o.nan == fp8_nan::to_max
                   ? run.template operator()<fp8_nan::to_max, fp8_scale_op::multiply_reciprocal>()
                   : run.template operator()<fp8_nan::propagate, fp8_scale_op::multiply_reciprocal>();
        }
        for (index_t g = 0; g < g0; ++g) {
          scales[static_cast<std::size_t>(group_scale_offset(o.layout, i, g, rows, groups, o.row_align))] =
              row_scales[static_cast<std::size_t>(g)];
        }
      }
    }
#endif  // ^^^ QTL_FP8_X86_DISPATCH ^^^
    for (index_t g = g0; g < groups; ++g) {
      T const* x = &in(i, g * GroupSize);
      float const s = fp8_group_scale<Fp8>(amax_value<T>(detail::row_amax_bits(x, GroupSize)), o.eps,
                                           o.power_of_two_scale);
      float const inv = fp8_inverse_scale(s);
      scales[static_cast<std::size_t>(group_scale_offset(o.layout, i, g, rows, groups, o.row_align))] = s;
      if (o.op == fp8_scale_op::divide) {
        detail::quantize_row<Fp8, fp8_scale_op::divide>(x, &out(i, g * GroupSize), GroupSize, s, inv, o.nan);
      } else {
        detail::quantize_row<Fp8, fp8_scale_op::multiply_reciprocal>(x, &out(i, g * GroupSize), GroupSize, s,
                                                                     inv, o.nan);
      }
    }
  }
  for (index_t i = in.extent[0]; i < rows; ++i) {
    for (index_t g = 0; g < groups; ++g) {
      scales[static_cast<std::size_t>(group_scale_offset(o.layout, i, g, rows, groups, o.row_align))] = 0.0f;
    }
  }
  detail::zero_padding_rows(out, in.extent[0]);
}

/// The result of the allocating `scaled_fp8_quant`.
template <fp8_storage Fp8>
struct fp8_quant_result {
  host_tensor<Fp8, 2> output;  ///< [max(M, num_token_padding), N]
  host_tensor<float, 2> scale;  ///< [1, 1] per tensor, [rows, 1] per token
};

/// sglang's `scaled_fp8_quant(input, scale=None, num_token_padding=None,
/// use_per_token_if_dynamic=False)`: static when `scale` is given (then `per_token` must be
/// false), else dynamic per tensor or per token. Padding rows are zero (codes and scales).
template <fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
fp8_quant_result<Fp8> scaled_fp8_quant(view2d<T const> in, float const* scale = nullptr,
                                       index_t num_token_padding = 0, bool per_token = false) {
  if (scale != nullptr && per_token) {
    throw value_error("qtl::scaled_fp8_quant: a static scale is per tensor; per_token needs scale == nullptr");
  }
  if (num_token_padding < 0) {
    throw shape_error("qtl::scaled_fp8_quant: num_token_padding is negative (" + std::to_string(num_token_padding) +
                      ")");
  }
  index_t const rows = in.extent[0] > num_token_padding ? in.extent[0] : num_token_padding;
  fp8_quant_result<Fp8> r{host_tensor<Fp8, 2>({rows, in.extent[1]}),
                          host_tensor<float, 2>({per_token ? rows : 1, 1})};
  if (scale != nullptr) {
    scaled_fp8_quant_static<Fp8>(in, *scale, r.output.view());
    r.scale.data()[0] = *scale;
  } else if (per_token) {
    scaled_fp8_quant_per_token<Fp8>(in, r.output.view(), make_view(r.scale.data(), rows));
  } else {
    r.scale.data()[0] = scaled_fp8_quant_dynamic<Fp8>(in, r.output.view());
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// per_tensor_dequantize, requantize_with_max_scale
// ---------------------------------------------------------------------------------------------

/// `per_tensor_dequantize(tensor, inv_scale)`: `out = Out(float(q) * scale)` elementwise.
/// `Out` = half_t (default; a 0-dim or Python-float scale) or float (a [1] tensor scale).
template <class Out = half_t, fp8_storage Fp8>
void per_tensor_dequantize(view2d<Fp8 const> q, float scale, view2d<Out> out) {
  static_assert(std::is_same_v<Out, half_t> || std::is_same_v<Out, float>,
                "qtl::per_tensor_dequantize: Out is half_t (0-dim scale) or float ([1] scale)");
  if (out.extent[0] != q.extent[0] || out.extent[1] != q.extent[1]) {
    throw shape_error("qtl::per_tensor_dequantize: output " + detail::shape_string(out.extent[0], out.extent[1]) +
                      " differs from the input " + detail::shape_string(q.extent[0], q.extent[1]));
  }
  Out table[256];  // the element function for each of the 256 codes
  for (int c = 0; c < 256; ++c) {
    table[c] = dequantize_fp8_element<Out>(Fp8{static_cast<std::uint8_t>(c)}, scale);
  }
  for (index_t i = 0; i < q.extent[0]; ++i) {
    for (index_t j = 0; j < q.extent[1]; ++j) {
      out(i, j) = table[q(i, j).bits];
    }
  }
}

/// The weight-scale argument of `requantize_with_max_scale`: a 1-D float32 tensor of one scale per
/// shard, or a 0-dim tensor (`is_scalar`, `values` of size 1).
struct weight_scales {
  std::span<float const> values;
  bool is_scalar = false;
};

/// The row ranges and decision of `requantize_with_max_scale`, validated (host only).
struct requantize_plan {
  float max_scale = 0.0f;
  bool requantize = false;  ///< the reference's `unfused_module_in_checkpoint`
};

/// Validates the arguments of `requantize_with_max_scale` and takes its decisions:
///   max_scale  = max(weight_scale)                        (NaN scales: value_error)
///   requantize = weight_scale is 1-D and weight_scale[-1] > finfo(e4m3fn).min (-448): shards
///                whose scales were never loaded keep the default float32-min value, which marks a
///                checkpoint that stored one fused scale (then nothing is requantized)
/// Differences from the reference, which crashes or is silent there: a 0-dim scale is one fused
/// scale (vLLM's guard; the reference raises IndexError); fewer scales than shards, negative
/// widths, or widths summing past the weight's rows throw `shape_error` (the reference raises, or
/// silently clips the slice); zero-width shards are skipped.
inline requantize_plan plan_requantize_with_max_scale(index_t weight_rows, weight_scales s,
                                                      std::span<index_t const> logical_widths) {
  if (s.values.empty()) {
    throw shape_error("qtl::requantize_with_max_scale: weight_scale is empty");
  }
  if (s.is_scalar && s.values.size() != 1) {
    throw shape_error("qtl::requantize_with_max_scale: a 0-dim weight_scale holds one value, got " +
                      std::to_string(s.values.size()));
  }
  requantize_plan p;
  p.max_scale = s.values[0];
  for (float v : s.values) {
    if (v != v) {
      throw value_error("qtl::requantize_with_max_scale: weight_scale holds NaN");
    }
    p.max_scale = v > p.max_scale ? v : p.max_scale;
  }
  p.requantize = !s.is_scalar && s.values.back() > -448.0f;
  if (!p.requantize) {
    return p;
  }
  index_t total = 0;
  for (std::size_t k = 0; k < logical_widths.size(); ++k) {
    index_t const w = logical_widths[k];
    if (w < 0) {
      throw shape_error("qtl::requantize_with_max_scale: logical_widths[" + std::to_string(k) + "] is negative (" +
                        std::to_string(w) + ")");
    }
    if (w > 0 && k >= s.values.size()) {
      throw shape_error("qtl::requantize_with_max_scale: shard " + std::to_string(k) + " has no scale (" +
                        std::to_string(s.values.size()) + " scales)");
    }
    total += w;
  }
  if (total > weight_rows) {
    throw shape_error("qtl::requantize_with_max_scale: logical_widths sum to " + std::to_string(total) +
                      " rows, the weight has " + std::to_string(weight_rows));
  }
  return p;
}

/// `requantize_with_max_scale(weight, weight_scale, logical_widths)`: requantizes each shard of
/// rows `[start, start + w)` of the fused FP8 weight from its own scale to the maximum scale, in
/// place, and returns that maximum. Rows past `sum(widths)` are untouched.
///
///   weight [N, K] fp8, rows:  | shard 0 (w0 rows, scale s0) | shard 1 (w1, s1) | ... | rest |
///   each element:  q' = q(fp16(float(q) * s_idx) * (1/max_s))
template <fp8_storage Fp8 = float8_e4m3fn_t>
float requantize_with_max_scale(view2d<Fp8> weight, weight_scales s, std::span<index_t const> logical_widths) {
  requantize_plan const p = plan_requantize_with_max_scale(weight.extent[0], s, logical_widths);
  if (!p.requantize) {
    return p.max_scale;
  }
  float const inv = fp8_inverse_scale(p.max_scale);
  index_t start = 0;
  for (std::size_t k = 0; k < logical_widths.size(); ++k) {
    index_t const w = logical_widths[k];
    if (w == 0) {
      continue;
    }
    // A shard maps each of the 256 codes the same way: tabulate the element function once.
    std::uint8_t table[256];
    for (int c = 0; c < 256; ++c) {
      table[c] = requantize_fp8_element(Fp8{static_cast<std::uint8_t>(c)}, s.values[k], inv).bits;
    }
    for (index_t i = start; i < start + w; ++i) {
      index_t j = 0;
#if QTL_FP8_X86_DISPATCH
      if ((weight.extent[1] <= 1 || weight.stride[1] == 1) && detail::x86::fp8_has_avx512()) {
        j = detail::x86::translate_bytes_avx512(reinterpret_cast<unsigned char*>(&weight(i, 0)), weight.extent[1],
                                                table);
      }
#endif  // ^^^ QTL_FP8_X86_DISPATCH ^^^
      for (; j < weight.extent[1]; ++j) {
        weight(i, j).bits = table[weight(i, j).bits];
      }
    }
    start += w;
  }
  return p.max_scale;
}

// ---------------------------------------------------------------------------------------------
// fp8_all_close
// ---------------------------------------------------------------------------------------------

/// The counts of `assert_fp8_all_close` and its verdict.
struct fp8_compare_report {
  index_t numel = 0;
  index_t sign_flips = 0;     ///< both finite and nonzero, opposite signs (the reference's check
                              ///< `(a_u8 >= 0) & (b_u8 < 0)` on uint8 can never fire)
  index_t differ = 0;         ///< byte distance |a - b| >= 1 (the reference's `count_tiny_diff`)
  index_t differ_large = 0;   ///< byte distance >= 2 (`count_large_diff`)
  bool passed = true;         ///< no sign flip, differ/numel < 0.005, differ_large == 0

  /// The reference's failure message fields.
  std::string describe() const {
    return "count_diff_sign=" + std::to_string(sign_flips) + " count_tiny_diff=" + std::to_string(differ) +
           " count_large_diff=" + std::to_string(differ_large) + " numel=" + std::to_string(numel);
  }
};

/// Per-pair contribution to an `fp8_compare_report` (shared with the GPU counter).
struct fp8_compare_counts {
  bool sign_flip = false;
  bool differ = false;
  bool differ_large = false;
};
/// Compares two codes as `assert_fp8_all_close` does: distance of the raw bytes as integers (so
/// +0/-0, 0x00/0x80, are 128 apart and 448/NaN, 0x7E/0x7F, one apart); a sign flip is two
/// non-zero, non-NaN values of opposite sign.
template <fp8_storage Fp8>
QTL_HOST_DEVICE constexpr fp8_compare_counts fp8_compare_codes(std::uint8_t a, std::uint8_t b) {
  int const d = a > b ? a - b : b - a;
  auto const is_number = [](std::uint8_t c) {
    std::uint8_t const mag = c & 0x7fu;
    if constexpr (std::is_same_v<Fp8, float8_e4m3fn_t>) {
      return mag != 0 && mag != 0x7fu;
    } else {
      return mag != 0 && mag <= 0x7cu;  // e5m2: 0x7C is Inf, above are NaNs
    }
  };
  bool const flip = ((a ^ b) & 0x80u) != 0 && is_number(a) && is_number(b);
  return {flip, d >= 1, d >= 2};
}

/// The verdict of the reference's thresholds on the counts: no sign flip (the reference's dead
/// check, which every sign flip fails through the byte distance anyway), fewer than 0.5 % codes
/// apart, none two or more apart. An empty comparison passes (the reference divides by zero).
inline bool fp8_all_close_verdict(fp8_compare_report const& r) {
  if (r.numel == 0) {
    return true;
  }
  return r.sign_flips == 0 && static_cast<double>(r.differ) / static_cast<double>(r.numel) < 0.005 &&
         r.differ_large == 0;
}

/// `assert_fp8_all_close(a, b)` as a report instead of an assertion. Same shapes required.
template <fp8_storage Fp8 = float8_e4m3fn_t>
fp8_compare_report fp8_all_close(view2d<Fp8 const> a, view2d<Fp8 const> b) {
  if (a.extent[0] != b.extent[0] || a.extent[1] != b.extent[1]) {
    throw shape_error("qtl::fp8_all_close: shapes differ, " + detail::shape_string(a.extent[0], a.extent[1]) +
                      " vs " + detail::shape_string(b.extent[0], b.extent[1]));
  }
  fp8_compare_report r;
  r.numel = a.extent[0] * a.extent[1];
  bool const rows_contiguous = a.extent[1] <= 1 || (a.stride[1] == 1 && b.stride[1] == 1);
  for (index_t i = 0; i < a.extent[0]; ++i) {
    if (rows_contiguous) {  // per-row pointers: a loop g++ vectorizes
      // 32-bit counters (SSE2 cannot widen to 64 in a vector loop), in chunks they cannot overflow
      constexpr index_t chunk = index_t{1} << 30;
      for (index_t j0 = 0; j0 < a.extent[1]; j0 += chunk) {
        Fp8 const* pa = &a(i, j0);
        Fp8 const* pb = &b(i, j0);
        index_t const n = a.extent[1] - j0 < chunk ? a.extent[1] - j0 : chunk;
        std::int32_t flips = 0;
        std::int32_t differ = 0;
        std::int32_t large = 0;
        index_t j = 0;
#if QTL_FP8_X86_DISPATCH
        if (detail::x86::fp8_has_avx512()) {
          constexpr std::uint8_t number_limit = std::is_same_v<Fp8, float8_e4m3fn_t> ? 0x7E : 0x7C;
          j = detail::x86::compare_bytes_avx512(reinterpret_cast<unsigned char const*>(pa),
                                                reinterpret_cast<unsigned char const*>(pb), n, number_limit,
                                                r.sign_flips, r.differ, r.differ_large);
        }
#endif  // ^^^ QTL_FP8_X86_DISPATCH ^^^
        for (; j < n; ++j) {
          fp8_compare_counts const c = fp8_compare_codes<Fp8>(pa[j].bits, pb[j].bits);
          flips += c.sign_flip;
          differ += c.differ;
          large += c.differ_large;
        }
        r.sign_flips += flips;
        r.differ += differ;
        r.differ_large += large;
      }
      continue;
    }
    for (index_t j = 0; j < a.extent[1]; ++j) {
      fp8_compare_counts const c = fp8_compare_codes<Fp8>(a(i, j).bits, b(i, j).bits);
      r.sign_flips += c.sign_flip;
      r.differ += c.differ;
      r.differ_large += c.differ_large;
    }
  }
  r.passed = fp8_all_close_verdict(r);
  return r;
}

}  // namespace qtl
