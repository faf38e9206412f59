#pragma once
/// \file
/// The simulated device's `cub::DeviceRadixSort::SortPairs` (test-only, `QTL_CUDA_SIM`): CUB's
/// two-call protocol (a null `d_temp_storage` asks for the size), a stable sort of the pairs by
/// the key bits [begin_bit, end_bit) (signed keys ordered as numbers), executed when enqueued.
/// Misuse is an error: too small a temp storage, or keys/values/temp that are not device memory.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

namespace cub {

struct DeviceRadixSort {
  template <class K, class V>
  static cudaError_t SortPairs(void* d_temp_storage, std::size_t& temp_storage_bytes, K const* d_keys_in, K* d_keys_out,
                               V const* d_values_in, V* d_values_out, int num_items, int begin_bit = 0,
                               int end_bit = int(sizeof(K) * 8), cudaStream_t stream = nullptr) {
    static_assert(std::is_integral_v<K>, "cuda_sim cub::DeviceRadixSort: integer keys only");
    (void)stream;
    std::size_t const n = num_items > 0 ? static_cast<std::size_t>(num_items) : 0;
    std::size_t const need = 2 * n * (sizeof(K) + sizeof(V)) + 512;  // CUB needs double buffers too
    if (d_temp_storage == nullptr) {
      temp_storage_bytes = need;
      return cudaSuccess;
    }
    if (num_items < 0 || begin_bit < 0 || end_bit > int(sizeof(K) * 8) || begin_bit >= end_bit ||
        temp_storage_bytes < need || !cuda_sim::is_device_range(d_temp_storage, need) ||
        !cuda_sim::is_device_range(d_keys_in, n * sizeof(K)) || !cuda_sim::is_device_range(d_keys_out, n * sizeof(K)) ||
        !cuda_sim::is_device_range(d_values_in, n * sizeof(V)) ||
        !cuda_sim::is_device_range(d_values_out, n * sizeof(V))) {
      return cuda_sim::record_error(cudaErrorInvalidValue);
    }
    using U = std::make_unsigned_t<K>;
    auto const radix = [&](K k) {
      U u = static_cast<U>(k);
      if constexpr (std::is_signed_v<K>) {
        u ^= U(1) << (sizeof(K) * 8 - 1);  // CUB's twiddle: negatives first
      }
      unsigned const width = static_cast<unsigned>(end_bit - begin_bit);
      U const m = width >= sizeof(U) * 8 ? U(~U(0)) : U((U(1) << width) - 1);
      return U((u >> begin_bit) & m);
    };
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return radix(d_keys_in[a]) < radix(d_keys_in[b]); });
    std::vector<K> keys(n);
    std::vector<V> values(n);
    for (std::size_t i = 0; i < n; ++i) {
      keys[i] = d_keys_in[order[i]];
      values[i] = d_values_in[order[i]];
    }
    std::copy(keys.begin(), keys.end(), d_keys_out);
    std::copy(values.begin(), values.end(), d_values_out);
    return cudaSuccess;
  }
};

}  // namespace cub
