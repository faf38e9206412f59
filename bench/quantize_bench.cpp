// quantize_weights on one host core, beside memcpy in the same run (docs/performance.md's contract).
// bytes_per_second counts the weight read once and every output written once (w_ref, w_q, w_s,
// w_zp); memcpy's counts its buffer (as large as the weight) read and written. The figure that
// counts is the ratio of the two. Sizes: 4096x4096 and 8192x28672 (K x N), fp16 and bf16, group
// 128 and channelwise, symmetric (uint4b8) and with zero points (uint4).
//
//   build/bench/qtl_bench_quantize --benchmark_filter='4096x4096' --benchmark_min_time=0.2
#include <qtl/quantize.hpp>

#include "support/memcpy_baseline.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using qtl::index_t;

template <class T>
std::vector<T> random_weights(index_t k, index_t n) {
  std::vector<T> w(static_cast<std::size_t>(k * n));
  std::mt19937 rng(20261202);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (auto& x : w) {
    x = qtl::from_float<T>(dist(rng));
  }
  return w;
}

void bm_memcpy(benchmark::State& state) {
  qtl_bench::memcpy_baseline(state, static_cast<std::size_t>(state.range(0)));
}

/// G: 128 or qtl::group_channelwise; ZeroPoints: uint4 with zero points, else uint4b8 symmetric.
template <class T, int G, bool ZeroPoints>
void bm_quantize(benchmark::State& state) {
  index_t const k = state.range(0);
  index_t const n = state.range(1);
  index_t const groups = G == qtl::group_channelwise ? 1 : k / G;
  auto const w = random_weights<T>(k, n);
  qtl::host_tensor<T, 2> w_ref({k, n});
  qtl::host_tensor<std::int32_t, 2> w_q({k, n});
  qtl::host_tensor<T, 2> w_s({groups, n});
  qtl::host_tensor<std::int32_t, 2> w_zp({ZeroPoints ? groups : 0, n});
  qtl::quantize_outputs<T> out{w_ref.view(), w_q.view(), w_s.view(), w_zp.view()};
  qtl::quantize_options opt;
  opt.zero_points = ZeroPoints;
  auto const wv = qtl::make_view(w.data(), k, n);
  for (auto _ : state) {
    if constexpr (ZeroPoints) {
      qtl::quantize_weights<qtl::uint4, G>(wv, out, opt);
    } else {
      qtl::quantize_weights<qtl::uint4b8, G>(wv, out, opt);
    }
    benchmark::ClobberMemory();
  }
  std::int64_t const elems = k * n;
  std::int64_t const bytes = elems * static_cast<std::int64_t>(2 * sizeof(T) + sizeof(std::int32_t)) +
                             groups * n * static_cast<std::int64_t>(sizeof(T) + (ZeroPoints ? 4 : 0));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * bytes);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"K", "N"})->Args({4096, 4096})->Args({8192, 28672})->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

// memcpy of a buffer as large as the fp16/bf16 weight of each shape.
BENCHMARK(bm_memcpy)->Arg(4096 * 4096 * 2)->Arg(std::int64_t{8192} * 28672 * 2)->Unit(benchmark::kMillisecond)->UseRealTime();
#define QTL_QUANTIZE_CASE(T, group, zero_points) BENCHMARK(bm_quantize<T, group, zero_points>)->Apply(shapes);
#include "support/cases.def"

BENCHMARK_MAIN();
