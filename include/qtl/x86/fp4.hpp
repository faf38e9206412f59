#pragma once
/// \file
/// The x86 executors of block-scaled quantization (`qtl/fp4.hpp` calls them through the entry
/// points `detail::fp4_x86` at the end, which choose by the CPU and `qtl::x86::level_cap()`;
/// where `QTL_X86` is 0 they do nothing and the portable loops do everything): 4 blocks at a time,
/// their max, scale codes and output scales in SSE2 lanes; the element codes in SSE2, or by an
/// AVX2 executor (float and bf16); bf16 rows of 16- or 32-element blocks by an AVX-512 executor,
/// 16 blocks a step (scales of a chunk first, then its elements, E2M1 by a table). Every executor
/// does the element functions' integer and IEEE steps (`qtl/element/fp4.hpp`) and is tested equal
/// to them (test/unit/fp4_x86_test.cpp, test/unit/fp4_test.cpp).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <qtl/element/fp4.hpp>
#include <qtl/x86/fp8.hpp>
#include <qtl/x86/isa.hpp>

namespace qtl::detail {

#if QTL_X86
// E2M1 codes of 4 lanes (the SSE2 form of `e2m1_encode`: the same threshold compares on the bits
// of |x|, a true compare being -1; tested equal on every float exponent and rounding boundary).
inline __m128i e2m1_encode4(__m128 v) {
  auto const c32 = [](std::uint32_t x) { return _mm_set1_epi32(static_cast<int>(x)); };
  __m128i const bits = _mm_castps_si128(v);
  __m128i const a = _mm_and_si128(bits, c32(0x7fffffffu));
  __m128i code = _mm_setzero_si128();
#  pragma GCC unroll 7
  for (int k = 0; k < 7; ++k) {
    code = _mm_sub_epi32(code, _mm_cmpgt_epi32(a, c32(e2m1_threshold(k))));
  }
  code = _mm_or_si128(code, _mm_and_si128(_mm_srli_epi32(bits, 28), c32(0x8u)));
  __m128i const nan = _mm_cmpgt_epi32(a, c32(0x7f800000u));
  return _mm_or_si128(_mm_andnot_si128(nan, code), _mm_and_si128(nan, c32(0x7u)));
}
// max |x| (NaN ignored, as `row_amax_bits`) of the 4 consecutive blocks at `x`, one per float
// lane. bf16 in SSE2: 8 lanes of 16-bit |x| per block, then a transposing reduction
//
//     acc0..3 (8 lanes each) -> ab = a b a b a b a b -> abcd = a b c d a b c d -> lanes 0-3
//
// other inputs through the scalar reduction.
template <class F, class T>
inline __m128 block_vmax4(T const* x) {
  if constexpr (std::is_same_v<T, bfloat16_t> && F::block_size % 8 == 0) {
    __m128i const abs_mask = _mm_set1_epi16(0x7fff);
    __m128i const inf = _mm_set1_epi16(static_cast<short>(input_bits<T>::inf));
    __m128i acc[4];
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm_setzero_si128();
      for (int j = 0; j < F::block_size; j += 8) {
        __m128i const a =
            _mm_and_si128(_mm_loadu_si128(reinterpret_cast<__m128i const*>(x + k * F::block_size + j)), abs_mask);
        acc[k] = _mm_max_epi16(acc[k], _mm_andnot_si128(_mm_cmpgt_epi16(a, inf), a));  // NaN -> 0
      }
    }
    __m128i const ab = _mm_max_epi16(_mm_unpacklo_epi16(acc[0], acc[1]), _mm_unpackhi_epi16(acc[0], acc[1]));
    __m128i const cd = _mm_max_epi16(_mm_unpacklo_epi16(acc[2], acc[3]), _mm_unpackhi_epi16(acc[2], acc[3]));
    __m128i abcd = _mm_max_epi16(_mm_unpacklo_epi32(ab, cd), _mm_unpackhi_epi32(ab, cd));
    abcd = _mm_max_epi16(abcd, _mm_srli_si128(abcd, 8));
    return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), abcd));  // bf16 bits -> float
  } else {
    auto const vmax = [x](int k) { return amax_value<T>(row_amax_bits(x + k * F::block_size, F::block_size)); };
    return _mm_setr_ps(vmax(0), vmax(1), vmax(2), vmax(3));
  }
}

// `block_scale_code` (int32 lanes) and `block_output_scale` of 4 blocks from their `vmax`: the
// same integer and IEEE steps on 4 lanes (tested equal on every bf16 vmax). `inv_gs` is
// `div_rn(1, global_scale)`.
template <class F>
inline void block_scales4(__m128 vmax, float global_scale, float inv_gs, __m128i& codes, __m128& os) {
  auto const c32 = [](std::uint32_t x) { return _mm_set1_epi32(static_cast<int>(x)); };
  __m128 const unit = _mm_div_ps(vmax, _mm_set1_ps(F::element_max));
  if constexpr (F::has_global_scale) {
    // sf = e4m3_rne(min(gs * unit, 448)); os = sf == 0 ? 0 : 1 / (float(sf) * (1 / gs))
    codes = fp8_encode4<float8_e4m3fn_t, fp8_nan::to_max>(_mm_mul_ps(_mm_set1_ps(global_scale), unit));
    __m128i const e = _mm_and_si128(_mm_srli_epi32(codes, 3), c32(0xFu));
    __m128i const m = _mm_and_si128(codes, c32(0x7u));
    __m128 const normal =
        _mm_castsi128_ps(_mm_or_si128(_mm_slli_epi32(_mm_add_epi32(e, c32(120u)), 23), _mm_slli_epi32(m, 20)));
    __m128 const subnormal = _mm_mul_ps(_mm_cvtepi32_ps(m), _mm_set1_ps(0x1p-9f));  // exact
    __m128 const is_subnormal = _mm_castsi128_ps(_mm_cmpeq_epi32(e, _mm_setzero_si128()));
    __m128 const sf = _mm_or_ps(_mm_and_ps(is_subnormal, subnormal), _mm_andnot_ps(is_subnormal, normal));
    __m128 const r = _mm_div_ps(_mm_set1_ps(1.0f), _mm_mul_ps(sf, _mm_set1_ps(inv_gs)));
    os = _mm_andnot_ps(_mm_cmpeq_ps(sf, _mm_setzero_ps()), r);
  } else if constexpr (F::e8m0_scales) {
    // e8m0 rounded up, satfinite: the exponent, +1 if any fraction bit is set (a subnormal unit:
    // if the fraction exceeds 2^22), 255 -> 254. `unit` is >= 0 and not NaN.
    (void)global_scale;
    (void)inv_gs;
    __m128i const bits = _mm_castps_si128(unit);
    __m128i const e = _mm_srli_epi32(bits, 23);
    __m128i const frac = _mm_and_si128(bits, c32(0x7fffffu));
    __m128i const limit = _mm_andnot_si128(_mm_cmpgt_epi32(e, _mm_setzero_si128()), c32(0x400000u));
    __m128i code = _mm_sub_epi32(e, _mm_cmpgt_epi32(frac, limit));
    code = _mm_add_epi32(code, _mm_cmpgt_epi32(code, c32(254u)));  // 255 -> 254
    codes = code;
    // os = vmax == 0 ? 0 : 2^(127 - code), 2^-127 (subnormal) for code 254
    __m128i const ee = _mm_sub_epi32(c32(254u), code);
    __m128i const r =
        _mm_or_si128(_mm_slli_epi32(ee, 23), _mm_and_si128(_mm_cmpeq_epi32(ee, _mm_setzero_si128()), c32(0x00400000u)));
    os = _mm_andnot_ps(_mm_cmpeq_ps(vmax, _mm_setzero_ps()), _mm_castsi128_ps(r));
  } else {
    static_assert(qtl::detail::no_block_rule<F>, "qtl x86 block executor: no rule for this scale type");
  }
}

// `block_codes`'s SSE2 form (float and bf16, blocks of a multiple of 8); false where it does not
// apply.
template <class F, class T>
bool block_codes_sse2(T const* x, typename F::element* o, float os) {
  if constexpr ((std::is_same_v<T, float> || std::is_same_v<T, bfloat16_t>)&&F::block_size % 8 == 0) {
    __m128 const vos = _mm_set1_ps(os);
    for (int j = 0; j < F::block_size; j += 8) {
      __m128 lo;
      __m128 hi;
      if constexpr (std::is_same_v<T, float>) {
        lo = _mm_loadu_ps(x + j);
        hi = _mm_loadu_ps(x + j + 4);
      } else {
        __m128i const raw = _mm_loadu_si128(reinterpret_cast<__m128i const*>(x + j));
        lo = _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), raw));
        hi = _mm_castsi128_ps(_mm_unpackhi_epi16(_mm_setzero_si128(), raw));
      }
      lo = _mm_mul_ps(lo, vos);
      hi = _mm_mul_ps(hi, vos);
      if constexpr (F::e2m1_elements) {
        // 8 codes as int16 [c0 .. c7]; each int32 lane holds c_even | c_odd << 16 -> one byte
        __m128i const pairs = _mm_packs_epi32(e2m1_encode4(lo), e2m1_encode4(hi));
        __m128i const bytes32 = _mm_or_si128(_mm_and_si128(pairs, _mm_set1_epi32(0xF)),
                                             _mm_and_si128(_mm_srli_epi32(pairs, 12), _mm_set1_epi32(0xF0)));
        __m128i const bytes = _mm_packus_epi16(_mm_packs_epi32(bytes32, _mm_setzero_si128()), _mm_setzero_si128());
        int const four = _mm_cvtsi128_si32(bytes);
        std::memcpy(o + j / 2, &four, 4);
      } else if constexpr (F::e4m3_elements) {
        __m128i const c = _mm_packs_epi32(fp8_encode4<float8_e4m3fn_t, fp8_nan::to_max>(lo),
                                          fp8_encode4<float8_e4m3fn_t, fp8_nan::to_max>(hi));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(o + j), _mm_packus_epi16(c, _mm_setzero_si128()));
      } else {
        static_assert(qtl::detail::no_block_rule<F>, "qtl x86 block executor: no rule for this element type");
      }
    }
    return true;
  }
  (void)x, (void)o, (void)os;
  return false;
}

namespace x86 {
// `e2m1_encode4` on 8 lanes.
QTL_X86_AVX2 inline __m256i e2m1_encode8(__m256 v) {
  __m256i const bits = _mm256_castps_si256(v);
  __m256i const a = _mm256_and_si256(bits, c32(0x7fffffffu));
  __m256i code = _mm256_setzero_si256();
#  pragma GCC unroll 7
  for (int k = 0; k < 7; ++k) {
    code = _mm256_sub_epi32(code, _mm256_cmpgt_epi32(a, c32(e2m1_threshold(k))));
  }
  code = _mm256_or_si256(code, _mm256_and_si256(_mm256_srli_epi32(bits, 28), c32(0x8u)));
  __m256i const nan = _mm256_cmpgt_epi32(a, c32(0x7f800000u));
  return _mm256_blendv_epi8(code, c32(0x7u), nan);
}

// The E2M1 codes of one block, 16 elements a step, in nibble pairs (`block_codes`).
template <class F, class T>
QTL_X86_AVX2 void e2m1_block_codes_avx2(T const* x, float4_e2m1x2_t* o, float os) {
  static_assert(F::block_size % 16 == 0);
  __m256 const vos = _mm256_set1_ps(os);
  for (int j = 0; j < F::block_size; j += 16) {
    __m256i const c0 = e2m1_encode8(_mm256_mul_ps(load8(x + j), vos));
    __m256i const c1 = e2m1_encode8(_mm256_mul_ps(load8(x + j + 8), vos));
    // int16 [c0 .. c15] (see quantize_row_avx2); each int32 lane c_even | c_odd << 16 -> one byte
    __m256i const w = _mm256_permute4x64_epi64(_mm256_packs_epi32(c0, c1), 0xD8);
    __m256i const b32 =
        _mm256_or_si256(_mm256_and_si256(w, c32(0xFu)), _mm256_and_si256(_mm256_srli_epi32(w, 12), c32(0xF0u)));
    __m128i const b16 = _mm_packs_epi32(_mm256_castsi256_si128(b32), _mm256_extracti128_si256(b32, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(o + j / 2), _mm_packus_epi16(b16, b16));
  }
}

// AVX-512 executor for bf16 input (see qtl/fp8.hpp's), 16 blocks of 16 or 32 elements a step.
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic push
#    pragma GCC diagnostic ignored "-Wuninitialized"  // see qtl/fp8.hpp
#    pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#  endif  // ^^^ g++ ^^^

// E2M1 codes by table: |x| rounded to odd at 3 mantissa bits (bits 19-0 ORed into bit 20) keeps
// every rounding decision of E2M1's 1-bit grid (round-to-odd with 2 extra bits, then RNE, is
// RNE), and after the clamp to 6 the exponent (124..129, below: code 0, saturating) and those 3
// bits are a 6-bit index:
//
//   float  s eeeeeeee mmm|mmmmmmmmmmmmmmmmmmmm  ->  16-bit  s eeeeeeee mmm' ....  ->  index
//                       m20' = m20 | (bits 19-0 != 0)                 (e - 124) * 8 + mmm'
//
// entry i is `e2m1_encode` of the float with that exponent and mantissa (tested on every input).
struct e2m1_table {
  alignas(64) std::uint8_t code[64] = {};
  constexpr e2m1_table() {
    for (std::uint32_t i = 0; i < 48; ++i) {
      code[i] = e2m1_encode(bits_to_float((i + 124u * 8u) << 20));
    }
  }
};
inline constexpr e2m1_table e2m1_by_index{};

// The E2M1 codes of 32 scaled elements given as `even` (elements 2j) and `odd` (2j+1): dword j
// is code(2j) | code(2j+1) << 16. The index math runs on 16-bit words (the floats' high halves
// after the rounding to odd), 32 at a time; NaN -> 7 (+6), as `e2m1_encode`.
QTL_X86_AVX512_VBMI inline __m512i e2m1_encode32(__m512 even, __m512 odd) {
  __m512i e = _mm512_castps_si512(even);
  __m512i o = _mm512_castps_si512(odd);
  e = _mm512_mask_or_epi32(e, _mm512_test_epi32_mask(e, z32(0xfffffu)), e, z32(1u << 20));
  o = _mm512_mask_or_epi32(o, _mm512_test_epi32_mask(o, z32(0xfffffu)), o, z32(1u << 20));
  __m512i const w = _mm512_ternarylogic_epi32(_mm512_srli_epi32(e, 16), o, z32(0xffff0000u), 0xF8);  // A|(B&C)
  __m512i const mag = _mm512_and_si512(w, _mm512_set1_epi16(0x7fff));
  __mmask32 const nan = _mm512_cmpgt_epu16_mask(mag, _mm512_set1_epi16(0x7f80));
  __m512i const clamped = _mm512_min_epu16(mag, _mm512_set1_epi16(0x40C0));  // bf16 6.0
  __m512i const idx = _mm512_subs_epu16(_mm512_srli_epi16(clamped, 4), _mm512_set1_epi16(124 << 3));
  // index bytes <= 44, high bytes 0 -> entry 0 (code 0): each word is its code
  __m512i const code = _mm512_permutexvar_epi8(idx, _mm512_load_si512(e2m1_by_index.code));
  __m512i const signed_code = _mm512_ternarylogic_epi32(code, _mm512_srli_epi16(w, 12), _mm512_set1_epi16(0x8), 0xF8);
  return _mm512_mask_mov_epi16(signed_code, nan, _mm512_set1_epi16(0x7));
}

// `block_scales4` on 16 lanes.
template <class F>
QTL_X86_AVX512_VBMI inline void block_scales16(__m512 vmax, float global_scale, float inv_gs, __m512i& codes,
                                               __m512& os) {
  __m512 const unit = _mm512_div_ps(vmax, _mm512_set1_ps(F::element_max));
  if constexpr (F::has_global_scale) {
    codes = fp8_encode16<float8_e4m3fn_t, fp8_nan::to_max>(_mm512_mul_ps(_mm512_set1_ps(global_scale), unit));
    // float(sf): the code shifted left by 7 is the fp16 of sf * 2^-8 (exponent bias 15 = 7 + 8,
    // subnormals included), converted exactly, times 2^8
    __m512 const sf =
        _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_slli_epi32(codes, 7))), _mm512_set1_ps(256.0f));
    __m512 const r = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(sf, _mm512_set1_ps(inv_gs)));
    os = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(sf, _mm512_setzero_ps(), _CMP_EQ_OQ), _mm512_setzero_ps());
  } else if constexpr (F::e8m0_scales) {
    (void)global_scale;
    (void)inv_gs;
    __m512i const bits = _mm512_castps_si512(unit);
    __m512i const e = _mm512_srli_epi32(bits, 23);
    __m512i const frac = _mm512_and_si512(bits, z32(0x7fffffu));
    __m512i const limit = _mm512_maskz_mov_epi32(_mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()), z32(0x400000u));
    __m512i code = _mm512_mask_add_epi32(e, _mm512_cmpgt_epu32_mask(frac, limit), e, z32(1u));
    code = _mm512_min_epu32(code, z32(254u));  // codes reach 255 at most: 255 -> 254
    codes = code;
    __m512i const ee = _mm512_sub_epi32(z32(254u), code);
    __m512i const r = _mm512_mask_mov_epi32(_mm512_slli_epi32(ee, 23),
                                            _mm512_cmpeq_epi32_mask(ee, _mm512_setzero_si512()), z32(0x00400000u));
    os = _mm512_mask_mov_ps(_mm512_castsi512_ps(r), _mm512_cmp_ps_mask(vmax, _mm512_setzero_ps(), _CMP_EQ_OQ),
                            _mm512_setzero_ps());
  } else {
    static_assert(qtl::detail::no_block_rule<F>, "qtl x86 block executor: no rule for this scale type");
  }
}

// The element codes of 16 blocks of bf16 at `x` under their output scales `os` (lane k: block
// k), stored at `o`. Each 32-element vector w is split into even and odd elements (lane j:
// elements 2j, 2j+1, of block (32w + 2j) / B), scaled by their block's `os` (a `vpermps`), and
// the two codes meet in one byte (E2M1: odd << 4 | even) or one word (E4M3: odd << 8 | even).
// `prefetch` (optional): 16 blocks read next, one line per step.
template <class F>
QTL_X86_AVX512_VBMI inline void block_elements16_avx512(bfloat16_t const* x, typename F::element* o, __m512 os,
                                                        bfloat16_t const* prefetch) {
  constexpr int B = F::block_size;
  alignas(64) std::int32_t base[16];
  for (int j = 0; j < 16; ++j) {
    base[j] = 2 * j / B;
  }
  __m512i idx = _mm512_load_si512(base);
  for (int w = 0; w < B / 2; ++w) {
    if (prefetch != nullptr) {
      _mm_prefetch(reinterpret_cast<char const*>(prefetch + 32 * w), _MM_HINT_T0);
    }
    __m512 even;
    __m512 odd;
    load_bf16_pairs(x + 32 * w, even, odd);
    __m512 const s = _mm512_permutexvar_ps(idx, os);
    idx = _mm512_add_epi32(idx, z32(32u / B));
    even = _mm512_mul_ps(even, s);
    odd = _mm512_mul_ps(odd, s);
    if constexpr (F::e2m1_elements) {
      __m512i const c = e2m1_encode32(even, odd);  // code(2j) | code(2j+1) << 16: byte c | c >> 12
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 16 * w),
                       _mm512_cvtepi32_epi8(_mm512_or_si512(c, _mm512_srli_epi32(c, 12))));
    } else if constexpr (F::e4m3_elements) {
      // (the odd codes in a variable of their own: at -O0 GCC's _mm512_slli_epi32 is a macro,
      // and the template argument list's comma would split its arguments)
      __m512i const odd_codes = fp8_encode16<float8_e4m3fn_t, fp8_nan::to_max>(odd);
      __m512i const c =
          _mm512_or_si512(fp8_encode16<float8_e4m3fn_t, fp8_nan::to_max>(even), _mm512_slli_epi32(odd_codes, 8));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32 * w), _mm512_cvtepi32_epi16(c));
    } else {
      static_assert(qtl::detail::no_block_rule<F>, "qtl x86 block executor: no rule for this element type");
    }
  }
}

// The first `kb - kb % 16` blocks of row `m` of `block_quantize` (values at `out`, scale bytes at
// their `Layout` offsets); returns how many. In chunks of up to 256 blocks (at most 16 KiB of
// input, which stays in L1): first the scales of the chunk, 16 blocks a step, then its elements.
// The two passes keep the long dependency chain of a scale (max, division, encode, division)
// out of the element loop, so that both loops overlap their iterations; the element loop
// prefetches the next chunk (of `next_row`, when given, after the last), whose scale pass would
// otherwise wait on memory. Scale bytes go out in runs that the layout keeps contiguous (all 16
// when a tile is one row, else `tile_cols`).
template <class F, class Layout>
QTL_X86_AVX512_VBMI index_t block_quantize_row_avx512(bfloat16_t const* row, typename F::element* out, index_t kb,
                                                      index_t m, index_t padded_cols, typename F::scale* scales,
                                                      float global_scale, float inv_gs, bfloat16_t const* next_row) {
  constexpr int run = Layout::tile_rows == 1 || Layout::tile_cols % 16 == 0 ? 16
                      : 16 % Layout::tile_cols == 0                         ? Layout::tile_cols
                                                                            : 1;
  constexpr index_t chunk = 256;
  constexpr index_t values_per_block = F::block_size / F::elements_per_value;
  index_t const end = kb - kb % 16;
  alignas(64) float os[chunk];
  for (index_t b0 = 0; b0 < end; b0 += chunk) {
    index_t const n = end - b0 < chunk ? end - b0 : chunk;
    for (index_t g = 0; g < n; g += 16) {
      index_t const b = b0 + g;
      __m512i codes;
      __m512 s;
      block_scales16<F>(block_vmax16_bf16<F::block_size>(row + b * F::block_size), global_scale, inv_gs, codes, s);
      _mm512_store_ps(os + g, s);
      alignas(16) std::uint8_t sc[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(sc), _mm512_cvtepi32_epi8(codes));
      for (int k = 0; k < 16; k += run) {
        std::memcpy(scales + blockscale_offset<Layout>(m, b + k, padded_cols), sc + k, run);
      }
    }
    // the next chunk: the rest of this row's 16-block steps, or the next row's first ones
    bfloat16_t const* next = b0 + chunk < end ? row + (b0 + chunk) * F::block_size : next_row;
    index_t const next_blocks = b0 + chunk < end ? end - (b0 + chunk) : end;
    for (index_t g = 0; g < n; g += 16) {
      index_t const b = b0 + g;
      bfloat16_t const* pf = next != nullptr && g < next_blocks ? next + g * F::block_size : nullptr;
      block_elements16_avx512<F>(row + b * F::block_size, out + b * values_per_block, _mm512_load_ps(os + g), pf);
    }
  }
  return end;
}

// Whether the 16 32-element bf16 blocks at `x` hold a NaN or an infinity (|x| bits >= 0x7F80).
QTL_X86_AVX512_VBMI inline bool ct_mx_step_nonfinite(bfloat16_t const* x) {
  __m512i top = _mm512_setzero_si512();
  for (int v = 0; v < 16; ++v) {
    top = _mm512_max_epu16(top, _mm512_and_si512(_mm512_loadu_si512(x + 32 * v), _mm512_set1_epi16(0x7fff)));
  }
  return _mm512_cmpge_epu16_mask(top, _mm512_set1_epi16(0x7f80)) != 0;
}

// `ct_mx_scale_code<bfloat16_t>(amax, Offset)` of 16 finite block maxima (float lanes, as
// `block_vmax16_bf16` gives them) and their output scales `os` = `e8m0_reciprocal(c)`: with t =
// the max's exponent field + 1 when its significand is >= 1.75, c = max(t - Offset, 0), but 254
// for t = 255; os = 2^(127 - c), 2^-127 (subnormal) for c = 254.
template <int Offset>
QTL_X86_AVX512_VBMI inline __m512i ct_mx_codes16(__m512 vmax, __m512& os) {
  __m512i const bits = _mm512_castps_si512(vmax);
  __m512i const up =
      _mm512_maskz_mov_epi32(_mm512_cmpge_epu32_mask(_mm512_and_si512(bits, z32(0x7fffffu)), z32(0x600000u)), z32(1u));
  __m512i const t = _mm512_add_epi32(_mm512_srli_epi32(bits, 23), up);
  __m512i code = _mm512_max_epi32(_mm512_sub_epi32(t, z32(Offset)), _mm512_setzero_si512());
  code = _mm512_mask_mov_epi32(code, _mm512_cmpeq_epi32_mask(t, z32(255u)), z32(254u));
  __m512i const e = _mm512_sub_epi32(z32(254u), code);
  os = _mm512_castsi512_ps(_mm512_mask_mov_epi32(_mm512_slli_epi32(e, 23),
                                                 _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()), z32(0x00400000u)));
  return code;
}

// compressed-tensors' MXFP4 (`Out` = float4_e2m1x2_t, `qtl::ct_mxfp4_quantize`) or MXFP8 (`Out` =
// float8_e4m3fn_t, `qtl::ct_mxfp8_quantize`) of the first `kb - kb % 16` 32-element blocks of one
// bf16 row, 16 blocks a step, up to the first step that holds a NaN or an infinity (the portable
// loop refuses or quantizes it); returns how many blocks it did. A step's scale codes are
// `ct_mx_codes16` of its block maxima (E2M1's offset 2, E4M3's 8), its elements under their os:
// MXFP4 by `block_elements16_avx512<mxfp4>` (the -0 codes of elements that underflow bf16 stay for
// the caller's `clear_zero_codes`); MXFP8 `fp8_saturate_encode<e4m3, propagate>(x * os)`, 16 at a
// time in the row's order (the sign of a product that underflows stays, as the portable loop's).
template <class Out>
QTL_X86_AVX512_VBMI inline index_t ct_mx_row_avx512(bfloat16_t const* row, Out* out, std::uint8_t* scales, index_t kb) {
  constexpr bool fp4 = std::is_same_v<Out, float4_e2m1x2_t>;
  static_assert(fp4 || std::is_same_v<Out, float8_e4m3fn_t>, "qtl: MXFP4 or MXFP8 elements");
  constexpr int scale_offset = fp4 ? 2 : 8;  // floor(log2) of the element type's largest value
  index_t const end = kb - kb % 16;
  for (index_t b = 0; b < end; b += 16) {
    bfloat16_t const* const x = row + b * 32;
    if (ct_mx_step_nonfinite(x)) {
      return b;
    }
    __m512 os;
    __m512i const code = ct_mx_codes16<scale_offset>(block_vmax16_bf16<32>(x), os);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(scales + b), _mm512_cvtepi32_epi8(code));
    if constexpr (fp4) {
      block_elements16_avx512<mxfp4>(x, out + b * 16, os, b + 16 < end ? x + 512 : nullptr);
    } else {
      alignas(64) float s[16];
      _mm512_store_ps(s, os);
      for (int h = 0; h < 32; ++h) {  // 16 elements a step: block h / 2
        __m512i const raw = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<__m256i const*>(x + 16 * h)));
        __m512 const v = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(raw, 16)), _mm512_set1_ps(s[h / 2]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + b * 32 + 16 * h),
                         _mm512_cvtepi32_epi8(fp8_encode16<float8_e4m3fn_t, fp8_nan::propagate>(v)));
      }
    }
  }
  return end;
}
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic pop
#  endif  // ^^^ g++ ^^^
}  // namespace x86

#endif  // ^^^ QTL_X86 ^^^

/// The entry points of qtl/fp4.hpp's loops: the one place that chooses an x86 executor.
namespace fp4_x86 {

/// The element codes of one block by an x86 executor (AVX2 where `avx2`, else SSE2); false when
/// none takes it (then the portable loop does).
template <class F, class T>
bool block_codes([[maybe_unused]] bool avx2, [[maybe_unused]] T const* x, [[maybe_unused]] typename F::element* o,
                 [[maybe_unused]] float os) {
#if QTL_X86
  if constexpr (F::e2m1_elements && F::block_size % 16 == 0 &&
                (std::is_same_v<T, float> || std::is_same_v<T, bfloat16_t>)) {
    if (avx2) {
      x86::e2m1_block_codes_avx2<F>(x, o, os);
      return true;
    }
  }
  if (qtl::x86::level_cap() >= qtl::x86::level::sse2) {
    return block_codes_sse2<F>(x, o, os);
  }
#endif  // ^^^ QTL_X86 ^^^
  return false;
}

/// The leading blocks of row `i` of `block_quantize` an x86 executor takes: bf16 rows of 16- or
/// 32-element blocks on AVX-512, 16 blocks a step, then 4 blocks at a time with their scales in
/// SSE2 lanes and their codes by `codes(x, o, os)` (the caller's `block_codes_dispatch`). Writes
/// their scale bytes and values; returns how many blocks it did.
template <class F, class Layout, class T, class Codes>
index_t block_quantize_row([[maybe_unused]] T const* row, [[maybe_unused]] typename F::element* out,
                           [[maybe_unused]] index_t kb, [[maybe_unused]] index_t i,
                           [[maybe_unused]] index_t padded_cols, [[maybe_unused]] typename F::scale* scales,
                           [[maybe_unused]] float global_scale, [[maybe_unused]] float inv_gs,
                           [[maybe_unused]] T const* next_row, [[maybe_unused]] Codes const& codes) {
  index_t b = 0;
#if QTL_X86
  constexpr index_t values_per_block = F::block_size / F::elements_per_value;
  if constexpr (std::is_same_v<T, bfloat16_t> && (F::block_size == 16 || F::block_size == 32)) {
    if (x86::fp8_has_avx512()) {  // 16 blocks at a time
      b = x86::block_quantize_row_avx512<F, Layout>(row, out, kb, i, padded_cols, scales, global_scale, inv_gs,
                                                    next_row);
    }
  }
  if (qtl::x86::level_cap() < qtl::x86::level::sse2) {
    return b;
  }
  for (; b < kb - kb % 4; b += 4) {
    __m128i code4;
    __m128 os4;
    block_scales4<F>(block_vmax4<F>(row + b * F::block_size), global_scale, inv_gs, code4, os4);
    alignas(16) std::int32_t code[4];
    alignas(16) float scale[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(code), code4);
    _mm_store_ps(scale, os4);
    for (index_t k = 0; k < 4; ++k) {
      scales[blockscale_offset<Layout>(i, b + k, padded_cols)].bits = static_cast<std::uint8_t>(code[k]);
      codes(row + (b + k) * F::block_size, out + (b + k) * values_per_block, scale[k]);
    }
  }
#endif  // ^^^ QTL_X86 ^^^
  return b;
}

/// The leading blocks of a bf16 row of `ct_mxfp4_quantize` (`Out` = float4_e2m1x2_t) or
/// `ct_mxfp8_quantize` (float8_e4m3fn_t) an x86 executor takes (AVX-512, 16 blocks a step, up to a
/// step holding NaN or Inf: `x86::ct_mx_row_avx512`); returns how many.
template <class Out>
index_t ct_mx_row([[maybe_unused]] bfloat16_t const* row, [[maybe_unused]] Out* out,
                  [[maybe_unused]] std::uint8_t* scales, [[maybe_unused]] index_t kb) {
#if QTL_X86
  if (x86::fp8_has_avx512()) {
    return x86::ct_mx_row_avx512(row, out, scales, kb);
  }
#endif  // ^^^ QTL_X86 ^^^
  return 0;
}

}  // namespace fp4_x86

}  // namespace qtl::detail
