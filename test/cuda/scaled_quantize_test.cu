// <qtl/cuda/scaled_quantize.cuh> against the host ops of <qtl/scaled_quantize.hpp> (which the unit
// tests hold to the golden cases of vLLM's own functions), bit for bit: every group shape, bf16,
// f16 and f32 inputs, a float32 compute type, e4m3fn and e4m3fnuz, NaN, Inf and all-zero groups,
// strided views, the broadcasts, and launcher errors. The shared main exits 77 (skipped) without a
// GPU.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>

#include <qtl/cuda/scaled_quantize.cuh>
#include <qtl/scaled_quantize.hpp>

namespace {

using qtl::bfloat16_t;
using qtl::float8_e4m3fn_t;
using qtl::group_shape;
using qtl::index_t;
using qtl::make_view;
using qtl_test::device_buffer;

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

// Values over many magnitudes, with an all-zero row, a NaN row 2, an Inf in row 3 (when `special`).
template <class T>
std::vector<T> sample(index_t m, index_t n, std::mt19937& rng, bool special) {
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<T> x(static_cast<std::size_t>(m * n));
  for (index_t i = 0; i < m; ++i) {
    int const e = exponent(rng);
    for (index_t j = 0; j < n; ++j) {
      float v = std::ldexp(normal(rng), e);
      if (special && i == 0) {
        v = 0.0f;
      } else if (special && i == 2 && j == 3) {
        v = std::numeric_limits<float>::quiet_NaN();
      } else if (special && i == 3 && j == n - 1) {
        v = -std::numeric_limits<float>::infinity();
      }
      x[static_cast<std::size_t>(i * n + j)] = qtl::from_float<T>(v);
    }
  }
  return x;
}

template <class Q, class C, class T>
void check_quantize(index_t m, index_t n, group_shape g, std::mt19937& rng, bool special) {
  INFO("M = " << m << ", N = " << n << ", group " << g.row << "x" << g.col);
  auto const x = sample<T>(m, n, rng, special);
  auto const host = qtl::scaled_quantize<Q, C>(make_view(x.data(), m, n), g);
  index_t const bm = host.scale.extent(0);
  index_t const bn = host.scale.extent(1);
  device_buffer<T> dx(x);
  device_buffer<Q> dq(static_cast<std::size_t>(m * n));
  device_buffer<float> ds(static_cast<std::size_t>(bm * bn));
  CUDA_REQUIRE((qtl::cuda::scaled_quantize<Q, C>(make_view<T const>(dx.ptr, m, n), g, make_view(dq.ptr, m, n),
                                                 make_view(ds.ptr, bm, bn))));
  CHECK(qtl_test::raw(dq.get()) == qtl_test::raw(host.q.data(), static_cast<std::size_t>(m * n)));
  CHECK(qtl_test::raw(ds.get()) == qtl_test::raw(host.scale.data(), static_cast<std::size_t>(bm * bn)));
}

TEST_CASE("cuda scaled_quantize equals the host's for every group shape", "[cuda][scaled_quantize]") {
  std::mt19937 rng(2300);
  for (group_shape const g : {group_shape::per_tensor(), group_shape::per_token(), group_shape::per_channel(),
                              group_shape{128, 128}, group_shape{1, 128}}) {
    check_quantize<float8_e4m3fn_t, void, bfloat16_t>(256, 384, g, rng, true);
    check_quantize<float8_e4m3fn_t, void, float>(256, 384, g, rng, true);
    check_quantize<float8_e4m3fn_t, void, qtl::half_t>(128, 256, g, rng, true);
    check_quantize<float8_e4m3fn_t, float, bfloat16_t>(128, 256, g, rng, true);
    check_quantize<qtl::float8_e4m3fnuz_t, void, bfloat16_t>(128, 256, g, rng, true);
  }
  check_quantize<float8_e4m3fn_t, void, float>(100, 200, group_shape::per_token(), rng, true);
  check_quantize<float8_e4m3fn_t, void, float>(1, 1, group_shape::per_tensor(), rng, false);
}

TEST_CASE("cuda scaled_quantize takes strided views", "[cuda][scaled_quantize]") {
  std::mt19937 rng(2301);
  index_t const m = 64;
  index_t const n = 96;
  auto const x = sample<float>(2 * m, n, rng, false);
  qtl::view2d<float const> every_other = make_view(x.data(), m, n);
  every_other.stride[0] = 2 * n;
  auto const host = qtl::scaled_quantize<float8_e4m3fn_t>(every_other, group_shape{1, 32});
  device_buffer<float> dx(x);
  auto dv = every_other;
  dv.data = dx.ptr;
  device_buffer<float8_e4m3fn_t> dq(static_cast<std::size_t>(m * n));
  device_buffer<float> ds(static_cast<std::size_t>(2 * m * 3));
  qtl::view2d<float> sv = make_view(ds.ptr, m, 3);
  sv.stride[0] = 6;
  CUDA_REQUIRE(qtl::cuda::scaled_quantize<float8_e4m3fn_t>(dv, group_shape{1, 32}, make_view(dq.ptr, m, n), sv));
  CHECK(qtl_test::raw(dq.get()) == qtl_test::raw(host.q.data(), static_cast<std::size_t>(m * n)));
  auto const s = ds.get();
  for (index_t i = 0; i < m; ++i) {
    for (index_t j = 0; j < 3; ++j) {
      CHECK(qtl::float_to_bits(s[static_cast<std::size_t>(i * 6 + j)]) == qtl::float_to_bits(host.scale.view()(i, j)));
    }
  }
}

TEST_CASE("cuda scaled_dequantize and group_broadcast equal the host's", "[cuda][scaled_quantize]") {
  std::mt19937 rng(2302);
  index_t const m = 256;
  index_t const n = 384;
  auto const x = sample<float>(m, n, rng, false);
  for (group_shape const g : {group_shape::per_tensor(), group_shape::per_token(), group_shape::per_channel(),
                              group_shape{128, 128}, group_shape{1, 128}}) {
    auto const r = qtl::scaled_quantize<qtl::float8_e4m3fnuz_t>(make_view(x.data(), m, n), g);
    index_t const bm = r.scale.extent(0);
    index_t const bn = r.scale.extent(1);
    auto const qv = make_view<qtl::float8_e4m3fnuz_t const>(r.q.data(), m, n);
    auto const sv = make_view<float const>(r.scale.data(), bm, bn);
    std::vector<bfloat16_t> want(static_cast<std::size_t>(m * n));
    qtl::scaled_dequantize<bfloat16_t>(qv, sv, make_view(want.data(), m, n));
    device_buffer<qtl::float8_e4m3fnuz_t> dq(std::vector<qtl::float8_e4m3fnuz_t>(r.q.data(), r.q.data() + m * n));
    device_buffer<float> ds(std::vector<float>(r.scale.data(), r.scale.data() + bm * bn));
    device_buffer<bfloat16_t> out(static_cast<std::size_t>(m * n));
    CUDA_REQUIRE(qtl::cuda::scaled_dequantize<bfloat16_t>(make_view<qtl::float8_e4m3fnuz_t const>(dq.ptr, m, n),
                                                          make_view<float const>(ds.ptr, bm, bn),
                                                          make_view(out.ptr, m, n)));
    CHECK(qtl_test::raw(out.get()) == qtl_test::raw(want));
    std::vector<float> wide(static_cast<std::size_t>(m * n));
    qtl::group_broadcast(sv, make_view(wide.data(), m, n));
    device_buffer<float> dwide(static_cast<std::size_t>(m * n));
    CUDA_REQUIRE(qtl::cuda::group_broadcast(make_view<float const>(ds.ptr, bm, bn), make_view(dwide.ptr, m, n)));
    CHECK(qtl_test::raw(dwide.get()) == qtl_test::raw(wide));
  }
}

TEST_CASE("cuda scaled_quantize launchers refuse what the host ops reject", "[cuda][scaled_quantize]") {
  device_buffer<float> x(12);
  device_buffer<float8_e4m3fn_t> q(12);
  device_buffer<float> s(12);
  auto const xv = make_view<float const>(x.ptr, 3, 4);
  CHECK(qtl::cuda::scaled_quantize<float8_e4m3fn_t>(xv, group_shape{2, 2}, make_view(q.ptr, 3, 4),
                                                    make_view(s.ptr, 1, 2)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::scaled_quantize<float8_e4m3fn_t>(xv, group_shape::per_token(), make_view(q.ptr, 3, 4),
                                                    make_view(s.ptr, 1, 3)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::scaled_quantize<float8_e4m3fn_t>(xv, group_shape::per_token(), make_view(q.ptr, 3, 4),
                                                    make_view(s.ptr, 3, 1), -1.0f) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::group_broadcast(make_view<float const>(s.ptr, 1, 3), make_view(x.ptr, 3, 4)) ==
        cudaErrorInvalidValue);
  CHECK(qtl::cuda::scaled_dequantize<float>(make_view<float8_e4m3fn_t const>(q.ptr, 3, 4),
                                            make_view<float const>(s.ptr, 1, 1),
                                            make_view(x.ptr, 4, 3)) == cudaErrorInvalidValue);
}

}  // namespace
