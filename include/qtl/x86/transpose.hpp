#pragma once
/// \file
/// The x86 executor of `qtl::transpose` (`qtl/transpose.hpp`): 2-byte elements in 8x8 blocks of
/// SSE2 registers (three rounds of interleaves). The entry point `detail::tr::transpose_blocks_x86`
/// does nothing where `QTL_X86` is 0 or `qtl::x86::level_cap()` is `portable` (then the scalar
/// tiles do everything); the bytes are the same either way (test/unit/transpose_test.cpp).

#include <cstdint>

#include <qtl/view.hpp>
#include <qtl/x86/isa.hpp>

namespace qtl::detail::tr {

#if QTL_X86
/// Rows a[0..7] of 8 16-bit lanes become columns: a[i] lane j ↔ a[j] lane i. Each round
/// interleaves pairs at twice the width (16, 32, then 64 bits).
inline void transpose8x8_epi16(__m128i a[8]) {
  __m128i t[8];
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm_unpacklo_epi16(a[2 * i], a[2 * i + 1]);      // a0[0] a1[0] a0[1] a1[1] ...
    t[4 + i] = _mm_unpackhi_epi16(a[2 * i], a[2 * i + 1]);  // a0[4] a1[4] a0[5] a1[5] ...
  }
  __m128i u[8];
  for (int h = 0; h < 2; ++h) {  // h: columns 0-3 (t[0..3]) or 4-7 (t[4..7])
    __m128i const* s = t + 4 * h;
    u[4 * h + 0] = _mm_unpacklo_epi32(s[0], s[1]);  // rows 0-3 of columns 4h, 4h+1
    u[4 * h + 1] = _mm_unpackhi_epi32(s[0], s[1]);  // rows 0-3 of columns 4h+2, 4h+3
    u[4 * h + 2] = _mm_unpacklo_epi32(s[2], s[3]);  // rows 4-7 of columns 4h, 4h+1
    u[4 * h + 3] = _mm_unpackhi_epi32(s[2], s[3]);  // rows 4-7 of columns 4h+2, 4h+3
  }
  for (int h = 0; h < 2; ++h) {
    a[4 * h + 0] = _mm_unpacklo_epi64(u[4 * h + 0], u[4 * h + 2]);
    a[4 * h + 1] = _mm_unpackhi_epi64(u[4 * h + 0], u[4 * h + 2]);
    a[4 * h + 2] = _mm_unpacklo_epi64(u[4 * h + 1], u[4 * h + 3]);
    a[4 * h + 3] = _mm_unpackhi_epi64(u[4 * h + 1], u[4 * h + 3]);
  }
}
#endif  // ^^^ QTL_X86 ^^^

/// The whole 8x8 blocks of `in` (rows [0, r8), columns [0, c8), set here) into `out`, for 2-byte
/// elements; r8 = c8 = 0 when no x86 executor takes them.
template <class T>
void transpose_blocks_x86([[maybe_unused]] view2d<T const> in, [[maybe_unused]] view2d<T> out, index_t& r8,
                          index_t& c8) {
  r8 = 0;
  c8 = 0;
#if QTL_X86
  if constexpr (sizeof(T) == 2) {
    if (qtl::x86::level_cap() >= qtl::x86::level::sse2) {
      r8 = in.extent[0] / 8 * 8;
      c8 = in.extent[1] / 8 * 8;
      for (index_t r = 0; r < r8; r += 8) {
        for (index_t c = 0; c < c8; c += 8) {
          __m128i a[8];
          for (int i = 0; i < 8; ++i) {
            a[i] = _mm_loadu_si128(reinterpret_cast<__m128i const*>(&in(r + i, c)));
          }
          transpose8x8_epi16(a);
          for (int i = 0; i < 8; ++i) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(&out(c + i, r)), a[i]);
          }
        }
      }
    }
  }
#endif  // ^^^ QTL_X86 ^^^
}

}  // namespace qtl::detail::tr
