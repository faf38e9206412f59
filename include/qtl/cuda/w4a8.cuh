#pragma once
/// \file
/// CUDA kernels and stream-ordered launchers for `qtl/w4a8.hpp`: the int4 encode and reorder
/// (plain, grouped and its inverse), `pack_scale_fp8`, `convert_bf16_scales_to_fp8`,
/// `convert_packed_uint4b8_to_signed_int4` and `interleave_scales` / `deinterleave_scales`. Each
/// runs the element functions of `qtl/element/w4a8.hpp` (and, for the scale split, those of
/// `qtl/element/fp8.hpp`), so the bytes equal the host's; each call is one launch, all experts
/// together.
///
/// Pointers and views are device memory. Launchers return `cudaErrorInvalidValue` for the shapes
/// the host ops refuse (or a null pointer with data), otherwise the launch status; they do not
/// synchronise. The device does not check values: `convert_bf16_scales_to_fp8` assumes finite
/// scales, as the host op demands.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/w4a8.cuh> needs nvcc; host code includes <qtl/w4a8.hpp>"
#endif  // ^^^ !__CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>

#include <qtl/cuda/launch.cuh>
#include <qtl/element/fp8.hpp>
#include <qtl/element/w4a8.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda {
namespace detail {

// One thread per destination byte of all experts (forward: a gather, sequential writes) or per
// source byte of the reordered tensor (inverse: a scatter).
template <bool Inverse>
QTL_KERNEL void reorder_int4b_kernel(std::uint8_t const* in, std::uint8_t* out, index_t total, index_t n, index_t k) {
  index_t const per_expert = n * (k / 2);
  for (index_t b = grid_thread(); b < total; b += grid_step()) {
    index_t const row_major = b / per_expert * per_expert + w4a8_reorder_source_byte(b % per_expert, n, k);
    if constexpr (Inverse) {
      out[row_major] = unified_encode_int4b_byte(in[b]);
    } else {
      out[b] = unified_encode_int4b_byte(in[row_major]);
    }
  }
}

// (templates, as every kernel in a header: one definition across translation units)
template <int = 0>
QTL_KERNEL void pack_scale_fp8_kernel(std::uint8_t const* scales, std::uint8_t* packed, index_t count) {
  for (index_t i = grid_thread(); i < count; i += grid_step()) {
    pack_scale_fp8_element(scales[i], packed + 8 * i);
  }
}

template <int = 0>
QTL_KERNEL void uint4b8_to_int4_kernel(std::uint32_t const* in, std::uint32_t* out, index_t count) {
  for (index_t i = grid_thread(); i < count; i += grid_step()) {
    out[i] = uint4b8_to_int4(in[i]);
  }
}

// One thread per row: its amax, the per-token scale, then the codes and their / 8.
template <class T, fp8_scale_op Op>
QTL_KERNEL void w4a8_scale_split_kernel(view2d<T const> scales, view2d<float8_e4m3fn_t> fp8_scales,
                                        view1d<float> chan_scales, fp8_token_options o) {
  for (index_t i = grid_thread(); i < scales.extent[0]; i += grid_step()) {
    std::uint32_t m = 0;
    for (index_t j = 0; j < scales.extent[1]; ++j) {
      std::uint32_t const a = float_to_bits(to_float(scales(i, j))) & 0x7fffffffu;
      m = a > m ? a : m;
    }
    float const s = fp8_token_scale<float8_e4m3fn_t>(bits_to_float(m), o);
    float const inv = fp8_inverse_scale(s, o.zero_scale);
    for (index_t j = 0; j < scales.extent[1]; ++j) {
      std::uint8_t const q = fp8_quantize_element<float8_e4m3fn_t, fp8_nan::to_max, Op>(to_float(scales(i, j)), s, inv);
      fp8_scales(i, j).bits = w4a8_group_scale_code(q);
    }
    chan_scales(i) = s * 8.0f;
  }
}

template <class T, bool Inverse>
QTL_KERNEL void interleave_scales_kernel(view3d<T const> in, view3d<T> out, index_t scale_pack) {
  // the interleaved side [E, G/p, N*p] is the grid; forward writes it, inverse reads it
  view3d<T const> const side = Inverse ? in : view3d<T const>(out);
  index_t const rows = side.extent[1];
  index_t const cols = side.extent[2];
  for (index_t t = grid_thread(); t < side.extent[0] * rows * cols; t += grid_step()) {
    index_t const e = t / (rows * cols);
    index_t const g2 = t / cols % rows;
    index_t const c = t % cols;
    interleave_source const s = interleave_scales_source(g2, c, scale_pack);
    if constexpr (Inverse) {
      out(e, s.n, s.g) = in(e, g2, c);
    } else {
      out(e, g2, c) = in(e, s.n, s.g);
    }
  }
}

template <bool Inverse>
cudaError_t launch_reorder(std::uint8_t const* in, index_t experts, index_t n, index_t k, index_t k_align,
                           std::uint8_t* out, cudaStream_t stream) {
  index_t const bytes = experts >= 0 && n >= 0 && k >= 0 ? experts * n * (k / 2) : -1;
  if (int4b_reorder_shape_check(experts, n, k, k_align, bytes, bytes) != int4b_reorder_shape::ok ||
      (bytes > 0 && (in == nullptr || out == nullptr || in == out))) {
    return cudaErrorInvalidValue;
  }
  if (bytes == 0) {
    return cudaSuccess;
  }
  auto const blocks = grid_stride_blocks(bytes, launch_policy::threads, launch_policy::grid_stride_cap);
  return launch(reorder_int4b_kernel<Inverse>, dim3(blocks), launch_policy::threads, 0, stream, in, out, bytes, n, k);
}

template <class T, bool Inverse>
cudaError_t launch_interleave(view3d<T const> in, view3d<T> out, index_t scale_pack, cudaStream_t stream) {
  view3d<T const> const plain = Inverse ? view3d<T const>(out) : in;
  view3d<T const> const inter = Inverse ? in : view3d<T const>(out);
  if (scale_pack <= 0 || plain.extent[2] % scale_pack != 0 || inter.extent[0] != plain.extent[0] ||
      inter.extent[1] != plain.extent[2] / scale_pack || inter.extent[2] != plain.extent[1] * scale_pack ||
      null_with_data(in) || null_with_data(out)) {
    return cudaErrorInvalidValue;
  }
  if (out.size() == 0) {
    return cudaSuccess;
  }
  auto const blocks = grid_stride_blocks(out.size(), launch_policy::threads, launch_policy::grid_stride_cap);
  return launch(interleave_scales_kernel<T, Inverse>, dim3(blocks), launch_policy::threads, 0, stream, in, out,
                scale_pack);
}

// A grid-stride kernel over `count` items of `in` and `out`.
template <class In, class Out>
cudaError_t launch_per_item(void (*kernel)(In const*, Out*, index_t), In const* in, Out* out, index_t count,
                            cudaStream_t stream) {
  if (count < 0 || (count > 0 && (in == nullptr || out == nullptr))) {
    return cudaErrorInvalidValue;
  }
  if (count == 0) {
    return cudaSuccess;
  }
  auto const blocks = grid_stride_blocks(count, launch_policy::threads, launch_policy::grid_stride_cap);
  return launch(kernel, dim3(blocks), launch_policy::threads, 0, stream, in, out, count);
}

}  // namespace detail

/// GPU `qtl::encode_and_reorder_int4b`: `in` [n, k] int4 (n k / 2 bytes) -> `out`, on `stream`.
inline cudaError_t encode_and_reorder_int4b(std::uint8_t const* in, index_t n, index_t k, std::uint8_t* out,
                                            cudaStream_t stream = nullptr) {
  return detail::launch_reorder<false>(in, 1, n, k, w4a8_atom_cols, out, stream);
}

/// GPU `qtl::encode_and_reorder_int4b_grouped`: `experts` matrices [n, k], one launch.
inline cudaError_t encode_and_reorder_int4b_grouped(std::uint8_t const* in, index_t experts, index_t n, index_t k,
                                                    std::uint8_t* out, cudaStream_t stream = nullptr) {
  return detail::launch_reorder<false>(in, experts, n, k, w4a8_grouped_k_align, out, stream);
}

/// GPU `qtl::decode_and_unreorder_int4b`: the inverse of the two above.
inline cudaError_t decode_and_unreorder_int4b(std::uint8_t const* in, index_t experts, index_t n, index_t k,
                                              std::uint8_t* out, cudaStream_t stream = nullptr) {
  return detail::launch_reorder<true>(in, experts, n, k, w4a8_atom_cols, out, stream);
}

/// GPU `qtl::pack_scale_fp8`: `count` e4m3 scales -> 8 `count` codes.
inline cudaError_t pack_scale_fp8(float8_e4m3fn_t const* scales, index_t count, float8_e4m3fn_t* packed,
                                  cudaStream_t stream = nullptr) {
  return detail::launch_per_item(detail::pack_scale_fp8_kernel<>, reinterpret_cast<std::uint8_t const*>(scales),
                                 reinterpret_cast<std::uint8_t*>(packed), count, stream);
}

/// GPU `qtl::convert_packed_uint4b8_to_signed_int4`: `count` int32 words; `in == out` is the
/// in-place form.
inline cudaError_t convert_packed_uint4b8_to_signed_int4(std::int32_t const* in, index_t count, std::int32_t* out,
                                                         cudaStream_t stream = nullptr) {
  return detail::launch_per_item(detail::uint4b8_to_int4_kernel<>, reinterpret_cast<std::uint32_t const*>(in),
                                 reinterpret_cast<std::uint32_t*>(out), count, stream);
}

/// GPU `qtl::convert_bf16_scales_to_fp8`: [rows, k_groups] scales -> e4m3 group scales and one
/// float channel scale a row, under the quantizer's rule `op`.
template <fp8_quant_input T>
cudaError_t convert_bf16_scales_to_fp8(view2d<T const> scales, fp8_scale_op op, view2d<float8_e4m3fn_t> fp8_scales,
                                       view1d<float> chan_scales, cudaStream_t stream = nullptr) {
  if (fp8_scales.extent[0] != scales.extent[0] || fp8_scales.extent[1] != scales.extent[1] ||
      chan_scales.extent[0] != scales.extent[0] || detail::null_with_data(scales) ||
      detail::null_with_data(fp8_scales) || detail::null_with_data(chan_scales)) {
    return cudaErrorInvalidValue;
  }
  if (scales.extent[0] == 0) {
    return cudaSuccess;
  }
  fp8_token_options const o = w4a8_scale_quantizer(op);
  auto const blocks =
      detail::grid_stride_blocks(scales.extent[0], launch_policy::threads, launch_policy::grid_stride_cap);
  if (op == fp8_scale_op::divide) {
    return launch(detail::w4a8_scale_split_kernel<T, fp8_scale_op::divide>, dim3(blocks), launch_policy::threads, 0,
                  stream, scales, fp8_scales, chan_scales, o);
  }
  return launch(detail::w4a8_scale_split_kernel<T, fp8_scale_op::multiply_reciprocal>, dim3(blocks),
                launch_policy::threads, 0, stream, scales, fp8_scales, chan_scales, o);
}

/// GPU `qtl::interleave_scales`: [E, N, G] -> [E, G / p, N p].
template <class T>
cudaError_t interleave_scales(view3d<T const> scales, index_t scale_pack, view3d<T> out,
                              cudaStream_t stream = nullptr) {
  return detail::launch_interleave<T, false>(scales, out, scale_pack, stream);
}

/// GPU `qtl::deinterleave_scales`: [E, G / p, N p] -> [E, N, G].
template <class T>
cudaError_t deinterleave_scales(view3d<T const> in, index_t scale_pack, view3d<T> scales,
                                cudaStream_t stream = nullptr) {
  return detail::launch_interleave<T, true>(in, scales, scale_pack, stream);
}

}  // namespace qtl::cuda
