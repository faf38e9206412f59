#pragma once
/// \file
/// `qtl::transpose`: out = inᵀ for 2-D views, the step between Hugging Face's [N, K] linear
/// weights and the (K, N) layout `quantize_weights` and `pack_rows` take.
///
///   in (R, C), row stride s_in              out (C, R), row stride s_out
///   ┌ a00 a01 … a0C ┐                       ┌ a00 a10 … aR0 ┐
///   │ a10 a11 … a1C │           ──▶         │ a01 a11 … aR1 │
///   └ aR0 aR1 … aRC ┘                       └ a0C a1C … aRC ┘
///
/// Host only. 2-byte elements (fp16, bf16, int16) move as 8×8 blocks through SSE2 registers
/// (three rounds of unpacks) where the compiler targets x86-64; everything else, and the edges
/// that do not fill a block, by 32×32 tiles of element copies, so that reads and writes each stay
/// within a few cache lines.

#include <cstddef>
#include <string>
#include <type_traits>

#include <qtl/error.hpp>
#include <qtl/view.hpp>
#include <qtl/x86/transpose.hpp>


namespace qtl {

namespace detail::tr {

/// Elements [r0, r1) × [c0, c1) of `in` into `out`, one at a time.
template <class T>
void transpose_scalar(view2d<T const> in, view2d<T> out, index_t r0, index_t r1, index_t c0, index_t c1) {
  constexpr index_t tile = 32;
  for (index_t rt = r0; rt < r1; rt += tile) {
    for (index_t ct = c0; ct < c1; ct += tile) {
      index_t const re = rt + tile < r1 ? rt + tile : r1;
      index_t const ce = ct + tile < c1 ? ct + tile : c1;
      for (index_t r = rt; r < re; ++r) {
        for (index_t c = ct; c < ce; ++c) {
          out(c, r) = in(r, c);
        }
      }
    }
  }
}


}  // namespace detail::tr

/// out(c, r) = in(r, c) for every element. `out` must be in's shape transposed, with unit stride
/// along its last dimension, as `in`; the two must not overlap.
/// @throws shape_error for mismatched shapes or non-unit strides
template <class W, class T>
void transpose(view2d<W> in_, view2d<T> out) {
  static_assert(std::is_same_v<std::remove_const_t<W>, T> && !std::is_const_v<T>,
                "qtl::transpose: in and out hold the same element type, out writable");
  view2d<T const> const in{in_.data, {in_.extent[0], in_.extent[1]}, {in_.stride[0], in_.stride[1]}};
  index_t const rows = in.extent[0];
  index_t const cols = in.extent[1];
  if (out.extent[0] != cols || out.extent[1] != rows) {
    throw shape_error("qtl::transpose: out has shape " + shape_string(out.extent[0], out.extent[1]) +
                      ", expected " + shape_string(cols, rows));
  }
  if ((cols > 1 && in.stride[1] != 1) || (rows > 1 && out.stride[1] != 1)) {
    throw shape_error("qtl::transpose: in and out need unit stride along their last dimension");
  }
  // The 8x8 blocks of the top-left [r8, c8) by the x86 executor (2-byte elements, SSE2), if any.
  index_t r8 = 0;
  index_t c8 = 0;
  detail::tr::transpose_blocks_x86(in, out, r8, c8);
  detail::tr::transpose_scalar(in, out, 0, r8, c8, cols);   // right edge of the blocks
  detail::tr::transpose_scalar(in, out, r8, rows, 0, cols);  // bottom rows
}

}  // namespace qtl
