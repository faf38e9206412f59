#pragma once
/// \file
/// The x86 executors of the W4A8 int4 encode and reorder (`qtl/w4a8.hpp`). SSE2, one reorder
/// atom: rows r and r + 8 of the atom (16 bytes each) are encoded as `unified_encode_int4b_word`
/// does (the same integer steps, per byte: no carry or borrow crosses a nibble), then interleaved
/// in 16-bit units and paired in 32-bit ones into the 32 bytes of threads 4r..4r+3. AVX-512 (BW)
/// and AVX2, four or two atoms side by side (column tiles of the same 16 rows): the same steps in
/// each 128-bit lane, the encode a nibble table, then a transpose of lanes so that each atom's
/// lines go out whole. All write with streaming stores when asked (large outputs). The entry
/// points `detail::w4a8_reorder_block_x86` and `detail::w4a8_reorder_atom_x86` return false where
/// `QTL_X86` is 0 or `qtl::x86::level_cap()` is below their level (then the narrower executor or
/// the portable loop runs); the bytes are the same either way (test/unit/pack_nd_test.cpp).

#include <array>
#include <cstdint>

#include <qtl/element/w4a8.hpp>
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

/// Column tiles (atoms side by side) the widest block executor this CPU runs moves a call: 4
/// (AVX-512 F, BW, VL with AVX2 and F16C, the attribute it shares with quantize's executor; every
/// CPU with AVX-512BW has the rest), 2 (AVX2), else 1 (the one-atom SSE2 executor or the portable
/// loop), under `qtl::x86::level_cap()`.
inline int w4a8_block_tiles() {
#if QTL_X86
  qtl::x86::cpu_features const& c = qtl::x86::cpu();
  qtl::x86::level const cap = qtl::x86::level_cap();
  if (c.avx512f && c.avx512bw && c.avx512vl && c.avx2 && c.f16c && cap >= qtl::x86::level::avx512) {
    return 4;
  }
  return c.avx2 && cap >= qtl::x86::level::avx2 ? 2 : 1;
#else
  return 1;
#endif  // ^^^ QTL_X86 ^^^
}

#if QTL_X86
/// `unified_encode_int4b` of 128 codes: each nibble through the table `lut` (its 16 results, in
/// every 128-bit lane; `lut_hi` the same shifted to the high nibble), `vpshufb` by nibble.
QTL_X86_AVX512_BW_VL_F16C inline __m512i unified_encode_int4b_avx512(__m512i w, __m512i lut, __m512i lut_hi) {
  __m512i const nib = _mm512_set1_epi8(0x0F);
  __m512i const lo = _mm512_and_si512(w, nib);
  __m512i const hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), nib);
  return _mm512_or_si512(_mm512_shuffle_epi8(lut, lo), _mm512_shuffle_epi8(lut_hi, hi));
}

/// The 4 atoms of a 16-row block of 64 bytes a row (`rows`, `row_bytes` apart; column tiles j =
/// 0..3 are bytes 16j..16j+15) -> 256 bytes each at `atoms + j * atom_stride`, encoded. The SSE2
/// steps below in each 128-bit lane (lane j: atom j) give the atoms' 16-byte pieces of one output
/// line in four registers, one a piece; a 4 x 4 transpose of lanes makes each atom's line whole,
/// written with one 64-byte store (streaming with `stream`: then `atoms` and `atom_stride` are
/// multiples of 64). `lut`: the encode of nibbles 0..15. The masked forms with every lane selected
/// are the plain instructions; g++ 12 warns (-Wmaybe-uninitialized, PR 105593) about the undefined
/// pass-through of the plain intrinsics.
QTL_X86_AVX512_BW_VL_F16C inline void w4a8_reorder_block_avx512(std::uint8_t const* rows, index_t row_bytes,
                                                                std::uint8_t* atoms, index_t atom_stride, bool stream,
                                                                __m128i lut) {
  __m512i const lo_lut = _mm512_maskz_broadcast_i32x4(0xFFFF, lut);
  __m512i const hi_lut =
      _mm512_maskz_broadcast_i32x4(0xFFFF, _mm_slli_epi16(lut, 4));  // results < 16: no carry across bytes
  for (index_t q = 0; q < 4; ++q) {  // output line q of every atom: rows 2q, 2q + 1 and those + 8
    __m512i v[4];
    for (index_t h = 0; h < 2; ++h) {
      index_t const r = 2 * q + h;
      __m512i const a = unified_encode_int4b_avx512(_mm512_loadu_si512(rows + r * row_bytes), lo_lut, hi_lut);
      __m512i const b = unified_encode_int4b_avx512(_mm512_loadu_si512(rows + (r + 8) * row_bytes), lo_lut, hi_lut);
      __m512i const lo = _mm512_unpacklo_epi16(a, b);
      __m512i const hi = _mm512_unpackhi_epi16(a, b);
      v[2 * h] = _mm512_maskz_unpacklo_epi32(0xFFFF, lo, hi);
      v[2 * h + 1] = _mm512_maskz_unpackhi_epi32(0xFFFF, lo, hi);
    }
    // v[i] lane j: piece i of atom j's line q  ->  out[j] lane i
    __m512i const t0 = _mm512_maskz_shuffle_i64x2(0xFF, v[0], v[1], 0x44);  // v0.0 v0.1 v1.0 v1.1
    __m512i const t1 = _mm512_maskz_shuffle_i64x2(0xFF, v[0], v[1], 0xEE);  // v0.2 v0.3 v1.2 v1.3
    __m512i const t2 = _mm512_maskz_shuffle_i64x2(0xFF, v[2], v[3], 0x44);
    __m512i const t3 = _mm512_maskz_shuffle_i64x2(0xFF, v[2], v[3], 0xEE);
    __m512i const out[4] = {
        _mm512_maskz_shuffle_i64x2(0xFF, t0, t2, 0x88), _mm512_maskz_shuffle_i64x2(0xFF, t0, t2, 0xDD),
        _mm512_maskz_shuffle_i64x2(0xFF, t1, t3, 0x88), _mm512_maskz_shuffle_i64x2(0xFF, t1, t3, 0xDD)};
    for (index_t j = 0; j < 4; ++j) {
      std::uint8_t* const line = atoms + j * atom_stride + 64 * q;
      if (stream) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(line), out[j]);
      } else {
        _mm512_storeu_si512(line, out[j]);
      }
    }
  }
}

/// `unified_encode_int4b` of 64 codes (`unified_encode_int4b_avx512`'s steps).
QTL_X86_AVX2 inline __m256i unified_encode_int4b_avx2(__m256i w, __m256i lut, __m256i lut_hi) {
  __m256i const nib = _mm256_set1_epi8(0x0F);
  __m256i const lo = _mm256_and_si256(w, nib);
  __m256i const hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), nib);
  return _mm256_or_si256(_mm256_shuffle_epi8(lut, lo), _mm256_shuffle_epi8(lut_hi, hi));
}

/// `w4a8_reorder_block_avx512` with 2 atoms (32 bytes a row, column tiles 0 and 1): each atom's
/// line from the 128-bit lanes of four registers, two 32-byte stores.
QTL_X86_AVX2 inline void w4a8_reorder_block_avx2(std::uint8_t const* rows, index_t row_bytes, std::uint8_t* atoms,
                                                 index_t atom_stride, bool stream, __m128i lut) {
  __m256i const lo_lut = _mm256_broadcastsi128_si256(lut);
  __m256i const hi_lut = _mm256_broadcastsi128_si256(_mm_slli_epi16(lut, 4));
  for (index_t q = 0; q < 4; ++q) {
    __m256i v[4];
    for (index_t h = 0; h < 2; ++h) {
      index_t const r = 2 * q + h;
      __m256i const a = unified_encode_int4b_avx2(
          _mm256_loadu_si256(reinterpret_cast<__m256i const*>(rows + r * row_bytes)), lo_lut, hi_lut);
      __m256i const b = unified_encode_int4b_avx2(
          _mm256_loadu_si256(reinterpret_cast<__m256i const*>(rows + (r + 8) * row_bytes)), lo_lut, hi_lut);
      __m256i const lo = _mm256_unpacklo_epi16(a, b);
      __m256i const hi = _mm256_unpackhi_epi16(a, b);
      v[2 * h] = _mm256_unpacklo_epi32(lo, hi);
      v[2 * h + 1] = _mm256_unpackhi_epi32(lo, hi);
    }
    // v[i] lane j: piece i of atom j's line q; atom j's line is lanes j of v0, v1, then of v2, v3
    __m256i const line[2][2] = {
        {_mm256_permute2x128_si256(v[0], v[1], 0x20), _mm256_permute2x128_si256(v[2], v[3], 0x20)},
        {_mm256_permute2x128_si256(v[0], v[1], 0x31), _mm256_permute2x128_si256(v[2], v[3], 0x31)}};
    for (index_t j = 0; j < 2; ++j) {
      for (index_t half = 0; half < 2; ++half) {
        auto* const p = reinterpret_cast<__m256i*>(atoms + j * atom_stride + 64 * q + 32 * half);
        if (stream) {
          _mm256_stream_si256(p, line[j][half]);
        } else {
          _mm256_storeu_si256(p, line[j][half]);
        }
      }
    }
  }
}
#endif  // ^^^ QTL_X86 ^^^

/// The `tiles` atoms (`w4a8_block_tiles()`, asked once a call: 4 or 2) of column tiles kt.. of a
/// 16-row block; returns false (and writes nothing) for any other width.
inline bool w4a8_reorder_block_x86([[maybe_unused]] int tiles, [[maybe_unused]] std::uint8_t const* rows,
                                   [[maybe_unused]] index_t row_bytes, [[maybe_unused]] std::uint8_t* atoms,
                                   [[maybe_unused]] index_t atom_stride, [[maybe_unused]] bool stream) {
#if QTL_X86
  static constexpr auto lut = [] {  // the encode of each nibble, from the element function
    std::array<std::uint8_t, 16> t{};
    for (std::uint8_t q = 0; q < 16; ++q) {
      t[q] = unified_encode_int4b_byte(q);
    }
    return t;
  }();
  __m128i const l = _mm_loadu_si128(reinterpret_cast<__m128i const*>(lut.data()));
  if (tiles == 4) {
    w4a8_reorder_block_avx512(rows, row_bytes, atoms, atom_stride, stream, l);
    return true;
  }
  if (tiles == 2) {
    w4a8_reorder_block_avx2(rows, row_bytes, atoms, atom_stride, stream, l);
    return true;
  }
#endif  // ^^^ QTL_X86 ^^^
  return false;
}

/// Asks for `bytes` of each of the 16 rows at `row`, `row_bytes` apart (a block of atom rows, read next).
inline void prefetch_rows([[maybe_unused]] std::uint8_t const* row, [[maybe_unused]] index_t row_bytes,
                          [[maybe_unused]] index_t bytes) {
#if defined(__GNUC__)
  for (index_t r = 0; r < 16; ++r) {
    for (index_t b = 0; b < bytes; b += 64) {
      __builtin_prefetch(row + r * row_bytes + b);
    }
  }
#endif  // ^^^ __GNUC__ ^^^
}

/// Orders the executor's streaming stores before later stores (once a call).
inline void w4a8_stream_fence() {
#if QTL_X86
  _mm_sfence();
#endif  // ^^^ QTL_X86 ^^^
}

/// One atom: 16 rows of 16 bytes at `rows` (`row_bytes` apart) -> the 256 bytes at `atom`, encoded,
/// with streaming stores where `stream` (then `atom` must be 16-byte aligned). Returns false (and
/// writes nothing) where no x86 executor runs.
inline bool w4a8_reorder_atom_x86([[maybe_unused]] std::uint8_t const* rows, [[maybe_unused]] index_t row_bytes,
                                  [[maybe_unused]] std::uint8_t* atom, [[maybe_unused]] bool stream = false) {
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
    if (stream) {
      _mm_stream_si128(out, o0);
      _mm_stream_si128(out + 1, o1);
    } else {
      _mm_storeu_si128(out, o0);
      _mm_storeu_si128(out + 1, o1);
    }
  }
  return true;
#else
  return false;
#endif  // ^^^ QTL_X86 ^^^
}

}  // namespace qtl::detail
