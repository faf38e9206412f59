#pragma once
/// \file
/// The x86 executor of DeepSeek-V4's MXFP4 -> BF16 dequantization (`qtl/e2m1_to_bf16.hpp` calls
/// the entry point `detail::e2m1_bf16_x86::dequant_row`, which chooses by the CPU and
/// `qtl::x86::level_cap()`; where `QTL_X86` is 0 or the CPU has no AVX2 it does nothing and the
/// portable loop does all). Under one scale code the dequantization is a 16-entry table of bf16
/// values indexed by the e2m1 code, kept as two 16-byte tables (the values' low and high bytes):
/// per 1x32 group, the nibbles of its 16 bytes put in element order (element 2j from the low
/// nibble) index both with `pshufb`, and a byte interleave makes the 32 bf16 values. The tables
/// are the portable loop's (test/unit/e2m1_to_e4m3_test.cpp compares the two).

#include <cstdint>

#include <qtl/x86/convert.hpp>
#include <qtl/x86/isa.hpp>

namespace qtl::detail::e2m1_bf16_x86 {

#if QTL_X86
/// Groups [0, groups) of one row: `x` its packed codes (16 bytes a group), `scale` each group's
/// scale code, `lo`/`hi` the low and high bytes of the 16 bf16 values of each scale code;
/// writes `out` (32 bf16 bit patterns a group).
QTL_X86_AVX2 inline std::int64_t dequant_row_avx2(std::uint8_t const* x, std::uint8_t const* scale,
                                                  std::uint8_t const (*lo)[16], std::uint8_t const (*hi)[16],
                                                  std::int64_t groups, std::uint16_t* out) {
  __m128i const nibble = _mm_set1_epi8(0x0F);
  for (std::int64_t j = 0; j < groups; ++j) {
    __m128i const b = _mm_loadu_si128(reinterpret_cast<__m128i const*>(x + j * 16));
    __m128i const low = _mm_and_si128(b, nibble);
    __m128i const high = _mm_and_si128(_mm_srli_epi16(b, 4), nibble);
    __m128i const first = _mm_unpacklo_epi8(low, high);   // the codes of elements 0..15
    __m128i const second = _mm_unpackhi_epi8(low, high);  // 16..31
    __m128i const tl = _mm_loadu_si128(reinterpret_cast<__m128i const*>(lo[scale[j]]));
    __m128i const th = _mm_loadu_si128(reinterpret_cast<__m128i const*>(hi[scale[j]]));
    __m128i const l0 = _mm_shuffle_epi8(tl, first);
    __m128i const h0 = _mm_shuffle_epi8(th, first);
    __m128i const l1 = _mm_shuffle_epi8(tl, second);
    __m128i const h1 = _mm_shuffle_epi8(th, second);
    auto* o = reinterpret_cast<__m128i*>(out + j * 32);
    _mm_storeu_si128(o, _mm_unpacklo_epi8(l0, h0));
    _mm_storeu_si128(o + 1, _mm_unpackhi_epi8(l0, h0));
    _mm_storeu_si128(o + 2, _mm_unpacklo_epi8(l1, h1));
    _mm_storeu_si128(o + 3, _mm_unpackhi_epi8(l1, h1));
  }
  return groups;
}
#endif  // ^^^ QTL_X86 ^^^

/// The leading groups of one row an executor dequantizes (see `dequant_row_avx2`); returns how many.
inline std::int64_t dequant_row([[maybe_unused]] std::uint8_t const* x, [[maybe_unused]] std::uint8_t const* scale,
                                [[maybe_unused]] std::uint8_t const (*lo)[16],
                                [[maybe_unused]] std::uint8_t const (*hi)[16], [[maybe_unused]] std::int64_t groups,
                                [[maybe_unused]] std::uint16_t* out) {
#if QTL_X86
  if (convert_x86::has_avx2()) {
    return dequant_row_avx2(x, scale, lo, hi, groups, out);
  }
#endif  // ^^^ QTL_X86 ^^^
  return 0;
}

}  // namespace qtl::detail::e2m1_bf16_x86
