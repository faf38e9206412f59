#pragma once
/// \file
/// CUDA kernels and launchers of qtl/fp4.hpp: NVFP4 global scale, NVFP4/MXFP4/MXFP8 block
/// quantization with the scales written straight into a `blockscale_layout` (padding zeroed),
/// and dequantization. The per-block and per-element work is the host header's
/// (`block_scale_code`, `block_output_scale`, `block_element_code`, `block_dequant_scale`), so
/// device output equals host output bit for bit (test/cuda/fp4_test.cu).
///
/// Work split of `block_quantize`: one thread per pair of elements (one E2M1 byte, or two E4M3
/// bytes), so a block of B elements is a team of B/2 adjacent lanes inside one warp; the team's
/// max by xor-shuffles, its first lane writes the scale byte:
///
///     row i:  | x0 x1 | x2 x3 | ... | x14 x15 | x16 ...        NVFP4: 8 lanes per 16-block
///              lane 0   lane 1        lane 7    lane 8 (next block)
///
/// Launchers take a `cudaStream_t`, return `cudaError_t` (`cudaErrorInvalidValue` for bad shapes,
/// before anything is enqueued), never throw or synchronise; pointers are device pointers.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/fp4.cuh> needs nvcc; host code includes <qtl/fp4.hpp>"
#endif  // ^^^ __CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>
#include <qtl/blockscale.hpp>
#include <qtl/cuda/fp8.cuh>
#include <qtl/cuda/launch.cuh>
#include <qtl/fp4.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda {

namespace detail {

struct nvfp4_global_scale_from_amax_fn {
  QTL_DEVICE static float apply(float amax) { return qtl::nvfp4_global_scale_from_amax(amax); }
};

template <class F, class Layout, class T>
QTL_KERNEL void block_quantize_kernel(view2d<T const> in, view2d<typename F::element> values,
                                      typename F::scale* scales, float const* global_scale) {
  constexpr int team = F::block_size / 2;
  index_t const pairs_per_row = in.extent[1] / 2;
  index_t const total = in.extent[0] * pairs_per_row;
  index_t const padded_cols = Layout::pad_cols(in.extent[1] / F::block_size);
  float const gs = (F::has_global_scale && global_scale != nullptr) ? *global_scale : 1.0f;
  int const lane = threadIdx.x % 32;
  index_t const stride = index_t(gridDim.x) * threads;
  // warp-uniform loop: every lane of a warp runs the same iterations and reaches the shuffles
  for (index_t w0 = index_t(blockIdx.x) * threads + threadIdx.x - lane; w0 < total; w0 += stride) {
    index_t const p = w0 + lane;
    bool const active = p < total;
    index_t const r = active ? p / pairs_per_row : 0;
    index_t const c = active ? 2 * (p % pairs_per_row) : 0;
    float x0 = 0.0f;
    float x1 = 0.0f;
    std::uint32_t m = 0;
    if (active) {
      T const a = in(r, c);
      T const b = in(r, c + 1);
      x0 = to_float(a);
      x1 = to_float(b);
      std::uint32_t const ma = amax_bits(a);
      std::uint32_t const mb = amax_bits(b);
      m = ma > mb ? ma : mb;
    }
    m = team_max<team>(m);
    if (!active) {
      continue;
    }
    float const vmax = amax_value<T>(static_cast<typename qtl::detail::input_bits<T>::word>(m));
    std::uint8_t const sc = block_scale_code<F>(vmax, gs);
    float const os = block_output_scale<F>(sc, vmax, gs);
    std::uint8_t const q0 = block_element_code<F>(x0, os);
    std::uint8_t const q1 = block_element_code<F>(x1, os);
    if constexpr (F::elements_per_value == 2) {
      values(r, c / 2).bits = static_cast<std::uint8_t>(q0 | (q1 << 4));
    } else {
      values(r, c).bits = q0;
      values(r, c + 1).bits = q1;
    }
    if (lane % team == 0) {
      scales[blockscale_offset<Layout>(r, c / F::block_size, padded_cols)].bits = sc;
    }
  }
}

template <class F, class Layout, class Out>
QTL_KERNEL void block_dequantize_kernel(view2d<typename F::element const> values, typename F::scale const* scales,
                                        float const* global_scale, view2d<Out> out) {
  float const gs = (F::has_global_scale && global_scale != nullptr) ? *global_scale : 1.0f;
  index_t const padded_cols = Layout::pad_cols(out.extent[1] / F::block_size);
  for (index_t r = blockIdx.y; r < out.extent[0]; r += gridDim.y) {
    for (index_t j = index_t(blockIdx.x) * threads + threadIdx.x; j < out.extent[1]; j += index_t(gridDim.x) * threads) {
      std::uint8_t const sc = scales[blockscale_offset<Layout>(r, j / F::block_size, padded_cols)].bits;
      std::uint8_t c = values(r, j / F::elements_per_value).bits;
      if constexpr (F::elements_per_value == 2) {
        c = (j % 2 == 0) ? (c & 0xFu) : (c >> 4);
      }
      out(r, j) = from_float<Out>(qtl::detail::mul_rn(block_element_value<F>(c), block_dequant_scale<F>(sc, gs)));
    }
  }
}

template <class F, class T>
bool block_shapes_ok(view2d<T const> in, view2d<typename F::element const> values) {
  index_t const m = in.extent[0];
  index_t const k = in.extent[1];
  index_t const vk = k / F::elements_per_value;
  return m >= 0 && k >= 0 && k % F::block_size == 0 && (k <= 1 || in.stride[1] == 1) && values.extent[0] == m &&
         values.extent[1] == vk && (vk <= 1 || values.stride[1] == 1);
}

}  // namespace detail

/// NVFP4 global scale of `in` into `*global_scale` (device float): `448 * 6 / amax`, 1 for an
/// all-zero tensor, as the host `nvfp4_global_scale`.
template <fp8_quant_input T>
cudaError_t nvfp4_global_scale(view2d<T const> in, float* global_scale, cudaStream_t stream = nullptr) {
  if (cudaError_t e = fp8_amax(in, global_scale, stream); e != cudaSuccess) {
    return e;
  }
  return launch(detail::map_scalar_kernel<detail::nvfp4_global_scale_from_amax_fn>, 1, 1, 0, stream, global_scale);
}

/// Block quantization of `in` [M, K] into `values` and `scales` (`block_scale_bytes<F,
/// Layout>(M, K)` bytes, padding zeroed), as the host `block_quantize`. `global_scale` is a device
/// float (NVFP4; see `nvfp4_global_scale`), ignored (may be null) for MX formats. The global
/// scale must be finite and > 0 (the host version checks it; here it is read on the device).
template <block_format_type F, blockscale_layout_type Layout = layout_linear, fp8_quant_input T>
cudaError_t block_quantize(view2d<T const> in, view2d<typename F::element> values, typename F::scale* scales,
                           float const* global_scale = nullptr, cudaStream_t stream = nullptr) {
  static_assert(F::block_size <= 64, "qtl::cuda::block_quantize: BlockSize must be at most 64 (one warp per block)");
  static_assert((32 % (F::block_size / 2)) == 0, "qtl::cuda::block_quantize: BlockSize / 2 must divide 32");
  if (!detail::block_shapes_ok<F>(in, view2d<typename F::element const>(values)) || scales == nullptr ||
      (F::has_global_scale && global_scale == nullptr)) {
    return cudaErrorInvalidValue;
  }
  auto const bytes = static_cast<std::size_t>(block_scale_bytes<F, Layout>(in.extent[0], in.extent[1]));
  if (cudaError_t e = cudaMemsetAsync(scales, 0, bytes, stream); e != cudaSuccess) {
    return e;
  }
  index_t const total = in.extent[0] * (in.extent[1] / 2);
  if (total == 0) {
    return cudaSuccess;
  }
  unsigned const grid = detail::grid_stride_blocks(total, detail::threads, launch_policy::grid_stride_cap);
  return launch(detail::block_quantize_kernel<F, Layout, T>, grid, detail::threads, 0, stream, in, values, scales,
                global_scale);
}

/// Dequantization into `out` [M, K] (float, half_t or bfloat16_t), as the host
/// `block_dequantize`.
template <block_format_type F, blockscale_layout_type Layout = layout_linear, class Out>
cudaError_t block_dequantize(view2d<typename F::element const> values, typename F::scale const* scales,
                             float const* global_scale, view2d<Out> out, cudaStream_t stream = nullptr) {
  index_t const m = out.extent[0];
  index_t const k = out.extent[1];
  if (m < 0 || k < 0 || k % F::block_size != 0 || values.extent[0] != m ||
      values.extent[1] != k / F::elements_per_value || scales == nullptr ||
      (F::has_global_scale && global_scale == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (m == 0 || k == 0) {
    return cudaSuccess;
  }
  return launch(detail::block_dequantize_kernel<F, Layout, Out>, detail::grid_2d(m, k, 64, 4096), detail::threads, 0,
                stream, values, scales, global_scale, out);
}

}  // namespace qtl::cuda
