// GPU packing throughput beside a device-to-device copy (DESIGN's performance contract: at least
// 0.85 of cudaMemcpyAsync D2D): pack and unpack, rows and cols, 4 and 8 bits, on (4096, 4096) and
// (8192, 28672) int32 code matrices. Timed with cudaEvents around each launch (manual time).
//
// bytes_per_second counts every input byte read once and every output byte written once; the
// copy benchmarks copy a buffer as large as an operation's input and count 2x its size:
//   pack   input = the (K, N) codes        -> compare with bm_memcpy_d2d/<K*N*4>
//   unpack input = the words (K*N*4/pf)    -> compare with bm_memcpy_d2d/<K*N*4/pf>
// (the copy of K*N*4 bytes is the fairer yardstick for the unpacks, whose output has that size).

#include <qtl/cuda/pack.cuh>
#include <qtl/pack.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

namespace {

using qtl::index_t;

struct device_buffers {
  std::int32_t* codes = nullptr;   // (K, N)
  std::int32_t* words = nullptr;   // room for (K, N/4)
  std::int32_t* result = nullptr;  // (K, N)
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  bool ok = false;
  ~device_buffers() {
    cudaFree(codes);
    cudaFree(words);
    cudaFree(result);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

device_buffers& buffers_for(index_t k, index_t n) {
  static std::map<std::pair<index_t, index_t>, std::unique_ptr<device_buffers>> cache;
  auto& slot = cache[{k, n}];
  if (!slot) {
    slot = std::make_unique<device_buffers>();
    auto const bytes = static_cast<std::size_t>(k * n) * sizeof(std::int32_t);
    std::vector<std::int32_t> host(static_cast<std::size_t>(k * n));
    std::mt19937 rng(42);
    for (auto& c : host) {
      c = static_cast<std::int32_t>(rng() & 0xF);  // valid 4- and 8-bit codes
    }
    slot->ok = cudaMalloc(&slot->codes, bytes) == cudaSuccess && cudaMalloc(&slot->words, bytes / 4) == cudaSuccess &&
               cudaMalloc(&slot->result, bytes) == cudaSuccess &&
               cudaMemcpy(slot->codes, host.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
               cudaEventCreate(&slot->start) == cudaSuccess && cudaEventCreate(&slot->stop) == cudaSuccess;
  }
  return *slot;
}

// Runs `launch` (returning cudaError_t) once per iteration between two events.
template <class Launch>
void time_launches(benchmark::State& state, device_buffers& b, Launch launch) {
  if (launch() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {  // warm-up
    state.SkipWithError("launch failed");
    return;
  }
  for (auto _ : state) {
    cudaEventRecord(b.start);
    cudaError_t const e = launch();
    cudaEventRecord(b.stop);
    cudaEventSynchronize(b.stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, b.start, b.stop);
    if (e != cudaSuccess) {
      state.SkipWithError("launch failed");
      return;
    }
    state.SetIterationTime(static_cast<double>(ms) / 1e3);
  }
}

void bm_memcpy_d2d(benchmark::State& state) {
  index_t const bytes = state.range(0);
  device_buffers& b = buffers_for(8192, 28672);  // large enough for every copy size below
  if (!b.ok) {
    state.SkipWithError("no usable CUDA device");
    return;
  }
  time_launches(state, b, [&] {
    return cudaMemcpyAsync(b.result, b.codes, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice);
  });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * bytes);
}

enum class op { pack_rows, pack_cols, unpack_rows, unpack_cols };

template <op Op, int Bits>
void bm_pack(benchmark::State& state) {
  index_t const k = state.range(0);
  index_t const n = state.range(1);
  constexpr index_t pf = qtl::pack_factor<Bits>;
  device_buffers& b = buffers_for(k, n);
  if (!b.ok) {
    state.SkipWithError("no usable CUDA device");
    return;
  }
  auto const codes = qtl::make_view(b.codes, k, n);
  auto const rows_words = qtl::make_view(b.words, k / pf, n);
  auto const cols_words = qtl::make_view(b.words, k, n / pf);
  auto const result = qtl::make_view(b.result, k, n);
  if constexpr (Op == op::unpack_rows) {
    qtl::cuda::pack_rows<Bits>(codes, rows_words);
  } else if constexpr (Op == op::unpack_cols) {
    qtl::cuda::pack_cols<Bits>(codes, cols_words);
  }
  time_launches(state, b, [&] {
    if constexpr (Op == op::pack_rows) {
      return qtl::cuda::pack_rows<Bits>(codes, rows_words);
    } else if constexpr (Op == op::pack_cols) {
      return qtl::cuda::pack_cols<Bits>(codes, cols_words);
    } else if constexpr (Op == op::unpack_rows) {
      return qtl::cuda::unpack_rows<Bits>(rows_words, result);
    } else {
      return qtl::cuda::unpack_cols<Bits>(cols_words, result);
    }
  });
  std::int64_t const bytes = 4 * k * n + 4 * k * n / pf;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * bytes);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({4096, 4096})->Args({8192, 28672})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

void copy_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t const elems : {std::int64_t{4096} * 4096, std::int64_t{8192} * 28672}) {
    for (std::int64_t const pf : {1, 4, 8}) {
      b->Arg(elems * 4 / pf);
    }
  }
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(bm_memcpy_d2d)->Apply(copy_sizes);
BENCHMARK_TEMPLATE(bm_pack, op::pack_rows, 4)->Apply(shapes);
BENCHMARK_TEMPLATE(bm_pack, op::pack_rows, 8)->Apply(shapes);
BENCHMARK_TEMPLATE(bm_pack, op::pack_cols, 4)->Apply(shapes);
BENCHMARK_TEMPLATE(bm_pack, op::pack_cols, 8)->Apply(shapes);
BENCHMARK_TEMPLATE(bm_pack, op::unpack_rows, 4)->Apply(shapes);
BENCHMARK_TEMPLATE(bm_pack, op::unpack_rows, 8)->Apply(shapes);
BENCHMARK_TEMPLATE(bm_pack, op::unpack_cols, 4)->Apply(shapes);
BENCHMARK_TEMPLATE(bm_pack, op::unpack_cols, 8)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
