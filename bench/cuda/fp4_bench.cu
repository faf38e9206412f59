// Device NVFP4 / MXFP4 / MXFP8 block quantization throughput beside a device-to-device copy
// (DESIGN: at least 0.85 of the copy), 8192 x 8192 bf16 input, scales in the 128x4 layout.
// CUDA-event times (manual time); bytes: 2 B in per element, values out (0.5 B or 1 B per
// element) and the scale bytes; the copy moves as many bytes as the input and counts 2x. Without
// a GPU every benchmark reports an error and the program exits 0.

#include <qtl/cuda/fp4.cuh>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

namespace {

constexpr qtl::index_t rows = 8192;
constexpr qtl::index_t cols = 8192;
constexpr std::int64_t numel = rows * cols;

struct device_data {
  bool ok = false;
  qtl::bfloat16_t* in = nullptr;
  std::uint8_t* values = nullptr;
  std::uint8_t* scales = nullptr;
  float* global_scale = nullptr;
  void* copy = nullptr;
  device_data() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      return;
    }
    std::vector<qtl::bfloat16_t> h(static_cast<std::size_t>(numel));
    for (std::size_t i = 0; i < h.size(); ++i) {
      h[i] = qtl::from_float<qtl::bfloat16_t>(static_cast<float>(static_cast<int>(i % 2001) - 1000) * 0.01f);
    }
    ok = cudaMalloc(&in, numel * 2) == cudaSuccess && cudaMalloc(&values, numel) == cudaSuccess &&
         cudaMalloc(&scales, numel / 16) == cudaSuccess && cudaMalloc(&global_scale, 4) == cudaSuccess &&
         cudaMalloc(&copy, numel * 2) == cudaSuccess &&
         cudaMemcpy(in, h.data(), numel * 2, cudaMemcpyHostToDevice) == cudaSuccess &&
         qtl::cuda::nvfp4_global_scale(qtl::make_view<qtl::bfloat16_t const>(in, rows, cols), global_scale) ==
             cudaSuccess;
  }
};

device_data& data() {
  static device_data d;
  return d;
}

template <class Op>
void time_device(benchmark::State& state, std::int64_t bytes, Op op) {
  if (!data().ok) {
    state.SkipWithError("no usable CUDA device");
    return;
  }
  cudaEvent_t start;
  cudaEvent_t stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  op();  // warm-up
  for (auto _ : state) {
    cudaEventRecord(start);
    cudaError_t const e = op();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    if (e != cudaSuccess) {
      state.SkipWithError(cudaGetErrorString(e));
      break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(static_cast<double>(ms) / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  state.SetBytesProcessed(state.iterations() * bytes);
}

void bm_device_copy(benchmark::State& state) {
  time_device(state, numel * 2 * 2,
              [] { return cudaMemcpyAsync(data().copy, data().in, numel * 2, cudaMemcpyDeviceToDevice); });
}

template <class F>
void bm_block_quantize(benchmark::State& state) {
  auto const scale_bytes = qtl::block_scale_bytes<F, qtl::layout_128x4>(rows, cols);
  time_device(state, numel * 2 + numel / F::elements_per_value + scale_bytes, [] {
    return qtl::cuda::block_quantize<F, qtl::layout_128x4>(
        qtl::make_view<qtl::bfloat16_t const>(data().in, rows, cols),
        qtl::make_view(reinterpret_cast<typename F::element*>(data().values), rows, cols / F::elements_per_value),
        reinterpret_cast<typename F::scale*>(data().scales), data().global_scale);
  });
}

}  // namespace

BENCHMARK(bm_device_copy)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(bm_block_quantize, qtl::nvfp4)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(bm_block_quantize, qtl::mxfp4)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(bm_block_quantize, qtl::mxfp8)->UseManualTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
