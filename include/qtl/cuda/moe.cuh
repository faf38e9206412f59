#pragma once
/// \file
/// CUDA kernels and launchers of qtl/moe.hpp: the trtllm-gen FP4 MoE static weight preparation on
/// device memory, one launch per tensor for all experts. Each destination row (weights) or 4-byte
/// word (scales) computes its source through the host header's closed forms
/// (`w3w1_row_source`, `w2_row_source`, `blockscale_position_of`), so no index vector is uploaded
/// and device bytes equal host bytes (test/cuda/moe_test.cu):
///
///     weights: block per destination row (e, n):  out[e][n][:] = in[e][source(n)][:]   (16-byte copies)
///     scales:  thread per word o of expert e:     (n, k) = position_of(o);  4 bytes in[e][source(n)][k..k+3]
///
/// Launchers take a `cudaStream_t` and return `cudaError_t` (`cudaErrorInvalidValue` for what the
/// host would reject, before anything is enqueued); they never throw or synchronise.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#error "<qtl/cuda/moe.cuh> needs nvcc; host code includes <qtl/moe.hpp>"
#endif  // ^^^ __CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>
#include <qtl/blockscale.hpp>
#include <qtl/cuda/launch.cuh>
#include <qtl/macros.hpp>
#include <qtl/moe.hpp>
#include <qtl/view.hpp>
#include <type_traits>

namespace qtl::cuda {

namespace detail {

inline constexpr int moe_row_threads = 128;
inline constexpr int moe_word_threads = launch_policy::threads;

// Which row map a tensor takes: GEMM2's shuffle, or GEMM1's (gated or not).
enum class moe_rows : int { w2 = 0, w3w1_gated = 1, w3w1 = 2 };

template <int EpilogueTileM>
QTL_HOST_DEVICE constexpr index_t moe_row_source(moe_rows map, index_t n, index_t rows) {
  return map == moe_rows::w2 ? w2_row_source<EpilogueTileM>(n)
                             : w3w1_row_source<EpilogueTileM>(n, rows, map == moe_rows::w3w1_gated);
}

template <int EpilogueTileM, class T>
QTL_KERNEL void moe_gather_rows_kernel(view3d<T const> in, view3d<T> out, moe_rows map) {
  index_t const rows = in.extent[1];
  index_t const width = in.extent[2];  // bytes
  index_t const total = in.extent[0] * rows;
  for (index_t r = blockIdx.x; r < total; r += gridDim.x) {
    index_t const e = r / rows;
    index_t const n = r % rows;
    auto const* src = reinterpret_cast<unsigned char const*>(&in(e, moe_row_source<EpilogueTileM>(map, n, rows), 0));
    auto* dst = reinterpret_cast<unsigned char*>(&out(e, n, 0));
    if ((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) % 16 == 0 && width % 16 == 0) {
      for (index_t i = threadIdx.x; i < width / 16; i += blockDim.x) {
        reinterpret_cast<::uint4*>(dst)[i] = reinterpret_cast<::uint4 const*>(src)[i];
      }
    } else {
      for (index_t i = threadIdx.x; i < width; i += blockDim.x) {
        dst[i] = src[i];
      }
    }
  }
}

// Scales of every expert: rows % 128 == 0 and cols % 4 == 0 (the plan's preconditions), so the
// per-expert 128x4 buffer has no padding and each word is 4 consecutive K-blocks of one row.
template <int EpilogueTileM, class T>
QTL_KERNEL void moe_scales_kernel(view3d<T const> in, T* out, moe_rows map) {
  index_t const rows = in.extent[1];
  index_t const cols = in.extent[2];
  index_t const per_expert = rows * cols;
  index_t const words = in.extent[0] * per_expert / 4;
  for (index_t w = index_t(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += index_t(gridDim.x) * blockDim.x) {
    index_t const o = 4 * w;
    index_t const e = o / per_expert;
    blockscale_position const p = blockscale_position_of<layout_128x4>(o % per_expert, cols);
    auto const* src =
        reinterpret_cast<unsigned char const*>(&in(e, moe_row_source<EpilogueTileM>(map, p.m, rows), p.k));
    auto* dst = reinterpret_cast<unsigned char*>(out) + o;
    if (reinterpret_cast<std::uintptr_t>(src) % 4 == 0 && reinterpret_cast<std::uintptr_t>(dst) % 4 == 0) {
      *reinterpret_cast<std::uint32_t*>(dst) = *reinterpret_cast<std::uint32_t const*>(src);
    } else {
      QTL_UNROLL
      for (int c = 0; c < 4; ++c) {
        dst[c] = src[c];
      }
    }
  }
}

inline unsigned moe_grid(index_t items, int per_block) {
  return grid_stride_blocks(items, per_block, launch_policy::wide_grid_stride_cap);
}

template <class In, class Out>
bool moe_tensor_ok(view3d<In> const& in, view3d<Out> const& out, index_t e, index_t rows, index_t width,
                   bool is_scale) {
  index_t const want[3] = {e, rows, width};
  for (int d = 0; d < 3; ++d) {
    if (in.extent[d] != want[d] || out.extent[d] != want[d]) {
      return false;
    }
  }
  if (in.stride[2] != 1 || out.stride[2] != 1 || (is_scale && !out.is_contiguous())) {
    return false;
  }
  return !qtl::views_overlap(in, out);
}

}  // namespace detail

/// Device `qtl::prepare_static_weights_for_trtllm_fp4_moe` (with `EpilogueTileM`, 128 in the
/// reference): the four prepared tensors of `out` from `in`, shapes as `trtllm_fp4_moe_shape`
/// says, the same bytes as the host plan. Four launches (one per tensor), each over all experts.
/// @return cudaErrorInvalidValue if `shape.valid()` is false, a tensor's shape differs, an
///         innermost stride is not 1, the output scales are not contiguous or an output overlaps
///         its input; otherwise the status of the launches.
template <int EpilogueTileM = 128, blockscale_byte WOut, blockscale_byte SOut, readable_as<WOut> WIn,
          readable_as<SOut> SIn>
cudaError_t prepare_static_weights_for_trtllm_fp4_moe(trtllm_fp4_moe_shape const& shape,
                                                      trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                                      trtllm_fp4_moe_tensors<WOut, SOut> const& out,
                                                      cudaStream_t stream = 0) {
  if (!shape.valid()) {
    return cudaErrorInvalidValue;
  }
  index_t const e = shape.num_experts;
  index_t const h = shape.hidden_size;
  index_t const i = shape.intermediate_size;
  index_t const r1 = shape.gemm1_rows();
  if (!detail::moe_tensor_ok(in.gemm1_weights, out.gemm1_weights, e, r1, h / 2, false) ||
      !detail::moe_tensor_ok(in.gemm1_scales, out.gemm1_scales, e, r1, h / 16, true) ||
      !detail::moe_tensor_ok(in.gemm2_weights, out.gemm2_weights, e, h, i / 2, false) ||
      !detail::moe_tensor_ok(in.gemm2_scales, out.gemm2_scales, e, h, i / 16, true)) {
    return cudaErrorInvalidValue;
  }
  if (e == 0) {
    return cudaSuccess;
  }
  auto const g1 = shape.gated ? detail::moe_rows::w3w1_gated : detail::moe_rows::w3w1;
  auto const g2 = detail::moe_rows::w2;
  using w_t = WOut;
  using s_t = SOut;
  if (cudaError_t const st =
          launch(detail::moe_gather_rows_kernel<EpilogueTileM, w_t>, detail::moe_grid(e * r1, 1),
                 detail::moe_row_threads, 0, stream, view3d<w_t const>(in.gemm1_weights), out.gemm1_weights, g1);
      st != cudaSuccess) {
    return st;
  }
  if (cudaError_t const st =
          launch(detail::moe_scales_kernel<EpilogueTileM, s_t>,
                 detail::moe_grid(e * r1 * (h / 16) / 4, detail::moe_word_threads), detail::moe_word_threads, 0, stream,
                 view3d<s_t const>(in.gemm1_scales), out.gemm1_scales.data, g1);
      st != cudaSuccess) {
    return st;
  }
  if (cudaError_t const st =
          launch(detail::moe_gather_rows_kernel<EpilogueTileM, w_t>, detail::moe_grid(e * h, 1),
                 detail::moe_row_threads, 0, stream, view3d<w_t const>(in.gemm2_weights), out.gemm2_weights, g2);
      st != cudaSuccess) {
    return st;
  }
  return launch(detail::moe_scales_kernel<EpilogueTileM, s_t>,
                detail::moe_grid(e * h * (i / 16) / 4, detail::moe_word_threads), detail::moe_word_threads, 0, stream,
                view3d<s_t const>(in.gemm2_scales), out.gemm2_scales.data, g2);
}

}  // namespace qtl::cuda
