#pragma once
/// \file
/// The element layer of the block-scale layouts (`qtl/blockscale.hpp` runs it on the host,
/// `qtl/cuda/blockscale.cuh` on the device, and kernel authors build their own kernels from it):
/// the compile-time tile shapes (`blockscale_layout`, `layout_128x4`, ...), the concepts of the
/// byte types the operations move, and the `QTL_HOST_DEVICE constexpr` offset function with its
/// inverse. `docs/spec/blockscale.md` §2 is the spec.

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl {

// ------------------------------------------------------------------------------------------------
// Layouts
// ------------------------------------------------------------------------------------------------

/// A block-scale layout: the scale matrix `[M, Kb]` (Kb = K / sf_vec K-blocks per row) is padded to
/// whole tiles of `RowsInner * RowsOuter` rows by `Cols` K-blocks; tiles are stored one after the
/// other, K-tiles innermost (then M-tiles, then the batch), each tile as `RowsInner` lines of
/// `RowsOuter * Cols` bytes, so that row `m` and K-block `k` of the tile sit at
///
///     (m % RowsInner) * RowsOuter * Cols  +  (m / RowsInner) * Cols  +  k          (CuTe:
///     Shape <Shape <RowsInner, RowsOuter>, Cols>  :  Stride <Stride <RowsOuter*Cols, Cols>, 1>)
///
/// `layout_128x4 = blockscale_layout<32, 4, 4>` is the Blackwell tcgen05 layout (CUTLASS
/// `SfKMajorAtom`, cuBLAS "1D block scaling factors layout"): one 512-byte tile per 128 rows x 4
/// K-blocks, one 16-byte line per `m % 32` holding the 4 K-blocks of the rows m, m+32, m+64, m+96:
///
///     tile of 128 rows x 4 K-blocks (k0..k3)        512 bytes, 32 lines of 16 bytes
///     row   0 [k0 k1 k2 k3]  ─┐                     line  0: | r0 k0..k3 | r32 k0..k3 | r64 .. | r96 .. |
///     row   1 [k0 k1 k2 k3]   │ m % 32 = line       line  1: | r1        | r33        | r65    | r97    |
///      ...                    │ m / 32 = 4-byte     ...
///     row  31                ─┘  slot in the line   line 31: | r31       | r63        | r95    | r127   |
///     row  32 .. 63   slot 1      byte = 16 * (m % 32) + 4 * (m / 32) + k
///     row  64 .. 95   slot 2
///     row  96 .. 127  slot 3
///
/// The others of `docs/spec/blockscale.md` §2.4 are the same tiling with other shapes:
/// `layout_8x4` (flashinfer `is_sf_8x4_layout`, one 32-byte tile per 8 rows x 4 blocks),
/// `layout_8x16` (trtllm-gen `R8c16`), `layout_linear` (row-major, no padding).
template <int RowsInner, int RowsOuter, int Cols>
struct blockscale_layout {
  static_assert(RowsInner > 0 && RowsOuter > 0 && Cols > 0, "qtl::blockscale_layout: tile extents must be positive");
  static constexpr int rows_inner = RowsInner;
  static constexpr int rows_outer = RowsOuter;
  /// Rows of a tile: M is padded to a multiple of it.
  static constexpr int tile_rows = RowsInner * RowsOuter;
  /// K-blocks of a tile: Kb is padded to a multiple of it.
  static constexpr int tile_cols = Cols;
  /// Bytes (scales) of a tile.
  static constexpr int tile_size = tile_rows * tile_cols;

  /// `M` rounded up to whole tiles.
  QTL_HOST_DEVICE static constexpr index_t pad_rows(index_t rows) {
    return (rows + tile_rows - 1) / tile_rows * tile_rows;
  }
  /// `Kb` rounded up to whole tiles.
  QTL_HOST_DEVICE static constexpr index_t pad_cols(index_t cols) {
    return (cols + tile_cols - 1) / tile_cols * tile_cols;
  }
  /// Offset of (row `r`, K-block `c`) inside one tile; `r < tile_rows`, `c < tile_cols`.
  QTL_HOST_DEVICE static constexpr index_t offset_in_tile(index_t r, index_t c) {
    return (r % RowsInner) * (RowsOuter * Cols) + (r / RowsInner) * Cols + c;
  }
};

/// NVFP4 / MXFP4 / MXFP8 scales for Blackwell block-scaled MMAs (sglang `swizzle_blockscale`).
using layout_128x4 = blockscale_layout<32, 4, 4>;
/// flashinfer's 8x4 layout (`get_sf_out_offset_8x4`, small-M TRT-LLM `mm_fp4`).
using layout_8x4 = blockscale_layout<8, 1, 4>;
/// trtllm-gen's `R8c16` layout (`E2m1Utils::getSfOffset`).
using layout_8x16 = blockscale_layout<8, 1, 16>;
/// Row-major, unpadded: `offset = m * Kb + k`.
using layout_linear = blockscale_layout<1, 1, 1>;

namespace detail {
template <class L>
inline constexpr bool is_blockscale_layout = false;
template <int RI, int RO, int C>
inline constexpr bool is_blockscale_layout<blockscale_layout<RI, RO, C>> = true;
}  // namespace detail

/// A specialisation of `qtl::blockscale_layout`.
template <class L>
concept blockscale_layout_type = detail::is_blockscale_layout<L>;

/// A type whose objects are single bytes moved as they are: the scale types (E4M3, E8M0 storage
/// structs), `std::uint8_t`, `std::byte`.
template <class T>
concept blockscale_byte = sizeof(T) == 1 && std::is_trivially_copyable_v<T>;

/// `In` is `Out` or `Out const`: the element type of an input view that an output of `Out` copies.
template <class In, class Out>
concept readable_as = std::is_same_v<std::remove_const_t<In>, Out>;

/// Byte offset of the scale of row `m`, K-block `k` in a `Layout` buffer whose K-blocks are padded
/// to `padded_cols` (= `Layout::pad_cols(Kb)`). This is the public entry point for code that writes
/// scales directly in the swizzled layout (FP4/MX quantizers):
///
///     off = ((m / tile_rows) * (padded_cols / tile_cols) + k / tile_cols) * tile_size
///         + Layout::offset_in_tile(m % tile_rows, k % tile_cols)
///
/// For `layout_128x4`: `((m/128) * (padded_cols/4) + k/4) * 512 + (m%32)*16 + ((m%128)/32)*4 + k%4`.
/// @pre `0 <= m`, `0 <= k < padded_cols`, `padded_cols % Layout::tile_cols == 0`.
template <blockscale_layout_type Layout = layout_128x4>
QTL_HOST_DEVICE constexpr index_t blockscale_offset(index_t m, index_t k, index_t padded_cols) {
  index_t const tile = (m / Layout::tile_rows) * (padded_cols / Layout::tile_cols) + k / Layout::tile_cols;
  return tile * Layout::tile_size + Layout::offset_in_tile(m % Layout::tile_rows, k % Layout::tile_cols);
}

/// Byte offset of scale (`b`, `m`, `k`) in a batch of `Layout` buffers, each
/// `padded_rows * padded_cols` bytes (batch-major, as sglang's 3-D `swizzle_blockscale`).
/// @pre as the 2-D form, and `padded_rows == Layout::pad_rows(M)`.
template <blockscale_layout_type Layout = layout_128x4>
QTL_HOST_DEVICE constexpr index_t blockscale_offset(index_t b, index_t m, index_t k, index_t padded_rows,
                                                    index_t padded_cols) {
  return b * padded_rows * padded_cols + blockscale_offset<Layout>(m, k, padded_cols);
}

/// The extents of the `Layout` buffer that holds scales of extents `linear` (`[B, M, Kb]` or
/// `[M, Kb]`): `[B, pad_rows(M), pad_cols(Kb)]` or `[pad_rows(M), pad_cols(Kb)]`.
template <blockscale_layout_type Layout, int Rank>
constexpr std::array<index_t, Rank> swizzled_extents(index_t const (&linear)[Rank]) {
  static_assert(Rank == 2 || Rank == 3, "qtl::swizzled_extents: scales are [M, Kb] or [B, M, Kb]");
  std::array<index_t, Rank> e{};
  if constexpr (Rank == 3) {
    e[0] = linear[0];
  }
  e[Rank - 2] = Layout::pad_rows(linear[Rank - 2]);
  e[Rank - 1] = Layout::pad_cols(linear[Rank - 1]);
  return e;
}

/// The 6-D view CuteDSL's grouped GEMMs take of a batch of `layout_128x4` scale buffers
/// `[groups, padded_rows, padded_cols]` (flashinfer `convert_sf_to_mma_layout`, vLLM
/// `nvfp4_swizzled_scale_to_cutedsl_mma_view`): no byte moves, the buffer is indexed
///
///     (m % 32, (m % 128) / 32, m / 128, k % 4, k / 4, b)     shape (32, 4, m_tiles, 4, k_tiles, groups)
///
/// with the strides (in elements) the 128x4 layout stores them at (`offset` below equals
/// `blockscale_offset<layout_128x4>(b, m, k, padded_rows, padded_cols)`): storage order
/// (groups, m_tiles, k_tiles, 32, 4, 4), torch's `view(...).permute(3, 4, 1, 5, 2, 0)`.
struct cutedsl_mma_view {
  std::array<index_t, 6> shape{};
  std::array<index_t, 6> strides{};

  /// The buffer offset of view element `i`.
  QTL_HOST_DEVICE constexpr index_t offset(std::array<index_t, 6> const& i) const {
    index_t o = 0;
    for (int d = 0; d != 6; ++d) {
      o += i[d] * strides[d];
    }
    return o;
  }
};

/// The CuteDSL MMA view of `groups` `layout_128x4` buffers of `padded_rows` x `padded_cols`.
/// @pre `padded_rows % 128 == 0`, `padded_cols % 4 == 0` (whole tiles), all >= 0.
constexpr cutedsl_mma_view cutedsl_mma_view_of(index_t groups, index_t padded_rows, index_t padded_cols) {
  index_t const m_tiles = padded_rows / layout_128x4::tile_rows;
  index_t const k_tiles = padded_cols / layout_128x4::tile_cols;
  index_t const tile = layout_128x4::tile_size;
  return {{32, 4, m_tiles, 4, k_tiles, groups}, {16, 4, k_tiles * tile, 1, tile, m_tiles * k_tiles * tile}};
}

/// Row and K-block of a scale in a layout buffer.
struct blockscale_position {
  index_t m = 0;
  index_t k = 0;
  friend constexpr bool operator==(blockscale_position, blockscale_position) = default;
};

/// The inverse of `blockscale_offset`: the (row, K-block) stored at byte `offset` of one `Layout`
/// buffer with `padded_cols` K-blocks. Positions with `m >= M` or `k >= Kb` are padding.
template <blockscale_layout_type Layout = layout_128x4>
QTL_HOST_DEVICE constexpr blockscale_position blockscale_position_of(index_t offset, index_t padded_cols) {
  index_t const n_ktiles = padded_cols / Layout::tile_cols;
  index_t const tile = offset / Layout::tile_size;
  index_t const in_tile = offset % Layout::tile_size;
  constexpr index_t line = Layout::rows_outer * Layout::tile_cols;  // bytes per rows_inner line
  index_t const m = (tile / n_ktiles) * Layout::tile_rows + (in_tile % line) / Layout::tile_cols * Layout::rows_inner +
                    in_tile / line;
  index_t const k = (tile % n_ktiles) * Layout::tile_cols + in_tile % Layout::tile_cols;
  return {m, k};
}

}  // namespace qtl
