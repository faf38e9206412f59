// GPU Marlin repack throughput beside a device-to-device copy (docs/performance.md's contract: at
// least 0.85 of cudaMemcpyAsync D2D): 4-bit GPTQ qweights of (K, N) = (4096, 4096) and
// (8192, 28672), without and with act-order (a random permutation), and a 64-expert MoE
// (K = 2048, N = 1408 per expert) in one launch. Timed with cudaEvents around each launch.
//
// bytes_per_second counts the qweight read once and the Marlin weight written once (the same
// size; sort_indices are not counted); ratio_to_d2d_copy is the rate over that of a D2D copy of
// the same bytes in the same run (bench/cuda/support/device_bench.cuh).

#include <qtl/cuda/marlin.cuh>

#include <benchmark/benchmark.h>

#include "support/device_bench.cuh"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

using qtl::index_t;

// range: E, K, N, act-order
void bm_repack_gptq4(benchmark::State& state) {
  index_t const E = state.range(0), K = state.range(1), N = state.range(2);
  bool const act_order = state.range(3) != 0;
  std::size_t const words = static_cast<std::size_t>(E * K / 8 * N);
  std::mt19937 rng(42);
  std::vector<std::int32_t> host(words);
  for (auto& w : host) w = static_cast<std::int32_t>(rng());
  std::vector<std::int32_t> p(static_cast<std::size_t>(act_order ? E * K : 0));
  for (index_t e = 0; act_order && e < E; ++e) {  // one permutation of K per expert
    std::vector<std::int32_t> one(static_cast<std::size_t>(K));
    std::iota(one.begin(), one.end(), 0);
    std::shuffle(one.begin(), one.end(), std::mt19937(static_cast<std::uint32_t>(e)));
    std::copy(one.begin(), one.end(), p.begin() + e * K);
  }
  qtl_bench::cuda::device_array<std::int32_t> const in(host), out(words), perm(p);
  auto const q = qtl::make_view<std::int32_t const>(in.get(), E, K / 8, N);
  auto const o = qtl::make_view(out.get(), E, K / 16, 2 * N);
  bool const ready = in.ok() && out.ok() && perm.ok();
  qtl_bench::cuda::time_against_copy(state, 2 * static_cast<std::int64_t>(words * 4), ready, [&] {
    return qtl::cuda::marlin::repack_gptq<4>(q, act_order ? perm.get() : nullptr, o);
  });
}

}  // namespace

BENCHMARK(bm_repack_gptq4)
    ->ArgNames({"E", "K", "N", "act"})
    ->Args({1, 4096, 4096, 0})
    ->Args({1, 4096, 4096, 1})
    ->Args({1, 8192, 28672, 0})
    ->Args({1, 8192, 28672, 1})
    ->Args({64, 2048, 1408, 0})
    ->Args({64, 2048, 1408, 1})
    ->Apply(qtl_bench::cuda::device_benchmark);

BENCHMARK_MAIN();
