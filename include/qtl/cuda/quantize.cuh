#pragma once
/// \file
/// CUDA kernels and launchers of qtl/quantize.hpp: `quantize_weights` (grouped and ungrouped),
/// `gptq_quantize_weights` with act-order, `permute_rows`, `sort_weights` (CUB radix sort, which is
/// stable like the host's), and `per_tensor_dequantize`. The per-group
/// and per-element work is the host header's (`symmetric_scale`, `asymmetric_scale`,
/// `quantize_code`, `dequantize_code`, whose float steps use `__fdiv_rn`/`__fmul_rn`/... on the
/// device, so nvcc's FMA contraction cannot change them): device output equals host output bit
/// for bit (test/cuda/quantize_test.cu; NaNs compare as NaNs).
///
/// Work split of the grouped kernel: one block per (group, 32 columns), 32 × S threads
/// (S row slices, 8 for groups ≤ 128 rows, else 32):
///
///     group rows   col 0    col 1   ...  col 31           pass 1: thread (c, s) folds max/min of
///     r0 + 0     | (0,0)  | (1,0) | ... | (31,0) |         rows s, s+S, ... of column c (each row
///     r0 + 1     | (0,1)  | (1,1) | ... | (31,1) |         read is 32 consecutive elements);
///     ...                                                  then the S partials of a column are
///     r0 + S     | (0,0)  | (1,0) | ...                    reduced by one logical warp of S lanes
///                                                          (cub::WarpReduce), whose lane 0 computes
///                                                          the column's scale; pass 2 re-reads the
///                                                          same rows (from L2) and writes codes.
///
/// Launchers take a `cudaStream_t` and return `cudaError_t` (`cudaErrorInvalidValue` for what the
/// host functions reject, before anything is enqueued); they never throw or synchronise. Views
/// hold device pointers; inner strides must be 1.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/quantize.cuh> needs nvcc; host code includes <qtl/quantize.hpp>"
#endif  // ^^^ __CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cub/cub.cuh>
#include <optional>
#include <qtl/cuda/launch.cuh>
#include <qtl/group_size.hpp>
#include <qtl/macros.hpp>
#include <qtl/quantize.hpp>
#include <qtl/view.hpp>
#include <type_traits>

namespace qtl::cuda {

namespace detail {

using qtl::group_params;

/// Partial max/min of a column (NaN-propagating, as the host).
struct minmax {
  float mx;
  float mn;
};
struct minmax_op {
  QTL_DEVICE minmax operator()(minmax a, minmax b) const {
    return {qtl::detail::qnt::nan_max(a.mx, b.mx), qtl::detail::qnt::nan_min(a.mn, b.mn)};
  }
};

template <class T, bool SmallCodes, bool ZeroPoints, bool After, int Slices>
QTL_KERNEL void __launch_bounds__(32 * Slices)
    quantize_grouped_kernel(view2d<T const> w, index_t gs, quant_range r, quantize_outputs<T> out,
                            std::int32_t const* row_out) {
  using qtl::detail::qnt::load;
  using qtl::detail::qnt::store;
  using warp_reduce = cub::WarpReduce<minmax, Slices>;
  __shared__ minmax partial[Slices][32];
  __shared__ group_params params[32];
  __shared__ typename warp_reduce::TempStorage temp[32];

  index_t const n = w.extent[1];
  index_t const groups = w.extent[0] / gs;
  int const tx = static_cast<int>(threadIdx.x);
  int const ty = static_cast<int>(threadIdx.y);
  index_t const col = index_t(blockIdx.x) * 32 + tx;
  bool const in_range = col < n;
  // Groups past grid.y's cap: the block loops (uniformly: every thread meets every barrier). The
  // shared arrays need no barrier between groups: partial is read before the second barrier of a
  // group and params after it, and both are written in the next group only after its first.
  for (index_t g = blockIdx.y; g < groups; g += gridDim.y) {
    index_t const r0 = g * gs;
    // Pass 1: this thread's rows of its column.
    minmax acc{std::numeric_limits<float>::quiet_NaN(), 0.0f};
    bool first = true;
    if (in_range) {
      for (index_t i = ty; i < gs; i += Slices) {
        float const x = load<T>(w.data[(r0 + i) * w.stride[0] + col]);
        acc = first ? minmax{x, x} : minmax_op{}(acc, minmax{x, x});
        first = false;
      }
    }
    partial[ty][tx] = acc;
    __syncthreads();
    // The Slices partials of column c = t / Slices, reduced by a logical warp of Slices lanes
    // (slices with no rows, when gs < Slices, hold their own column's first value: see below).
    int const t = ty * 32 + tx;
    int const c = t / Slices;
    int const s = t % Slices;
    minmax v = partial[s < gs ? s : 0][c];
    minmax const red = warp_reduce(temp[c]).Reduce(v, minmax_op{});
    if (s == 0) {
      index_t const oc = index_t(blockIdx.x) * 32 + c;
      group_params p{};
      if (oc < n) {
        p = ZeroPoints ? qtl::detail::qnt::asymmetric_scale<T>(red.mx, red.mn, r)
                       : qtl::detail::qnt::symmetric_scale<T>(red.mx, red.mn, r);
        out.w_s.data[g * out.w_s.stride[0] + oc] = store<T>(p.s);
        if constexpr (ZeroPoints) {
          out.w_zp.data[g * out.w_zp.stride[0] + oc] = static_cast<std::int32_t>(p.zp);
        }
      }
      params[c] = p;
    }
    __syncthreads();
    if (!in_range) {
      continue;
    }
    // Pass 2: codes and reference values.
    group_params const p = params[tx];
    for (index_t i = ty; i < gs; i += Slices) {
      index_t const ri = r0 + i;
      index_t const ro = row_out ? row_out[ri] : ri;
      float const q = qtl::detail::qnt::quantize_code<T>(load<T>(w.data[ri * w.stride[0] + col]), p, r);
      out.w_ref.data[ro * out.w_ref.stride[0] + col] =
          store<T>(qtl::detail::qnt::dequantize_code<T, SmallCodes>(q, p, After, 0u));
      out.w_q.data[ro * out.w_q.stride[0] + col] = static_cast<std::int32_t>(q) + r.bias;
    }
  }
}

template <class T>
QTL_KERNEL void quantize_ungrouped_kernel(view2d<T const> w, quant_range r, view2d<float> w_ref, view2d<std::int32_t> w_q) {
  index_t const n = w.extent[1];
  index_t const total = w.extent[0] * n;
  for (index_t e = index_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += index_t(gridDim.x) * blockDim.x) {
    index_t const i = e / n;
    index_t const j = e % n;
    float const q = qtl::detail::qnt::quantize_code_ungrouped(qtl::detail::qnt::load<T>(w.data[i * w.stride[0] + j]), r);
    w_ref.data[i * w_ref.stride[0] + j] = qtl::detail::qnt::round_to<T>(q);
    w_q.data[i * w_q.stride[0] + j] = static_cast<std::int32_t>(q) + r.bias;
  }
}

/// dst[i, :] = src[idx[i], :] for one element per thread.
template <class S, class I>
QTL_KERNEL void gather_rows_kernel(view2d<S const> src, I const* idx, view2d<S> dst) {
  index_t const n = dst.extent[1];
  index_t const total = dst.extent[0] * n;
  for (index_t e = index_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += index_t(gridDim.x) * blockDim.x) {
    index_t const i = e / n;
    index_t const j = e % n;
    dst.data[i * dst.stride[0] + j] = src.data[static_cast<index_t>(idx[i]) * src.stride[0] + j];
  }
}

// The three index kernels are templates on the index type, as every kernel in a header must be
// (QTL_KERNEL in qtl/macros.hpp), although each has one instantiation.

/// g_idx[i] = perm[i] // group_size (Python floor division); rand_perm[i] = perm[i] when asked.
template <class Perm>
QTL_KERNEL void g_idx_kernel(Perm const* perm, index_t k, index_t group_size, std::int32_t* g_idx, Perm* rand_perm) {
  for (index_t i = index_t(blockIdx.x) * blockDim.x + threadIdx.x; i < k; i += index_t(gridDim.x) * blockDim.x) {
    std::int64_t const p = perm[i];
    g_idx[i] = static_cast<std::int32_t>(qtl::detail::qnt::floor_div(p, group_size));
    if (rand_perm != nullptr) {
      rand_perm[i] = p;
    }
  }
}
/// inv[perm[i]] = i.
template <class Perm>
QTL_KERNEL void inverse_kernel(Perm const* perm, index_t k, std::int32_t* inv) {
  for (index_t i = index_t(blockIdx.x) * blockDim.x + threadIdx.x; i < k; i += index_t(gridDim.x) * blockDim.x) {
    inv[perm[i]] = static_cast<std::int32_t>(i);
  }
}
/// v[i] = i.
template <class I>
QTL_KERNEL void iota_kernel(I* v, index_t k) {
  for (index_t i = index_t(blockIdx.x) * blockDim.x + threadIdx.x; i < k; i += index_t(gridDim.x) * blockDim.x) {
    v[i] = static_cast<I>(i);
  }
}

template <class T, class O>
QTL_KERNEL void per_tensor_dequantize_kernel(view2d<T const> in, float inv_scale, view2d<O> out) {
  index_t const n = in.extent[1];
  index_t const total = in.extent[0] * n;
  for (index_t e = index_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += index_t(gridDim.x) * blockDim.x) {
    index_t const i = e / n;
    index_t const j = e % n;
    T const x = in.data[i * in.stride[0] + j];
    if constexpr (std::is_same_v<O, half_t>) {
      out.data[i * out.stride[0] + j] = per_tensor_dequantize_element(x, inv_scale);
    } else {
      out.data[i * out.stride[0] + j] = per_tensor_dequantize_element_f32(x, inv_scale);
    }
  }
}

inline unsigned grid_for(index_t items, int threads = launch_policy::threads) {
  return grid_stride_blocks(items, threads, launch_policy::wide_grid_stride_cap);
}

template <class V>
bool shape_ok(V const& v, index_t rows, index_t cols) {
  return v.extent[0] == rows && v.extent[1] == cols && (rows * cols == 0 || v.data != nullptr) &&
         (cols <= 1 || v.stride[1] == 1);
}

template <class T, bool SmallCodes, bool ZeroPoints, bool After>
cudaError_t launch_grouped(view2d<T const> w, index_t gs, quant_range r, quantize_outputs<T> out,
                           std::int32_t const* row_out, cudaStream_t stream) {
  index_t const k = w.extent[0];
  index_t const n = w.extent[1];
  if (n == 0) {
    return cudaSuccess;
  }
  dim3 const grid(static_cast<unsigned>((n + 31) / 32), grid_stride_blocks(k / gs, 1, launch_limits::grid_yz));
  if (index_t{grid.x} * 32 < n) {
    return cudaErrorInvalidValue;  // more than 2^37 columns
  }
  if (gs <= 128) {
    return launch(quantize_grouped_kernel<T, SmallCodes, ZeroPoints, After, 8>, grid, dim3(32, 8), 0, stream, w, gs, r,
                  out, row_out);
  }
  return launch(quantize_grouped_kernel<T, SmallCodes, ZeroPoints, After, 32>, grid, dim3(32, 32), 0, stream, w, gs, r,
                out, row_out);
}

/// The group size `quantize_impl` uses, or 0 where the host function throws (bad shapes).
template <scalar_type Q, class T>
index_t checked_group_size(view2d<T const> w, index_t group_size, quantize_outputs<T> const& out,
                           quantize_options opt) {
  index_t const k = w.extent[0];
  index_t const n = w.extent[1];
  if (k <= 0 || (n > 1 && w.stride[1] != 1)) {
    return 0;
  }
  if (opt.zero_points && (Q.is_signed || Q.max_int() <= 0)) {
    return 0;
  }
  group_size_result const g = qtl::normalize_group_size(group_size, k);
  if (!g.ok()) {
    return 0;
  }
  index_t const gs = g.rows;
  if (!shape_ok(out.w_ref, k, n) || !shape_ok(out.w_q, k, n) || !shape_ok(out.w_s, k / gs, n) ||
      (opt.zero_points && !shape_ok(out.w_zp, k / gs, n))) {
    return 0;
  }
  return gs;
}

/// Launches the grouped kernel for a group size `checked_group_size` accepted.
template <scalar_type Q, class T>
cudaError_t quantize_impl(view2d<T const> w, index_t gs, quantize_outputs<T> out, quantize_options opt,
                          std::int32_t const* row_out, cudaStream_t stream) {
  constexpr quant_range r = quant_range_of(Q);
  constexpr bool small = Q.size_bits() <= 8;
  if (!opt.zero_points) {
    return launch_grouped<T, small, false, false>(w, gs, r, out, row_out, stream);
  }
  if (opt.ref_zero_points_after_scales) {
    return launch_grouped<T, small, true, true>(w, gs, r, out, row_out, stream);
  }
  return launch_grouped<T, small, true, false>(w, gs, r, out, row_out, stream);
}

template <class V>
auto as_const(V const& v) {
  using E = std::remove_const_t<typename V::element_type>;
  return static_cast<view<E const, 2>>(v);
}

}  // namespace detail

/// `quantize_weights` on the device with a run-time group size (nullopt: ungrouped, whose w_ref
/// is float). Same outputs, bit for bit, as the host function. Returns cudaErrorInvalidValue
/// where the host throws.
template <scalar_type Q, class W, class R>
cudaError_t quantize_weights(view2d<W> w, std::optional<index_t> group_size, quantize_outputs<R> out,
                             quantize_options opt, cudaStream_t stream) {
  using T = std::remove_const_t<W>;
  static_assert(Q.is_integer(), "qtl::cuda::quantize_weights: Q must be an integer scalar type; floating-point "
                                "quantization types are not supported");
  static_assert(weight_float<T>, "qtl::cuda::quantize_weights: w must be float, half_t or bfloat16_t");
  auto const v = detail::as_const(w);
  if (!group_size) {
    if constexpr (std::is_same_v<R, float>) {
      index_t const k = v.extent[0];
      index_t const n = v.extent[1];
      if (k <= 0 || opt.zero_points || !detail::shape_ok(v, k, n) || !detail::shape_ok(out.w_ref, k, n) ||
          !detail::shape_ok(out.w_q, k, n)) {
        return cudaErrorInvalidValue;
      }
      return launch(detail::quantize_ungrouped_kernel<T>, detail::grid_for(k * n), launch_policy::threads, 0, stream, v,
                    quant_range_of(Q), out.w_ref, out.w_q);
    } else {
      return cudaErrorInvalidValue;
    }
  } else if constexpr (std::is_same_v<R, T>) {
    index_t const gs = detail::checked_group_size<Q, T>(v, *group_size, out, opt);
    if (gs == 0) {
      return cudaErrorInvalidValue;
    }
    return detail::quantize_impl<Q, T>(v, gs, out, opt, nullptr, stream);
  } else {
    return cudaErrorInvalidValue;
  }
}

/// `gptq_quantize_weights` on the device: group size -1, 32, 64, 128 or K; with `perm` (device,
/// K int64, a permutation of [0, K) — not checked on the device) the rows of w_ref and w_q are
/// permuted (act-order), g_idx = perm // group_size and rand_perm = perm; `scratch` holds K int32
/// (the inverse permutation). Without perm, g_idx and rand_perm are not touched.
template <scalar_type Q, class W>
cudaError_t gptq_quantize_weights(view2d<W> w, index_t group_size, gptq_outputs<std::remove_const_t<W>> out,
                                  std::int64_t const* perm, std::int32_t* scratch, cudaStream_t stream) {
  using T = std::remove_const_t<W>;
  static_assert(is_gptq_quant_type(Q), "qtl::cuda::gptq_quantize_weights: Q must be uint4b8 or uint8b128");
  auto const v = detail::as_const(w);
  index_t const k = v.extent[0];
  bool const supported = qtl::is_gptq_group_size(group_size) || group_size == k;
  if (!supported) {
    return cudaErrorInvalidValue;
  }
  quantize_outputs<T> qo{out.w_ref, out.w_q, out.w_s, {}};
  index_t const gs = detail::checked_group_size<Q, T>(v, group_size, qo, {});
  if (gs == 0) {
    return cudaErrorInvalidValue;
  }
  if (perm == nullptr) {
    return detail::quantize_impl<Q, T>(v, gs, qo, {}, nullptr, stream);
  }
  // Everything is checked before the first of the three launches is enqueued.
  if (qtl::is_channelwise_group_size(group_size, k) || scratch == nullptr || out.g_idx.extent[0] != k ||
      out.rand_perm.extent[0] != k || out.g_idx.stride[0] != 1 || out.rand_perm.stride[0] != 1 ||
      k > std::numeric_limits<std::int32_t>::max()) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t const e = launch(detail::inverse_kernel<std::int64_t>, detail::grid_for(k), launch_policy::threads, 0,
                                   stream, perm, k, scratch);
      e != cudaSuccess) {
    return e;
  }
  if (cudaError_t const e = detail::quantize_impl<Q, T>(v, gs, qo, {}, scratch, stream); e != cudaSuccess) {
    return e;
  }
  return launch(detail::g_idx_kernel<std::int64_t>, detail::grid_for(k), launch_policy::threads, 0, stream, perm, k,
                group_size, out.g_idx.data, out.rand_perm.data);
}

/// `permute_rows` on the device (perm: device int64, a permutation, not checked).
template <class QW, class WR, class T>
cudaError_t permute_rows(view2d<QW> q_w, view2d<WR> w_ref, index_t group_size, std::int64_t const* perm,
                         permute_rows_outputs<T> out, cudaStream_t stream) {
  index_t const k = q_w.extent[0];
  index_t const n = q_w.extent[1];
  if (group_size == 0 || perm == nullptr || !detail::shape_ok(w_ref, k, n) || !detail::shape_ok(out.w_ref, k, n) ||
      !detail::shape_ok(out.q_w, k, n) || out.g_idx.extent[0] != k || out.rand_perm.extent[0] != k ||
      out.g_idx.stride[0] != 1 || out.rand_perm.stride[0] != 1) {
    return cudaErrorInvalidValue;
  }
  if (k == 0) {
    return cudaSuccess;
  }
  using WRT = std::remove_const_t<WR>;
  using QWT = std::remove_const_t<QW>;
  if (cudaError_t const e = launch(detail::gather_rows_kernel<WRT, std::int64_t>, detail::grid_for(k * n),
                                   launch_policy::threads, 0, stream, detail::as_const(w_ref), perm, out.w_ref);
      e != cudaSuccess) {
    return e;
  }
  if (cudaError_t const e = launch(detail::gather_rows_kernel<QWT, std::int64_t>, detail::grid_for(k * n),
                                   launch_policy::threads, 0, stream, detail::as_const(q_w), perm, out.q_w);
      e != cudaSuccess) {
    return e;
  }
  return launch(detail::g_idx_kernel<std::int64_t>, detail::grid_for(k), launch_policy::threads, 0, stream, perm, k,
                group_size, out.g_idx.data, out.rand_perm.data);
}

/// `sort_weights` on the device: a stable CUB radix sort of (g_idx, row) pairs, then a row
/// gather. CUB's two-call protocol: with `workspace == nullptr`, sets `workspace_bytes` and
/// returns. The result equals the host's stable sort exactly.
template <class QW>
cudaError_t sort_weights(void* workspace, std::size_t& workspace_bytes, view2d<QW> q_w, std::int32_t const* g_idx,
                         sort_weights_outputs out, cudaStream_t stream) {
  index_t const k = q_w.extent[0];
  index_t const n = q_w.extent[1];
  if (k > std::numeric_limits<int>::max()) {
    return cudaErrorInvalidValue;  // CUB counts items in int
  }
  std::size_t cub_bytes = 0;
  cudaError_t e = cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, static_cast<std::int32_t const*>(nullptr),
                                                  static_cast<std::int32_t*>(nullptr),
                                                  static_cast<std::int32_t const*>(nullptr),
                                                  static_cast<std::int32_t*>(nullptr), static_cast<int>(k), 0, 32, stream);
  if (e != cudaSuccess) {
    return e;
  }
  std::size_t const iota_bytes = (static_cast<std::size_t>(k) * sizeof(std::int32_t) + 255) / 256 * 256;
  if (workspace == nullptr) {
    workspace_bytes = iota_bytes + cub_bytes;
    return cudaSuccess;
  }
  if (workspace_bytes < iota_bytes + cub_bytes || !detail::shape_ok(out.q_w, k, n) || out.g_idx.extent[0] != k ||
      out.sort_indices.extent[0] != k || out.g_idx.stride[0] != 1 || out.sort_indices.stride[0] != 1 ||
      (k > 0 && g_idx == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (k == 0) {
    return cudaSuccess;
  }
  auto* iota = static_cast<std::int32_t*>(workspace);
  if (e = launch(detail::iota_kernel<std::int32_t>, detail::grid_for(k), launch_policy::threads, 0, stream, iota, k);
      e != cudaSuccess) {
    return e;
  }
  e = cub::DeviceRadixSort::SortPairs(static_cast<char*>(workspace) + iota_bytes, cub_bytes, g_idx, out.g_idx.data, iota,
                                      out.sort_indices.data, static_cast<int>(k), 0, 32, stream);
  if (e != cudaSuccess) {
    return e;
  }
  return launch(detail::gather_rows_kernel<std::remove_const_t<QW>, std::int32_t>, detail::grid_for(k * n),
                launch_policy::threads, 0, stream, detail::as_const(q_w),
                static_cast<std::int32_t const*>(out.sort_indices.data), out.q_w);
}

/// `per_tensor_dequantize` on the device: half_t output (scalar scale) or float (1-element scale).
template <class T, class O>
cudaError_t per_tensor_dequantize(view2d<T> tensor, float inv_scale, view2d<O> out, cudaStream_t stream) {
  static_assert(std::is_same_v<O, half_t> || std::is_same_v<O, float>,
                "qtl::cuda::per_tensor_dequantize: the output is half_t or float");
  index_t const k = tensor.extent[0];
  index_t const n = tensor.extent[1];
  if (!detail::shape_ok(out, k, n) || (n > 1 && tensor.stride[1] != 1)) {
    return cudaErrorInvalidValue;
  }
  if (k * n == 0) {
    return cudaSuccess;
  }
  return launch(detail::per_tensor_dequantize_kernel<std::remove_const_t<T>, O>, detail::grid_for(k * n),
                launch_policy::threads, 0, stream, detail::as_const(tensor), inv_scale, out);
}

}  // namespace qtl::cuda
