#pragma once
/// \file
/// Block-scale layouts of the block-scaled MMAs (NVFP4, MXFP4, MXFP8): where the scale of row `m`,
/// K-block `k` lives in the buffer a GEMM reads, as a compile-time tile shape with one
/// `QTL_HOST_DEVICE constexpr` offset function and its inverse; and the host loops
/// `swizzle_blockscale` / `unswizzle_blockscale` (sglang `swizzle_blockscale`, flashinfer
/// `block_scale_interleave` and its reverse) that move a row-major `[B, M, Kb]` scale matrix into
/// and out of that layout. `research/blockscale.md` §2 is the spec; `qtl/cuda/blockscale.cuh` runs
/// the same offset function on the GPU.
///
/// The operations only move bytes: they work on any 1-byte scale type alike (E4M3 for NVFP4, E8M0
/// for MX, `std::uint8_t`), keep it, and write where the caller says.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <qtl/detail/blockscale_band.hpp>
#include <qtl/error.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>
#include <string>
#include <type_traits>
#include <vector>


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
/// The others of `research/blockscale.md` §2.4 are the same tiling with other shapes:
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

// ------------------------------------------------------------------------------------------------
// Host loops
// ------------------------------------------------------------------------------------------------

namespace detail {

template <class T>
byte_t const* byte_ptr(T const* p) {
  return reinterpret_cast<byte_t const*>(p);
}
template <class T>
byte_t* byte_ptr(T* p) {
  return reinterpret_cast<byte_t*>(p);
}

inline std::string shape_string(index_t const* e, int rank) {
  std::string s = "[";
  for (int d = 0; d < rank; ++d) {
    s += (d ? ", " : "") + std::to_string(e[d]);
  }
  return s + "]";
}

template <class A, class B, int RA, int RB>
bool views_overlap(view<A, RA> const& a, view<B, RB> const& b) {
  auto const span_end = [](auto const& v, int rank) {
    index_t last = 0;
    for (int d = 0; d < rank; ++d) {
      if (v.extent[d] == 0) {
        return byte_ptr(v.data);
      }
      last += (v.extent[d] - 1) * v.stride[d];
    }
    return byte_ptr(v.data) + last + 1;
  };
  if (a.size() == 0 || b.size() == 0) {
    return false;
  }
  return byte_ptr(a.data) < span_end(b, RB) && byte_ptr(b.data) < span_end(a, RA);
}

// Any layout, any strides: the reference loop, destination-ordered tile by tile.
template <blockscale_layout_type Layout, class In, class Out>
void swizzle_generic(view<In, 3> in, Out* out, index_t padded_rows, index_t padded_cols) {
  index_t const rows = in.extent[1];
  index_t const cols = in.extent[2];
  for (index_t b = 0; b < in.extent[0]; ++b) {
    for (index_t m0 = 0; m0 < padded_rows; m0 += Layout::tile_rows) {
      for (index_t k0 = 0; k0 < padded_cols; k0 += Layout::tile_cols) {
        for (index_t r = 0; r < Layout::tile_rows; ++r) {
          for (index_t c = 0; c < Layout::tile_cols; ++c) {
            index_t const m = m0 + r;
            index_t const k = k0 + c;
            out[blockscale_offset<Layout>(b, m, k, padded_rows, padded_cols)] =
                m < rows && k < cols ? in(b, m, k) : Out{};
          }
        }
      }
    }
  }
}

template <blockscale_layout_type Layout, class In, class Out>
void unswizzle_generic(In const* in, view<Out, 3> out, index_t padded_rows, index_t padded_cols) {
  for (index_t b = 0; b < out.extent[0]; ++b) {
    for (index_t m = 0; m < out.extent[1]; ++m) {
      for (index_t k = 0; k < out.extent[2]; ++k) {
        out(b, m, k) = in[blockscale_offset<Layout>(b, m, k, padded_rows, padded_cols)];
      }
    }
  }
}

// layout_128x4 from rows with unit K-stride (or one K-block), band by band straight from the
// input rows (`detail/blockscale_band.hpp`), each band asking for the rows of the next; the
// padding rows of the last band read a zero row.
template <class In>
void swizzle_128x4(view<In, 3> in, byte_t* out, index_t padded_rows, index_t padded_cols, band_isa level,
                   bool stream = false) {
  index_t const rows = in.extent[1];
  index_t const cols = in.extent[2];
  std::vector<byte_t> const zero(static_cast<std::size_t>(rows % 128 != 0 ? cols : 0), byte_t{0});
  index_t const per_batch = padded_rows / 128;
  byte_t const* bands[2][128];
  auto const gather = [&](index_t band, byte_t const** to) {  // band b * per_batch + m0 / 128
    index_t const b = band / per_batch;
    index_t const m0 = band % per_batch * 128;
    for (index_t r = 0; r < 128; ++r) {
      to[r] = m0 + r < rows ? byte_ptr(&in(b, m0 + r, 0)) : zero.data();
    }
  };
  index_t const n = in.extent[0] * per_batch;
  if (n > 0) {
    gather(0, bands[0]);
  }
  for (index_t band = 0; band < n; ++band) {
    byte_t const** const next = band + 1 < n ? bands[(band + 1) % 2] : nullptr;
    if (next != nullptr) {
      gather(band + 1, next);
    }
    swizzle_band_128x4(bands[band % 2], cols, out, level, stream, next);
    out += 128 * padded_cols;
  }
}

// True when the rows of `v` (unit K-stride, or one K-block) are disjoint and ordered, so that
// writing them in any order gives what the reference loop's row-major order gives.
template <class T>
bool disjoint_unit_rows(view<T, 3> const& v) {
  index_t const rows = v.extent[1];
  index_t const cols = v.extent[2];
  return (v.stride[2] == 1 || cols <= 1) && (rows <= 1 || v.stride[1] >= cols) &&
         (v.extent[0] <= 1 || v.stride[0] >= (rows - 1) * v.stride[1] + cols);
}

// The inverse of swizzle_128x4 into rows that `disjoint_unit_rows` accepts, each band asking for
// the tiles of the next; the padding rows of the last band go to a scratch row.
template <class Out>
void unswizzle_128x4(byte_t const* in, view<Out, 3> out, index_t padded_rows, band_isa level, bool stream = false) {
  index_t const rows = out.extent[1];
  index_t const cols = out.extent[2];
  index_t const padded_cols = (cols + 3) / 4 * 4;
  std::vector<byte_t> scratch(static_cast<std::size_t>(rows % 128 != 0 ? cols : 0));
  byte_t* band[128];
  for (index_t b = 0; b < out.extent[0]; ++b) {
    for (index_t m0 = 0; m0 < padded_rows; m0 += 128) {
      for (index_t r = 0; r < 128; ++r) {
        band[r] = m0 + r < rows ? byte_ptr(&out(b, m0 + r, 0)) : scratch.data();
      }
      bool const last = b + 1 == out.extent[0] && m0 + 128 == padded_rows;
      unswizzle_band_128x4(in, cols, band, level, stream, last ? nullptr : in + 128 * padded_cols);
      in += 128 * padded_cols;
    }
  }
}

template <class In, class Out, int Rank>
void check_swizzle_args(view<In, Rank> const& in, view<Out, Rank> const& out, index_t const (&want)[Rank]) {
  for (int d = 0; d < Rank; ++d) {
    if (in.extent[d] < 0) {
      throw shape_error("qtl::swizzle_blockscale: input extent " + std::to_string(d) + " is negative (" +
                        std::to_string(in.extent[d]) + ")");
    }
  }
  for (int d = 0; d < Rank; ++d) {
    if (out.extent[d] != want[d]) {
      throw shape_error("qtl::swizzle_blockscale: output has shape " + shape_string(out.extent, Rank) + ", expected " +
                        shape_string(want, Rank) + " for an input of shape " + shape_string(in.extent, Rank) +
                        " (rows and K-blocks padded to whole tiles)");
    }
  }
  if (!out.is_contiguous()) {
    throw shape_error("qtl::swizzle_blockscale: the output must be contiguous (the layout is a flat buffer)");
  }
  if (views_overlap(in, out)) {
    throw value_error("qtl::swizzle_blockscale: the output overlaps the input");
  }
}

template <class T, int Rank>
view<T, 3> as_batched(view<T, Rank> v) {
  if constexpr (Rank == 3) {
    return v;
  } else {
    view<T, 3> r;
    r.data = v.data;
    r.extent[0] = 1;
    r.stride[0] = v.size();
    for (int d = 0; d < 2; ++d) {
      r.extent[d + 1] = v.extent[d];
      r.stride[d + 1] = v.stride[d];
    }
    return r;
  }
}

}  // namespace detail

/// Lays out `in` (`[B, M, Kb]` or `[M, Kb]` row-major scales, any strides) in `Layout` into `out`
/// (`[B, Mp, Kbp]` or `[Mp, Kbp]`, contiguous, `Mp = Layout::pad_rows(M)`,
/// `Kbp = Layout::pad_cols(Kb)`): `out.data[blockscale_offset<Layout>(b, m, k, Mp, Kbp)] =
/// in(b, m, k)`, and every padding byte is zero. Equals sglang's `swizzle_blockscale` for
/// `layout_128x4` (whose 2-D/3-D output shape is only a view of the flat buffer), but keeps the
/// scale type (E4M3, E8M0, bytes) and never changes a byte's value.
/// @throws shape_error if `out` does not have that shape or is not contiguous;
///         value_error if `out` overlaps `in`.
template <blockscale_layout_type Layout = layout_128x4, blockscale_byte Out, readable_as<Out> In, int Rank>
void swizzle_blockscale(view<In, Rank> in, view<Out, Rank> out) {
  static_assert(Rank == 2 || Rank == 3, "qtl::swizzle_blockscale: scales are [M, Kb] or [B, M, Kb] views");
  view<In, 3> const src = detail::as_batched(in);
  index_t const batch = src.extent[0];
  index_t const rows = src.extent[1];
  index_t const cols = src.extent[2];
  index_t const padded_rows = Layout::pad_rows(rows);
  index_t const padded_cols = Layout::pad_cols(cols);
  index_t want[Rank];
  if constexpr (Rank == 3) {
    want[0] = batch;
  }
  want[Rank - 2] = padded_rows;
  want[Rank - 1] = padded_cols;
  detail::check_swizzle_args(in, out, want);
  if (out.size() == 0) {
    return;
  }
  if constexpr (std::is_same_v<Layout, layout_128x4>) {
    if (src.stride[2] == 1 || cols <= 1) {
      bool const stream = out.size() >= detail::band_stream_bytes;
      detail::swizzle_128x4(src, detail::byte_ptr(out.data), padded_rows, padded_cols, detail::best_band_isa(), stream);
      if (stream) {
        detail::band_stream_fence();
      }
      return;
    }
  }
  detail::swizzle_generic<Layout>(src, out.data, padded_rows, padded_cols);
}

/// The exact inverse of `swizzle_blockscale`: reads the `Layout` buffer `in` (`[B, Mp, Kbp]` or
/// `[Mp, Kbp]`, contiguous) back into the row-major scales `out` (`[B, M, Kb]` or `[M, Kb]`, any
/// strides); `Mp`, `Kbp` are `out`'s rows and K-blocks padded to whole tiles, and the padding of
/// `in` is not read. (flashinfer `block_scale_interleave_reverse`, vLLM `recover_swizzled_scales`.)
/// @throws shape_error if `in` is not `[.., pad_rows(M), pad_cols(Kb)]` or not contiguous;
///         value_error if `out` overlaps `in`.
template <blockscale_layout_type Layout = layout_128x4, blockscale_byte Out, readable_as<Out> In, int Rank>
void unswizzle_blockscale(view<In, Rank> in, view<Out, Rank> out) {
  static_assert(Rank == 2 || Rank == 3, "qtl::unswizzle_blockscale: scales are [M, Kb] or [B, M, Kb] views");
  view<Out, 3> const dst = detail::as_batched(out);
  index_t const batch = dst.extent[0];
  index_t const rows = dst.extent[1];
  index_t const cols = dst.extent[2];
  index_t const padded_rows = Layout::pad_rows(rows);
  index_t const padded_cols = Layout::pad_cols(cols);
  for (int d = 0; d < Rank; ++d) {
    if (out.extent[d] < 0) {
      throw shape_error("qtl::unswizzle_blockscale: output extent " + std::to_string(d) + " is negative (" +
                        std::to_string(out.extent[d]) + ")");
    }
  }
  index_t want[Rank];
  if constexpr (Rank == 3) {
    want[0] = batch;
  }
  want[Rank - 2] = padded_rows;
  want[Rank - 1] = padded_cols;
  // The roles are mirrored: the swizzled side (here the input) is checked against `want`.
  for (int d = 0; d < Rank; ++d) {
    if (in.extent[d] != want[d]) {
      throw shape_error("qtl::unswizzle_blockscale: input has shape " + detail::shape_string(in.extent, Rank) +
                        ", expected " + detail::shape_string(want, Rank) + " for an output of shape " +
                        detail::shape_string(out.extent, Rank) + " (rows and K-blocks padded to whole tiles)");
    }
  }
  if (!in.is_contiguous()) {
    throw shape_error("qtl::unswizzle_blockscale: the input must be contiguous (the layout is a flat buffer)");
  }
  if (detail::views_overlap(in, out)) {
    throw value_error("qtl::unswizzle_blockscale: the output overlaps the input");
  }
  if (out.size() == 0) {
    return;
  }
  if constexpr (std::is_same_v<Layout, layout_128x4>) {
    if (detail::disjoint_unit_rows(dst)) {
      bool const stream = out.size() >= detail::band_stream_bytes;
      detail::unswizzle_128x4(detail::byte_ptr(in.data), dst, padded_rows, detail::best_band_isa(), stream);
      if (stream) {
        detail::band_stream_fence();
      }
      return;
    }
  }
  detail::unswizzle_generic<Layout>(in.data, dst, padded_rows, padded_cols);
}

/// `swizzle_blockscale` into a new host tensor of shape `[B, Mp, Kbp]` (3-D input) or `[Mp, Kbp]`.
template <blockscale_layout_type Layout = layout_128x4, blockscale_byte In, int Rank>
host_tensor<std::remove_const_t<In>, Rank> swizzle_blockscale(view<In, Rank> in) {
  static_assert(Rank == 2 || Rank == 3, "qtl::swizzle_blockscale: scales are [M, Kb] or [B, M, Kb] views");
  index_t extents[Rank];
  for (int d = 0; d < Rank; ++d) {
    extents[d] = in.extent[d];
  }
  extents[Rank - 2] = Layout::pad_rows(in.extent[Rank - 2]);
  extents[Rank - 1] = Layout::pad_cols(in.extent[Rank - 1]);
  host_tensor<std::remove_const_t<In>, Rank> out(extents);
  swizzle_blockscale<Layout>(in, out.view());
  return out;
}

/// `unswizzle_blockscale` into a new host tensor of `rows` x `cols` (per batch element).
template <blockscale_layout_type Layout = layout_128x4, blockscale_byte In, int Rank>
host_tensor<std::remove_const_t<In>, Rank> unswizzle_blockscale(view<In, Rank> in, index_t rows, index_t cols) {
  static_assert(Rank == 2 || Rank == 3, "qtl::unswizzle_blockscale: scales are [M, Kb] or [B, M, Kb] views");
  if (rows < 0 || cols < 0) {
    throw shape_error("qtl::unswizzle_blockscale: rows (" + std::to_string(rows) + ") and cols (" +
                      std::to_string(cols) + ") must be non-negative");
  }
  index_t extents[Rank];
  if constexpr (Rank == 3) {
    extents[0] = in.extent[0];
  }
  extents[Rank - 2] = rows;
  extents[Rank - 1] = cols;
  host_tensor<std::remove_const_t<In>, Rank> out(extents);
  unswizzle_blockscale<Layout>(in, out.view());
  return out;
}

}  // namespace qtl
