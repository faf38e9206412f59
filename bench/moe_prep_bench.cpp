// Host throughput of vLLM's FlashInfer MoE weight preparations beside memcpy (docs/performance.md's
// contract), one core, on a 64-expert NVFP4 layer (H = 4096, I = 1536):
//   prepare_trtllm_fp4_moe/not_gated  GEMM1 of I rows (is_gated_activation=False)
//                                     -> compare with BM_memcpy_moe/not_gated
//   align_fp4_moe_weights_for_fi      gated, min_alignment 128: I aligned, so a copy (vLLM returns
//                                     its inputs there; QTL writes new tensors)
//                                     -> compare with BM_memcpy_moe/gated
//   align_fp4_moe_weights_for_fi/I1472  I = 1472 padded to 1536 (a shard that needs it)
//   align_fp4_moe_hidden_dim_for_fi   gated, min_alignment 256: H aligned, a copy
//   pad_nvfp4_weight_for_cutlass      the gated GEMM1 weights as one [E*2I - 8, H/2 - 4] weight,
//                                     padded to [E*2I, H/2]
//   prepare_trtllm_mxint4_moe         the same sizes as an MXINT4 layer (int4 weights, a BF16 scale
//                                     per 32), /uint4b8: from the checkpoint's words (every byte
//                                     XOR 0x88), /int4: from signed int4 bytes
//                                     -> compare with BM_memcpy_moe/mxint4
//   shuffle_deepseek_fp8_moe_weights  an FP8 layer w13 [E, 2I, H], w2 [E, H, I]: tile-64 shuffle,
//                                     BlockMajorK (the BF16 block layout runs the same pass)
//   rotate_weights_for_fi_trtllm_fp8_per_tensor_moe/gated   the same layer, whole rows
//                                     -> both compare with BM_memcpy_moe/fp8
//   shuffle_mxfp8_moe_weights/gated   the same layer and its E8M0 scales (H/32, I/32 a row)
//                                     -> compare with BM_memcpy_moe/mxfp8
//   convert_moe_weights_to_flashinfer_trtllm_block_layout/gated  a BF16 layer w13 [E, 2I, H],
//                                     w2 [E, H, I] (2.25 GiB): gated GEMM1 rows, BlockMajorK of
//                                     128 bytes, out of place and /inplace (one expert of scratch)
//                                     -> compare with BM_memcpy_moe/bf16
// bytes_per_second counts every input byte read once and every output byte written once; the
// memcpy benchmarks copy a buffer as large as the operation's input and count twice its size.
// Buffers are allocated (and touched) outside the timed loop, once per benchmark.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include <qtl/moe.hpp>
#include <qtl/moe_trtllm.hpp>

#include "support/memcpy_baseline.hpp"
#include "support/random_bytes.hpp"

namespace {

using qtl::index_t;

constexpr index_t experts = 64;
constexpr index_t hidden = 4096;
constexpr index_t inter = 1536;

using qtl_bench::random_bytes;

std::size_t bytes_of(qtl::fp4_moe_padding const& x) {
  std::size_t n = 0;
  for (auto const& t : x.extents) {
    n += static_cast<std::size_t>(t[0] * t[1] * t[2]);
  }
  return n;
}

// The four tensors of `x` back to back from `p`.
template <class T>
qtl::trtllm_fp4_moe_tensors<T, T> views(qtl::fp4_moe_padding const& x, T* p) {
  qtl::view3d<T> v[4];
  for (int k = 0; k < 4; ++k) {
    v[k] = qtl::make_view(p, x.extents[k][0], x.extents[k][1], x.extents[k][2]);
    p += x.extents[k][0] * x.extents[k][1] * x.extents[k][2];
  }
  return {v[0], v[1], v[2], v[3]};
}

qtl::fp4_moe_padding layer(bool gated, index_t i = inter) {
  return qtl::fp4_moe_padding::of(experts, (gated ? 2 : 1) * i, hidden, i);
}

void count(benchmark::State& state, std::size_t in, std::size_t out) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(in + out));
}

void bm_memcpy_moe(benchmark::State& state) { qtl_bench::memcpy_baseline(state, bytes_of(layer(state.range(0) != 0))); }
BENCHMARK(bm_memcpy_moe)->Name("BM_memcpy_moe/not_gated")->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_memcpy_moe)->Name("BM_memcpy_moe/gated")->Arg(1)->Unit(benchmark::kMillisecond);

void bm_prepare_not_gated(benchmark::State& state) {
  auto const x = layer(false);
  auto const in = random_bytes(bytes_of(x));
  std::vector<std::uint8_t> out(in.size(), 0);
  qtl::trtllm_fp4_moe_shape const shape{
      .hidden_size = hidden, .intermediate_size = inter, .num_experts = experts, .gated = false};
  for (auto _ : state) {
    qtl::prepare_static_weights_for_trtllm_fp4_moe(shape, views(x, in.data()), views(x, out.data()));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  count(state, in.size(), out.size());
}
BENCHMARK(bm_prepare_not_gated)->Name("BM_prepare_trtllm_fp4_moe/not_gated")->Unit(benchmark::kMillisecond);

// range(0): 0 the intermediate op, 1 the hidden one; range(1): the intermediate size.
void bm_align(benchmark::State& state) {
  bool const hidden_op = state.range(0) != 0;
  auto const x = layer(true, state.range(1));
  auto const in = random_bytes(bytes_of(x));
  auto const in_v = views(x, in.data());
  auto const xo = hidden_op ? qtl::align_fp4_moe_hidden_dim_for_fi_padding(in_v, 256)
                            : qtl::align_fp4_moe_weights_for_fi_padding(in_v, true, 128);
  std::vector<std::uint8_t> out(bytes_of(xo), 0);
  auto const out_v = views(xo, out.data());
  for (auto _ : state) {
    if (hidden_op) {
      qtl::align_fp4_moe_hidden_dim_for_fi(in_v, out_v, 256);
    } else {
      qtl::align_fp4_moe_weights_for_fi(in_v, out_v, true, 128);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  count(state, in.size(), out.size());
}
BENCHMARK(bm_align)->Name("BM_align_fp4_moe_weights_for_fi/I1536")->Args({0, inter})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_align)->Name("BM_align_fp4_moe_weights_for_fi/I1472")->Args({0, 1472})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_align)->Name("BM_align_fp4_moe_hidden_dim_for_fi/H4096")->Args({1, inter})->Unit(benchmark::kMillisecond);

void bm_pad_cutlass(benchmark::State& state) {
  index_t const rows = experts * 2 * inter - 8;
  index_t const cols = hidden / 2 - 4;
  auto const in = random_bytes(static_cast<std::size_t>(rows * cols));
  auto const p = qtl::pad_nvfp4_weight_for_cutlass_shape(rows, cols, 32);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(p.rows * p.col_bytes), 0);
  for (auto _ : state) {
    qtl::pad_nvfp4_weight_for_cutlass(qtl::make_view(in.data(), rows, cols),
                                      qtl::make_view(out.data(), p.rows, p.col_bytes), 32);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  count(state, in.size(), out.size());
}
BENCHMARK(bm_pad_cutlass)->Name("BM_pad_nvfp4_weight_for_cutlass/196600x2044")->Unit(benchmark::kMillisecond);

void bm_memcpy_pad(benchmark::State& state) {
  qtl_bench::memcpy_baseline(state, static_cast<std::size_t>((experts * 2 * inter - 8) * (hidden / 2 - 4)));
}
BENCHMARK(bm_memcpy_pad)->Name("BM_memcpy/196600x2044")->Unit(benchmark::kMillisecond);

// The MXINT4 layer: gemm1 weights [E, 2I, H/2] and gemm2 weights [E, H, I/2] (bytes), then the BF16
// scales [E, 2I, H/32] and [E, H, I/32] (2-byte words), back to back.
constexpr std::size_t mxint4_weight_bytes = static_cast<std::size_t>(experts * 3 * inter * hidden / 2);
constexpr std::size_t mxint4_scale_words = static_cast<std::size_t>(experts * 3 * inter * hidden / 32);

template <class B>
auto mxint4_views(B* p) {
  using S = std::conditional_t<std::is_const_v<B>, std::uint16_t const, std::uint16_t>;
  auto* const s = reinterpret_cast<S*>(p + mxint4_weight_bytes);
  index_t const w1 = experts * 2 * inter * hidden / 2;
  index_t const s1 = experts * 2 * inter * hidden / 32;
  return qtl::trtllm_fp4_moe_tensors<B, S>{
      qtl::make_view(p, experts, 2 * inter, hidden / 2), qtl::make_view(s, experts, 2 * inter, hidden / 32),
      qtl::make_view(p + w1, experts, hidden, inter / 2), qtl::make_view(s + s1, experts, hidden, inter / 32)};
}

void bm_memcpy_mxint4(benchmark::State& state) {
  qtl_bench::memcpy_baseline(state, mxint4_weight_bytes + 2 * mxint4_scale_words);
}
BENCHMARK(bm_memcpy_mxint4)->Name("BM_memcpy_moe/mxint4")->Unit(benchmark::kMillisecond);

// range(0): 1 uint4b8 words, 0 signed int4 bytes.
void bm_prepare_mxint4(benchmark::State& state) {
  auto const in = random_bytes(mxint4_weight_bytes + 2 * mxint4_scale_words);
  std::vector<std::uint8_t> out(in.size(), 0);
  qtl::trtllm_mxint4_moe_shape const shape{
      .hidden_size = hidden, .intermediate_size = inter, .num_experts = experts, .uint4b8 = state.range(0) != 0};
  for (auto _ : state) {
    qtl::prepare_static_weights_for_trtllm_mxint4_moe(shape, mxint4_views(in.data()), mxint4_views(out.data()));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  count(state, in.size(), out.size());
}
BENCHMARK(bm_prepare_mxint4)->Name("BM_prepare_trtllm_mxint4_moe/uint4b8")->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_prepare_mxint4)->Name("BM_prepare_trtllm_mxint4_moe/int4")->Arg(0)->Unit(benchmark::kMillisecond);

// The FP8 layer: w13 [E, 2I, H] then w2 [E, H, I] (bytes), then (MXFP8) their scales [.., H/32] and
// [.., I/32].
constexpr std::size_t fp8_weight_bytes = static_cast<std::size_t>(experts * 3 * inter * hidden);
constexpr std::size_t fp8_scale_bytes = fp8_weight_bytes / 32;

template <class B>
qtl::trtllm_fp4_moe_tensors<B, B> fp8_views(B* p) {
  index_t const w1 = experts * 2 * inter * hidden;
  return {qtl::make_view(p, experts, 2 * inter, hidden),
          qtl::make_view(p + fp8_weight_bytes, experts, 2 * inter, hidden / 32),
          qtl::make_view(p + w1, experts, hidden, inter),
          qtl::make_view(p + fp8_weight_bytes + w1 / 32, experts, hidden, inter / 32)};
}

void bm_memcpy_fp8(benchmark::State& state) {
  qtl_bench::memcpy_baseline(state, fp8_weight_bytes + (state.range(0) != 0 ? fp8_scale_bytes : 0));
}
BENCHMARK(bm_memcpy_fp8)->Name("BM_memcpy_moe/fp8")->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_memcpy_fp8)->Name("BM_memcpy_moe/mxfp8")->Arg(1)->Unit(benchmark::kMillisecond);

// range(0): 0 DeepSeek FP8, 1 FP8 per tensor (gated), 2 MXFP8 (gated, with the scales).
void bm_fp8_layout(benchmark::State& state) {
  int const which = static_cast<int>(state.range(0));
  auto const in = random_bytes(fp8_weight_bytes + (which == 2 ? fp8_scale_bytes : 0));
  std::vector<std::uint8_t> out(in.size(), 0);
  auto const i = fp8_views(in.data());
  auto const o = fp8_views(out.data());
  for (auto _ : state) {
    if (which == 0) {
      qtl::shuffle_deepseek_fp8_moe_weights(i.gemm1_weights, i.gemm2_weights, o.gemm1_weights, o.gemm2_weights);
    } else if (which == 1) {
      qtl::rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(i.gemm1_weights, i.gemm2_weights, true, o.gemm1_weights,
                                                           o.gemm2_weights);
    } else {
      qtl::shuffle_mxfp8_moe_weights(i, o, true);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  count(state, in.size(), out.size());
}
BENCHMARK(bm_fp8_layout)->Name("BM_shuffle_deepseek_fp8_moe_weights")->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_fp8_layout)
    ->Name("BM_rotate_weights_for_fi_trtllm_fp8_per_tensor_moe/gated")
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_fp8_layout)->Name("BM_shuffle_mxfp8_moe_weights/gated")->Arg(2)->Unit(benchmark::kMillisecond);

// The BF16 layer as bytes: w13 [E, 2I, 2H] then w2 [E, H, 2I]. Filled with a byte pattern
// rather than random_bytes (2.25 GiB): the layout moves bytes without reading them as numbers.
constexpr std::size_t bf16_weight_bytes = 2 * fp8_weight_bytes;

template <class B>
std::pair<qtl::view3d<B>, qtl::view3d<B>> bf16_views(B* p) {
  index_t const w1 = experts * 2 * inter * 2 * hidden;
  return {qtl::make_view(p, experts, 2 * inter, 2 * hidden), qtl::make_view(p + w1, experts, hidden, 2 * inter)};
}

std::vector<std::uint8_t> bf16_layer() {
  std::vector<std::uint8_t> v(bf16_weight_bytes);
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<std::uint8_t>(i * 131 + (i >> 12));
  }
  return v;
}

void bm_memcpy_bf16(benchmark::State& state) { qtl_bench::memcpy_baseline(state, bf16_weight_bytes); }
BENCHMARK(bm_memcpy_bf16)->Name("BM_memcpy_moe/bf16")->Unit(benchmark::kMillisecond);

// range(0): 0 out of place, 1 in place (each iteration lays out the previous one's output again:
// the same work).
void bm_bf16_layout(benchmark::State& state) {
  bool const inplace = state.range(0) != 0;
  auto in = bf16_layer();
  std::vector<std::uint8_t> out(inplace ? 0 : in.size(), 0);
  auto const i = bf16_views(std::as_const(in).data());
  for (auto _ : state) {
    if (inplace) {
      auto const w = bf16_views(in.data());
      qtl::convert_moe_weights_to_flashinfer_trtllm_block_layout_inplace(w.first, w.second, true);
    } else {
      auto const o = bf16_views(out.data());
      qtl::convert_moe_weights_to_flashinfer_trtllm_block_layout(i.first, i.second, true, o.first, o.second);
    }
    benchmark::DoNotOptimize(inplace ? in.data() : out.data());
    benchmark::ClobberMemory();
  }
  count(state, in.size(), in.size());
}
BENCHMARK(bm_bf16_layout)
    ->Name("BM_convert_moe_weights_to_flashinfer_trtllm_block_layout/gated")
    ->Arg(0)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_bf16_layout)
    ->Name("BM_convert_moe_weights_to_flashinfer_trtllm_block_layout/gated/inplace")
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
