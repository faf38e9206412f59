#pragma once
/// \file
/// CUDA kernel and stream-ordered launcher of `qtl::cuda::gptq_checkpoint_quantize`, the device
/// form of qtl/gptq_checkpoint.hpp: GPTQ checkpoint tensors from the checkpoint's row-major
/// W [N, K]. It runs the element functions the host loop runs (`gptq_group_params`, `gptq_code`),
/// so the outputs equal the host's bit for bit, in the same layouts:
///
///   one launch, one thread per (group g, row r), r fastest (a warp writes consecutive words of a
///   qweight row): the group's max and min, its scale (F16) and zero point, then its codes packed
///   into words (i, r) of qweight [K/pf, N] for the group's gs/pf word rows.
///
/// A kernel cannot throw: the groups the host op refuses are computed as the host does with
/// `allow_nonfinite` (a NaN/Inf weight) or stored as F16 rounds them (a scale F16 cannot hold), and
/// when the matching pointer is not null, 1 is stored there (a device int the caller zeroed):
/// `nonfinite` for a group whose max or min is NaN or infinite, `unrepresentable_scale` for a
/// finite scale that overflows F16 or rounds to 0 in a group holding a nonzero weight.
/// The launcher returns `cudaErrorInvalidValue` for the shapes and arguments the host op rejects
/// (or a null pointer with a non-empty view), otherwise the launch status; it does not synchronise.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/gptq_checkpoint.cuh> needs nvcc; host code includes <qtl/gptq_checkpoint.hpp>"
#endif  // ^^^ !__CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>

#include <qtl/cuda/launch.cuh>
#include <qtl/element/gptq_quantizer.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda {
namespace detail {

template <class T>
QTL_KERNEL void gptq_checkpoint_kernel(view2d<T const> w, index_t gs, int bits, gptq_rule rule,
                                       view2d<std::int32_t> qweight, view2d<half_t> scales, view2d<std::int32_t> zeros,
                                       int* nonfinite, int* unrepresentable_scale) {
  int const pf = 32 / bits;
  grid_stride_cells(scales.extent[0], scales.extent[1], [&](index_t g, index_t r) {
    T const* x = &w(r, g * gs);
    float mx = to_float(x[0]);
    float mn = mx;
    bool nonzero = false;
    for (index_t i = 0; i < gs; ++i) {
      float const v = to_float(x[i]);
      mx = qtl::detail::qnt::nan_max(mx, v);
      mn = qtl::detail::qnt::nan_min(mn, v);
      nonzero = nonzero || v != 0.0f;
    }
    if (nonfinite != nullptr && !(is_finite(mx) && is_finite(mn))) {
      *nonfinite = 1;
    }
    group_params const p = gptq_group_params<T>(rule, mx, mn, bits);
    half_t const h = from_float<half_t>(p.s);
    float const stored = to_float(h);
    if (unrepresentable_scale != nullptr && is_finite(p.s) && (!is_finite(stored) || (stored == 0.0f && nonzero))) {
      *unrepresentable_scale = 1;
    }
    scales(g, r) = h;
    zeros(g, r) = rule == gptq_rule::symmetric || p.zp == p.zp ? static_cast<std::int32_t>(p.zp) : 0;
    for (index_t word = 0; word < gs / pf; ++word) {
      std::uint32_t packed = 0;
      for (int j = 0; j < pf; ++j) {
        auto const u = static_cast<std::uint32_t>(gptq_code<T>(rule, to_float(x[word * pf + j]), p, stored, bits));
        packed |= u << (bits * j);
      }
      qweight(g * (gs / pf) + word, r) = static_cast<std::int32_t>(packed);
    }
  });
}

}  // namespace detail

/// GPU `qtl::gptq_checkpoint_quantize` of W [M, K] (device views, unit stride along K): qweight
/// [K/pf, M], F16 scales [K/gs, M] and zero points [K/gs, M] (any row stride: columns of a wider
/// tensor), `bits` 4 or 8, `group_size` dividing K and a multiple of 32 / bits; one launch on
/// `stream`. See the file comment for `nonfinite` and `unrepresentable_scale`.
template <class T>
cudaError_t gptq_checkpoint_quantize(view2d<T const> w, int bits, index_t group_size, gptq_rule rule,
                                     view2d<std::int32_t> qweight, view2d<half_t> scales, view2d<std::int32_t> zeros,
                                     int* nonfinite = nullptr, int* unrepresentable_scale = nullptr,
                                     cudaStream_t stream = nullptr) {
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  if (bits != 4 && bits != 8) {
    return cudaErrorInvalidValue;
  }
  index_t const pf = 32 / bits;
  index_t const gs = group_size;
  if (gs <= 0 || k % gs != 0 || gs % pf != 0 || qweight.extent[0] != k / pf || qweight.extent[1] != m ||
      scales.extent[0] != k / gs || scales.extent[1] != m || zeros.extent[0] != k / gs || zeros.extent[1] != m ||
      (k > 1 && m > 0 && w.stride[1] != 1) ||
      (m > 1 && (qweight.stride[1] != 1 || scales.stride[1] != 1 || zeros.stride[1] != 1)) ||
      detail::null_with_data(w) || detail::null_with_data(qweight) || detail::null_with_data(scales) ||
      detail::null_with_data(zeros)) {
    return cudaErrorInvalidValue;
  }
  if (scales.size() == 0) {
    return cudaSuccess;
  }
  unsigned const blocks =
      detail::grid_stride_blocks(scales.size(), launch_policy::threads, launch_policy::wide_grid_stride_cap);
  return launch(detail::gptq_checkpoint_kernel<T>, dim3(blocks), launch_policy::threads, 0, stream, w, gs, bits, rule,
                qweight, scales, zeros, nonfinite, unrepresentable_scale);
}

}  // namespace qtl::cuda
