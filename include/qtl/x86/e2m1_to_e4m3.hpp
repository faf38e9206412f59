#pragma once
/// \file
/// The x86 executor of the lossless MXFP4 -> FP8-block cast (`qtl/e2m1_to_e4m3.hpp` calls the
/// entry point `detail::e2m1_x86::cast_row`, which chooses by the CPU and `qtl::x86::level_cap()`;
/// where `QTL_X86` is 0 or the CPU has no AVX2 it does nothing and the portable loop does all).
/// AVX2: under one shift the cast is a 16-entry table of e4m3 codes indexed by the e2m1 code, one
/// `pshufb`. Two 1x32 groups are one step: their 32 bytes of codes fill the two 128-bit lanes,
/// each lane looks its low and high nibbles up in its own group's table, and the byte interleave
/// (element 2j from the low nibble) puts each group's 32 codes back in order. The tables come from
/// the element function `e2m1_to_e4m3`, so the bytes are the portable loop's
/// (test/unit/e2m1_to_e4m3_test.cpp compares them).

#include <cstdint>

#include <qtl/x86/convert.hpp>
#include <qtl/x86/isa.hpp>

namespace qtl::detail::e2m1_x86 {

#if QTL_X86
/// Groups [0, groups & ~1) of one row: `x` its packed codes, `table` the 16 codes of each table
/// index, `index[j]` group j's table index; writes `out` (32 codes per group).
QTL_X86_AVX2 inline std::int64_t cast_row_avx2(std::uint8_t const* x, std::uint8_t const (*table)[16],
                                               std::uint8_t const* index, std::int64_t groups, std::uint8_t* out) {
  __m256i const nibble = _mm256_set1_epi8(0x0F);
  std::int64_t j = 0;
  for (; j + 2 <= groups; j += 2) {
    __m256i const t = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<__m128i const*>(table[index[j]]))),
        _mm_loadu_si128(reinterpret_cast<__m128i const*>(table[index[j + 1]])), 1);
    __m256i const b = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(x + j * 16));
    __m256i const lo = _mm256_shuffle_epi8(t, _mm256_and_si256(b, nibble));
    __m256i const hi = _mm256_shuffle_epi8(t, _mm256_and_si256(_mm256_srli_epi16(b, 4), nibble));
    __m256i const first = _mm256_unpacklo_epi8(lo, hi);   // elements 0..15 of each group
    __m256i const second = _mm256_unpackhi_epi8(lo, hi);  // elements 16..31
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j * 32), _mm256_permute2x128_si256(first, second, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j * 32 + 32), _mm256_permute2x128_si256(first, second, 0x31));
  }
  return j;
}
#endif  // ^^^ QTL_X86 ^^^

/// The leading groups of one row an executor casts (see `cast_row_avx2`); returns how many.
inline std::int64_t cast_row([[maybe_unused]] std::uint8_t const* x, [[maybe_unused]] std::uint8_t const (*table)[16],
                             [[maybe_unused]] std::uint8_t const* index, [[maybe_unused]] std::int64_t groups,
                             [[maybe_unused]] std::uint8_t* out) {
#if QTL_X86
  if (convert_x86::has_avx2()) {
    return cast_row_avx2(x, table, index, groups, out);
  }
#endif  // ^^^ QTL_X86 ^^^
  return 0;
}

}  // namespace qtl::detail::e2m1_x86
