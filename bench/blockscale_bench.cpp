// Host throughput of the block-scale layouts and the FP4 MoE weight preparation beside memcpy
// (docs/performance.md's contract), one core:
//   swizzle / unswizzle  the E4M3 scales of a 16384 x 16384 NVFP4 weight: [16384, 1024] bytes
//                        (16 MiB in, 16 MiB out)                  -> compare with BM_memcpy/16777216
//   moe_prepare          64 experts, H = 4096, I = 1536, gated: gemm1/gemm2 weights and scales
//                        (648 MiB in, 648 MiB out; the plan is built inside the timed loop)
//                                                                 -> compare with BM_memcpy_moe
// bytes_per_second counts every input byte read once and every output byte written once; the
// memcpy benchmarks copy a buffer as large as the operation's input and count twice its size.
// The 16 MiB buffers start on a 64-byte boundary (as host_tensor's and PyTorch's do), or 16 bytes
// past one in the `/offset16` runs (as a large std::vector's do with glibc); the memcpy's are
// aligned. Each is allocated on its own, so that their place does not depend on what the
// benchmarks before freed (glibc serves a 16 MiB std::vector from the heap at whatever offset, once
// a buffer that size has been freed).

#include <qtl/blockscale.hpp>
#include <qtl/moe.hpp>

#include "support/memcpy_baseline.hpp"
#include "support/random_bytes.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

namespace {

using qtl::index_t;

constexpr index_t weight_rows = 16384;
constexpr index_t scale_cols = 16384 / 16;  // NVFP4: one scale per 16 elements

using qtl_bench::random_bytes;

// `n` random (or zero) bytes at `offset` past a 64-byte boundary.
struct bytes_at {
  struct release {
    void operator()(std::uint8_t* p) const { ::operator delete(p, std::align_val_t{64}); }
  };
  std::unique_ptr<std::uint8_t, release> storage;
  std::uint8_t* data;
  bytes_at(std::size_t n, std::size_t offset, bool random)
      : storage(static_cast<std::uint8_t*>(::operator new(n + offset, std::align_val_t{64}))),
        data(storage.get() + offset) {
    if (random) {
      auto const v = random_bytes(n);
      std::memcpy(data, v.data(), n);
    } else {
      std::memset(data, 0, n);
    }
  }
};

constexpr std::size_t scale_bytes = weight_rows * scale_cols;

void bm_memcpy(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  bytes_at const src(bytes, 0, true);
  bytes_at const dst(bytes, 0, false);
  qtl_bench::memcpy_baseline(state, src.data, dst.data, bytes);
}
BENCHMARK(bm_memcpy)->Name("BM_memcpy")->Arg(scale_bytes)->Unit(benchmark::kMillisecond);

// Swizzle (`Un` false) or unswizzle of the 16 MiB scales, both buffers `Offset` bytes past a
// 64-byte boundary.
template <bool Un, std::size_t Offset>
void bm_layout(benchmark::State& state) {
  bytes_at const in(scale_bytes, Offset, true);
  bytes_at const out(scale_bytes, Offset, false);
  auto const src = qtl::make_view(static_cast<std::uint8_t const*>(in.data), weight_rows, scale_cols);
  auto const dst = qtl::make_view(out.data, weight_rows, scale_cols);
  for (auto _ : state) {
    if constexpr (Un) {
      qtl::unswizzle_blockscale(src, dst);
    } else {
      qtl::swizzle_blockscale(src, dst);
    }
    benchmark::DoNotOptimize(out.data);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 * static_cast<std::int64_t>(scale_bytes));
}
BENCHMARK(bm_layout<false, 0>)->Name("BM_swizzle_blockscale/16384x1024")->Unit(benchmark::kMillisecond);
BENCHMARK(bm_layout<true, 0>)->Name("BM_unswizzle_blockscale/16384x1024")->Unit(benchmark::kMillisecond);
BENCHMARK(bm_layout<false, 16>)->Name("BM_swizzle_blockscale/16384x1024/offset16")->Unit(benchmark::kMillisecond);
BENCHMARK(bm_layout<true, 16>)->Name("BM_unswizzle_blockscale/16384x1024/offset16")->Unit(benchmark::kMillisecond);

// The MoE layer's four tensors, back to back in one input and one output buffer, so that the
// memcpy baseline copies exactly the same bytes.
struct moe_buffers {
  static constexpr index_t e = 64;
  static constexpr index_t h = 4096;
  static constexpr index_t i = 1536;
  static constexpr index_t r1 = 2 * i;
  static constexpr std::size_t g1w = e * r1 * h / 2;
  static constexpr std::size_t g1s = e * r1 * h / 16;
  static constexpr std::size_t g2w = e * h * i / 2;
  static constexpr std::size_t g2s = e * h * i / 16;
  static constexpr std::size_t total = g1w + g1s + g2w + g2s;
  std::vector<std::uint8_t> in = random_bytes(total);
  std::vector<std::uint8_t> out = std::vector<std::uint8_t>(total, 0);

  template <class T>
  static qtl::trtllm_fp4_moe_tensors<T, T> tensors(T* p) {
    return {qtl::make_view(p, e, r1, h / 2), qtl::make_view(p + g1w, e, r1, h / 16),
            qtl::make_view(p + g1w + g1s, e, h, i / 2), qtl::make_view(p + g1w + g1s + g2w, e, h, i / 16)};
  }
};

moe_buffers& moe() {
  static moe_buffers b;
  return b;
}

void bm_memcpy_moe(benchmark::State& state) {
  auto& b = moe();
  qtl_bench::memcpy_baseline(state, b.in.data(), b.out.data(), moe_buffers::total);
}
BENCHMARK(bm_memcpy_moe)->Name("BM_memcpy_moe/679477248")->Unit(benchmark::kMillisecond);

void bm_moe_prepare(benchmark::State& state) {
  auto& b = moe();
  auto const in = moe_buffers::tensors(static_cast<std::uint8_t const*>(b.in.data()));
  auto const out = moe_buffers::tensors(b.out.data());
  qtl::trtllm_fp4_moe_shape const shape{
      .hidden_size = moe_buffers::h, .intermediate_size = moe_buffers::i, .num_experts = moe_buffers::e};
  for (auto _ : state) {
    qtl::prepare_static_weights_for_trtllm_fp4_moe(shape, in, out);
    benchmark::DoNotOptimize(b.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 2 *
                          static_cast<std::int64_t>(moe_buffers::total));
}
BENCHMARK(bm_moe_prepare)->Name("BM_prepare_trtllm_fp4_moe/E64_H4096_I1536")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
