// Device FP8 quantization throughput beside a device-to-device copy (docs/performance.md's
// contract: at least 0.85 of the copy): static, dynamic per-tensor, dynamic per-token and
// per-token-group 128 on an 8192 x 8192 bf16 input. Times are CUDA-event times of the kernels
// (manual time); bytes count every input byte read once and every output byte written once
// (2 B in + 1 B out per element, + 4 B per scale), and each reports its ratio to a D2D copy of
// the same bytes (bench/cuda/support/device_bench.cuh). Without a GPU every benchmark reports an
// error and the program exits 0.

#include <qtl/cuda/fp8.cuh>

#include <benchmark/benchmark.h>

#include "support/square_input.hpp"
#include "support/device_bench.cuh"

#include <cstdint>

namespace {

using namespace qtl_bench::square_shape;  // rows, cols, numel

struct device_data {
  qtl_bench::cuda::device_array<qtl::bfloat16_t> in{qtl_bench::cuda::ramp_bf16(static_cast<std::size_t>(numel))};
  qtl_bench::cuda::device_array<qtl::float8_e4m3fn_t> out{static_cast<std::size_t>(numel)};
  qtl_bench::cuda::device_array<float> scales{static_cast<std::size_t>(numel / 128)};
  bool ok() const { return in.ok() && out.ok() && scales.ok(); }
  qtl::view2d<qtl::bfloat16_t const> input() const {
    return qtl_bench::as_input(in.get());
  }
  qtl::view2d<qtl::float8_e4m3fn_t> output() const { return qtl::make_view(out.get(), rows, cols); }
};

device_data& data() {
  static device_data d;
  return d;
}

template <class Op>
void time_device(benchmark::State& state, std::int64_t bytes, Op op) {
  qtl_bench::cuda::time_against_copy(state, bytes, data().ok(), op);
}

void bm_static(benchmark::State& state) {
  time_device(state, numel * 3,
              [] { return qtl::cuda::scaled_fp8_quant_static(data().input(), data().scales.get(), data().output()); });
}
void bm_dynamic_per_tensor(benchmark::State& state) {
  time_device(state, numel * 3,
              [] { return qtl::cuda::scaled_fp8_quant_dynamic(data().input(), data().output(), data().scales.get()); });
}
void bm_dynamic_per_token(benchmark::State& state) {
  time_device(state, numel * 3 + rows * 4, [] {
    return qtl::cuda::scaled_fp8_quant_per_token(data().input(), data().output(), data().scales.get());
  });
}
void bm_per_token_group_128(benchmark::State& state) {
  time_device(state, numel * 3 + numel / 128 * 4, [] {
    return qtl::cuda::per_token_group_quant_fp8<128>(data().input(), data().output(), data().scales.get());
  });
}

}  // namespace

BENCHMARK(bm_static)->Apply(qtl_bench::cuda::device_benchmark);
BENCHMARK(bm_dynamic_per_tensor)->Apply(qtl_bench::cuda::device_benchmark);
BENCHMARK(bm_dynamic_per_token)->Apply(qtl_bench::cuda::device_benchmark);
BENCHMARK(bm_per_token_group_128)->Apply(qtl_bench::cuda::device_benchmark);

BENCHMARK_MAIN();
