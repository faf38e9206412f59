// Host block quantization throughput beside memcpy (docs/performance.md's contract), one core:
// NVFP4 (global scale given, and computed from the amax), MXFP4 and MXFP8, linear and 128x4
// scale layouts, on an 8192 x 8192 bf16 input.
//
// bytes_per_second counts every input byte read once and every output byte written once:
//   NVFP4 / MXFP4: 2 B/element in, 0.5 B/element values + 1 B per 16 / 32 elements of scales
//   MXFP8:         2 B/element in, 1 B/element values + 1 B per 32 elements of scales
// Times are CPU times of the one benchmark thread (the build machine is shared, so wall time
// measures the neighbours). BM_memcpy copies a buffer as large as the bf16 input (128 MiB) and
// counts 2x its size; the ratio quantize / memcpy is the figure that counts (target 0.5).

#include <qtl/fp4.hpp>

#include "support/square_input.hpp"
#include "support/memcpy_baseline.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace qtl_bench::square_shape;  // rows, cols, numel

struct buffers {
  std::vector<qtl::bfloat16_t> in;
  std::vector<std::uint8_t> values;  // room for MXFP8's byte per element
  std::vector<std::uint8_t> scales;  // room for NVFP4's byte per 16 elements
  buffers() : in(qtl_bench::normal_input()), values(numel), scales(numel / 16) {}
  qtl::view2d<qtl::bfloat16_t const> input() const { return qtl_bench::as_input(in.data()); }
};

buffers& data() {
  static buffers b;
  return b;
}

void bm_memcpy(benchmark::State& state) { qtl_bench::memcpy_baseline(state, static_cast<std::size_t>(numel * 2)); }

// ComputeGlobalScale: NVFP4 with `nvfp4_global_scale` inside the timed loop (one more read of the
// input, not counted as bytes).
template <class F, class Layout, bool ComputeGlobalScale = false>
void bm_block_quantize(benchmark::State& state) {
  buffers& b = data();
  auto* values = reinterpret_cast<typename F::element*>(b.values.data());
  auto* scales = reinterpret_cast<typename F::scale*>(b.scales.data());
  auto const scale_bytes = static_cast<std::size_t>(qtl::block_scale_bytes<F, Layout>(rows, cols));
  for (auto _ : state) {
    float const gs = ComputeGlobalScale ? qtl::nvfp4_global_scale(b.input()) : 597.0f;
    qtl::block_quantize<F, Layout>(b.input(), qtl::make_view(values, rows, cols / F::elements_per_value),
                                   std::span(scales, scale_bytes), gs);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() *
                          (numel * 2 + numel / F::elements_per_value + static_cast<std::int64_t>(scale_bytes)));
}

}  // namespace

BENCHMARK(bm_memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(bm_block_quantize, qtl::nvfp4, qtl::layout_linear)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(bm_block_quantize, qtl::nvfp4, qtl::layout_128x4, true)->Unit(benchmark::kMillisecond);
// every block format in the 128x4 layout
[[maybe_unused]] int const each_format = [] {
  qtl::for_each_type<qtl::block_formats>([]<class F>() {
    std::string const name = "bm_block_quantize<qtl::" + std::string(qtl::name_of<F>) + ", qtl::layout_128x4>";
    benchmark::RegisterBenchmark(name.c_str(), bm_block_quantize<F, qtl::layout_128x4>)->Unit(benchmark::kMillisecond);
  });
  return 0;
}();

BENCHMARK_MAIN();
