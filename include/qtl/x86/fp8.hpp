#pragma once
/// \file
/// The x86 executors of FP8 quantization (`qtl/fp8.hpp` calls them through the entry points at
/// the end of this header, `detail::fp8_x86`, each of which does the leading part of one of its
/// loops on the widest executor this CPU runs under `qtl::x86::level_cap()`, and returns how far
/// it got; where `QTL_X86` is 0 they do nothing and the portable loops do everything):
///
/// * SSE2 (every x86-64 CPU): the element code 4 lanes at a time, because g++ vectorizes the
///   scalar loops only at -O3 (its -O2 cost model refuses them) and the consumer picks the flags;
/// * AVX2: 8 lanes, 16 elements a step;
/// * AVX-512 (F, BW, VL, DQ, VBMI): 16 lanes; bf16 per-token-group 16 groups a step; amax,
///   requantization and `fp8_all_close` too; per-tensor bf16 outputs streamed.
///
/// Each does the element functions' integer and IEEE steps (`qtl/element/fp8.hpp`), one
/// instruction each, no FMA, so the same codes as the portable loops (test/unit/fp8_x86_test.cpp
/// compares them on hostile inputs and every bf16 code).

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include <qtl/element/fp8.hpp>
#include <qtl/x86/isa.hpp>

namespace qtl::detail {

#if QTL_X86
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

// `quantize_row`'s SSE2 loop over the first `n - n % 8` elements (float and bf16); returns how
// many it did.
template <class Fp8, fp8_nan Nan, fp8_scale_op Op, class T>
index_t quantize_row_sse2(T const* in, Fp8* out, index_t n, float scale, float inv) {
  index_t j = 0;
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
  return j;
}

// AVX2 row executor: `fp8_encode4` and `quantize_row` on 8 lanes, 16 elements a step. The same
// integer and IEEE float operations, one instruction each (FMA is not enabled here and no product
// feeds an addition), so the same codes as the portable loops (tested on every bf16 code).
namespace x86 {

// The x86 executors in order of preference, as `qtl::x86::level`s (`portable` here means "no
// AVX executor": the SSE2 loops still run unless the cap is `portable` too).
using fp8_isa = qtl::x86::level;

// The widest executor this CPU runs: AVX-512 needs F, BW, VL, DQ and VBMI.
inline fp8_isa fp8_cpu_isa() {
  qtl::x86::cpu_features const& c = qtl::x86::cpu();
  if (c.avx512f && c.avx512bw && c.avx512vl && c.avx512dq && c.avx512vbmi) {
    return fp8_isa::avx512;
  }
  return c.avx2 ? fp8_isa::avx2 : fp8_isa::portable;
}
// The one used: the CPU's, capped by `qtl::x86::level_cap()`.
inline fp8_isa fp8_active_isa() { return qtl::x86::capped(fp8_cpu_isa()); }

// True when the AVX2 (at least) / AVX-512 executor runs.
inline bool fp8_has_avx2() { return fp8_active_isa() >= fp8_isa::avx2; }
inline bool fp8_has_avx512() { return fp8_active_isa() >= fp8_isa::avx512; }

QTL_X86_AVX2 inline __m256i c32(std::uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }

template <class Fp8, fp8_nan Nan>
QTL_X86_AVX2 inline __m256i fp8_encode8(__m256 v) {
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
QTL_X86_AVX2 inline __m256 load8(T const* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(p);
  } else {
    __m128i const raw = _mm_loadu_si128(reinterpret_cast<__m128i const*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  }
}

// The first `n - n % 16` elements of `quantize_row`; returns how many it did.
template <class Fp8, fp8_nan Nan, fp8_scale_op Op, class T>
QTL_X86_AVX2 index_t quantize_row_avx2(T const* in, Fp8* out, index_t n, float scale, float inv) {
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
// g++ 12's AVX-512 intrinsics pass `_mm512_undefined_*()` (a self-initialised local) as the
// merge source of unmasked operations, which -Wuninitialized reports once they are inlined.
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic push
#    pragma GCC diagnostic ignored "-Wuninitialized"
#    pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#  endif  // ^^^ g++ ^^^

QTL_X86_AVX512_VBMI inline __m512i z32(std::uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }

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
QTL_X86_AVX512_VBMI inline __m512i encode_magnitude16(__m512i mag) {
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
QTL_X86_AVX512_VBMI inline __m512i fp8_encode16(__m512 v) {
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
QTL_X86_AVX512_VBMI inline __m512 scale16(__m512 x, __m512 scale, __m512 inv) {
  if constexpr (Op == fp8_scale_op::divide) {
    return _mm512_div_ps(x, scale);
  } else {
    return _mm512_mul_ps(x, inv);
  }
}

// 32 bf16 as two float vectors without a shuffle: the even elements (bits shifted into the high
// half) and the odd ones (their high half kept). Lane j of `even`/`odd` is element 2j / 2j+1.
QTL_X86_AVX512_VBMI inline void load_bf16_pairs(bfloat16_t const* p, __m512& even, __m512& odd) {
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
QTL_X86_AVX512_VBMI index_t quantize_row_avx512(T const* in, Fp8* out, index_t n, float scale, float inv,
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
QTL_X86_AVX512_VBMI typename input_bits<T>::word row_amax_bits_avx512(T const* in, index_t n, index_t& done,
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
QTL_X86_AVX512_VBMI inline __m512i bf16_lane_max8(bfloat16_t const* x) {
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
QTL_X86_AVX512_VBMI inline __m512 block_vmax16_bf16(bfloat16_t const* x) {
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
// `x / s` stays `vdivps` (an FMA-corrected reciprocal was slower: docs/performance.md, fp8).
template <int G, class Fp8, fp8_nan Nan, fp8_scale_op Op>
QTL_X86_AVX512_VBMI index_t group_quantize_row_avx512(bfloat16_t const* x, Fp8* out, index_t groups, float eps,
                                                      bool power_of_two, float* row_scales,
                                                      bfloat16_t const* next_row) {
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
QTL_X86_AVX512_VBMI inline index_t translate_bytes_avx512(unsigned char* p, index_t n, unsigned char const* table) {
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
QTL_X86_AVX512_VBMI inline index_t compare_bytes_avx512(unsigned char const* a, unsigned char const* b, index_t n,
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

#endif  // ^^^ QTL_X86 ^^^

/// The entry points of qtl/fp8.hpp's loops: the one place that chooses an x86 executor.
namespace fp8_x86 {

/// The elements [begin, end) of a row that an executor did.
struct span {
  index_t begin = 0;
  index_t end = 0;
};

/// The part of `quantize_row` (fp8.hpp) an executor takes: all but a tail (float, bf16), or, when
/// `stream`ing bf16 on AVX-512, all but a head up to the first 32-byte boundary of `out` and a tail.
template <class Fp8, fp8_nan Nan, fp8_scale_op Op, class T>
span quantize_row([[maybe_unused]] T const* in, [[maybe_unused]] Fp8* out, [[maybe_unused]] index_t n,
                  [[maybe_unused]] float scale, [[maybe_unused]] float inv, [[maybe_unused]] T const* prefetch,
                  [[maybe_unused]] bool stream) {
#if QTL_X86
  if constexpr (std::is_same_v<T, bfloat16_t>) {
    if (stream && n >= 256 && x86::fp8_has_avx512()) {
      auto const head = static_cast<index_t>((32u - reinterpret_cast<std::uintptr_t>(out) % 32u) % 32u);
      return {head, head + x86::quantize_row_avx512<Fp8, Nan, Op, T, true>(in + head, out + head, n - head, scale,
                                                                          inv, prefetch)};
    }
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16_t>) {
    index_t j = 0;
    if (x86::fp8_has_avx512()) {
      j = x86::quantize_row_avx512<Fp8, Nan, Op>(in, out, n, scale, inv, prefetch);
    } else if (x86::fp8_has_avx2()) {
      j = x86::quantize_row_avx2<Fp8, Nan, Op>(in, out, n, scale, inv);
    }
    if (qtl::x86::level_cap() >= qtl::x86::level::sse2) {
      j += quantize_row_sse2<Fp8, Nan, Op>(in + j, out + j, n - j, scale, inv);
    }
    return {0, j};
  }
#endif  // ^^^ QTL_X86 ^^^
  return {0, 0};
}

/// The leading part of `row_amax_bits` (fp8.hpp): folds it into `m` and returns its length.
template <class T, class W>
index_t row_amax_bits([[maybe_unused]] T const* in, [[maybe_unused]] index_t n, [[maybe_unused]] T const* prefetch,
                      [[maybe_unused]] W& m) {
  index_t j = 0;
#if QTL_X86
  using signed_word = W;
  if (n >= 64 && x86::fp8_has_avx512()) {
    m = static_cast<signed_word>(x86::row_amax_bits_avx512(in, n, j, prefetch));
  }
  if constexpr (sizeof(T) == 2) {
    if (qtl::x86::level_cap() < qtl::x86::level::sse2) {
      return j;
    }
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
#endif  // ^^^ QTL_X86 ^^^
  return j;
}

/// The leading groups of row `i` of `per_token_group_quant_fp8` (bf16, groups of a multiple of
/// 32, at least 16 groups, AVX-512): quantizes them, writes their scales and returns how many.
template <int GroupSize, class Fp8, class T>
index_t group_quantize_row([[maybe_unused]] view2d<T const> in, [[maybe_unused]] view2d<Fp8> out,
                           [[maybe_unused]] index_t i, [[maybe_unused]] index_t groups,
                           [[maybe_unused]] index_t rows, [[maybe_unused]] fp8_group_options const& o,
                           [[maybe_unused]] std::span<float> scales, [[maybe_unused]] std::vector<float>& row_scales) {
  index_t g0 = 0;
#if QTL_X86
    if constexpr (std::is_same_v<T, bfloat16_t> && GroupSize % 32 == 0) {
      if (groups >= 16 && x86::fp8_has_avx512()) {  // 16 groups a step
        row_scales.resize(static_cast<std::size_t>(groups));
        auto const run = [&]<fp8_nan Nan, fp8_scale_op Op>() {
          return x86::group_quantize_row_avx512<GroupSize, Fp8, Nan, Op>(
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
#endif  // ^^^ QTL_X86 ^^^
  return g0;
}

/// The leading bytes of `p[j] = table[p[j]]` (AVX-512); returns how many.
inline index_t translate_bytes([[maybe_unused]] unsigned char* p, [[maybe_unused]] index_t n,
                               [[maybe_unused]] unsigned char const* table) {
#if QTL_X86
  if (x86::fp8_has_avx512()) {
    return x86::translate_bytes_avx512(p, n, table);
  }
#endif  // ^^^ QTL_X86 ^^^
  return 0;
}

/// The leading codes of `fp8_all_close`'s comparison (AVX-512): adds their counts, returns how many.
template <class Fp8>
index_t compare_bytes([[maybe_unused]] Fp8 const* a, [[maybe_unused]] Fp8 const* b, [[maybe_unused]] index_t n,
                      [[maybe_unused]] index_t& flips, [[maybe_unused]] index_t& differ,
                      [[maybe_unused]] index_t& large) {
#if QTL_X86
  if (x86::fp8_has_avx512()) {
    constexpr std::uint8_t number_limit = std::is_same_v<Fp8, float8_e4m3fn_t> ? 0x7E : 0x7C;
    return x86::compare_bytes_avx512(reinterpret_cast<unsigned char const*>(a),
                                     reinterpret_cast<unsigned char const*>(b), n, number_limit, flips, differ, large);
  }
#endif  // ^^^ QTL_X86 ^^^
  return 0;
}

}  // namespace fp8_x86

/// True when `fp8_x86::quantize_row` runs T through the AVX2 or AVX-512 executor.
template <class T>
bool avx2_quantizes() {
#if QTL_X86
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16_t>) {
    return x86::fp8_has_avx2();
  }
#endif  // ^^^ QTL_X86 ^^^
  return false;
}

}  // namespace qtl::detail
