// <qtl/cuda/fp8_checkpoint.cuh> against the host op of <qtl/fp8_checkpoint.hpp>, bit for bit: the
// golden cases 2480-2485, then random weights of every dtype under every scheme and block rule,
// partial blocks, an all-zero block, a given tensor amax, NaN and Inf (the host allowing them).
// The shared main exits 77 (skipped) without a GPU.

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>
#include <golden.hpp>

#include <qtl/cuda/fp8_checkpoint.cuh>
#include <qtl/fp8_checkpoint.hpp>

#include "test_data.hpp"

namespace {

using qtl::fp8_block_rule;
using qtl::fp8_checkpoint_scheme;
using qtl::index_t;
using qtl::make_view;
using qtl_test::device_buffer;

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

struct fp8_out {
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;
};

template <class T>
fp8_out on_device(std::vector<T> const& w, index_t n, index_t k, qtl::fp8_checkpoint_options const& opt) {
  device_buffer<T> const dw(w);
  device_buffer<qtl::float8_e4m3fn_t> dc(static_cast<std::size_t>(n * k));
  device_buffer<float> ds(static_cast<std::size_t>(qtl::fp8_checkpoint_scale_count(n, k, opt)));
  CUDA_REQUIRE(
      qtl::cuda::fp8_checkpoint_quantize(make_view(static_cast<T const*>(dw.ptr), n, k), dc.view(n, k), ds.ptr, opt));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return {qtl_test::raw(dc.get()), ds.get()};
}

template <class T>
void check(std::vector<T> const& w, index_t n, index_t k, qtl::fp8_checkpoint_options opt) {
  INFO("scheme " << int(opt.scheme) << ", rule " << int(opt.rule) << ", [" << n << ", " << k << "]");
  opt.allow_nonfinite = true;
  std::vector<qtl::float8_e4m3fn_t> codes(static_cast<std::size_t>(n * k));
  std::vector<float> scales(static_cast<std::size_t>(qtl::fp8_checkpoint_scale_count(n, k, opt)));
  qtl::fp8_checkpoint_quantize(qtl_test::cview(w, n, k), make_view(codes.data(), n, k), std::span<float>(scales), opt);
  fp8_out const got = on_device(w, n, k, opt);
  CHECK(got.codes == qtl_test::raw(codes));
  CHECK(qtl_test::raw(got.scales) == qtl_test::raw(scales));
}

template <class T>
void replay(qtl::test::golden_case const& c) {
  auto const w = qtl::test::tensor_values<T>(c.in, "weight");
  auto const n = static_cast<index_t>(c.shape[0]);
  auto const k = static_cast<index_t>(c.shape[1]);
  qtl::fp8_checkpoint_options opt;
  std::string const scheme = c.params.at("scheme").get<std::string>();
  opt.scheme = scheme == "tensor"    ? fp8_checkpoint_scheme::tensor
               : scheme == "channel" ? fp8_checkpoint_scheme::channel
                                     : fp8_checkpoint_scheme::block;
  opt.rule =
      c.params.value("rule", std::string("hf")) == "ct" ? fp8_block_rule::compressed_tensors : fp8_block_rule::hf;
  fp8_out const got = on_device(w, n, k, opt);
  CHECK(got.codes == qtl::test::tensor_values<std::uint8_t>(c.expected, "codes", qtl::io::dtype::F8_E4M3));
  CHECK(got.scales == qtl::test::tensor_values<float>(c.expected, "scales"));
}

}  // namespace

TEST_CASE("cuda fp8_checkpoint_quantize replays the golden cases", "[cuda][fp8]") {
  for (auto const& c : qtl::test::golden_cases("fp8-checkpoint-quantize")) {
    INFO(c.name);
    switch (c.in.at("weight").type) {
      case qtl::io::dtype::F32: replay<float>(c); break;
      case qtl::io::dtype::F16: replay<qtl::half_t>(c); break;
      default: replay<qtl::bfloat16_t>(c);
    }
  }
}

TEMPLATE_TEST_CASE("cuda fp8_checkpoint_quantize equals the host op", "[cuda][fp8]", float, qtl::half_t,
                   qtl::bfloat16_t) {
  using T = TestType;
  index_t const n = 300;
  index_t const k = 200;
  auto w = qtl_test::block_ranged_normal<T>(n, k, 21, 8);
  for (index_t r = 128; r < 256; ++r) {
    for (index_t c = 0; c < 128; ++c) {
      w[static_cast<std::size_t>(r * k + c)] = qtl::from_float<T>(0.0f);  // an all-zero block
    }
  }
  w[7] = qtl::from_float<T>(-0.0f);
  for (auto scheme : {fp8_checkpoint_scheme::tensor, fp8_checkpoint_scheme::channel, fp8_checkpoint_scheme::block}) {
    for (auto rule : {fp8_block_rule::hf, fp8_block_rule::compressed_tensors}) {
      qtl::fp8_checkpoint_options opt;
      opt.scheme = scheme;
      opt.rule = rule;
      check(w, n, k, opt);
    }
  }
  qtl::fp8_checkpoint_options given;
  given.scheme = fp8_checkpoint_scheme::tensor;
  given.tensor_amax = 7.25f;
  check(w, n, k, given);
  auto odd = w;
  odd[static_cast<std::size_t>(5 * k + 9)] = qtl::from_float<T>(std::nanf(""));
  odd[static_cast<std::size_t>(200 * k + 150)] = qtl::from_float<T>(-std::numeric_limits<float>::infinity());
  for (auto scheme : {fp8_checkpoint_scheme::tensor, fp8_checkpoint_scheme::channel, fp8_checkpoint_scheme::block}) {
    qtl::fp8_checkpoint_options opt;
    opt.scheme = scheme;
    check(odd, n, k, opt);
  }
}

TEST_CASE("cuda fp8_checkpoint_quantize refuses what the host op refuses", "[cuda][fp8]") {
  std::vector<float> w(64, 1.0f);
  device_buffer<float> const dw(w);
  device_buffer<qtl::float8_e4m3fn_t> dc(64);
  device_buffer<float> ds(1);
  qtl::fp8_checkpoint_options opt;
  opt.block_k = 0;
  CHECK(qtl::cuda::fp8_checkpoint_quantize(make_view(static_cast<float const*>(dw.ptr), 2, 32), dc.view(2, 32), ds.ptr,
                                           opt) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::fp8_checkpoint_quantize(make_view(static_cast<float const*>(dw.ptr), 2, 32), dc.view(2, 16),
                                           ds.ptr) == cudaErrorInvalidValue);
}

TEST_CASE("cuda fp8_checkpoint_quantize names the weight the host op refuses", "[cuda][fp8]") {
  index_t const n = 300;
  index_t const k = 200;
  auto w = qtl_test::block_ranged_normal<float>(n, k, 22, 8);
  auto const first = [&](qtl::fp8_checkpoint_scheme scheme) {
    qtl::fp8_checkpoint_options opt;
    opt.scheme = scheme;
    device_buffer<float> const dw(w);
    device_buffer<qtl::float8_e4m3fn_t> dc(static_cast<std::size_t>(n * k));
    device_buffer<float> ds(static_cast<std::size_t>(qtl::fp8_checkpoint_scale_count(n, k, opt)));
    device_buffer<unsigned long long> f(std::vector<unsigned long long>{~0ull});
    CUDA_REQUIRE(qtl::cuda::fp8_checkpoint_quantize(make_view(static_cast<float const*>(dw.ptr), n, k), dc.view(n, k),
                                                    ds.ptr, opt, f.ptr));
    return f.get()[0];
  };
  for (auto scheme : {fp8_checkpoint_scheme::tensor, fp8_checkpoint_scheme::channel, fp8_checkpoint_scheme::block}) {
    CHECK(first(scheme) == ~0ull);
  }
  // row-major, (3, 150) is first; by blocks of 128 x 128, (100, 5) in block (0, 0)
  w[static_cast<std::size_t>(3 * k + 150)] = std::numeric_limits<float>::infinity();
  w[static_cast<std::size_t>(100 * k + 5)] = std::nanf("");
  w[static_cast<std::size_t>(250 * k + 0)] = -std::numeric_limits<float>::infinity();
  for (auto scheme : {fp8_checkpoint_scheme::tensor, fp8_checkpoint_scheme::channel, fp8_checkpoint_scheme::block}) {
    qtl::fp8_checkpoint_options opt;
    opt.scheme = scheme;
    bool const block = scheme == fp8_checkpoint_scheme::block;
    std::vector<qtl::float8_e4m3fn_t> codes(static_cast<std::size_t>(n * k));
    std::vector<float> scales(static_cast<std::size_t>(qtl::fp8_checkpoint_scale_count(n, k, opt)));
    CHECK_THROWS_WITH(qtl::fp8_checkpoint_quantize(qtl_test::cview(w, n, k), make_view(codes.data(), n, k),
                                                   std::span<float>(scales), opt),
                      Catch::Contains(block ? "element [100, 5]" : "element [3, 150]"));
    CHECK(first(scheme) == static_cast<unsigned long long>(block ? 100 * k + 5 : 3 * k + 150));
  }
}
