#pragma once
/// \file
/// The x86 executors of the 128x4 block-scale bands (`qtl/detail/blockscale_band.hpp` draws the
/// transpose they do): W = 4 (SSE2), 8 (AVX2) or 16 (AVX-512F) words a step; a 16 x 16 block reads
/// 16 whole 64-byte lines of rows and writes 16 whole 64-byte lines of tiles. The entry points
/// `detail::band_x86` choose by the level the caller passes (`best_isa()`: the CPU's, capped by
/// `qtl::x86::level_cap()`); where `QTL_X86` is 0 they do nothing and the portable loop runs.
/// Every executor moves the same bytes to the same places (test/unit/blockscale_band_test.cpp).

#include <cstdint>
#include <cstring>

#include <qtl/detail/band_executor.hpp>
#include <qtl/x86/isa.hpp>

namespace qtl::detail {

#if QTL_X86
// The executors' steps are forced inline (and their loops over the W vectors unrolled): g++ 12 at
// -O2 otherwise calls the 16 x 16 transpose out of line and keeps the vectors in memory
// (docs/performance.md, blockscale).
#  define QTL_BAND_STEP __attribute__((always_inline)) inline

/// 4 x 4 words (SSE2, baseline x86-64): r[i] word j -> r[j] word i.
///     a0 a1 a2 a3        a0 b0 c0 d0
///     b0 b1 b2 b3   ->   a1 b1 c1 d1      unpack 32-bit pairs, then 64-bit pairs
QTL_BAND_STEP void transpose4(__m128i r[4]) {
  __m128i const ab_lo = _mm_unpacklo_epi32(r[0], r[1]);  // a0 b0 a1 b1
  __m128i const cd_lo = _mm_unpacklo_epi32(r[2], r[3]);  // c0 d0 c1 d1
  __m128i const ab_hi = _mm_unpackhi_epi32(r[0], r[1]);  // a2 b2 a3 b3
  __m128i const cd_hi = _mm_unpackhi_epi32(r[2], r[3]);  // c2 d2 c3 d3
  r[0] = _mm_unpacklo_epi64(ab_lo, cd_lo);
  r[1] = _mm_unpackhi_epi64(ab_lo, cd_lo);
  r[2] = _mm_unpacklo_epi64(ab_hi, cd_hi);
  r[3] = _mm_unpackhi_epi64(ab_hi, cd_hi);
}

/// 8 x 8 words (AVX2): the 4 x 4 steps inside each 128-bit half, then the halves exchanged.
///     after the in-half steps u[c] = (rows 0-3, col c | rows 0-3, col 4+c), u[4+c] the same for rows 4-7
///     col c = low halves of u[c], u[4+c];  col 4+c = their high halves
QTL_X86_AVX2 QTL_BAND_STEP void transpose8(__m256i r[8]) {
  __m256i t[8];
  __m256i u[8];
#  pragma GCC unroll 4
  for (int g = 0; g < 2; ++g) {
    t[4 * g + 0] = _mm256_unpacklo_epi32(r[4 * g], r[4 * g + 1]);
    t[4 * g + 1] = _mm256_unpackhi_epi32(r[4 * g], r[4 * g + 1]);
    t[4 * g + 2] = _mm256_unpacklo_epi32(r[4 * g + 2], r[4 * g + 3]);
    t[4 * g + 3] = _mm256_unpackhi_epi32(r[4 * g + 2], r[4 * g + 3]);
    u[4 * g + 0] = _mm256_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm256_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm256_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm256_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
#  pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
  }
}

// The AVX-512 steps as masked operations with every lane selected: the same instructions, but
// g++ 12 warns (-Wmaybe-uninitialized, PR 105593) about the undefined pass-through of the plain
// forms when they are inlined.
QTL_X86_AVX512F QTL_BAND_STEP __m512i unpacklo32(__m512i a, __m512i b) {
  return _mm512_maskz_unpacklo_epi32(0xFFFF, a, b);
}
QTL_X86_AVX512F QTL_BAND_STEP __m512i unpackhi32(__m512i a, __m512i b) {
  return _mm512_maskz_unpackhi_epi32(0xFFFF, a, b);
}
QTL_X86_AVX512F QTL_BAND_STEP __m512i unpacklo64(__m512i a, __m512i b) {
  return _mm512_maskz_unpacklo_epi64(0xFF, a, b);
}
QTL_X86_AVX512F QTL_BAND_STEP __m512i unpackhi64(__m512i a, __m512i b) {
  return _mm512_maskz_unpackhi_epi64(0xFF, a, b);
}
template <int Imm>
QTL_X86_AVX512F QTL_BAND_STEP __m512i shuffle128(__m512i a, __m512i b) {
  return _mm512_maskz_shuffle_i32x4(0xFFFF, a, b, Imm);
}

/// 16 x 16 words (AVX-512F): the 4 x 4 steps inside each 128-bit lane, then two rounds of lane
/// shuffles. After the in-lane steps u[4g + c] lane q = (rows 4g .. 4g+3, col 4q + c); col 4q + c
/// gathers lane q of u[c], u[4 + c], u[8 + c], u[12 + c]:
///     v = lanes 0,2 of u[c] | lanes 0,2 of u[4+c]     w = lanes 1,3 of .. (0x88 / 0xDD)
///     x, y the same of u[8+c], u[12+c]
///     col c = lanes 0,2 of v | lanes 0,2 of x,  col 8+c = lanes 1,3 of v, x,  col 4+c, 12+c from w, y
QTL_X86_AVX512F QTL_BAND_STEP void transpose16(__m512i r[16]) {
  __m512i u[16];
#  pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    __m512i const t0 = unpacklo32(r[4 * g], r[4 * g + 1]);
    __m512i const t1 = unpackhi32(r[4 * g], r[4 * g + 1]);
    __m512i const t2 = unpacklo32(r[4 * g + 2], r[4 * g + 3]);
    __m512i const t3 = unpackhi32(r[4 * g + 2], r[4 * g + 3]);
    u[4 * g + 0] = unpacklo64(t0, t2);
    u[4 * g + 1] = unpackhi64(t0, t2);
    u[4 * g + 2] = unpacklo64(t1, t3);
    u[4 * g + 3] = unpackhi64(t1, t3);
  }
#  pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    __m512i const v = shuffle128<0x88>(u[c], u[4 + c]);
    __m512i const w = shuffle128<0xDD>(u[c], u[4 + c]);
    __m512i const x = shuffle128<0x88>(u[8 + c], u[12 + c]);
    __m512i const y = shuffle128<0xDD>(u[8 + c], u[12 + c]);
    r[c] = shuffle128<0x88>(v, x);
    r[4 + c] = shuffle128<0x88>(w, y);
    r[8 + c] = shuffle128<0xDD>(v, x);
    r[12 + c] = shuffle128<0xDD>(w, y);
  }
}

// One executor per width: V the vector of W words, LOAD / STORE unaligned, STREAM a streaming
// store (to a 4W-byte aligned address), T the transpose. Each group asks for W*W/16 lines of the
// next band: as many as it reads. A staged swizzle writes each window of W tiles into an aligned
// buffer (L1) first and streams it out from there (`stream_window`).
#  define QTL_BAND_EXECUTORS(ATTR, W, V, LOAD, STORE, STREAM, T)                                               \
    ATTR inline void stream_window##W(byte_t* dst, byte_t const* stage) {                                      \
      constexpr index_t bytes = 512 * W;                                                                       \
      auto const head = static_cast<index_t>((64 - reinterpret_cast<std::uintptr_t>(dst) % 64) % 64);         \
      index_t const body = head + (bytes - head) / 64 * 64;                                                    \
      std::memcpy(dst, stage, static_cast<std::size_t>(head));                                                 \
      for (index_t i = head; i < body; i += 4 * W) {                                                           \
        STREAM(dst + i, LOAD(stage + i));                                                                      \
      }                                                                                                        \
      std::memcpy(dst + body, stage + body, static_cast<std::size_t>(bytes - body));                           \
    }                                                                                                          \
    template <band_store How>                                                                                  \
    ATTR inline void swizzle_blocks##W(byte_t const* const rows[128], byte_t* tiles, index_t kt, index_t n,    \
                                       band_prefetch& next) {                                                  \
      alignas(64) byte_t stage[How == band_store::staged ? 512 * W : 1];                                       \
      for (index_t const end = kt + W * n; kt < end; kt += W) {                                                \
        for (int lq = 0; lq < 32; lq += W / 4) {                                                               \
          V r[W];                                                                                              \
          _Pragma("GCC unroll 16") for (int i = 0; i < W; ++i) {                                               \
            r[i] = LOAD(rows[band_row(lq, i)] + 4 * kt);                                                       \
          }                                                                                                    \
          next.lines(W * W / 16);                                                                              \
          T(r);                                                                                                \
          byte_t* const t = (How == band_store::staged ? stage : tiles + 512 * kt) + 16 * lq;                  \
          _Pragma("GCC unroll 16") for (int j = 0; j < W; ++j) {                                               \
            How == band_store::stream ? STREAM(t + 512 * j, r[j]) : STORE(t + 512 * j, r[j]);                  \
          }                                                                                                    \
        }                                                                                                      \
        if constexpr (How == band_store::staged) {                                                             \
          stream_window##W(tiles + 512 * kt, stage);                                                           \
        }                                                                                                      \
      }                                                                                                        \
    }                                                                                                          \
    template <band_store How>                                                                                  \
    ATTR inline void unswizzle_blocks##W(byte_t const* tiles, byte_t* const rows[128], index_t kt, index_t n,  \
                                         band_prefetch& next) {                                                \
      static_assert(How != band_store::staged, "qtl: the un-swizzle streams its rows directly");               \
      for (int lq = 0; lq < 32; lq += W / 4) {                                                                 \
        for (index_t k = kt; k < kt + W * n; k += W) {                                                         \
          V r[W];                                                                                              \
          byte_t const* const t = tiles + 512 * k + 16 * lq;                                                   \
          _Pragma("GCC unroll 16") for (int j = 0; j < W; ++j) {                                               \
            r[j] = LOAD(t + 512 * j);                                                                          \
          }                                                                                                    \
          next.lines(W * W / 16);                                                                              \
          T(r);                                                                                                \
          _Pragma("GCC unroll 16") for (int i = 0; i < W; ++i) {                                               \
            byte_t* const p = rows[band_row(lq, i)] + 4 * k;                                                   \
            How == band_store::stream ? STREAM(p, r[i]) : STORE(p, r[i]);                                      \
          }                                                                                                    \
        }                                                                                                      \
      }                                                                                                        \
    }

QTL_BAND_STEP __m128i load4(byte_t const* p) { return _mm_loadu_si128(reinterpret_cast<__m128i const*>(p)); }
QTL_BAND_STEP void store4(byte_t* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }
QTL_BAND_STEP void stream4(byte_t* p, __m128i v) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), v); }
QTL_X86_AVX2 QTL_BAND_STEP __m256i load8(byte_t const* p) {
  return _mm256_loadu_si256(reinterpret_cast<__m256i const*>(p));
}
QTL_X86_AVX2 QTL_BAND_STEP void store8(byte_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
QTL_X86_AVX2 QTL_BAND_STEP void stream8(byte_t* p, __m256i v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v); }
QTL_X86_AVX512F QTL_BAND_STEP __m512i load16(byte_t const* p) { return _mm512_loadu_si512(p); }
QTL_X86_AVX512F QTL_BAND_STEP void store16(byte_t* p, __m512i v) { _mm512_storeu_si512(p, v); }
QTL_X86_AVX512F QTL_BAND_STEP void stream16(byte_t* p, __m512i v) {
  _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v);
}

QTL_BAND_EXECUTORS(, 4, __m128i, load4, store4, stream4, transpose4)
QTL_BAND_EXECUTORS(QTL_X86_AVX2, 8, __m256i, load8, store8, stream8, transpose8)
QTL_BAND_EXECUTORS(QTL_X86_AVX512F, 16, __m512i, load16, store16, stream16, transpose16)

#  undef QTL_BAND_EXECUTORS
#  undef QTL_BAND_STEP
#endif  // ^^^ QTL_X86 ^^^

/// The entry points of the band loops: the one place that chooses an x86 executor.
namespace band_x86 {

/// True where executors wider than 4 words exist.
inline constexpr bool wide = QTL_X86 != 0;

/// The widest executor this CPU runs (AVX-512F, AVX2, else SSE2), capped by `qtl::x86::level_cap()`.
inline band_isa best_isa() {
  qtl::x86::cpu_features const& c = qtl::x86::cpu();
  qtl::x86::level const l = c.avx512f ? qtl::x86::level::avx512
                            : c.avx2  ? qtl::x86::level::avx2
                            : c.sse2  ? qtl::x86::level::sse2
                                      : qtl::x86::level::portable;
  return static_cast<band_isa>(qtl::x86::capped(l));
}
static_assert(static_cast<int>(band_isa::avx512) == static_cast<int>(qtl::x86::level::avx512) &&
              static_cast<int>(band_isa::sse2) == static_cast<int>(qtl::x86::level::sse2));

/// The K-tiles [kt, kt + W*n) of a band by the W-wide x86 executor (W = 4: SSE2 unless `level` is
/// portable); false when there is none (then the portable loop does them).
template <int W, band_store How>
bool swizzle_blocks([[maybe_unused]] byte_t const* const* rows, [[maybe_unused]] byte_t* tiles,
                    [[maybe_unused]] index_t kt, [[maybe_unused]] index_t n, [[maybe_unused]] band_isa level,
                    [[maybe_unused]] band_prefetch& next) {
#if QTL_X86
  if constexpr (W == 16) {
    swizzle_blocks16<How>(rows, tiles, kt, n, next);
    return true;
  } else if constexpr (W == 8) {
    swizzle_blocks8<How>(rows, tiles, kt, n, next);
    return true;
  } else if (level != band_isa::portable) {
    swizzle_blocks4<How>(rows, tiles, kt, n, next);
    return true;
  }
#endif  // ^^^ QTL_X86 ^^^
  return false;
}
/// The un-swizzle of the same K-tiles; false when there is no x86 executor for them.
template <int W, band_store How>
bool unswizzle_blocks([[maybe_unused]] byte_t const* tiles, [[maybe_unused]] byte_t* const* rows,
                      [[maybe_unused]] index_t kt, [[maybe_unused]] index_t n, [[maybe_unused]] band_isa level,
                      [[maybe_unused]] band_prefetch& next) {
#if QTL_X86
  if constexpr (W == 16) {
    unswizzle_blocks16<How>(tiles, rows, kt, n, next);
    return true;
  } else if constexpr (W == 8) {
    unswizzle_blocks8<How>(tiles, rows, kt, n, next);
    return true;
  } else if (level != band_isa::portable) {
    unswizzle_blocks4<How>(tiles, rows, kt, n, next);
    return true;
  }
#endif  // ^^^ QTL_X86 ^^^
  return false;
}

/// Orders the executors' streaming stores before later stores.
inline void stream_fence() {
#if QTL_X86
  _mm_sfence();
#endif  // ^^^ QTL_X86 ^^^
}

}  // namespace band_x86

}  // namespace qtl::detail
