#pragma once
/// \file
/// The x86 executor of compressed-tensors pack-quantized (`qtl/ct_quantize.hpp` asks it once per
/// group): on CPUs with AVX2 and F16C, a group's max and min 8 lanes at a time with a check that
/// every weight is finite (`ct_max_min_x86`), and the codes of a group whose max and min are
/// finite (every group of a checkpoint that passed the NaN/Inf check) 8 at a time, one vector
/// instruction per step of `ct_int_code` (`ct_codes_x86`): u = rne(clamp(T(T(w / s) + zp), qmin, qmax)) + 2^(b-1).
/// In such a group s is positive (finite or +Inf) and zp finite, so no step meets a NaN, and:
///   T(x): bf16 by rounding the float's bits at bit 16 (nearest even; a carry past the largest
///         finite value gives Inf, as `from_float`); fp16 by F16C's round trip (nearest even,
///         subnormals and overflow as `from_float`); float unchanged;
///   clamp: maxps/minps (no NaN to keep); rne: vroundps to nearest, which is `round_half_even`.
/// FMA is not enabled and no product feeds a sum. Where `QTL_X86` is 0 this header declares
/// nothing and the portable loop computes every code (the same bits).

#include <cstdint>
#include <type_traits>

#include <qtl/element/quantize.hpp>
#include <qtl/x86/isa.hpp>
#include <qtl/x86/quantize.hpp>

#if QTL_X86

namespace qtl::detail::ct {

// The loads, the rounding to T and the CPU check are the quantize executor's (x86/quantize.hpp).
using qnt::x86::has_avx2_f16c;
using qnt::x86::load8;
using qnt::x86::round_precision8;

/// The max and min of the `n` (a positive multiple of 8) weights at `x` into `mx`, `mn` when all
/// are finite; false (and `mx`, `mn` unspecified) when one is NaN or infinite, which the portable
/// `nan_max_min` then takes. A zero's sign may differ from the portable fold's; the parameters of
/// `ct_int_group_params` do not depend on it (it takes |mx|, |mn|, mx - mn and mn / s0 only).
template <class T>
QTL_X86_AVX2_F16C inline bool ct_max_min_x86(T const* x, index_t n, float& mx, float& mn) {
  __m256 vmax = load8<T>(x);
  __m256 vmin = vmax;
  __m256i const exponent = _mm256_set1_epi32(0x7F800000);
  __m256i bad = _mm256_setzero_si256();
  for (index_t i = 0; i < n; i += 8) {
    __m256 const v = load8<T>(x + i);
    vmax = _mm256_max_ps(vmax, v);
    vmin = _mm256_min_ps(vmin, v);
    bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(v), exponent), exponent));
  }
  if (!_mm256_testz_si256(bad, bad)) {
    return false;
  }
  __m128 hmax = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  __m128 hmin = _mm_min_ps(_mm256_castps256_ps128(vmin), _mm256_extractf128_ps(vmin, 1));
  hmax = _mm_max_ps(hmax, _mm_movehl_ps(hmax, hmax));
  hmin = _mm_min_ps(hmin, _mm_movehl_ps(hmin, hmin));
  hmax = _mm_max_ss(hmax, _mm_shuffle_ps(hmax, hmax, 1));
  hmin = _mm_min_ss(hmin, _mm_shuffle_ps(hmin, hmin, 1));
  mx = _mm_cvtss_f32(hmax);
  mn = _mm_cvtss_f32(hmin);
  return true;
}

/// The codes u of the first n - n % 8 of the `n` weights at `x` into `u`; returns how many it
/// wrote. @pre `has_avx2_f16c()`, and the group's max and min are finite (the file comment).
template <class T>
QTL_X86_AVX2_F16C inline index_t ct_codes_x86(T const* x, index_t n, qnt::group_params p, int bits, std::uint8_t* u) {
  float const qmax = static_cast<float>((1 << (bits - 1)) - 1);
  float const qmin = -static_cast<float>(1 << (bits - 1));
  __m256 const s = _mm256_set1_ps(p.s);
  __m256 const zp = _mm256_set1_ps(p.zp);
  __m256 const lo = _mm256_set1_ps(qmin);
  __m256 const hi = _mm256_set1_ps(qmax);
  __m256i const offset = _mm256_set1_epi32(1 << (bits - 1));
  index_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 q = round_precision8<T>(_mm256_div_ps(load8<T>(x + i), s));
    q = round_precision8<T>(_mm256_add_ps(q, zp));
    q = _mm256_min_ps(_mm256_max_ps(q, lo), hi);
    q = _mm256_round_ps(q, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i const c = _mm256_add_epi32(_mm256_cvtps_epi32(q), offset);  // 0 .. 2^b - 1
    __m128i const w16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(u + i), _mm_packus_epi16(w16, w16));
  }
  return i;
}

}  // namespace qtl::detail::ct

#endif  // ^^^ QTL_X86 ^^^
