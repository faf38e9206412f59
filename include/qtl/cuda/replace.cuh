#pragma once
/// \file
/// The device-memory counterpart of qtl/replace.hpp: named device buffers replaced in place when
/// dtype and byte size match (the device address is kept, so pointers captured by kernels or CUDA
/// graphs stay valid) and re-allocated otherwise. Functions return `cudaError_t` and never throw
/// (an unknown name is `cudaErrorInvalidValue`). Copies are enqueued on the given stream;
/// re-allocation uses `cudaMallocAsync`/`cudaFreeAsync` on that stream.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/replace.cuh> needs nvcc; host code includes <qtl/replace.hpp>"
#endif  // ^^^ __CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <qtl/replace.hpp>
#include <qtl/view.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace qtl::cuda {

/// A device buffer with its dtype tag and shape.
struct device_parameter {
  std::string dtype;
  std::vector<index_t> shape;
  void* data = nullptr;
  std::size_t nbytes = 0;
};

/// Named device parameters; owns the buffers (freed in the destructor, synchronously: the buffers
/// come from `cudaMallocAsync`, and `cudaFree` of stream-ordered memory needs the work using it done).
class device_parameter_map {
 public:
  device_parameter_map() = default;
  device_parameter_map(device_parameter_map const&) = delete;
  device_parameter_map& operator=(device_parameter_map const&) = delete;
  ~device_parameter_map() {
    cudaDeviceSynchronize();
    for (auto& [name, p] : params_) {
      cudaFree(p.data);
    }
  }

  /// Adds `name` as a device copy of the contiguous device view `value`.
  template <class T, int R>
  cudaError_t register_parameter(std::string const& name, view<T, R> value, cudaStream_t stream) {
    if (!value.is_contiguous()) {
      return cudaErrorInvalidValue;
    }
    device_parameter p;
    p.dtype = std::string(dtype_tag<T>());
    p.shape.assign(value.extent, value.extent + R);
    p.nbytes = static_cast<std::size_t>(value.size()) * sizeof(T);
    if (cudaError_t e = cudaMallocAsync(&p.data, p.nbytes > 0 ? p.nbytes : 1, stream); e != cudaSuccess) {
      return e;
    }
    if (cudaError_t e = cudaMemcpyAsync(p.data, value.data, p.nbytes, cudaMemcpyDeviceToDevice, stream); e != cudaSuccess) {
      cudaFreeAsync(p.data, stream);
      return e;
    }
    if (auto it = params_.find(name); it != params_.end()) {
      cudaFreeAsync(it->second.data, stream);
    }
    params_[name] = std::move(p);
    return cudaSuccess;
  }
  device_parameter const* find(std::string_view name) const {
    auto const it = params_.find(name);
    return it == params_.end() ? nullptr : &it->second;
  }
  device_parameter* find(std::string_view name) {
    auto const it = params_.find(name);
    return it == params_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, device_parameter, std::less<>> params_;
};

/// `replace_parameter` on the device: `value` (contiguous device view) replaces `name` in place
/// when dtype and byte size match (`*result = in_place`, address kept, shape adopted), else in a
/// new allocation (`reallocated`; the old buffer is freed on `stream` after the copy).
template <class T, int R>
cudaError_t replace_parameter(device_parameter_map& params, std::string_view name, view<T, R> value, cudaStream_t stream,
                              replace_result* result = nullptr) {
  device_parameter* old = params.find(name);
  if (old == nullptr || !value.is_contiguous()) {
    return cudaErrorInvalidValue;
  }
  std::size_t const bytes = static_cast<std::size_t>(value.size()) * sizeof(T);
  if (old->dtype == dtype_tag<T>() && old->nbytes == bytes) {
    // cudaMemcpyAsync of overlapping ranges is undefined: a value viewing the buffer itself is
    // already in place only when it starts at the buffer.
    if (static_cast<void const*>(value.data) != old->data) {
      if (cudaError_t e = cudaMemcpyAsync(old->data, value.data, bytes, cudaMemcpyDeviceToDevice, stream); e != cudaSuccess) {
        return e;
      }
    }
    old->shape.assign(value.extent, value.extent + R);
    if (result) {
      *result = replace_result::in_place;
    }
    return cudaSuccess;
  }
  void* fresh = nullptr;
  if (cudaError_t e = cudaMallocAsync(&fresh, bytes > 0 ? bytes : 1, stream); e != cudaSuccess) {
    return e;
  }
  if (cudaError_t e = cudaMemcpyAsync(fresh, value.data, bytes, cudaMemcpyDeviceToDevice, stream); e != cudaSuccess) {
    cudaFreeAsync(fresh, stream);
    return e;
  }
  cudaFreeAsync(old->data, stream);
  old->data = fresh;
  old->nbytes = bytes;
  old->dtype = std::string(dtype_tag<T>());
  old->shape.assign(value.extent, value.extent + R);
  if (result) {
    *result = replace_result::reallocated;
  }
  return cudaSuccess;
}

}  // namespace qtl::cuda
