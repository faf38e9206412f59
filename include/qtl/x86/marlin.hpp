#pragma once
/// \file
/// The x86 executors of the 4-bit A16 Marlin fast paths (qtl/marlin.hpp): the same words as the
/// portable loops of `qtl::marlin::detail` (`repack4_a16_tile_row_portable`,
/// `awq4_tile_row_portable`, `awq4_unband_portable`), 4 (SSE2) or 8 (AVX2) words at a time. SSE2 is
/// the x86-64 baseline; the AVX2 functions carry `target("avx2")` and run where `marlin_level()`
/// says so (the CPU has AVX2 and `qtl::x86::level_cap()` allows it). They exist where `QTL_X86` is
/// 1 (`qtl/x86/isa.hpp`: not with `QTL_NO_SIMD`, where the portable loops run).
///
/// Tile, per tile, for warp w and columns c = 16w + cc (cc = 0..3, then 4..7), from the GPTQ words
/// A = row0[c], B = row1[c], C = row0[c+8], D = row1[c+8] (4 per register):
///   x  = lo nibbles of A | lo of B << 4     y  = hi nibbles of A | hi of B << 4   (per byte)
///   x2, y2 the same of C and D
///   unpack bytes (x, x2) and (y, y2), then 16-bit units ((x x2), (y y2)):
///     one register per cc holding words l = 0..3 = bytes [x_l, x2_l, y_l, y2_l]
///   a 4x4 transpose of the 32-bit words of warps 0..3 puts words (cc, l, w = 0..3) side by side:
///     out[16cc + 4l .. 16cc + 4l + 3], one store.
/// AVX2 loads cc = 0..7 at once: the unpacks work per 128-bit lane, so the low lane does
/// cc = 0..3 and the high lane cc = 4..7, and two 128-bit lane swaps pair each output's halves.
///
/// AWQ tile (`awq4_tile_row`): one 8x8 nibble transpose per 8 output words; the lanes are the
/// warps w (SSE2: w = 0..3 of one l; AVX2: of two l), each register one slot t of the output, taken
/// from the even or odd AWQ words of a row (`shuffle_ps`).

#include <cstdint>

#include <qtl/view.hpp>

#include <qtl/x86/isa.hpp>

namespace qtl::x86::marlin {

#if QTL_X86

// AWQ's in-word order (qtl/element/marlin.hpp `awq_column<4>`): slot i holds column 8c + this[i].
inline constexpr int awq_column_of_slot[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// An 8x8 transpose of the nibbles of v[0..7], lane by lane (`transpose_nibbles_8x8` of
// qtl/marlin.hpp on 4 lanes).
inline void transpose_nibbles_8x8_sse2(__m128i (&v)[8]) {
  __m128i const m16 = _mm_set1_epi32(0x0000ffff), m8 = _mm_set1_epi32(0x00ff00ff), m4 = _mm_set1_epi32(0x0f0f0f0f);
  for (int i = 0; i < 4; ++i) {
    __m128i const t = _mm_and_si128(_mm_xor_si128(_mm_srli_epi32(v[i], 16), v[i + 4]), m16);
    v[i + 4] = _mm_xor_si128(v[i + 4], t);
    v[i] = _mm_xor_si128(v[i], _mm_slli_epi32(t, 16));
  }
  for (int i : {0, 1, 4, 5}) {
    __m128i const t = _mm_and_si128(_mm_xor_si128(_mm_srli_epi32(v[i], 8), v[i + 2]), m8);
    v[i + 2] = _mm_xor_si128(v[i + 2], t);
    v[i] = _mm_xor_si128(v[i], _mm_slli_epi32(t, 8));
  }
  for (int i : {0, 2, 4, 6}) {
    __m128i const t = _mm_and_si128(_mm_xor_si128(_mm_srli_epi32(v[i], 4), v[i + 1]), m4);
    v[i + 1] = _mm_xor_si128(v[i + 1], t);
    v[i] = _mm_xor_si128(v[i], _mm_slli_epi32(t, 4));
  }
}

/// `ncols` (a multiple of 64) columns of the packed rows row0 (k 0..7) and row1 (k 8..15) -> the
/// ncols/64 consecutive A16 4-bit Marlin tiles at `out`.
inline void repack4_a16_tile_row(std::int32_t const* row0, std::int32_t const* row1, index_t ncols,
                                 std::int32_t* out) {
  __m128i const lo = _mm_set1_epi32(0x0f0f0f0f);
  __m128i const hi = _mm_set1_epi32(static_cast<int>(0xf0f0f0f0u));
  auto const load = [](std::int32_t const* p) { return _mm_loadu_si128(reinterpret_cast<__m128i const*>(p)); };
  for (index_t n0 = 0; n0 < ncols; n0 += 64, out += 128) {
    __m128i v[4][8];  // [warp][cc]: words l = 0..3 of (cc, warp)
    for (int warp = 0; warp < 4; ++warp) {
      for (int half = 0; half < 2; ++half) {
        index_t const c = n0 + 16 * warp + 4 * half;
        __m128i const a = load(row0 + c), b = load(row1 + c), cw = load(row0 + c + 8), d = load(row1 + c + 8);
        __m128i const x = _mm_or_si128(_mm_and_si128(a, lo), _mm_slli_epi32(_mm_and_si128(b, lo), 4));
        __m128i const y = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(a, 4), lo), _mm_and_si128(b, hi));
        __m128i const x2 = _mm_or_si128(_mm_and_si128(cw, lo), _mm_slli_epi32(_mm_and_si128(d, lo), 4));
        __m128i const y2 = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(cw, 4), lo), _mm_and_si128(d, hi));
        __m128i const x01 = _mm_unpacklo_epi8(x, x2), x23 = _mm_unpackhi_epi8(x, x2);
        __m128i const y01 = _mm_unpacklo_epi8(y, y2), y23 = _mm_unpackhi_epi8(y, y2);
        v[warp][4 * half + 0] = _mm_unpacklo_epi16(x01, y01);
        v[warp][4 * half + 1] = _mm_unpackhi_epi16(x01, y01);
        v[warp][4 * half + 2] = _mm_unpacklo_epi16(x23, y23);
        v[warp][4 * half + 3] = _mm_unpackhi_epi16(x23, y23);
      }
    }
    for (int cc = 0; cc < 8; ++cc) {
      __m128i const t0 = _mm_unpacklo_epi32(v[0][cc], v[1][cc]);  // l0: w0 w1, l1: w0 w1
      __m128i const t1 = _mm_unpacklo_epi32(v[2][cc], v[3][cc]);  // l0: w2 w3, l1: w2 w3
      __m128i const t2 = _mm_unpackhi_epi32(v[0][cc], v[1][cc]);  // l2, l3 of w0 w1
      __m128i const t3 = _mm_unpackhi_epi32(v[2][cc], v[3][cc]);  // l2, l3 of w2 w3
      auto* const o = reinterpret_cast<__m128i*>(out + 16 * cc);
      _mm_storeu_si128(o + 0, _mm_unpacklo_epi64(t0, t1));
      _mm_storeu_si128(o + 1, _mm_unpackhi_epi64(t0, t1));
      _mm_storeu_si128(o + 2, _mm_unpacklo_epi64(t2, t3));
      _mm_storeu_si128(o + 3, _mm_unpackhi_epi64(t2, t3));
    }
  }
}

// -------------------------------------------------------------------------------------------------
// AVX2
// -------------------------------------------------------------------------------------------------

/// The executor the Marlin fast paths run: AVX2 where the CPU has it, else SSE2, capped by
/// `qtl::x86::level_cap()` (`portable`: the portable loops).
inline level marlin_level() { return capped(cpu().avx2 ? level::avx2 : level::sse2); }

/// `repack4_a16_tile_row` on 8 columns per register.
QTL_X86_AVX2 inline void repack4_a16_tile_row_avx2(std::int32_t const* row0, std::int32_t const* row1, index_t ncols,
                                                   std::int32_t* out) {
  __m256i const lo = _mm256_set1_epi32(0x0f0f0f0f);
  __m256i const hi = _mm256_set1_epi32(static_cast<int>(0xf0f0f0f0u));
  for (index_t n0 = 0; n0 < ncols; n0 += 64, out += 128) {
    __m256i v[4][4];  // [warp][q]: words l = 0..3 of (cc = q, warp) low, of (cc = q + 4, warp) high
    for (int warp = 0; warp < 4; ++warp) {
      index_t const c = n0 + 16 * warp;
      __m256i const a = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(row0 + c));
      __m256i const b = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(row1 + c));
      __m256i const cw = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(row0 + c + 8));
      __m256i const d = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(row1 + c + 8));
      __m256i const x = _mm256_or_si256(_mm256_and_si256(a, lo), _mm256_slli_epi32(_mm256_and_si256(b, lo), 4));
      __m256i const y = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a, 4), lo), _mm256_and_si256(b, hi));
      __m256i const x2 = _mm256_or_si256(_mm256_and_si256(cw, lo), _mm256_slli_epi32(_mm256_and_si256(d, lo), 4));
      __m256i const y2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(cw, 4), lo), _mm256_and_si256(d, hi));
      __m256i const x01 = _mm256_unpacklo_epi8(x, x2), x23 = _mm256_unpackhi_epi8(x, x2);
      __m256i const y01 = _mm256_unpacklo_epi8(y, y2), y23 = _mm256_unpackhi_epi8(y, y2);
      v[warp][0] = _mm256_unpacklo_epi16(x01, y01);
      v[warp][1] = _mm256_unpackhi_epi16(x01, y01);
      v[warp][2] = _mm256_unpacklo_epi16(x23, y23);
      v[warp][3] = _mm256_unpackhi_epi16(x23, y23);
    }
    for (int q = 0; q < 4; ++q) {
      __m256i const t0 = _mm256_unpacklo_epi32(v[0][q], v[1][q]);
      __m256i const t1 = _mm256_unpacklo_epi32(v[2][q], v[3][q]);
      __m256i const t2 = _mm256_unpackhi_epi32(v[0][q], v[1][q]);
      __m256i const t3 = _mm256_unpackhi_epi32(v[2][q], v[3][q]);
      __m256i const r0 = _mm256_unpacklo_epi64(t0, t1);  // out[16cc + 0..3], cc = q (low), q + 4 (high)
      __m256i const r1 = _mm256_unpackhi_epi64(t0, t1);  // out[16cc + 4..7]
      __m256i const r2 = _mm256_unpacklo_epi64(t2, t3);  // out[16cc + 8..11]
      __m256i const r3 = _mm256_unpackhi_epi64(t2, t3);  // out[16cc + 12..15]
      auto* const o = reinterpret_cast<__m256i*>(out + 16 * q);
      auto* const o4 = reinterpret_cast<__m256i*>(out + 16 * (q + 4));
      _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(r0, r1, 0x20));
      _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(r2, r3, 0x20));
      _mm256_storeu_si256(o4 + 0, _mm256_permute2x128_si256(r0, r1, 0x31));
      _mm256_storeu_si256(o4 + 1, _mm256_permute2x128_si256(r2, r3, 0x31));
    }
  }
}

// An 8x8 transpose of the nibbles of v[0..7], lane by lane: afterwards nibble j of v[i] is what
// nibble i of v[j] was (`transpose_nibbles_8x8` of qtl/marlin.hpp on 8 lanes).
QTL_X86_AVX2 inline void transpose_nibbles_8x8_avx2(__m256i (&v)[8]) {
  __m256i const m16 = _mm256_set1_epi32(0x0000ffff), m8 = _mm256_set1_epi32(0x00ff00ff);
  __m256i const m4 = _mm256_set1_epi32(0x0f0f0f0f);
  for (int i = 0; i < 4; ++i) {
    __m256i const t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi32(v[i], 16), v[i + 4]), m16);
    v[i + 4] = _mm256_xor_si256(v[i + 4], t);
    v[i] = _mm256_xor_si256(v[i], _mm256_slli_epi32(t, 16));
  }
  for (int i : {0, 1, 4, 5}) {
    __m256i const t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi32(v[i], 8), v[i + 2]), m8);
    v[i + 2] = _mm256_xor_si256(v[i + 2], t);
    v[i] = _mm256_xor_si256(v[i], _mm256_slli_epi32(t, 8));
  }
  for (int i : {0, 2, 4, 6}) {
    __m256i const t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi32(v[i], 4), v[i + 1]), m4);
    v[i + 1] = _mm256_xor_si256(v[i + 1], t);
    v[i] = _mm256_xor_si256(v[i], _mm256_slli_epi32(t, 4));
  }
}

// An 8x8 transpose of 32-bit words: afterwards lane l of u[i] is what lane i of u[l] was.
QTL_X86_AVX2 inline void transpose_words_8x8_avx2(__m256i (&u)[8]) {
  __m256i const t0 = _mm256_unpacklo_epi32(u[0], u[1]), t1 = _mm256_unpackhi_epi32(u[0], u[1]);
  __m256i const t2 = _mm256_unpacklo_epi32(u[2], u[3]), t3 = _mm256_unpackhi_epi32(u[2], u[3]);
  __m256i const t4 = _mm256_unpacklo_epi32(u[4], u[5]), t5 = _mm256_unpackhi_epi32(u[4], u[5]);
  __m256i const t6 = _mm256_unpacklo_epi32(u[6], u[7]), t7 = _mm256_unpackhi_epi32(u[6], u[7]);
  // s[l % 4]: lanes l (low half) and l + 4 (high half) of u[0..3] (s0-s3) or of u[4..7] (s4-s7)
  __m256i const s0 = _mm256_unpacklo_epi64(t0, t2), s1 = _mm256_unpackhi_epi64(t0, t2);
  __m256i const s2 = _mm256_unpacklo_epi64(t1, t3), s3 = _mm256_unpackhi_epi64(t1, t3);
  __m256i const s4 = _mm256_unpacklo_epi64(t4, t6), s5 = _mm256_unpackhi_epi64(t4, t6);
  __m256i const s6 = _mm256_unpacklo_epi64(t5, t7), s7 = _mm256_unpackhi_epi64(t5, t7);
  u[0] = _mm256_permute2x128_si256(s0, s4, 0x20);
  u[1] = _mm256_permute2x128_si256(s1, s5, 0x20);
  u[2] = _mm256_permute2x128_si256(s2, s6, 0x20);
  u[3] = _mm256_permute2x128_si256(s3, s7, 0x20);
  u[4] = _mm256_permute2x128_si256(s0, s4, 0x31);
  u[5] = _mm256_permute2x128_si256(s1, s5, 0x31);
  u[6] = _mm256_permute2x128_si256(s2, s6, 0x31);
  u[7] = _mm256_permute2x128_si256(s3, s7, 0x31);
}

/// `awq4_unband` (qtl/marlin.hpp) on 8 word columns per register (`count` a multiple
/// of 8): the 8x8 word transpose brings column m of 8 column groups into one register, the AWQ
/// order picks the registers, and the nibble transpose makes the 8 rows' AWQ words.
QTL_X86_AVX2 inline void awq4_unband_avx2(std::int32_t const* band, index_t count, std::int32_t* const (&rows)[8]) {
  for (index_t c = 0; c < count; c += 8, band += 64) {
    __m256i u[8];
    for (int l = 0; l < 8; ++l) u[l] = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(band + 8 * l));
    transpose_words_8x8_avx2(u);  // u[m] lane l = the GPTQ word of column 8(c + l) + m
    __m256i v[8] = {u[0], u[2], u[4], u[6], u[1], u[3], u[5], u[7]};  // v[i] = column awq_column(i)
    transpose_nibbles_8x8_avx2(v);  // v[j] lane l = nibble j of every v[i]: row j's AWQ word c + l
    for (int j = 0; j < 8; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows[j] + c), v[j]);
  }
}

/// `awq4_tile_row` (qtl/marlin.hpp) on SSE2: one register per (row, half a tile), lanes w = 0..3.
inline void awq4_tile_row(std::int32_t const* const (&rows)[16], index_t ncols, std::int32_t* out) {
  constexpr int row_of[2][8] = {{0, 8, 0, 8, 1, 9, 1, 9}, {0, 0, 1, 1, 0, 0, 1, 1}};  // row - 2l, group parity
  for (index_t n0 = 0; n0 < ncols; n0 += 64, out += 128) {
    index_t const c = n0 / 8;
    for (int l = 0; l < 4; ++l) {
      __m128i v[8];
      for (int t = 0; t < 8; ++t) {
        std::int32_t const* const r = rows[2 * l + row_of[0][t]] + c;
        __m128 const lo = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<__m128i const*>(r)));
        __m128 const hi = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<__m128i const*>(r + 4)));
        v[t] = _mm_castps_si128(row_of[1][t] == 0 ? _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))
                                                  : _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
      }
      transpose_nibbles_8x8_sse2(v);
      for (int i = 0; i < 8; ++i) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16 * awq_column_of_slot[i] + 4 * l), v[i]);
      }
    }
  }
}

/// `awq4_tile_row` on AVX2: lanes (l, w) for two l at once, the 8 output words of one cc side by side.
QTL_X86_AVX2 inline void awq4_tile_row_avx2(std::int32_t const* const (&rows)[16], index_t ncols, std::int32_t* out) {
  constexpr int row_of[2][8] = {{0, 8, 0, 8, 1, 9, 1, 9}, {0, 0, 1, 1, 0, 0, 1, 1}};  // row - 2l, group parity
  for (index_t n0 = 0; n0 < ncols; n0 += 64, out += 128) {
    index_t const c = n0 / 8;
    for (int a = 0; a < 4; a += 2) {
      __m256i v[8];
      for (int t = 0; t < 8; ++t) {
        // lanes [(a, w0) (a, w1) (a+1, w0) (a+1, w1) | (a, w2) (a, w3) (a+1, w2) (a+1, w3)]
        __m256 const x = _mm256_castsi256_ps(
            _mm256_loadu_si256(reinterpret_cast<__m256i const*>(rows[2 * a + row_of[0][t]] + c)));
        __m256 const y = _mm256_castsi256_ps(
            _mm256_loadu_si256(reinterpret_cast<__m256i const*>(rows[2 * a + 2 + row_of[0][t]] + c)));
        v[t] = _mm256_castps_si256(row_of[1][t] == 0 ? _mm256_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0))
                                                     : _mm256_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
      }
      transpose_nibbles_8x8_avx2(v);
      for (int i = 0; i < 8; ++i) {
        // 64-bit units [(a, w0 w1), (a+1, w0 w1), (a, w2 w3), (a+1, w2 w3)] -> out[16cc + 4a .. + 7]
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * awq_column_of_slot[i] + 4 * a),
                            _mm256_permute4x64_epi64(v[i], 0xD8));
      }
    }
  }
}

#endif  // ^^^ QTL_X86 ^^^

}  // namespace qtl::x86::marlin
