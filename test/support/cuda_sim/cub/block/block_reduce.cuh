#pragma once
/// \file
/// The simulated device's `cub::BlockReduce` and `cub::WarpReduce` (test-only, `QTL_CUDA_SIM`):
/// the calls QTL's kernels make, written for the shim so that misuse is an error rather than a
/// race — a block whose size is not the one the type names, and `TempStorage` reused before a
/// `__syncthreads()` separates the new call from the reads of the last one. As in CUB, the
/// result is defined in thread 0 (lane 0 of each logical warp) only; the others get a partial.

#include <cuda_runtime.h>

#include <source_location>

namespace cub {

template <class T, int BlockDimX, int Algorithm = 0, int BlockDimY = 1, int BlockDimZ = 1>
class BlockReduce {
  static constexpr int threads = BlockDimX * BlockDimY * BlockDimZ;

 public:
  struct TempStorage {
    T slot[threads];
    std::uint64_t read_epoch;  // the epoch in which thread 0 last read the slots (0: never)
    bool used;
  };

  explicit BlockReduce(TempStorage& storage) : s_(storage) {}

  template <class Op>
  T Reduce(T v, Op op, std::source_location site = std::source_location::current()) {
    return reduce(v, op, threads, site);
  }
  template <class Op>
  T Reduce(T v, Op op, int num_valid, std::source_location site = std::source_location::current()) {
    return reduce(v, op, num_valid, site);
  }
  T Sum(T v, std::source_location site = std::source_location::current()) {
    return reduce(
        v, [](T a, T b) { return static_cast<T>(a + b); }, threads, site);
  }

 private:
  template <class Op>
  T reduce(T v, Op op, int num_valid, std::source_location site) {
    if (cuda_sim::block_threads() != threads) {
      cuda_sim::fail("cub::BlockReduce: the block's thread count differs from the type's", site);
    }
    if (s_.used && s_.read_epoch == cuda_sim::epoch()) {
      cuda_sim::fail("cub::BlockReduce: TempStorage reused without a __syncthreads() after its last use", site);
    }
    int const t = cuda_sim::linear_thread();
    s_.slot[t] = v;
    cuda_sim::barrier(site);
    if (t != 0) {
      return v;
    }
    s_.used = true;
    s_.read_epoch = cuda_sim::epoch();
    T acc = s_.slot[0];
    for (int i = 1; i < num_valid && i < threads; ++i) {
      acc = op(acc, s_.slot[i]);
    }
    return acc;
  }
  TempStorage& s_;
};

/// A reduction within logical warps of `LogicalWarpThreads` lanes (a power of two up to 32), by
/// down-shuffles over the logical warp's lanes (CUB's order): lane 0 gets the total.
template <class T, int LogicalWarpThreads = 32>
class WarpReduce {
  static_assert(LogicalWarpThreads > 0 && LogicalWarpThreads <= 32 &&
                    (LogicalWarpThreads & (LogicalWarpThreads - 1)) == 0,
                "cuda_sim cub::WarpReduce: logical warps are powers of two up to 32 lanes");

 public:
  struct TempStorage {
    unsigned char unused;
  };
  explicit WarpReduce(TempStorage&) {}

  template <class Op>
  T Reduce(T v, Op op, std::source_location site = std::source_location::current()) {
    int const lane = cuda_sim::linear_thread() % 32;
    int const first = lane / LogicalWarpThreads * LogicalWarpThreads;
    unsigned const mask = LogicalWarpThreads == 32 ? 0xffffffffu : ((1u << LogicalWarpThreads) - 1u) << first;
    int const l = lane - first;
    for (int off = 1; off < LogicalWarpThreads; off *= 2) {
      T const other = cuda_sim::from_word<T>(cuda_sim::warp_collective(
          cuda_sim::warp_op::shfl_down, mask, cuda_sim::to_word(v), off, LogicalWarpThreads, site));
      if (l + off < LogicalWarpThreads) {
        v = op(v, other);
      }
    }
    return v;
  }
  T Sum(T v, std::source_location site = std::source_location::current()) {
    return Reduce(
        v, [](T a, T b) { return static_cast<T>(a + b); }, site);
  }
};

}  // namespace cub
