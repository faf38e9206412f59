#pragma once
/// \file
/// CUDA kernels and launchers of qtl/blockscale.hpp: `swizzle_blockscale` and
/// `unswizzle_blockscale` on device memory, running the host header's offset function
/// (`blockscale_offset` / `blockscale_position_of`), so device bytes equal host bytes
/// (test/cuda/blockscale_test.cu).
///
/// Gather formulation (docs/spec/blockscale.md §9): each thread owns one 4-byte word of the
/// destination, computes which (row, K-block)s it holds and reads them, so every byte of the padded
/// output, padding included, is written exactly once (zero for padding) and writes coalesce:
///
///     swizzled word w (bytes 4w..4w+3) = scales (b, m, k..k+3) of one tile line slot
///                                        -> 4 byte reads of row m, one 32-bit store
///
/// Layouts whose tiles are not a multiple of 4 K-blocks wide (`layout_linear`), or outputs not
/// 4-byte aligned, take one thread per byte. The unswizzle gathers one byte per thread.
///
/// Launchers take a `cudaStream_t` and return `cudaError_t` (`cudaErrorInvalidValue` for shapes
/// the host function would reject, before anything is enqueued); they never throw or synchronise.
/// Views hold device pointers.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#error "<qtl/cuda/blockscale.cuh> needs nvcc; host code includes <qtl/blockscale.hpp>"
#endif  // ^^^ __CUDACC__ ^^^

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <qtl/blockscale.hpp>
#include <qtl/cuda/launch.cuh>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>
#include <type_traits>

namespace qtl::cuda {

namespace detail {

inline constexpr int blockscale_threads = launch_policy::threads;

inline unsigned blockscale_grid(index_t items) {
  return grid_stride_blocks(items, blockscale_threads, launch_policy::wide_grid_stride_cap);
}

template <class T>
QTL_DEVICE std::uint8_t load_byte(T const* p) {
  return *reinterpret_cast<unsigned char const*>(p);
}

// One thread per 4-byte word of the swizzled buffer (Layout::tile_cols % 4 == 0: the 4 bytes of a
// word are 4 consecutive K-blocks of one row).
template <class Layout, class T>
QTL_KERNEL void swizzle_blockscale_words_kernel(view3d<T const> in, T* out, index_t padded_rows, index_t padded_cols) {
  index_t const per_batch = padded_rows * padded_cols;
  index_t const words = in.extent[0] * per_batch / 4;
  index_t const rows = in.extent[1];
  index_t const cols = in.extent[2];
  for (index_t w = index_t(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += index_t(gridDim.x) * blockDim.x) {
    index_t const o = 4 * w;
    index_t const b = o / per_batch;
    blockscale_position const p = blockscale_position_of<Layout>(o % per_batch, padded_cols);
    std::uint32_t word = 0;
    if (p.m < rows) {
      QTL_UNROLL
      for (int c = 0; c < 4; ++c) {
        if (p.k + c < cols) {
          word |= std::uint32_t(load_byte(&in(b, p.m, p.k + c))) << (8 * c);
        }
      }
    }
    *reinterpret_cast<std::uint32_t*>(reinterpret_cast<unsigned char*>(out) + o) = word;
  }
}

// One thread per byte of the swizzled buffer (any layout, any alignment).
template <class Layout, class T>
QTL_KERNEL void swizzle_blockscale_bytes_kernel(view3d<T const> in, T* out, index_t padded_rows, index_t padded_cols) {
  index_t const per_batch = padded_rows * padded_cols;
  index_t const total = in.extent[0] * per_batch;
  for (index_t o = index_t(blockIdx.x) * blockDim.x + threadIdx.x; o < total; o += index_t(gridDim.x) * blockDim.x) {
    index_t const b = o / per_batch;
    blockscale_position const p = blockscale_position_of<Layout>(o % per_batch, padded_cols);
    bool const inside = p.m < in.extent[1] && p.k < in.extent[2];
    reinterpret_cast<unsigned char*>(out)[o] = inside ? load_byte(&in(b, p.m, p.k)) : std::uint8_t{0};
  }
}

// One thread per element of the unswizzled scales.
template <class Layout, class T>
QTL_KERNEL void unswizzle_blockscale_kernel(T const* in, view3d<T> out, index_t padded_rows, index_t padded_cols) {
  index_t const rows = out.extent[1];
  index_t const cols = out.extent[2];
  index_t const total = out.extent[0] * rows * cols;
  for (index_t i = index_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += index_t(gridDim.x) * blockDim.x) {
    index_t const b = i / (rows * cols);
    index_t const m = i / cols % rows;
    index_t const k = i % cols;
    *reinterpret_cast<unsigned char*>(&out(b, m, k)) =
        load_byte(in + blockscale_offset<Layout>(b, m, k, padded_rows, padded_cols));
  }
}

template <class T, int Rank>
view<T, 3> as_batched(view<T, Rank> v) {
  return qtl::detail::as_batched(v);
}

}  // namespace detail

/// Device `qtl::swizzle_blockscale`: `in` `[B, M, Kb]` / `[M, Kb]` scales (any strides) into the
/// contiguous `Layout` buffer `out` `[B, Mp, Kbp]` / `[Mp, Kbp]`, padding zeroed. Same bytes as
/// the host function.
/// @return cudaErrorInvalidValue if `out`'s shape is not the padded one or `out` is not
///         contiguous; otherwise the launch status.
template <blockscale_layout_type Layout = layout_128x4, blockscale_byte Out, readable_as<Out> In, int Rank>
cudaError_t swizzle_blockscale(view<In, Rank> in, view<Out, Rank> out, cudaStream_t stream = 0) {
  static_assert(Rank == 2 || Rank == 3, "qtl::cuda::swizzle_blockscale: scales are [M, Kb] or [B, M, Kb] views");
  view<Out const, 3> const src = detail::as_batched(view<Out const, Rank>(in));
  index_t const padded_rows = Layout::pad_rows(src.extent[1]);
  index_t const padded_cols = Layout::pad_cols(src.extent[2]);
  auto const want = swizzled_extents<Layout>(in.extent);
  if (src.extent[0] < 0 || src.extent[1] < 0 || src.extent[2] < 0 || !std::equal(want.begin(), want.end(), out.extent) ||
      !out.is_contiguous()) {
    return cudaErrorInvalidValue;
  }
  index_t const total = out.size();
  if (total == 0) {
    return cudaSuccess;
  }
  if constexpr (Layout::tile_cols % 4 == 0) {
    if (reinterpret_cast<std::uintptr_t>(out.data) % 4 == 0) {
      return launch(detail::swizzle_blockscale_words_kernel<Layout, Out>, detail::blockscale_grid(total / 4),
                    detail::blockscale_threads, 0, stream, src, out.data, padded_rows, padded_cols);
    }
  }
  return launch(detail::swizzle_blockscale_bytes_kernel<Layout, Out>, detail::blockscale_grid(total),
                detail::blockscale_threads, 0, stream, src, out.data, padded_rows, padded_cols);
}

/// Device `qtl::unswizzle_blockscale`: the contiguous `Layout` buffer `in` back into the row-major
/// scales `out` (`[B, M, Kb]` / `[M, Kb]`, any strides). Same bytes as the host function.
/// @return cudaErrorInvalidValue if `in` is not `[.., pad_rows(M), pad_cols(Kb)]` or not
///         contiguous; otherwise the launch status.
template <blockscale_layout_type Layout = layout_128x4, blockscale_byte Out, readable_as<Out> In, int Rank>
cudaError_t unswizzle_blockscale(view<In, Rank> in, view<Out, Rank> out, cudaStream_t stream = 0) {
  static_assert(Rank == 2 || Rank == 3, "qtl::cuda::unswizzle_blockscale: scales are [M, Kb] or [B, M, Kb] views");
  view<Out, 3> const dst = detail::as_batched(out);
  index_t const padded_rows = Layout::pad_rows(dst.extent[1]);
  index_t const padded_cols = Layout::pad_cols(dst.extent[2]);
  auto const want = swizzled_extents<Layout>(out.extent);
  if (dst.extent[0] < 0 || dst.extent[1] < 0 || dst.extent[2] < 0 || !std::equal(want.begin(), want.end(), in.extent) ||
      !in.is_contiguous()) {
    return cudaErrorInvalidValue;
  }
  index_t const total = dst.size();
  if (total == 0) {
    return cudaSuccess;
  }
  return launch(detail::unswizzle_blockscale_kernel<Layout, Out>, detail::blockscale_grid(total),
                detail::blockscale_threads, 0, stream, static_cast<Out const*>(in.data), dst, padded_rows, padded_cols);
}

}  // namespace qtl::cuda
