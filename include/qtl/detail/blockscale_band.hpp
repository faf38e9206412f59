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
#include <type_traits>

#include <qtl/detail/band_executor.hpp>
#include <qtl/view.hpp>
#include <qtl/x86/blockscale.hpp>

namespace qtl::detail {

/// The widest executor this CPU runs under `qtl::x86::level_cap()` (portable where `QTL_X86` is 0).
inline band_isa best_band_isa() { return band_x86::best_isa(); }

// ------------------------------------------------------------------------------------------------
// Executors. Each moves the whole K-tiles [kt, kt + W*n) of a band in groups of W/4 lines of W
// tiles; word i of a group is row `band_row(lq, i)`. The swizzle takes the groups K-tiles
// outermost, so that the tiles are written in windows of W*512 bytes (one 64-byte store per line
// group and tile for W = 16) while each of the W rows of a group is read 4W bytes at a time; the
// un-swizzle takes them lines outermost, so that each of its W output rows is written from start
// to end while its tiles are read 64 bytes of 512 at a time. The side read out of order is asked
// for one band ahead (`band_prefetch`); the hardware prefetchers do not follow it.
// ------------------------------------------------------------------------------------------------

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

// ------------------------------------------------------------------------------------------------
// Bands
// ------------------------------------------------------------------------------------------------

// The whole K-tiles left in multiples of W, [kt, kt + W*n) with n = (nk - kt) / W, by the W-wide
// x86 executor (`band_x86`: `level` picks SSE2 or the portable loop for W = 4, which stores
// plainly); returns the first K-tile left.
template <int W, band_store How>
index_t band_blocks(byte_t const* const* rows, byte_t* tiles, index_t kt, index_t nk, band_isa level,
                    band_prefetch& next) {
  index_t const n = (nk - kt) / W;
  if (!band_x86::swizzle_blocks<W, How>(rows, tiles, kt, n, level, next)) {
    static_assert(W == 4 || band_x86::wide, "qtl: only the x86 executors are wider than 4");
    swizzle_blocks4_portable(rows, tiles, kt, n);
  }
  return kt + W * n;
}
template <int W, band_store How>
index_t band_blocks(byte_t const* tiles, byte_t* const* rows, index_t kt, index_t nk, band_isa level,
                    band_prefetch& next) {
  index_t const n = (nk - kt) / W;
  if (!band_x86::unswizzle_blocks<W, How>(tiles, rows, kt, n, level, next)) {
    static_assert(W == 4 || band_x86::wide, "qtl: only the x86 executors are wider than 4");
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
  if constexpr (band_x86::wide) {
    if (level == band_isa::avx512) {
      kt = band_blocks<16, How>(src, dst, kt, nk, level, next);
    }
    if (level >= band_isa::avx2) {
      kt = band_blocks<8, How>(src, dst, kt, nk, level, next);
    }
  }
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
/// read every output line from memory before they write it (docs/performance.md, blockscale).
inline constexpr index_t band_stream_bytes = index_t{4} << 20;

/// Orders the streaming stores of the executors before later stores (one fence per operation).
inline void band_stream_fence() { band_x86::stream_fence(); }

}  // namespace qtl::detail
