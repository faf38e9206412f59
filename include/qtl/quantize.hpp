#pragma once
/// \file
/// Group quantization of float weights to integer codes, bit for bit as the reference Python
/// (`quantize_weights`, `gptq_quantize_weights`, `permute_rows`, `sort_weights`,
/// `per_tensor_dequantize`, `convert_to_channelwise`, `all_close_1d` of sglang's
/// `quantization/utils.py`; `research/semantics.md` §4 is the spec).
///
/// Shapes (torch's, row-major): the weight `w` is (K, N), K the reduction dimension. A group is
/// `G` consecutive rows of one column; group `g` of column `n` is rows [g·G, g·G + G):
///
///        n →                         w_s, w_zp: (K/G, N)
///   k  ┌───────────┐  group 0        ┌───────────┐
///   ↓  │ G rows    │ ───────────────▶│ s[0][n]   │
///      ├───────────┤  group 1        │ s[1][n]   │
///      │ G rows    │ ───────────────▶│ ...       │
///      └───────────┘                 └───────────┘
///
/// **Numerics**: the element functions of `qtl/element/quantize.hpp` (the formulas are in its
/// file comment); this header runs them over (K, N) weights and checks the arguments.
///
/// **Where the reference is undefined or device-dependent, QTL defines** (and tests):
///  - `int(x)` of NaN is 0 and out-of-range values saturate, as CUDA's conversion (CPU torch gives
///    INT_MIN for NaN), and `+ zp` saturates instead of wrapping. Consequences: an all-zero
///    symmetric group (s = 0, 0/0 = NaN) quantizes to code 0 + bias with w_ref = +0 and s = 0;
///    a NaN in a group makes that group's s and w_ref NaN and its codes 0 + bias (zp 0);
///    ±Inf makes s = Inf, the codes of the finite weights 0 + bias and w_ref NaN (0 · Inf).
///  - A group size that is ≥ K (or -1) means one group per column (the reference does the same);
///    a positive group size below K that does not divide K throws `qtl::shape_error` (the
///    reference crashes in a reshape). K = 0 throws `qtl::shape_error` (torch cannot reduce it).
///  - `gptq_quantize_weights` with act-order and channelwise groups throws (the reference returns
///    nonsense for -1); `sort_weights` is stable (torch's argsort is not).
///
/// **Host executors.** Grouped quantization runs two passes per group and column tile: max/min
/// down the rows, then codes and reference values; the next tile is prefetched into L2 during
/// pass 2 (on the x86 executor its pass 1 is folded there too, a row at a time). The portable
/// loops vectorise with SSE2; on x86-64 CPUs with AVX2 and F16C (checked once at run time) fp16
/// and bf16 weights take `detail::qnt::x86`, which folds max/min on the
/// raw 16-bit codes, computes scales 8 columns at a time, and runs pass 2 with one vector
/// instruction per float operation and hardware fp16 conversions, or, on tiles free of NaN,
/// zero and infinite scales (almost all of a real checkpoint), with a kernel that needs no NaN
/// handling (16 columns per instruction where the CPU has AVX-512 F/BW/VL) and writes outputs
/// beyond `stream_output_bytes` with non-temporal stores. All give the same bits
/// (test/unit/quantize_x86_test.cpp compares them, also compiled with FMA and contraction).

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <qtl/element/quantize.hpp>
#include <qtl/error.hpp>
#include <qtl/exact.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/scalar_type.hpp>
#include <qtl/view.hpp>

// Host fast path: x86-64 compilers with GNU target attributes get an AVX2 + F16C executor chosen at
// run time (the default build targets baseline x86-64); nvcc's host pass does not.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#  define QTL_QUANTIZE_X86_DISPATCH 1
#  include <cpuid.h>
#  include <immintrin.h>
#endif  // ^^^ x86-64 GCC/Clang host ^^^

namespace qtl {

namespace detail::qnt {

/// Columns per tile. Small groups: 512 columns, so that a group of a tile (≤ 256 KiB) is still in
/// L2 when pass 2 reads it again. Large groups (channelwise): 4096 columns, streamed twice from
/// memory in long contiguous runs (narrow tiles of thousands of rows a power-of-two stride apart
/// would thrash a few cache sets).
inline constexpr index_t max_tile_cols = 4096;
inline index_t tile_cols(index_t group_rows, std::size_t elem_bytes) {
  return group_rows * 512 * static_cast<index_t>(elem_bytes) <= 256 * 1024 ? 512 : max_tile_cols;
}

/// W consecutive columns of pass 1 (max/min). Fixed-width blocks with local arrays vectorise
/// even under -O2's very-cheap cost model (no trip-count epilogue, no alias versioning).
template <class T, int W>
QTL_HOST_DEVICE void minmax_block(T const* row, float* mx, float* mn) {
  float x[W];
  for (int l = 0; l < W; ++l) {
    x[l] = load<T>(row[l]);
  }
  for (int l = 0; l < W; ++l) {
    mx[l] = nan_max(mx[l], x[l]);
    mn[l] = nan_min(mn[l], x[l]);
  }
}

/// W consecutive columns of pass 2 (codes and reference values) of one row.
template <class T, bool SmallCodes, bool After, int W>
QTL_HOST_DEVICE void quantize_block(T const* in, float const* sc, float const* zp, quant_range r, std::uint32_t opaque,
                                    std::int32_t* q_out, T* ref_out) {
  float x[W];
  float q[W];
  T ref[W];
  for (int l = 0; l < W; ++l) {
    x[l] = load<T>(in[l]);
  }
  for (int l = 0; l < W; ++l) {
    group_params const p{sc[l], zp[l]};
    q[l] = quantize_code<T>(x[l], p, r);
    ref[l] = store<T>(dequantize_code<T, SmallCodes>(q[l], p, After, opaque));
  }
  for (int l = 0; l < W; ++l) {
    ref_out[l] = ref[l];
    q_out[l] = static_cast<std::int32_t>(q[l]) + r.bias;
  }
}

template <class T, bool SmallCodes, bool After>
void quantize_row(T const* in, float const* sc, float const* zp, index_t cn, quant_range r, std::uint32_t opaque,
                  std::int32_t* q_out, T* ref_out) {
  constexpr int block = 16;
  index_t j = 0;
  for (; j + block <= cn; j += block) {
    quantize_block<T, SmallCodes, After, block>(in + j, sc + j, zp + j, r, opaque, q_out + j, ref_out + j);
  }
  for (; j < cn; ++j) {
    quantize_block<T, SmallCodes, After, 1>(in + j, sc + j, zp + j, r, opaque, q_out + j, ref_out + j);
  }
}

#if defined(QTL_QUANTIZE_X86_DISPATCH)
/// AVX2 + F16C pass 2 for fp16 and bf16 weights, 8 columns per step; the scalar tail and every
/// other dtype take the portable loops. Each step computes exactly what `quantize_code` and
/// `dequantize_code` do, with one vector instruction per float operation (each rounds once, as the
/// scalar code). FMA is not enabled in these functions, and no product feeds an addition directly
/// (products are stored, or rounded to T by a conversion or by integer logic first), so
/// contraction cannot change them even where the surrounding code is built with FMA and
/// -ffp-contract=fast (the native test builds them that way).
namespace x86 {
#  define QTL_QUANTIZE_AVX2 __attribute__((target("avx2,f16c")))

/// True when the CPU runs the AVX2 + F16C executor (checked once). F16C is CPUID leaf 1, ECX
/// bit 29, read directly: Clang 14's `__builtin_cpu_supports` does not know "f16c". (The AVX2
/// check includes the OS's saving of the YMM state, which F16C needs too.)
inline bool has_avx2_f16c() {
  static bool const ok = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  }();
  return ok;
}

/// True when the CPU (and the OS, which must save the ZMM state: `__builtin_cpu_supports` checks
/// that) runs the AVX-512 clean kernel: AVX-512 F, BW and VL, besides AVX2 and F16C.
inline bool has_avx512() {
  static bool const ok = has_avx2_f16c() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl");
  return ok;
}

/// 8 weights of T (fp16 or bf16) as floats, exact: F16C's conversion (quiet NaN, payload and sign
/// kept, subnormals exact, as `fp16_to_float`), or the bf16 bits shifted to the float's high half.
template <class T>
QTL_QUANTIZE_AVX2 inline __m256 load8(T const* p) {
  __m128i const h = _mm_loadu_si128(reinterpret_cast<__m128i const*>(p));
  if constexpr (std::is_same_v<T, half_t>) {
    return _mm256_cvtph_ps(h);
  } else {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

/// bf16 bits, rounded to nearest even, in the high half of each 32-bit lane (low half zero) and
/// with no NaN handling: `round_precision_for_code<bfloat16_t>` of 8 floats.
QTL_QUANTIZE_AVX2 inline __m256i bf16_round_hi(__m256 v) {
  __m256i const u = _mm256_castps_si256(v);
  __m256i const odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i const r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd);
  return _mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)));
}
/// Lanes of `v` that are NaN, as an integer mask: |bits| > Inf's bits (signed compare is right:
/// both sides are non-negative).
QTL_QUANTIZE_AVX2 inline __m256i nan_mask(__m256 v) {
  __m256i const a = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7FFFFFFF));
  return _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F800000));
}

/// `round_precision_for_code<T>` of 8 floats. fp16: the F16C round trip, which is `round_to`
/// itself (range included, NaN payloads aside, and NaN codes become 0 anyway).
template <class T>
QTL_QUANTIZE_AVX2 inline __m256 round_precision8(__m256 v) {
  if constexpr (std::is_same_v<T, half_t>) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else {
    return _mm256_castsi256_ps(bf16_round_hi(v));
  }
}

/// 8 floats rounded to T and stored: `store<T>` of each, bit for bit (NaN → sign | 0x7E00 for
/// fp16, 0x7FC0 for bf16, as `float_to_fp16` / `float_to_bf16`).
template <class T>
QTL_QUANTIZE_AVX2 inline void store8(T* p, __m256 v) {
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
QTL_QUANTIZE_AVX2 inline __m256 round_to8(__m256 v) {
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
QTL_QUANTIZE_AVX2 inline __m256i minmax_key(T const* p) {
  __m256i const b = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(p));
  return _mm256_xor_si256(b, _mm256_and_si256(_mm256_srai_epi16(b, 15), _mm256_set1_epi16(0x7FFF)));
}

/// Columns [begin, end) of a tile's row `i` (`row` points at its column 0) folded into `k`; row 0
/// sets them. @pre begin and end are multiples of 16.
template <class T>
QTL_QUANTIZE_AVX2 void minmax_keys_row(T const* row, index_t i, index_t begin, index_t end, minmax_keys& k) {
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
QTL_QUANTIZE_AVX2 void minmax_tile_avx2(T const* w, index_t stride, index_t rows, index_t cn, float* mx, float* mn) {
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
QTL_QUANTIZE_AVX2 inline __m256 code_to_t(__m256 v) {
  if constexpr (SmallCodes) {
    return v;
  } else {
    return round_to8<T>(v);
  }
}

/// Pass 2 of one row of the column tile, as `quantize_row` (which it must equal bit for bit).
template <class T, bool SmallCodes, bool After>
QTL_QUANTIZE_AVX2 void quantize_row_avx2(T const* in, float const* sc, float const* zp, index_t cn, quant_range r,
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
QTL_QUANTIZE_AVX2 index_t scales_avx2(float const* mx, float const* mn, index_t cn, quant_range r, bool zero_points,
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
  float lo[max_tile_cols];        // qmin - zp
  float hi[max_tile_cols];        // qmax - zp
  std::int32_t zb[max_tile_cols]; // zp + bias, added to a code after the clamp
  float zs[max_tile_cols];        // T(zp · s), the subtrahend of zero points after scales
};

/// 16 bytes stored at `p`; past the caches (non-temporal) when `Stream`. @pre Stream: p is 16-byte aligned.
template <bool Stream>
QTL_QUANTIZE_AVX2 inline void store16(void* p, __m128i v) {
  if constexpr (Stream) {
    _mm_stream_si128(static_cast<__m128i*>(p), v);
  } else {
    _mm_storeu_si128(static_cast<__m128i*>(p), v);
  }
}
/// 8 int32 stored at `p`, as `store16`.
template <bool Stream>
QTL_QUANTIZE_AVX2 inline void store32(std::int32_t* p, __m256i v) {
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
QTL_QUANTIZE_AVX2 void quantize_row_clean_avx2(T const* in, float const* sc, float const* zp, clean_columns const& c,
                                               index_t begin, index_t end, quant_range r, std::uint32_t opaque,
                                               std::int32_t* q_out, T* ref_out) {
  // Codes of columns j..j+7 stored; returns their reference values before the rounding to T.
  auto const step = [&](index_t j) QTL_QUANTIZE_AVX2 {
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
#  define QTL_QUANTIZE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
// GCC 12 warns falsely on the `_mm512_undefined_*` self-initialisations inside its own AVX-512
// intrinsics once they are inlined at -O2/-O3.
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic push
#    pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#  endif  // ^^^ GCC ^^^

/// `bf16_round_hi` of 16 floats.
QTL_QUANTIZE_AVX512 inline __m512i bf16_round_hi16(__m512 v) {
  __m512i const u = _mm512_castps_si512(v);
  __m512i const odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i const r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd);
  return _mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)));
}

/// `quantize_row_clean_avx2` (zero points before scales) 16 columns per instruction, with the
/// rounding and the int32 conversion of the clamped value in one `vcvtps2dq` {rn-sae}. The row's
/// ragged ends are masked loads and stores of the same step, not a narrower kernel: the outputs
/// of `host_tensor` start 16 bytes past a 64-byte line, and a scalar head and tail per row of a
/// 512-column tile had cost a third of pass 2. `Stream`: the codes (two thirds of the bytes) go
/// past the caches in whole 64-byte lines, from the first column where `q_out` is so aligned
/// (the masked head before it is stored normally; non-temporal stores in 16-byte pieces measured
/// slower than ordinary ones). Same bits as the AVX2 kernel (test/unit/quantize_x86_test.cpp).
///
///   q_out  |head (< 16 codes)|line|line|line| ... |line|tail (< 16)|
///                             ^ 64-byte aligned when Stream
template <class T, bool Stream>
QTL_QUANTIZE_AVX512 void quantize_row_clean_avx512(T const* in, float const* sc, clean_columns const& c, index_t cn,
                                                   std::int32_t* q_out, T* ref_out) {
  constexpr int rne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  // Columns j..j+15 where `m` has their bits; masked-off lanes are neither read nor written (a
  // scale of 1 keeps them finite). `Full`: all 16, with a streaming store of the codes if Stream.
  auto const step = [&]<bool Full>(index_t j, __mmask16 m) QTL_QUANTIZE_AVX512 {
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
#  undef QTL_QUANTIZE_AVX512
#  undef QTL_QUANTIZE_AVX2
}  // namespace x86
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^

/// Pass 1 of a column tile by the AVX2 executor where the CPU has it (returns false otherwise:
/// the caller runs the portable loops).
template <class T>
bool minmax_tile_dispatch(bool fast, T const* w, index_t stride, index_t rows, index_t cn, float* mx, float* mn) {
#if defined(QTL_QUANTIZE_X86_DISPATCH)
  if constexpr (std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>) {
    if (fast) {
      x86::minmax_tile_avx2(w, stride, rows, cn, mx, mn);
      return true;
    }
  }
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^
  (void)fast, (void)w, (void)stride, (void)rows, (void)cn, (void)mx, (void)mn;
  return false;
}

#if defined(QTL_QUANTIZE_X86_DISPATCH)
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
__attribute__((target("avx2,f16c"))) void prepare_x86_tile(x86_tile& t, index_t cn, quant_range r, float const* sc,
                                                          float const* zp, float const* mx, std::uint32_t opaque) {
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
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^

/// Asks for the `n` elements at `p` to be brought into L2 (a hint: no fault, no effect elsewhere).
template <class T>
inline void prefetch_row(T const* p, index_t n) {
#if defined(__GNUC__) || defined(__clang__)
  char const* const c = reinterpret_cast<char const*>(p);
  for (std::size_t b = 0; b < static_cast<std::size_t>(n) * sizeof(T); b += 64) {
    __builtin_prefetch(c + b, 0, 2);
  }
#else
  (void)p, (void)n;
#endif
}

/// Outputs of at least this many bytes are written with non-temporal stores by the x86 executor:
/// far beyond what the caches keep (32 MiB of L3 on the machines we measure), where write-allocate
/// would read every output line before overwriting it.
inline constexpr std::size_t stream_output_bytes = std::size_t{64} << 20;

/// Host executor of grouped quantization: one group (gs rows) × one column tile at a time, so the
/// tile is still in L2 when pass 2 reads it again; while pass 2 runs, the next tile's rows are
/// prefetched into L2 (and on the x86 executor folded into its pass 1 there, see `pipeline`), so
/// that pass 1 of that tile does not wait for memory. Tiles too tall for
/// L2 (channelwise) are read twice from memory, each pass asking for the rows a few ahead.
/// `row_out[r]` (optional) is the output row of input row r (act-order writes permuted rows).
template <class T, int G, bool SmallCodes>
void quantize_grouped_host(view2d<T const> w, index_t gs, quant_range r, quantize_options opt,
                           quantize_outputs<T> out, std::int32_t const* row_out) {
  constexpr int block = 16;
  constexpr bool x86_16 = std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>;  // the x86 executor's types
  index_t const k = w.extent[0];
  index_t const n = w.extent[1];
  if constexpr (G > 0) {
    gs = G <= k ? G : k;  // a fixed size lets the compiler see the row loop bounds
  }
  std::uint32_t const opaque = opaque_zero();
  index_t const tc = tile_cols(gs, sizeof(T));
  bool const prefetch = tc < max_tile_cols;  // see tile_cols
  float mx[max_tile_cols];
  float mn[max_tile_cols];
  float sc[max_tile_cols];
  float zp[max_tile_cols];
  bool const after = opt.zero_points && opt.ref_zero_points_after_scales;
#if defined(QTL_QUANTIZE_X86_DISPATCH)
  bool const fast = x86::has_avx2_f16c();
  x86_tile tile;
  tile.avx512 = x86::has_avx512();
  tile.stream = static_cast<std::size_t>(k * n) * (sizeof(T) + sizeof(std::int32_t)) >= stream_output_bytes;
  // Small-group tiles on the x86 executor fold the next tile's pass 1 into this one's pass 2, a
  // row at a time: its rows come in from memory while this tile's outputs go out, instead of in
  // a read-only phase of its own that waited on them (~0.25 ns of ~1.1 per element).
  // Measured ~5% on 8192x28672 (A/B in one process, 12 pairs). Not for tall (channelwise)
  // tiles, both read from memory: folding the next 4096-column tile while this one is read again
  // was 3-4% slower on 8192x28672 (A/B in one process, 8 pairs each of bf16 and fp16).
  bool const pipeline = fast && prefetch && x86_16;
  int cur = 0;  // tile.keys[cur]: this tile's pass 1, when `have_keys`
  bool have_keys = false;
#else
  bool const fast = false;
  bool const pipeline = false;
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^
  for (index_t g = 0; g < k / gs; ++g) {
    index_t const r0 = g * gs;
    for (index_t c0 = 0; c0 < n; c0 += tc) {
      index_t const cn = std::min(tc, n - c0);
      // The next tile, when tiles fit in L2: the next columns of this group, or the first of the
      // next group.
      T const* const next = !prefetch   ? nullptr
                            : c0 + cn < n ? w.data + r0 * w.stride[0] + c0 + cn
                            : r0 + gs < k ? w.data + (r0 + gs) * w.stride[0]
                                          : nullptr;
      // Pass 1: NaN-propagating max/min down the group's rows.
      bool folded = false;
#if defined(QTL_QUANTIZE_X86_DISPATCH)
      if constexpr (x86_16) {
        if (have_keys) {
          x86::minmax_keys_finish(w.data + r0 * w.stride[0] + c0, w.stride[0], gs, cn, tile.keys[cur], mx, mn);
          folded = true;
        }
      }
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^
      if (!folded && !minmax_tile_dispatch(fast, w.data + r0 * w.stride[0] + c0, w.stride[0], gs, cn, mx, mn)) {
        T const* row = w.data + r0 * w.stride[0] + c0;
        for (index_t j = 0; j < cn; ++j) {
          mx[j] = load<T>(row[j]);
          mn[j] = mx[j];
        }
        for (index_t i = 1; i < gs; ++i) {
          row = w.data + (r0 + i) * w.stride[0] + c0;
          index_t j = 0;
          for (; j + block <= cn; j += block) {
            minmax_block<T, block>(row + j, mx + j, mn + j);
          }
          for (; j < cn; ++j) {
            minmax_block<T, 1>(row + j, mx + j, mn + j);
          }
        }
      }
      // Scales (and zero points) of this group's columns.
      T* s_out = out.w_s.data + g * out.w_s.stride[0] + c0;
      std::int32_t* zp_out = opt.zero_points ? out.w_zp.data + g * out.w_zp.stride[0] + c0 : nullptr;
      index_t j0 = 0;  // columns done by the vector executor
#if defined(QTL_QUANTIZE_X86_DISPATCH)
      if constexpr (x86_16) {
        if (fast) {
          j0 = x86::scales_avx2<T>(mx, mn, cn, r, opt.zero_points, sc, zp, s_out, zp_out);
        }
      }
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^
      if (opt.zero_points) {
        for (index_t j = j0; j < cn; ++j) {
          group_params const p = asymmetric_scale<T>(mx[j], mn[j], r);
          sc[j] = p.s;
          zp[j] = p.zp;
          s_out[j] = store<T>(p.s);
          zp_out[j] = static_cast<std::int32_t>(p.zp);
        }
      } else {
        for (index_t j = j0; j < cn; ++j) {
          group_params const p = symmetric_scale<T>(mx[j], mn[j], r);
          sc[j] = p.s;
          zp[j] = 0.0f;
          s_out[j] = store<T>(p.s);
        }
      }
#if defined(QTL_QUANTIZE_X86_DISPATCH)
      if constexpr (x86_16) {
        if (fast) {
          prepare_x86_tile<T, SmallCodes>(tile, cn, r, sc, zp, mx, opaque);
        }
      }
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^
      // Pass 1 of the next tile during this one's pass 2 (see `pipeline`): before row i of this
      // tile, row i - 1 of the next is folded and row i + 2 asked for, so that a fold never waits.
      index_t const next_cn = c0 + cn < n ? std::min(tc, n - c0 - cn) : std::min(tc, n);
      bool const fold = pipeline && next != nullptr;
      auto const fold_next = [&](index_t i) {
#if defined(QTL_QUANTIZE_X86_DISPATCH)
        if constexpr (x86_16) {
          constexpr index_t ahead = 2;
          if (i > 0) {
            x86::minmax_keys_row(next + (i - 1) * w.stride[0], i - 1, 0, next_cn / 16 * 16, tile.keys[cur ^ 1]);
          }
          for (index_t a = i == 0 ? 0 : i + ahead; a <= i + ahead && a < gs; ++a) {
            prefetch_row(next + a * w.stride[0], next_cn);
          }
        }
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^
        (void)i;
      };
      // Pass 2: codes and reference values.
      for (index_t i = 0; i < gs; ++i) {
        index_t const ri = r0 + i;
        index_t const ro = row_out ? row_out[ri] : ri;
        T const* in = w.data + ri * w.stride[0] + c0;
        std::int32_t* q_out = out.w_q.data + ro * out.w_q.stride[0] + c0;
        T* ref_out = out.w_ref.data + ro * out.w_ref.stride[0] + c0;
        if (fold) {
          fold_next(i);
        } else if (next != nullptr) {
          prefetch_row(next + i * w.stride[0], cn);  // the next tile is about as wide as this one
        } else if (i + 4 < gs) {
          prefetch_row(in + 4 * w.stride[0], cn);  // a tall tile, read again from memory: 4 rows ahead
        }
#if defined(QTL_QUANTIZE_X86_DISPATCH)
        if constexpr (x86_16) {
          if (fast) {
            if (after) {
              quantize_row_x86<T, SmallCodes, true>(tile, in, sc, zp, cn, r, opaque, q_out, ref_out);
            } else {
              quantize_row_x86<T, SmallCodes, false>(tile, in, sc, zp, cn, r, opaque, q_out, ref_out);
            }
            continue;
          }
        }
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^
        if (after) {
          quantize_row<T, SmallCodes, true>(in, sc, zp, cn, r, opaque, q_out, ref_out);
        } else {
          quantize_row<T, SmallCodes, false>(in, sc, zp, cn, r, opaque, q_out, ref_out);
        }
      }
      if (fold) {
        fold_next(gs);
      }
#if defined(QTL_QUANTIZE_X86_DISPATCH)
      have_keys = fold;
      cur ^= fold ? 1 : 0;
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^
    }
  }
#if defined(QTL_QUANTIZE_X86_DISPATCH)
  if (tile.stream) {
    _mm_sfence();  // order the non-temporal stores before whatever the caller does next
  }
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^
}

/// Host executor of ungrouped quantization (`group_size=None`).
template <class T>
void quantize_ungrouped_host(view2d<T const> w, quant_range r, view2d<float> w_ref, view2d<std::int32_t> w_q) {
  float const bias = static_cast<float>(r.bias);
  for (index_t i = 0; i < w.extent[0]; ++i) {
    T const* in = w.data + i * w.stride[0];
    float* ref_out = w_ref.data + i * w_ref.stride[0];
    std::int32_t* q_out = w_q.data + i * w_q.stride[0];
    for (index_t j = 0; j < w.extent[1]; ++j) {
      float const q = quantize_code_ungrouped(load<T>(in[j]), r);
      ref_out[j] = round_to<T>(q);  // (w_q - 0).to(T) * float32 [1.0]
      q_out[j] = static_cast<std::int32_t>(q + bias);
    }
  }
}



/// Runs the grouped or ungrouped executor after every argument check.
template <scalar_type Q, int G, class T, class R>
void quantize_weights_impl(view2d<T const> w, index_t group_size, bool ungrouped, quantize_outputs<R> out,
                           quantize_options opt, std::int32_t const* row_out) {
  constexpr char const* fn = "qtl::quantize_weights";
  constexpr quant_range r = quant_range_of(Q);
  index_t const k = w.extent[0];
  index_t const n = w.extent[1];
  check_2d(fn, "w", w, k, n);
  if (k <= 0) {
    throw shape_error(std::string(fn) + ": w has no rows (K = " + std::to_string(k) + ")");
  }
  if (opt.zero_points && (Q.is_signed || Q.max_int() <= 0)) {
    throw value_error(std::string(fn) + ": zero points need an unsigned type with a positive max; " +
                      std::string(Q.name().c_str()) + " is not");
  }
  if (ungrouped) {
    if (opt.zero_points) {
      throw value_error(std::string(fn) + ": zero points need a group size (-1 is channelwise)");
    }
    if constexpr (std::is_same_v<R, float>) {
      check_2d(fn, "w_ref", out.w_ref, k, n);
      check_2d(fn, "w_q", out.w_q, k, n);
      quantize_ungrouped_host<T>(w, r, out.w_ref, out.w_q);
    } else {
      throw value_error(std::string(fn) + ": without groups w_ref is float32 (torch promotes); pass float outputs");
    }
    return;
  }
  if constexpr (!std::is_same_v<R, T>) {
    throw value_error(std::string(fn) + ": with groups w_ref and w_s have the weight's dtype");
  } else {
    index_t const gs = effective_group_size(fn, group_size, k);
    check_2d(fn, "w_ref", out.w_ref, k, n);
    check_2d(fn, "w_q", out.w_q, k, n);
    check_2d(fn, "w_s", out.w_s, k / gs, n);
    if (opt.zero_points) {
      check_2d(fn, "w_zp", out.w_zp, k / gs, n);
    }
    quantize_grouped_host<T, G, (Q.size_bits() <= 8)>(w, gs, r, opt, out, row_out);
  }
}

}  // namespace detail::qnt

// ------------------------------------------------------------------------------------------------
// quantize_weights

/// Quantizes `w` (K, N) to `Q` with a compile-time group size `G` (32, 64, 128, any positive
/// size, `group_channelwise`, `group_none`) into caller-owned outputs, bit for bit as the
/// reference (see the file comment for the numerics and the defined edge cases).
/// `R` is T, or float when G is `group_none`.
/// @throws shape_error for output shapes, a G < K that does not divide K, K = 0;
///         value_error for zero points with a signed type or without groups.
template <scalar_type Q, int G, class W, class R>
void quantize_weights(view2d<W> w, quantize_outputs<R> out, quantize_options opt = {}) {
  using T = std::remove_const_t<W>;
  detail::qnt::check_quant_type<Q>();
  static_assert(weight_float<T>, "qtl::quantize_weights: w must be float, half_t or bfloat16_t");
  static_assert(is_valid_group_size_param(G) && G != group_dynamic,
                "qtl::quantize_weights: G must be positive, group_channelwise or group_none; "
                "pass a run-time group size to the overload that takes one");
  static_assert(std::is_same_v<R, std::conditional_t<G == group_none, float, T>>,
                "qtl::quantize_weights: outputs are of the weight's dtype, float32 when G is group_none");
  detail::qnt::quantize_weights_impl<Q, G>(detail::qnt::as_const(w), G, G == group_none, out, opt, nullptr);
}

/// As above with a run-time group size, the reference's `Optional[int]`: nullopt is None, -1 is
/// channelwise. 32, 64 and 128 run their compile-time instantiations, any other size (channelwise
/// included: K is a run-time value anyway) the run-time one.
template <scalar_type Q, class W, class R>
void quantize_weights(view2d<W> w, std::optional<index_t> group_size, quantize_outputs<R> out,
                      quantize_options opt = {}) {
  using T = std::remove_const_t<W>;
  detail::qnt::check_quant_type<Q>();
  static_assert(weight_float<T>, "qtl::quantize_weights: w must be float, half_t or bfloat16_t");
  auto const v = detail::qnt::as_const(w);
  if (!group_size) {
    detail::qnt::quantize_weights_impl<Q, group_none>(v, 0, true, out, opt, nullptr);
    return;
  }
  index_t const k = v.extent[0];
  index_t const g = *group_size;
  switch (is_channelwise_group_size(g, k) ? -1 : g) {
    case 32: detail::qnt::quantize_weights_impl<Q, 32>(v, g, false, out, opt, nullptr); break;
    case 64: detail::qnt::quantize_weights_impl<Q, 64>(v, g, false, out, opt, nullptr); break;
    case 128: detail::qnt::quantize_weights_impl<Q, 128>(v, g, false, out, opt, nullptr); break;
    default: detail::qnt::quantize_weights_impl<Q, group_dynamic>(v, g, false, out, opt, nullptr); break;
  }
}

/// Allocating form: returns w_ref, w_q, w_s (empty when G is group_none), w_zp (empty without
/// zero points), shaped as the reference returns them.
template <scalar_type Q, int G, class W>
auto quantize_weights(view2d<W> w, quantize_options opt = {}) {
  using T = std::remove_const_t<W>;
  using R = std::conditional_t<G == group_none, float, T>;
  index_t const k = w.extent[0];
  index_t const n = w.extent[1];
  index_t const gs = G == group_none ? k : detail::qnt::effective_group_size("qtl::quantize_weights", G, k);
  quantized_weights<R> res{host_tensor<R, 2>({k, n}), host_tensor<std::int32_t, 2>({k, n}),
                           host_tensor<R, 2>({G == group_none ? 0 : k / gs, n}),
                           host_tensor<std::int32_t, 2>({opt.zero_points ? k / gs : 0, n})};
  quantize_weights<Q, G>(w, res.views(), opt);
  return res;
}

// ------------------------------------------------------------------------------------------------
// Act-order: permute_rows, sort_weights, gptq_quantize_weights


/// A uniformly shuffled permutation of [0, K) from `seed`, written to `perm`: Fisher–Yates from
/// the last element down, j = ⌊u · (i + 1) / 2^64⌋ with u the next output of SplitMix64
/// (state += 0x9E3779B97F4A7C15, then the usual mix). Deterministic across platforms; it is not
/// torch.randperm's sequence, so golden cases pass their permutation explicitly.
inline void random_permutation(std::uint64_t seed, view1d<std::int64_t> perm) {
  index_t const k = perm.extent[0];
  for (index_t i = 0; i < k; ++i) {
    perm(i) = i;
  }
  std::uint64_t state = seed;
  for (index_t i = k - 1; i > 0; --i) {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    auto const j = static_cast<index_t>(detail::qnt::mul_hi(z, static_cast<std::uint64_t>(i + 1)));
    std::swap(perm(i), perm(j));
  }
}

namespace detail::qnt {

/// Throws unless `perm` is a permutation of [0, K) (the reference does not check; we must, to
/// stay in bounds).
template <class I>
void check_permutation(char const* fn, view1d<I> perm, index_t k, std::vector<bool>* seen_buf = nullptr) {
  check_1d(fn, "perm", perm, k);
  std::vector<bool> local;
  std::vector<bool>& seen = seen_buf ? *seen_buf : local;
  seen.assign(static_cast<std::size_t>(k), false);
  for (index_t i = 0; i < k; ++i) {
    auto const p = static_cast<index_t>(perm(i));
    if (p < 0 || p >= k || seen[static_cast<std::size_t>(p)]) {
      throw value_error(std::string(fn) + ": perm is not a permutation of [0, " + std::to_string(k) + "): entry " +
                        std::to_string(i) + " is " + std::to_string(p) + (p >= 0 && p < k ? " (repeated)" : ""));
    }
    seen[static_cast<std::size_t>(p)] = true;
  }
}


/// dst[i, :] = src[idx[i], :].
template <class S, class D, class I>
void gather_rows(view2d<S> src, view1d<I> idx, view2d<D> dst) {
  for (index_t i = 0; i < dst.extent[0]; ++i) {
    auto const* in = src.data + static_cast<index_t>(idx(i)) * src.stride[0];
    auto* out = dst.data + i * dst.stride[0];
    std::copy(in, in + dst.extent[1], out);
  }
}

}  // namespace detail::qnt

/// Caller-owned outputs of `permute_rows` (the reference's return order: w_ref first).
template <class T>
struct permute_rows_outputs {
  view2d<T> w_ref;                 ///< (K, N) w_ref[perm]
  view2d<std::int32_t> q_w;        ///< (K, N) q_w[perm]
  view1d<std::int32_t> g_idx;      ///< (K) (i // group_size)[perm], Python floor division
  view1d<std::int64_t> rand_perm;  ///< (K) perm
};

/// `permute_rows(q_w, w_ref, group_size, perm)`: the rows of q_w and w_ref in the order `perm`,
/// and g_idx[i] = perm[i] // group_size (floor division, so -1 gives -perm[i] as the
/// reference). Scales are not permuted. @throws value_error when perm is not a permutation of
/// [0, K) or group_size is 0; shape_error for shapes.
template <class QW, class WR, class P, class T>
void permute_rows(view2d<QW> q_w, view2d<WR> w_ref, index_t group_size, view1d<P> perm, permute_rows_outputs<T> out) {
  constexpr char const* fn = "qtl::permute_rows";
  index_t const k = q_w.extent[0];
  index_t const n = q_w.extent[1];
  detail::qnt::check_2d(fn, "w_ref", w_ref, k, n);
  detail::qnt::check_2d(fn, "out.w_ref", out.w_ref, k, n);
  detail::qnt::check_2d(fn, "out.q_w", out.q_w, k, n);
  detail::qnt::check_1d(fn, "out.g_idx", out.g_idx, k);
  detail::qnt::check_1d(fn, "out.rand_perm", out.rand_perm, k);
  if (group_size == 0) {
    throw value_error(std::string(fn) + ": group_size is 0");
  }
  detail::qnt::check_permutation(fn, perm, k);
  detail::qnt::gather_rows(w_ref, perm, out.w_ref);
  detail::qnt::gather_rows(q_w, perm, out.q_w);
  for (index_t i = 0; i < k; ++i) {
    auto const p = static_cast<std::int64_t>(perm(i));
    out.g_idx(i) = static_cast<std::int32_t>(detail::qnt::floor_div(p, group_size));
    out.rand_perm(i) = p;
  }
}

/// Caller-owned outputs of `sort_weights`.
struct sort_weights_outputs {
  view2d<std::int32_t> q_w;           ///< (K, N) q_w[sort_indices]
  view1d<std::int32_t> g_idx;         ///< (K) g_idx[sort_indices], non-decreasing
  view1d<std::int32_t> sort_indices;  ///< (K) the stable argsort of g_idx
};

/// `sort_weights(q_w, g_idx)`: rows ordered by g_idx with a **stable** sort (ties keep their
/// input order; torch's argsort is unstable, so the reference's order within a group is
/// unspecified). @throws shape_error for shapes.
template <class QW, class GI>
void sort_weights(view2d<QW> q_w, view1d<GI> g_idx, sort_weights_outputs out) {
  constexpr char const* fn = "qtl::sort_weights";
  index_t const k = q_w.extent[0];
  index_t const n = q_w.extent[1];
  detail::qnt::check_1d(fn, "g_idx", g_idx, k);
  detail::qnt::check_2d(fn, "out.q_w", out.q_w, k, n);
  detail::qnt::check_1d(fn, "out.g_idx", out.g_idx, k);
  detail::qnt::check_1d(fn, "out.sort_indices", out.sort_indices, k);
  std::int32_t* si = out.sort_indices.data;
  index_t const ss = out.sort_indices.stride[0];
  for (index_t i = 0; i < k; ++i) {
    si[i * ss] = static_cast<std::int32_t>(i);
  }
  if (ss == 1) {
    std::stable_sort(si, si + k, [&](std::int32_t a, std::int32_t b) { return g_idx(a) < g_idx(b); });
  } else {
    std::vector<std::int32_t> tmp(si == nullptr ? 0 : static_cast<std::size_t>(k));
    for (index_t i = 0; i < k; ++i) {
      tmp[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
    }
    std::stable_sort(tmp.begin(), tmp.end(), [&](std::int32_t a, std::int32_t b) { return g_idx(a) < g_idx(b); });
    for (index_t i = 0; i < k; ++i) {
      si[i * ss] = tmp[static_cast<std::size_t>(i)];
    }
  }
  detail::qnt::gather_rows(q_w, out.sort_indices, out.q_w);
  for (index_t i = 0; i < k; ++i) {
    out.g_idx(i) = static_cast<std::int32_t>(g_idx(out.sort_indices(i)));
  }
}

/// Options of `gptq_quantize_weights`.
struct gptq_options {
  bool act_order = false;                      ///< permute rows (GPTQ's desc_act)
  std::optional<view1d<std::int64_t const>> perm;  ///< the permutation (the reference's test_perm)
  std::uint64_t seed = 0;                      ///< without perm: `random_permutation(seed, ...)`
};

/// Caller-owned outputs of `gptq_quantize_weights`.
template <class T>
struct gptq_outputs {
  view2d<T> w_ref;                 ///< (K, N), rows permuted with act-order
  view2d<std::int32_t> w_q;        ///< (K, N), rows permuted with act-order
  view2d<T> w_s;                   ///< (K/G, N), never permuted
  view1d<std::int32_t> g_idx;      ///< (K) with act-order, else (0)
  view1d<std::int64_t> rand_perm;  ///< (K) with act-order, else (0)
};

namespace detail::qnt {

template <scalar_type Q, int G, class T>
void gptq_impl(view2d<T const> w, index_t group_size, gptq_options const& opt, gptq_outputs<T> out) {
  constexpr char const* fn = "qtl::gptq_quantize_weights";
  index_t const k = w.extent[0];
  if (group_size > std::numeric_limits<int>::max() ||
      !(is_gptq_group_size(static_cast<int>(group_size)) || group_size == k)) {
    throw unsupported_error(std::string(fn) + ": group_size " + std::to_string(group_size) +
                            " is not supported (-1, 32, 64, 128 or K = " + std::to_string(k) + ")");
  }
  quantize_outputs<T> qo{out.w_ref, out.w_q, out.w_s, {}};
  if (!opt.act_order) {
    check_1d(fn, "g_idx", out.g_idx, 0);
    check_1d(fn, "rand_perm", out.rand_perm, 0);
    quantize_weights_impl<Q, G>(w, group_size, false, qo, {}, nullptr);
    return;
  }
  if (is_channelwise_group_size(group_size, k)) {
    throw value_error(std::string(fn) + ": act_order needs group_size < K (got " + std::to_string(group_size) +
                      ", K = " + std::to_string(k) + "); with one group per column it has no effect");
  }
  check_1d(fn, "g_idx", out.g_idx, k);
  check_1d(fn, "rand_perm", out.rand_perm, k);
  if (opt.perm) {
    check_permutation(fn, *opt.perm, k);
    for (index_t i = 0; i < k; ++i) {
      out.rand_perm(i) = (*opt.perm)(i);
    }
  } else {
    random_permutation(opt.seed, out.rand_perm);
  }
  // g_idx first holds the inverse permutation, so that quantization writes row r straight to
  // its permuted place (no scratch buffer); then its final values.
  for (index_t i = 0; i < k; ++i) {
    out.g_idx(out.rand_perm(i)) = static_cast<std::int32_t>(i);
  }
  std::vector<std::int32_t> inv;
  std::int32_t const* row_out = out.g_idx.data;
  if (out.g_idx.stride[0] != 1) {
    inv.resize(static_cast<std::size_t>(k));
    for (index_t i = 0; i < k; ++i) {
      inv[static_cast<std::size_t>(i)] = out.g_idx(i);
    }
    row_out = inv.data();
  }
  quantize_weights_impl<Q, G>(w, group_size, false, qo, {}, row_out);
  for (index_t i = 0; i < k; ++i) {
    out.g_idx(i) = static_cast<std::int32_t>(floor_div(out.rand_perm(i), group_size));
  }
}

}  // namespace detail::qnt

/// `gptq_quantize_weights` with compile-time Q (uint4b8 or uint8b128) and G (-1, 32, 64, 128):
/// symmetric quantization, then with act-order the rows of w_ref and w_q permuted by
/// `opt.perm` (validated) or by `random_permutation(opt.seed)`, g_idx = perm // G.
/// @throws value_error for act-order with channelwise groups or a bad perm; shape_error for shapes.
template <scalar_type Q, int G, class W>
void gptq_quantize_weights(view2d<W> w, gptq_outputs<std::remove_const_t<W>> out, gptq_options const& opt = {}) {
  static_assert(is_gptq_quant_type(Q), "qtl::gptq_quantize_weights: Q must be uint4b8 or uint8b128");
  static_assert(is_gptq_group_size(G),
                "qtl::gptq_quantize_weights: G must be -1, 32, 64 or 128 (use the run-time overload for G = K)");
  detail::qnt::gptq_impl<Q, G>(detail::qnt::as_const(w), G, opt, out);
}

/// As above with a run-time group size (-1, 32, 64, 128 or K).
/// @throws unsupported_error for any other group size.
template <scalar_type Q, class W>
void gptq_quantize_weights(view2d<W> w, index_t group_size, gptq_outputs<std::remove_const_t<W>> out,
                           gptq_options const& opt = {}) {
  static_assert(is_gptq_quant_type(Q), "qtl::gptq_quantize_weights: Q must be uint4b8 or uint8b128");
  auto const v = detail::qnt::as_const(w);
  index_t const k = v.extent[0];
  switch (is_channelwise_group_size(group_size, k) ? -1 : group_size) {
    case 32: detail::qnt::gptq_impl<Q, 32>(v, group_size, opt, out); break;
    case 64: detail::qnt::gptq_impl<Q, 64>(v, group_size, opt, out); break;
    case 128: detail::qnt::gptq_impl<Q, 128>(v, group_size, opt, out); break;
    default: detail::qnt::gptq_impl<Q, group_dynamic>(v, group_size, opt, out); break;
  }
}

// ------------------------------------------------------------------------------------------------
// per_tensor_dequantize, convert_to_channelwise, all_close_1d

/// `per_tensor_dequantize(tensor, inv_scale)`: `tensor.to(float16) * inv_scale`. With a half_t
/// output: the scale is a Python float or 0-dim tensor, the product is rounded to fp16 (overflow
/// to Inf). With a float output: the scale is a 1-element tensor, and torch promotes to float32.
template <class T, class O>
void per_tensor_dequantize(view2d<T> tensor, float inv_scale, view2d<O> out) {
  static_assert(std::is_same_v<O, half_t> || std::is_same_v<O, float>,
                "qtl::per_tensor_dequantize: the output is half_t (scalar scale) or float (1-element scale)");
  detail::qnt::check_2d("qtl::per_tensor_dequantize", "out", out, tensor.extent[0], tensor.extent[1]);
  for (index_t i = 0; i < tensor.extent[0]; ++i) {
    for (index_t j = 0; j < tensor.extent[1]; ++j) {
      if constexpr (std::is_same_v<O, half_t>) {
        out(i, j) = per_tensor_dequantize_element(tensor(i, j), inv_scale);
      } else {
        out(i, j) = per_tensor_dequantize_element_f32(tensor(i, j), inv_scale);
      }
    }
  }
}

/// `convert_to_channelwise(weight_scale, logical_widths)` for a 1-D scale: out (Σ widths, 1)
/// float32 with rows [start, start + w) = weight_scale[idx]. Extra scales are ignored, as in the
/// reference. @throws shape_error when there are fewer scales than widths or out is mis-shaped;
/// value_error for a negative width.
template <class S>
void convert_to_channelwise(view1d<S> weight_scale, std::span<index_t const> logical_widths, view2d<float> out) {
  constexpr char const* fn = "qtl::convert_to_channelwise";
  index_t total = 0;
  for (index_t w : logical_widths) {
    if (w < 0) {
      throw value_error(std::string(fn) + ": negative logical width " + std::to_string(w));
    }
    total += w;
  }
  if (static_cast<index_t>(logical_widths.size()) > weight_scale.extent[0]) {
    throw shape_error(std::string(fn) + ": " + std::to_string(logical_widths.size()) + " logical widths but only " +
                      std::to_string(weight_scale.extent[0]) + " scales");
  }
  detail::qnt::check_2d(fn, "out", out, total, 1);
  index_t start = 0;
  for (std::size_t idx = 0; idx < logical_widths.size(); ++idx) {
    float const s = detail::qnt::load<std::remove_const_t<S>>(weight_scale(static_cast<index_t>(idx)));
    for (index_t r = 0; r < logical_widths[idx]; ++r) {
      out(start + r, 0) = s;
    }
    start += logical_widths[idx];
  }
}
/// `convert_to_channelwise` for a 0-dim scale: every row is `weight_scale`.
inline void convert_to_channelwise(float weight_scale, std::span<index_t const> logical_widths, view2d<float> out) {
  float const one[1] = {weight_scale};
  std::vector<index_t> widths(logical_widths.begin(), logical_widths.end());
  index_t total = 0;
  for (index_t w : logical_widths) {
    if (w < 0) {
      throw value_error("qtl::convert_to_channelwise: negative logical width " + std::to_string(w));
    }
    total += w;
  }
  index_t const single[1] = {total};
  convert_to_channelwise(make_view(one, 1), std::span<index_t const>(single), out);
}
/// Allocating forms of `convert_to_channelwise`.
template <class S>
host_tensor<float, 2> convert_to_channelwise(view1d<S> weight_scale, std::span<index_t const> logical_widths) {
  index_t total = 0;
  for (index_t w : logical_widths) {
    total += w < 0 ? 0 : w;
  }
  host_tensor<float, 2> out({total, 1});
  convert_to_channelwise(weight_scale, logical_widths, out.view());
  return out;
}
inline host_tensor<float, 2> convert_to_channelwise(float weight_scale, std::span<index_t const> logical_widths) {
  index_t total = 0;
  for (index_t w : logical_widths) {
    total += w < 0 ? 0 : w;
  }
  host_tensor<float, 2> out({total, 1});
  convert_to_channelwise(weight_scale, logical_widths, out.view());
  return out;
}

/// `all_close_1d(x)`: every element is torch.allclose to x[0] (tolerance relative to the other
/// element). Empty is true; any NaN is false; Inf equals Inf.
template <class X>
bool all_close_1d(view1d<X> x) {
  using T = std::remove_const_t<X>;
  std::uint32_t const opaque = detail::qnt::opaque_zero();
  for (index_t i = 0; i < x.extent[0]; ++i) {
    if (!torch_isclose<T>(x(0), x(i), opaque)) {
      return false;
    }
  }
  return true;
}

}  // namespace qtl
