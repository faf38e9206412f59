// The lossless MXFP4 -> FP8-block cast (qtl/e2m1_to_e4m3.hpp) beside memcpy (docs/performance.md's
// contract), on one thread and on two: one DeepSeek-V4-Flash-sized routed expert weight, w1 of
// N x K = 2048 x 7168 in MXFP4 (7.3 MB of packed codes, 2048 x 224 scales) cast to 14.7 MB of e4m3
// codes, its 1x32 scales spread over 2^7 (every block is cast, none refused).
//
// Arguments: threads, then 1 to cap the x86 executor at `portable` (qtl/x86/isa.hpp's hook: the
// portable loop, the "before" of the executor in the same run), 0 for the widest this CPU has.
//
// bytes_per_second counts every input byte read once and every output byte written once; the
// memcpy baseline bm_memcpy/<bytes> moves (input + output) / 2 bytes and counts twice that.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include <qtl/e2m1_to_e4m3.hpp>
#include <qtl/x86/isa.hpp>

#include "support/memcpy_baseline.hpp"

namespace {

namespace cv = qtl::convert;

constexpr std::int64_t N = 2048;
constexpr std::int64_t K = 7168;
cv::block_grid const grid{1, N, K, {128, 128}};

struct mxfp4_weight {
  std::vector<std::uint8_t> x;
  std::vector<std::uint8_t> scale;
};

mxfp4_weight const& weight() {
  static mxfp4_weight const w = [] {
    std::mt19937 rng(42);
    mxfp4_weight r{std::vector<std::uint8_t>(static_cast<std::size_t>(N * K / 2)),
                   std::vector<std::uint8_t>(static_cast<std::size_t>(N * K / 32))};
    for (auto& b : r.x) b = static_cast<std::uint8_t>(rng());
    for (auto& e : r.scale) e = static_cast<std::uint8_t>(118 + rng() % 8);
    return r;
  }();
  return w;
}

void bm_memcpy(benchmark::State& state) { qtl_bench::memcpy_baseline(state, static_cast<std::size_t>(state.range(0))); }

void bm_memcpy_mt(benchmark::State& state) {
  qtl_bench::memcpy_baseline_threads(state, static_cast<std::size_t>(state.range(0)),
                                     static_cast<std::size_t>(state.range(1)));
}

void bm_cast(benchmark::State& state) {
  qtl::x86::scoped_level_cap const cap(state.range(1) != 0 ? qtl::x86::level::portable : qtl::x86::level::avx512);
  auto const& w = weight();
  std::vector<std::uint8_t> out(static_cast<std::size_t>(N * K));
  std::vector<std::uint8_t> out_scale(static_cast<std::size_t>(grid.scales()));
  for (auto _ : state) {
    cv::cast_e2m1fn_to_e4m3fn(w.x, w.scale, grid, out, out_scale, static_cast<int>(state.range(0)));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(w.x.size() + w.scale.size() + out.size() + out_scale.size()));
}

constexpr std::int64_t bytes = (N * K / 2 + N * K / 32 + N * K + (N / 128) * (K / 128)) / 2;

}  // namespace

BENCHMARK(bm_cast)->Args({1, 1})->Args({1, 0})->Args({2, 0})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_memcpy)->Arg(bytes)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_memcpy_mt)->Args({bytes, 2})->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
