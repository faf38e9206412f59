// qtl/cuda/fp4.cuh against the host reference of qtl/fp4.hpp, bit for bit: NVFP4 global scale,
// NVFP4/MXFP4/MXFP8 block quantization in the linear and 128x4 layouts (padding zeroed), and
// dequantization into float, fp16 and bf16. Skipped (77) without a GPU by test/cuda/main.cu.
#include <qtl/cuda/fp4.cuh>
#include <qtl/fp4.hpp>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>
#include "test_data.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <vector>

namespace {

using qtl::bfloat16_t;
using qtl::index_t;

using qtl_test::device_buffer;
using qtl_test::raw;

template <class T>
std::vector<T> random_input(index_t rows, index_t cols, std::uint32_t seed) {
  auto v = qtl_test::block_ranged_normal<T>(rows, cols, seed, 7);
  for (std::size_t i = 32; i < 64 && i < v.size(); ++i) {
    v[i] = qtl::from_float<T>(0.0f);  // an all-zero block
  }
  if (v.size() > 100) {
    v[70] = qtl::from_float<T>(std::numeric_limits<float>::quiet_NaN());
  }
  return v;
}

// Host and device dequantization of the same codes and scales into Out, bit for bit.
template <class F, class Layout, class Out>
void dequant_as(std::vector<typename F::element> const& hq, std::vector<typename F::scale> const& hs, float hgs,
                typename F::element const* dq, typename F::scale const* ds, float const* dgs, index_t m, index_t k) {
  index_t const vk = k / F::elements_per_value;
  std::vector<Out> hd(static_cast<std::size_t>(m * k));
  qtl::block_dequantize<F, Layout>(qtl::make_view<typename F::element const>(hq.data(), m, vk),
                                   std::span<typename F::scale const>(hs), hgs, qtl::make_view(hd.data(), m, k));
  device_buffer<Out> dd(hd.size());
  REQUIRE(qtl::cuda::block_dequantize<F, Layout>(qtl::make_view<typename F::element const>(dq, m, vk), ds, dgs,
                                                 qtl::make_view(dd.ptr, m, k)) == cudaSuccess);
  CHECK(raw(dd.get()) == raw(hd));
}

template <class F, class Layout, class T>
void compare(index_t m, index_t k) {
  auto const x = random_input<T>(m, k, static_cast<std::uint32_t>(m + k));
  auto const in = qtl::make_view<T const>(x.data(), m, k);
  index_t const vk = k / F::elements_per_value;
  std::vector<typename F::element> hq(static_cast<std::size_t>(m * vk));
  std::vector<typename F::scale> hs(static_cast<std::size_t>(qtl::block_scale_bytes<F, Layout>(m, k)));
  float const hgs = F::has_global_scale ? qtl::nvfp4_global_scale(in) : 1.0f;
  qtl::block_quantize<F, Layout>(in, qtl::make_view(hq.data(), m, vk), std::span(hs), hgs);

  device_buffer<T> dx(x);
  auto const din = qtl::make_view<T const>(dx.ptr, m, k);
  device_buffer<float> dgs(1);
  if constexpr (F::has_global_scale) {
    REQUIRE(qtl::cuda::nvfp4_global_scale(din, dgs.ptr) == cudaSuccess);
    CHECK(qtl::float_to_bits(dgs.get()[0]) == qtl::float_to_bits(hgs));
  }
  device_buffer<typename F::element> dq(hq.size());
  device_buffer<typename F::scale> ds(std::vector<typename F::scale>(hs.size(), typename F::scale{0xCD}));
  REQUIRE(qtl::cuda::block_quantize<F, Layout>(din, qtl::make_view(dq.ptr, m, vk), ds.ptr,
                                               F::has_global_scale ? dgs.ptr : nullptr) == cudaSuccess);
  CHECK(raw(dq.get()) == raw(hq));
  CHECK(raw(ds.get()) == raw(hs));

  std::vector<float> hd(static_cast<std::size_t>(m * k));
  qtl::block_dequantize<F, Layout>(qtl::make_view<typename F::element const>(hq.data(), m, vk),
                                   std::span<typename F::scale const>(hs), hgs, qtl::make_view(hd.data(), m, k));
  device_buffer<float> dd(hd.size());
  REQUIRE(qtl::cuda::block_dequantize<F, Layout>(qtl::make_view<typename F::element const>(dq.ptr, m, vk), ds.ptr,
                                                 F::has_global_scale ? dgs.ptr : nullptr,
                                                 qtl::make_view(dd.ptr, m, k)) == cudaSuccess);
  CHECK(raw(dd.get()) == raw(hd));
  // The same dequantization into fp16 and bf16 (one rounding of the float product).
  dequant_as<F, Layout, qtl::half_t>(hq, hs, hgs, dq.ptr, ds.ptr, F::has_global_scale ? dgs.ptr : nullptr, m, k);
  dequant_as<F, Layout, bfloat16_t>(hq, hs, hgs, dq.ptr, ds.ptr, F::has_global_scale ? dgs.ptr : nullptr, m, k);
}

// A view of rows x cols inside a buffer whose rows are `stride` elements apart (padded rows).
template <class T>
qtl::view2d<T> padded_view(T* p, index_t rows, index_t cols, index_t stride) {
  qtl::view2d<T> v = qtl::make_view(p, rows, cols);
  v.stride[0] = stride;
  return v;
}

// The global scale, block quantization and dequantization (float and bf16) of views whose rows
// are padded: input k + 5 elements apart, values vk + 3, dequantized output k + 7. Host and device
// agree over the whole buffers, and the padding of the outputs keeps its fill (0x5A codes, 0x7E7E
// bf16 / 0x7E7E7E7E float).
template <class F, class Layout, class T>
void compare_padded(index_t m, index_t k) {
  CAPTURE(m, k, F::block_size, F::elements_per_value);
  index_t const vk = k / F::elements_per_value;
  index_t const in_stride = k + 5, v_stride = vk + 3, out_stride = k + 7;
  auto const x = random_input<T>(m, in_stride, static_cast<std::uint32_t>(3 * m + k));
  auto const in = padded_view<T const>(x.data(), m, k, in_stride);
  using E = typename F::element;
  std::vector<E> const fill(static_cast<std::size_t>(m * v_stride), E{0x5A});
  std::vector<E> hq = fill;
  std::vector<typename F::scale> hs(static_cast<std::size_t>(qtl::block_scale_bytes<F, Layout>(m, k)));
  float const hgs = F::has_global_scale ? qtl::nvfp4_global_scale(in) : 1.0f;
  qtl::block_quantize<F, Layout>(in, padded_view(hq.data(), m, vk, v_stride), std::span(hs), hgs);
  for (index_t r = 0; r < m; ++r) {
    REQUIRE(hq[static_cast<std::size_t>(r * v_stride + vk)].bits == 0x5A);
  }

  device_buffer<T> dx(x);
  auto const din = padded_view<T const>(dx.ptr, m, k, in_stride);
  device_buffer<float> dgs(1);
  if constexpr (F::has_global_scale) {
    REQUIRE(qtl::cuda::nvfp4_global_scale(din, dgs.ptr) == cudaSuccess);
    CHECK(qtl::float_to_bits(dgs.get()[0]) == qtl::float_to_bits(hgs));
  }
  float const* gsp = F::has_global_scale ? dgs.ptr : nullptr;
  device_buffer<E> dq(fill);
  device_buffer<typename F::scale> ds(std::vector<typename F::scale>(hs.size(), typename F::scale{0xCD}));
  REQUIRE(qtl::cuda::block_quantize<F, Layout>(din, padded_view(dq.ptr, m, vk, v_stride), ds.ptr, gsp) ==
          cudaSuccess);
  CHECK(raw(dq.get()) == raw(hq));
  CHECK(raw(ds.get()) == raw(hs));

  auto const hv = padded_view<E const>(hq.data(), m, vk, v_stride);
  auto const dv = padded_view<E const>(dq.ptr, m, vk, v_stride);
  std::vector<float> hd(static_cast<std::size_t>(m * out_stride), qtl::bits_to_float(0x7E7E7E7Eu));
  qtl::block_dequantize<F, Layout>(hv, std::span<typename F::scale const>(hs), hgs,
                                   padded_view(hd.data(), m, k, out_stride));
  device_buffer<float> dd(hd);
  REQUIRE(qtl::cuda::block_dequantize<F, Layout>(dv, ds.ptr, gsp, padded_view(dd.ptr, m, k, out_stride)) ==
          cudaSuccess);
  CHECK(raw(dd.get()) == raw(hd));
  std::vector<bfloat16_t> hb(static_cast<std::size_t>(m * out_stride), bfloat16_t{0x7E7E});
  qtl::block_dequantize<F, Layout>(hv, std::span<typename F::scale const>(hs), hgs,
                                   padded_view(hb.data(), m, k, out_stride));
  device_buffer<bfloat16_t> db(hb);
  REQUIRE(qtl::cuda::block_dequantize<F, Layout>(dv, ds.ptr, gsp, padded_view(db.ptr, m, k, out_stride)) ==
          cudaSuccess);
  CHECK(raw(db.get()) == raw(hb));
  for (index_t r = 0; r < m; ++r) {
    CHECK(qtl::float_to_bits(hd[static_cast<std::size_t>(r * out_stride + k)]) == 0x7E7E7E7Eu);
    CHECK(hb[static_cast<std::size_t>(r * out_stride + k + 6)].bits == 0x7E7E);
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("device block quantization equals the host (linear scales)", "[cuda][fp4]", qtl::block_formats) {
  compare<TestType, qtl::layout_linear, bfloat16_t>(37, 512);
  compare<TestType, qtl::layout_linear, float>(3, 96);
}

TEMPLATE_LIST_TEST_CASE("device block quantization equals the host (128x4 scales, padding zeroed)", "[cuda][fp4]", qtl::block_formats) {
  compare<TestType, qtl::layout_128x4, bfloat16_t>(130, 6 * TestType::block_size);
  compare<TestType, qtl::layout_128x4, qtl::half_t>(300, 1024);
}

TEMPLATE_LIST_TEST_CASE("device block quantization of padded rows equals the host; padding untouched", "[cuda][fp4]", qtl::block_formats) {
  compare_padded<TestType, qtl::layout_linear, bfloat16_t>(37, 4 * TestType::block_size);
  compare_padded<TestType, qtl::layout_128x4, qtl::half_t>(130, 6 * TestType::block_size);
  compare_padded<TestType, qtl::layout_linear, float>(5, 96);
}

TEST_CASE("device block quantization refuses bad shapes", "[cuda][fp4]") {
  device_buffer<float> dx(48);
  device_buffer<qtl::float4_e2m1x2_t> dq(24);
  device_buffer<qtl::float8_e4m3fn_t> ds(3);
  device_buffer<float> dgs(1);
  CHECK(qtl::cuda::block_quantize<qtl::nvfp4>(qtl::make_view<float const>(dx.ptr, 2, 24),
                                              qtl::make_view(dq.ptr, 2, 12), ds.ptr, dgs.ptr) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::block_quantize<qtl::nvfp4>(qtl::make_view<float const>(dx.ptr, 1, 48),
                                              qtl::make_view(dq.ptr, 1, 24), ds.ptr, nullptr) == cudaErrorInvalidValue);
}
