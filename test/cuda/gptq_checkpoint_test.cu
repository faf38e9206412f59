// <qtl/cuda/gptq_checkpoint.cuh> against the host op of <qtl/gptq_checkpoint.hpp>, bit for bit:
// random weights of every dtype, both rules, 4 and 8 bits, a column slice of wider outputs, and
// the two flags (NaN/Inf, a scale F16 cannot hold) where the host op refuses. The shared main
// exits 77 (skipped) without a GPU.

#include <cmath>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>
#include <device_buffer.hpp>
#include <golden.hpp>

#include <qtl/cuda/gptq_checkpoint.cuh>
#include <qtl/gptq_checkpoint.hpp>

#include "test_data.hpp"

namespace {

using qtl::gptq_rule;
using qtl::half_t;
using qtl::index_t;
using qtl::make_view;
using qtl_test::device_buffer;

#define CUDA_REQUIRE(expr) REQUIRE((expr) == cudaSuccess)

/// Device and host op on w [n, k] (the host allowing NaN/Inf where `allow`); returns the device
/// flags {nonfinite, unrepresentable_scale}.
template <class T>
std::vector<int> check(std::vector<T> const& w, index_t n, index_t k, int bits, index_t gs, gptq_rule rule,
                       bool allow) {
  INFO("bits " << bits << ", group " << gs << (rule == gptq_rule::symmetric ? ", sym" : ", asym") << ", [" << n << ", "
               << k << "]");
  index_t const words = k / (32 / bits);
  index_t const groups = k / gs;
  std::vector<std::int32_t> qweight(static_cast<std::size_t>(words * n));
  std::vector<half_t> scales(static_cast<std::size_t>(groups * n));
  std::vector<std::int32_t> zeros(static_cast<std::size_t>(groups * n));
  qtl::gptq_checkpoint_options opt;
  opt.bits = bits;
  opt.group_size = gs;
  opt.rule = rule;
  opt.allow_nonfinite = allow;
  bool host_refused = false;
  try {
    qtl::gptq_checkpoint_quantize(
        qtl_test::cview(w, n, k),
        {make_view(qweight.data(), words, n), make_view(scales.data(), groups, n), make_view(zeros.data(), groups, n)},
        opt);
  } catch (qtl::value_error const&) {
    host_refused = true;
  }
  device_buffer<T> const dw(w);
  device_buffer<std::int32_t> dq(qweight.size());
  device_buffer<half_t> ds(scales.size());
  device_buffer<std::int32_t> dz(zeros.size());
  device_buffer<int> flags(std::vector<int>{0, 0});
  CUDA_REQUIRE(qtl::cuda::gptq_checkpoint_quantize(make_view(static_cast<T const*>(dw.ptr), n, k), bits, gs, rule,
                                                   dq.view(words, n), ds.view(groups, n), dz.view(groups, n), flags.ptr,
                                                   flags.ptr + 1));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  if (!host_refused) {
    CHECK(dq.get() == qweight);
    CHECK(qtl_test::raw(ds.get()) == qtl_test::raw(scales));
    CHECK(dz.get() == zeros);
  }
  return flags.get();
}

/// The device op on a golden case's weight (as T), its outputs against the case's expected ones.
template <class T>
void replay(qtl::test::golden_case const& c) {
  auto const w = qtl::test::tensor_values<T>(c.in, "weight");
  auto const n = static_cast<index_t>(c.shape[0]);
  auto const k = static_cast<index_t>(c.shape[1]);
  int const bits = c.params.at("bits").get<int>();
  index_t const gs = c.params.at("group-size").get<index_t>();
  gptq_rule const rule = c.params.contains("asym") ? gptq_rule::asymmetric : gptq_rule::symmetric;
  index_t const words = k / (32 / bits);
  device_buffer<T> const dw(w);
  device_buffer<std::int32_t> dq(static_cast<std::size_t>(words * n));
  device_buffer<half_t> ds(static_cast<std::size_t>(k / gs * n));
  device_buffer<std::int32_t> dz(static_cast<std::size_t>(k / gs * n));
  CUDA_REQUIRE(qtl::cuda::gptq_checkpoint_quantize(make_view(static_cast<T const*>(dw.ptr), n, k), bits, gs, rule,
                                                   dq.view(words, n), ds.view(k / gs, n), dz.view(k / gs, n)));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(dq.get() == qtl::test::tensor_values<std::int32_t>(c.expected, "qweight"));
  CHECK(qtl_test::raw(ds.get()) == qtl_test::raw(qtl::test::tensor_values<half_t>(c.expected, "scales")));
  CHECK(dz.get() == qtl::test::tensor_values<std::int32_t>(c.expected, "zeros"));
}

}  // namespace

TEST_CASE("cuda gptq_checkpoint_quantize replays the golden cases", "[cuda][gptq]") {
  for (auto const& c : qtl::test::golden_cases("gptq-checkpoint-quantize")) {
    INFO(c.name);
    switch (c.in.at("weight").type) {
      case qtl::io::dtype::F32: replay<float>(c); break;
      case qtl::io::dtype::F16: replay<half_t>(c); break;
      default: replay<qtl::bfloat16_t>(c);
    }
  }
}

TEMPLATE_TEST_CASE("cuda gptq_checkpoint_quantize equals the host op", "[cuda][gptq]", float, half_t, qtl::bfloat16_t) {
  using T = TestType;
  for (gptq_rule rule : {gptq_rule::symmetric, gptq_rule::asymmetric}) {
    for (int bits : {4, 8}) {
      index_t const n = 37;
      index_t const k = 256;
      auto w = qtl_test::block_ranged_normal<T>(n, k, static_cast<std::uint32_t>(bits + 10), 8);
      for (index_t c = 0; c < 64; ++c) {
        w[static_cast<std::size_t>(5 * k + c)] = qtl::from_float<T>(0.0f);  // an all-zero group
      }
      CHECK(check(w, n, k, bits, 64, rule, false) == std::vector<int>{0, 0});
      CHECK(check(w, n, k, bits, 256, rule, false) == std::vector<int>{0, 0});
    }
  }
}

TEST_CASE("cuda gptq_checkpoint_quantize: a column slice of wider outputs, launcher errors", "[cuda][gptq]") {
  index_t const n = 48;
  index_t const k = 128;
  index_t const r0 = 16;
  index_t const c = 20;
  auto const w = qtl_test::block_ranged_normal<qtl::bfloat16_t>(n, k, 3, 6);
  device_buffer<qtl::bfloat16_t> const dw(w);
  device_buffer<std::int32_t> dq(static_cast<std::size_t>(k / 8 * n));
  device_buffer<half_t> ds(static_cast<std::size_t>(k / 32 * n));
  device_buffer<std::int32_t> dz(static_cast<std::size_t>(k / 32 * n));
  auto columns = [&]<class U>(U* whole, index_t rows) {
    return qtl::column_slice(make_view(whole, rows, n), r0, r0 + c);
  };
  auto const rows = make_view(static_cast<qtl::bfloat16_t const*>(dw.ptr) + r0 * k, c, k);
  CUDA_REQUIRE(qtl::cuda::gptq_checkpoint_quantize(rows, 4, 32, gptq_rule::symmetric, columns(dq.ptr, k / 8),
                                                   columns(ds.ptr, k / 32), columns(dz.ptr, k / 32)));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<std::int32_t> q(static_cast<std::size_t>(k / 8 * c));
  std::vector<half_t> s(static_cast<std::size_t>(k / 32 * c));
  std::vector<std::int32_t> z(static_cast<std::size_t>(k / 32 * c));
  qtl::gptq_checkpoint_options opt;
  opt.group_size = 32;
  qtl::gptq_checkpoint_quantize(
      make_view(w.data() + r0 * k, c, k),
      {make_view(q.data(), k / 8, c), make_view(s.data(), k / 32, c), make_view(z.data(), k / 32, c)}, opt);
  auto const got = dq.get();
  for (index_t i = 0; i < k / 8; ++i) {
    for (index_t j = 0; j < c; ++j) {
      REQUIRE(got[static_cast<std::size_t>(i * n + r0 + j)] == q[static_cast<std::size_t>(i * c + j)]);
    }
  }
  // bits, a group size that does not divide K, outputs of other shapes: the host op's refusals
  CHECK(qtl::cuda::gptq_checkpoint_quantize(rows, 3, 32, gptq_rule::symmetric, columns(dq.ptr, k / 8),
                                            columns(ds.ptr, k / 32), columns(dz.ptr, k / 32)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::gptq_checkpoint_quantize(rows, 4, 48, gptq_rule::symmetric, columns(dq.ptr, k / 8),
                                            columns(ds.ptr, k / 32), columns(dz.ptr, k / 32)) == cudaErrorInvalidValue);
  CHECK(qtl::cuda::gptq_checkpoint_quantize(rows, 4, 32, gptq_rule::symmetric, columns(dq.ptr, k / 4),
                                            columns(ds.ptr, k / 32), columns(dz.ptr, k / 32)) == cudaErrorInvalidValue);
}

TEST_CASE("cuda gptq_checkpoint_quantize flags what the host op refuses", "[cuda][gptq]") {
  index_t const n = 4;
  index_t const k = 64;
  std::vector<qtl::bfloat16_t> w(static_cast<std::size_t>(n * k), qtl::from_float<qtl::bfloat16_t>(0.5f));
  for (gptq_rule rule : {gptq_rule::symmetric, gptq_rule::asymmetric}) {
    auto nan = w;
    nan[70] = qtl::from_float<qtl::bfloat16_t>(std::nanf(""));
    CHECK(check(nan, n, k, 4, 32, rule, true) == std::vector<int>{1, 0});
    auto big = w;
    big[3] = qtl::from_float<qtl::bfloat16_t>(1e6f);
    CHECK(check(big, n, k, 4, 32, rule, false) == std::vector<int>{0, 1});
    std::vector<qtl::bfloat16_t> tiny(w.size(), qtl::from_float<qtl::bfloat16_t>(1e-30f));
    CHECK(check(tiny, n, k, 4, 32, rule, false) == std::vector<int>{0, 1});
    std::vector<qtl::bfloat16_t> zeros(w.size(), qtl::from_float<qtl::bfloat16_t>(0.0f));
    CHECK(check(zeros, n, k, 4, 32, rule, false) == std::vector<int>{0, 0});
  }
}
