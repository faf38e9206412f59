#pragma once
// Device memory for the CUDA tests, under nvcc and on the simulated device alike: n elements of T
// (at least one byte is allocated, so that an empty tensor still has a valid pointer), filled from a
// host vector or with the byte `device_fill`, and copied back after the device has finished; and
// guarded bytes (`device_bytes`).
// Failures stop the test case (Catch2's REQUIRE).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include <qtl/view.hpp>

#include "test_data.hpp"

namespace qtl_test {

/// The byte every element of a `device_buffer` made by count starts as, so that an output the
/// kernel leaves unwritten reads back as 0xA5A5... rather than as whatever the allocator held.
inline constexpr int device_fill = 0xA5;

template <class T>
struct device_buffer {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit device_buffer(std::size_t count) : n(count) {
    REQUIRE(cudaMalloc(&ptr, (n == 0 ? 1 : n) * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemset(ptr, device_fill, (n == 0 ? 1 : n) * sizeof(T)) == cudaSuccess);
  }
  template <class A>
  explicit device_buffer(std::vector<T, A> const& v) : device_buffer(v.size()) {
    REQUIRE(cudaMemcpy(ptr, v.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~device_buffer() { cudaFree(ptr); }
  device_buffer(device_buffer const&) = delete;
  device_buffer& operator=(device_buffer const&) = delete;
  /// The contents, after every launch before has finished.
  std::vector<T> get() const {
    std::vector<T> v(n);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return v;
  }
  /// The first rows * cols elements as a row-major (rows, cols) view.
  qtl::view2d<T> view(qtl::index_t rows, qtl::index_t cols) const { return qtl::make_view(ptr, rows, cols); }
};

/// n device bytes and 64 guard bytes after them, all filled with 0xAB: a kernel that writes past
/// its output, or leaves an output byte unwritten, changes what the test reads back.
struct device_bytes {
  std::uint8_t* p = nullptr;
  explicit device_bytes(std::size_t n) {
    REQUIRE(cudaMalloc(&p, n + 64) == cudaSuccess);
    REQUIRE(cudaMemset(p, 0xAB, n + 64) == cudaSuccess);
  }
  ~device_bytes() { cudaFree(p); }
  device_bytes(device_bytes const&) = delete;
  device_bytes& operator=(device_bytes const&) = delete;
};

}  // namespace qtl_test
