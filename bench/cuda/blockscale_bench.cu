// GPU throughput of the block-scale layouts and the FP4 MoE weight preparation beside a
// device-to-device copy (docs/performance.md's contract: at least 0.85 of cudaMemcpyAsync D2D):
//   swizzle / unswizzle  the scales of a 16384 x 16384 NVFP4 weight ([16384, 1024] bytes)
//   moe_prepare          64 experts, H = 4096, I = 1536 (679477248 bytes in, as many out), and
//                        DeepSeek-V3 sized, 256 experts, H = 7168, I = 2048 (5.9 GiB each way)
// bytes_per_second counts every input byte read once and every output byte written once, and
// ratio_to_d2d_copy compares with a D2D copy of the same bytes in the same run
// (bench/cuda/support/device_bench.cuh). Timed with cudaEvents around each launch (manual time).

#include <benchmark/benchmark.h>

#include "support/device_bench.cuh"

#include <cstdint>
#include <map>
#include <memory>
#include <qtl/blockscale.hpp>
#include <qtl/cuda/blockscale.cuh>
#include <qtl/cuda/moe.cuh>
#include <qtl/moe.hpp>

namespace {

using qtl::index_t;

// One pair of device buffers per size, made once (contents: 0x5A from cudaMemset; the ops only
// move bytes).
struct device_pair {
  explicit device_pair(std::size_t bytes) : in_(bytes), out_(bytes) {
    ok = in_.ok() && out_.ok() && cudaMemset(in_.get(), 0x5A, bytes) == cudaSuccess;
  }
  qtl_bench::cuda::device_array<std::uint8_t> in_;
  qtl_bench::cuda::device_array<std::uint8_t> out_;
  std::uint8_t* in = in_.get();
  std::uint8_t* out = out_.get();
  bool ok = false;
};

device_pair& buffers_for(std::size_t bytes) {
  static std::map<std::size_t, std::unique_ptr<device_pair>> cache;
  auto& slot = cache[bytes];
  if (!slot) {
    slot = std::make_unique<device_pair>(bytes);
  }
  return *slot;
}

// `bytes`: the size of the op's input (and of its output): it reads and writes 2 * bytes.
template <class Launch>
void time_launches(benchmark::State& state, std::size_t bytes, Launch launch) {
  device_pair& b = buffers_for(bytes);
  qtl_bench::cuda::time_against_copy(state, 2 * static_cast<std::int64_t>(bytes), b.ok, [&] { return launch(b); });
}

constexpr index_t weight_rows = 16384;
constexpr index_t scale_cols = 16384 / 16;

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

BENCHMARK(bm_swizzle)->Name("bm_swizzle_blockscale/16384x1024")->Apply(qtl_bench::cuda::device_benchmark);
BENCHMARK(bm_unswizzle)->Name("bm_unswizzle_blockscale/16384x1024")->Apply(qtl_bench::cuda::device_benchmark);
BENCHMARK(bm_moe_prepare)
    ->Args({64, 4096, 1536})
    ->Args({256, 7168, 2048})
    ->Apply(qtl_bench::cuda::device_benchmark);

BENCHMARK_MAIN();
