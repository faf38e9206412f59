#pragma once
/// \file
/// The vocabulary of the Marlin layouts (`docs/spec/marlin.md`): the weight tile of each variant
/// (4 or 8 bits; 16-bit or 8-bit activations), its index map and the exact inverse, the scale and
/// zero-point permutations, and the size checks. Everything here is `QTL_HOST_DEVICE constexpr`:
/// the host loops of <qtl/marlin.hpp> and the kernels of <qtl/cuda/marlin.cuh> run the same code.
///
/// Weights are K-major as the GEMM sees them: code q[k][n], k < K (input features), n < N. A
/// Marlin weight is int32 [K/16, N*16/pf] (pf = 32/bits codes per word), a sequence of tiles of
/// `tile_k x tile_n` codes, tile (kt, nt) at words [(kt*(N/tile_n) + nt) * T, ... + T), T =
/// tile_k*tile_n/pf. Word w of a tile holds in slot t (bits [bits*t, bits*t + bits)) the code at
/// (dk, dn) = layout::src(w, t) inside the tile; layout::dst is its inverse.
///
///   A16 4-bit (16 x 64 tile, 128 words): lane = w/4, warp = w%4, e = [0,2,4,6,1,3,5,7][t]
///     dk = 2*(lane%4) + [0,1,8,9][e%4]      dn = 16*warp + lane/4 + 8*(e/4)
///     word 0:  slot  7     6     5     4     3     2     1     0
///                  (9,8) (1,8) (9,0) (1,0) (8,8) (0,8) (8,0) (0,0)     (dk, dn)
///   A16 8-bit (16 x 64, 256 words): lane = w/8, warp = (w%8)/2, h = w%2, r = [0,2,1,3][t]
///     dk = 2*(lane%4) + [0,1,8,9][r]        dn = 16*warp + lane/4 + 8*h
///   A8 4-bit (32 x 32, 128 words): lane = w/4, j = (w%4)/2, b = w%2, r = [0,4,1,5,2,6,3,7][t]
///     dk = 4*(lane%4) + r%4 + 16*(r/4)      dn = 16*j + lane/4 + 8*b
///   A8 8-bit (32 x 32, 256 words): lane = w/8, j = (w%8)/4, b = (w%4)/2, hk = w%2
///     dk = 4*(lane%4) + t + 16*hk           dn = 16*j + lane/4 + 8*b
///
/// (lane and warp are the mma.m16n8k16 / m16n8k32 B-fragment owners; the in-word order pairs
/// slots t and t+4 into one fp16x2 register when the dequantizer converts them.)

#include <array>
#include <cstdint>

#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl::marlin {

/// The activations the GEMM multiplies with: 16-bit (fp16/bf16: the classic layout, m16n8k16) or
/// 8-bit (int8/fp8: vLLM's `is_a_8bit` layout, m16n8k32, 32x32 tiles). A different layout, not a flag.
enum class act_width : int { a16 = 16, a8 = 8 };

/// True for the bit widths Marlin packs: 4 and 8.
QTL_HOST_DEVICE constexpr bool is_marlin_bits(int bits) { return bits == 4 || bits == 8; }

/// A (dk, dn) position inside a tile.
struct tile_pos {
  int dk;
  int dn;
  friend constexpr bool operator==(tile_pos, tile_pos) = default;
};
/// A (word, slot) position inside a tile.
struct word_slot {
  int word;
  int slot;
  friend constexpr bool operator==(word_slot, word_slot) = default;
};

/// The weight layout of `Bits`-bit codes for `A` activations: tile shape and index map.
template <int Bits, act_width A = act_width::a16>
struct layout {
  // Reported for bits other than 4 and 8 (Marlin has no 2-, 3- or 16-bit weight layout).
  static_assert(is_marlin_bits(Bits), "qtl::marlin::layout: Bits must be 4 or 8");
  static_assert(A == act_width::a16 || A == act_width::a8, "qtl::marlin::layout: A must be a16 or a8");

  static constexpr int bits = Bits;
  static constexpr act_width act = A;
  static constexpr bool a8 = A == act_width::a8;
  static constexpr int pack = 32 / Bits;  ///< codes per int32 word
  static constexpr std::uint32_t mask = (1u << Bits) - 1u;
  static constexpr int tile_k = a8 ? 32 : 16;
  static constexpr int tile_n = a8 ? 32 : 64;
  static constexpr int tile_words = tile_k * tile_n / pack;  ///< 128 (4-bit) or 256 (8-bit)
  /// K must be a multiple of this (A8: 32; the peers' CUDA host code checks only 16 and leaves
  /// the last rows unwritten), N of `n_multiple` (64: the repack's thread tile, also for A8).
  static constexpr int k_multiple = tile_k;
  static constexpr int n_multiple = 64;

  /// The in-word order of the torch reference's `get_weight_perm` (its `interleave`).
  static constexpr std::array<int, pack> interleave() {
    if constexpr (Bits == 4 && !a8) {
      return {0, 2, 4, 6, 1, 3, 5, 7};
    } else if constexpr (Bits == 8 && !a8) {
      return {0, 2, 1, 3};
    } else if constexpr (Bits == 4) {
      return {0, 4, 1, 5, 2, 6, 3, 7};
    } else {
      return {0, 1, 2, 3};
    }
  }

  /// The (dk, dn) inside a tile that slot `slot` of tile word `word` holds.
  /// @pre 0 <= word < tile_words, 0 <= slot < pack
  QTL_HOST_DEVICE static constexpr tile_pos src(int word, int slot) {
    constexpr int rows16[4] = {0, 1, 8, 9};
    if constexpr (Bits == 4 && !a8) {
      constexpr int il[8] = {0, 2, 4, 6, 1, 3, 5, 7};
      int const lane = word / 4, warp = word % 4, e = il[slot];
      return {2 * (lane % 4) + rows16[e % 4], 16 * warp + lane / 4 + 8 * (e / 4)};
    } else if constexpr (Bits == 8 && !a8) {
      constexpr int il[4] = {0, 2, 1, 3};
      int const lane = word / 8, warp = (word % 8) / 2, h = word % 2, r = il[slot];
      return {2 * (lane % 4) + rows16[r], 16 * warp + lane / 4 + 8 * h};
    } else if constexpr (Bits == 4) {
      constexpr int il[8] = {0, 4, 1, 5, 2, 6, 3, 7};
      int const lane = word / 4, j = (word % 4) / 2, b = word % 2, r = il[slot];
      return {4 * (lane % 4) + r % 4 + 16 * (r / 4), 16 * j + lane / 4 + 8 * b};
    } else {
      int const lane = word / 8, j = (word % 8) / 4, b = (word % 4) / 2, hk = word % 2;
      return {4 * (lane % 4) + slot + 16 * hk, 16 * j + lane / 4 + 8 * b};
    }
  }

  /// The inverse of `src`: the (word, slot) of tile position (dk, dn).
  /// @pre 0 <= dk < tile_k, 0 <= dn < tile_n
  QTL_HOST_DEVICE static constexpr word_slot dst(int dk, int dn) {
    if constexpr (!a8) {
      // dk = 2*(lane%4) + [0,1,8,9][x], x = dk%2 + 2*(dk/8); dn = 16*warp + lane/4 + 8*hi
      int const lane = 4 * (dn % 8) + (dk % 8) / 2, warp = dn / 16, hi = (dn % 16) / 8;
      int const x = dk % 2 + 2 * (dk / 8);
      if constexpr (Bits == 4) {
        constexpr int inv[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // argsort of {0,2,4,6,1,3,5,7}
        return {4 * lane + warp, inv[x + 4 * hi]};
      } else {
        constexpr int inv[4] = {0, 2, 1, 3};  // its own inverse
        return {8 * lane + 2 * warp + hi, inv[x]};
      }
    } else {
      // dk = 4*(lane%4) + r%4 + 16*(r/4) (4-bit) or + t + 16*hk (8-bit); dn = 16*j + lane/4 + 8*b
      int const lane = 4 * (dn % 8) + (dk % 16) / 4, j = dn / 16, b = (dn % 16) / 8;
      if constexpr (Bits == 4) {
        constexpr int inv[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // argsort of {0,4,1,5,2,6,3,7}
        return {4 * lane + 2 * j + b, inv[dk % 4 + 4 * (dk / 16)]};
      } else {
        return {8 * lane + 4 * j + 2 * b + dk / 16, dk % 4};
      }
    }
  }

  /// The torch reference's `get_weight_perm(bits, is_a_8bit)`: entry pack*w + t is the offset,
  /// in the tile's run of row-major 16x16 (A8: 32x16) sub-tiles, of the code in slot t of word w.
  static constexpr std::array<int, 1024> weight_perm() {
    std::array<int, 1024> perm{};
    for (int w = 0; w < tile_words; ++w) {
      for (int t = 0; t < pack; ++t) {
        tile_pos const p = src(w, t);
        perm[static_cast<std::size_t>(pack * w + t)] = tile_k * 16 * (p.dn / 16) + 16 * p.dk + p.dn % 16;
      }
    }
    return perm;
  }

  /// True when a [K, N] weight has this layout: K % k_multiple == 0, N % 64 == 0, both >= 0.
  QTL_HOST_DEVICE static constexpr bool shape_fits(index_t K, index_t N) {
    return K >= 0 && N >= 0 && K % k_multiple == 0 && N % n_multiple == 0;
  }
  /// Words of the Marlin weight of a [K, N] code matrix, and its 2-D shape [K/16, N*16/pack].
  QTL_HOST_DEVICE static constexpr index_t marlin_rows(index_t K) { return K / 16; }
  QTL_HOST_DEVICE static constexpr index_t marlin_cols(index_t N) { return N * 16 / pack; }

  /// The flat Marlin word of code (k, n) of a [K, N] weight (N % tile_n == 0), and its slot.
  QTL_HOST_DEVICE static constexpr index_t flat_word(index_t N, index_t k, index_t n, int& slot) {
    word_slot const ws = dst(static_cast<int>(k % tile_k), static_cast<int>(n % tile_n));
    slot = ws.slot;
    return ((k / tile_k) * (N / tile_n) + n / tile_n) * tile_words + ws.word;
  }
  /// The inverse of `flat_word`: the (k, n) of slot `slot` of flat Marlin word `f`.
  QTL_HOST_DEVICE static constexpr void code_of(index_t N, index_t f, int slot, index_t& k, index_t& n) {
    index_t const tile = f / tile_words;
    index_t const tiles_n = N / tile_n;
    tile_pos const p = src(static_cast<int>(f % tile_words), slot);
    k = (tile / tiles_n) * tile_k + p.dk;
    n = (tile % tiles_n) * tile_n + p.dn;
  }
};

/// A [K, N] weight of `Bits`-bit codes whose shape is known at compile time: shapes the layout
/// cannot take do not compile (K % 16, or K % 32 for the 8-bit-activation layout; N % 64).
template <int Bits, act_width A, index_t K, index_t N>
struct fixed_shape {
  using layout_type = layout<Bits, A>;
  // Reported for K = 24, or K = 16 with A8 (whose tiles are 32 rows: the peers leave rows unwritten).
  static_assert(K > 0 && K % layout_type::k_multiple == 0,
                "qtl::marlin: K must be a positive multiple of 16 (of 32 with the 8-bit-activation layout)");
  // Reported for N = 96: the repack's tiles are 64 columns wide.
  static_assert(N > 0 && N % 64 == 0, "qtl::marlin: N must be a positive multiple of 64");
  static constexpr index_t k = K;
  static constexpr index_t n = N;
  static constexpr index_t gptq_words = K / layout_type::pack * N;  ///< qweight [K/pf, N]
  static constexpr index_t marlin_words = K * N / layout_type::pack;  ///< Marlin [K/16, N*16/pf]
};

// -------------------------------------------------------------------------------------------------
// Checkpoint packings that feed Marlin (docs/spec/marlin.md §1)
// -------------------------------------------------------------------------------------------------

/// AWQ's in-word order: slot i of AWQ word c holds column pf*c + awq_order<Bits>[i].
///   4-bit {0,2,4,6,1,3,5,7}, 8-bit {0,2,1,3}
/// and its inverse, `awq_slot`: column pf*c + j sits in slot awq_slot(j) = {0,4,1,5,2,6,3,7}[j]
/// (8-bit {0,2,1,3}[j]), the AWQ kernel's `undo_pack`.
template <int Bits>
QTL_HOST_DEVICE constexpr int awq_column(int slot) {
  static_assert(is_marlin_bits(Bits), "qtl::marlin::awq_column: Bits must be 4 or 8");
  if constexpr (Bits == 4) {
    constexpr int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    return order[slot];
  } else {
    constexpr int order[4] = {0, 2, 1, 3};
    return order[slot];
  }
}
template <int Bits>
QTL_HOST_DEVICE constexpr int awq_slot(int column_in_word) {
  static_assert(is_marlin_bits(Bits), "qtl::marlin::awq_slot: Bits must be 4 or 8");
  if constexpr (Bits == 4) {
    constexpr int undo[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    return undo[column_in_word];
  } else {
    constexpr int undo[4] = {0, 2, 1, 3};
    return undo[column_in_word];
  }
}

/// Code (k, n) of a GPTQ qweight [K/pf, N]: slot k%pf of word (k/pf, n).
template <int Bits, class T>
QTL_HOST_DEVICE constexpr std::uint32_t gptq_code(view2d<T> qweight, index_t k, index_t n) {
  constexpr int pf = 32 / Bits;
  auto const word = static_cast<std::uint32_t>(qweight(k / pf, n));
  return (word >> (Bits * static_cast<int>(k % pf))) & ((1u << Bits) - 1u);
}
/// Code (k, n) of an AWQ qweight [K, N/pf]: slot awq_slot(n%pf) of word (k, n/pf).
template <int Bits, class T>
QTL_HOST_DEVICE constexpr std::uint32_t awq_code(view2d<T> qweight, index_t k, index_t n) {
  constexpr int pf = 32 / Bits;
  auto const word = static_cast<std::uint32_t>(qweight(k, n / pf));
  return (word >> (Bits * awq_slot<Bits>(static_cast<int>(n % pf)))) & ((1u << Bits) - 1u);
}

// -------------------------------------------------------------------------------------------------
// Scales and zero points (docs/spec/marlin.md §4.1, §5)
// -------------------------------------------------------------------------------------------------

/// Which column permutation the scales take.
///   grouped: `scale_perm`, 64 wide, each 8x8 block transposed: out[64c+8i+j] = in[64c+i+8j]
///   single:  `scale_perm_single`, 32 wide: out[32c+8i+m] = in[32c+2i+{0,1,8,9,16,17,24,25}[m]]
enum class scale_perm_kind { grouped, single };

/// The peers' choice, by value (docs/spec/marlin.md §14, trap 3): grouped iff group_size < size_k, group_size !=
/// -1 and the activations are 16-bit. One group (group_size == size_k) is channelwise: single.
QTL_HOST_DEVICE constexpr scale_perm_kind scale_kind(index_t size_k, index_t group_size, act_width a) {
  return group_size < size_k && group_size != -1 && a == act_width::a16 ? scale_perm_kind::grouped
                                                                        : scale_perm_kind::single;
}

/// Width of the permutation's chunks: 64 (grouped) or 32 (single). N must be a multiple.
QTL_HOST_DEVICE constexpr int scale_chunk(scale_perm_kind kind) {
  return kind == scale_perm_kind::grouped ? 64 : 32;
}

/// The input column that output column `n` of a permuted scale row takes (the peers' gather index).
QTL_HOST_DEVICE constexpr index_t scale_source(scale_perm_kind kind, index_t n) {
  if (kind == scale_perm_kind::grouped) {
    index_t const p = n % 64;
    return n - p + p / 8 + 8 * (p % 8);
  }
  constexpr int single[8] = {0, 1, 8, 9, 16, 17, 24, 25};
  index_t const p = n % 32;
  return n - p + 2 * (p / 8) + single[p % 8];
}

/// The column of zero-point code `n` that slot `slot` of Marlin zero-point word `w` holds
/// (`scale_perm` always, then the in-word interleave unless A8, packed along N):
///   4-bit: 64*(w/8)  + w%8      + 8*e,               e = {0,2,4,6,1,3,5,7}[t]  (A8: e = t)
///   8-bit: 64*(w/16) + (w%16)/2 + 8*(4*(w%2) + e),   e = {0,2,1,3}[t]          (A8: e = t)
template <int Bits, act_width A = act_width::a16>
QTL_HOST_DEVICE constexpr index_t zero_point_source(index_t w, int slot) {
  static_assert(is_marlin_bits(Bits), "qtl::marlin::zero_point_source: Bits must be 4 or 8");
  if constexpr (Bits == 4) {
    constexpr int il[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    int const e = A == act_width::a8 ? slot : il[slot];
    return 64 * (w / 8) + w % 8 + 8 * e;
  } else {
    constexpr int il[4] = {0, 2, 1, 3};
    int const e = A == act_width::a8 ? slot : il[slot];
    return 64 * (w / 16) + (w % 16) / 2 + 8 * (4 * (w % 2) + e);
  }
}

}  // namespace qtl::marlin
