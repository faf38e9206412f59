// The device table (device.hpp) of the CUDA build: the runtime calls and the launchers of
// include/qtl/cuda/. The test build compiles this file with g++ against the simulated device
// (QTL_CUDA_SIM), with qtl._sim from sim_producer.cpp as its extra bindings.
// Only the kernels the bindings call are instantiated here: keep the dispatch sets the host
// bindings' (one instantiation per supported width or type).

#include <cuda_runtime.h>

#include <qtl/cuda/pack.cuh>
#include <qtl/cuda/pack_nd.cuh>
#include <qtl/dispatch.hpp>
#include <qtl/pack_nd.hpp>

#include "device.hpp"

namespace qtl::py::device {
#ifdef QTL_CUDA_SIM
void bind_sim(void* module);  // sim_producer.cpp
/// The stream of the last launch, for qtl._sim.last_stream() (the simulator runs work at enqueue).
stream_t last_stream = nullptr;
#endif

namespace {

cudaStream_t as_stream(stream_t s) {
#ifdef QTL_CUDA_SIM
  last_stream = s;
#endif
  return static_cast<cudaStream_t>(s);
}

int current_device() {
  int d = -1;
  return cudaGetDevice(&d) == cudaSuccess ? d : -1;
}

int device_malloc(void** p, std::size_t bytes) { return static_cast<int>(cudaMalloc(p, bytes == 0 ? 1 : bytes)); }

void device_free(void* p) { static_cast<void>(cudaFree(p)); }

int copy_to_host(void* dst, void const* src, std::size_t bytes, stream_t s) {
  auto const stream = static_cast<cudaStream_t>(s);
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) {
    e = cudaStreamSynchronize(stream);
  }
  return static_cast<int>(e);
}

char const* error_string(int err) { return cudaGetErrorString(static_cast<cudaError_t>(err)); }

int pack(pack_op op, int bits, view2d<std::int32_t const> in, view2d<std::int32_t> out, stream_t s) {
  auto const stream = as_stream(s);
  return static_cast<int>(qtl::dispatch_bits<1, 2, 4, 8, 16, 32>(bits, [&]<int B>() -> cudaError_t {
    switch (op) {
      case pack_op::pack_cols: return qtl::cuda::pack_cols<B>(in, out, stream);
      case pack_op::pack_rows: return qtl::cuda::pack_rows<B>(in, out, stream);
      case pack_op::unpack_cols: return qtl::cuda::unpack_cols<B>(in, out, stream);
      case pack_op::unpack_rows: return qtl::cuda::unpack_rows<B>(in, out, stream);
      case pack_op::awq_pack:
        if constexpr (B == 4 || B == 8) {
          return qtl::cuda::awq_pack<B>(in, out, stream);
        }
        break;
    }
    return cudaErrorInvalidValue;  // awq_pack of another width: the binding refuses it first
  }));
}

int pack_dim(bool packing, scalar_type t, view3d<std::int32_t const> in, view3d<std::int32_t> out, stream_t s) {
  auto const stream = as_stream(s);
  return static_cast<int>(qtl::dispatch_pack_type(t, [&]<scalar_type T>(scalar_constant<T>) {
    return packing ? qtl::cuda::pack_quantized_values_into_int32<T>(in, out, stream)
                   : qtl::cuda::unpack_quantized_values_into_int32<T>(in, out, stream);
  }));
}

}  // namespace

backend const* get() {
  static constexpr backend table{
#ifdef QTL_CUDA_SIM
      .name = "cuda-sim",
#else
      .name = "cuda",
#endif
      .current_device = &current_device,
      .malloc = &device_malloc,
      .free = &device_free,
      .copy_to_host = &copy_to_host,
      .error_string = &error_string,
      .pack = &pack,
      .pack_dim = &pack_dim,
#ifdef QTL_CUDA_SIM
      .bind_extras = &bind_sim,
#else
      .bind_extras = nullptr,
#endif
  };
  return &table;
}

}  // namespace qtl::py::device
