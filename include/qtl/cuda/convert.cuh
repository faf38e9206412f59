#pragma once
/// \file
/// CUDA kernels and launchers of the load-time converters of qtl/convert.hpp, in
/// `qtl::cuda::convert`. Each kernel runs the element functions of <qtl/element/convert.hpp> that
/// the host loop runs, so device output equals host output bit for bit
/// (test/cuda/convert_test.cu):
///
///   block_quant_dequant     one thread per element: dequant_element (then one bf16 RNE)
///   requant_weight_ue8m0    one CUDA block per 128x128 weight block: the largest code magnitude
///                           by a shared-memory max, requant_block_scale, then requant_element
///                           (a non-finite input scale: the element-wise amax, as the host)
///   per_block_cast_to_fp8   one CUDA block per weight block: the bit-max of |x|, cast_block_scale,
///                           then the clamped encoder (cast_element for a non-finite block)
///   deepgemm_pack_ue8m0     one thread per int32 word: dg_pack_word of its block row, pad rows 0
///                           (and per scale: the least one that is not packable, when asked)
///   deepgemm_unpack_ue8m0   one thread per scale: ue8m0_decode(packed_byte(word of row 128 i))
///   fp8_block_to_mxfp4      one thread per 32 elements: bf16 dequant, mxfp4_exponent, mxfp4_nibble
///   fp8_block_to_nvfp4      block_quant_dequant to bf16 into a workspace, (when asked) a thread per
///                           element of it for the non-finite ones, then qtl/cuda/fp4.cuh's
///                           block_quantize<nvfp4> (the host's definition; not verified against
///                           flashinfer); nvfp4_shared_global_scale: fp8_amax, then
///                           nvfp4_shared_global_scale_of on the device
///
/// Shapes: a weight of G matrices [N, K] (G = 1 for a plain weight) with scales [G, nb, kb], as
/// `qtl::convert::block_grid` describes; element (g, n, k) at (g*N + n)*K + k, all row-major.
/// Launchers take a `cudaStream_t`, return `cudaError_t` (`cudaErrorInvalidValue` for bad shapes
/// or null pointers, before anything is enqueued), never throw or synchronise; pointers are device
/// pointers. What the host versions refuse on the data (the DeepGEMM packer's scales that are not
/// positive normal powers of two, MXFP4/NVFP4 inputs that do not dequantize to finite values) a
/// kernel cannot raise: the launchers that take `first` (a device `unsigned long long` the caller
/// set to ~0) store there, by `atomicMin`, the least index of what the host version names, and
/// write their outputs anyway (the DeepGEMM bytes then hold the raw exponent field, as DeepGEMM's
/// torch path); the caller reads it back and refuses as the host does. With `first` null that
/// the data is good is the caller's precondition. NaN payloads under the f32 recipes are out of
/// contract (CUDA's canonical NaN is not the host's); the bf16 paths give the host's bytes for
/// NaN codes too.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/convert.cuh> needs nvcc; host code includes <qtl/convert.hpp>"
#endif  // ^^^ __CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>

#include <qtl/convert.hpp>
#include <qtl/cuda/fp4.cuh>
#include <qtl/cuda/fp8.cuh>
#include <qtl/cuda/launch.cuh>
#include <qtl/element/convert.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda::convert {

namespace cv = qtl::convert;

namespace detail {

using qtl::cuda::detail::grid_stride_blocks;
inline constexpr int threads = launch_policy::threads;

/// The weight block `b` (in g, bi, bj order) of the grid: its scale index and element range.
struct block_at {
  std::int64_t g, n0, n1, k0, k1, scale;
  QTL_HOST_DEVICE static block_at of(cv::block_grid const& grid, std::int64_t b) {
    std::int64_t const nb = grid.n_blocks();
    std::int64_t const kb = grid.k_blocks();
    std::int64_t const g = b / (nb * kb);
    std::int64_t const bi = (b / kb) % nb;
    std::int64_t const bj = b % kb;
    std::int64_t const n0 = bi * grid.block.n;
    std::int64_t const k0 = bj * grid.block.k;
    std::int64_t const n1 = n0 + grid.block.n < grid.n ? n0 + grid.block.n : grid.n;
    std::int64_t const k1 = k0 + grid.block.k < grid.k ? k0 + grid.block.k : grid.k;
    return {g, n0, n1, k0, k1, b};
  }
  QTL_HOST_DEVICE std::int64_t elements() const { return (n1 - n0) * (k1 - k0); }
  /// Offset of the e-th element of the block (row-major inside it) in a [G, N, K] tensor.
  QTL_HOST_DEVICE std::int64_t at(cv::block_grid const& grid, std::int64_t e) const {
    std::int64_t const cols = k1 - k0;
    return (g * grid.n + n0 + e / cols) * grid.k + k0 + e % cols;
  }
};

/// The max of every thread's `v` in the CUDA block (all threads get it); `red` is shared.
QTL_DEVICE std::uint32_t block_max(std::uint32_t v, std::uint32_t* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int off = threads / 2; off > 0; off /= 2) {
    if (static_cast<int>(threadIdx.x) < off) {
      std::uint32_t const o = red[threadIdx.x + off];
      red[threadIdx.x] = o > red[threadIdx.x] ? o : red[threadIdx.x];
    }
    __syncthreads();
  }
  std::uint32_t const m = red[0];
  __syncthreads();  // red is reused by the next block of the grid-stride loop
  return m;
}

template <class Out>
QTL_KERNEL void dequant_kernel(std::uint8_t const* q, float const* s, cv::block_grid grid, Out* out) {
  std::int64_t const total = grid.elements();
  std::int64_t const nb = grid.n_blocks();
  std::int64_t const kb = grid.k_blocks();
  for (std::int64_t i = std::int64_t(blockIdx.x) * threads + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * threads) {
    std::int64_t const row = i / grid.k;  // g * N + n
    std::int64_t const g = row / grid.n;
    std::int64_t const n = row % grid.n;
    std::int64_t const k = i % grid.k;
    float const d = cv::dequant_element(q[i], s[(g * nb + n / grid.block.n) * kb + k / grid.block.k]);
    if constexpr (std::is_same_v<Out, float>) {
      out[i] = d;
    } else {
      out[i] = bfloat16_t{float_to_bf16(d)};
    }
  }
}

template <class Recipe>
QTL_KERNEL void requant_kernel(std::uint8_t const* q, float const* s, cv::block_grid grid, std::uint8_t* q_out,
                               float* s_out) {
  __shared__ std::uint32_t red[threads];
  std::int64_t const blocks = grid.scales();
  for (std::int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    block_at const blk = block_at::of(grid, b);
    float const scale = s[blk.scale];
    bool const finite = !is_nan(scale - scale);
    std::uint32_t local = 0;
    for (std::int64_t e = threadIdx.x; e < blk.elements(); e += threads) {
      std::uint8_t const c = q[blk.at(grid, e)];
      std::uint32_t const m =
          finite ? (c & 0x7Fu) : (float_to_bits(cv::dequant_element_as<Recipe::precision>(c, scale)) & 0x7FFFFFFFu);
      local = m > local ? m : local;
    }
    std::uint32_t const top = block_max(local, red);
    float const sf = finite ? cv::requant_block_scale<Recipe>(static_cast<std::uint8_t>(top), scale)
                            : cv::cast_block_scale<Recipe::rule>(bits_to_float(top));
    float const inv = qtl::detail::div_rn(1.0f, sf);
    for (std::int64_t e = threadIdx.x; e < blk.elements(); e += threads) {
      std::int64_t const at = blk.at(grid, e);
      std::uint8_t const c = q[at];
      if (finite) {
        q_out[at] = cv::requant_element<Recipe>(c, scale, inv);
      } else {
        float const v = cv::dequant_element_as<Recipe::precision>(c, scale);
        q_out[at] = top < 0x7F800000u ? fp8_encode_clamped<float8_e4m3fn_t>(qtl::detail::mul_rn(v, inv))
                                      : cv::cast_element(v, inv);
      }
    }
    if (threadIdx.x == 0) {
      s_out[blk.scale] = sf;
    }
  }
}

template <cv::pow2_rule Rule>
QTL_KERNEL void cast_kernel(float const* x, cv::block_grid grid, std::uint8_t* q, float* s) {
  __shared__ std::uint32_t red[threads];
  std::int64_t const blocks = grid.scales();
  for (std::int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    block_at const blk = block_at::of(grid, b);
    std::uint32_t local = 0;
    for (std::int64_t e = threadIdx.x; e < blk.elements(); e += threads) {
      std::uint32_t const a = float_to_bits(x[blk.at(grid, e)]) & 0x7FFFFFFFu;
      local = a > local ? a : local;
    }
    std::uint32_t const top = block_max(local, red);
    float const sf = cv::cast_block_scale<Rule>(bits_to_float(top));
    float const inv = qtl::detail::div_rn(1.0f, sf);
    for (std::int64_t e = threadIdx.x; e < blk.elements(); e += threads) {
      std::int64_t const at = blk.at(grid, e);
      q[at] = top < 0x7F800000u ? fp8_encode_clamped<float8_e4m3fn_t>(qtl::detail::mul_rn(x[at], inv))
                                : cv::cast_element(x[at], inv);
    }
    if (threadIdx.x == 0) {
      s[blk.scale] = sf;
    }
  }
}

/// The least `index` of every thread's candidates (~0: none) into `*first`, when it is not null.
QTL_DEVICE void store_first(unsigned long long* first, unsigned long long index) {
  if (first != nullptr && index != ~0ull) {
    atomicMin(first, index);
  }
}

/// `Scale`: float powers of two, or E8M0 codes (qtl/cuda/deepgemm_e8m0.cuh). `first`, when not
/// null, gets the least index of a scale `is_ue8m0_packable` refuses.
template <class Scale = float>
QTL_KERNEL void pack_kernel(Scale const* sf, cv::dg_packed_layout l, std::int32_t* out, unsigned long long* first) {
  std::int64_t const A = l.aligned_mn();
  std::int64_t const P = l.packed_k();
  std::int64_t const nb = l.scale_rows();
  std::int64_t const total = l.words();
  for (std::int64_t w = std::int64_t(blockIdx.x) * threads + threadIdx.x; w < total;
       w += std::int64_t(gridDim.x) * threads) {
    std::int64_t const g = w / (P * A);
    std::int64_t const p = (w / A) % P;
    std::int64_t const n = w % A;
    out[w] = n < l.mn ? cv::dg_pack_word(sf + (g * nb + n / cv::dg_packed_layout::rows_per_scale) * l.k_blocks,
                                         l.k_blocks, p)
                      : 0;
  }
  if (first == nullptr) {
    return;
  }
  unsigned long long bad = ~0ull;
  for (std::int64_t i = std::int64_t(blockIdx.x) * threads + threadIdx.x; i < l.groups * nb * l.k_blocks;
       i += std::int64_t(gridDim.x) * threads) {
    if (!cv::is_ue8m0_packable(sf[i]) && bad == ~0ull) {
      bad = static_cast<unsigned long long>(i);
    }
  }
  store_first(first, bad);
}

template <class = void>
QTL_KERNEL void unpack_kernel(std::int32_t const* packed, std::int64_t groups, std::int64_t P, std::int64_t A,
                              std::int64_t k_blocks, float* sf) {
  std::int64_t const rows = (A + 127) / 128;
  std::int64_t const total = groups * rows * k_blocks;
  for (std::int64_t o = std::int64_t(blockIdx.x) * threads + threadIdx.x; o < total;
       o += std::int64_t(gridDim.x) * threads) {
    std::int64_t const g = o / (rows * k_blocks);
    std::int64_t const i = (o / k_blocks) % rows;
    std::int64_t const j = o % k_blocks;
    sf[o] = cv::ue8m0_decode(cv::packed_byte(packed[(g * P + j / 4) * A + 128 * i], static_cast<int>(j % 4)));
  }
}

/// `first`, when not null, gets the least index of an element whose bf16 dequant is not finite.
template <class = void>
QTL_KERNEL void mxfp4_kernel(std::uint8_t const* q, float const* s, cv::block_grid grid, std::uint8_t* packed,
                             std::uint8_t* scales, unsigned long long* first) {
  constexpr int B = cv::mxfp4_block;
  std::int64_t const total = grid.elements() / B;
  std::int64_t const per_row = grid.k / B;
  std::int64_t const nb = grid.n_blocks();
  std::int64_t const kb = grid.k_blocks();
  for (std::int64_t t = std::int64_t(blockIdx.x) * threads + threadIdx.x; t < total;
       t += std::int64_t(gridDim.x) * threads) {
    std::int64_t const row = t / per_row;  // g * N + n
    std::int64_t const k0 = (t % per_row) * B;
    float const* srow = s + ((row / grid.n) * nb + (row % grid.n) / grid.block.n) * kb;
    std::uint8_t const* in = q + row * grid.k + k0;
    float x[B];
    float amax = 0.0f;
    unsigned long long bad = ~0ull;
    QTL_UNROLL
    for (int i = 0; i < B; ++i) {
      x[i] = cv::dequant_element_as<cv::dequant_precision::bf16>(in[i], srow[(k0 + i) / grid.block.k]);
      amax = cv::amax_step(amax, x[i]);
      if (!is_finite(x[i]) && bad == ~0ull) {
        bad = static_cast<unsigned long long>(row * grid.k + k0 + i);
      }
    }
    store_first(first, bad);
    int const e = cv::mxfp4_exponent(amax);
    std::uint8_t* out = packed + t * (B / 2);
    QTL_UNROLL
    for (int i = 0; i < B; i += 2) {
      out[i / 2] = static_cast<std::uint8_t>(cv::mxfp4_nibble(x[i], e) | (cv::mxfp4_nibble(x[i + 1], e) << 4));
    }
    scales[t] = cv::mxfp4_scale_byte(e);
  }
}

/// One thread per element of the bf16 dequant `bf` [G, N, K]: first[0] gets the least index of a
/// NaN or infinity, first[1] the least block (g, bi, bj order) holding one.
template <class = void>
QTL_KERNEL void nonfinite_bf16_kernel(bfloat16_t const* bf, cv::block_grid grid, unsigned long long* first) {
  std::int64_t const total = grid.elements();
  std::int64_t const nb = grid.n_blocks();
  std::int64_t const kb = grid.k_blocks();
  unsigned long long element = ~0ull, block = ~0ull;
  for (std::int64_t i = std::int64_t(blockIdx.x) * threads + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * threads) {
    if ((bf[i].bits & 0x7F80u) != 0x7F80u) {
      continue;
    }
    std::int64_t const row = i / grid.k;  // g * N + n
    auto const b = static_cast<unsigned long long>(((row / grid.n) * nb + (row % grid.n) / grid.block.n) * kb +
                                                   (i % grid.k) / grid.block.k);
    element = element == ~0ull ? static_cast<unsigned long long>(i) : element;
    block = b < block ? b : block;
  }
  store_first(first, element);
  store_first(first == nullptr ? nullptr : first + 1, block);
}

struct nvfp4_shared_global_scale_fn {
  QTL_DEVICE static float apply(float amax) { return cv::nvfp4_shared_global_scale_of(amax); }
};

inline bool grid_ok(cv::block_grid const& g) {
  return g.groups >= 0 && g.n >= 0 && g.k >= 0 && g.block.n > 0 && g.block.k > 0;
}

}  // namespace detail

/// `qtl::convert::block_quant_dequant` on the device: out [G,N,K] (float or bfloat16_t) =
/// fl(e4m3(q) * s), then (bf16) one RNE.
template <cv::dequant_output Out>
cudaError_t block_quant_dequant(std::uint8_t const* q, float const* s, cv::block_grid const& grid, Out* out,
                                cudaStream_t stream = nullptr) {
  if (!detail::grid_ok(grid) || (grid.elements() > 0 && (q == nullptr || s == nullptr || out == nullptr))) {
    return cudaErrorInvalidValue;
  }
  if (grid.elements() == 0) {
    return cudaSuccess;
  }
  unsigned const blocks = detail::grid_stride_blocks(grid.elements(), detail::threads, launch_policy::grid_stride_cap);
  return launch(detail::dequant_kernel<Out>, blocks, detail::threads, 0, stream, q, s, grid, out);
}

/// `qtl::convert::requant_weight_ue8m0<Recipe>` on the device (G matrices [N, K] in 128x128
/// blocks); in place is allowed (q_out == q, s_out == s).
template <cv::requant_recipe_type Recipe>
cudaError_t requant_weight_ue8m0(std::uint8_t const* q, float const* s, std::int64_t groups, std::int64_t n,
                                 std::int64_t k, std::uint8_t* q_out, float* s_out, cudaStream_t stream = nullptr) {
  cv::block_grid const grid{groups, n, k, cv::block_size{Recipe::block::n, Recipe::block::k}};
  if (!detail::grid_ok(grid) ||
      (grid.elements() > 0 && (q == nullptr || s == nullptr || q_out == nullptr || s_out == nullptr))) {
    return cudaErrorInvalidValue;
  }
  if (grid.elements() == 0) {
    return cudaSuccess;
  }
  unsigned const blocks = detail::grid_stride_blocks(grid.scales(), 1, launch_policy::grid_stride_cap);
  return launch(detail::requant_kernel<Recipe>, blocks, detail::threads, 0, stream, q, s, grid, q_out, s_out);
}

/// `qtl::convert::requant_weight_ue8m0_canonical<Recipe>` (the fixed point: two passes, the second
/// in place on the outputs).
template <cv::requant_recipe_type Recipe>
cudaError_t requant_weight_ue8m0_canonical(std::uint8_t const* q, float const* s, std::int64_t groups, std::int64_t n,
                                           std::int64_t k, std::uint8_t* q_out, float* s_out,
                                           cudaStream_t stream = nullptr) {
  if (cudaError_t const e = requant_weight_ue8m0<Recipe>(q, s, groups, n, k, q_out, s_out, stream); e != cudaSuccess) {
    return e;
  }
  return requant_weight_ue8m0<Recipe>(q_out, s_out, groups, n, k, q_out, s_out, stream);
}

/// `qtl::convert::per_block_cast_to_fp8<Rule>` on the device: x [G,N,K] float -> q, s [G,nb,kb].
template <cv::pow2_rule Rule>
cudaError_t per_block_cast_to_fp8(float const* x, cv::block_grid const& grid, std::uint8_t* q, float* s,
                                  cudaStream_t stream = nullptr) {
  if (!detail::grid_ok(grid) || (grid.elements() > 0 && (x == nullptr || q == nullptr || s == nullptr))) {
    return cudaErrorInvalidValue;
  }
  if (grid.elements() == 0) {
    return cudaSuccess;
  }
  unsigned const blocks = detail::grid_stride_blocks(grid.scales(), 1, launch_policy::grid_stride_cap);
  return launch(detail::cast_kernel<Rule>, blocks, detail::threads, 0, stream, x, grid, q, s);
}

namespace detail {
/// The packing launcher of both scale types: `cudaErrorInvalidValue` for a bad layout or null
/// pointers with words to write.
template <class Scale>
cudaError_t deepgemm_pack(Scale const* sf, cv::dg_packed_layout const& l, std::int32_t* out, unsigned long long* first,
                          cudaStream_t stream) {
  if (l.groups < 0 || l.mn < 1 || l.k_blocks < 1 || (l.groups > 0 && (sf == nullptr || out == nullptr))) {
    return cudaErrorInvalidValue;
  }
  if (l.words() == 0) {
    return cudaSuccess;
  }
  unsigned const blocks = grid_stride_blocks(l.words(), threads, launch_policy::grid_stride_cap);
  return launch(pack_kernel<Scale>, blocks, threads, 0, stream, sf, l, out, first);
}
}  // namespace detail

/// `qtl::convert::deepgemm_pack_ue8m0` on the device: sf [G, ceil(N/128), kb] -> out [G, P, A];
/// pad rows 0. `first_unpackable` (see the file comment) gets the index of the first scale that is
/// not a positive normal power of two, the one the host op names; null: the caller vouches.
inline cudaError_t deepgemm_pack_ue8m0(float const* sf, cv::dg_packed_layout const& l, std::int32_t* out,
                                       unsigned long long* first_unpackable = nullptr, cudaStream_t stream = nullptr) {
  return detail::deepgemm_pack(sf, l, out, first_unpackable, stream);
}

/// `qtl::convert::deepgemm_unpack_ue8m0` on the device: [G, P, A] -> sf [G, ceil(A/128), kb].
inline cudaError_t deepgemm_unpack_ue8m0(std::int32_t const* packed, std::int64_t groups, std::int64_t P,
                                         std::int64_t A, std::int64_t k_blocks, float* sf,
                                         cudaStream_t stream = nullptr) {
  if (P < 1 || A < 1 || groups < 0 || k_blocks < 4 * P - 3 || k_blocks > 4 * P ||
      (groups > 0 && (packed == nullptr || sf == nullptr))) {
    return cudaErrorInvalidValue;
  }
  std::int64_t const total = groups * ((A + 127) / 128) * k_blocks;
  if (total == 0) {
    return cudaSuccess;
  }
  unsigned const blocks = detail::grid_stride_blocks(total, detail::threads, launch_policy::grid_stride_cap);
  return launch(detail::unpack_kernel<>, blocks, detail::threads, 0, stream, packed, groups, P, A, k_blocks, sf);
}

/// `qtl::convert::fp8_block_to_mxfp4` on the device (K % 32 == 0): packed [G,N,K/2], scales
/// [G,N,K/32]. `first_nonfinite` (see the file comment) gets the index (g*N + n)*K + k of the first
/// element whose bf16 dequant is NaN or Inf, the one the host op names; null: the caller vouches.
inline cudaError_t fp8_block_to_mxfp4(std::uint8_t const* q, float const* s, cv::block_grid const& grid,
                                      std::uint8_t* packed, std::uint8_t* scales,
                                      unsigned long long* first_nonfinite = nullptr, cudaStream_t stream = nullptr) {
  if (!detail::grid_ok(grid) || grid.k % cv::mxfp4_block != 0 ||
      (grid.elements() > 0 && (q == nullptr || s == nullptr || packed == nullptr || scales == nullptr))) {
    return cudaErrorInvalidValue;
  }
  std::int64_t const total = grid.elements() / cv::mxfp4_block;
  if (total == 0) {
    return cudaSuccess;
  }
  unsigned const blocks = detail::grid_stride_blocks(total, detail::threads, launch_policy::grid_stride_cap);
  return launch(detail::mxfp4_kernel<>, blocks, detail::threads, 0, stream, q, s, grid, packed, scales,
                first_nonfinite);
}

/// The global scale of `qtl::convert::nvfp4_shared_global_scale` from the bf16 dequant `bf16`
/// [rows, K] of every tensor that shares it (w1 and w3 stacked): fl(1/fl(amax/2688)) into
/// `*global_scale` (a device float). NaN is ignored by the device amax (the host refuses it).
inline cudaError_t nvfp4_shared_global_scale(view2d<bfloat16_t const> bf16, float* global_scale,
                                             cudaStream_t stream = nullptr) {
  if (global_scale == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t const e = qtl::cuda::fp8_amax(bf16, global_scale, stream); e != cudaSuccess) {
    return e;
  }
  return launch(qtl::cuda::detail::map_scalar_kernel<detail::nvfp4_shared_global_scale_fn>, 1, 1, 0, stream,
                global_scale);
}

/// `qtl::convert::fp8_block_to_nvfp4` on the device (K % 16 == 0): the bf16 dequant into
/// `workspace` [G*N*K] (its result, for `nvfp4_shared_global_scale`), then NVFP4 with the device
/// float `*global_scale` into packed [G,N,K/2] and scales [G,N,K/16] (linear). Not verified
/// against flashinfer's quantizer (see the host version). `first_nonfinite`, two device words set
/// to ~0 (see the file comment), gets the index (g*N + n)*K + k of the first element whose bf16
/// dequant is NaN or Inf (what the host op names) and the index (g*nb + bi)*kb + bj of the first
/// block holding one (what `fp8_block_bf16_amax` names); null: the caller vouches (the host's
/// `checked`).
inline cudaError_t fp8_block_to_nvfp4(std::uint8_t const* q, float const* s, cv::block_grid const& grid,
                                      float const* global_scale, float4_e2m1x2_t* packed, float8_e4m3fn_t* scales,
                                      bfloat16_t* workspace, unsigned long long* first_nonfinite = nullptr,
                                      cudaStream_t stream = nullptr) {
  if (!detail::grid_ok(grid) || grid.k % 16 != 0 || global_scale == nullptr ||
      (grid.elements() > 0 && (packed == nullptr || scales == nullptr || workspace == nullptr))) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t const e = block_quant_dequant<bfloat16_t>(q, s, grid, workspace, stream); e != cudaSuccess) {
    return e;
  }
  if (first_nonfinite != nullptr && grid.elements() > 0) {
    unsigned const blocks =
        detail::grid_stride_blocks(grid.elements(), detail::threads, launch_policy::grid_stride_cap);
    if (cudaError_t const e = launch(detail::nonfinite_bf16_kernel<>, blocks, detail::threads, 0, stream,
                                     static_cast<bfloat16_t const*>(workspace), grid, first_nonfinite);
        e != cudaSuccess) {
      return e;
    }
  }
  std::int64_t const rows = grid.groups * grid.n;
  return qtl::cuda::block_quantize<qtl::nvfp4, qtl::layout_linear, bfloat16_t>(
      make_view(static_cast<bfloat16_t const*>(workspace), rows, grid.k), make_view(packed, rows, grid.k / 2), scales,
      global_scale, stream);
}

}  // namespace qtl::cuda::convert
