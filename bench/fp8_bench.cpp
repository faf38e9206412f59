// Host FP8 quantization throughput beside memcpy (docs/performance.md's contract), one core:
// scaled_fp8_quant static / dynamic per-tensor / dynamic per-token, per-token-group (128, plain and
// UE8M0 scales), requantize_with_max_scale and fp8_all_close, on an 8192 x 8192 bf16 input.
//
// bytes_per_second counts every input byte read once and every output byte written once:
//   quantize:    2 B/element in + 1 B/element out (+ 4 B per scale written)
//   requantize:  1 B/element in + 1 B/element out (in place)
//   all_close:   2 x 1 B/element in
// Times are CPU times of the one benchmark thread (the build machine is shared, so wall time
// measures the neighbours). BM_memcpy copies a buffer as large as the bf16 input (128 MiB) and
// counts 2x its size; the ratio quantize / memcpy is the figure that counts (target 0.5).
//
// Dynamic per-tensor quantization reads its input twice by construction (the scale needs the
// whole tensor's max before the first code), and 128 MiB does not stay in cache between the
// passes (reading the second pass backwards, to meet the end of the first in L3, gained nothing
// measurable on a guest whose reads keep only ~8 MiB in L3). Its time is one read-only pass
// plus one static pass: 0.39 of memcpy measured there, where one core reads ~9 GB/s alone.

#include <qtl/fp8.hpp>

#include "support/square_input.hpp"
#include "support/memcpy_baseline.hpp"

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace qtl_bench::square_shape;  // rows, cols, numel

struct buffers {
  std::vector<qtl::bfloat16_t> in;
  std::vector<qtl::float8_e4m3fn_t> out;
  std::vector<qtl::float8_e4m3fn_t> other;
  std::vector<float> scales;
  buffers() : in(qtl_bench::normal_input()), out(numel), other(numel), scales(rows * (cols / 128)) {}
  qtl::view2d<qtl::bfloat16_t const> input() const { return qtl_bench::as_input(in.data()); }
  qtl::view2d<qtl::float8_e4m3fn_t> output() { return qtl::make_view(out.data(), rows, cols); }
};

buffers& data() {
  static buffers b;
  return b;
}

void bm_memcpy(benchmark::State& state) { qtl_bench::memcpy_baseline(state, static_cast<std::size_t>(numel * 2)); }

void bm_static(benchmark::State& state) {
  buffers& b = data();
  for (auto _ : state) {
    qtl::scaled_fp8_quant_static(b.input(), 0.01f, b.output());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * numel * 3);
}

void bm_dynamic_per_tensor(benchmark::State& state) {
  buffers& b = data();
  for (auto _ : state) {
    benchmark::DoNotOptimize(qtl::scaled_fp8_quant_dynamic(b.input(), b.output()));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * numel * 3);
}

void bm_dynamic_per_token(benchmark::State& state) {
  buffers& b = data();
  for (auto _ : state) {
    qtl::scaled_fp8_quant_per_token(b.input(), b.output(), qtl::make_view(b.scales.data(), rows));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * (numel * 3 + rows * 4));
}

template <bool PowerOfTwo>
void bm_per_token_group_128(benchmark::State& state) {
  buffers& b = data();
  qtl::fp8_group_options o;
  o.power_of_two_scale = PowerOfTwo;
  for (auto _ : state) {
    qtl::per_token_group_quant_fp8<128>(b.input(), b.output(), b.scales, o);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * (numel * 3 + numel / 128 * 4));
}

void bm_requantize_with_max_scale(benchmark::State& state) {
  buffers& b = data();
  qtl::scaled_fp8_quant_static(b.input(), 0.01f, b.output());
  std::vector<float> const scales = {0.01f, 0.01f, 0.01f};  // a no-op requantization: stable input
  std::vector<qtl::index_t> const widths = {rows / 2, rows / 4, rows / 4};
  for (auto _ : state) {
    benchmark::DoNotOptimize(qtl::requantize_with_max_scale(b.output(), {scales, false}, widths));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * numel * 2);
}

void bm_fp8_all_close(benchmark::State& state) {
  buffers& b = data();
  qtl::scaled_fp8_quant_static(b.input(), 0.01f, b.output());
  b.other = b.out;
  for (auto _ : state) {
    auto const r = qtl::fp8_all_close(qtl::make_view<qtl::float8_e4m3fn_t const>(b.out.data(), rows, cols),
                                      qtl::make_view<qtl::float8_e4m3fn_t const>(b.other.data(), rows, cols));
    benchmark::DoNotOptimize(r.differ);
  }
  state.SetBytesProcessed(state.iterations() * numel * 2);
}

}  // namespace

BENCHMARK(bm_memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_static)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_dynamic_per_tensor)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_dynamic_per_token)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(bm_per_token_group_128, false)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(bm_per_token_group_128, true)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_requantize_with_max_scale)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_fp8_all_close)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
