#pragma once
/// \file
/// Marlin layouts on the host (`docs/spec/marlin.md`): GPTQ and AWQ int32 weights repacked into
/// Marlin's tiles and back, the scale and zero-point permutations, and the stable act-order sort.
/// The index maps live in <qtl/element/marlin.hpp>; <qtl/cuda/marlin.cuh> runs them on the GPU.
///
///   repack_gptq    qweight [K/pf, N] (GPTQ: code k in slot k%pf of row k/pf), sort_indices [K] or
///                  empty                                   -> Marlin [K/16, N*16/pf]
///   unrepack_gptq  Marlin, sort_indices                    -> qweight [K/pf, N] (exact inverse)
///   repack_awq     qweight [K, N/pf] (AWQ: slot i of word c holds column pf*c + {0,2,4,6,1,3,5,7}[i])
///   unrepack_awq   Marlin                                  -> AWQ qweight (exact inverse)
///   repack_codes   codes [K, N] (the torch reference `marlin_weights`), unrepack_codes
///   permute_scales / unpermute_scales   [G, N] of any element type, columns moved
///   zero_points    codes [G, N] -> [G, N/pf];  awq_zero_points  AWQ qzeros [G, N/pf] -> [G, N/pf]
///   unzero_points  Marlin zero points -> codes [G, N]
///   sort_g_idx     g_idx -> (sorted g_idx, sort_indices), a STABLE sort
///   FP8 / FP4 weight-only Marlin (the bytes as a GPTQ-style qweight, the exponent fold, the
///                  NVFP4/MXFP4 scale steps): <qtl/marlin_fp.hpp>
///
/// Act-order: Marlin row k' is checkpoint row sort_indices[k'] (the peers' `perm`), so
/// repack_gptq(qweight, s) == repack_codes(unpack_rows(qweight)[s, :]). `sort_indices` is an input
/// because the peers compute it with torch's unstable argsort (docs/spec/marlin.md §4.3): to reproduce a
/// peer's bytes, pass its indices; `sort_g_idx` defines a stable order of its own.
///
/// Checks (every one throws before anything is written; the peers' CUDA host code leaves rows
/// unwritten where it should refuse): K % 16 (A8: K % 32, which the peers do not check), N % 64,
/// the views' extents, `sort_indices` a permutation of [0, K) and not with A8 (`unsupported_error`,
/// as the peers' "Unsupported repack config"), codes inside [0, 2^bits). Marlin-side views (the
/// repacked weight) must be contiguous: it is one run of tiles.
///
/// MoE: repack_gptq has an overload on [E, ...] views (`view3d`), one expert after another (the
/// GPU launcher does all experts in one launch). Compile-time shapes: repack_gptq<fixed_shape<...>>
/// and unrepack_gptq on std::array run in constant evaluation; shapes the layout cannot take do
/// not compile.
///
/// Speed: the 4-bit A16 layout has fast paths, with SSE2 and AVX2 executors in
/// <qtl/x86/marlin.hpp>: GPTQ through a byte-transpose tile kernel, AWQ straight into the tiles
/// (one nibble transpose per 8 words), act-order as row sorting of whole cache lines (AVX2; below
/// it, a gather into GPTQ-packed bands). The other layouts and strided views run the generic
/// word-by-word loop. Measured figures: docs/performance.md.

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <qtl/element/marlin.hpp>
#include <qtl/error.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>
#include <qtl/x86/marlin.hpp>

namespace qtl::marlin {

// -------------------------------------------------------------------------------------------------
// Element functions shared with the CUDA kernels: one output word each.
// -------------------------------------------------------------------------------------------------

/// Marlin word `f` of a [K, N] weight whose code (k, n) is `code(k, n)`.
template <class L, class Code>
QTL_HOST_DEVICE constexpr std::uint32_t marlin_word(index_t N, index_t f, Code const& code) {
  std::uint32_t word = 0;
  QTL_UNROLL
  for (int t = 0; t < L::pack; ++t) {
    index_t k = 0, n = 0;
    L::code_of(N, f, t, k, n);
    word |= (code(k, n) & L::mask) << (L::bits * t);
  }
  return word;
}

/// Code (k, n) of a contiguous Marlin weight `m` of a [K, N] matrix.
template <class L>
QTL_HOST_DEVICE constexpr std::uint32_t marlin_code(std::int32_t const* m, index_t N, index_t k, index_t n) {
  int slot = 0;
  index_t const f = L::flat_word(N, k, n, slot);
  return (static_cast<std::uint32_t>(m[f]) >> (L::bits * slot)) & L::mask;
}

/// GPTQ word (r, n) of the checkpoint qweight [K/pf, N] that Marlin weight `m` came from; `inv` is
/// the inverse of sort_indices (checkpoint row -> Marlin row), or null without act-order.
template <class L>
QTL_HOST_DEVICE constexpr std::uint32_t gptq_word_of_marlin(std::int32_t const* m, std::int32_t const* inv,
                                                            index_t N, index_t r, index_t n) {
  std::uint32_t word = 0;
  QTL_UNROLL
  for (int j = 0; j < L::pack; ++j) {
    index_t const k = r * L::pack + j;
    index_t const km = inv != nullptr ? inv[k] : k;
    word |= marlin_code<L>(m, N, km, n) << (L::bits * j);
  }
  return word;
}

/// AWQ word (k, c) of the AWQ qweight [K, N/pf] that Marlin weight `m` came from.
template <class L>
QTL_HOST_DEVICE constexpr std::uint32_t awq_word_of_marlin(std::int32_t const* m, index_t N, index_t k, index_t c) {
  std::uint32_t word = 0;
  QTL_UNROLL
  for (int i = 0; i < L::pack; ++i) {
    word |= marlin_code<L>(m, N, k, c * L::pack + awq_column<L::bits>(i)) << (L::bits * i);
  }
  return word;
}

/// Marlin zero-point word (g, w) from the code row `zp` (column n at zp[n]).
template <int Bits, act_width A, class Row>
QTL_HOST_DEVICE constexpr std::uint32_t zero_point_word(Row const& zp, index_t w) {
  std::uint32_t word = 0;
  QTL_UNROLL
  for (int t = 0; t < 32 / Bits; ++t) {
    word |= (static_cast<std::uint32_t>(zp(zero_point_source<Bits, A>(w, t))) & ((1u << Bits) - 1u)) << (Bits * t);
  }
  return word;
}

namespace detail {
[[noreturn]] inline void fail_shape(std::string const& op, std::string const& what) {
  throw shape_error(op + ": " + what);
}
}  // namespace detail

/// The name of a repack in errors: "qtl::marlin::repack_gptq<4>", "…<8, a8>".
inline std::string op_name(char const* op, int bits, act_width a) {
  return std::string("qtl::marlin::") + op + "<" + std::to_string(bits) + (a == act_width::a8 ? ", a8>" : ">");
}

/// Checks that a [K, N] weight fits the tiles of layout `L` (K a multiple of `L::k_multiple`, N of
/// 64) before the caller sizes its outputs; `op` names the call in the error.
/// @throws shape_error naming K or N and the multiple
template <class L>
void check_kn(std::string const& op, index_t K, index_t N) {
  if (K < 0 || K % L::k_multiple != 0) {
    detail::fail_shape(op, "K = " + std::to_string(K) + " is not a multiple of " + std::to_string(L::k_multiple) +
                               (L::a8 ? " (the 8-bit-activation layout has 32-row tiles)" : " (the tile height)"));
  }
  if (N < 0 || N % L::n_multiple != 0) {
    detail::fail_shape(op, "N = " + std::to_string(N) + " is not a multiple of 64 (the repack's tile width)");
  }
}

namespace detail {

template <class T, int R>
void check_extents(std::string const& op, char const* what, view<T, R> v, index_t rows, index_t cols) {
  if (v.extent[R - 2] != rows || v.extent[R - 1] != cols) {
    fail_shape(op, std::string(what) + " is [" + std::to_string(v.extent[R - 2]) + ", " +
                       std::to_string(v.extent[R - 1]) + "], it must be [" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "]");
  }
}

template <class T>
void check_contiguous(std::string const& op, char const* what, view2d<T> v) {
  if (!v.is_contiguous()) {
    fail_shape(op, std::string(what) + " must be contiguous (a Marlin weight is one run of tiles)");
  }
}

// The [K, N] of a Marlin weight [K/16, N*16/pf], checked (integer N, the layout's multiples,
// contiguous).
template <class L>
void marlin_kn(std::string const& op, view2d<std::int32_t const> m, index_t& K, index_t& N) {
  if (m.extent[1] * L::pack % 16 != 0) {
    fail_shape(op, "the Marlin weight has " + std::to_string(m.extent[1]) + " columns, not N*16/" +
                       std::to_string(L::pack) + " for an integer N");
  }
  K = m.extent[0] * 16;
  N = m.extent[1] * L::pack / 16;
  check_kn<L>(op, K, N);
  check_contiguous(op, "the Marlin weight", m);
}

// sort_indices: empty or a permutation of [0, K); returns its inverse (empty when it is empty).
template <class L>
std::vector<std::int32_t> check_sort_indices(std::string const& op, view1d<std::int32_t const> s, index_t K) {
  std::vector<std::int32_t> inv;
  if (s.extent[0] == 0) {
    return inv;
  }
  if constexpr (L::a8) {
    throw unsupported_error(op + ": act-order (sort_indices) is not supported with the 8-bit-activation "
                                 "layout (the peers refuse it: \"Unsupported repack config\")");
  }
  if (s.extent[0] != K) {
    fail_shape(op, "sort_indices has " + std::to_string(s.extent[0]) + " entries, K = " + std::to_string(K));
  }
  inv.assign(static_cast<std::size_t>(K), -1);
  for (index_t i = 0; i < K; ++i) {
    std::int32_t const v = s(i);
    if (v < 0 || v >= K || inv[static_cast<std::size_t>(v)] != -1) {
      throw value_error(op + ": sort_indices[" + std::to_string(i) + "] = " + std::to_string(v) +
                        (v < 0 || v >= K ? " is outside [0, K)" : " repeats an earlier entry") +
                        ": sort_indices must be a permutation of [0, " + std::to_string(K) + ")");
    }
    inv[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(i);
  }
  return inv;
}

template <int Bits>
void check_codes(std::string const& op, char const* what, view2d<std::int32_t const> q) {
  for (index_t i = 0; i < q.extent[0]; ++i) {
    for (index_t j = 0; j < q.extent[1]; ++j) {
      std::int32_t const v = q(i, j);
      if (v < 0 || v >= (1 << Bits)) {
        throw value_error(op + ": " + what + "(" + std::to_string(i) + ", " + std::to_string(j) + ") = " +
                          std::to_string(v) + " is outside [0, " + std::to_string((1 << Bits) - 1) +
                          "], the range of a " + std::to_string(Bits) + "-bit code");
      }
    }
  }
}

// Marlin words [0, words) of a [K, N] weight by `code`: the tile-by-tile reference loop.
template <class L, class Code>
void write_marlin(index_t N, index_t words, Code const& code, std::int32_t* out) {
  for (index_t f = 0; f < words; ++f) {
    out[f] = static_cast<std::int32_t>(marlin_word<L>(N, f, code));
  }
}

// The fast path of the A16 4-bit layout. A tile (kt, nt) reads two GPTQ-packed rows of 64
// columns, row0 (k 0..7) and row1 (k 8..15); word w = 16*cc + 4*l + warp takes byte l of the words
// A = row0[c], B = row1[c], C = row0[c+8], D = row1[c+8] at column c = 16*warp + cc and holds,
// from slot 0 up: lo(A), lo(B), lo(C), lo(D), hi(A), hi(B), hi(C), hi(D) (of that byte).
//   x = lo nibbles of A | lo of B << 4, per byte      y = hi nibbles of A | hi of B << 4
// so word (cc, l, warp) = bytes [x_l, x'_l, y_l, y'_l] (x', y' from C, D): a 4x4 byte transpose.
// `ncols` (a multiple of 64) columns from row0/row1 give ncols/64 consecutive tiles at `out`.
inline void repack4_a16_tile_row_portable(std::int32_t const* row0, std::int32_t const* row1, index_t ncols,
                                          std::int32_t* out) {
  for (index_t n0 = 0; n0 < ncols; n0 += 64, out += 128) {
    for (int warp = 0; warp < 4; ++warp) {
      for (int cc = 0; cc < 8; ++cc) {
        index_t const c = n0 + 16 * warp + cc;
        auto const a = static_cast<std::uint32_t>(row0[c]), b = static_cast<std::uint32_t>(row1[c]);
        auto const cw = static_cast<std::uint32_t>(row0[c + 8]), d = static_cast<std::uint32_t>(row1[c + 8]);
        std::uint32_t const x = (a & 0x0f0f0f0fu) | ((b & 0x0f0f0f0fu) << 4);
        std::uint32_t const y = ((a >> 4) & 0x0f0f0f0fu) | (b & 0xf0f0f0f0u);
        std::uint32_t const x2 = (cw & 0x0f0f0f0fu) | ((d & 0x0f0f0f0fu) << 4);
        std::uint32_t const y2 = ((cw >> 4) & 0x0f0f0f0fu) | (d & 0xf0f0f0f0u);
        for (int l = 0; l < 4; ++l) {
          int const s = 8 * l;
          std::uint32_t const word = ((x >> s) & 0xffu) | (((x2 >> s) & 0xffu) << 8) | (((y >> s) & 0xffu) << 16) |
                                     (((y2 >> s) & 0xffu) << 24);
          out[16 * cc + 4 * l + warp] = static_cast<std::int32_t>(word);
        }
      }
    }
  }
}

// The same, by the widest x86 executor that runs (qtl/x86/marlin.hpp), else the portable loop.
inline void repack4_a16_tile_row(std::int32_t const* row0, std::int32_t const* row1, index_t ncols, std::int32_t* out) {
#if QTL_X86
  x86::level const l = x86::marlin::marlin_level();
  if (l >= x86::level::avx2) {
    x86::marlin::repack4_a16_tile_row_avx2(row0, row1, ncols, out);
    return;
  }
  if (l >= x86::level::sse2) {
    x86::marlin::repack4_a16_tile_row(row0, row1, ncols, out);
    return;
  }
#endif  // ^^^ QTL_X86 ^^^
  repack4_a16_tile_row_portable(row0, row1, ncols, out);
}

// One GPTQ-packed band row of act-order: band[n] holds in nibble j the code of the row that
// rows[j] points at (a slice row of 8 packed codes) in nibble sh[j]/4, for n < ncols.
// Per column, OR over the 8 rows: g++ vectorises this order (not "per row, over the columns").
inline void gather_band(std::uint32_t const* const (&rows)[8], std::uint32_t const (&sh)[8], index_t ncols,
                        std::int32_t* band) {
  for (index_t n = 0; n < ncols; ++n) {
    std::uint32_t a = 0;
    for (int j = 0; j < 8; ++j) a |= ((rows[j][n] >> sh[j]) & 15u) << (4 * j);
    band[n] = static_cast<std::int32_t>(a);
  }
}

// Asks for the cache lines of [p, p + bytes) (a hint; nothing where the compiler has no builtin).
inline void prefetch_lines(void const* p, index_t bytes) {
#if defined(__GNUC__) || defined(__clang__)
  for (index_t b = 0; b < bytes; b += 64) __builtin_prefetch(static_cast<char const*>(p) + b);
#else
  (void)p;
  (void)bytes;
#endif
}

// Columns per block of the act-order and AWQ paths: the K x 128 slice of the input they gather
// from (K/8 x 128 words: 512 KiB at K = 8192) stays in L2 while its tiles are written.
inline constexpr index_t band_cols = 128;

// Act-order, A16 4-bit, without AVX2: for each 128-column block, the K/8 x 128 slice of the
// qweight is copied into a contiguous buffer (rows of the qweight itself are N words apart, a
// stride that maps them onto a few L2 sets); then for each k-tile the 16 rows
// sort_indices[16kt ..] are gathered from it into two GPTQ-packed rows (band), which the tile
// kernel above repacks.
inline void repack4_a16_act_order(view2d<std::int32_t const> q, view1d<std::int32_t const> s, index_t K, index_t N,
                                  std::int32_t* out) {
  constexpr index_t slice_ahead = 4;
  alignas(64) std::int32_t band[2][band_cols];
  aligned_vector<std::uint32_t> slice(static_cast<std::size_t>(K / 8 * band_cols));
  for (index_t nb = 0; nb < N; nb += band_cols) {
    index_t const w = N - nb < band_cols ? N - nb : band_cols;
    for (index_t r = 0; r < K / 8; ++r) {
      std::int32_t const* row = &q(r, nb);
      // Each row's run is short (w words) and in a page of its own: the prefetchers do not run
      // ahead of it, so ask for the run a few rows down.
      if (r + slice_ahead < K / 8) prefetch_lines(&q(r + slice_ahead, nb), w * 4);
      std::uint32_t* const dst = slice.data() + r * band_cols;
      for (index_t n = 0; n < w; ++n) dst[n] = static_cast<std::uint32_t>(row[n]);
    }
    for (index_t kt = 0; kt < K / 16; ++kt) {
      for (int r = 0; r < 2; ++r) {
        std::uint32_t const* rows[8];
        std::uint32_t sh[8];
        for (int j = 0; j < 8; ++j) {
          std::int32_t const src = s(16 * kt + 8 * r + j);
          rows[j] = slice.data() + (src / 8) * band_cols;
          sh[j] = static_cast<std::uint32_t>(4 * (src % 8));
        }
        gather_band(rows, sh, w, band[r]);
      }
      repack4_a16_tile_row(band[0], band[1], w, out + (kt * (N / 64) + nb / 64) * 128);
    }
  }
}

// An 8x8 transpose of nibbles: afterwards nibble j of word i is what nibble i of word j was.
inline void transpose_nibbles_8x8(std::uint32_t (&v)[8]) {
  auto swap = [&](int i, int j, int shift, std::uint32_t mask) {
    std::uint32_t const t = ((v[i] >> shift) ^ v[j]) & mask;
    v[j] ^= t;
    v[i] ^= t << shift;
  };
  for (int i = 0; i < 4; ++i) swap(i, i + 4, 16, 0x0000ffffu);
  for (int i : {0, 1, 4, 5}) swap(i, i + 2, 8, 0x00ff00ffu);
  for (int i : {0, 2, 4, 6}) swap(i, i + 1, 4, 0x0f0f0f0fu);
}

// GPTQ -> AWQ packing of 8 rows: for each of `count` word columns c, the 8 GPTQ words
// band[8c .. 8c + 7] (columns 8c + m, nibble j = row j) become rows[j][c], the AWQ word of row j
// (slot i = column 8c + awq_column(i)).
inline void awq4_unband_portable(std::int32_t const* band, index_t count, std::int32_t* const (&rows)[8]) {
  for (index_t c = 0; c < count; ++c) {
    std::uint32_t v[8];
    for (int i = 0; i < 8; ++i) v[i] = static_cast<std::uint32_t>(band[8 * c + awq_column<4>(i)]);
    transpose_nibbles_8x8(v);
    for (int j = 0; j < 8; ++j) rows[j][c] = static_cast<std::int32_t>(v[j]);
  }
}

inline void awq4_unband(std::int32_t const* band, index_t count, std::int32_t* const (&rows)[8]) {
#if QTL_X86
  if (count % 8 == 0 && x86::marlin::marlin_level() >= x86::level::avx2) {
    x86::marlin::awq4_unband_avx2(band, count, rows);
    return;
  }
#endif  // ^^^ QTL_X86 ^^^
  awq4_unband_portable(band, count, rows);
}

// AWQ-packed rows straight into Marlin tiles, the A16 4-bit layout: rows[k] (k = 0..15, the
// k-tile's rows) point at AWQ word column 0 of a run of `ncols` (a multiple of 64) columns, which
// become ncols/64 consecutive tiles at `out`. Word (cc, l, warp) of a tile (at 16cc + 4l + warp)
// holds, slot t = 0..7, the codes
//   (2l, c) (2l+8, c) (2l, c+8) (2l+8, c+8) (2l+1, c) (2l+9, c) (2l+1, c+8) (2l+9, c+8),  c = 16warp + cc
// (row, column; see repack4_a16_tile_row_portable), and column c + 8h sits in slot awq_slot(cc) of
// AWQ word 2warp + h. So for each (l, warp) the eight AWQ words
//   v[t] = rows[2l + {0,8,0,8,1,9,1,9}[t]][2warp + {0,0,1,1,0,0,1,1}[t]]
// go through one 8x8 nibble transpose, after which v[i] is the word of cc = awq_column(i).
inline void awq4_tile_row_portable(std::int32_t const* const (&rows)[16], index_t ncols, std::int32_t* out) {
  constexpr int row_of[8] = {0, 8, 0, 8, 1, 9, 1, 9};
  constexpr int group_of[8] = {0, 0, 1, 1, 0, 0, 1, 1};
  for (index_t n0 = 0; n0 < ncols; n0 += 64, out += 128) {
    for (int l = 0; l < 4; ++l) {
      for (int warp = 0; warp < 4; ++warp) {
        std::uint32_t v[8];
        for (int t = 0; t < 8; ++t) {
          v[t] = static_cast<std::uint32_t>(rows[2 * l + row_of[t]][n0 / 8 + 2 * warp + group_of[t]]);
        }
        transpose_nibbles_8x8(v);
        for (int i = 0; i < 8; ++i) out[16 * awq_column<4>(i) + 4 * l + warp] = static_cast<std::int32_t>(v[i]);
      }
    }
  }
}

inline void awq4_tile_row(std::int32_t const* const (&rows)[16], index_t ncols, std::int32_t* out) {
#if QTL_X86
  x86::level const l = x86::marlin::marlin_level();
  if (l >= x86::level::avx2) {
    x86::marlin::awq4_tile_row_avx2(rows, ncols, out);
    return;
  }
  if (l >= x86::level::sse2) {
    x86::marlin::awq4_tile_row(rows, ncols, out);
    return;
  }
#endif  // ^^^ QTL_X86 ^^^
  awq4_tile_row_portable(rows, ncols, out);
}

// Act-order, A16 4-bit, where AVX2 runs: row sorting as whole-line copies. For each 128-column
// block, every packed row of the qweight becomes 8 rows of 128 codes packed along N (AWQ's order,
// awq4_unband: 64 bytes, one cache line each, K lines in all); then each k-tile's 16 rows
// sort_indices[16kt ..] are read as 16 lines and go into their tiles as AWQ rows do
// (awq4_tile_row). Two nibble transposes in registers instead of the gather's 8 loads, shifts and
// masks per word.
inline void repack4_a16_act_order_lines(view2d<std::int32_t const> q, view1d<std::int32_t const> s, index_t K,
                                        index_t N, std::int32_t* out) {
  constexpr index_t line_words = band_cols / 8;  // AWQ words per k-row of a block
  constexpr index_t rows_ahead = 4;
  aligned_vector<std::int32_t> lines(static_cast<std::size_t>(K * line_words));
  for (index_t nb = 0; nb < N; nb += band_cols) {
    index_t const w = N - nb < band_cols ? N - nb : band_cols;
    for (index_t r = 0; r < K / 8; ++r) {
      // Each row's run is short (w words) and in a page of its own: the prefetchers do not run
      // ahead of it, so ask for the run a few rows down.
      if (r + rows_ahead < K / 8) prefetch_lines(&q(r + rows_ahead, nb), w * 4);
      std::int32_t* rows[8];
      for (int j = 0; j < 8; ++j) rows[j] = lines.data() + (8 * r + j) * line_words;
      awq4_unband(&q(r, nb), w / 8, rows);
    }
    for (index_t kt = 0; kt < K / 16; ++kt) {
      if (kt + 1 < K / 16) {  // the next k-tile's 16 lines, at random places in L2
        for (int j = 0; j < 16; ++j) prefetch_lines(lines.data() + s(16 * kt + 16 + j) * line_words, 4 * w / 8);
      }
      std::int32_t const* rows[16];
      for (int j = 0; j < 16; ++j) rows[j] = lines.data() + s(16 * kt + j) * line_words;
      awq4_tile_row(rows, w, out + (kt * (N / 64) + nb / 64) * 128);
    }
  }
}

// AWQ, A16 4-bit: each k-tile's 16 AWQ rows straight into its tiles (awq4_tile_row), in pieces
// of awq_piece columns; the next k-tile's rows are asked for piece by piece (16 short rows at
// once are more streams than the prefetchers follow).
inline void repack4_a16_awq(view2d<std::int32_t const> q, index_t K, index_t N, std::int32_t* out) {
  constexpr index_t awq_piece = 512;  // columns (64 AWQ words, 8 tiles) per piece
  for (index_t kt = 0; kt < K / 16; ++kt) {
    bool const next = kt + 1 < K / 16;
    for (index_t n0 = 0; n0 < N; n0 += awq_piece) {
      index_t const ncols = N - n0 < awq_piece ? N - n0 : awq_piece;
      std::int32_t const* rows[16];
      for (int k = 0; k < 16; ++k) {
        rows[k] = &q(16 * kt + k, n0 / 8);
        if (next) prefetch_lines(rows[k] + 16 * q.stride[0], ncols / 2);
      }
      awq4_tile_row(rows, ncols, out + (kt * (N / 64) + n0 / 64) * 128);
    }
  }
}

}  // namespace detail

// -------------------------------------------------------------------------------------------------
// Weights
// -------------------------------------------------------------------------------------------------

/// GPTQ qweight [K/pf, N] -> Marlin `out` [K/16, N*16/pf] (contiguous); act-order when
/// `sort_indices` (a permutation of [0, K)) is not empty: Marlin row k' is checkpoint row
/// sort_indices[k'] (vLLM/sglang `gptq_marlin_repack`).
/// @throws shape_error (K, N, extents), value_error (sort_indices), unsupported_error (A8 with act-order)
template <int Bits, act_width A = act_width::a16>
void repack_gptq(view2d<std::int32_t const> qweight, view1d<std::int32_t const> sort_indices, view2d<std::int32_t> out) {
  using L = layout<Bits, A>;
  std::string const op = op_name("repack_gptq", Bits, A);
  index_t const K = qweight.extent[0] * L::pack, N = qweight.extent[1];
  check_kn<L>(op, K, N);
  detail::check_extents(op, "out", out, L::marlin_rows(K), L::marlin_cols(N));
  detail::check_contiguous(op, "out", out);
  std::vector<std::int32_t> const inv = detail::check_sort_indices<L>(op, sort_indices, K);
  index_t const words = out.size();
  if constexpr (Bits == 4 && !L::a8) {
    if (qweight.stride[1] == 1) {
      if (inv.empty()) {
        for (index_t kt = 0; kt < K / 16; ++kt) {
          detail::repack4_a16_tile_row(&qweight(2 * kt, 0), &qweight(2 * kt + 1, 0), N, out.data + kt * (N / 64) * 128);
        }
      } else {
#if QTL_X86
        if (x86::marlin::marlin_level() >= x86::level::avx2) {
          detail::repack4_a16_act_order_lines(qweight, sort_indices, K, N, out.data);
          return;
        }
#endif  // ^^^ QTL_X86 ^^^
        detail::repack4_a16_act_order(qweight, sort_indices, K, N, out.data);
      }
      return;
    }
  }
  if (inv.empty()) {
    detail::write_marlin<L>(N, words, [&](index_t k, index_t n) { return gptq_code<Bits>(qweight, k, n); },
                            out.data);
  } else {
    detail::write_marlin<L>(
        N, words, [&](index_t k, index_t n) { return gptq_code<Bits>(qweight, sort_indices(k), n); }, out.data);
  }
}

/// The same, allocating the result.
template <int Bits, act_width A = act_width::a16>
host_tensor<std::int32_t, 2> repack_gptq(view2d<std::int32_t const> qweight,
                                         view1d<std::int32_t const> sort_indices = {}) {
  using L = layout<Bits, A>;
  index_t const K = qweight.extent[0] * L::pack, N = qweight.extent[1];
  check_kn<L>(op_name("repack_gptq", Bits, A), K, N);
  host_tensor<std::int32_t, 2> out({L::marlin_rows(K), L::marlin_cols(N)});
  repack_gptq<Bits, A>(qweight, sort_indices, out.view());
  return out;
}

/// Marlin `m` [K/16, N*16/pf] -> GPTQ qweight [K/pf, N] in checkpoint row order (the exact inverse
/// of repack_gptq with the same sort_indices).
template <int Bits, act_width A = act_width::a16>
void unrepack_gptq(view2d<std::int32_t const> m, view1d<std::int32_t const> sort_indices, view2d<std::int32_t> qweight) {
  using L = layout<Bits, A>;
  std::string const op = op_name("unrepack_gptq", Bits, A);
  index_t K = 0, N = 0;
  detail::marlin_kn<L>(op, m, K, N);
  detail::check_extents(op, "qweight", qweight, K / L::pack, N);
  std::vector<std::int32_t> const inv = detail::check_sort_indices<L>(op, sort_indices, K);
  std::int32_t const* const invp = inv.empty() ? nullptr : inv.data();
  for (index_t r = 0; r < K / L::pack; ++r) {
    for (index_t n = 0; n < N; ++n) {
      qweight(r, n) = static_cast<std::int32_t>(gptq_word_of_marlin<L>(m.data, invp, N, r, n));
    }
  }
}

template <int Bits, act_width A = act_width::a16>
host_tensor<std::int32_t, 2> unrepack_gptq(view2d<std::int32_t const> m, view1d<std::int32_t const> sort_indices = {}) {
  using L = layout<Bits, A>;
  host_tensor<std::int32_t, 2> out({m.extent[0] * 16 / L::pack, m.extent[1] * L::pack / 16});
  unrepack_gptq<Bits, A>(m, sort_indices, out.view());
  return out;
}

/// AWQ qweight [K, N/pf] -> Marlin [K/16, N*16/pf] (vLLM/sglang `awq_marlin_repack`: AWQ's in-word
/// order is undone exactly once).
template <int Bits, act_width A = act_width::a16>
void repack_awq(view2d<std::int32_t const> qweight, view2d<std::int32_t> out) {
  using L = layout<Bits, A>;
  std::string const op = op_name("repack_awq", Bits, A);
  index_t const K = qweight.extent[0], N = qweight.extent[1] * L::pack;
  check_kn<L>(op, K, N);
  detail::check_extents(op, "out", out, L::marlin_rows(K), L::marlin_cols(N));
  detail::check_contiguous(op, "out", out);
  if constexpr (Bits == 4 && !L::a8) {
    if (qweight.stride[1] == 1) {
      detail::repack4_a16_awq(qweight, K, N, out.data);
      return;
    }
  }
  detail::write_marlin<L>(N, out.size(), [&](index_t k, index_t n) { return awq_code<Bits>(qweight, k, n); },
                          out.data);
}

template <int Bits, act_width A = act_width::a16>
host_tensor<std::int32_t, 2> repack_awq(view2d<std::int32_t const> qweight) {
  using L = layout<Bits, A>;
  index_t const K = qweight.extent[0], N = qweight.extent[1] * L::pack;
  check_kn<L>(op_name("repack_awq", Bits, A), K, N);
  host_tensor<std::int32_t, 2> out({L::marlin_rows(K), L::marlin_cols(N)});
  repack_awq<Bits, A>(qweight, out.view());
  return out;
}

/// Marlin [K/16, N*16/pf] -> AWQ qweight [K, N/pf] (the exact inverse of repack_awq).
template <int Bits, act_width A = act_width::a16>
host_tensor<std::int32_t, 2> unrepack_awq(view2d<std::int32_t const> m) {
  using L = layout<Bits, A>;
  std::string const op = op_name("unrepack_awq", Bits, A);
  index_t K = 0, N = 0;
  detail::marlin_kn<L>(op, m, K, N);
  host_tensor<std::int32_t, 2> out({K, N / L::pack});
  auto o = out.view();
  for (index_t k = 0; k < K; ++k) {
    for (index_t c = 0; c < N / L::pack; ++c) {
      o(k, c) = static_cast<std::int32_t>(awq_word_of_marlin<L>(m.data, N, k, c));
    }
  }
  return out;
}

/// Codes [K, N] (each in [0, 2^bits)) -> Marlin [K/16, N*16/pf]: the torch reference
/// `marlin_weights(q_w, K, N, bits, get_weight_perm(bits, is_a_8bit), is_a_8bit)`.
/// @throws value_error naming the first code out of range
template <int Bits, act_width A = act_width::a16>
host_tensor<std::int32_t, 2> repack_codes(view2d<std::int32_t const> q) {
  using L = layout<Bits, A>;
  std::string const op = op_name("repack_codes", Bits, A);
  index_t const K = q.extent[0], N = q.extent[1];
  check_kn<L>(op, K, N);
  detail::check_codes<Bits>(op, "q", q);
  host_tensor<std::int32_t, 2> out({L::marlin_rows(K), L::marlin_cols(N)});
  detail::write_marlin<L>(
      N, out.size(), [&](index_t k, index_t n) { return static_cast<std::uint32_t>(q(k, n)); }, out.data());
  return out;
}

/// Marlin [K/16, N*16/pf] -> codes [K, N] (the exact inverse of repack_codes).
template <int Bits, act_width A = act_width::a16>
host_tensor<std::int32_t, 2> unrepack_codes(view2d<std::int32_t const> m) {
  using L = layout<Bits, A>;
  std::string const op = op_name("unrepack_codes", Bits, A);
  index_t K = 0, N = 0;
  detail::marlin_kn<L>(op, m, K, N);
  host_tensor<std::int32_t, 2> out({K, N});
  auto o = out.view();
  for (index_t k = 0; k < K; ++k) {
    for (index_t n = 0; n < N; ++n) {
      o(k, n) = static_cast<std::int32_t>(marlin_code<L>(m.data, N, k, n));
    }
  }
  return out;
}

// Compile-time shapes: std::array in, std::array out, usable in constant evaluation.

/// repack_gptq of a qweight whose shape `S` (a fixed_shape) is a template argument.
template <class S>
constexpr std::array<std::int32_t, S::marlin_words> repack_gptq(std::array<std::int32_t, S::gptq_words> const& qweight) {
  using L = typename S::layout_type;
  std::array<std::int32_t, S::marlin_words> out{};
  view2d<std::int32_t const> const q = make_view(qweight.data(), S::k / L::pack, S::n);
  auto const code = [&](index_t k, index_t n) { return gptq_code<L::bits>(q, k, n); };
  for (index_t f = 0; f < S::marlin_words; ++f) {
    out[static_cast<std::size_t>(f)] = static_cast<std::int32_t>(marlin_word<L>(S::n, f, code));
  }
  return out;
}

/// unrepack_gptq (no act-order) of a Marlin weight of shape `S`.
template <class S>
constexpr std::array<std::int32_t, S::gptq_words> unrepack_gptq(std::array<std::int32_t, S::marlin_words> const& m) {
  using L = typename S::layout_type;
  std::array<std::int32_t, S::gptq_words> out{};
  for (index_t r = 0; r < S::k / L::pack; ++r) {
    for (index_t n = 0; n < S::n; ++n) {
      out[static_cast<std::size_t>(r * S::n + n)] =
          static_cast<std::int32_t>(gptq_word_of_marlin<L>(m.data(), nullptr, S::n, r, n));
    }
  }
  return out;
}

// MoE: [E, ...] views, one expert after another (the peers' Python loop over experts).

/// Per expert: qweight [E, K/pf, N], sort_indices [E, K] or empty -> Marlin `out` [E, K/16, N*16/pf]
/// (contiguous).
template <int Bits, act_width A = act_width::a16>
void repack_gptq(view3d<std::int32_t const> qweight, view2d<std::int32_t const> sort_indices, view3d<std::int32_t> out) {
  using L = layout<Bits, A>;
  std::string const op = op_name("repack_gptq (MoE)", Bits, A);
  index_t const E = qweight.extent[0], K = qweight.extent[1] * L::pack, N = qweight.extent[2];
  check_kn<L>(op, K, N);
  bool const act_order = sort_indices.size() != 0;
  if (act_order) {
    detail::check_extents(op, "sort_indices", sort_indices, E, K);
  }
  if (out.extent[0] != E || !out.is_contiguous()) {
    detail::fail_shape(op, "out must be contiguous with " + std::to_string(E) + " experts");
  }
  detail::check_extents(op, "out", out, L::marlin_rows(K), L::marlin_cols(N));
  for (index_t e = 0; e < E; ++e) {
    view2d<std::int32_t const> q = make_view(&qweight(e, 0, 0), qweight.extent[1], qweight.extent[2]);
    q.stride[0] = qweight.stride[1];
    q.stride[1] = qweight.stride[2];
    view1d<std::int32_t const> s = act_order ? make_view(&sort_indices(e, 0), K) : view1d<std::int32_t const>{};
    if (act_order) {
      s.stride[0] = sort_indices.stride[1];
    }
    repack_gptq<Bits, A>(q, s, make_view(&out(e, 0, 0), L::marlin_rows(K), L::marlin_cols(N)));
  }
}

/// The same, allocating the result.
template <int Bits, act_width A = act_width::a16>
host_tensor<std::int32_t, 3> repack_gptq(view3d<std::int32_t const> qweight, view2d<std::int32_t const> sort_indices) {
  using L = layout<Bits, A>;
  index_t const K = qweight.extent[1] * L::pack, N = qweight.extent[2];
  check_kn<L>(op_name("repack_gptq (MoE)", Bits, A), K, N);
  host_tensor<std::int32_t, 3> out({qweight.extent[0], L::marlin_rows(K), L::marlin_cols(N)});
  repack_gptq<Bits, A>(qweight, sort_indices, out.view());
  return out;
}

// -------------------------------------------------------------------------------------------------
// Scales, bias, zero points
// -------------------------------------------------------------------------------------------------

namespace detail {
template <class T, class U>
void check_scales(std::string const& op, view2d<T> s, view2d<U> out, scale_perm_kind kind) {
  if (s.extent[1] % scale_chunk(kind) != 0) {
    fail_shape(op, "N = " + std::to_string(s.extent[1]) + " is not a multiple of " +
                       std::to_string(scale_chunk(kind)) +
                       (kind == scale_perm_kind::grouped ? " (the grouped scale_perm)" : " (scale_perm_single)"));
  }
  check_extents(op, "out", out, s.extent[0], s.extent[1]);
}

// Marlin zero points [G, N/pf] from `code(g, n)`, the zero-point code of group g and column n.
template <int Bits, act_width A, class Code>
host_tensor<std::int32_t, 2> pack_zero_points(index_t G, index_t N, Code const& code) {
  constexpr int pf = 32 / Bits;
  host_tensor<std::int32_t, 2> out({G, N / pf});
  auto o = out.view();
  for (index_t g = 0; g < G; ++g) {
    auto const row = [&](index_t n) { return code(g, n); };
    for (index_t w = 0; w < N / pf; ++w) {
      o(g, w) = static_cast<std::int32_t>(zero_point_word<Bits, A>(row, w));
    }
  }
  return out;
}
}  // namespace detail

/// Scales [G, N] (any element type, values untouched) -> the same with columns moved:
/// out(g, n) = s(g, scale_source(kind, n)) (`marlin_permute_scales`; pick `kind` by `scale_kind`).
template <class T>
void permute_scales(view2d<T const> s, scale_perm_kind kind, view2d<T> out) {
  detail::check_scales("qtl::marlin::permute_scales", s, out, kind);
  for (index_t g = 0; g < s.extent[0]; ++g) {
    for (index_t n = 0; n < s.extent[1]; ++n) {
      out(g, n) = s(g, scale_source(kind, n));
    }
  }
}

/// The exact inverse of permute_scales.
template <class T>
void unpermute_scales(view2d<T const> s, scale_perm_kind kind, view2d<T> out) {
  detail::check_scales("qtl::marlin::unpermute_scales", s, out, kind);
  for (index_t g = 0; g < s.extent[0]; ++g) {
    for (index_t n = 0; n < s.extent[1]; ++n) {
      out(g, scale_source(kind, n)) = s(g, n);
    }
  }
}

/// Bias [N] (N % 32) -> `marlin_permute_bias`: the single scale permutation.
template <class T>
void permute_bias(view1d<T const> b, view1d<T> out) {
  permute_scales<T>(make_view(b.data, 1, b.extent[0]), scale_perm_kind::single, make_view(out.data, 1, out.extent[0]));
}

/// Zero-point codes [G, N] (each in [0, 2^bits), N % 64) -> Marlin zero points [G, N/pf]
/// (`marlin_zero_points`: scale_perm always, then the in-word interleave unless A8).
template <int Bits, act_width A = act_width::a16>
host_tensor<std::int32_t, 2> zero_points(view2d<std::int32_t const> zp) {
  std::string const op = op_name("zero_points", Bits, A);
  index_t const G = zp.extent[0], N = zp.extent[1];
  if (N % 64 != 0) {
    detail::fail_shape(op, "N = " + std::to_string(N) + " is not a multiple of 64 (scale_perm)");
  }
  detail::check_codes<Bits>(op, "zp", zp);
  return detail::pack_zero_points<Bits, A>(G, N, [&](index_t g, index_t n) { return zp(g, n); });
}

/// AWQ qzeros [G, N/pf] (AWQ's in-word order) -> Marlin zero points [G, N/pf]
/// (`awq_to_marlin_zero_points`: equal to zero_points of the same codes).
template <int Bits, act_width A = act_width::a16>
host_tensor<std::int32_t, 2> awq_zero_points(view2d<std::int32_t const> qzeros) {
  std::string const op = op_name("awq_zero_points", Bits, A);
  constexpr int pf = 32 / Bits;
  index_t const G = qzeros.extent[0], N = qzeros.extent[1] * pf;
  if (N % 64 != 0) {
    detail::fail_shape(op, "N = " + std::to_string(N) + " is not a multiple of 64 (scale_perm)");
  }
  return detail::pack_zero_points<Bits, A>(G, N, [&](index_t g, index_t n) {
    auto const word = static_cast<std::uint32_t>(qzeros(g, n / pf));
    return static_cast<std::int32_t>((word >> (Bits * awq_slot<Bits>(static_cast<int>(n % pf)))) & ((1u << Bits) - 1u));
  });
}

/// Marlin zero points [G, N/pf] -> codes [G, N] (the exact inverse of zero_points).
template <int Bits, act_width A = act_width::a16>
host_tensor<std::int32_t, 2> unzero_points(view2d<std::int32_t const> m) {
  std::string const op = op_name("unzero_points", Bits, A);
  constexpr int pf = 32 / Bits;
  index_t const G = m.extent[0], N = m.extent[1] * pf;
  if (N % 64 != 0) {
    detail::fail_shape(op, "N = " + std::to_string(N) + " is not a multiple of 64 (scale_perm)");
  }
  host_tensor<std::int32_t, 2> out({G, N});
  auto o = out.view();
  for (index_t g = 0; g < G; ++g) {
    for (index_t w = 0; w < N / pf; ++w) {
      auto const word = static_cast<std::uint32_t>(m(g, w));
      for (int t = 0; t < pf; ++t) {
        o(g, zero_point_source<Bits, A>(w, t)) = static_cast<std::int32_t>((word >> (Bits * t)) & ((1u << Bits) - 1u));
      }
    }
  }
  return out;
}

// -------------------------------------------------------------------------------------------------
// Act-order
// -------------------------------------------------------------------------------------------------

/// `marlin_sort_g_idx` with a STABLE sort (the peers' torch.argsort is unstable: docs/spec/marlin.md §4.3):
/// sort_indices lists the rows of group 0 in increasing row order, then group 1, ...;
/// sorted_g_idx[i] = g_idx[sort_indices[i]]. Both spans have g_idx.size() entries.
inline void sort_g_idx(view1d<std::int32_t const> g_idx, view1d<std::int32_t> sorted_g_idx,
                       view1d<std::int32_t> sort_indices) {
  index_t const K = g_idx.extent[0];
  if (sorted_g_idx.extent[0] != K || sort_indices.extent[0] != K) {
    throw shape_error("qtl::marlin::sort_g_idx: the outputs have " + std::to_string(sorted_g_idx.extent[0]) + " and " +
                      std::to_string(sort_indices.extent[0]) + " entries, g_idx " + std::to_string(K));
  }
  std::vector<std::int32_t> idx(static_cast<std::size_t>(K));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::int32_t a, std::int32_t b) { return g_idx(a) < g_idx(b); });
  for (index_t i = 0; i < K; ++i) {
    sort_indices(i) = idx[static_cast<std::size_t>(i)];
    sorted_g_idx(i) = g_idx(idx[static_cast<std::size_t>(i)]);
  }
}

}  // namespace qtl::marlin
