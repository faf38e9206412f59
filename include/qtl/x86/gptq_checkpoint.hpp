#pragma once
/// \file
/// The x86 executor of `qtl::gptq_checkpoint_quantize` (`qtl/gptq_checkpoint.hpp` asks it once per
/// group): on CPUs with AVX2 and F16C, the stored codes of a group 8 at a time, one vector
/// instruction per step of `gptq_code` (qtl/element/gptq_quantizer.hpp), for a group whose max and
/// min are finite and whose scale is positive and finite (the caller checks; the portable loop
/// takes every other group):
///   symmetric:  u = rne(clamp(T(w / s), qmin, qmax)) + bias   (clamping first: the bounds are
///               integers, so it commutes with rne; T(x) as `qtl/x86/ct_quantize.hpp` rounds it)
///   asymmetric: u = clamp(rne(w / s) + zp, 0, 2^b - 1)          (float32; zp an integer)
/// No step meets a NaN, FMA is not enabled and no product feeds a sum. Where `QTL_X86` is 0 this
/// header declares nothing and the portable loop computes every code (the same bits).

#include <cstdint>

#include <qtl/element/gptq_quantizer.hpp>
#include <qtl/x86/ct_quantize.hpp>

#if QTL_X86

namespace qtl::detail::gptq::x86 {

/// The stored codes of the first n - n % 8 of the `n` weights at `x` into `u` by `rule` (p the
/// group's parameters, `stored_s` its scale as stored); returns how many it wrote.
/// @pre `has_avx2_f16c()`; the file comment's conditions on the group
template <class T>
QTL_X86_AVX2_F16C inline index_t codes(T const* x, index_t n, gptq_rule rule, group_params p, float stored_s, int bits,
                                       std::uint8_t* u) {
  using ct::load8;
  using ct::round_precision8;
  constexpr int rne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  bool const sym = rule == gptq_rule::symmetric;
  int const half = 1 << (bits - 1);
  // symmetric: clamp to [qmin, qmax] = [-2^(b-1), 2^(b-1) - 1], then + bias (2^(b-1));
  // asymmetric: + zp, clamp to [0, 2^b - 1]
  __m256 const s = _mm256_set1_ps(sym ? p.s : stored_s);
  __m256 const add = _mm256_set1_ps(sym ? 0.0f : p.zp);
  __m256 const lo = _mm256_set1_ps(sym ? static_cast<float>(-half) : 0.0f);
  __m256 const hi = _mm256_set1_ps(sym ? static_cast<float>(half - 1) : static_cast<float>(2 * half - 1));
  __m256i const offset = _mm256_set1_epi32(sym ? half : 0);
  index_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 const y = _mm256_div_ps(load8<T>(x + i), s);
    __m256 q = sym ? round_precision8<T>(y) : _mm256_add_ps(_mm256_round_ps(y, rne), add);
    q = _mm256_round_ps(_mm256_min_ps(_mm256_max_ps(q, lo), hi), rne);
    __m256i const c = _mm256_add_epi32(_mm256_cvtps_epi32(q), offset);  // 0 .. 2^b - 1
    __m128i const w16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(u + i), _mm_packus_epi16(w16, w16));
  }
  return i;
}

}  // namespace qtl::detail::gptq::x86

#endif  // ^^^ QTL_X86 ^^^
