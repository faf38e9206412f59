// Device FP8 quantization throughput beside a device-to-device copy (DESIGN's performance
// contract: at least 0.85 of the copy): static, dynamic per-tensor, dynamic per-token and
// per-token-group 128 on an 8192 x 8192 bf16 input. Times are CUDA-event times of the kernels
// (manual time); bytes count every input byte read once and every output byte written once
// (2 B in + 1 B out per element, + 4 B per scale); the copy moves as many bytes as the input and
// counts 2x. Without a GPU every benchmark reports an error and the program exits 0.

#include <qtl/cuda/fp8.cuh>

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
  qtl::float8_e4m3fn_t* out = nullptr;
  float* scales = nullptr;
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
    ok = cudaMalloc(&in, numel * 2) == cudaSuccess && cudaMalloc(&out, numel) == cudaSuccess &&
         cudaMalloc(&scales, numel / 128 * 4) == cudaSuccess && cudaMalloc(&copy, numel * 2) == cudaSuccess &&
         cudaMemcpy(in, h.data(), numel * 2, cudaMemcpyHostToDevice) == cudaSuccess;
  }
  qtl::view2d<qtl::bfloat16_t const> input() const { return qtl::make_view<qtl::bfloat16_t const>(in, rows, cols); }
  qtl::view2d<qtl::float8_e4m3fn_t> output() const { return qtl::make_view(out, rows, cols); }
};

device_data& data() {
  static device_data d;
  return d;
}

// Runs `op` (which enqueues on stream 0 and returns cudaError_t) under CUDA events.
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
void bm_static(benchmark::State& state) {
  time_device(state, numel * 3,
              [] { return qtl::cuda::scaled_fp8_quant_static(data().input(), data().scales, data().output()); });
}
void bm_dynamic_per_tensor(benchmark::State& state) {
  time_device(state, numel * 3,
              [] { return qtl::cuda::scaled_fp8_quant_dynamic(data().input(), data().output(), data().scales); });
}
void bm_dynamic_per_token(benchmark::State& state) {
  time_device(state, numel * 3 + rows * 4,
              [] { return qtl::cuda::scaled_fp8_quant_per_token(data().input(), data().output(), data().scales); });
}
void bm_per_token_group_128(benchmark::State& state) {
  time_device(state, numel * 3 + numel / 128 * 4, [] {
    return qtl::cuda::per_token_group_quant_fp8<128>(data().input(), data().output(), data().scales);
  });
}

}  // namespace

BENCHMARK(bm_device_copy)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_static)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_dynamic_per_tensor)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_dynamic_per_token)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_per_token_group_128)->UseManualTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
