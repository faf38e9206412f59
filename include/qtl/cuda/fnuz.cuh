#pragma once
/// \file
/// CUDA kernels and stream-ordered launchers for `qtl/fnuz.hpp`: `qtl::cuda::normalize_e4m3fn_to_e4m3fnuz`
/// and `qtl::cuda::double_scales`. They run the element functions of `qtl/element/fnuz.hpp`, so
/// the bytes equal the host's bit for bit. Views hold device pointers; any strides work, and `out`
/// may be the input's memory (in place). One grid-stride launch covers the whole tensor (every
/// expert of a stacked MoE weight).
///
/// Launchers return `cudaErrorInvalidValue` for extents the host ops reject (or a null pointer with
/// a non-empty view), otherwise the launch status; they do not synchronise.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/fnuz.cuh> needs nvcc; host code includes <qtl/fnuz.hpp>"
#endif  // ^^^ !__CUDACC__ ^^^

#include <cuda_runtime.h>

#include <qtl/cuda/launch.cuh>
#include <qtl/element/fnuz.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda {
namespace detail {

// One thread per element, a grid-stride loop: out(i) = f(in(i)).
template <class In, class Out, class F>
QTL_KERNEL void fnuz_elementwise_kernel(view1d<In const> in, view1d<Out> out, F f) {
  index_t const step = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < in.extent[0]; i += step) {
    out(i) = f(in(i));
  }
}

struct fnuz_weight_op {
  QTL_HOST_DEVICE float8_e4m3fnuz_t operator()(float8_e4m3fn_t c) const {
    return float8_e4m3fnuz_t{e4m3fn_to_e4m3fnuz_code(c.bits)};
  }
};

struct fnuz_scale_op {
  template <class T>
  QTL_HOST_DEVICE T operator()(T s) const {
    return double_scale(s);
  }
};

template <class In, class Out, class F>
cudaError_t launch_fnuz_elementwise(view1d<In const> in, view1d<Out> out, F f, cudaStream_t stream) {
  if (in.extent[0] < 0 || out.extent[0] != in.extent[0] ||
      (in.extent[0] > 0 && (in.data == nullptr || out.data == nullptr))) {
    return cudaErrorInvalidValue;
  }
  if (in.extent[0] == 0) {
    return cudaSuccess;
  }
  auto const blocks = grid_stride_blocks(in.extent[0], launch_policy::threads, launch_policy::grid_stride_cap);
  return launch(fnuz_elementwise_kernel<In, Out, F>, dim3(blocks), launch_policy::threads, 0, stream, in, out, f);
}

}  // namespace detail

/// GPU `qtl::normalize_e4m3fn_to_e4m3fnuz`: `out[i]` = `weight[i]`'s byte, 0x80 -> 0x00, on `stream`.
inline cudaError_t normalize_e4m3fn_to_e4m3fnuz(view1d<float8_e4m3fn_t const> weight, view1d<float8_e4m3fnuz_t> out,
                                                cudaStream_t stream = nullptr) {
  return detail::launch_fnuz_elementwise(weight, out, detail::fnuz_weight_op{}, stream);
}

/// GPU `qtl::double_scales`: `out[i] = scale[i] * 2` in the scale's type, on `stream`.
template <fnuz_scale T>
cudaError_t double_scales(view1d<T const> scale, view1d<T> out, cudaStream_t stream = nullptr) {
  return detail::launch_fnuz_elementwise(scale, out, detail::fnuz_scale_op{}, stream);
}

}  // namespace qtl::cuda
