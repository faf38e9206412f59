#pragma once
/// \file
/// The SSE2 executor of the 4-bit A16 Marlin tile (qtl/marlin.hpp's fast paths): the same words as
/// the portable `qtl::marlin::detail::repack4_a16_tile_row_portable`, four at a time. SSE2 is the
/// x86-64 baseline, so no CPU check is needed; it exists where `QTL_X86` is 1 (`qtl/x86/isa.hpp`:
/// not with `QTL_NO_SIMD`, where the portable loop runs).
///
/// Per tile, for warp w and columns c = 16w + cc (cc = 0..3, then 4..7), from the GPTQ words
/// A = row0[c], B = row1[c], C = row0[c+8], D = row1[c+8] (4 per register):
///   x  = lo nibbles of A | lo of B << 4     y  = hi nibbles of A | hi of B << 4   (per byte)
///   x2, y2 the same of C and D
///   unpack bytes (x, x2) and (y, y2), then 16-bit units ((x x2), (y y2)):
///     one register per cc holding words l = 0..3 = bytes [x_l, x2_l, y_l, y2_l]
///   a 4x4 transpose of the 32-bit words of warps 0..3 puts words (cc, l, w = 0..3) side by side:
///     out[16cc + 4l .. 16cc + 4l + 3], one store.

#include <cstdint>

#include <qtl/view.hpp>

#include <qtl/x86/isa.hpp>

namespace qtl::x86::marlin {

#if QTL_X86

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

/// AWQ -> GPTQ packing of 8 rows: `rows[j]` points at AWQ word column c0 of row k0 + j; for each of
/// `count` (a multiple of 4) word columns c, band[8(c - c0) + m] gets the GPTQ word of column
/// 8c + m (nibble j = row k0 + j). Four columns at a time: the 8x8 nibble transpose of the
/// portable loop on 4 lanes, then two 4x4 word transposes put each column's 8 words side by side.
inline void awq4_band(std::int32_t const* const (&rows)[8], index_t count, std::int32_t* band) {
  auto const load = [](std::int32_t const* p) { return _mm_loadu_si128(reinterpret_cast<__m128i const*>(p)); };
  auto const swap = [](__m128i& a, __m128i& b, int shift, __m128i mask) {
    __m128i const t = _mm_and_si128(_mm_xor_si128(_mm_srl_epi32(a, _mm_cvtsi32_si128(shift)), b), mask);
    b = _mm_xor_si128(b, t);
    a = _mm_xor_si128(a, _mm_sll_epi32(t, _mm_cvtsi32_si128(shift)));
  };
  __m128i const m16 = _mm_set1_epi32(0x0000ffff), m8 = _mm_set1_epi32(0x00ff00ff), m4 = _mm_set1_epi32(0x0f0f0f0f);
  for (index_t c = 0; c < count; c += 4, band += 32) {
    __m128i v[8];
    for (int j = 0; j < 8; ++j) v[j] = load(rows[j] + c);
    for (int i = 0; i < 4; ++i) swap(v[i], v[i + 4], 16, m16);
    for (int i : {0, 1, 4, 5}) swap(v[i], v[i + 2], 8, m8);
    for (int i : {0, 2, 4, 6}) swap(v[i], v[i + 1], 4, m4);
    // v[i] lane l = the GPTQ word of column 8(c + l) + {0,2,4,6,1,3,5,7}[i]; column m sits in
    // v[{0,4,1,5,2,6,3,7}[m]].
    __m128i const* const by_col[2][4] = {{&v[0], &v[4], &v[1], &v[5]}, {&v[2], &v[6], &v[3], &v[7]}};
    for (int h = 0; h < 2; ++h) {
      __m128i const t0 = _mm_unpacklo_epi32(*by_col[h][0], *by_col[h][1]);
      __m128i const t1 = _mm_unpacklo_epi32(*by_col[h][2], *by_col[h][3]);
      __m128i const t2 = _mm_unpackhi_epi32(*by_col[h][0], *by_col[h][1]);
      __m128i const t3 = _mm_unpackhi_epi32(*by_col[h][2], *by_col[h][3]);
      auto* const o = reinterpret_cast<__m128i*>(band + 4 * h);
      _mm_storeu_si128(o + 0, _mm_unpacklo_epi64(t0, t1));  // lane 0: columns 4h .. 4h+3
      _mm_storeu_si128(o + 2, _mm_unpackhi_epi64(t0, t1));  // lane 1 (8 words further)
      _mm_storeu_si128(o + 4, _mm_unpacklo_epi64(t2, t3));  // lane 2
      _mm_storeu_si128(o + 6, _mm_unpackhi_epi64(t2, t3));  // lane 3
    }
  }
}

#endif  // ^^^ QTL_X86 ^^^

}  // namespace qtl::x86::marlin
