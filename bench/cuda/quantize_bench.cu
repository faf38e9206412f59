// GPU group quantization beside a device-to-device copy (DESIGN: at least 0.85 of cudaMemcpyAsync
// D2D): fp16 and bf16 weights, 4096x4096 and 8192x28672, group 128 and channelwise, symmetric
// (uint4b8) and zero points (uint4). Timed with cudaEvents around each launch (manual time).
// bytes_per_second counts the weight read once and w_ref, w_q, w_s (and w_zp) written once; the
// copy copies a buffer as large as the weight and counts 2x its size.
#include <qtl/cuda/quantize.cuh>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

namespace {

using qtl::index_t;

struct timer {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  timer() {
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
  }
  ~timer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

void bm_memcpy_d2d(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  void* a = nullptr;
  void* b = nullptr;
  timer t;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) {
    state.SkipWithError("cudaMalloc failed (no GPU?)");
    cudaFree(a);
    return;
  }
  for (auto _ : state) {
    cudaEventRecord(t.start);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(t.stop);
    cudaEventSynchronize(t.stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, t.start, t.stop);
    state.SetIterationTime(ms / 1e3);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(2 * bytes));
  cudaFree(a);
  cudaFree(b);
}

template <class T, int G, bool ZeroPoints>
void bm_quantize(benchmark::State& state) {
  index_t const k = state.range(0);
  index_t const n = state.range(1);
  index_t const groups = G == qtl::group_channelwise ? 1 : k / G;
  std::size_t const elems = static_cast<std::size_t>(k * n);
  T* w = nullptr;
  T* ref = nullptr;
  std::int32_t* q = nullptr;
  T* s = nullptr;
  std::int32_t* zp = nullptr;
  timer t;
  bool ok = cudaMalloc(&w, elems * sizeof(T)) == cudaSuccess && cudaMalloc(&ref, elems * sizeof(T)) == cudaSuccess &&
            cudaMalloc(&q, elems * 4) == cudaSuccess && cudaMalloc(&s, groups * n * sizeof(T)) == cudaSuccess &&
            cudaMalloc(&zp, groups * n * 4) == cudaSuccess && cudaMemset(w, 0x21, elems * sizeof(T)) == cudaSuccess;
  if (ok) {
    qtl::quantize_outputs<T> out{qtl::make_view(ref, k, n), qtl::make_view(q, k, n), qtl::make_view(s, groups, n),
                                 qtl::make_view(zp, ZeroPoints ? groups : 0, n)};
    qtl::quantize_options opt;
    opt.zero_points = ZeroPoints;
    qtl::view2d<T const> const wv = qtl::make_view(static_cast<T const*>(w), k, n);
    for (auto _ : state) {
      cudaEventRecord(t.start);
      cudaError_t e = ZeroPoints ? qtl::cuda::quantize_weights<qtl::uint4>(wv, index_t{G}, out, opt, nullptr)
                                 : qtl::cuda::quantize_weights<qtl::uint4b8>(wv, index_t{G}, out, opt, nullptr);
      cudaEventRecord(t.stop);
      cudaEventSynchronize(t.stop);
      if (e != cudaSuccess) {
        state.SkipWithError(cudaGetErrorString(e));
        break;
      }
      float ms = 0;
      cudaEventElapsedTime(&ms, t.start, t.stop);
      state.SetIterationTime(ms / 1e3);
    }
    std::int64_t const bytes = static_cast<std::int64_t>(elems) * static_cast<std::int64_t>(2 * sizeof(T) + 4) +
                               groups * n * static_cast<std::int64_t>(sizeof(T) + (ZeroPoints ? 4 : 0));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * bytes);
  } else {
    state.SkipWithError("cudaMalloc failed (no GPU?)");
  }
  cudaFree(w);
  cudaFree(ref);
  cudaFree(q);
  cudaFree(s);
  cudaFree(zp);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"K", "N"})->Args({4096, 4096})->Args({8192, 28672})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK(bm_memcpy_d2d)->Arg(4096 * 4096 * 2)->Arg(std::int64_t{8192} * 28672 * 2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_quantize<qtl::half_t, 128, false>)->Apply(shapes);
BENCHMARK(bm_quantize<qtl::half_t, 128, true>)->Apply(shapes);
BENCHMARK(bm_quantize<qtl::half_t, qtl::group_channelwise, false>)->Apply(shapes);
BENCHMARK(bm_quantize<qtl::half_t, qtl::group_channelwise, true>)->Apply(shapes);
BENCHMARK(bm_quantize<qtl::bfloat16_t, 128, false>)->Apply(shapes);
BENCHMARK(bm_quantize<qtl::bfloat16_t, 128, true>)->Apply(shapes);
BENCHMARK(bm_quantize<qtl::bfloat16_t, qtl::group_channelwise, false>)->Apply(shapes);
BENCHMARK(bm_quantize<qtl::bfloat16_t, qtl::group_channelwise, true>)->Apply(shapes);

BENCHMARK_MAIN();
