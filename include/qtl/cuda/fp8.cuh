#pragma once
/// \file
/// CUDA kernels and launchers of qtl/fp8.hpp: static, dynamic per-tensor, dynamic per-token and
/// per-token-group FP8 quantization, requantization to the maximum scale, and the counts of
/// `fp8_all_close`. Every kernel runs the host header's element functions (`fp8_quantize_element`,
/// `fp8_token_scale`, `fp8_group_scale`, `requantize_fp8_element`, `fp8_compare_codes`), whose
/// float arithmetic uses `__fmul_rn`/`__fdiv_rn`/`__fadd_rn` on the device, so the device output
/// equals the host output bit for bit (test/cuda/fp8_test.cu), whatever nvcc contracts elsewhere.
/// Not under `-use_fast_math` / `-ftz=true`: nvcc then emits the `.ftz` forms of those intrinsics,
/// and subnormal inputs, scales (`1/s` of a huge scale) and products flush to zero (pinned on the
/// simulated device's FTZ mode in test/cuda/fp8_test.cu; the cuda_ptx_no_ftz test reads the PTX
/// of the project's own flags).
///
/// Launchers follow CUB: they take a `cudaStream_t`, enqueue work, and return the first
/// `cudaError_t` (bad shapes give `cudaErrorInvalidValue` before anything is enqueued); nothing
/// throws and nothing synchronises. Pointers inside views and scale arguments are device
/// pointers. amax reductions are CUB block reductions of `|x|`'s bits (exact, NaN ignored, order
/// free), combined across blocks with `atomicMax` on the bits of a non-negative float.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/fp8.cuh> needs nvcc; host code includes <qtl/fp8.hpp>"
#endif  // ^^^ __CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <qtl/cuda/launch.cuh>
#include <qtl/fp8.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>
#include <span>

namespace qtl::cuda {

namespace detail {

inline constexpr int threads = launch_policy::threads;

struct max_op {
  QTL_DEVICE std::uint32_t operator()(std::uint32_t a, std::uint32_t b) const { return a > b ? a : b; }
};
struct sum_op {
  QTL_DEVICE unsigned long long operator()(unsigned long long a, unsigned long long b) const { return a + b; }
};

// A 2-D grid over [rows, cols]: x strides over columns, y over rows, both capped so that large
// tensors loop inside the kernel (and amax has few atomics).
inline dim3 grid_2d(index_t rows, index_t cols, int max_x = 64, int max_y = 1024) {
  return dim3(grid_stride_blocks(cols, threads, max_x), grid_stride_blocks(rows, 1, max_y));
}

template <class T, class Fp8>
bool shapes_ok(view2d<T const> in, view2d<Fp8> out) {
  return in.extent[0] >= 0 && in.extent[1] >= 0 && (in.extent[1] <= 1 || in.stride[1] == 1) &&
         (out.extent[1] <= 1 || out.stride[1] == 1) && out.extent[1] == in.extent[1] &&
         out.extent[0] >= in.extent[0];
}

// max |x| of the whole view into *result (float bits; the caller zeroes it first).
template <class T>
QTL_KERNEL void amax_kernel(view2d<T const> in, std::uint32_t* result) {
  using reduce = cub::BlockReduce<std::uint32_t, threads>;
  __shared__ typename reduce::TempStorage tmp;
  std::uint32_t m = 0;
  for (index_t r = blockIdx.y; r < in.extent[0]; r += gridDim.y) {
    for (index_t c = index_t(blockIdx.x) * threads + threadIdx.x; c < in.extent[1]; c += index_t(gridDim.x) * threads) {
      std::uint32_t const a = amax_bits(in(r, c));
      m = a > m ? a : m;
    }
  }
  m = reduce(tmp).Reduce(m, max_op{});
  if (threadIdx.x == 0 && m != 0) {
    atomicMax(result, float_to_bits(amax_value<T>(static_cast<typename qtl::detail::input_bits<T>::word>(m))));
  }
}

// *p = Fn::apply(*p) on one thread: turns a reduced amax into a scale.
template <class Fn>
QTL_KERNEL void map_scalar_kernel(float* p) {
  *p = Fn::apply(*p);
}

template <class Fp8>
struct scale_from_amax {
  QTL_DEVICE static float apply(float amax) { return fp8_scale_from_amax<Fp8>(amax); }
};

// Per-tensor quantization; the scale is *scale_ptr when non-null, else `scale`. Rows past the
// input's are zeroed.
template <class T, class Fp8, fp8_nan Nan>
QTL_KERNEL void per_tensor_kernel(view2d<T const> in, view2d<Fp8> out, float const* scale_ptr, float scale,
                                  fp8_zero_scale zero) {
  float const s = scale_ptr != nullptr ? *scale_ptr : scale;
  float const inv = fp8_inverse_scale(s, zero);
  for (index_t r = blockIdx.y; r < out.extent[0]; r += gridDim.y) {
    for (index_t c = index_t(blockIdx.x) * threads + threadIdx.x; c < out.extent[1]; c += index_t(gridDim.x) * threads) {
      out(r, c).bits = r < in.extent[0] ? fp8_quantize_element<Fp8, Nan>(to_float(in(r, c)), s, inv) : std::uint8_t{0};
    }
  }
}

// Per-token quantization: one block per row (grid-stride over rows).
template <class T, class Fp8, fp8_nan Nan, fp8_scale_op Op>
QTL_KERNEL void per_token_kernel(view2d<T const> in, view2d<Fp8> out, float* scales, fp8_token_options o) {
  using reduce = cub::BlockReduce<std::uint32_t, threads>;
  __shared__ typename reduce::TempStorage tmp;
  __shared__ float row_scale;
  for (index_t r = blockIdx.x; r < out.extent[0]; r += gridDim.x) {
    if (r >= in.extent[0]) {
      for (index_t c = threadIdx.x; c < out.extent[1]; c += threads) {
        out(r, c).bits = 0;
      }
      if (threadIdx.x == 0) {
        scales[r] = 0.0f;
      }
      continue;
    }
    std::uint32_t m = 0;
    for (index_t c = threadIdx.x; c < in.extent[1]; c += threads) {
      std::uint32_t const a = amax_bits(in(r, c));
      m = a > m ? a : m;
    }
    m = reduce(tmp).Reduce(m, max_op{});
    if (threadIdx.x == 0) {
      row_scale = fp8_token_scale<Fp8>(amax_value<T>(static_cast<typename qtl::detail::input_bits<T>::word>(m)), o);
      scales[r] = row_scale;
    }
    __syncthreads();
    float const s = row_scale;
    float const inv = fp8_inverse_scale(s, o.zero_scale);
    for (index_t c = threadIdx.x; c < in.extent[1]; c += threads) {
      out(r, c).bits = fp8_quantize_element<Fp8, Nan, Op>(to_float(in(r, c)), s, inv);
    }
    __syncthreads();  // row_scale and tmp are reused by the next row
  }
}

// Per-token-group quantization: a team of `Team` lanes (a power of two <= 32 dividing the group)
// per group, `GroupSize / Team` elements per lane, lanes strided so that loads coalesce; the
// team's amax by xor-shuffles. Warps iterate uniformly (all 32 lanes reach every shuffle).
template <int GroupSize, class T, class Fp8, fp8_nan Nan, fp8_scale_op Op>
QTL_KERNEL void per_token_group_kernel(view2d<T const> in, view2d<Fp8> out, float* scales, fp8_group_options o) {
  constexpr int team = GroupSize >= 32 ? 32 : GroupSize;
  constexpr int per_lane = GroupSize / team;
  constexpr int teams_per_warp = 32 / team;
  index_t const groups_per_row = out.extent[1] / GroupSize;
  index_t const total = out.extent[0] * groups_per_row;
  int const lane = threadIdx.x % 32;
  index_t const warp = (index_t(blockIdx.x) * threads + threadIdx.x) / 32;
  index_t const warps = index_t(gridDim.x) * threads / 32;
  for (index_t w = warp; w * teams_per_warp < total; w += warps) {
    index_t const grp = w * teams_per_warp + lane / team;
    int const t = lane % team;
    bool const active = grp < total;
    index_t const r = active ? grp / groups_per_row : 0;
    index_t const g = active ? grp % groups_per_row : 0;
    bool const real = active && r < in.extent[0];
    std::uint32_t m = 0;
    if (real) {
      QTL_UNROLL
      for (int e = 0; e < per_lane; ++e) {
        std::uint32_t const a = amax_bits(in(r, g * GroupSize + e * team + t));
        m = a > m ? a : m;
      }
    }
    m = team_max<team>(m);
    if (!active) {
      continue;
    }
    index_t const so = group_scale_offset(o.layout, r, g, out.extent[0], groups_per_row, o.row_align);
    if (!real) {
      for (int e = 0; e < per_lane; ++e) {
        out(r, g * GroupSize + e * team + t).bits = 0;
      }
      if (t == 0) {
        scales[so] = 0.0f;
      }
      continue;
    }
    float const s = fp8_group_scale<Fp8>(amax_value<T>(static_cast<typename qtl::detail::input_bits<T>::word>(m)),
                                         o.eps, o.power_of_two_scale);
    float const inv = fp8_inverse_scale(s);
    QTL_UNROLL
    for (int e = 0; e < per_lane; ++e) {
      index_t const c = g * GroupSize + e * team + t;
      out(r, c).bits = fp8_quantize_element<Fp8, Nan, Op>(to_float(in(r, c)), s, inv);
    }
    if (t == 0) {
      scales[so] = s;
    }
  }
}

template <class Fp8>
QTL_KERNEL void requantize_kernel(view2d<Fp8> weight, index_t row_begin, index_t row_end, float shard_scale,
                                  float inv_max) {
  for (index_t r = row_begin + blockIdx.y; r < row_end; r += gridDim.y) {
    for (index_t c = index_t(blockIdx.x) * threads + threadIdx.x; c < weight.extent[1];
         c += index_t(gridDim.x) * threads) {
      weight(r, c) = requantize_fp8_element(weight(r, c), shard_scale, inv_max);
    }
  }
}

template <class Fp8>
QTL_KERNEL void compare_kernel(view2d<Fp8 const> a, view2d<Fp8 const> b, unsigned long long* counts) {
  using reduce = cub::BlockReduce<unsigned long long, threads>;
  __shared__ typename reduce::TempStorage tmp;
  unsigned long long n[3] = {0, 0, 0};
  for (index_t r = blockIdx.y; r < a.extent[0]; r += gridDim.y) {
    for (index_t c = index_t(blockIdx.x) * threads + threadIdx.x; c < a.extent[1]; c += index_t(gridDim.x) * threads) {
      fp8_compare_counts const k = fp8_compare_codes<Fp8>(a(r, c).bits, b(r, c).bits);
      n[0] += k.sign_flip;
      n[1] += k.differ;
      n[2] += k.differ_large;
    }
  }
  for (int i = 0; i < 3; ++i) {
    unsigned long long const total = reduce(tmp).Reduce(n[i], sum_op{});
    if (threadIdx.x == 0 && total != 0) {
      atomicAdd(counts + i, total);
    }
    __syncthreads();
  }
}

}  // namespace detail

/// max |x| over `in` (NaN ignored) into `*amax` (device float), as the host `fp8_amax`.
template <fp8_quant_input T>
cudaError_t fp8_amax(view2d<T const> in, float* amax, cudaStream_t stream = nullptr) {
  if (in.extent[0] < 0 || in.extent[1] < 0) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t e = cudaMemsetAsync(amax, 0, sizeof(float), stream); e != cudaSuccess) {
    return e;
  }
  if (in.extent[0] == 0 || in.extent[1] == 0) {
    return cudaSuccess;
  }
  return launch(detail::amax_kernel<T>, detail::grid_2d(in.extent[0], in.extent[1], 32, 512), detail::threads, 0,
                stream, in, reinterpret_cast<std::uint32_t*>(amax));
}

/// Static per-tensor quantization with the scale `*scale` (a device float), as the host
/// `scaled_fp8_quant_static`; rows of `out` past the input's are zeroed.
template <fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
cudaError_t scaled_fp8_quant_static(view2d<T const> in, float const* scale, view2d<Fp8> out,
                                    fp8_tensor_options o = {}, cudaStream_t stream = nullptr) {
  if (!detail::shapes_ok(in, out) || scale == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (out.extent[0] == 0 || out.extent[1] == 0) {
    return cudaSuccess;
  }
  dim3 const grid = detail::grid_2d(out.extent[0], out.extent[1], 64, 4096);
  if (o.nan == fp8_nan::to_max) {
    if (cudaError_t const st = launch(detail::per_tensor_kernel<T, Fp8, fp8_nan::to_max>, grid, detail::threads, 0,
                                      stream, in, out, scale, 0.0f, o.zero_scale);
        st != cudaSuccess) {
      return st;
    }
  } else {
    if (cudaError_t const st = launch(detail::per_tensor_kernel<T, Fp8, fp8_nan::propagate>, grid, detail::threads, 0,
                                      stream, in, out, scale, 0.0f, o.zero_scale);
        st != cudaSuccess) {
      return st;
    }
  }
  return cudaSuccess;
}

/// Dynamic per-tensor quantization: `*scale = amax / max` (written to the device float), then as
/// static. Three stream-ordered launches (memset, amax, quantize).
template <fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
cudaError_t scaled_fp8_quant_dynamic(view2d<T const> in, view2d<Fp8> out, float* scale, fp8_tensor_options o = {},
                                     cudaStream_t stream = nullptr) {
  if (!detail::shapes_ok(in, out) || scale == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t e = fp8_amax(in, scale, stream); e != cudaSuccess) {
    return e;
  }
  if (cudaError_t const st = launch(detail::map_scalar_kernel<detail::scale_from_amax<Fp8>>, 1, 1, 0, stream, scale);
      st != cudaSuccess) {
    return st;
  }
  return scaled_fp8_quant_static<Fp8>(in, scale, out, o, stream);
}

/// Dynamic per-token quantization, as the host `scaled_fp8_quant_per_token`: `scales` (device)
/// holds `out.extent[0]` floats; padding rows get scale 0 and zero codes.
template <fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
cudaError_t scaled_fp8_quant_per_token(view2d<T const> in, view2d<Fp8> out, float* scales,
                                       fp8_token_options o = {}, cudaStream_t stream = nullptr) {
  if (!detail::shapes_ok(in, out) || scales == nullptr || !(o.upper_bound > 0.0f) || !(o.min_scale >= 0.0f)) {
    return cudaErrorInvalidValue;
  }
  if (out.extent[0] == 0) {
    return cudaSuccess;
  }
  unsigned const blocks = detail::grid_stride_blocks(out.extent[0], 1, launch_policy::row_cap);
  auto run = [&](auto kernel) {
    return qtl::cuda::launch(kernel, blocks, detail::threads, 0, stream, in, out, scales, o);
  };
  bool const divide = o.op == fp8_scale_op::divide;
  if (o.nan == fp8_nan::to_max) {
    return divide ? run(detail::per_token_kernel<T, Fp8, fp8_nan::to_max, fp8_scale_op::divide>)
                  : run(detail::per_token_kernel<T, Fp8, fp8_nan::to_max, fp8_scale_op::multiply_reciprocal>);
  }
  return divide ? run(detail::per_token_kernel<T, Fp8, fp8_nan::propagate, fp8_scale_op::divide>)
                : run(detail::per_token_kernel<T, Fp8, fp8_nan::propagate, fp8_scale_op::multiply_reciprocal>);
}

/// Per-token-group quantization, as the host `per_token_group_quant_fp8`; `scales` (device) holds
/// `group_scale_storage_size(o.layout, out rows, N / GroupSize, o.row_align)` floats.
/// `GroupSize` is a power of two up to 32 or a multiple of 32.
template <int GroupSize, fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
cudaError_t per_token_group_quant_fp8(view2d<T const> in, view2d<Fp8> out, float* scales, fp8_group_options o = {},
                                      cudaStream_t stream = nullptr) {
  static_assert(GroupSize > 0 && (GroupSize % 32 == 0 || (GroupSize < 32 && (32 % GroupSize) == 0)),
                "qtl::cuda::per_token_group_quant_fp8: GroupSize must be a power of two up to 32 or a multiple of 32");
  if (!detail::shapes_ok(in, out) || scales == nullptr || in.extent[1] % GroupSize != 0 || o.row_align < 1 ||
      !(o.eps >= 0.0f)) {
    return cudaErrorInvalidValue;
  }
  index_t const total = out.extent[0] * (out.extent[1] / GroupSize);
  if (total == 0) {
    return cudaSuccess;
  }
  constexpr int team = GroupSize >= 32 ? 32 : GroupSize;
  index_t const warps = (total + 32 / team - 1) / (32 / team);
  unsigned const grid = detail::grid_stride_blocks(warps * 32, detail::threads, launch_policy::row_cap);
  auto run = [&](auto kernel) {
    return qtl::cuda::launch(kernel, grid, detail::threads, 0, stream, in, out, scales, o);
  };
  bool const divide = o.op == fp8_scale_op::divide;
  if (o.nan == fp8_nan::to_max) {
    return divide ? run(detail::per_token_group_kernel<GroupSize, T, Fp8, fp8_nan::to_max, fp8_scale_op::divide>)
                  : run(detail::per_token_group_kernel<GroupSize, T, Fp8, fp8_nan::to_max,
                                                       fp8_scale_op::multiply_reciprocal>);
  }
  return divide ? run(detail::per_token_group_kernel<GroupSize, T, Fp8, fp8_nan::propagate, fp8_scale_op::divide>)
                : run(detail::per_token_group_kernel<GroupSize, T, Fp8, fp8_nan::propagate,
                                                     fp8_scale_op::multiply_reciprocal>);
}

/// `requantize_with_max_scale` on a device weight, for a plan the host validated with
/// `qtl::plan_requantize_with_max_scale` (same `scales`, host memory, and `logical_widths`): one
/// launch per non-empty shard. Nothing to do when `!plan.requantize`.
template <fp8_storage Fp8 = float8_e4m3fn_t>
cudaError_t requantize_with_max_scale(view2d<Fp8> weight, requantize_plan const& plan, std::span<float const> scales,
                                      std::span<index_t const> logical_widths, cudaStream_t stream = nullptr) {
  if (!plan.requantize) {
    return cudaSuccess;
  }
  index_t start = 0;
  for (std::size_t k = 0; k < logical_widths.size(); ++k) {  // every shard checked before the first launch
    index_t const w = logical_widths[k];
    if (w < 0 || (w > 0 && k >= scales.size()) || start + w > weight.extent[0]) {
      return cudaErrorInvalidValue;
    }
    start += w;
  }
  float const inv = fp8_inverse_scale(plan.max_scale);
  start = 0;
  for (std::size_t k = 0; k < logical_widths.size(); ++k) {
    index_t const w = logical_widths[k];
    if (w > 0 && weight.extent[1] > 0) {
      if (cudaError_t const st = launch(detail::requantize_kernel<Fp8>, detail::grid_2d(w, weight.extent[1], 64, 4096),
                                        detail::threads, 0, stream, weight, start, start + w, scales[k], inv);
          st != cudaSuccess) {
        return st;
      }
    }
    start += w;
  }
  return cudaSuccess;
}

/// The counts of `fp8_all_close` on device tensors: `counts` (device) receives
/// {sign_flips, differ, differ_large}; `fp8_compare_report_of` turns them into the report.
template <fp8_storage Fp8 = float8_e4m3fn_t>
cudaError_t fp8_compare(view2d<Fp8 const> a, view2d<Fp8 const> b, unsigned long long* counts,
                        cudaStream_t stream = nullptr) {
  if (a.extent[0] != b.extent[0] || a.extent[1] != b.extent[1] || counts == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t e = cudaMemsetAsync(counts, 0, 3 * sizeof(unsigned long long), stream); e != cudaSuccess) {
    return e;
  }
  if (a.extent[0] == 0 || a.extent[1] == 0) {
    return cudaSuccess;
  }
  return launch(detail::compare_kernel<Fp8>, detail::grid_2d(a.extent[0], a.extent[1], 32, 512), detail::threads, 0,
                stream, a, b, counts);
}

/// The report of `fp8_compare`'s counts (copied to the host) for `numel` elements.
inline fp8_compare_report fp8_compare_report_of(index_t numel, unsigned long long const (&counts)[3]) {
  fp8_compare_report r;
  r.numel = numel;
  r.sign_flips = static_cast<index_t>(counts[0]);
  r.differ = static_cast<index_t>(counts[1]);
  r.differ_large = static_cast<index_t>(counts[2]);
  r.passed = fp8_all_close_verdict(r);
  return r;
}

}  // namespace qtl::cuda
