// Host Marlin repack throughput beside memcpy (docs/performance.md's contract), one core:
// 4-bit GPTQ qweights of (K, N) = (4096, 4096) and (8192, 28672), without and with act-order
// (a random permutation as sort_indices), AWQ on the same shapes, and a 64-expert MoE
// (K = 2048, N = 1408 per expert). The W4A8 CUTLASS int4 encode and reorder (qtl/w4a8.hpp) of 16
// experts of a down projection (N = 4096, K = 1536 int4 codes each, 48 MiB), out of place and in
// place, and of a 64-expert layer's w13 (N = 3072, K = 4096) and w2 (N = 4096, K = 1536).
//
// bytes_per_second counts every input byte read once and every output byte written once (qweight
// in, Marlin out: the same size; sort_indices are not counted). bm_memcpy copies a buffer as large
// as the operation's input and counts 2x its size, so the ratio of the two rates is the figure
// that counts. Rates use CPU time (Google Benchmark's default).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include <qtl/marlin.hpp>
#include <qtl/w4a8.hpp>

#include "support/memcpy_baseline.hpp"

namespace {

using qtl::index_t;

void bm_memcpy(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  qtl::aligned_vector<char> const src(bytes, 1);
  qtl::aligned_vector<char> dst(bytes, 0);
  qtl_bench::memcpy_baseline(state, src.data(), dst.data(), bytes);
}

qtl::aligned_vector<std::int32_t> random_words(std::size_t n) {
  qtl::aligned_vector<std::int32_t> w(n);
  std::mt19937 rng(42);
  for (auto& x : w) x = static_cast<std::int32_t>(rng());
  return w;
}

std::vector<std::int32_t> random_permutation(index_t k, std::uint32_t seed) {
  std::vector<std::int32_t> s(static_cast<std::size_t>(k));
  std::iota(s.begin(), s.end(), 0);
  std::shuffle(s.begin(), s.end(), std::mt19937(seed));
  return s;
}

// range(0) = K, range(1) = N, range(2) = act-order (0/1)
void bm_repack_gptq4(benchmark::State& state) {
  index_t const K = state.range(0), N = state.range(1);
  bool const act_order = state.range(2) != 0;
  auto const q = random_words(static_cast<std::size_t>(K / 8 * N));
  auto const s = act_order ? random_permutation(K, 7) : std::vector<std::int32_t>{};
  qtl::aligned_vector<std::int32_t> out(q.size());
  auto const qv = qtl::make_view(q.data(), K / 8, N);
  auto const sv = qtl::make_view(s.data(), static_cast<index_t>(s.size()));
  auto const ov = qtl::make_view(out.data(), K / 16, 2 * N);
  for (auto _ : state) {
    qtl::marlin::repack_gptq<4>(qv, sv, ov);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * static_cast<std::int64_t>(q.size() * 4));
}

void bm_repack_awq4(benchmark::State& state) {
  index_t const K = state.range(0), N = state.range(1);
  auto const q = random_words(static_cast<std::size_t>(K * N / 8));
  qtl::aligned_vector<std::int32_t> out(q.size());
  auto const qv = qtl::make_view(q.data(), K, N / 8);
  auto const ov = qtl::make_view(out.data(), K / 16, 2 * N);
  for (auto _ : state) {
    qtl::marlin::repack_awq<4>(qv, ov);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * static_cast<std::int64_t>(q.size() * 4));
}

// range(0) = experts, range(1) = K, range(2) = N, range(3) = act-order
void bm_repack_gptq4_moe(benchmark::State& state) {
  index_t const E = state.range(0), K = state.range(1), N = state.range(2);
  bool const act_order = state.range(3) != 0;
  auto const q = random_words(static_cast<std::size_t>(E * K / 8 * N));
  std::vector<std::int32_t> s;
  if (act_order) {
    for (index_t e = 0; e < E; ++e) {
      auto const p = random_permutation(K, static_cast<std::uint32_t>(e));
      s.insert(s.end(), p.begin(), p.end());
    }
  }
  auto const qv = qtl::make_view(q.data(), E, K / 8, N);
  auto const sv = act_order ? qtl::make_view<std::int32_t const>(s.data(), E, K) : qtl::view2d<std::int32_t const>{};
  qtl::aligned_vector<std::int32_t> out(q.size());
  auto const ov = qtl::make_view(out.data(), E, K / 16, 2 * N);
  for (auto _ : state) {
    qtl::marlin::repack_gptq<4>(qv, sv, ov);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * static_cast<std::int64_t>(q.size() * 4));
}

// range(0) = experts, range(1) = N, range(2) = K (int4 codes), range(3) = in place (0/1)
void bm_encode_reorder_int4b(benchmark::State& state) {
  index_t const E = state.range(0), N = state.range(1), K = state.range(2);
  bool const inplace = state.range(3) != 0;
  auto const w = random_words(static_cast<std::size_t>(E * N * K / 8));
  std::span const in(reinterpret_cast<std::uint8_t const*>(w.data()), w.size() * 4);
  qtl::aligned_vector<std::uint8_t> out(in.size());
  if (inplace) {
    std::copy(in.begin(), in.end(), out.begin());
  }
  for (auto _ : state) {
    if (inplace) {
      qtl::encode_and_reorder_int4b_inplace(out, E, N, K);  // re-encodes its own output: same work
    } else {
      qtl::encode_and_reorder_int4b_grouped(in, E, N, K, out);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * static_cast<std::int64_t>(in.size()));
}

// The W4A8 input's memcpy under a name of its own (16 x 4096 x 1536 / 2 bytes).
void bm_memcpy_w4a8(benchmark::State& state) { bm_memcpy(state); }

// The MoE input's memcpy under a name of its own, which bench/host_ab.py pairs with the MoE cases.
void bm_memcpy_moe(benchmark::State& state) { bm_memcpy(state); }

}  // namespace

// memcpy of each operation's input: 4096x4096 4-bit = 8 MiB, 8192x28672 = 112 MiB, MoE 64 x 2048 x
// 1408 = 88 MiB. The K:/N: argument names let bench/host_ab.py pair each case with the memcpy of
// its K*N/2 bytes.
BENCHMARK(bm_memcpy)->Arg(4096LL * 4096 / 2)->Arg(8192LL * 28672 / 2)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_memcpy_moe)->Arg(64LL * 2048 * 1408 / 2)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_repack_gptq4)
    ->ArgNames({"K", "N", "act"})
    ->Args({4096, 4096, 0})
    ->Args({4096, 4096, 1})
    ->Args({8192, 28672, 0})
    ->Args({8192, 28672, 1})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_repack_awq4)->ArgNames({"K", "N"})->Args({4096, 4096})->Args({8192, 28672})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_repack_gptq4_moe)
    ->ArgNames({"E", "K", "N", "act"})
    ->Args({64, 2048, 1408, 0})
    ->Args({64, 2048, 1408, 1})
    ->Unit(benchmark::kMillisecond);

// W4A8: 16 experts of a down projection, and the 64-expert layer vLLM's W4A8 MoE prepares with
// the grouped op (H 4096, I 1536: w13 N = 2I, K = H; w2 N = H, K = I), each beside the memcpy of
// its bytes.
BENCHMARK(bm_memcpy_w4a8)
    ->Arg(16LL * 4096 * 1536 / 2)
    ->Arg(64LL * 3072 * 4096 / 2)
    ->Arg(64LL * 4096 * 1536 / 2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_encode_reorder_int4b)
    ->ArgNames({"E", "N", "K", "inplace"})
    ->Args({16, 4096, 1536, 0})
    ->Args({16, 4096, 1536, 1})
    ->Args({64, 3072, 4096, 0})
    ->Args({64, 4096, 1536, 0})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
