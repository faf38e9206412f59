#pragma once
/// \file
/// The host loops of the block-scale layouts of the block-scaled MMAs (NVFP4, MXFP4, MXFP8):
/// `swizzle_blockscale` / `unswizzle_blockscale` (sglang `swizzle_blockscale`, flashinfer
/// `block_scale_interleave` and its reverse) move a row-major `[B, M, Kb]` scale matrix into and out
/// of a layout. The layouts themselves (compile-time tile shapes: where the scale of row `m`,
/// K-block `k` lives in the buffer a GEMM reads) and their `QTL_HOST_DEVICE constexpr` offset
/// function `blockscale_offset` with its inverse are in <qtl/element/blockscale.hpp>, which this
/// header includes; `qtl/cuda/blockscale.cuh` runs the same offset function on the GPU.
/// `docs/spec/blockscale.md` §2 is the spec.
///
/// The operations only move bytes: they work on any 1-byte scale type alike (E4M3 for NVFP4, E8M0
/// for MX, `std::uint8_t`), keep it, and write where the caller says.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <qtl/detail/blockscale_band.hpp>
#include <qtl/element/blockscale.hpp>
#include <qtl/error.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>
#include <string>
#include <type_traits>
#include <vector>


namespace qtl {

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

/// The checks both directions share: the row-major side `linear` ([B, M, Kb] or [M, Kb], any
/// strides, no negative extent) and the `Layout` side `swizzled` (exactly [.., pad_rows(M),
/// pad_cols(Kb)], contiguous) that must not overlap. `op` names the function and `linear_is_input`
/// which side is its input, in the errors.
template <class Layout, class Linear, class Swizzled, int Rank>
void check_swizzle_pair(char const* op, view<Linear, Rank> const& linear, view<Swizzled, Rank> const& swizzled,
                        bool linear_is_input) {
  std::string const name = op;
  char const* linear_role = linear_is_input ? "input" : "output";
  char const* swizzled_role = linear_is_input ? "output" : "input";
  for (int d = 0; d < Rank; ++d) {
    if (linear.extent[d] < 0) {
      throw shape_error(name + ": " + linear_role + " extent " + std::to_string(d) + " is negative (" +
                        std::to_string(linear.extent[d]) + ")");
    }
  }
  auto const want = swizzled_extents<Layout>(linear.extent);
  for (int d = 0; d < Rank; ++d) {
    if (swizzled.extent[d] != want[d]) {
      throw shape_error(name + ": " + swizzled_role + " has shape " + shape_string(swizzled.extent, Rank) +
                        ", expected " + shape_string(want.data(), Rank) + " for an " + linear_role + " of shape " +
                        shape_string(linear.extent, Rank) + " (rows and K-blocks padded to whole tiles)");
    }
  }
  if (!swizzled.is_contiguous()) {
    throw shape_error(name + ": the " + swizzled_role + " must be contiguous (the layout is a flat buffer)");
  }
  if (views_overlap(linear, swizzled)) {
    throw value_error(name + ": the output overlaps the input");
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
  detail::check_swizzle_pair<Layout>("qtl::swizzle_blockscale", in, out, true);
  view<In, 3> const src = detail::as_batched(in);
  index_t const padded_rows = Layout::pad_rows(src.extent[1]);
  index_t const padded_cols = Layout::pad_cols(src.extent[2]);
  if (out.size() == 0) {
    return;
  }
  if constexpr (std::is_same_v<Layout, layout_128x4>) {
    if (src.stride[2] == 1 || src.extent[2] <= 1) {
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
  detail::check_swizzle_pair<Layout>("qtl::unswizzle_blockscale", out, in, false);
  view<Out, 3> const dst = detail::as_batched(out);
  index_t const padded_rows = Layout::pad_rows(dst.extent[1]);
  index_t const padded_cols = Layout::pad_cols(dst.extent[2]);
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
