#pragma once
/// \file
/// The element layer of the MoE weight shuffles (`qtl/moe.hpp` runs it on the host,
/// `qtl/cuda/moe.cuh` on the device, and kernel authors build their own kernels from it): the
/// `QTL_HOST_DEVICE constexpr` closed forms of the half swap and of the trtllm-gen row
/// permutations (gather form: out row n = in row source(n)), FlashInfer's block layout and the
/// uint4b8 nibble flip of the other TRT-LLM MoE layouts (`trtllm_row_map`, `block_layout_offset`),
/// and the row map of the zero padding that FlashInfer's and CUTLASS's FP4 kernels need
/// (`align_fp4_moe_weights_for_fi` and kin).

#include <cstdint>

#include <qtl/element/pack.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl {

// ------------------------------------------------------------------------------------------------
// Half swaps: [w1; w3] <-> [w3; w1]
// ------------------------------------------------------------------------------------------------

/// Source index of index `i` when the two halves of an even extent `n` are exchanged:
/// `[a0 .. a(n/2-1) | b0 .. b(n/2-1)]` becomes `[b0 .. | a0 ..]`. The map is an involution.
QTL_HOST_DEVICE constexpr index_t swap_halves_source(index_t i, index_t n) { return i < n / 2 ? i + n / 2 : i - n / 2; }

// ------------------------------------------------------------------------------------------------
// trtllm-gen row permutations (gather form: out row n = in row source(n))
// ------------------------------------------------------------------------------------------------

/// Rows of one trtllm-gen shuffle block: 32 when `epilogue_tile_m` is a multiple of 128, else 16
/// (flashinfer `get_shuffle_block_size`).
template <int EpilogueTileM>
inline constexpr int shuffle_block_rows = EpilogueTileM % 128 == 0 ? 32 : 16;

/// Source row of output row `n` of the epilogue-tile row shuffle (flashinfer
/// `get_shuffle_matrix_a_row_indices`, trtllm-gen `shuffleMatrixA`). Each block of `Bs` rows is an
/// `8 x g` grid (`g = Bs / 8`) read column by column, e.g. `Bs = 32`:
///
///     in rows (8 x 4 grid, r = 4a + c)       out rows 0..31
///       0  1  2  3                           0  4  8 12 16 20 24 28 | 1  5 .. 29 | 2 .. 30 | 3 .. 31
///       4  5  6  7          ==>              (column c of the grid becomes out rows 8c .. 8c+7)
///      ...
///      28 29 30 31
///
/// `source(n) = (n / Bs) * Bs + g * (n % 8) + (n % Bs) / 8`. @pre the row count is a multiple of Bs.
template <int EpilogueTileM = 128>
QTL_HOST_DEVICE constexpr index_t shuffle_row_source(index_t n) {
  constexpr index_t bs = shuffle_block_rows<EpilogueTileM>;
  constexpr index_t g = bs / 8;
  return (n / bs) * bs + g * (n % 8) + (n % bs) / 8;
}

/// Source row of output row `n` of the gated-activation interleave of `rows` rows (flashinfer
/// `get_reorder_rows_for_gated_act_gemm_row_indices`): `[u0 u1 .. | g0 g1 ..] -> [u0 g0 u1 g1 ..]`,
/// i.e. `source(2i) = i`, `source(2i + 1) = rows/2 + i`. @pre `rows` even.
QTL_HOST_DEVICE constexpr index_t gated_interleave_source(index_t n, index_t rows) {
  return n % 2 == 0 ? n / 2 : rows / 2 + n / 2;
}

/// Source row of output row `n` of GEMM1 (`[w3; w1]`, `rows` rows) for trtllm-gen: the gated
/// interleave (if `gated`) followed by the row shuffle (flashinfer
/// `_maybe_get_cached_w3_w1_permute_indices`): `source(n) = interleave(shuffle(n))`. The same map
/// is used for the weights and for the linear scales (before their 128x4 layout).
template <int EpilogueTileM = 128>
QTL_HOST_DEVICE constexpr index_t w3w1_row_source(index_t n, index_t rows, bool gated) {
  index_t const j = shuffle_row_source<EpilogueTileM>(n);
  return gated ? gated_interleave_source(j, rows) : j;
}

/// Source row of output row `n` of GEMM2 (flashinfer `get_w2_permute_indices_with_cache`): the
/// row shuffle alone.
template <int EpilogueTileM = 128>
QTL_HOST_DEVICE constexpr index_t w2_row_source(index_t n) {
  return shuffle_row_source<EpilogueTileM>(n);
}

// ------------------------------------------------------------------------------------------------
// trtllm-gen weight layouts beyond NVFP4 (MXINT4, DeepSeek FP8, FP8 per tensor, BF16, MXFP8)
// ------------------------------------------------------------------------------------------------

/// The row map of one trtllm-gen MoE weight preparation (gather form: output row n is input row
/// `source(n)`), chosen at run time; the host and the device evaluate the same closed forms.
///
///     shuffle      shuffle_row_source<epilogue_tile_m>(n)                  GEMM2; GEMM1 not gated
///     w3w1_gated   gated_interleave_source(shuffle(n), rows)               GEMM1 [w3; w1] (w3w1_row_source)
///     w1w3_gated   swap_halves_source(gated_interleave_source(shuffle(n)))  GEMM1 [w1; w3]: vLLM's
///                  reorder_w1w3_to_w3w1 first (MXINT4), or FlashInfer's indices + rows/2 (BF16)
///
/// `epilogue_tile_m` 128 (32-row shuffle blocks) or 64 (16-row blocks, DeepSeek FP8).
struct trtllm_row_map {
  enum class kind : int { shuffle, w3w1_gated, w1w3_gated };
  kind k = kind::shuffle;
  index_t rows = 0;
  int epilogue_tile_m = 128;

  /// Rows of one shuffle block: every row count must be a multiple of it.
  QTL_HOST_DEVICE constexpr index_t block_rows() const { return epilogue_tile_m % 128 == 0 ? 32 : 16; }

  QTL_HOST_DEVICE constexpr index_t source(index_t n) const {
    index_t const j = epilogue_tile_m % 128 == 0 ? shuffle_row_source<128>(n) : shuffle_row_source<64>(n);
    if (k == kind::shuffle) {
      return j;
    }
    index_t const g = gated_interleave_source(j, rows);
    return k == kind::w3w1_gated ? g : swap_halves_source(g, rows);
  }
};

/// Offset of element (`m`, `k`) of an `[rows, K]` matrix in FlashInfer's
/// `convert_to_block_layout(x, block_k)`: the view `[rows, K/block_k, block_k]` transposed to
/// `[K/block_k, rows, block_k]` (`(k / block_k) * rows * block_k + m * block_k + k % block_k`).
/// @pre `K % block_k == 0`.
QTL_HOST_DEVICE constexpr index_t block_layout_offset(index_t m, index_t k, index_t rows, index_t block_k) {
  return (k / block_k) * rows * block_k + m * block_k + k % block_k;
}

// ------------------------------------------------------------------------------------------------
// Zero padding (gather form: out row r = in row source(r), or zeros where source(r) is -1)
// ------------------------------------------------------------------------------------------------

/// vLLM `round_up(x, a)`: the least multiple of `a` not below `x`. @pre `x >= 0`, `a > 0`.
QTL_HOST_DEVICE constexpr index_t round_up(index_t x, index_t a) { return (x + a - 1) / a * a; }

/// Source row of output row `r` when every run of `rows` input rows (one projection: gate or up)
/// starts a run of `padded` output rows whose tail is zeros, e.g. `rows` 3, `padded` 4:
///
///     in rows   g0 g1 g2 u0 u1 u2          out rows   g0 g1 g2 0 | u0 u1 u2 0
///
/// `source(r) = (r / padded) * rows + r % padded`, or -1 (a zero row) where `r % padded >= rows`.
/// With `rows == padded` it is the identity. @pre `0 <= rows <= padded`, `padded > 0`.
QTL_HOST_DEVICE constexpr index_t padded_row_source(index_t r, index_t rows, index_t padded) {
  index_t const k = r % padded;
  return k < rows ? (r / padded) * rows + k : -1;
}

// ------------------------------------------------------------------------------------------------
// CuteDSL row orders (gather form)
// ------------------------------------------------------------------------------------------------

/// Source index of index `n` along a dimension of `size` of vLLM's `interleave_linear_and_gate(x,
/// group_size)`: the halves `[l0 .. | g0 ..]` (linear, gate) alternate in groups of `group`:
/// `[l(0..g-1) g(0..g-1) l(g..2g-1) g(g..2g-1) ..]`, i.e. the view `[2, size/(2g), g]` transposed to
/// `[size/(2g), 2, g]`: `source(n) = ((n / g) % 2) * size/2 + (n / (2g)) * g + n % g`.
/// @pre `size % (2 * group) == 0`.
QTL_HOST_DEVICE constexpr index_t interleave_linear_and_gate_source(index_t n, index_t size, index_t group) {
  return ((n / group) % 2) * (size / 2) + (n / (2 * group)) * group + n % group;
}

/// Source row of output row `n` of `rows` (even) of vLLM's
/// `reorder_w13_to_w31_for_flashinfer_cutedsl`: `[up; gate]` from gpt-oss's interleaved
/// `[gate0, up0, gate1, up1, ..]` (`interleaved`: `source(n) = 2n + 1` in the top half, `2(n - rows/2)`
/// in the bottom), else from `[gate; up]` (the half swap).
QTL_HOST_DEVICE constexpr index_t w13_to_w31_source(index_t n, index_t rows, bool interleaved) {
  if (!interleaved) {
    return swap_halves_source(n, rows);
  }
  return n < rows / 2 ? 2 * n + 1 : 2 * (n - rows / 2);
}

/// The row map of one MoE layout op, evaluated alike on the host and the device: output row `n`
/// is input row `source(n)`, or zeros where that is -1.
struct moe_row_map {
  enum class kind : int { padded, interleave_linear_and_gate, w13_to_w31, w13_to_w31_interleaved };
  kind k = kind::padded;
  index_t a = 0;  ///< padded: the input rows per run; interleave: the size; w13_to_w31: the rows
  index_t b = 1;  ///< padded: the output rows per run; interleave: the group

  QTL_HOST_DEVICE constexpr index_t source(index_t n) const {
    switch (k) {
      case kind::padded: return padded_row_source(n, a, b);
      case kind::interleave_linear_and_gate: return interleave_linear_and_gate_source(n, a, b);
      case kind::w13_to_w31: return w13_to_w31_source(n, a, false);
      default: return w13_to_w31_source(n, a, true);
    }
  }
};

}  // namespace qtl
