#pragma once
/// \file
/// The simulated device's `<cuda_runtime.h>` (test-only, `QTL_CUDA_SIM`): the part of the CUDA
/// runtime API QTL's kernels, launchers and tests use, over host memory. Device memory is heap
/// memory whose allocations are tracked (a copy, set or sort naming memory that is not a device
/// allocation of the right size is an error) and, under AddressSanitizer, poisoned past their
/// end. Work is executed when it is enqueued, so every stream is trivially ordered; launches are
/// checked against the limits of an sm_90 device. See README.md.

#if !defined(QTL_CUDA_SIM)
#error "test/support/cuda_sim is the simulated device: compile with -DQTL_CUDA_SIM=1"
#endif  // ^^^ QTL_CUDA_SIM ^^^

#include <cstddef>
#include <cuda_sim/device.hpp>
#include <functional>
#include <source_location>
#include <tuple>
#include <utility>

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
};
using cudaError_t = cudaError;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;

struct cudaLaunchAttribute;
/// As CUDA's: the launch of `cudaLaunchKernelEx` (attributes are not modelled: none may be given).
struct cudaLaunchConfig_t {
  dim3 gridDim;
  dim3 blockDim;
  std::size_t dynamicSmemBytes = 0;
  cudaStream_t stream = nullptr;
  cudaLaunchAttribute* attrs = nullptr;
  unsigned numAttrs = 0;
};

char const* cudaGetErrorString(cudaError_t e);
char const* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaGetDevice(int* d);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaDeviceSynchronize();

cudaError_t cudaMalloc(void** p, std::size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocAsync(void** p, std::size_t bytes, cudaStream_t s);
cudaError_t cudaFreeAsync(void* p, cudaStream_t s);
template <class T>
cudaError_t cudaMalloc(T** p, std::size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
template <class T>
cudaError_t cudaMallocAsync(T** p, std::size_t bytes, cudaStream_t s) {
  return cudaMallocAsync(reinterpret_cast<void**>(p), bytes, s);
}
cudaError_t cudaMemcpy(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s = nullptr);
cudaError_t cudaMemset(void* dst, int value, std::size_t bytes);
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t s = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

namespace cuda_sim {

/// The bytes [p, p + bytes) lie inside one live device allocation (bytes may be 0).
bool is_device_range(void const* p, std::size_t bytes) noexcept;
/// Runs `body` as every thread of the grid (validated as sm_90 would, the last error set as a
/// real launch sets it) and returns the launch's status.
cudaError_t run_grid(cudaLaunchConfig_t const& config, std::function<void()> const& body, std::source_location site);
/// Sets the status `cudaGetLastError` returns next (as a failing runtime call does).
cudaError_t record_error(cudaError_t e);

}  // namespace cuda_sim

/// As CUDA's typed `cudaLaunchKernelEx`: the arguments are converted to the kernel's parameter
/// types once (the kernel's parameter buffer), and every simulated thread gets its own copy.
template <class... Params, class... Args>
cudaError_t cudaLaunchKernelEx(cudaLaunchConfig_t const* config, void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "cudaLaunchKernelEx: wrong number of kernel arguments");
  if (config == nullptr || kernel == nullptr || config->numAttrs != 0) {
    return cuda_sim::record_error(cudaErrorInvalidValue);
  }
  std::tuple<std::decay_t<Params>...> const params(std::forward<Args>(args)...);
  return cuda_sim::run_grid(
      *config,
      [&] {
        std::tuple<std::decay_t<Params>...> copy = params;
        std::apply(kernel, copy);
      },
      std::source_location::current());
}
