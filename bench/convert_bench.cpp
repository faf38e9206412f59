// Host load-time converters (qtl/convert.hpp) beside memcpy (docs/performance.md's contract), on one
// thread and on two (the converters' `threads` argument; bm_memcpy_mt copies the same bytes in two
// halves on two threads): a DeepSeek-V3-sized FP8 block weight of N x K = 7168 x 2048 (14.7 MB of e4m3 codes,
// 56 x 16 scales) through block_quant_dequant (to BF16 and F32), requant_weight_ue8m0 (sglang and
// vLLM recipes), fp8_block_to_mxfp4, fp8_block_to_nvfp4, per_block_cast_to_fp8 (F32 in, bits rule), and the DeepGEMM
// scale packing of a 64-expert stack.
//
// Arguments: threads, then 1 to cap the x86 executors at `portable` (qtl/x86/isa.hpp's hook: the
// portable loops, the "before" of the executors in the same run), 2 at `avx2`, 0 for the widest
// this CPU has.
//
// bytes_per_second counts every input byte read once and every output byte written once. Each
// operation has its own memcpy baseline, bm_memcpy/<bytes>, of (input + output) / 2 bytes, which
// counts twice that: the same bytes moved. The ratio of the two rates is the figure that counts.

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <qtl/convert.hpp>
#include <qtl/x86/isa.hpp>

#include "support/memcpy_baseline.hpp"

namespace {

namespace cv = qtl::convert;

constexpr std::int64_t N = 7168;
constexpr std::int64_t K = 2048;

struct fp8_weight {
  std::vector<std::uint8_t> q;
  std::vector<float> s;
};

fp8_weight const& weight() {
  static fp8_weight const w = [] {
    std::mt19937 rng(42);
    fp8_weight r{std::vector<std::uint8_t>(static_cast<std::size_t>(N * K)),
                 std::vector<float>(static_cast<std::size_t>((N / 128) * (K / 128)))};
    for (auto& c : r.q) {
      do {
        c = static_cast<std::uint8_t>(rng());
      } while ((c & 0x7F) == 0x7F);
    }
    std::uniform_real_distribution<float> e(-14.0f, -4.0f);
    for (auto& v : r.s) v = std::exp2(e(rng));
    return r;
  }();
  return w;
}

cv::block_grid const grid{1, N, K, {128, 128}};

/// The executor cap of range(1): `portable` when it is 1, `avx2` when 2, none when 0.
qtl::x86::level cap_of(benchmark::State const& state) {
  return state.range(1) == 1   ? qtl::x86::level::portable
         : state.range(1) == 2 ? qtl::x86::level::avx2
                               : qtl::x86::level::avx512;
}

void set_bytes(benchmark::State& state, std::size_t in, std::size_t out) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(in + out));
}

void bm_memcpy(benchmark::State& state) { qtl_bench::memcpy_baseline(state, static_cast<std::size_t>(state.range(0))); }

/// The same bytes as bm_memcpy/<bytes>, copied in range(1) parts by range(1) threads.
void bm_memcpy_mt(benchmark::State& state) {
  qtl_bench::memcpy_baseline_threads(state, static_cast<std::size_t>(state.range(0)),
                                     static_cast<std::size_t>(state.range(1)));
}

template <class Out>
void bm_dequant(benchmark::State& state) {
  qtl::x86::scoped_level_cap const cap(cap_of(state));
  auto const& w = weight();
  std::vector<Out> out(w.q.size());
  for (auto _ : state) {
    cv::block_quant_dequant<Out>(w.q, w.s, grid, out, static_cast<int>(state.range(0)));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, w.q.size() + w.s.size() * 4, out.size() * sizeof(Out));
}

template <class R>
void bm_requant(benchmark::State& state) {
  qtl::x86::scoped_level_cap const cap(cap_of(state));
  auto const& w = weight();
  std::vector<std::uint8_t> q(w.q.size());
  std::vector<float> s(w.s.size());
  for (auto _ : state) {
    cv::requant_weight_ue8m0<R>(w.q, w.s, 1, N, K, q, s, static_cast<int>(state.range(0)));
    benchmark::DoNotOptimize(q.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, w.q.size() + w.s.size() * 4, q.size() + s.size() * 4);
}

void bm_mxfp4(benchmark::State& state) {
  qtl::x86::scoped_level_cap const cap(cap_of(state));
  auto const& w = weight();
  std::vector<std::uint8_t> packed(w.q.size() / 2), scales(w.q.size() / 32);
  for (auto _ : state) {
    cv::fp8_block_to_mxfp4(w.q, w.s, grid, packed, scales, static_cast<int>(state.range(0)));
    benchmark::DoNotOptimize(packed.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, w.q.size() + w.s.size() * 4, packed.size() + scales.size());
}

void bm_nvfp4(benchmark::State& state) {
  qtl::x86::scoped_level_cap const cap(cap_of(state));
  auto const& w = weight();
  std::vector<qtl::float4_e2m1x2_t> packed(w.q.size() / 2);
  std::vector<qtl::float8_e4m3fn_t> scales(w.q.size() / 16);
  float const gs = cv::nvfp4_shared_global_scale(cv::fp8_block_bf16_amax(w.q, w.s, grid));
  for (auto _ : state) {
    cv::fp8_block_to_nvfp4(w.q, w.s, grid, gs, packed, scales, static_cast<int>(state.range(0)));
    benchmark::DoNotOptimize(packed.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, w.q.size() + w.s.size() * 4, packed.size() + scales.size());
}

void bm_cast(benchmark::State& state) {
  qtl::x86::scoped_level_cap const cap(cap_of(state));
  auto const& w = weight();
  std::vector<float> x(w.q.size());
  cv::block_quant_dequant<float>(w.q, w.s, grid, x);
  std::vector<std::uint8_t> q(x.size());
  std::vector<float> s(w.s.size());
  for (auto _ : state) {
    cv::per_block_cast_to_fp8<cv::pow2_rule::bits>(x, grid, q, s, static_cast<int>(state.range(0)));
    benchmark::DoNotOptimize(q.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, x.size() * 4, q.size() + s.size() * 4);
}

void bm_pack(benchmark::State& state) {
  // 64 experts of N = 4096 rows, kb = 56 (K = 7168): pow2 scales
  auto const l = cv::deepgemm_layout(64, 4096, 56);
  std::vector<float> sf(static_cast<std::size_t>(64 * l.scale_rows() * 56));
  std::mt19937 rng(1);
  for (auto& v : sf) v = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 20);
  std::vector<std::int32_t> out(static_cast<std::size_t>(l.words()));
  for (auto _ : state) {
    cv::deepgemm_pack_ue8m0(sf, l, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, sf.size() * 4, out.size() * 4);
}

constexpr std::int64_t codes = N * K;
constexpr std::int64_t scale_bytes = (N / 128) * (K / 128) * 4;

}  // namespace

#define QTL_CONVERT_BENCH(fn, bytes)                                                                    \
  BENCHMARK(fn)->Args({1, 1})->Args({1, 2})->Args({1, 0})->Args({2, 0})->Unit(benchmark::kMillisecond); \
  BENCHMARK(bm_memcpy)->Arg(bytes)->Unit(benchmark::kMillisecond);                                      \
  BENCHMARK(bm_memcpy_mt)->Args({bytes, 2})->Unit(benchmark::kMillisecond)

QTL_CONVERT_BENCH(bm_dequant<qtl::bfloat16_t>, (codes + scale_bytes + 2 * codes) / 2);
QTL_CONVERT_BENCH(bm_dequant<float>, (codes + scale_bytes + 4 * codes) / 2);
BENCHMARK(bm_requant<cv::recipe::sglang>)->Args({1, 1})->Args({1, 0})->Args({2, 0})->Unit(benchmark::kMillisecond);
QTL_CONVERT_BENCH(bm_requant<cv::recipe::vllm>, codes + scale_bytes);
QTL_CONVERT_BENCH(bm_mxfp4, (codes + scale_bytes + codes / 2 + codes / 32) / 2);
QTL_CONVERT_BENCH(bm_nvfp4, (codes + scale_bytes + codes / 2 + codes / 16) / 2);
QTL_CONVERT_BENCH(bm_cast, (4 * codes + codes + scale_bytes) / 2);
BENCHMARK(bm_pack)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_memcpy)->Arg((64 * 32 * 56 * 4 + 64 * 14 * 4096 * 4) / 2)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
