// Device NVFP4 / MXFP4 / MXFP8 block quantization throughput beside a device-to-device copy
// (docs/performance.md: at least 0.85 of the copy), 8192 x 8192 bf16 input, scales in the 128x4 layout.
// CUDA-event times (manual time); bytes: 2 B in per element, values out (0.5 B or 1 B per
// element) and the scale bytes; each reports its ratio to a D2D copy of the same bytes
// (bench/cuda/support/device_bench.cuh). Without a GPU every benchmark reports an error and the
// program exits 0.

#include <qtl/cuda/fp4.cuh>

#include <benchmark/benchmark.h>

#include "support/square_input.hpp"
#include "support/device_bench.cuh"

#include <cstdint>
#include <string>

namespace {

using namespace qtl_bench::square_shape;  // rows, cols, numel

struct device_data {
  qtl_bench::cuda::device_array<qtl::bfloat16_t> in{qtl_bench::cuda::ramp_bf16(static_cast<std::size_t>(numel))};
  qtl_bench::cuda::device_array<std::uint8_t> values{static_cast<std::size_t>(numel)};
  qtl_bench::cuda::device_array<std::uint8_t> scales{static_cast<std::size_t>(numel / 16)};
  qtl_bench::cuda::device_array<float> global_scale{1};
  bool ok = in.ok() && values.ok() && scales.ok() && global_scale.ok() &&
            qtl::cuda::nvfp4_global_scale(qtl_bench::as_input(in.get()),
                                          global_scale.get()) == cudaSuccess;
};

device_data& data() {
  static device_data d;
  return d;
}

template <class Op>
void time_device(benchmark::State& state, std::int64_t bytes, Op op) {
  qtl_bench::cuda::time_against_copy(state, bytes, data().ok, op);
}

template <class F>
void bm_block_quantize(benchmark::State& state) {
  auto const scale_bytes = qtl::block_scale_bytes<F, qtl::layout_128x4>(rows, cols);
  time_device(state, numel * 2 + numel / F::elements_per_value + scale_bytes, [] {
    return qtl::cuda::block_quantize<F, qtl::layout_128x4>(
        qtl_bench::as_input(data().in.get()),
        qtl::make_view(reinterpret_cast<typename F::element*>(data().values.get()), rows,
                       cols / F::elements_per_value),
        reinterpret_cast<typename F::scale*>(data().scales.get()), data().global_scale.get());
  });
}

}  // namespace

// every block format (qtl::block_formats)
[[maybe_unused]] int const each_format = [] {
  qtl::for_each_type<qtl::block_formats>([&]<class F>() {  // [&]: nvcc warns (445) on a captureless template lambda
    std::string const name = "bm_block_quantize<qtl::" + std::string(qtl::name_of<F>) + ">";
    benchmark::RegisterBenchmark(name.c_str(), bm_block_quantize<F>)->Apply(qtl_bench::cuda::device_benchmark);
  });
  return 0;
}();

BENCHMARK_MAIN();
