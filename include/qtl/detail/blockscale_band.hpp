#pragma once
/// \file
/// The executors of the 128x4 block-scale layout (`qtl/blockscale.hpp`, `qtl/moe.hpp`): one
/// 128-row band of scales, given as 128 row pointers (so that the callers can pad with a zero row
/// or gather rows through a permutation without copying them first), to and from its tiles.
///
/// The layout is a transpose of 32-bit words. A word is the 4 K-blocks of one row in one K-tile,
/// and line `l` of tile `kt` (16 bytes) holds the words (row l, kt), (l+32, kt), (l+64, kt),
/// (l+96, kt). So W consecutive words of W rows taken as "4 line-slots of W/4 consecutive lines"
/// are a W x W word matrix whose transpose is W/4 consecutive lines of W consecutive tiles:
///
///     rows (i = 4*dl + slot  ->  row lq + dl + 32*slot)      tiles kt .. kt+W-1
///     i=0  row lq      | w(kt) w(kt+1) .. w(kt+W-1) |        tile kt+j, lines lq .. lq+W/4-1
///     i=1  row lq+32   |                            |  ==>   = W words: column j of the matrix
///     i=2  row lq+64   |     W x W 32-bit words     |        (line lq: slots 0..3 = i 0..3,
///     i=3  row lq+96   |                            |         line lq+1: i 4..7, ...)
///     i=4  row lq+1    |                            |
///     ..
///
/// The un-swizzle is the same transpose read the other way. W is 4 (SSE2, and a portable loop of
/// 4-byte copies), 8 (AVX2) or 16 (AVX-512F): a 16 x 16 block reads 16 whole 64-byte lines of
/// rows and writes 16 whole 64-byte lines of tiles. The x86 executors are chosen once at run time
/// (the default build targets baseline x86-64); nvcc's host pass and other CPUs get the portable
/// loop. Every executor moves the same bytes to the same places (test/unit/blockscale_band_test.cpp
/// compares each one the CPU runs with the reference loop of `qtl/blockscale.hpp`).

#include <cstdint>
#include <cstring>
#include <qtl/view.hpp>
#include <type_traits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#  define QTL_BLOCKSCALE_X86 1
#  include <immintrin.h>
#endif  // ^^^ x86-64 GCC/Clang host ^^^

namespace qtl::detail {

using byte_t = unsigned char;  // may alias every scale type

/// The executors, slowest first; a level runs every narrower width too (for the K-tiles left over).
enum class band_isa { portable, sse2, avx2, avx512 };

/// The widest executor this CPU runs (checked once; `__builtin_cpu_supports` includes the OS's
/// saving of the YMM / ZMM state).
inline band_isa best_band_isa() {
#if defined(QTL_BLOCKSCALE_X86)
  static band_isa const best = [] {
    if (__builtin_cpu_supports("avx512f")) {
      return band_isa::avx512;
    }
    return __builtin_cpu_supports("avx2") ? band_isa::avx2 : band_isa::sse2;
  }();
  return best;
#else
  return band_isa::portable;
#endif  // ^^^ QTL_BLOCKSCALE_X86 ^^^
}

// ------------------------------------------------------------------------------------------------
// Executors. Each moves the whole K-tiles [kt, kt + W*n) of a band in groups of W/4 lines of W
// tiles; word i of a group is row `band_row(lq, i)`. The swizzle takes the groups K-tiles
// outermost, so that the tiles are written in windows of W*512 bytes (one 64-byte store per line
// group and tile for W = 16) while each of the W rows of a group is read 4W bytes at a time; the
// un-swizzle takes them lines outermost, so that each of its W output rows is written from start
// to end while its tiles are read 64 bytes of 512 at a time. The side read out of order is asked
// for one band ahead (`band_prefetch`); the hardware prefetchers do not follow it.
// ------------------------------------------------------------------------------------------------

/// How the executors write: ordinary stores; streaming stores (to an aligned destination); or
/// ordinary stores into an aligned buffer, streamed from there into a destination that is not
/// aligned (the swizzle only), each line that lies wholly inside a window of tiles.
enum class band_store { plain, stream, staged };

/// The next band's input, asked for (into L2) while a band runs, as many bytes as the executors
/// read: `count` spans of `bytes` each (the next band's 128 rows, or its tiles as one span), walked
/// in memory order. Empty (`count` 0) for the last band, and where the band is too large for
/// its successor to wait in L2 (`band_prefetch_bytes`).
struct band_prefetch {
  byte_t const* const* spans = nullptr;
  int count = 0;
  index_t bytes = 0;
  int span = 0;
  std::uintptr_t at = 0;   // next line to ask for in `spans[span]`
  std::uintptr_t end = 0;  // one past its last byte

  band_prefetch() = default;
  band_prefetch(byte_t const* const* s, int n, index_t b) : spans(s), count(b > 0 ? n : 0), bytes(b) { open(0); }

  /// Asks for the next `n` lines.
  void lines(int n) {
    for (; n > 0 && span < count; --n) {
#if defined(__GNUC__)
      __builtin_prefetch(reinterpret_cast<void const*>(at), 0, 2);
#endif  // ^^^ __GNUC__ ^^^
      at += 64;
      if (at >= end) {
        open(span + 1);
      }
    }
  }

 private:
  void open(int i) {
    span = i;
    if (i < count) {
      at = reinterpret_cast<std::uintptr_t>(spans[i]) / 64 * 64;
      end = reinterpret_cast<std::uintptr_t>(spans[i]) + static_cast<std::uintptr_t>(bytes);
    }
  }
};

/// Bands whose input is larger than this are not prefetched: the next one would not wait in L2
/// (1 MiB or more on the x86 cores of the last years) until its turn. Up to 2048 K-blocks a row.
inline constexpr index_t band_prefetch_bytes = index_t{256} << 10;

constexpr int band_row(int lq, int i) { return lq + i / 4 + 32 * (i % 4); }

/// Portable W = 4: word by word.
inline void swizzle_blocks4_portable(byte_t const* const rows[128], byte_t* tiles, index_t kt, index_t n) {
  for (index_t const end = kt + 4 * n; kt < end; kt += 4) {
    for (int lq = 0; lq < 32; ++lq) {
      for (int j = 0; j < 4; ++j) {
        for (int i = 0; i < 4; ++i) {
          std::memcpy(tiles + 512 * (kt + j) + 16 * lq + 4 * i, rows[band_row(lq, i)] + 4 * (kt + j), 4);
        }
      }
    }
  }
}
inline void unswizzle_blocks4_portable(byte_t const* tiles, byte_t* const rows[128], index_t kt, index_t n) {
  for (index_t const end = kt + 4 * n; kt < end; kt += 4) {
    for (int lq = 0; lq < 32; ++lq) {
      for (int j = 0; j < 4; ++j) {
        for (int i = 0; i < 4; ++i) {
          std::memcpy(rows[band_row(lq, i)] + 4 * (kt + j), tiles + 512 * (kt + j) + 16 * lq + 4 * i, 4);
        }
      }
    }
  }
}

#if defined(QTL_BLOCKSCALE_X86)
// The executors' steps are forced inline (and their loops over the W vectors unrolled): g++ 12 at
// -O2 otherwise calls the 16 x 16 transpose out of line and keeps the vectors in memory, which
// measured 2x slower on data in L2 (one core of a Sapphire Rapids guest).
#  define QTL_BAND_STEP __attribute__((always_inline)) inline
#  define QTL_BAND_AVX2 __attribute__((target("avx2")))
#  define QTL_BAND_AVX512 __attribute__((target("avx512f")))
#  define QTL_BAND_STEP_AVX2 __attribute__((target("avx2"), always_inline)) inline
#  define QTL_BAND_STEP_AVX512 __attribute__((target("avx512f"), always_inline)) inline

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
QTL_BAND_STEP_AVX2 void transpose8(__m256i r[8]) {
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
QTL_BAND_STEP_AVX512 __m512i unpacklo32(__m512i a, __m512i b) { return _mm512_maskz_unpacklo_epi32(0xFFFF, a, b); }
QTL_BAND_STEP_AVX512 __m512i unpackhi32(__m512i a, __m512i b) { return _mm512_maskz_unpackhi_epi32(0xFFFF, a, b); }
QTL_BAND_STEP_AVX512 __m512i unpacklo64(__m512i a, __m512i b) { return _mm512_maskz_unpacklo_epi64(0xFF, a, b); }
QTL_BAND_STEP_AVX512 __m512i unpackhi64(__m512i a, __m512i b) { return _mm512_maskz_unpackhi_epi64(0xFF, a, b); }
template <int Imm>
QTL_BAND_STEP_AVX512 __m512i shuffle128(__m512i a, __m512i b) {
  return _mm512_maskz_shuffle_i32x4(0xFFFF, a, b, Imm);
}

/// 16 x 16 words (AVX-512F): the 4 x 4 steps inside each 128-bit lane, then two rounds of lane
/// shuffles. After the in-lane steps u[4g + c] lane q = (rows 4g .. 4g+3, col 4q + c); col 4q + c
/// gathers lane q of u[c], u[4 + c], u[8 + c], u[12 + c]:
///     v = lanes 0,2 of u[c] | lanes 0,2 of u[4+c]     w = lanes 1,3 of .. (0x88 / 0xDD)
///     x, y the same of u[8+c], u[12+c]
///     col c = lanes 0,2 of v | lanes 0,2 of x,  col 8+c = lanes 1,3 of v, x,  col 4+c, 12+c from w, y
QTL_BAND_STEP_AVX512 void transpose16(__m512i r[16]) {
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
QTL_BAND_STEP_AVX2 __m256i load8(byte_t const* p) { return _mm256_loadu_si256(reinterpret_cast<__m256i const*>(p)); }
QTL_BAND_STEP_AVX2 void store8(byte_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
QTL_BAND_STEP_AVX2 void stream8(byte_t* p, __m256i v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v); }
QTL_BAND_STEP_AVX512 __m512i load16(byte_t const* p) { return _mm512_loadu_si512(p); }
QTL_BAND_STEP_AVX512 void store16(byte_t* p, __m512i v) { _mm512_storeu_si512(p, v); }
QTL_BAND_STEP_AVX512 void stream16(byte_t* p, __m512i v) { _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v); }

QTL_BAND_EXECUTORS(, 4, __m128i, load4, store4, stream4, transpose4)
QTL_BAND_EXECUTORS(QTL_BAND_AVX2, 8, __m256i, load8, store8, stream8, transpose8)
QTL_BAND_EXECUTORS(QTL_BAND_AVX512, 16, __m512i, load16, store16, stream16, transpose16)

#  undef QTL_BAND_EXECUTORS
#  undef QTL_BAND_STEP
#  undef QTL_BAND_AVX2
#  undef QTL_BAND_AVX512
#  undef QTL_BAND_STEP_AVX2
#  undef QTL_BAND_STEP_AVX512
#endif  // ^^^ QTL_BLOCKSCALE_X86 ^^^

// ------------------------------------------------------------------------------------------------
// Bands
// ------------------------------------------------------------------------------------------------

// The whole K-tiles left in multiples of W, [kt, kt + W*n) with n = (nk - kt) / W, by the W-wide
// executor (`level` picks SSE2 or the portable loop for W = 4, which stores plainly); returns the
// first K-tile left.
template <int W, band_store How>
index_t band_blocks(byte_t const* const* rows, byte_t* tiles, index_t kt, index_t nk, [[maybe_unused]] band_isa level,
                    [[maybe_unused]] band_prefetch& next) {
  index_t const n = (nk - kt) / W;
#if defined(QTL_BLOCKSCALE_X86)
  if constexpr (W == 16) {
    swizzle_blocks16<How>(rows, tiles, kt, n, next);
  } else if constexpr (W == 8) {
    swizzle_blocks8<How>(rows, tiles, kt, n, next);
  } else if (level != band_isa::portable) {
    swizzle_blocks4<How>(rows, tiles, kt, n, next);
  } else
#endif  // ^^^ QTL_BLOCKSCALE_X86 ^^^
  {
    static_assert(W == 4);
    swizzle_blocks4_portable(rows, tiles, kt, n);
  }
  return kt + W * n;
}
template <int W, band_store How>
index_t band_blocks(byte_t const* tiles, byte_t* const* rows, index_t kt, index_t nk, [[maybe_unused]] band_isa level,
                    [[maybe_unused]] band_prefetch& next) {
  index_t const n = (nk - kt) / W;
#if defined(QTL_BLOCKSCALE_X86)
  if constexpr (W == 16) {
    unswizzle_blocks16<How>(tiles, rows, kt, n, next);
  } else if constexpr (W == 8) {
    unswizzle_blocks8<How>(tiles, rows, kt, n, next);
  } else if (level != band_isa::portable) {
    unswizzle_blocks4<How>(tiles, rows, kt, n, next);
  } else
#endif  // ^^^ QTL_BLOCKSCALE_X86 ^^^
  {
    static_assert(W == 4);
    unswizzle_blocks4_portable(tiles, rows, kt, n);
  }
  return kt + W * n;
}

// The K-tiles done 4 at a time before the wide executors, so that these read (swizzle) or write
// (un-swizzle) rows at 64-byte boundaries where the rows start a multiple of 16 bytes past one (as
// std::vector buffers do): 0 where `row0` (the band's first row) is aligned, or not to 16 bytes,
// or the row too short. Only the speed depends on it.
inline index_t band_head(byte_t const* row0, index_t nk, band_isa level) {
  auto const head = static_cast<index_t>((64 - reinterpret_cast<std::uintptr_t>(row0) % 64) % 64) / 4;
  return level >= band_isa::avx2 && head % 4 == 0 && head < nk ? head : 0;
}

// The executors from widest to narrowest after the head; returns the first K-tile left (fewer
// than 4). `How`: their stores; `Edges`: also in the head and the 4-wide K-tiles at the end (else
// plain stores there).
template <band_store How, bool Edges, class Src, class Dst>
index_t band_widths(Src src, Dst dst, index_t nk, band_isa level, index_t head, band_prefetch& next) {
  constexpr band_store edges = Edges ? How : band_store::plain;
  index_t kt = head != 0 ? band_blocks<4, edges>(src, dst, 0, head, level, next) : 0;
#if defined(QTL_BLOCKSCALE_X86)
  if (level == band_isa::avx512) {
    kt = band_blocks<16, How>(src, dst, kt, nk, level, next);
  }
  if (level >= band_isa::avx2) {
    kt = band_blocks<8, How>(src, dst, kt, nk, level, next);
  }
#endif  // ^^^ QTL_BLOCKSCALE_X86 ^^^
  return band_blocks<4, edges>(src, dst, kt, nk, level, next);
}

/// Lays out one 128-row band: `rows[r]` (r < 128) holds the `cols` K-blocks of row r of the band
/// (a zero row for padding rows), `tiles` receives the band's `pad_cols(cols) / 4` tiles of 512
/// bytes, the K-blocks past `cols` zero. With `stream` the tiles are written with streaming stores
/// (staged where `tiles` is not 64-byte aligned, see `band_store`; the portable executor ignores
/// it); the caller fences (`band_stream_fence`). `next`: the 128 rows of the band laid out after
/// this one (same `cols`), asked for meanwhile.
inline void swizzle_band_128x4(byte_t const* const rows[128], index_t cols, byte_t* tiles,
                               band_isa level = best_band_isa(), bool stream = false,
                               byte_t const* const* next = nullptr) {
  index_t const nk = cols / 4;  // whole K-tiles
  index_t const head = band_head(rows[0], nk, level);
  band_prefetch ahead(next, next != nullptr && 128 * cols <= band_prefetch_bytes ? 128 : 0, cols);
  index_t kt = !stream ? band_widths<band_store::plain, true>(rows, tiles, nk, level, head, ahead)
               : reinterpret_cast<std::uintptr_t>(tiles) % 64 == 0
                   ? band_widths<band_store::stream, true>(rows, tiles, nk, level, head, ahead)
                   : band_widths<band_store::staged, true>(rows, tiles, nk, level, head, ahead);
  for (; 4 * kt < cols; ++kt) {  // fewer than 4 K-tiles left, the last maybe partial (zero-filled)
    for (int line = 0; line < 32; ++line) {
      for (int slot = 0; slot < 4; ++slot) {
        for (index_t c = 0; c < 4; ++c) {
          index_t const k = 4 * kt + c;
          tiles[512 * kt + 16 * line + 4 * slot + c] = k < cols ? rows[line + 32 * slot][k] : byte_t{0};
        }
      }
    }
  }
}

/// The inverse of `swizzle_band_128x4`: the tiles back into the `cols` K-blocks of each row
/// `rows[r]` (rows past the matrix may all point at one scratch row); tile padding is not read.
/// `stream` as there, used only when every row pointer is 64-byte aligned, or all are the same
/// multiple of 16 bytes past a boundary, and only by the 8- and 16-wide executors: the first and
/// last bytes of a row (the head and the 4-wide end) share their lines with other rows and are
/// written with ordinary stores. `next`: the tiles of the band read after this one (same `cols`),
/// asked for meanwhile.
inline void unswizzle_band_128x4(byte_t const* tiles, index_t cols, byte_t* const rows[128],
                                 band_isa level = best_band_isa(), bool stream = false,
                                 byte_t const* next = nullptr) {
  index_t const nk = cols / 4;
  index_t const head = band_head(rows[0], nk, level);
  for (int r = 0; r < 128 && stream; ++r) {
    stream = (reinterpret_cast<std::uintptr_t>(rows[r]) + 4 * static_cast<std::uintptr_t>(head)) % 64 == 0;
  }
  index_t const bytes = 128 * (nk + (cols % 4 != 0)) * 4;
  band_prefetch ahead(&next, next != nullptr && bytes <= band_prefetch_bytes ? 1 : 0, bytes);
  index_t const kt = stream ? band_widths<band_store::stream, false>(tiles, rows, nk, level, head, ahead)
                            : band_widths<band_store::plain, false>(tiles, rows, nk, level, head, ahead);
  for (int line = 0; line < 32; ++line) {  // fewer than 4 K-tiles left, the last maybe partial
    for (int slot = 0; slot < 4; ++slot) {
      for (index_t k = 4 * kt; k < cols; ++k) {
        rows[line + 32 * slot][k] = tiles[512 * (k / 4) + 16 * line + 4 * slot + k % 4];
      }
    }
  }
}

/// Outputs of at least this many bytes are written with streaming stores by `swizzle_blockscale`
/// and `unswizzle_blockscale`: twice the L2 of the machines measured, beyond which ordinary stores
/// read every output line from memory before they write it. Measured (qtl_bench_blockscale, one
/// core of a 2-core Sapphire Rapids guest, 16 MiB, 3 runs each, same build with the threshold at
/// 64 MiB): swizzle 5.8-6.5 -> 2.1-2.4 ms, unswizzle 4.8-5.3 -> 2.0-2.5 ms, with 16-byte offset
/// buffers (staged) 5.3-6.4 -> 2.4-3.3 and 5.1-5.9 -> 3.1-3.7 ms (memcpy 2.4-3.2 ms). The earlier
/// 64 MiB came from a 2-core EPYC, where a 16 MiB unswizzle lost 20% streaming; there a result
/// this size still fit in its 32 MiB last-level cache.
inline constexpr index_t band_stream_bytes = index_t{4} << 20;

/// Orders the streaming stores of the executors before later stores (one fence per operation).
inline void band_stream_fence() {
#if defined(QTL_BLOCKSCALE_X86)
  _mm_sfence();
#endif  // ^^^ QTL_BLOCKSCALE_X86 ^^^
}

}  // namespace qtl::detail
