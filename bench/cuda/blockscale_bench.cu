// GPU throughput of the block-scale layouts and the FP4 MoE weight preparation beside a
// device-to-device copy (DESIGN's performance contract: at least 0.85 of cudaMemcpyAsync D2D):
//   swizzle / unswizzle  the scales of a 16384 x 16384 NVFP4 weight ([16384, 1024] bytes)
//                                                         -> compare with bm_memcpy_d2d/16777216
//   moe_prepare          64 experts, H = 4096, I = 1536 (679477248 bytes in, as many out), and
//                        DeepSeek-V3 sized, 256 experts, H = 7168, I = 2048 (6341787648 bytes, 5.9 GiB, each way)
//                                                         -> compare with bm_memcpy_d2d/<same bytes>
// bytes_per_second counts every input byte read once and every output byte written once; the
// copies count twice their size. Timed with cudaEvents around each launch (manual time).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <qtl/blockscale.hpp>
#include <qtl/cuda/blockscale.cuh>
#include <qtl/cuda/moe.cuh>
#include <qtl/moe.hpp>

namespace {

using qtl::index_t;

// One pair of device buffers per size, made once (contents: whatever cudaMemset left, the ops
// only move bytes).
struct device_pair {
  std::uint8_t* in = nullptr;
  std::uint8_t* out = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  bool ok = false;
  ~device_pair() {
    cudaFree(in);
    cudaFree(out);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

device_pair& buffers_for(std::size_t bytes) {
  static std::map<std::size_t, std::unique_ptr<device_pair>> cache;
  auto& slot = cache[bytes];
  if (!slot) {
    slot = std::make_unique<device_pair>();
    slot->ok = cudaMalloc(&slot->in, bytes) == cudaSuccess && cudaMalloc(&slot->out, bytes) == cudaSuccess &&
               cudaMemset(slot->in, 0x5A, bytes) == cudaSuccess && cudaEventCreate(&slot->start) == cudaSuccess &&
               cudaEventCreate(&slot->stop) == cudaSuccess;
  }
  return *slot;
}

template <class Launch>
void time_launches(benchmark::State& state, std::size_t bytes, Launch launch) {
  device_pair& b = buffers_for(bytes);
  if (!b.ok || launch(b) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    state.SkipWithError("no device, allocation or launch failed");
    return;
  }
  for (auto _ : state) {
    cudaEventRecord(b.start);
    cudaError_t const e = launch(b);
    cudaEventRecord(b.stop);
    cudaEventSynchronize(b.stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, b.start, b.stop);
    if (e != cudaSuccess) {
      state.SkipWithError("launch failed");
      return;
    }
    state.SetIterationTime(static_cast<double>(ms) / 1e3);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * static_cast<std::int64_t>(bytes));
}

constexpr index_t weight_rows = 16384;
constexpr index_t scale_cols = 16384 / 16;

void bm_memcpy_d2d(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  time_launches(state, bytes,
                [&](device_pair& b) { return cudaMemcpyAsync(b.out, b.in, bytes, cudaMemcpyDeviceToDevice); });
}

void bm_swizzle(benchmark::State& state) {
  time_launches(state, static_cast<std::size_t>(weight_rows * scale_cols), [](device_pair& b) {
    return qtl::cuda::swizzle_blockscale(
        qtl::make_view(static_cast<std::uint8_t const*>(b.in), weight_rows, scale_cols),
        qtl::make_view(b.out, weight_rows, scale_cols));
  });
}

void bm_unswizzle(benchmark::State& state) {
  time_launches(state, static_cast<std::size_t>(weight_rows * scale_cols), [](device_pair& b) {
    return qtl::cuda::unswizzle_blockscale(
        qtl::make_view(static_cast<std::uint8_t const*>(b.in), weight_rows, scale_cols),
        qtl::make_view(b.out, weight_rows, scale_cols));
  });
}

std::size_t moe_bytes(index_t e, index_t h, index_t i) {
  return static_cast<std::size_t>(e * 2 * i * h / 2 + e * 2 * i * h / 16 + e * h * i / 2 + e * h * i / 16);
}

void bm_moe_prepare(benchmark::State& state) {
  index_t const e = state.range(0);
  index_t const h = state.range(1);
  index_t const i = state.range(2);
  qtl::trtllm_fp4_moe_shape const shape{.hidden_size = h, .intermediate_size = i, .num_experts = e};
  auto const tensors = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    index_t const r1 = 2 * i;
    T* const g1s = p + e * r1 * h / 2;
    T* const g2w = g1s + e * r1 * h / 16;
    T* const g2s = g2w + e * h * i / 2;
    return qtl::trtllm_fp4_moe_tensors<T, T>{qtl::make_view(p, e, r1, h / 2), qtl::make_view(g1s, e, r1, h / 16),
                                             qtl::make_view(g2w, e, h, i / 2), qtl::make_view(g2s, e, h, i / 16)};
  };
  time_launches(state, moe_bytes(e, h, i), [&](device_pair& b) {
    return qtl::cuda::prepare_static_weights_for_trtllm_fp4_moe(shape, tensors(static_cast<std::uint8_t const*>(b.in)),
                                                                tensors(b.out));
  });
}

}  // namespace

BENCHMARK(bm_memcpy_d2d)
    ->Arg(weight_rows* scale_cols)
    ->Arg(static_cast<std::int64_t>(moe_bytes(64, 4096, 1536)))
    ->Arg(static_cast<std::int64_t>(moe_bytes(256, 7168, 2048)))
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_swizzle)->Name("bm_swizzle_blockscale/16384x1024")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(bm_unswizzle)->Name("bm_unswizzle_blockscale/16384x1024")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(bm_moe_prepare)
    ->Args({64, 4096, 1536})
    ->Args({256, 7168, 2048})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
