#pragma once
/// \file
/// CUDA kernels and stream-ordered launchers for `qtl/scaled_quantize.hpp`:
/// `qtl::cuda::scaled_quantize`, `scaled_dequantize` and `group_broadcast`. They run the element
/// functions of `qtl/element/scaled_quantize.hpp`, so codes and scales equal the host's bit for
/// bit. Views hold device pointers; any strides work.
///
/// `scaled_quantize` is four launches on `stream`, each over the whole tensor: the scales' memory
/// is first the groups' amax bits (zeroed, then `atomicMax` of each row segment of a group), every
/// element is then quantized from its group's amax, and last the amax bits become the float32
/// scales. Launchers return `cudaErrorInvalidValue` for shapes the host ops reject (or a null
/// pointer with a non-empty view), otherwise the first launch failure; they do not synchronise.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/scaled_quantize.cuh> needs nvcc; host code includes <qtl/scaled_quantize.hpp>"
#endif  // ^^^ !__CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>

#include <qtl/cuda/launch.cuh>
#include <qtl/element/scaled_quantize.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda {
namespace detail {

// The scales' memory as the groups' amax bits, zeroed.
template <class = void>  // a header kernel without a parameter of its own (QTL_KERNEL)
QTL_KERNEL void scaled_quantize_zero_kernel(view2d<float> scale) {
  index_t const n = scale.extent[0] * scale.extent[1];
  for (index_t k = grid_thread(); k < n; k += grid_step()) {
    scale(k / scale.extent[1], k % scale.extent[1]) = 0.0f;
  }
}

// One thread per row segment (row i, group column b): the max of its amax bits, one atomicMax.
template <class C, class T>
QTL_KERNEL void scaled_quantize_amax_kernel(view2d<T const> x, group_shape g, view2d<float> scale) {
  index_t const bn = scale.extent[1];
  index_t const segments = x.extent[0] * bn;
  for (index_t k = grid_thread(); k < segments; k += grid_step()) {
    index_t const i = k / bn;
    index_t const b = k % bn;
    std::uint32_t m = 0;
    for (index_t j = b * g.col; j < (b + 1) * g.col; ++j) {
      std::uint32_t const v = scaled_quantize_amax_bits<C>(x(i, j));
      m = v > m ? v : m;
    }
    atomicMax(reinterpret_cast<unsigned int*>(&scale(i / g.row, b)), static_cast<unsigned int>(m));
  }
}

// One thread per element: its group's scale from the amax bits, then its code.
template <class Q, class C, class T>
QTL_KERNEL void scaled_quantize_element_kernel(view2d<T const> x, group_shape g, view2d<float const> amax, view2d<Q> q,
                                               float fp8_max) {
  index_t const n = x.extent[0] * x.extent[1];
  for (index_t k = grid_thread(); k < n; k += grid_step()) {
    index_t const i = k / x.extent[1];
    index_t const j = k % x.extent[1];
    float const s = scaled_quantize_scale<C>(float_to_bits(amax(i / g.row, j / g.col)), fp8_max);
    q(i, j) = scaled_quantize_element<Q, C>(x(i, j), s);
  }
}

// The amax bits of each group become its float32 dequantization scale.
template <class C>
QTL_KERNEL void scaled_quantize_finish_kernel(view2d<float> scale, float fp8_max) {
  index_t const n = scale.extent[0] * scale.extent[1];
  for (index_t k = grid_thread(); k < n; k += grid_step()) {
    float& s = scale(k / scale.extent[1], k % scale.extent[1]);
    s = scaled_quantize_inverse(scaled_quantize_scale<C>(float_to_bits(s), fp8_max));
  }
}

// out(i, j) = f(i / fr, j / fc, i, j): the broadcast of a group's value over its elements.
template <class Out, class F>
QTL_KERNEL void group_broadcast_kernel(view2d<Out> out, index_t fr, index_t fc, F f) {
  index_t const n = out.extent[0] * out.extent[1];
  for (index_t k = grid_thread(); k < n; k += grid_step()) {
    index_t const i = k / out.extent[1];
    index_t const j = k % out.extent[1];
    out(i, j) = f(i / fr, j / fc, i, j);
  }
}

template <class T>
struct broadcast_op {
  view2d<T const> t;
  QTL_HOST_DEVICE T operator()(index_t gi, index_t gj, index_t, index_t) const { return t(gi, gj); }
};

template <class Out, class Q, class S>
struct dequantize_op {
  view2d<Q const> q;
  view2d<S const> scale;
  QTL_HOST_DEVICE Out operator()(index_t gi, index_t gj, index_t i, index_t j) const {
    return dequantize_fp8_element<Out>(q(i, j), to_float(scale(gi, gj)));
  }
};

inline unsigned blocks_for(index_t items) {
  return grid_stride_blocks(items, launch_policy::threads, launch_policy::grid_stride_cap);
}

template <class Out, class F>
cudaError_t launch_group_broadcast(view2d<Out> out, index_t fr, index_t fc, F f, cudaStream_t stream) {
  index_t const n = out.extent[0] * out.extent[1];
  if (n == 0) {
    return cudaSuccess;
  }
  return launch(group_broadcast_kernel<Out, F>, dim3(blocks_for(n)), launch_policy::threads, 0, stream, out, fr, fc, f);
}

}  // namespace detail

/// GPU `qtl::scaled_quantize<Q, C>`: codes `q` [M, N] and float32 scales `scale` [M/gm, N/gn] of
/// `x` under `group` (a -1 extent: the whole dimension), computed in C (void: the input's type),
/// on `stream`.
template <scaled_quant_storage Q, class C = void, fp8_quant_input T>
cudaError_t scaled_quantize(view2d<T const> x, group_shape group, view2d<Q> q, view2d<float> scale,
                            float fp8_max = default_fp8_max<Q>, cudaStream_t stream = nullptr) {
  using CT = scaled_quantize_compute_t<C, T>;
  static_assert(fp8_quant_input<CT>, "qtl::cuda::scaled_quantize: the compute type is float, half_t or bfloat16_t");
  if (scaled_quantize_shape_check(x.extent[0], x.extent[1], group, q.extent[0], q.extent[1], scale.extent[0],
                                  scale.extent[1], fp8_max) != scaled_quantize_shape::ok ||
      detail::null_with_data(x) || detail::null_with_data(q) || detail::null_with_data(scale)) {
    return cudaErrorInvalidValue;
  }
  group_shape const g = normalize_group_shape(group, x.extent[0], x.extent[1]);
  index_t const groups = scale.extent[0] * scale.extent[1];
  if (groups == 0) {
    return cudaSuccess;
  }
  auto const threads = launch_policy::threads;
  if (cudaError_t const e =
          launch(detail::scaled_quantize_zero_kernel<>, dim3(detail::blocks_for(groups)), threads, 0, stream, scale);
      e != cudaSuccess) {
    return e;
  }
  index_t const segments = x.extent[0] * scale.extent[1];
  if (cudaError_t const e = launch(detail::scaled_quantize_amax_kernel<CT, T>, dim3(detail::blocks_for(segments)),
                                   threads, 0, stream, x, g, scale);
      e != cudaSuccess) {
    return e;
  }
  view2d<float const> const amax = scale;
  if (cudaError_t const e =
          launch(detail::scaled_quantize_element_kernel<Q, CT, T>, dim3(detail::blocks_for(x.extent[0] * x.extent[1])),
                 threads, 0, stream, x, g, amax, q, fp8_max);
      e != cudaSuccess) {
    return e;
  }
  return launch(detail::scaled_quantize_finish_kernel<CT>, dim3(detail::blocks_for(groups)), threads, 0, stream, scale,
                fp8_max);
}

/// GPU `qtl::group_broadcast`: `out(i, j) = t(i / fr, j / fc)` (`group_broadcast_factor`), on `stream`.
template <class T>
cudaError_t group_broadcast(view2d<T const> t, view2d<T> out, cudaStream_t stream = nullptr) {
  index_t const fr = group_broadcast_factor(t.extent[0], out.extent[0]);
  index_t const fc = group_broadcast_factor(t.extent[1], out.extent[1]);
  if (fr == 0 || fc == 0 || detail::null_with_data(t) || detail::null_with_data(out)) {
    return cudaErrorInvalidValue;
  }
  return detail::launch_group_broadcast(out, fr, fc, detail::broadcast_op<T>{t}, stream);
}

/// GPU `qtl::scaled_dequantize`: `out(i, j) = Out(float(q(i, j)) * float(scale(i / fr, j / fc)))`,
/// on `stream`.
template <class Out = float, scaled_quant_storage Q, fp8_quant_input S>
cudaError_t scaled_dequantize(view2d<Q const> q, view2d<S const> scale, view2d<Out> out,
                              cudaStream_t stream = nullptr) {
  static_assert(fp8_quant_input<Out>, "qtl::cuda::scaled_dequantize: Out is float, half_t or bfloat16_t");
  index_t const fr = group_broadcast_factor(scale.extent[0], q.extent[0]);
  index_t const fc = group_broadcast_factor(scale.extent[1], q.extent[1]);
  if (fr == 0 || fc == 0 || out.extent[0] != q.extent[0] || out.extent[1] != q.extent[1] || detail::null_with_data(q) ||
      detail::null_with_data(scale) || detail::null_with_data(out)) {
    return cudaErrorInvalidValue;
  }
  return detail::launch_group_broadcast(out, fr, fc, detail::dequantize_op<Out, Q, S>{q, scale}, stream);
}

}  // namespace qtl::cuda
