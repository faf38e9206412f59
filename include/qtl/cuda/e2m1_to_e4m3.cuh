#pragma once
/// \file
/// The CUDA kernel and stream-ordered launcher of DeepSeek-V4's lossless MXFP4 -> FP8-block cast,
/// `qtl::cuda::convert::cast_e2m1fn_to_e4m3fn` (the host op: <qtl/e2m1_to_e4m3.hpp>). The kernel
/// runs the element functions the host op runs (`lossless_block_scale`, `e2m1_to_e4m3`,
/// `e2m1_to_e4m3_exact` of <qtl/element/e2m1_to_e4m3.hpp>), so its output equals the host's bit
/// for bit, in the same layouts:
///
///   x          [G, N, K/2]   e2m1 codes, element 2j in the low nibble of byte j
///   scale      [G, N, K/32]  E8M0 codes, one per 1x32 group of a row
///   out        [G, N, K]     e4m3fn codes
///   out_scale  [G, ceil(N/BN), ceil(K/BK)]  E8M0 codes
///
/// One launch for a whole stack of experts: one CUDA block per output block (of any matrix of the
/// stack, grid-stride past the cap); its threads take the block's 1x32 groups, find the largest
/// scale code by a shared-memory max, then each casts its groups (16 bytes in, 32 out).
///
/// Blocks that do not cast exactly: the host op refuses them before writing anything, which a
/// kernel cannot do (it would need a pass and a synchronisation). Here they are written anyway
/// (their bytes are unspecified) and, when `first_inexact` is not null (a device word the caller
/// set to ~0), the least index of such a block (g, bi, bj order: the one the host op names) is
/// stored there by `atomicMin`: a block with a NaN scale (0xFF), or with a nonzero element that
/// `e2m1_to_e4m3_exact` rejects. That every block casts exactly is the launcher's documented
/// precondition; a caller that cannot vouch for it reads the index back and names the block from
/// a host copy of its rows, with the host op's check.
/// The launcher returns `cudaErrorInvalidValue` for the shapes the host op rejects (K or BK not a
/// multiple of 32, a block that is not positive) and for null pointers with a non-empty grid,
/// before anything is enqueued; otherwise the launch status. It does not synchronise.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/e2m1_to_e4m3.cuh> needs nvcc; host code includes <qtl/e2m1_to_e4m3.hpp>"
#endif  // ^^^ !__CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>

#include <qtl/convert.hpp>
#include <qtl/cuda/convert.cuh>
#include <qtl/cuda/launch.cuh>
#include <qtl/element/e2m1_to_e4m3.hpp>
#include <qtl/macros.hpp>

namespace qtl::cuda::convert {

namespace detail {

/// One CUDA block per output block `b` (g, bi, bj order): its groups' largest scale code, its
/// scale, then each group's 32 elements (see the file comment).
template <class = void>
QTL_KERNEL void e2m1_cast_kernel(std::uint8_t const* x, std::uint8_t const* scale, cv::block_grid grid,
                                 std::uint8_t* out, std::uint8_t* out_scale, unsigned long long* first_inexact) {
  __shared__ std::uint32_t red[threads];
  constexpr int gs = cv::e2m1_scale_group;
  std::int64_t const row_groups = grid.k / gs;
  std::int64_t const blocks = grid.scales();
  for (std::int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    block_at const blk = block_at::of(grid, b);
    std::int64_t const cols = (blk.k1 - blk.k0) / gs;  // the block's groups per row (k0, k1: multiples of 32)
    std::int64_t const items = (blk.n1 - blk.n0) * cols;
    auto const group = [&](std::int64_t t) {  // item t's index in the [G*N, K/32] scales
      return (blk.g * grid.n + blk.n0 + t / cols) * row_groups + blk.k0 / gs + t % cols;
    };
    std::uint32_t local = 0;
    for (std::int64_t t = threadIdx.x; t < items; t += threads) {
      std::uint32_t const e = scale[group(t)];
      local = e > local ? e : local;
    }
    auto const emax = static_cast<std::uint8_t>(block_max(local, red));
    std::uint8_t const bs = cv::lossless_block_scale(emax);
    bool bad = emax == 0xFF;
    for (std::int64_t t = threadIdx.x; t < items; t += threads) {
      std::int64_t const gi = group(t);
      std::uint8_t const e = scale[gi];
      int const shift = int(e) - int(bs);
      std::uint8_t const* xg = x + gi * (gs / 2);
      std::uint8_t* og = out + gi * gs;
      for (int j = 0; j < gs / 2; ++j) {
        std::uint8_t const byte = xg[j];
        for (int h = 0; h < 2; ++h) {
          auto const code = static_cast<std::uint8_t>(h == 0 ? byte & 15u : byte >> 4);
          bad = bad || !cv::e2m1_to_e4m3_exact(code, e, emax);
          // below the least shift only zeros are exact: the host's table there is all zeros
          og[2 * j + h] = shift < cv::lossless_min_shift ? std::uint8_t{0} : cv::e2m1_to_e4m3(code, shift);
        }
      }
    }
    store_first(first_inexact, bad ? static_cast<unsigned long long>(b) : ~0ull);
    if (threadIdx.x == 0) {
      out_scale[b] = bs;
    }
  }
}

}  // namespace detail

/// `qtl::convert::cast_e2m1fn_to_e4m3fn` on the device, all G matrices of the stack in one
/// launch on `stream`: `x` [G, N, K/2] and `scale` [G, N, K/32] -> `out` [G, N, K] and `out_scale`
/// [G, ceil(N/BN), ceil(K/BK)] (device pointers; `grid.k` the logical K). Precondition: every
/// block casts exactly (the host op's check); `first_inexact`, when not null, gets the index of the
/// first block that does not (see the file comment).
inline cudaError_t cast_e2m1fn_to_e4m3fn(std::uint8_t const* x, std::uint8_t const* scale, cv::block_grid const& grid,
                                         std::uint8_t* out, std::uint8_t* out_scale,
                                         unsigned long long* first_inexact = nullptr, cudaStream_t stream = nullptr) {
  if (!detail::grid_ok(grid) || grid.k % cv::e2m1_scale_group != 0 || grid.block.k % cv::e2m1_scale_group != 0 ||
      (grid.elements() > 0 && (x == nullptr || scale == nullptr || out == nullptr || out_scale == nullptr))) {
    return cudaErrorInvalidValue;
  }
  if (grid.elements() == 0) {
    return cudaSuccess;
  }
  unsigned const blocks = detail::grid_stride_blocks(grid.scales(), 1, launch_policy::grid_stride_cap);
  return launch(detail::e2m1_cast_kernel<>, blocks, detail::threads, 0, stream, x, scale, grid, out, out_scale,
                first_inexact);
}

}  // namespace qtl::cuda::convert
