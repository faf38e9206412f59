#pragma once
/// \file
/// The one launch path of QTL's kernels, and the grid helpers the launchers size their grids with.
///
/// `launch(kernel, grid, block, shared_bytes, stream, args...)` checks the configuration against
/// the limits every CUDA device since sm_30 has, then launches with `cudaLaunchKernelEx`, whose
/// return value is this launch's own status: unlike `cudaGetLastError()` after `<<<>>>`, it neither
/// returns nor clears an error some earlier, unrelated call left behind.
///
///     threads per block   block.x * block.y * block.z <= 1024, block.z <= 64
///     grid                1 <= grid.x <= 2^31 - 1, 1 <= grid.y, grid.z <= 65535
///     dynamic shared      <= 48 KiB (more needs cudaFuncSetAttribute, which no QTL kernel uses)
///
/// `launch_policy` names the block size and the grid caps every launcher uses (as CUB's agent
/// policies name a kernel's tuning once). `grid_stride_blocks(items, per_block, cap)` is the block
/// count of a grid-stride kernel: enough blocks for `items`, at least 1, at most `cap` (the kernel
/// loops past it). Under the simulated device (`QTL_CUDA_SIM`) a test may lower every cap, so that
/// the loops past it run on small inputs. `detail::team_max` is the warp-shuffle max the
/// quantization kernels reduce a block or group with.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#error "<qtl/cuda/launch.cuh> needs nvcc; host code includes the host headers"
#endif  // ^^^ __CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>
#include <utility>

namespace qtl::cuda {

/// The launch limits of every CUDA device QTL targets (see the file comment).
struct launch_limits {
  static constexpr unsigned threads_per_block = 1024;
  static constexpr unsigned block_z = 64;
  static constexpr unsigned long long grid_x = 2147483647ull;
  static constexpr unsigned grid_yz = 65535;
  static constexpr std::size_t dynamic_shared_bytes = 48 * 1024;
};

/// The launch policy of QTL's kernels: one block size, and the caps past which a grid-stride
/// kernel loops instead of launching more blocks (each far above what fills any device).
struct launch_policy {
  /// Threads per block of the 1-D kernels (and of the column blocks of the 2-D ones).
  static constexpr int threads = 256;
  /// The most blocks of a 1-D grid-stride kernel of the fp4, fp8 and converter launchers.
  static constexpr index_t grid_stride_cap = index_t{launch_limits::grid_yz} * 4;
  /// The most blocks of the grid-stride kernels of the quantize, block-scale and MoE launchers.
  static constexpr index_t wide_grid_stride_cap = index_t{1} << 20;
  /// The most blocks of a kernel with one block (or one warp of a block) per row or scale block.
  static constexpr index_t row_cap = launch_limits::grid_yz;
};

/// cudaErrorInvalidConfiguration if `grid`, `block` or `shared_bytes` break `launch_limits`.
inline cudaError_t check_launch(dim3 grid, dim3 block, std::size_t shared_bytes) {
  unsigned long long const threads = 1ull * block.x * block.y * block.z;
  bool const ok = grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= launch_limits::grid_x &&
                  grid.y <= launch_limits::grid_yz && grid.z <= launch_limits::grid_yz && threads >= 1 &&
                  threads <= launch_limits::threads_per_block && block.z <= launch_limits::block_z &&
                  shared_bytes <= launch_limits::dynamic_shared_bytes;
  return ok ? cudaSuccess : cudaErrorInvalidConfiguration;
}

/// Launches `kernel<<<grid, block, shared_bytes, stream>>>(args...)` after `check_launch`; returns
/// the first failure (of the check, else of this launch) or cudaSuccess.
template <class... Params, class... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream,
                   Args&&... args) {
  if (cudaError_t const e = check_launch(grid, block, shared_bytes); e != cudaSuccess) {
    return e;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = nullptr;
  config.numAttrs = 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

namespace detail {

/// Blocks of a grid-stride kernel over `items` work items, `per_block` per block: at least 1, at
/// most `cap` (lowered by the simulated device's grid-cap hook under QTL_CUDA_SIM).
inline unsigned grid_stride_blocks(index_t items, index_t per_block, index_t cap) {
#if defined(QTL_CUDA_SIM) && !defined(__CUDACC__)
  cap = static_cast<index_t>(::cuda_sim::grid_cap(cap));
#endif  // ^^^ QTL_CUDA_SIM ^^^
  index_t const blocks = items > 0 ? (items + per_block - 1) / per_block : 1;
  return static_cast<unsigned>(blocks < cap ? blocks : cap);
}

/// True when the view `v` has elements but no data: a launcher's refusal of a null pointer.
template <class V>
bool null_with_data(V const& v) {
  return v.size() != 0 && v.data == nullptr;
}

/// This thread's first index of a 1-D grid-stride loop, and the loop's step:
/// `for (index_t i = grid_thread(); i < n; i += grid_step())`.
QTL_DEVICE index_t grid_thread() { return static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
QTL_DEVICE index_t grid_step() { return static_cast<index_t>(gridDim.x) * blockDim.x; }

/// `f(r, c)` for this thread's cells of a grid-stride loop over a `rows` x `cols` grid, taken in
/// row-major order (a warp takes consecutive columns).
template <class F>
QTL_DEVICE void grid_stride_cells(index_t rows, index_t cols, F&& f) {
  for (index_t t = grid_thread(); t < rows * cols; t += grid_step()) {
    f(t / cols, t % cols);
  }
}

/// The max of `m` over the `Team` lanes (a power of two up to 32) of its aligned lane group, in
/// every lane of it: a butterfly of `__shfl_xor_sync`. Every lane of the warp must call it.
template <int Team>
QTL_DEVICE std::uint32_t team_max(std::uint32_t m) {
  static_assert(Team >= 1 && Team <= 32 && (Team & (Team - 1)) == 0, "qtl::cuda: a team is 1, 2, 4, ..., 32 lanes");
  QTL_UNROLL
  for (int off = Team / 2; off > 0; off /= 2) {
    std::uint32_t const other = __shfl_xor_sync(0xffffffffu, m, off);
    m = other > m ? other : m;
  }
  return m;
}

}  // namespace detail

}  // namespace qtl::cuda
