// GPU group quantization beside a device-to-device copy (docs/performance.md: at least 0.85 of cudaMemcpyAsync
// D2D): fp16 and bf16 weights, 4096x4096 and 8192x28672, group 128 and channelwise, symmetric
// (uint4b8) and zero points (uint4). Timed with cudaEvents around each launch (manual time).
// bytes_per_second counts the weight read once and w_ref, w_q, w_s (and w_zp) written once;
// ratio_to_d2d_copy: against a D2D copy of the same bytes in the same run
// (bench/cuda/support/device_bench.cuh).
#include <qtl/cuda/quantize.cuh>

#include <benchmark/benchmark.h>

#include "support/device_bench.cuh"

#include <cstdint>
#include <vector>

namespace {

using qtl::index_t;

template <class T, int G, bool ZeroPoints>
void bm_quantize(benchmark::State& state) {
  index_t const k = state.range(0);
  index_t const n = state.range(1);
  index_t const groups = G == qtl::group_channelwise ? 1 : k / G;
  std::size_t const elems = static_cast<std::size_t>(k * n);
  std::size_t const scale_elems = static_cast<std::size_t>(groups * n);
  using qtl_bench::cuda::device_array;
  device_array<T> const w(elems);  // every element the bits 0x2121 (cudaMemset below)
  device_array<T> const ref(elems);
  device_array<std::int32_t> const q(elems);
  device_array<T> const s(scale_elems);
  device_array<std::int32_t> const zp(scale_elems);
  qtl::quantize_outputs<T> out{qtl::make_view(ref.get(), k, n), qtl::make_view(q.get(), k, n),
                               qtl::make_view(s.get(), groups, n),
                               qtl::make_view(zp.get(), ZeroPoints ? groups : 0, n)};
  qtl::quantize_options opt;
  opt.zero_points = ZeroPoints;
  qtl::view2d<T const> const wv = qtl::make_view(static_cast<T const*>(w.get()), k, n);
  std::int64_t const bytes = static_cast<std::int64_t>(elems) * static_cast<std::int64_t>(2 * sizeof(T) + 4) +
                             groups * n * static_cast<std::int64_t>(sizeof(T) + (ZeroPoints ? 4 : 0));
  bool const ready = w.ok() && ref.ok() && q.ok() && s.ok() && zp.ok() &&
                     cudaMemset(w.get(), 0x21, w.bytes()) == cudaSuccess;
  qtl_bench::cuda::time_against_copy(state, bytes, ready, [&] {
    return ZeroPoints ? qtl::cuda::quantize_weights<qtl::uint4>(wv, index_t{G}, out, opt, nullptr)
                      : qtl::cuda::quantize_weights<qtl::uint4b8>(wv, index_t{G}, out, opt, nullptr);
  });
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"K", "N"})->Args({4096, 4096})->Args({8192, 28672})->Apply(qtl_bench::cuda::device_benchmark);
}

}  // namespace

#define QTL_QUANTIZE_CASE(T, group, zero_points) BENCHMARK(bm_quantize<T, group, zero_points>)->Apply(shapes);
#include "support/cases.def"

BENCHMARK_MAIN();
