// <qtl/cuda/ct_quantize.cuh> against the host ops of <qtl/ct_quantize.hpp>, <qtl/ct_fp4.hpp> and
// <qtl/ct_mxfp8.hpp>, bit for bit: the golden cases (recorded from compressed-tensors) replayed on the
// device, then random weights of every dtype, 4 and 8 bits, symmetric and asymmetric, groups and
// channels, NaN/Inf (the `nonfinite` flag) and launcher errors. The shared main exits 77
// (skipped) without a GPU.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>
#include <golden.hpp>

#include <qtl/ct_fp4.hpp>
#include <qtl/ct_mxfp8.hpp>
#include <qtl/ct_quantize.hpp>
#include <qtl/cuda/ct_quantize.cuh>
#include <qtl/fp8.hpp>

#include "test_data.hpp"

namespace {

using qtl::index_t;
using qtl::make_view;
using qtl_test::device_buffer;

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

/// Device and host ct_pack_quantize of w [n, k]; `allow` lets the host quantize NaN/Inf, whose
/// presence the device reports in its flag.
template <class T>
void check_pack(std::vector<T> const& w, index_t n, index_t k, int bits, index_t group_size, bool sym, bool allow) {
  INFO("bits " << bits << ", group " << group_size << (sym ? ", sym" : ", asym") << ", [" << n << ", " << k << "]");
  qtl::ct_pack_options opt;
  opt.bits = bits;
  opt.group_size = group_size;
  opt.symmetric = sym;
  opt.allow_nonfinite = allow;
  index_t const g = k / qtl::ct_pack_group_size(k, opt);
  index_t const words = k / (32 / bits);
  std::vector<std::int32_t> packed(static_cast<std::size_t>(n * words));
  std::vector<T> scales(static_cast<std::size_t>(n * g));
  std::vector<std::int32_t> zp(static_cast<std::size_t>(sym ? 0 : n * g));
  qtl::ct_pack_quantize(qtl_test::cview(w, n, k),
                        qtl::ct_pack_outputs<T>{make_view(packed.data(), n, words), make_view(scales.data(), n, g),
                                                make_view(zp.data(), sym ? 0 : n, g)},
                        opt);
  device_buffer<T> const dw(w);
  device_buffer<std::int32_t> dp(packed.size());
  device_buffer<T> ds(scales.size());
  device_buffer<std::int32_t> dz(zp.size());
  device_buffer<int> flag(std::vector<int>{0});
  CUDA_REQUIRE(qtl::cuda::ct_pack_quantize(make_view(static_cast<T const*>(dw.ptr), n, k), bits, group_size, sym,
                                           dp.view(n, words), ds.view(n, g), dz.view(sym ? 0 : n, g), flag.ptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(dp.get() == packed);
  CHECK(qtl_test::raw(ds.get()) == qtl_test::raw(scales));
  CHECK(dz.get() == zp);
  bool finite = true;
  for (T x : w) {
    finite = finite && std::isfinite(qtl::to_float(x));
  }
  CHECK(flag.get()[0] == (finite ? 0 : 1));
}

/// Device and host ct_<F>_quantize of w [n, k] (NVFP4 with the host's global scale).
template <class F, class T>
void check_fp4(std::vector<T> const& w, index_t n, index_t k, bool allow = false) {
  INFO(qtl::name_of<F> << ", [" << n << ", " << k << "]");
  index_t const kb = k / F::block_size;
  std::vector<qtl::float4_e2m1x2_t> values(static_cast<std::size_t>(n * k / 2));
  std::vector<typename F::scale> scales(static_cast<std::size_t>(n * kb));
  auto const vv = make_view(values.data(), n, k / 2);
  auto const sv = make_view(scales.data(), n, kb);
  device_buffer<T> const dw(w);
  device_buffer<qtl::float4_e2m1x2_t> dv(values.size());
  device_buffer<typename F::scale> ds(scales.size());
  auto const wd = make_view(static_cast<T const*>(dw.ptr), n, k);
  if constexpr (F::has_global_scale) {
    float const gs = qtl::ct_nvfp4_global_scale(qtl::fp8_amax(qtl_test::cview(w, n, k)));
    qtl::ct_nvfp4_quantize(qtl_test::cview(w, n, k), gs, vv, sv);
    CUDA_REQUIRE(qtl::cuda::ct_nvfp4_quantize(wd, gs, dv.view(n, k / 2), ds.view(n, kb)));
  } else {
    qtl::ct_mxfp4_quantize(qtl_test::cview(w, n, k), vv, sv, {allow, 0});
    CUDA_REQUIRE(qtl::cuda::ct_mxfp4_quantize(wd, dv.view(n, k / 2), ds.view(n, kb)));
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(qtl_test::raw(dv.get()) == qtl_test::raw(values));
  CHECK(qtl_test::raw(ds.get()) == qtl_test::raw(scales));
}

/// Device and host ct_mxfp8_quantize of w [n, k]; `allow` lets the host quantize NaN/Inf, whose
/// presence the device reports in its flag.
template <class T>
void check_mxfp8(std::vector<T> const& w, index_t n, index_t k, bool allow = false) {
  INFO("mxfp8 [" << n << ", " << k << "]");
  std::vector<qtl::float8_e4m3fn_t> values(w.size());
  std::vector<qtl::float8_e8m0fnu_t> scales(static_cast<std::size_t>(n * k / 32));
  qtl::ct_mxfp8_quantize(qtl_test::cview(w, n, k), make_view(values.data(), n, k), make_view(scales.data(), n, k / 32),
                         {allow, 0});
  device_buffer<T> const dw(w);
  device_buffer<qtl::float8_e4m3fn_t> dv(values.size());
  device_buffer<qtl::float8_e8m0fnu_t> ds(scales.size());
  device_buffer<int> flag(std::vector<int>{0});
  CUDA_REQUIRE(qtl::cuda::ct_mxfp8_quantize(make_view(static_cast<T const*>(dw.ptr), n, k), dv.view(n, k),
                                            ds.view(n, k / 32), static_cast<int*>(flag.ptr)));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(qtl_test::raw(dv.get()) == qtl_test::raw(values));
  CHECK(qtl_test::raw(ds.get()) == qtl_test::raw(scales));
  CHECK(flag.get()[0] == (allow ? 1 : 0));
}

/// `f(w, n, k)` with the golden case's weight as T.
template <class F>
void with_golden_weight(qtl::test::golden_case const& c, F&& f) {
  auto const n = static_cast<index_t>(c.shape[0]);
  auto const k = static_cast<index_t>(c.shape[1]);
  switch (c.in.at("weight").type) {
    case qtl::io::dtype::F32: f(qtl::test::tensor_values<float>(c.in, "weight"), n, k); break;
    case qtl::io::dtype::F16: f(qtl::test::tensor_values<qtl::half_t>(c.in, "weight"), n, k); break;
    default: f(qtl::test::tensor_values<qtl::bfloat16_t>(c.in, "weight"), n, k);
  }
}

}  // namespace

TEST_CASE("cuda ct_pack_quantize equals the host op on the golden cases and random weights", "[cuda][ct]") {
  for (auto const& c : qtl::test::golden_cases("ct-pack-quantize")) {
    INFO(c.name);
    int const bits = c.params.at("bits").get<int>();
    index_t const gs = c.params.at("group-size").get<index_t>();
    bool const asym = c.params.contains("asym");
    with_golden_weight(c, [&](auto const& w, index_t n, index_t k) { check_pack(w, n, k, bits, gs, !asym, false); });
  }
  for (int bits : {4, 8}) {
    for (bool sym : {true, false}) {
      for (index_t gs : {index_t{8}, index_t{32}, index_t{128}, index_t{-1}}) {
        check_pack(qtl_test::block_ranged_normal<qtl::bfloat16_t>(24, 256, 3, 8), 24, 256, bits, gs, sym, false);
        check_pack(qtl_test::block_ranged_normal<qtl::half_t>(8, 128, 4, 4), 8, 128, bits, gs, sym, false);
        check_pack(qtl_test::block_ranged_normal<float>(3, 384, 5, 12), 3, 384, bits, gs, sym, false);
      }
    }
  }
}

TEST_CASE("cuda ct_pack_quantize flags NaN and Inf and quantizes them as the host allows", "[cuda][ct]") {
  auto w = qtl_test::block_ranged_normal<qtl::bfloat16_t>(6, 64, 9, 4);
  w[70] = qtl::from_float<qtl::bfloat16_t>(std::nanf(""));
  w[200] = qtl::from_float<qtl::bfloat16_t>(-std::numeric_limits<float>::infinity());
  check_pack(w, 6, 64, 4, 32, false, true);
  check_pack(w, 6, 64, 8, -1, true, true);
}

TEST_CASE("cuda ct_nvfp4_quantize and ct_mxfp4_quantize equal the host ops", "[cuda][ct][fp4]") {
  for (auto const& c : qtl::test::golden_cases("ct-nvfp4-quantize")) {
    INFO(c.name);
    with_golden_weight(c, [&](auto const& w, index_t n, index_t k) { check_fp4<qtl::nvfp4>(w, n, k); });
  }
  for (auto const& c : qtl::test::golden_cases("ct-mxfp4-quantize")) {
    INFO(c.name);
    with_golden_weight(c, [&](auto const& w, index_t n, index_t k) { check_fp4<qtl::mxfp4>(w, n, k); });
  }
  check_fp4<qtl::nvfp4>(qtl_test::block_ranged_normal<qtl::bfloat16_t>(40, 512, 6, 8), 40, 512);
  check_fp4<qtl::nvfp4>(qtl_test::block_ranged_normal<qtl::half_t>(9, 96, 7, 3), 9, 96);
  check_fp4<qtl::mxfp4>(qtl_test::block_ranged_normal<qtl::bfloat16_t>(40, 512, 8, 20), 40, 512);
  check_fp4<qtl::mxfp4>(qtl_test::block_ranged_normal<float>(5, 160, 9, 30), 5, 160);
  auto w = qtl_test::block_ranged_normal<qtl::half_t>(4, 64, 10, 3);
  w[33] = qtl::from_float<qtl::half_t>(std::nanf(""));
  check_fp4<qtl::mxfp4>(w, 4, 64, true);
}

TEST_CASE("cuda ct_mxfp8_quantize equals the host op", "[cuda][ct][mxfp8]") {
  for (auto const& c : qtl::test::golden_cases("ct-mxfp8-quantize")) {
    INFO(c.name);
    with_golden_weight(c, [&](auto const& w, index_t n, index_t k) { check_mxfp8(w, n, k); });
  }
  check_mxfp8(qtl_test::block_ranged_normal<qtl::bfloat16_t>(40, 512, 8, 20), 40, 512);
  check_mxfp8(qtl_test::block_ranged_normal<qtl::half_t>(7, 96, 5, 6), 7, 96);
  check_mxfp8(qtl_test::block_ranged_normal<float>(5, 160, 9, 30), 5, 160);
  auto w = qtl_test::block_ranged_normal<qtl::bfloat16_t>(4, 64, 10, 3);
  w[33] = qtl::from_float<qtl::bfloat16_t>(std::nanf(""));
  w[130] = qtl::from_float<qtl::bfloat16_t>(-std::numeric_limits<float>::infinity());
  check_mxfp8(w, 4, 64, true);
}

TEST_CASE("cuda ct launchers reject what the host ops reject", "[cuda][ct]") {
  device_buffer<float> w(4 * 64);
  device_buffer<std::int32_t> p(4 * 8);
  device_buffer<float> s(4 * 2);
  device_buffer<std::int32_t> z(4 * 2);
  auto const wv = make_view(static_cast<float const*>(w.ptr), 4, 64);
  CHECK(qtl::cuda::ct_pack_quantize(wv, 3, 32, true, p.view(4, 8), s.view(4, 2), z.view(0, 2)) ==
        cudaErrorInvalidValue);
  CHECK(qtl::cuda::ct_pack_quantize(wv, 4, 48, true, p.view(4, 8), s.view(4, 2), z.view(0, 2)) ==
        cudaErrorInvalidValue);
  CHECK(qtl::cuda::ct_pack_quantize(wv, 4, 32, false, p.view(4, 8), s.view(4, 2), z.view(0, 2)) ==
        cudaErrorInvalidValue);  // asymmetric without zero points
  device_buffer<qtl::float4_e2m1x2_t> v(4 * 32);
  device_buffer<qtl::float8_e4m3fn_t> s4(4 * 4);
  device_buffer<qtl::float8_e8m0fnu_t> s8(4 * 2);
  CHECK(qtl::cuda::ct_nvfp4_quantize(wv, 0.0f, v.view(4, 32), s4.view(4, 4)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::ct_nvfp4_quantize(wv, 1.0f, v.view(4, 32), s4.view(4, 3)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::ct_mxfp4_quantize(make_view(static_cast<float const*>(w.ptr), 4, 48), v.view(4, 24),
                                     s8.view(4, 1)) == cudaErrorInvalidValue);
  CUDA_REQUIRE(qtl::cuda::ct_mxfp4_quantize(wv, v.view(4, 32), s8.view(4, 2)));
  device_buffer<qtl::float8_e4m3fn_t> v8(4 * 64);
  CHECK(qtl::cuda::ct_mxfp8_quantize(make_view(static_cast<float const*>(w.ptr), 4, 48), v8.view(4, 48),
                                     s8.view(4, 1)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::ct_mxfp8_quantize(wv, v8.view(4, 64), s8.view(4, 1)) == cudaErrorInvalidValue);
  CUDA_REQUIRE(qtl::cuda::ct_mxfp8_quantize(wv, v8.view(4, 64), s8.view(4, 2)));
}
