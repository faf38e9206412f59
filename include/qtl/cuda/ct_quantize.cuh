#pragma once
/// \file
/// CUDA kernels and stream-ordered launchers for compressed-tensors' checkpoint recipes:
/// `qtl::cuda::ct_pack_quantize` (qtl/ct_quantize.hpp), `ct_nvfp4_quantize`, `ct_mxfp4_quantize`
/// (qtl/ct_fp4.hpp) and `ct_mxfp8_quantize` (qtl/ct_mxfp8.hpp), on the checkpoint's row-major
/// W [N, K]. They run the element functions the host loops run (`ct_int_group_params`,
/// `ct_int_code`, `block_scale_code`, `block_output_scale`, `block_element_code`,
/// `ct_mx_scale_code`, `fp8_saturate_encode`), so the outputs equal the host's bit for bit, in the
/// same layouts.
///
///   ct_pack_quantize   two launches: one thread per (row, group) finds the group's max and min
///                      and writes its scale (and zero point); then one thread per output word
///                      reads its pf weights and their groups' scale and zero point back (exact:
///                      the scale is a T value, the zero point an integer) and packs the codes.
///   ct_*fp4_quantize,  one thread per (row, block): the block's max, its scale byte, its codes.
///   ct_mxfp8_quantize
///
/// Non-finite weights: the host ops refuse them unless asked not to; a kernel cannot throw, so
/// these quantize them as the host does with `allow_nonfinite` and, when `nonfinite` is not null,
/// store 1 there (a device int the caller zeroed) if a group's or block's max or min is NaN or
/// infinite (NVFP4: its global scale, from the caller's amax pass, is where that is found).
/// Launchers return `cudaErrorInvalidValue` for the shapes and arguments the host ops reject
/// (or a null pointer with a non-empty view), otherwise the launch status; they do not synchronise.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/ct_quantize.cuh> needs nvcc; host code includes <qtl/ct_quantize.hpp>"
#endif  // ^^^ !__CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include <qtl/cuda/launch.cuh>
#include <qtl/element/fp4.hpp>
#include <qtl/element/fp8.hpp>
#include <qtl/element/quantize.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda {
namespace detail {

inline constexpr int ct_threads = launch_policy::threads;

/// The max and min of the `n` (> 0) weights at `x` (stride `s`), NaN-propagating as torch's.
template <class T>
QTL_DEVICE void ct_max_min(T const* x, index_t n, index_t s, float& mx, float& mn) {
  mx = mn = to_float(x[0]);
  for (index_t i = 1; i < n; ++i) {
    float const v = to_float(x[i * s]);
    mx = qtl::detail::qnt::nan_max(mx, v);
    mn = qtl::detail::qnt::nan_min(mn, v);
  }
}

template <class T>
QTL_KERNEL void ct_pack_params_kernel(view2d<T const> w, index_t gs, int bits, bool symmetric, view2d<T> scales,
                                      view2d<std::int32_t> zero_points, int* nonfinite) {
  grid_stride_cells(scales.extent[0], scales.extent[1], [&](index_t r, index_t g) {
    float mx = 0.0f;
    float mn = 0.0f;
    ct_max_min(&w(r, g * gs), gs, w.stride[1], mx, mn);
    if (nonfinite != nullptr && !(is_finite(mx) && is_finite(mn))) {
      *nonfinite = 1;
    }
    group_params const p = ct_int_group_params<T>(mx, mn, bits, symmetric);
    scales(r, g) = from_float<T>(p.s);  // exact: s is a T value
    if (!symmetric) {
      zero_points(r, g) = static_cast<std::int32_t>(p.zp) + (1 << (bits - 1));
    }
  });
}

template <class T>
QTL_KERNEL void ct_pack_codes_kernel(view2d<T const> w, index_t gs, int bits, bool symmetric, view2d<T const> scales,
                                     view2d<std::int32_t const> zero_points, view2d<std::int32_t> packed) {
  int const pf = 32 / bits;
  std::int32_t const offset = 1 << (bits - 1);
  grid_stride_cells(packed.extent[0], packed.extent[1], [&](index_t r, index_t c) {
    std::uint32_t word = 0;
    for (int j = 0; j < pf; ++j) {
      index_t const col = c * pf + j;
      index_t const g = col / gs;
      group_params p{to_float(scales(r, g)), 0.0f};
      if (!symmetric) {
        p.zp = static_cast<float>(zero_points(r, g) - offset);
      }
      auto const u =
          static_cast<std::uint32_t>(static_cast<std::int32_t>(ct_int_code<T>(to_float(w(r, col)), p, bits)) + offset);
      word |= (u & ((1u << bits) - 1u)) << (bits * j);
    }
    packed(r, c) = static_cast<std::int32_t>(word);
  });
}

/// One thread per (row, block) of a compressed-tensors FP4 recipe: NVFP4 (`Nv`) by the library's
/// block rule with CT's zero-block scale and +0 for a zero weight; MXFP4 by `ct_mx_scale_code`
/// with +0 for a product that underflows T.
template <class F, class T>
QTL_KERNEL void ct_fp4_kernel(view2d<T const> w, float global_scale, view2d<float4_e2m1x2_t> values,
                              view2d<typename F::scale> scales, int* nonfinite) {
  constexpr index_t bs = F::block_size;
  grid_stride_cells(scales.extent[0], scales.extent[1], [&](index_t r, index_t b) {
    T const* x = &w(r, b * bs);
    index_t const s = w.stride[1];
    std::uint8_t sc = 0;
    float os = 0.0f;
    if constexpr (F::has_global_scale) {
      typename qtl::detail::input_bits<T>::word m = 0;
      for (index_t e = 0; e < bs; ++e) {
        auto const a = amax_bits(x[e * s]);
        m = a > m ? a : m;
      }
      float const vmax = amax_value<T>(m);
      sc = block_scale_code<F>(vmax, global_scale);
      os = block_output_scale<F>(sc, vmax, global_scale);
      scales(r, b).bits = sc == 0 ? std::uint8_t{0x20} : sc;  // CT's epsilon, E4M3 0.125
    } else {
      float mx = 0.0f;
      float mn = 0.0f;
      ct_max_min(x, bs, s, mx, mn);
      float const amax = qtl::detail::qnt::nan_max(mx, -mn);
      if (nonfinite != nullptr && !is_finite(amax)) {
        *nonfinite = 1;
      }
      sc = ct_mx_scale_code<T>(amax);
      os = e8m0_reciprocal(sc);
      scales(r, b).bits = sc;
    }
    for (index_t e = 0; e < bs; e += 2) {
      std::uint8_t nib[2];
      for (int h = 0; h < 2; ++h) {
        float const v = to_float(x[(e + h) * s]);
        bool const zero = F::has_global_scale ? v == 0.0f : rounds_to_zero_in<T>(v * os);
        nib[h] = zero ? std::uint8_t{0} : block_element_code<F>(v, os);
      }
      values(r, (b * bs + e) / 2).bits = static_cast<std::uint8_t>(nib[0] | (nib[1] << 4));
    }
  });
}

/// One thread per (row, 32-element block) of compressed-tensors MXFP8: `ct_mx_scale_code<T>(amax,
/// 8)`, then each element `fp8_saturate_encode<e4m3, propagate>(x * 2^(127 - c))`.
template <class T>
QTL_KERNEL void ct_mxfp8_kernel(view2d<T const> w, view2d<float8_e4m3fn_t> values, view2d<float8_e8m0fnu_t> scales,
                                int* nonfinite) {
  constexpr index_t bs = 32;
  grid_stride_cells(scales.extent[0], scales.extent[1], [&](index_t r, index_t b) {
    T const* x = &w(r, b * bs);
    index_t const s = w.stride[1];
    float mx = 0.0f;
    float mn = 0.0f;
    ct_max_min(x, bs, s, mx, mn);
    float const amax = qtl::detail::qnt::nan_max(mx, -mn);
    if (nonfinite != nullptr && !is_finite(amax)) {
      *nonfinite = 1;
    }
    std::uint8_t const sc = ct_mx_scale_code<T>(amax, 8);
    scales(r, b).bits = sc;
    float const os = e8m0_reciprocal(sc);
    for (index_t e = 0; e < bs; ++e) {
      values(r, b * bs + e).bits =
          fp8_saturate_encode<float8_e4m3fn_t, fp8_nan::propagate>(qtl::detail::mul_rn(to_float(x[e * s]), os));
    }
  });
}

template <class V>
bool ct_unit_stride(V const& v) {
  return v.extent[1] <= 1 || v.stride[1] == 1;
}

inline unsigned ct_blocks(index_t items) {
  return grid_stride_blocks(items, ct_threads, launch_policy::wide_grid_stride_cap);
}

}  // namespace detail

/// GPU `qtl::ct_pack_quantize` of W [M, K] (device views, unit stride along K) into `packed`
/// [M, K/pf], `scales` [M, G] and, asymmetric, `zero_points` [M, G] (zp + 2^(b-1)); `bits` 4 or 8,
/// `group_size` dividing K or -1 (one group per row); two launches on `stream`. See the file
/// comment for `nonfinite`.
template <class T>
cudaError_t ct_pack_quantize(view2d<T const> w, int bits, index_t group_size, bool symmetric,
                             view2d<std::int32_t> packed, view2d<T> scales, view2d<std::int32_t> zero_points,
                             int* nonfinite = nullptr, cudaStream_t stream = nullptr) {
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  if ((bits != 4 && bits != 8) || k <= 0 || (group_size != -1 && group_size <= 0)) {
    return cudaErrorInvalidValue;
  }
  index_t const gs = group_size == -1 ? k : group_size;
  index_t const pf = 32 / bits;
  if (k % gs != 0 || k % pf != 0 || packed.extent[0] != m || packed.extent[1] != k / pf || scales.extent[0] != m ||
      scales.extent[1] != k / gs || (!symmetric && (zero_points.extent[0] != m || zero_points.extent[1] != k / gs)) ||
      !detail::ct_unit_stride(w) || detail::null_with_data(w) || detail::null_with_data(packed) ||
      detail::null_with_data(scales) || (!symmetric && detail::null_with_data(zero_points))) {
    return cudaErrorInvalidValue;
  }
  if (m == 0) {
    return cudaSuccess;
  }
  if (cudaError_t const e =
          launch(detail::ct_pack_params_kernel<T>, dim3(detail::ct_blocks(scales.size())), detail::ct_threads, 0,
                 stream, w, gs, bits, symmetric, scales, zero_points, nonfinite);
      e != cudaSuccess) {
    return e;
  }
  return launch(detail::ct_pack_codes_kernel<T>, dim3(detail::ct_blocks(packed.size())), detail::ct_threads, 0, stream,
                w, gs, bits, symmetric, view2d<T const>(scales), view2d<std::int32_t const>(zero_points), packed);
}

namespace detail {
template <class F, class T>
cudaError_t launch_ct_fp4(view2d<T const> w, float global_scale, view2d<float4_e2m1x2_t> values,
                          view2d<typename F::scale> scales, int* nonfinite, cudaStream_t stream) {
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  if (k % F::block_size != 0 || values.extent[0] != m || values.extent[1] != k / 2 || scales.extent[0] != m ||
      scales.extent[1] != k / F::block_size || !ct_unit_stride(w) || null_with_data(w) || null_with_data(values) ||
      null_with_data(scales)) {
    return cudaErrorInvalidValue;
  }
  if (scales.size() == 0) {
    return cudaSuccess;
  }
  return launch(ct_fp4_kernel<F, T>, dim3(ct_blocks(scales.size())), ct_threads, 0, stream, w, global_scale, values,
                scales, nonfinite);
}
}  // namespace detail

/// GPU `qtl::ct_nvfp4_quantize` of W [M, K] given the global scale: `values` [M, K/2], `scales`
/// [M, K/16] (linear), on `stream`. cudaErrorInvalidValue also for a global scale that is not
/// finite and positive.
template <class T>
cudaError_t ct_nvfp4_quantize(view2d<T const> w, float global_scale, view2d<float4_e2m1x2_t> values,
                              view2d<float8_e4m3fn_t> scales, cudaStream_t stream = nullptr) {
  if (!(global_scale > 0.0f && global_scale <= std::numeric_limits<float>::max())) {
    return cudaErrorInvalidValue;
  }
  return detail::launch_ct_fp4<nvfp4>(w, global_scale, values, scales, nullptr, stream);
}

/// GPU `qtl::ct_mxfp4_quantize` of W [M, K]: `values` [M, K/2], E8M0 `scales` [M, K/32], on
/// `stream`. See the file comment for `nonfinite`.
template <class T>
cudaError_t ct_mxfp4_quantize(view2d<T const> w, view2d<float4_e2m1x2_t> values, view2d<float8_e8m0fnu_t> scales,
                              int* nonfinite = nullptr, cudaStream_t stream = nullptr) {
  return detail::launch_ct_fp4<mxfp4>(w, 1.0f, values, scales, nonfinite, stream);
}

/// GPU `qtl::ct_mxfp8_quantize` of W [M, K] (K a multiple of 32): E4M3 `values` [M, K], E8M0
/// `scales` [M, K/32], on `stream`. See the file comment for `nonfinite`.
template <class T>
cudaError_t ct_mxfp8_quantize(view2d<T const> w, view2d<float8_e4m3fn_t> values, view2d<float8_e8m0fnu_t> scales,
                              int* nonfinite = nullptr, cudaStream_t stream = nullptr) {
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  if (k % 32 != 0 || values.extent[0] != m || values.extent[1] != k || scales.extent[0] != m ||
      scales.extent[1] != k / 32 || !detail::ct_unit_stride(w) || detail::null_with_data(w) ||
      detail::null_with_data(values) || detail::null_with_data(scales)) {
    return cudaErrorInvalidValue;
  }
  if (scales.size() == 0) {
    return cudaSuccess;
  }
  return launch(detail::ct_mxfp8_kernel<T>, dim3(detail::ct_blocks(scales.size())), detail::ct_threads, 0, stream, w,
                values, scales, nonfinite);
}

}  // namespace qtl::cuda
