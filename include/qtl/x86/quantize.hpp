#pragma once
/// \file
/// The x86 executor of group quantization (`qtl/quantize.hpp` selects it): for fp16 and bf16
/// weights on CPUs with AVX2 and F16C, pass 1 folds max/min on the raw 16-bit codes, scales are
/// computed 8 columns at a time, and pass 2 runs one vector instruction per float operation with
/// hardware fp16 conversions, or, on tiles free of NaN, zero and infinite scales (almost all of a
/// real checkpoint), a kernel that needs no NaN handling (16 columns per instruction where the CPU
/// has AVX-512 F/BW/VL) and writes outputs beyond `stream_output_bytes` with non-temporal stores.
/// Small-group tiles fold the next tile's pass 1 into this one's pass 2, a row at a time.
/// Every step computes what the element functions of `qtl/element/quantize.hpp` compute
/// (test/unit/quantize_x86_test.cpp compares them, also compiled with FMA and contraction).
/// Where `QTL_X86` is 0 this header declares nothing.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <qtl/element/quantize.hpp>
#include <qtl/x86/isa.hpp>

#if QTL_X86

namespace qtl::detail::qnt {

/// AVX2 + F16C pass 2 for fp16 and bf16 weights, 8 columns per step; the scalar tail and every
/// other dtype take the portable loops. Each step computes exactly what `quantize_code` and
/// `dequantize_code` do, with one vector instruction per float operation (each rounds once, as the
/// scalar code). FMA is not enabled in these functions, and no product feeds an addition directly
/// (products are stored, or rounded to T by a conversion or by integer logic first), so
/// contraction cannot change them even where the surrounding code is built with FMA and
/// -ffp-contract=fast (the native test builds them that way).
namespace x86 {

/// True when the CPU runs the AVX2 + F16C executor and `qtl::x86::level_cap()` allows AVX2.
inline bool has_avx2_f16c() {
  qtl::x86::cpu_features const& c = qtl::x86::cpu();
  return c.avx2 && c.f16c && qtl::x86::level_cap() >= qtl::x86::level::avx2;
}

/// True when it also runs the AVX-512 clean kernel (AVX-512 F, BW and VL) and the cap allows it.
inline bool has_avx512() {
  qtl::x86::cpu_features const& c = qtl::x86::cpu();
  return has_avx2_f16c() && c.avx512f && c.avx512bw && c.avx512vl && qtl::x86::level_cap() >= qtl::x86::level::avx512;
}

/// 8 weights of T (float, fp16 or bf16) as floats, exact: F16C's conversion (quiet NaN, payload
/// and sign kept, subnormals exact, as `fp16_to_float`), or the bf16 bits shifted to the float's
/// high half.
template <class T>
QTL_X86_AVX2_F16C inline __m256 load8(T const* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(p);
  } else {
    __m128i const h = _mm_loadu_si128(reinterpret_cast<__m128i const*>(p));
    if constexpr (std::is_same_v<T, half_t>) {
      return _mm256_cvtph_ps(h);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

/// bf16 bits, rounded to nearest even, in the high half of each 32-bit lane (low half zero) and
/// with no NaN handling: `round_precision_for_code<bfloat16_t>` of 8 floats.
QTL_X86_AVX2_F16C inline __m256i bf16_round_hi(__m256 v) {
  __m256i const u = _mm256_castps_si256(v);
  __m256i const odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i const r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd);
  return _mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)));
}
/// Lanes of `v` that are NaN, as an integer mask: |bits| > Inf's bits (signed compare is right:
/// both sides are non-negative).
QTL_X86_AVX2_F16C inline __m256i nan_mask(__m256 v) {
  __m256i const a = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7FFFFFFF));
  return _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F800000));
}

/// `round_precision_for_code<T>` of 8 floats. fp16: the F16C round trip, which is `round_to`
/// itself (range included, NaN payloads aside, and NaN codes become 0 anyway).
template <class T>
QTL_X86_AVX2_F16C inline __m256 round_precision8(__m256 v) {
  if constexpr (std::is_same_v<T, half_t>) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return _mm256_castsi256_ps(bf16_round_hi(v));
  } else {
    return v;  // float: already T
  }
}

/// 8 floats rounded to T and stored: `store<T>` of each, bit for bit (NaN → sign | 0x7E00 for
/// fp16, 0x7FC0 for bf16, as `float_to_fp16` / `float_to_bf16`).
template <class T>
QTL_X86_AVX2_F16C inline void store8(T* p, __m256 v) {
  __m256i const nan = nan_mask(v);
  __m128i h;
  if constexpr (std::is_same_v<T, half_t>) {
    // F16C keeps a NaN's sign and top payload bits; clear the payload below the quiet bit.
    h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m128i const nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
    h = _mm_andnot_si128(_mm_and_si128(nan16, _mm_set1_epi16(0x01FF)), h);
  } else {
    __m256i r = _mm256_srli_epi32(bf16_round_hi(v), 16);
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan);
    // [r0..r3 r0..r3 | r4..r7 r4..r7] as 16-bit lanes; 64-bit quarters 0 and 2 are r0..r7.
    h = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
}
/// `round_to<T>` of 8 floats (load8 of store8, without the memory round trip).
template <class T>
QTL_X86_AVX2_F16C inline __m256 round_to8(__m256 v) {
  if constexpr (std::is_same_v<T, half_t>) {
    __m256 const r = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i const nan = nan_mask(v);  // canonical sign | 0x7FC00000, as store<half_t> then load
    __m256i const canon = _mm256_or_si256(_mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(INT32_MIN)),
                                          _mm256_set1_epi32(0x7FC00000));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(_mm256_castps_si256(r), canon, nan));
  } else {
    __m256i const r = _mm256_blendv_epi8(bf16_round_hi(v), _mm256_set1_epi32(0x7FC00000), nan_mask(v));
    return _mm256_castsi256_ps(r);
  }
}

/// Max and min of one column down `rows` rows, exactly as the portable pass 1 folds them (first
/// row, then `nan_max`/`nan_min` row by row): the path of columns holding a NaN, and of the tail.
template <class T>
inline void column_minmax(T const* w, index_t stride, index_t rows, float& mx, float& mn) {
  float hi = load<T>(w[0]);
  float lo = hi;
  for (index_t i = 1; i < rows; ++i) {
    float const x = load<T>(w[i * stride]);
    hi = nan_max(hi, x);
    lo = nan_min(lo, x);
  }
  mx = hi;
  mn = lo;
}

/// Pass 1 of a column tile for fp16/bf16 (`rows` rows of `cn` columns from `w`, row stride
/// `stride`) on the raw 16-bit codes. A sign-magnitude code maps to a signed integer of the same
/// order, key = bits ^ ((bits >> 15 arithmetic) & 0x7FFF):
///
///   -NaN < -Inf < ... < -min < -0 < +0 < +min < ... < +Inf < +NaN      (keys, int16)
///
/// so max/min are `vpmaxsw`/`vpminsw` with no conversion. They differ from the float fold only
/// in the sign of a zero result (-0 < +0 here; the float fold keeps the first of equal values),
/// which no scale or zero point depends on (each takes |mx|, |mn| or mx - mn, and a zero
/// difference is clamped to 1e-5). A column holds a NaN exactly when its key maximum lies above
/// +Inf's or its minimum below -Inf's; such columns are folded again by `column_minmax`, which
/// keeps the portable NaN semantics.
///
/// The fold is in three steps so that the executor can fold the next tile's rows one at a time
/// while it writes this tile's outputs (`minmax_keys_row`), then finish it (`minmax_keys_finish`);
/// `minmax_tile_avx2` runs all three on one tile. Keys cover the first cn / 16 · 16 columns; the
/// rest are folded by `column_minmax` in the finish.
struct minmax_keys {
  alignas(32) std::int16_t mx[max_tile_cols];
  alignas(32) std::int16_t mn[max_tile_cols];
};

template <class T>
QTL_X86_AVX2_F16C inline __m256i minmax_key(T const* p) {
  __m256i const b = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(p));
  return _mm256_xor_si256(b, _mm256_and_si256(_mm256_srai_epi16(b, 15), _mm256_set1_epi16(0x7FFF)));
}

/// Columns [begin, end) of a tile's row `i` (`row` points at its column 0) folded into `k`; row 0
/// sets them. @pre begin and end are multiples of 16.
template <class T>
QTL_X86_AVX2_F16C void minmax_keys_row(T const* row, index_t i, index_t begin, index_t end, minmax_keys& k) {
  for (index_t c = begin; c < end; c += 16) {
    __m256i const key = minmax_key(row + c);
    __m256i* const pmx = reinterpret_cast<__m256i*>(k.mx + c);
    __m256i* const pmn = reinterpret_cast<__m256i*>(k.mn + c);
    _mm256_store_si256(pmx, i == 0 ? key : _mm256_max_epi16(_mm256_load_si256(pmx), key));
    _mm256_store_si256(pmn, i == 0 ? key : _mm256_min_epi16(_mm256_load_si256(pmn), key));
  }
}

/// `mx`/`mn` of the tile whose every row `k` has folded: from the keys, or by `column_minmax` for
/// columns holding a NaN and the last cn % 16.
template <class T>
void minmax_keys_finish(T const* w, index_t stride, index_t rows, index_t cn, minmax_keys const& k, float* mx,
                        float* mn) {
  constexpr std::int16_t inf_bits = std::is_same_v<T, half_t> ? 0x7C00 : 0x7F80;
  index_t const cv = cn / 16 * 16;
  for (index_t j = 0; j < cv; ++j) {
    if (k.mx[j] > inf_bits || k.mn[j] < -inf_bits - 1) {  // key(-Inf) = -Inf's magnitude - 1
      column_minmax(w + j, stride, rows, mx[j], mn[j]);
    } else {
      auto const bits = [](std::int16_t key) {  // the key map is its own inverse
        return T{static_cast<std::uint16_t>(key ^ ((key >> 15) & 0x7FFF))};
      };
      mx[j] = load<T>(bits(k.mx[j]));
      mn[j] = load<T>(bits(k.mn[j]));
    }
  }
  for (index_t j = cv; j < cn; ++j) {
    column_minmax(w + j, stride, rows, mx[j], mn[j]);
  }
}

/// Pass 1 of a whole tile. Short tiles (small groups, in L2) keep 64 columns of maxima and minima
/// in registers down all rows; tall ones (channelwise) walk the rows in memory order, asking for
/// them 8 rows ahead.
template <class T>
QTL_X86_AVX2_F16C void minmax_tile_avx2(T const* w, index_t stride, index_t rows, index_t cn, float* mx, float* mn) {
  minmax_keys k;
  index_t const cv = cn / 16 * 16;
  index_t j = 0;
  if (rows <= 512) {
    for (; j + 64 <= cv; j += 64) {
      __m256i hi[4], lo[4];
      for (int v = 0; v < 4; ++v) {
        hi[v] = lo[v] = minmax_key(w + j + 16 * v);
      }
      for (index_t i = 1; i < rows; ++i) {
        for (int v = 0; v < 4; ++v) {
          __m256i const key = minmax_key(w + i * stride + j + 16 * v);
          hi[v] = _mm256_max_epi16(hi[v], key);
          lo[v] = _mm256_min_epi16(lo[v], key);
        }
      }
      for (int v = 0; v < 4; ++v) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(k.mx + j + 16 * v), hi[v]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(k.mn + j + 16 * v), lo[v]);
      }
    }
  }
  for (index_t i = 0; i < rows && j < cv; ++i) {
    if (i + 8 < rows) {  // tall tiles come from memory: ask 8 rows ahead
      for (index_t c = j; c < cv; c += 32) {
        _mm_prefetch(reinterpret_cast<char const*>(w + (i + 8) * stride + c), _MM_HINT_T0);
      }
    }
    minmax_keys_row(w + i * stride, i, j, cv, k);
  }
  minmax_keys_finish(w, stride, rows, cn, k, mx, mn);
}

/// An integral code value converted to T, as `dequantize_code`'s `to_t` (exact, so skipped, for
/// codes of ≤ 8 bits).
template <class T, bool SmallCodes>
QTL_X86_AVX2_F16C inline __m256 code_to_t(__m256 v) {
  if constexpr (SmallCodes) {
    return v;
  } else {
    return round_to8<T>(v);
  }
}

/// Pass 2 of one row of the column tile, as `quantize_row` (which it must equal bit for bit).
template <class T, bool SmallCodes, bool After>
QTL_X86_AVX2_F16C void quantize_row_avx2(T const* in, float const* sc, float const* zp, index_t cn, quant_range r,
                                         std::uint32_t opaque, std::int32_t* q_out, T* ref_out) {
  __m256 const qmin = _mm256_set1_ps(r.qmin);
  __m256 const qmax = _mm256_set1_ps(r.qmax);
  __m256i const bias = _mm256_set1_epi32(r.bias);
  index_t j = 0;
  for (; j + 8 <= cn; j += 8) {
    __m256 const x = load8<T>(in + j);
    __m256 const s = _mm256_loadu_ps(sc + j);
    __m256 const z = _mm256_loadu_ps(zp + j);
    // quantize_code: rne(T(x / s)), NaN → +0, + zp, clamp (operand order keeps `q < lo ? lo : q`).
    __m256 q = _mm256_round_ps(round_precision8<T>(_mm256_div_ps(x, s)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm256_and_ps(q, _mm256_cmp_ps(q, q, _CMP_ORD_Q));
    q = _mm256_add_ps(q, z);
    q = _mm256_min_ps(qmax, _mm256_max_ps(qmin, q));
    // dequantize_code
    __m256 ref;
    if constexpr (After) {
      __m256 const a = round_to8<T>(_mm256_mul_ps(code_to_t<T, SmallCodes>(q), s));
      __m256 const b = round_to8<T>(_mm256_mul_ps(code_to_t<T, SmallCodes>(z), s));
      ref = _mm256_sub_ps(a, b);
    } else {
      ref = _mm256_mul_ps(code_to_t<T, SmallCodes>(_mm256_sub_ps(q, z)), s);
    }
    store8<T>(ref_out + j, ref);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q_out + j), _mm256_add_epi32(_mm256_cvttps_epi32(q), bias));
  }
  for (; j < cn; ++j) {
    quantize_block<T, SmallCodes, After, 1>(in + j, sc + j, zp + j, r, opaque, q_out + j, ref_out + j);
  }
}
/// Scales (and zero points) of the first cn / 8 · 8 columns of a tile from their max/min, 8 per
/// step, exactly as `symmetric_scale` / `asymmetric_scale` (NaN, Inf and zero included): into
/// `sc`/`zp` as floats and `s_out`/`zp_out` as stored. Returns the number of columns done.
template <class T>
QTL_X86_AVX2_F16C index_t scales_avx2(float const* mx, float const* mn, index_t cn, quant_range r, bool zero_points,
                                      float* sc, float* zp, T* s_out, std::int32_t* zp_out) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  __m256 const qmin = _mm256_set1_ps(r.qmin);
  __m256 const qmax = _mm256_set1_ps(r.qmax);
  __m256 const abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  index_t j = 0;
  for (; j + 8 <= cn; j += 8) {
    __m256 const hi = _mm256_loadu_ps(mx + j);
    __m256 const lo = _mm256_loadu_ps(mn + j);
    __m256 s;
    __m256 z = _mm256_setzero_ps();
    if (zero_points) {
      __m256 const eps = _mm256_set1_ps(round_to<T>(1e-5f));
      __m256 d = round_to8<T>(_mm256_sub_ps(hi, lo));
      d = _mm256_blendv_ps(d, eps, _mm256_cmp_ps(d, eps, _CMP_LT_OQ));  // clamp(min=): NaN stays
      s = round_to8<T>(_mm256_div_ps(d, qmax));
      z = _mm256_and_ps(round_to8<T>(_mm256_div_ps(lo, s)), abs_mask);
      z = _mm256_round_ps(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      z = _mm256_blendv_ps(z, qmin, _mm256_cmp_ps(z, qmin, _CMP_LT_OQ));
      z = _mm256_blendv_ps(z, qmax, _mm256_cmp_ps(z, qmax, _CMP_GT_OQ));
      z = _mm256_and_ps(z, _mm256_cmp_ps(z, z, _CMP_ORD_Q));  // int(NaN) = 0
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(zp_out + j), _mm256_cvttps_epi32(z));
    } else {
      __m256 const a =
          _mm256_and_ps(round_to8<T>(_mm256_div_ps(hi, _mm256_set1_ps(r.qmax != 0 ? r.qmax : inf))), abs_mask);
      __m256 const b =
          _mm256_and_ps(round_to8<T>(_mm256_div_ps(lo, _mm256_set1_ps(r.qmin != 0 ? r.qmin : inf))), abs_mask);
      // nan_max(a, b): b where b > a or b is NaN
      s = _mm256_blendv_ps(a, b, _mm256_or_ps(_mm256_cmp_ps(b, a, _CMP_GT_OQ), _mm256_cmp_ps(b, b, _CMP_UNORD_Q)));
    }
    _mm256_storeu_ps(sc + j, s);
    _mm256_storeu_ps(zp + j, z);
    store8<T>(s_out + j, s);
  }
  return j;
}

/// Per-column constants of pass 2 on a clean tile (see `quantize_row_clean_avx2`).
struct clean_columns {
  alignas(64) float lo[max_tile_cols];         // qmin - zp
  alignas(64) float hi[max_tile_cols];         // qmax - zp
  alignas(64) std::int32_t zb[max_tile_cols];  // zp + bias, added to a code after the clamp
  alignas(64) float zs[max_tile_cols];         // T(zp · s), the subtrahend of zero points after scales
};

/// 16 bytes stored at `p`; past the caches (non-temporal) when `Stream`. @pre Stream: p is 16-byte aligned.
template <bool Stream>
QTL_X86_AVX2_F16C inline void store16(void* p, __m128i v) {
  if constexpr (Stream) {
    _mm_stream_si128(static_cast<__m128i*>(p), v);
  } else {
    _mm_storeu_si128(static_cast<__m128i*>(p), v);
  }
}
/// 8 int32 stored at `p`, as `store16`.
template <bool Stream>
QTL_X86_AVX2_F16C inline void store32(std::int32_t* p, __m256i v) {
  if constexpr (Stream) {
    store16<true>(p, _mm256_castsi256_si128(v));
    store16<true>(p + 4, _mm256_extracti128_si256(v, 1));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
}

/// Pass 2 of one row of a *clean* tile for codes of ≤ 8 bits: every column's scale finite and
/// positive and no NaN in the group, so `w / s` is never NaN. Then, with y = T(w / s) and the
/// integers lo = qmin - zp, hi = qmax - zp,
///
///   clamp(rne(y) + zp, qmin, qmax) - zp  =  rne(clamp(y, lo, hi))      (rne is monotone and
///                                                                       keeps integers)
///
/// so the code is that value plus zp + bias and the reference (zero points before scales) is its
/// product with s, a finite float: no NaN masks, one add and one subtract fewer than
/// `quantize_row_avx2`. The value goes through an int32 conversion before the product, which
/// turns rne's -0 into the +0 that `q - zp` gives. 16 columns per step, so that bf16 results pack
/// into one 32-byte store. `Stream`: non-temporal stores (q_out and ref_out 16-byte aligned).
/// Bit for bit `quantize_row` on such columns (test/unit/quantize_x86_test.cpp).
/// Columns [begin, end) of the row (the AVX-512 kernel leaves a head and a tail to it).
template <class T, bool After, bool Stream>
QTL_X86_AVX2_F16C void quantize_row_clean_avx2(T const* in, float const* sc, float const* zp, clean_columns const& c,
                                               index_t begin, index_t end, quant_range r, std::uint32_t opaque,
                                               std::int32_t* q_out, T* ref_out) {
  // Codes of columns j..j+7 stored; returns their reference values before the rounding to T.
  auto const step = [&](index_t j) QTL_X86_AVX2_F16C {
    __m256 const s = _mm256_loadu_ps(sc + j);
    __m256 y = round_precision8<T>(_mm256_div_ps(load8<T>(in + j), s));
    y = _mm256_min_ps(_mm256_max_ps(y, _mm256_loadu_ps(c.lo + j)), _mm256_loadu_ps(c.hi + j));
    __m256i const v = _mm256_cvttps_epi32(_mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i const code = _mm256_add_epi32(v, _mm256_loadu_si256(reinterpret_cast<__m256i const*>(c.zb + j)));
    store32<Stream>(q_out + j, code);
    if constexpr (After) {
      // T(q · s) - T(zp · s) with q = code - bias = value + zp; may be Inf - Inf (NaN).
      __m256 const q = _mm256_cvtepi32_ps(_mm256_sub_epi32(code, _mm256_set1_epi32(r.bias)));
      return _mm256_sub_ps(round_to8<T>(_mm256_mul_ps(q, s)), _mm256_loadu_ps(c.zs + j));
    } else {
      return _mm256_mul_ps(_mm256_cvtepi32_ps(v), s);  // |value| ≤ 256, s finite: finite
    }
  };
  index_t j = begin;
  for (; j + 16 <= end; j += 16) {
    __m256 const a = step(j);
    __m256 const b = step(j + 8);
    if constexpr (std::is_same_v<T, half_t> && !After) {
      store16<Stream>(ref_out + j, _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      store16<Stream>(ref_out + j + 8, _mm256_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    } else if constexpr (!After) {
      // bf16 of a and b in the low halves, packed: [a0..a3 b0..b3 | a4..a7 b4..b7], then the
      // 64-bit quarters reordered to a0..a7 b0..b7.
      __m256i const ha = _mm256_srli_epi32(bf16_round_hi(a), 16);
      __m256i const hb = _mm256_srli_epi32(bf16_round_hi(b), 16);
      __m256i const h = _mm256_permute4x64_epi64(_mm256_packus_epi32(ha, hb), 0xD8);
      store16<Stream>(ref_out + j, _mm256_castsi256_si128(h));
      store16<Stream>(ref_out + j + 8, _mm256_extracti128_si256(h, 1));
    } else {
      store8<T>(ref_out + j, a);
      store8<T>(ref_out + j + 8, b);
    }
  }
  for (; j + 8 <= end; j += 8) {
    store8<T>(ref_out + j, step(j));
  }
  for (; j < end; ++j) {
    quantize_block<T, true, After, 1>(in + j, sc + j, zp + j, r, opaque, q_out + j, ref_out + j);
  }
}
// GCC 12 warns falsely on the `_mm512_undefined_*` self-initialisations inside its own AVX-512
// intrinsics once they are inlined at -O2/-O3.
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic push
#    pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#  endif  // ^^^ GCC ^^^

/// `bf16_round_hi` of 16 floats.
QTL_X86_AVX512_BW_VL_F16C inline __m512i bf16_round_hi16(__m512 v) {
  __m512i const u = _mm512_castps_si512(v);
  __m512i const odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i const r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd);
  return _mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)));
}

/// `quantize_row_clean_avx2` (zero points before scales) 16 columns per instruction, with the
/// rounding and the int32 conversion of the clamped value in one `vcvtps2dq` {rn-sae}. The row's
/// ragged ends are masked loads and stores of the same step, not a narrower kernel: the outputs
/// of `host_tensor` start 16 bytes past a 64-byte line, where a scalar head and tail per row cost
/// too much (docs/performance.md, quantize). `Stream`: the codes (two thirds of the bytes) go
/// past the caches in whole 64-byte lines, from the first column where `q_out` is so aligned
/// (the masked head before it is stored normally). Same bits as the AVX2 kernel
/// (test/unit/quantize_x86_test.cpp).
///
///   q_out  |head (< 16 codes)|line|line|line| ... |line|tail (< 16)|
///                             ^ 64-byte aligned when Stream
template <class T, bool Stream>
QTL_X86_AVX512_BW_VL_F16C void quantize_row_clean_avx512(T const* in, float const* sc, clean_columns const& c,
                                                         index_t cn, std::int32_t* q_out, T* ref_out) {
  constexpr int rne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  // Columns j..j+15 where `m` has their bits; masked-off lanes are neither read nor written (a
  // scale of 1 keeps them finite). `Full`: all 16, with a streaming store of the codes if Stream.
  auto const step = [&]<bool Full>(index_t j, __mmask16 m) QTL_X86_AVX512_BW_VL_F16C {
    __m256i const raw = Full ? _mm256_loadu_si256(reinterpret_cast<__m256i const*>(in + j))
                             : _mm256_maskz_loadu_epi16(m, in + j);
    __m512 const s = Full ? _mm512_loadu_ps(sc + j) : _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), m, sc + j);
    __m512 y;
    if constexpr (std::is_same_v<T, half_t>) {
      y = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_div_ps(_mm512_cvtph_ps(raw), s), rne));
    } else {  // bf16: the bits in the high half
      __m512 const x = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
      y = _mm512_castsi512_ps(bf16_round_hi16(_mm512_div_ps(x, s)));
    }
    y = _mm512_min_ps(_mm512_max_ps(y, _mm512_maskz_loadu_ps(m, c.lo + j)), _mm512_maskz_loadu_ps(m, c.hi + j));
    __m512i const v = _mm512_cvt_roundps_epi32(y, rne);
    __m512i const code = _mm512_add_epi32(v, _mm512_maskz_loadu_epi32(m, c.zb + j));
    __m512 const ref = _mm512_mul_ps(_mm512_cvtepi32_ps(v), s);  // finite: no NaN to canonicalise
    __m256i h;
    if constexpr (std::is_same_v<T, half_t>) {
      h = _mm512_cvtps_ph(ref, rne);
    } else {
      h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_round_hi16(ref), 16));
    }
    if constexpr (!Full) {
      _mm512_mask_storeu_epi32(q_out + j, m, code);
      _mm256_mask_storeu_epi16(ref_out + j, m, h);
    } else {
      if constexpr (Stream) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(q_out + j), code);
      } else {
        _mm512_storeu_si512(q_out + j, code);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ref_out + j), h);
    }
  };
  auto const first = [](index_t n) { return static_cast<__mmask16>((1u << n) - 1u); };  // n < 16
  index_t j = 0;
  if constexpr (Stream) {
    j = std::min<index_t>(cn, static_cast<index_t>((64 - (reinterpret_cast<std::uintptr_t>(q_out) & 63)) & 63) / 4);
    if (j > 0) {
      step.template operator()<false>(0, first(j));
    }
  }
  for (; j + 16 <= cn; j += 16) {
    step.template operator()<true>(j, 0xFFFF);
  }
  if (j < cn) {
    step.template operator()<false>(j, first(cn - j));
  }
}
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic pop
#  endif  // ^^^ GCC ^^^
}  // namespace x86

/// Pass 1 of a column tile by the AVX2 executor where the CPU has it (returns false otherwise:
/// the caller runs the portable loops).
template <class T>
bool minmax_tile_dispatch(bool fast, T const* w, index_t stride, index_t rows, index_t cn, float* mx, float* mn) {
  if constexpr (std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>) {
    if (fast) {
      x86::minmax_tile_avx2(w, stride, rows, cn, mx, mn);
      return true;
    }
  }
  (void)fast, (void)w, (void)stride, (void)rows, (void)cn, (void)mx, (void)mn;
  return false;
}


/// How pass 2 runs on one column tile of the x86 executor.
struct x86_tile {
  bool clean = false;   // `quantize_row_clean_avx2` applies (its columns in `cols`)
  bool stream = false;  // non-temporal stores (AVX2: for rows whose outputs are 16-byte aligned)
  bool avx512 = false;  // the clean kernel's AVX-512 variant (zero points before scales)
  x86::clean_columns cols;
  x86::minmax_keys keys[2];  // pass 1 of this tile (folded during the last one's pass 2) and the next
};
/// Prepares `t` for a tile of `cn` columns: clean when the codes are of ≤ 8 bits, every scale is
/// finite and positive and no group holds a NaN (`mx` is NaN for a column holding one).
template <class T, bool SmallCodes>
QTL_X86_AVX2_F16C void prepare_x86_tile(x86_tile& t, index_t cn, quant_range r, float const* sc, float const* zp,
                                        float const* mx, std::uint32_t opaque) {
  t.clean = SmallCodes;
  index_t j = 0;
  for (; j + 8 <= cn && t.clean; j += 8) {
    __m256 const s = _mm256_loadu_ps(sc + j);
    __m256 const m = _mm256_loadu_ps(mx + j);
    __m256 const ok = _mm256_and_ps(
        _mm256_and_ps(_mm256_cmp_ps(s, _mm256_setzero_ps(), _CMP_GT_OQ),
                      _mm256_cmp_ps(s, _mm256_set1_ps(std::numeric_limits<float>::max()), _CMP_LE_OQ)),
        _mm256_cmp_ps(m, m, _CMP_ORD_Q));
    t.clean = _mm256_movemask_ps(ok) == 0xFF;
  }
  for (; j < cn && t.clean; ++j) {
    t.clean = sc[j] > 0.0f && sc[j] <= std::numeric_limits<float>::max() && mx[j] == mx[j];  // NaN fails
  }
  if (!t.clean) {
    return;
  }
  for (j = 0; j + 8 <= cn; j += 8) {
    __m256 const z = _mm256_loadu_ps(zp + j);
    _mm256_storeu_ps(t.cols.lo + j, _mm256_sub_ps(_mm256_set1_ps(r.qmin), z));
    _mm256_storeu_ps(t.cols.hi + j, _mm256_sub_ps(_mm256_set1_ps(r.qmax), z));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(t.cols.zb + j),
                        _mm256_add_epi32(_mm256_cvttps_epi32(z), _mm256_set1_epi32(r.bias)));
    _mm256_storeu_ps(t.cols.zs + j, x86::round_to8<T>(_mm256_mul_ps(z, _mm256_loadu_ps(sc + j))));
  }
  for (; j < cn; ++j) {
    t.cols.lo[j] = r.qmin - zp[j];
    t.cols.hi[j] = r.qmax - zp[j];
    t.cols.zb[j] = static_cast<std::int32_t>(zp[j]) + r.bias;
    t.cols.zs[j] = round_to<T>(mul_rn_unfused(zp[j], sc[j], opaque));
  }
}
/// Pass 2 of one row on the x86 executor: the clean kernel (streaming or not) or the general one.
template <class T, bool SmallCodes, bool After>
void quantize_row_x86(x86_tile const& t, T const* in, float const* sc, float const* zp, index_t cn, quant_range r,
                      std::uint32_t opaque, std::int32_t* q_out, T* ref_out) {
  if constexpr (SmallCodes) {
    if (t.clean) {
      if (t.avx512 && !After) {  // streams from the first 64-byte boundary of q_out
        if (t.stream) {
          x86::quantize_row_clean_avx512<T, true>(in, sc, t.cols, cn, q_out, ref_out);
        } else {
          x86::quantize_row_clean_avx512<T, false>(in, sc, t.cols, cn, q_out, ref_out);
        }
      } else if (t.stream && ((reinterpret_cast<std::uintptr_t>(q_out) | reinterpret_cast<std::uintptr_t>(ref_out)) &
                              15) == 0) {
        x86::quantize_row_clean_avx2<T, After, true>(in, sc, zp, t.cols, 0, cn, r, opaque, q_out, ref_out);
      } else {
        x86::quantize_row_clean_avx2<T, After, false>(in, sc, zp, t.cols, 0, cn, r, opaque, q_out, ref_out);
      }
      return;
    }
  }
  x86::quantize_row_avx2<T, SmallCodes, After>(in, sc, zp, cn, r, opaque, q_out, ref_out);
}

/// The x86 steps of `quantize_grouped_host`'s tile loop (see qtl/quantize.hpp's
/// `grouped_portable` for the interface). State: the tile's pass-2 kernel and the folded pass 1.
template <class T, bool SmallCodes>
class grouped_x86 {
 public:
  /// The weight types it runs (fp16 and bf16).
  static constexpr bool takes = std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>;
  /// True when this CPU, under `qtl::x86::level_cap()`, runs it.
  static bool available() { return x86::has_avx2_f16c(); }
  /// For a (k, n) weight; `small_tiles`: the tiles fit in L2 (then the next tile's pass 1 is
  /// folded into this one's pass 2).
  grouped_x86(index_t k, index_t n, bool small_tiles) : pipeline(small_tiles) {
    tile_.avx512 = x86::has_avx512();
    tile_.stream = static_cast<std::size_t>(k * n) * (sizeof(T) + sizeof(std::int32_t)) >= stream_output_bytes;
  }

  /// Fold the next tile's pass 1 into this one's pass 2 (when there is a next tile).
  bool const pipeline;

  bool pass1(T const* w, index_t stride, index_t rows, index_t cn, float* mx, float* mn) {
    if (have_keys_) {
      x86::minmax_keys_finish(w, stride, rows, cn, tile_.keys[cur_], mx, mn);
    } else {
      x86::minmax_tile_avx2(w, stride, rows, cn, mx, mn);
    }
    return true;
  }
  index_t scales(float const* mx, float const* mn, index_t cn, quant_range r, bool zero_points, float* sc, float* zp,
                 T* s_out, std::int32_t* zp_out) {
    return x86::scales_avx2<T>(mx, mn, cn, r, zero_points, sc, zp, s_out, zp_out);
  }
  void prepare(index_t cn, quant_range r, float const* sc, float const* zp, float const* mx, std::uint32_t opaque) {
    prepare_x86_tile<T, SmallCodes>(tile_, cn, r, sc, zp, mx, opaque);
  }
  /// Before row i of this tile's pass 2 (and once after it, i = rows): row i - 1 of the next tile
  /// is folded and row i + 2 asked for, so that a fold never waits.
  void fold(T const* next, index_t stride, index_t i, index_t rows, index_t next_cn) {
    constexpr index_t ahead = 2;
    if (i > 0) {
      x86::minmax_keys_row(next + (i - 1) * stride, i - 1, 0, next_cn / 16 * 16, tile_.keys[cur_ ^ 1]);
    }
    for (index_t a = i == 0 ? 0 : i + ahead; a <= i + ahead && a < rows; ++a) {
      prefetch_row(next + a * stride, next_cn);
    }
  }
  template <bool After>
  bool row(T const* in, float const* sc, float const* zp, index_t cn, quant_range r, std::uint32_t opaque,
           std::int32_t* q_out, T* ref_out) {
    quantize_row_x86<T, SmallCodes, After>(tile_, in, sc, zp, cn, r, opaque, q_out, ref_out);
    return true;
  }
  void end_tile(bool folded) {
    have_keys_ = folded;
    cur_ ^= folded ? 1 : 0;
  }
  void finish() {
    if (tile_.stream) {
      _mm_sfence();  // order the non-temporal stores before whatever the caller does next
    }
  }

 private:
  x86_tile tile_;
  int cur_ = 0;  // tile_.keys[cur_]: this tile's pass 1, when `have_keys_`
  bool have_keys_ = false;
};

}  // namespace qtl::detail::qnt

#endif  // ^^^ QTL_X86 ^^^
