#pragma once
/// \file
/// The device side of the simulated CUDA device (test-only, `QTL_CUDA_SIM`): the built-in
/// variables, `__syncthreads`, warp shuffles and votes, atomics and the `_rn` float intrinsics,
/// for g++ compiling `qtl/cuda/*.cuh` and `test/cuda/*_test.cu` into host programs. Included by
/// `qtl/macros.hpp` under `QTL_CUDA_SIM` (so element code sees the intrinsics) and by the shim's
/// `<cuda_runtime.h>`. The scheduler behind it is `cuda_sim/sim.cpp`; README.md says what it
/// models and what it cannot check.
///
/// A kernel runs one block at a time; the threads of a block are fibers switched only where CUDA
/// threads must meet (a barrier, a shuffle, a vote), so ordinary code between them runs at host
/// speed. `__shared__` variables are function-local statics (one block runs at a time).

#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

// ---- execution-space keywords (g++ reads them as nothing) ---------------------------------------
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __restrict__ __restrict

// ---- vector types (the subset QTL uses, laid out as CUDA's) -------------------------------------
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct uint3 {
  unsigned x, y, z;
};
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }

/// Launch dimensions, as CUDA's (unspecified components are 1).
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return {x, y, z}; }
};

namespace cuda_sim {

/// True while a simulated device thread runs (the question element code asks through
/// `QTL_ON_DEVICE()` instead of `#if __CUDA_ARCH__`).
bool on_device() noexcept;

/// A barrier of the whole block at `site` (`__syncthreads`).
void barrier(std::source_location site);

/// What a warp collective does with the lanes' values.
enum class warp_op : int { shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, sync };
/// A warp collective over the lanes of `mask` at `site`: every lane named in `mask` must arrive
/// at the same site with the same mask; `value` (8 bytes) and `arg`/`width` are this lane's.
std::uint64_t warp_collective(warp_op op, unsigned mask, std::uint64_t value, int arg, int width,
                              std::source_location site);

/// Float32 arithmetic rounded once, as the device's `_rn` instructions: any NaN result is the
/// canonical 0x7fffffff, and in FTZ mode (`-use_fast_math`'s `.ftz` forms) subnormal inputs and
/// results are flushed to a zero of their sign.
float fadd_rn(float a, float b);
float fsub_rn(float a, float b);
float fmul_rn(float a, float b);
float fdiv_rn(float a, float b);
float fmaf_rn(float a, float b, float c);
float frcp_rn(float a);
/// FTZ mode on or off (off by default; the `-use_fast_math` tests turn it on).
void set_flush_to_zero(bool on);
bool flush_to_zero();

/// The cap applied to grid-stride grids (`qtl::cuda::detail::grid_stride_blocks`): by default the
/// launcher's own cap, lowered to `QTL_CUDA_SIM_GRID_CAP` (environment) or `set_grid_cap` so that
/// the loops past the cap run quickly.
long long grid_cap(long long cap);
void set_grid_cap(long long cap);  ///< 0 restores the launchers' caps

/// Reports a misuse of the simulated device (with where it happened) and aborts.
[[noreturn]] void fail(char const* what, std::source_location site);

/// The global barrier epoch (incremented by every completed barrier and every block start): two
/// accesses with the same epoch are unordered unless they are in the same thread.
std::uint64_t epoch() noexcept;
/// This thread's index in its block (x fastest) and the block's thread count.
int linear_thread() noexcept;
int block_threads() noexcept;

template <class T>
std::uint64_t to_word(T const& v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "cuda_sim: a shuffle moves at most 8 bytes");
  std::uint64_t w = 0;
  std::memcpy(&w, &v, sizeof(T));
  return w;
}
template <class T>
T from_word(std::uint64_t w) {
  T v;
  std::memcpy(&v, &w, sizeof(T));
  return v;
}

}  // namespace cuda_sim

// The built-in variables of the running simulated thread (set by the scheduler at every switch).
extern thread_local constinit uint3 threadIdx;
extern thread_local constinit uint3 blockIdx;
extern thread_local constinit dim3 blockDim;
extern thread_local constinit dim3 gridDim;
inline constexpr int warpSize = 32;

inline void __syncthreads(std::source_location site = std::source_location::current()) { cuda_sim::barrier(site); }
inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location site = std::source_location::current()) {
  cuda_sim::warp_collective(cuda_sim::warp_op::sync, mask, 0, 0, 32, site);
}

template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32,
              std::source_location site = std::source_location::current()) {
  return cuda_sim::from_word<T>(
      cuda_sim::warp_collective(cuda_sim::warp_op::shfl_idx, mask, cuda_sim::to_word(v), src, width, site));
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32,
                 std::source_location site = std::source_location::current()) {
  return cuda_sim::from_word<T>(cuda_sim::warp_collective(cuda_sim::warp_op::shfl_up, mask, cuda_sim::to_word(v),
                                                          static_cast<int>(delta), width, site));
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32,
                   std::source_location site = std::source_location::current()) {
  return cuda_sim::from_word<T>(cuda_sim::warp_collective(cuda_sim::warp_op::shfl_down, mask, cuda_sim::to_word(v),
                                                          static_cast<int>(delta), width, site));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32,
                  std::source_location site = std::source_location::current()) {
  return cuda_sim::from_word<T>(
      cuda_sim::warp_collective(cuda_sim::warp_op::shfl_xor, mask, cuda_sim::to_word(v), lane_mask, width, site));
}
inline unsigned __ballot_sync(unsigned mask, int pred, std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(
      cuda_sim::warp_collective(cuda_sim::warp_op::ballot, mask, pred != 0 ? 1u : 0u, 0, 32, site));
}
inline int __any_sync(unsigned mask, int pred, std::source_location site = std::source_location::current()) {
  return __ballot_sync(mask, pred, site) != 0;
}
inline int __all_sync(unsigned mask, int pred, std::source_location site = std::source_location::current()) {
  return __ballot_sync(mask, pred, site) == (__ballot_sync(mask, 1, site) & mask);
}

// ---- atomics: fibers switch only at barriers and warp collectives, so a read-modify-write is atomic
template <class T>
T atomicAdd(T* p, T v) {
  T const old = *p;
  *p = static_cast<T>(old + v);
  return old;
}
template <class T>
T atomicMax(T* p, T v) {
  static_assert(std::is_integral_v<T>, "cuda_sim: atomicMax takes integers");
  T const old = *p;
  *p = old > v ? old : v;
  return old;
}
template <class T>
T atomicMin(T* p, T v) {
  static_assert(std::is_integral_v<T>, "cuda_sim: atomicMin takes integers");
  T const old = *p;
  *p = old < v ? old : v;
  return old;
}
template <class T>
T atomicExch(T* p, T v) {
  T const old = *p;
  *p = v;
  return old;
}
template <class T>
T atomicCAS(T* p, T compare, T v) {
  T const old = *p;
  if (old == compare) {
    *p = v;
  }
  return old;
}

// ---- float intrinsics ---------------------------------------------------------------------------
inline float __fadd_rn(float a, float b) { return cuda_sim::fadd_rn(a, b); }
inline float __fsub_rn(float a, float b) { return cuda_sim::fsub_rn(a, b); }
inline float __fmul_rn(float a, float b) { return cuda_sim::fmul_rn(a, b); }
inline float __fdiv_rn(float a, float b) { return cuda_sim::fdiv_rn(a, b); }
inline float __fmaf_rn(float a, float b, float c) { return cuda_sim::fmaf_rn(a, b, c); }
inline float __frcp_rn(float a) { return cuda_sim::frcp_rn(a); }
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline int __float_as_int(float f) {
  int u;
  std::memcpy(&u, &f, 4);
  return u;
}
