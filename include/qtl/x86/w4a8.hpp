#pragma once
/// \file
/// The x86 executor of the W4A8 int4 encode and reorder (`qtl/w4a8.hpp`): one reorder atom in
/// SSE2 registers. Rows r and r + 8 of the atom (16 bytes each) are encoded as
/// `unified_encode_int4b_word` does (the same integer steps, per byte: no carry or borrow
/// crosses a nibble), then interleaved in 16-bit units and paired in 32-bit ones into the 32 bytes
/// of threads 4r..4r+3. The entry point `detail::w4a8_reorder_atom_x86` returns false where
/// `QTL_X86` is 0 or `qtl::x86::level_cap()` is `portable` (then the portable loop runs); the bytes
/// are the same either way (test/unit/pack_nd_test.cpp).

#include <cstdint>

#include <qtl/view.hpp>
#include <qtl/x86/isa.hpp>

namespace qtl::detail {

#if QTL_X86
/// `unified_encode_int4b_word` of 32 codes.
inline __m128i unified_encode_int4b_sse2(__m128i w) {
  __m128i const low3 = _mm_set1_epi8(0x77);
  __m128i const bit3 = _mm_set1_epi8(static_cast<char>(0x88));
  __m128i const low = _mm_and_si128(w, low3);
  __m128i const change = _mm_andnot_si128(w, _mm_and_si128(_mm_add_epi8(low, low3), bit3));
  // bit 3 of a nibble spread over its four bits: the set bits sit at 3 mod 4, so shifts by 1 to 3
  // stay inside their nibble
  __m128i const m = _mm_or_si128(_mm_or_si128(change, _mm_srli_epi16(change, 1)),
                                 _mm_or_si128(_mm_srli_epi16(change, 2), _mm_srli_epi16(change, 3)));
  return _mm_or_si128(_mm_andnot_si128(m, w), _mm_and_si128(_mm_sub_epi8(bit3, low), m));
}
#endif  // ^^^ QTL_X86 ^^^

/// One atom: 16 rows of 16 bytes at `rows` (`row_bytes` apart) -> the 256 bytes at `atom`, encoded.
/// Returns false (and writes nothing) where no x86 executor runs.
inline bool w4a8_reorder_atom_x86([[maybe_unused]] std::uint8_t const* rows, [[maybe_unused]] index_t row_bytes,
                                  [[maybe_unused]] std::uint8_t* atom) {
#if QTL_X86
  if (qtl::x86::level_cap() < qtl::x86::level::sse2) {
    return false;
  }
  for (index_t r = 0; r < 8; ++r) {
    __m128i const a =
        unified_encode_int4b_sse2(_mm_loadu_si128(reinterpret_cast<__m128i const*>(rows + r * row_bytes)));
    __m128i const b =
        unified_encode_int4b_sse2(_mm_loadu_si128(reinterpret_cast<__m128i const*>(rows + (r + 8) * row_bytes)));
    __m128i const lo = _mm_unpacklo_epi16(a, b);  // a0 b0 a1 b1 a2 b2 a3 b3
    __m128i const hi = _mm_unpackhi_epi16(a, b);  // a4 b4 a5 b5 a6 b6 a7 b7
    __m128i* out = reinterpret_cast<__m128i*>(atom + 32 * r);
    __m128i const o0 = _mm_unpacklo_epi32(lo, hi);  // a0 b0 a4 b4 a1 b1 a5 b5
    __m128i const o1 = _mm_unpackhi_epi32(lo, hi);  // a2 b2 a6 b6 a3 b3 a7 b7
    _mm_storeu_si128(out, o0);
    _mm_storeu_si128(out + 1, o1);
  }
  return true;
#else
  return false;
#endif  // ^^^ QTL_X86 ^^^
}

}  // namespace qtl::detail
