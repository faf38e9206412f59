// GPU Marlin repack throughput beside a device-to-device copy (DESIGN's performance contract: at
// least 0.85 of cudaMemcpyAsync D2D): 4-bit GPTQ qweights of (K, N) = (4096, 4096) and
// (8192, 28672), without and with act-order (a random permutation), and a 64-expert MoE
// (K = 2048, N = 1408 per expert) in one launch. Timed with cudaEvents around each launch.
//
// bytes_per_second counts the qweight read once and the Marlin weight written once (the same
// size; sort_indices are not counted); bm_memcpy_d2d copies a buffer of the qweight's size and
// counts 2x its size.

#include <qtl/cuda/marlin.cuh>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

using qtl::index_t;

struct device_buffers {
  std::int32_t* in = nullptr;
  std::int32_t* out = nullptr;
  std::int32_t* perm = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  bool ok = false;
  device_buffers(std::size_t words, index_t perm_entries) {
    std::vector<std::int32_t> host(words);
    std::mt19937 rng(42);
    for (auto& w : host) w = static_cast<std::int32_t>(rng());
    std::vector<std::int32_t> p(static_cast<std::size_t>(perm_entries));
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), rng);
    ok = cudaMalloc(&in, words * 4) == cudaSuccess && cudaMalloc(&out, words * 4) == cudaSuccess &&
         cudaMalloc(&perm, p.size() * 4 + 4) == cudaSuccess &&
         cudaMemcpy(in, host.data(), words * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaMemcpy(perm, p.data(), p.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess;
  }
  ~device_buffers() {
    cudaFree(in);
    cudaFree(out);
    cudaFree(perm);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

template <class Launch>
void time_launches(benchmark::State& state, device_buffers& b, Launch launch) {
  if (!b.ok) {
    state.SkipWithError("no usable CUDA device");
    return;
  }
  if (launch() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
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
  auto const bytes = static_cast<std::size_t>(state.range(0));
  device_buffers b(bytes / 4, 0);
  time_launches(state, b, [&] { return cudaMemcpyAsync(b.out, b.in, bytes, cudaMemcpyDeviceToDevice); });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * static_cast<std::int64_t>(bytes));
}

// range: E, K, N, act-order
void bm_repack_gptq4(benchmark::State& state) {
  index_t const E = state.range(0), K = state.range(1), N = state.range(2);
  bool const act_order = state.range(3) != 0;
  std::size_t const words = static_cast<std::size_t>(E * K / 8 * N);
  device_buffers b(words, act_order ? E * K : 0);  // the E permutations of K are written below
  if (act_order && b.ok) {
    std::vector<std::int32_t> p(static_cast<std::size_t>(E * K));
    for (index_t e = 0; e < E; ++e) {
      std::vector<std::int32_t> one(static_cast<std::size_t>(K));
      std::iota(one.begin(), one.end(), 0);
      std::shuffle(one.begin(), one.end(), std::mt19937(static_cast<std::uint32_t>(e)));
      std::copy(one.begin(), one.end(), p.begin() + e * K);
    }
    b.ok = cudaMemcpy(b.perm, p.data(), p.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess;
  }
  auto const q = qtl::make_view<std::int32_t const>(b.in, E, K / 8, N);
  auto const o = qtl::make_view(b.out, E, K / 16, 2 * N);
  time_launches(state, b, [&] { return qtl::cuda::marlin::repack_gptq<4>(q, act_order ? b.perm : nullptr, o); });
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * static_cast<std::int64_t>(words * 4));
}

}  // namespace

BENCHMARK(bm_memcpy_d2d)
    ->Arg(4096LL * 4096 / 2)
    ->Arg(8192LL * 28672 / 2)
    ->Arg(64LL * 2048 * 1408 / 2)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_repack_gptq4)
    ->Args({1, 4096, 4096, 0})
    ->Args({1, 4096, 4096, 1})
    ->Args({1, 8192, 28672, 0})
    ->Args({1, 8192, 28672, 1})
    ->Args({64, 2048, 1408, 0})
    ->Args({64, 2048, 1408, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
