#pragma once
/// \file
/// The x86 executors of the load-time converters (`qtl/convert.hpp` calls them through the entry
/// points `detail::convert_x86` at the end, which choose by the CPU and `qtl::x86::level_cap()`;
/// where `QTL_X86` is 0, or the CPU has no AVX2, they do nothing and the portable loops do
/// everything). The converters' inner loops are byte lookups, which AVX2's `pshufb` does 32 at a
/// time from 16-entry tables, and AVX-512 VBMI's `vpermi2b` 64 at a time from 128-entry ones (the
/// table lookups, where the CPU has it; the other executors are AVX2 only).
///
/// * 256-entry byte tables (the requant's per-block code map, the BF16 dequant's per-block table
///   as two byte tables): a code c = 16h + l, h < 8, of one 128-code half is looked up as the xor
///   over h' = 0..7 of pshufb(D[h'], c - 16h'), D[0] = T[0], D[h'] = T[h'] ^ T[h'-1] (T[h'] the
///   16 entries 16h'..16h'+15): c - 16h' is below 16 for h' = h (entry l of D[h]), in 16..127 for
///   h' < h (pshufb reads its low 4 bits, entry l of D[h'] again), negative for h' > h (bit 7 set:
///   pshufb gives 0), so the xor telescopes to T[h][l]. Bit 7 of c picks the half.
///   The BF16 dequant of a finite scale is sign-symmetric (w[c | 0x80] = w[c] ^ 0x8000 but for the
///   NaN code 0xFF): one half is looked up and the sign xor-ed in (checked on each table).
/// * The per-block cast (F32 -> FP8): the amax as an integer max of |x|'s bits, and the codes of a
///   finite block by qtl/x86/fp8.hpp's AVX2 row quantizer (multiply by 1/sf, saturating encoder:
///   the same codes in the cast's finite-block domain, |x / sf| <= 448 (1 + 6 ulp)).
/// * FP8 block -> MXFP4: one 32-code group is one register. Inside an FP8 block (finite scale
///   s > 0) the bf16 dequant grows with the code magnitude m = c & 0x7F, so the group's amax is the
///   dequant of its largest m (`top`) and its exponent e a function of top (cached per block); and
///   under a fixed e the nibble magnitude `mxfp4_nibble(x(m), e) & 7` is a step function of m, seven
///   thresholds (`mxfp4_steps`, cached per block and e, found by binary search on the element
///   function), the sign bit "c negative or x(m) == 0" a prefix of m. The nibble is then seven
///   byte compares. Groups with a NaN code, an Inf dequant or blocks whose scale is not finite and
///   positive stay with the portable loop (it raises the errors, in element order).
///
/// Every table is computed by the element functions of `qtl/element/convert.hpp`, so the bytes are
/// those of the portable loops (test/unit/convert_x86_test.cpp compares them).

#include <cstdint>
#include <vector>

#include <qtl/element/convert.hpp>
#include <qtl/x86/fp8.hpp>
#include <qtl/x86/isa.hpp>

namespace qtl::detail {

/// The nibble of FP8 block -> MXFP4 under one block scale s (finite, > 0) and one exponent e, as
/// thresholds on the code magnitude m = c & 0x7F (m <= 126): magnitude = #{j : m > below[j]}, sign
/// bit set for a negative code or m < zero_end. Equal to `mxfp4_nibble(dequant_bf16(c, s), e)`.
struct mxfp4_steps {
  std::int8_t below[7] = {};
  std::int8_t zero_end = 0;
};

/// The thresholds of (s, e), by binary search: both are monotone in m (|dequant| grows with m,
/// the scaling by 2^-e and the compares keep the order).
inline mxfp4_steps mxfp4_steps_of(float s, int e) {
  auto const nibble = [&](int m) {
    return qtl::convert::mxfp4_nibble(
        qtl::convert::dequant_element_as<qtl::convert::dequant_precision::bf16>(static_cast<std::uint8_t>(m), s), e);
  };
  // the first m in [0, 127) for which pred(m) holds (127 if none); pred monotone false -> true
  auto const first = [](auto const& pred) {
    int lo = 0;
    int hi = 127;
    while (lo < hi) {
      int const mid = (lo + hi) / 2;
      if (pred(mid)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  };
  mxfp4_steps r;
  for (int j = 0; j < 7; ++j) {
    r.below[j] = static_cast<std::int8_t>(first([&](int m) { return (nibble(m) & 7) > j; }) - 1);
  }
  r.zero_end = static_cast<std::int8_t>(first([&](int m) { return (nibble(m) & 8) == 0; }));
  return r;
}

#if QTL_X86
namespace x86 {

/// A 256-entry byte table as the pshufb difference tables of its two 128-code halves (see the
/// file comment).
struct byte_lut {
  __m256i lo[8];
  __m256i hi[8];
};

QTL_X86_AVX2 inline void byte_lut_load(byte_lut& t, std::uint8_t const* table) {
  __m256i prev_lo = _mm256_setzero_si256();
  __m256i prev_hi = _mm256_setzero_si256();
  for (int h = 0; h < 8; ++h) {
    __m256i const lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<__m128i const*>(table + 16 * h)));
    __m256i const hi =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<__m128i const*>(table + 128 + 16 * h)));
    t.lo[h] = _mm256_xor_si256(lo, prev_lo);
    t.hi[h] = _mm256_xor_si256(hi, prev_hi);
    prev_lo = lo;
    prev_hi = hi;
  }
}

/// table[c] of 32 codes.
QTL_X86_AVX2 inline __m256i byte_lut_lookup(byte_lut const& t, __m256i c) {
  __m256i idx = _mm256_and_si256(c, _mm256_set1_epi8(0x7F));
  __m256i const step = _mm256_set1_epi8(16);
  __m256i lo = _mm256_setzero_si256();
  __m256i hi = _mm256_setzero_si256();
  for (int h = 0; h < 8; ++h) {
    lo = _mm256_xor_si256(lo, _mm256_shuffle_epi8(t.lo[h], idx));
    hi = _mm256_xor_si256(hi, _mm256_shuffle_epi8(t.hi[h], idx));
    idx = _mm256_sub_epi8(idx, step);
  }
  return _mm256_blendv_epi8(lo, hi, c);
}

/// The unsigned max of the 1- or 4-byte words W of two 128- or 256-bit vectors V (the lanes of
/// `block_top_avx2`).
template <class W, class V>
QTL_X86_AVX2 inline V max_words(V a, V b) {
  if constexpr (sizeof(V) == 32) {
    return sizeof(W) == 1 ? _mm256_max_epu8(a, b) : _mm256_max_epu32(a, b);
  } else {
    return sizeof(W) == 1 ? _mm_max_epu8(a, b) : _mm_max_epu32(a, b);
  }
}

/// Prefetches row r + 16 of a block (its first `bytes` bytes) while row r is worked on. A block's
/// rows are a tensor row apart, usually more than a page, where the hardware prefetchers do not
/// follow: without this each row of a block waits for memory (docs/performance.md, convert).
inline void prefetch_row_ahead(void const* base, std::int64_t stride_bytes, std::int64_t r, std::int64_t rows,
                               std::int64_t bytes) {
  constexpr std::int64_t ahead = 16;
  if (r + ahead < rows) {
    char const* p = static_cast<char const*>(base) + (r + ahead) * stride_bytes;
    for (std::int64_t b = 0; b < bytes; b += 64) {
      _mm_prefetch(p + b, _MM_HINT_T0);
    }
  }
}

/// The largest magnitude bits (a word's bits but the sign bit: an fp8 code & 0x7F, a float's bits
/// & 0x7FFFFFFF, whose NaNs exceed Inf, so that their integer max is the NaN-propagating amax)
/// of a rows x cols block of T (row stride `stride`) over its first cols - cols % (32 /
/// sizeof(T)) columns, folded into `top`; returns how many columns it read.
template <class T, class W>
QTL_X86_AVX2 inline std::int64_t block_top_avx2(T const* x, std::int64_t stride, std::int64_t rows, std::int64_t cols,
                                                W& top) {
  static_assert(sizeof(T) == sizeof(W) && (sizeof(W) == 1 || sizeof(W) == 4));
  constexpr std::int64_t lanes = 32 / sizeof(W);
  std::int64_t const vec = cols - cols % lanes;
  __m256i const mag_mask = sizeof(W) == 1 ? _mm256_set1_epi8(0x7F) : _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m = _mm256_setzero_si256();
  for (std::int64_t r = 0; r < rows; ++r) {
    prefetch_row_ahead(x, stride * std::int64_t{sizeof(T)}, r, rows, vec * std::int64_t{sizeof(T)});
    for (std::int64_t c = 0; c < vec; c += lanes) {
      __m256i const v = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(x + r * stride + c));
      m = max_words<W>(m, _mm256_and_si256(v, mag_mask));
    }
  }
  // the max of the 32 bytes' words, halving the vector (shifting in zeros is harmless)
  __m128i h = max_words<W>(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  h = max_words<W>(h, _mm_srli_si128(h, 8));
  h = max_words<W>(h, _mm_srli_si128(h, 4));
  if constexpr (sizeof(W) == 1) {
    h = max_words<W>(h, _mm_srli_si128(h, 2));
    h = max_words<W>(h, _mm_srli_si128(h, 1));
  }
  auto const t = static_cast<W>(_mm_cvtsi128_si32(h));
  top = t > top ? t : top;
  return vec;
}

/// `block_top_avx2` of every block of a block row at once, row by row: `rows` rows of `k` FP8
/// codes, blocks `bk` wide (bk a multiple of 32 dividing k), the largest code magnitude of block
/// j to `tops[j]`. Walking the rows in memory order keeps the hardware prefetchers streaming, where
/// block by block each row of a block is a tensor row (often a page) away from the last.
QTL_X86_AVX2 inline void block_row_tops_avx2(std::uint8_t const* q, std::int64_t rows, std::int64_t k, std::int64_t bk,
                                             std::uint8_t* tops) {
  constexpr std::int64_t chunk = 64;  // block columns a sweep over the rows holds (2 KiB of maxima)
  __m256i const mag_mask = _mm256_set1_epi8(0x7F);
  std::int64_t const kb = k / bk;
  for (std::int64_t j0 = 0; j0 < kb; j0 += chunk) {
    std::int64_t const j1 = j0 + chunk < kb ? j0 + chunk : kb;
    __m256i m[chunk];
    for (std::int64_t j = j0; j < j1; ++j) {
      m[j - j0] = _mm256_setzero_si256();
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      std::uint8_t const* row = q + r * k;
      for (std::int64_t j = j0; j < j1; ++j) {
        __m256i acc = m[j - j0];
        for (std::int64_t c = j * bk; c < (j + 1) * bk; c += 32) {
          acc = _mm256_max_epu8(
              acc, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<__m256i const*>(row + c)), mag_mask));
        }
        m[j - j0] = acc;
      }
    }
    for (std::int64_t j = j0; j < j1; ++j) {
      __m128i h = _mm_max_epu8(_mm256_castsi256_si128(m[j - j0]), _mm256_extracti128_si256(m[j - j0], 1));
      h = _mm_max_epu8(h, _mm_srli_si128(h, 8));
      h = _mm_max_epu8(h, _mm_srli_si128(h, 4));
      h = _mm_max_epu8(h, _mm_srli_si128(h, 2));
      h = _mm_max_epu8(h, _mm_srli_si128(h, 1));
      tops[j] = static_cast<std::uint8_t>(_mm_cvtsi128_si32(h));
    }
  }
}

/// out[r][c] = table[in[r][c]] for the first cols - cols % 32 columns of a rows x cols block;
/// returns how many columns it did.
QTL_X86_AVX2 inline std::int64_t translate_block_avx2(std::uint8_t const* in, std::uint8_t* out, std::int64_t stride,
                                                      std::int64_t rows, std::int64_t cols, std::uint8_t const* table) {
  byte_lut t;
  byte_lut_load(t, table);
  std::int64_t const vec = cols - cols % 32;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < vec; c += 32) {
      __m256i const v = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(in + r * stride + c));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * stride + c), byte_lut_lookup(t, v));
    }
  }
  return vec;
}

/// Stores the 32 16-bit words whose low bytes are `l` and high bytes `h` (word i from byte i of
/// each) at `out`. The unpacks interleave within 128-bit lanes ([0-7 | 16-23] and [8-15 | 24-31]);
/// the permutes put the halves back in order.
QTL_X86_AVX2 inline void store_words_of_bytes(std::uint16_t* out, __m256i l, __m256i h) {
  __m256i const a = _mm256_unpacklo_epi8(l, h);
  __m256i const b = _mm256_unpackhi_epi8(l, h);
  auto* o = reinterpret_cast<__m256i*>(out);
  _mm256_storeu_si256(o, _mm256_permute2x128_si256(a, b, 0x20));
  _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(a, b, 0x31));
}

/// out[r][c] = {lo[in], hi[in]} (16-bit little-endian words from two byte tables) for the first
/// cols - cols % 32 columns of a rows x cols block (strides in elements); returns how many columns.
QTL_X86_AVX2 inline std::int64_t translate_block16_avx2(std::uint8_t const* in, std::uint16_t* out, std::int64_t stride,
                                                        std::int64_t rows, std::int64_t cols,
                                                        std::uint8_t const* lo_table, std::uint8_t const* hi_table) {
  byte_lut lo;
  byte_lut hi;
  byte_lut_load(lo, lo_table);
  byte_lut_load(hi, hi_table);
  std::int64_t const vec = cols - cols % 32;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < vec; c += 32) {
      __m256i const v = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(in + r * stride + c));
      __m256i const l = byte_lut_lookup(lo, v);
      __m256i const h = byte_lut_lookup(hi, v);
      store_words_of_bytes(out + r * stride + c, l, h);
    }
  }
  return vec;
}

/// The 16-bit lookup of a sign-symmetric table (w[c | 0x80] = w[c] ^ 0x8000 for c < 0x7F: the BF16
/// dequant of a finite scale): the 128-entry half `lo`/`hi` (bytes of w[0..127]), the sign bit of c
/// xor-ed into the high byte, and code 0xFF (NaN, not symmetric) set to `w_ff`. Half the lookups
/// of `translate_block16_avx2`; same contract.
QTL_X86_AVX2 inline std::int64_t translate_block16_symmetric_avx2(std::uint8_t const* in, std::uint16_t* out,
                                                                  std::int64_t stride, std::int64_t rows,
                                                                  std::int64_t cols, std::uint8_t const* lo_half,
                                                                  std::uint8_t const* hi_half, std::uint16_t w_ff) {
  __m256i lo_t[8];
  __m256i hi_t[8];
  __m256i prev_lo = _mm256_setzero_si256();
  __m256i prev_hi = _mm256_setzero_si256();
  for (int h = 0; h < 8; ++h) {
    __m256i const l = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<__m128i const*>(lo_half + 16 * h)));
    __m256i const u = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<__m128i const*>(hi_half + 16 * h)));
    lo_t[h] = _mm256_xor_si256(l, prev_lo);
    hi_t[h] = _mm256_xor_si256(u, prev_hi);
    prev_lo = l;
    prev_hi = u;
  }
  __m256i const mag_mask = _mm256_set1_epi8(0x7F);
  __m256i const sign_bit = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256i const all_ones = _mm256_set1_epi8(-1);
  __m256i const step = _mm256_set1_epi8(16);
  __m256i const ff_lo = _mm256_set1_epi8(static_cast<char>(w_ff & 0xFF));
  __m256i const ff_hi = _mm256_set1_epi8(static_cast<char>(w_ff >> 8));
  std::int64_t const vec = cols - cols % 32;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < vec; c += 32) {
      __m256i const v = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(in + r * stride + c));
      __m256i idx = _mm256_and_si256(v, mag_mask);
      __m256i l = _mm256_setzero_si256();
      __m256i h = _mm256_setzero_si256();
      for (int t = 0; t < 8; ++t) {
        l = _mm256_xor_si256(l, _mm256_shuffle_epi8(lo_t[t], idx));
        h = _mm256_xor_si256(h, _mm256_shuffle_epi8(hi_t[t], idx));
        idx = _mm256_sub_epi8(idx, step);
      }
      h = _mm256_xor_si256(h, _mm256_and_si256(v, sign_bit));
      __m256i const ff = _mm256_cmpeq_epi8(v, all_ones);
      l = _mm256_blendv_epi8(l, ff_lo, ff);
      h = _mm256_blendv_epi8(h, ff_hi, ff);
      store_words_of_bytes(out + r * stride + c, l, h);
    }
  }
  return vec;
}

/// FP8 block -> MXFP4 of one block row: `rows` rows of K codes (`q`), block width `block_k` (a
/// multiple of 32), the row's kb scales `srow`, `exponents` the table of `mxfp4_exponent_of` by the
/// 15 low bits of d; writes K/2 packed bytes and K/32 scale bytes per row. Returns how many rows it
/// did whole: it stops at the first row with a group it does not take (a NaN code or an Inf
/// dequant), or at 0 when a scale of the row is not finite and positive.
QTL_X86_AVX2 inline std::int64_t mxfp4_rows_avx2(std::uint8_t const* q, std::int64_t rows, std::int64_t k,
                                                 std::int64_t block_k, float const* srow, std::int16_t const* exponents,
                                                 std::uint8_t* packed, std::uint8_t* scales) {
  namespace cv = qtl::convert;
  std::int64_t const kb = (k + block_k - 1) / block_k;
  for (std::int64_t bj = 0; bj < kb; ++bj) {
    if (!(srow[bj] > 0.0f) || !(srow[bj] - srow[bj] == 0.0f)) {
      return 0;
    }
  }
  constexpr std::int16_t unknown = 0x7FFF;
  constexpr std::int16_t infinite = 0x7FFE;
  std::vector<std::int16_t> top_exponent(static_cast<std::size_t>(kb) * 128, unknown);
  std::vector<mxfp4_steps> steps(static_cast<std::size_t>(kb) * 256);
  std::vector<std::uint8_t> have_steps(static_cast<std::size_t>(kb) * 256, 0);
  __m256i const mag_mask = _mm256_set1_epi8(0x7F);
  __m256i const eight = _mm256_set1_epi8(8);
  __m256i const low_byte = _mm256_set1_epi16(0xFF);
  std::int64_t const groups = k / cv::mxfp4_block;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::uint8_t const* row = q + r * k;
    for (std::int64_t gi = 0; gi < groups; ++gi) {
      std::int64_t const bj = gi * cv::mxfp4_block / block_k;
      __m256i const v = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(row + gi * cv::mxfp4_block));
      __m256i const m = _mm256_and_si256(v, mag_mask);
      __m128i x = _mm_max_epu8(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
      x = _mm_max_epu8(x, _mm_srli_si128(x, 8));
      x = _mm_max_epu8(x, _mm_srli_si128(x, 4));
      x = _mm_max_epu8(x, _mm_srli_si128(x, 2));
      x = _mm_max_epu8(x, _mm_srli_si128(x, 1));
      int const top = _mm_cvtsi128_si32(x) & 0xFF;
      if (top == 0x7F) {
        return r;  // a NaN code: the portable loop raises the error
      }
      std::int16_t& te = top_exponent[static_cast<std::size_t>(bj * 128 + top)];
      if (te == unknown) {
        float const amax =
            cv::dequant_element_as<cv::dequant_precision::bf16>(static_cast<std::uint8_t>(top), srow[bj]);
        te = amax - amax == 0.0f ? exponents[cv::mxfp4_scaled_amax(amax) & 0x7FFFu] : infinite;
      }
      if (te == infinite) {
        return r;
      }
      std::size_t const si = static_cast<std::size_t>(bj * 256 + (te + 127));
      if (!have_steps[si]) {
        steps[si] = mxfp4_steps_of(srow[bj], te);
        have_steps[si] = 1;
      }
      mxfp4_steps const& st = steps[si];
      __m256i count = _mm256_setzero_si256();
      for (int j = 0; j < 7; ++j) {
        count = _mm256_sub_epi8(count, _mm256_cmpgt_epi8(m, _mm256_set1_epi8(st.below[j])));
      }
      __m256i const sign = _mm256_or_si256(_mm256_cmpgt_epi8(_mm256_setzero_si256(), v),
                                           _mm256_cmpgt_epi8(_mm256_set1_epi8(st.zero_end), m));
      __m256i const nib = _mm256_or_si256(count, _mm256_and_si256(sign, eight));
      // byte pairs (n0, n1) -> n0 | n1 << 4 in the low byte of each word, then to 16 bytes
      __m256i const pairs = _mm256_and_si256(_mm256_or_si256(nib, _mm256_srli_epi16(nib, 4)), low_byte);
      __m256i const bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(pairs, pairs), 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(packed + r * (k / 2) + gi * (cv::mxfp4_block / 2)),
                       _mm256_castsi256_si128(bytes));
      scales[r * groups + gi] = cv::mxfp4_scale_byte(te);
    }
  }
  return rows;
}

/// The AVX-512 VBMI forms of `translate_block_avx2` and `translate_block16_avx2` (same contracts,
/// 64 columns a step, returning cols - cols % 64): `vpermi2b` looks a byte up in a 128-entry table
/// (two registers) by its low 7 bits, so a 256-entry table is two lookups and a blend by bit 7.
struct byte_lut512 {
  __m512i t[4];  // entries 0-63, 64-127, 128-191, 192-255
};
QTL_X86_AVX512_VBMI inline byte_lut512 byte_lut512_load(std::uint8_t const* table) {
  byte_lut512 l;
  for (int i = 0; i < 4; ++i) {
    l.t[i] = _mm512_loadu_si512(table + 64 * i);
  }
  return l;
}
QTL_X86_AVX512_VBMI inline __m512i byte_lut512_lookup(byte_lut512 const& l, __m512i v) {
  __m512i const low = _mm512_permutex2var_epi8(l.t[0], v, l.t[1]);
  __m512i const high = _mm512_permutex2var_epi8(l.t[2], v, l.t[3]);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), low, high);
}

QTL_X86_AVX512_VBMI inline std::int64_t translate_block_avx512(std::uint8_t const* in, std::uint8_t* out,
                                                               std::int64_t stride, std::int64_t rows,
                                                               std::int64_t cols, std::uint8_t const* table) {
  byte_lut512 const t = byte_lut512_load(table);
  std::int64_t const vec = cols - cols % 64;
  for (std::int64_t r = 0; r < rows; ++r) {
    prefetch_row_ahead(in, stride, r, rows, vec);
    for (std::int64_t c = 0; c < vec; c += 64) {
      _mm512_storeu_si512(out + r * stride + c, byte_lut512_lookup(t, _mm512_loadu_si512(in + r * stride + c)));
    }
  }
  return vec;
}

/// One step of the 16-bit translations: the 64 codes at `in` to the 64 words at `out` whose low
/// bytes `lo` and high bytes `hi` give. The unpacks interleave within 128-bit lanes (words 0-7 |
/// 16-23 | 32-39 | 48-55 and 8-15 | ...); the two-source qword permutes put the lanes back in order.
QTL_X86_AVX512_VBMI inline void translate64_avx512(byte_lut512 const& lo, byte_lut512 const& hi, std::uint8_t const* in,
                                                   std::uint16_t* out) {
  __m512i const first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  __m512i const second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  __m512i const v = _mm512_loadu_si512(in);
  __m512i const l = byte_lut512_lookup(lo, v);
  __m512i const h = byte_lut512_lookup(hi, v);
  __m512i const a = _mm512_unpacklo_epi8(l, h);
  __m512i const b = _mm512_unpackhi_epi8(l, h);
  _mm512_storeu_si512(out, _mm512_permutex2var_epi64(a, first, b));
  _mm512_storeu_si512(out + 32, _mm512_permutex2var_epi64(a, second, b));
}

/// `translate_block_avx512` into 16-bit words: each code's word from the byte tables `lo_table`
/// (low bytes) and `hi_table` (high bytes).
QTL_X86_AVX512_VBMI inline std::int64_t translate_block16_avx512(std::uint8_t const* in, std::uint16_t* out,
                                                                 std::int64_t stride, std::int64_t rows,
                                                                 std::int64_t cols, std::uint8_t const* lo_table,
                                                                 std::uint8_t const* hi_table) {
  byte_lut512 const lo = byte_lut512_load(lo_table);
  byte_lut512 const hi = byte_lut512_load(hi_table);
  std::int64_t const vec = cols - cols % 64;
  for (std::int64_t r = 0; r < rows; ++r) {
    prefetch_row_ahead(in, stride, r, rows, vec);
    for (std::int64_t c = 0; c < vec; c += 64) {
      translate64_avx512(lo, hi, in + r * stride + c, out + r * stride + c);
    }
  }
  return vec;
}

/// `translate_block16_avx512` of every block of a block row at once, row by row (the reason at
/// `block_row_tops_avx2`): `rows` rows of `k` codes, blocks `bk` wide (bk a multiple of 64
/// dividing k), block j by the byte tables at lo + 256 j and hi + 256 j.
QTL_X86_AVX512_VBMI inline void translate_rows16_avx512(std::uint8_t const* in, std::uint16_t* out, std::int64_t rows,
                                                        std::int64_t k, std::int64_t bk, std::uint8_t const* lo,
                                                        std::uint8_t const* hi) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < k / bk; ++j) {
      byte_lut512 const l = byte_lut512_load(lo + 256 * j);
      byte_lut512 const h = byte_lut512_load(hi + 256 * j);
      for (std::int64_t c = j * bk; c < (j + 1) * bk; c += 64) {
        translate64_avx512(l, h, in + r * k + c, out + r * k + c);
      }
    }
  }
}
}  // namespace x86
#endif  // ^^^ QTL_X86 ^^^

/// The entry points of qtl/convert.hpp's loops: the one place that chooses an x86 executor.
namespace convert_x86 {

/// True when the AVX2 executors run (QTL_X86, an AVX2 CPU, the level cap at avx2 or above).
inline bool has_avx2() {
#if QTL_X86
  return qtl::x86::capped(qtl::x86::cpu().avx2 ? qtl::x86::level::avx2 : qtl::x86::level::portable) >=
         qtl::x86::level::avx2;
#else
  return false;
#endif  // ^^^ QTL_X86 ^^^
}

/// The leading columns of a block's largest code magnitude (or'ed into `top`); returns how many.
inline std::int64_t block_top([[maybe_unused]] std::uint8_t const* q, [[maybe_unused]] std::int64_t stride,
                              [[maybe_unused]] std::int64_t rows, [[maybe_unused]] std::int64_t cols,
                              [[maybe_unused]] std::uint8_t& top) {
#if QTL_X86
  if (has_avx2()) {
    return x86::block_top_avx2(q, stride, rows, cols, top);
  }
#endif  // ^^^ QTL_X86 ^^^
  return 0;
}

/// The largest code magnitude of every block of a block row (`x86::block_row_tops_avx2`); false,
/// with nothing done, where no executor takes it (then the caller goes block by block).
inline bool block_row_tops([[maybe_unused]] std::uint8_t const* q, [[maybe_unused]] std::int64_t rows,
                           [[maybe_unused]] std::int64_t k, [[maybe_unused]] std::int64_t bk,
                           [[maybe_unused]] std::uint8_t* tops) {
#if QTL_X86
  if (has_avx2() && bk % 32 == 0 && k % bk == 0) {
    x86::block_row_tops_avx2(q, rows, k, bk, tops);
    return true;
  }
#endif  // ^^^ QTL_X86 ^^^
  return false;
}

/// The 16-bit lookup of a whole block row, row by row, block j by the byte tables at lo + 256 j
/// and hi + 256 j (`x86::translate_rows16_avx512`); false, with nothing done, where no executor
/// takes it.
inline bool translate_rows16([[maybe_unused]] std::uint8_t const* in, [[maybe_unused]] std::uint16_t* out,
                             [[maybe_unused]] std::int64_t rows, [[maybe_unused]] std::int64_t k,
                             [[maybe_unused]] std::int64_t bk, [[maybe_unused]] std::uint8_t const* lo,
                             [[maybe_unused]] std::uint8_t const* hi) {
#if QTL_X86
  if (x86::fp8_has_avx512() && bk % 64 == 0 && k % bk == 0) {
    x86::translate_rows16_avx512(in, out, rows, k, bk, lo, hi);
    return true;
  }
#endif  // ^^^ QTL_X86 ^^^
  return false;
}

/// The leading columns of `out = table[in]` over a block; returns how many.
inline std::int64_t translate_block([[maybe_unused]] std::uint8_t const* in, [[maybe_unused]] std::uint8_t* out,
                                    [[maybe_unused]] std::int64_t stride, [[maybe_unused]] std::int64_t rows,
                                    [[maybe_unused]] std::int64_t cols, [[maybe_unused]] std::uint8_t const* table) {
#if QTL_X86
  if (x86::fp8_has_avx512()) {
    return x86::translate_block_avx512(in, out, stride, rows, cols, table);
  }
  if (has_avx2()) {
    return x86::translate_block_avx2(in, out, stride, rows, cols, table);
  }
#endif  // ^^^ QTL_X86 ^^^
  return 0;
}

/// The leading columns of the 16-bit lookup `out = lo[in] | hi[in] << 8` over a block; returns how many.
inline std::int64_t translate_block16([[maybe_unused]] std::uint8_t const* in, [[maybe_unused]] std::uint16_t* out,
                                      [[maybe_unused]] std::int64_t stride, [[maybe_unused]] std::int64_t rows,
                                      [[maybe_unused]] std::int64_t cols, [[maybe_unused]] std::uint8_t const* lo,
                                      [[maybe_unused]] std::uint8_t const* hi) {
#if QTL_X86
  if (x86::fp8_has_avx512()) {
    return x86::translate_block16_avx512(in, out, stride, rows, cols, lo, hi);
  }
  if (has_avx2()) {
    // half the lookups where the table is sign-symmetric but for code 0xFF (any finite scale)
    bool symmetric = true;
    for (int c = 0; c < 0x7F && symmetric; ++c) {
      symmetric = lo[c | 0x80] == lo[c] && hi[c | 0x80] == (hi[c] ^ 0x80);
    }
    if (symmetric) {
      return x86::translate_block16_symmetric_avx2(in, out, stride, rows, cols, lo, hi,
                                                   static_cast<std::uint16_t>(lo[0xFF] | hi[0xFF] << 8));
    }
    return x86::translate_block16_avx2(in, out, stride, rows, cols, lo, hi);
  }
#endif  // ^^^ QTL_X86 ^^^
  return 0;
}

/// The leading columns of a float block's |x| bits max (folded into `top`); returns how many.
inline std::int64_t float_block_top([[maybe_unused]] float const* x, [[maybe_unused]] std::int64_t stride,
                                    [[maybe_unused]] std::int64_t rows, [[maybe_unused]] std::int64_t cols,
                                    [[maybe_unused]] std::uint32_t& top) {
#if QTL_X86
  if (has_avx2()) {
    return x86::block_top_avx2(x, stride, rows, cols, top);
  }
#endif  // ^^^ QTL_X86 ^^^
  return 0;
}

/// The leading elements of q[j] = fp8_encode_clamped<e4m3fn>(fl(x[j] * inv)) (qtl/x86/fp8.hpp's
/// AVX2 row quantizer: for |x * inv| <= 448 (1 + 6 ulp), the cast's finite-block domain, its
/// saturating encoder gives the same codes); returns how many.
inline std::int64_t cast_row([[maybe_unused]] float const* x, [[maybe_unused]] std::uint8_t* q,
                             [[maybe_unused]] std::int64_t n, [[maybe_unused]] float sf, [[maybe_unused]] float inv) {
#if QTL_X86
  if (has_avx2()) {
    return x86::quantize_row_avx2<float8_e4m3fn_t, fp8_nan::to_max, fp8_scale_op::multiply_reciprocal>(
        x, reinterpret_cast<float8_e4m3fn_t*>(q), n, sf, inv);
  }
#endif  // ^^^ QTL_X86 ^^^
  return 0;
}

/// The leading whole rows of one block row of FP8 block -> MXFP4 an executor does (block_k a
/// multiple of 32); returns how many.
inline std::int64_t mxfp4_rows([[maybe_unused]] std::uint8_t const* q, [[maybe_unused]] std::int64_t rows,
                               [[maybe_unused]] std::int64_t k, [[maybe_unused]] std::int64_t block_k,
                               [[maybe_unused]] float const* srow, [[maybe_unused]] std::int16_t const* exponents,
                               [[maybe_unused]] std::uint8_t* packed, [[maybe_unused]] std::uint8_t* scales) {
#if QTL_X86
  if (has_avx2() && block_k % qtl::convert::mxfp4_block == 0) {
    return x86::mxfp4_rows_avx2(q, rows, k, block_k, srow, exponents, packed, scales);
  }
#endif  // ^^^ QTL_X86 ^^^
  return 0;
}

}  // namespace convert_x86

}  // namespace qtl::detail
