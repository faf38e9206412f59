// qtl/fp8_checkpoint.hpp: FP8 checkpoint codes and scales from row-major W [N, K]. Each scheme
// against the quantizers of qtl/fp8.hpp run by hand on its pieces (the whole tensor, each row,
// each block by each rule), partial blocks, band slices, a given fused amax, the refusals.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include <qtl/fp8.hpp>
#include <qtl/fp8_checkpoint.hpp>

#include "test_data.hpp"

namespace {

using qtl::bfloat16_t;
using qtl::float8_e4m3fn_t;
using qtl::fp8_block_rule;
using qtl::fp8_checkpoint_scheme;
using qtl::index_t;

struct fp8_out {
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;
};

template <class T>
fp8_out run(std::vector<T> const& w, index_t n, index_t k, qtl::fp8_checkpoint_options opt) {
  fp8_out o{std::vector<std::uint8_t>(static_cast<std::size_t>(n * k)),
            std::vector<float>(static_cast<std::size_t>(qtl::fp8_checkpoint_scale_count(n, k, opt)))};
  qtl::fp8_checkpoint_quantize(qtl_test::cview(w, n, k),
                               qtl::make_view(reinterpret_cast<float8_e4m3fn_t*>(o.codes.data()), n, k),
                               std::span<float>(o.scales), opt);
  return o;
}

/// scaled_fp8_quant_static of rows [r0, r0 + rows), columns [c0, c0 + cols) of w [n, k] by `scale`.
template <class T>
std::vector<std::uint8_t> static_codes(std::vector<T> const& w, index_t k, index_t r0, index_t rows, index_t c0,
                                       index_t cols, float scale) {
  std::vector<std::uint8_t> q(static_cast<std::size_t>(rows * cols));
  qtl::view2d<T const> in = qtl::make_view(w.data() + r0 * k + c0, rows, cols);
  in.stride[0] = k;
  qtl::scaled_fp8_quant_static<float8_e4m3fn_t>(
      in, scale, qtl::make_view(reinterpret_cast<float8_e4m3fn_t*>(q.data()), rows, cols));
  return q;
}

std::vector<std::uint8_t> piece(fp8_out const& o, index_t k, index_t r0, index_t rows, index_t c0, index_t cols) {
  std::vector<std::uint8_t> q;
  for (index_t r = r0; r < r0 + rows; ++r) {
    q.insert(q.end(), o.codes.begin() + r * k + c0, o.codes.begin() + r * k + c0 + cols);
  }
  return q;
}

}  // namespace

TEST_CASE("fp8_checkpoint_quantize, block: each block by its rule, partial blocks included", "[fp8]") {
  index_t const n = 300;
  index_t const k = 200;
  auto w = qtl_test::block_ranged_normal<bfloat16_t>(n, k, 9, 8);
  for (index_t r = 128; r < 256; ++r) {
    for (index_t c = 0; c < 128; ++c) {
      w[static_cast<std::size_t>(r * k + c)] = qtl::from_float<bfloat16_t>(0.0f);  // an all-zero block (1, 0)
    }
  }
  for (fp8_block_rule rule : {fp8_block_rule::hf, fp8_block_rule::compressed_tensors}) {
    qtl::fp8_checkpoint_options opt;
    opt.rule = rule;
    auto const got = run(w, n, k, opt);
    REQUIRE(got.scales.size() == 3 * 2);
    for (index_t bi = 0; bi < 3; ++bi) {
      for (index_t bj = 0; bj < 2; ++bj) {
        index_t const rows = std::min<index_t>(128, n - bi * 128);
        index_t const cols = std::min<index_t>(128, k - bj * 128);
        float amax = 0.0f;
        for (index_t r = 0; r < rows; ++r) {
          for (index_t c = 0; c < cols; ++c) {
            amax = std::max(amax,
                            std::fabs(qtl::to_float(w[static_cast<std::size_t>((bi * 128 + r) * k + bj * 128 + c)])));
          }
        }
        float const want = rule == fp8_block_rule::hf ? std::max(amax, 1e-12f) / 448.0f
                           : amax == 0.0f             ? std::numeric_limits<float>::epsilon()
                                                      : amax / 448.0f;
        CAPTURE(bi, bj);
        REQUIRE(got.scales[static_cast<std::size_t>(bi * 2 + bj)] == want);
        REQUIRE(piece(got, k, bi * 128, rows, bj * 128, cols) ==
                static_codes(w, k, bi * 128, rows, bj * 128, cols, want));
      }
    }
    CHECK(got.scales[2] == (rule == fp8_block_rule::hf ? 1e-12f / 448.0f : 0x1p-23f));
  }
}

TEST_CASE("fp8_checkpoint_quantize, tensor and channel: the fp8.hpp quantizers; band slices", "[fp8]") {
  index_t const n = 260;
  index_t const k = 96;
  auto const w = qtl_test::block_ranged_normal<bfloat16_t>(n, k, 4, 6);
  qtl::fp8_checkpoint_options opt;
  opt.scheme = fp8_checkpoint_scheme::tensor;
  auto const t = run(w, n, k, opt);
  float const scale = qtl::fp8_scale_from_amax<float8_e4m3fn_t>(qtl::scan_amax(qtl_test::cview(w, n, k)).amax);
  CHECK(t.scales == std::vector<float>{scale});
  CHECK(t.codes == static_codes(w, k, 0, n, 0, k, scale));
  opt.tensor_amax = 3.5f;  // a fused group's amax
  CHECK(run(w, n, k, opt).scales[0] == qtl::fp8_scale_from_amax<float8_e4m3fn_t>(3.5f));
  opt = {};
  opt.scheme = fp8_checkpoint_scheme::channel;
  auto const c = run(w, n, k, opt);
  std::vector<std::uint8_t> q(static_cast<std::size_t>(n * k));
  std::vector<float> s(static_cast<std::size_t>(n));
  qtl::scaled_fp8_quant_per_token<float8_e4m3fn_t>(qtl_test::cview(w, n, k),
                                                   qtl::make_view(reinterpret_cast<float8_e4m3fn_t*>(q.data()), n, k),
                                                   qtl::make_view(s.data(), n));
  CHECK(c.codes == q);
  CHECK(c.scales == s);
  // a block-row slice gives the whole op's bytes for its rows
  opt = {};
  auto const whole = run(w, n, k, opt);
  std::vector<bfloat16_t> const tail(w.begin() + 128 * k, w.end());
  opt.first_row = 128;
  auto const part = run(tail, n - 128, k, opt);
  CHECK(part.codes == std::vector<std::uint8_t>(whole.codes.begin() + 128 * k, whole.codes.end()));
  CHECK(part.scales == std::vector<float>(whole.scales.begin() + 1, whole.scales.end()));
  opt.first_row = 100;  // not a block row
  CHECK_THROWS_AS(run(tail, n - 128, k, opt), qtl::shape_error);
}

TEST_CASE("fp8_checkpoint_quantize keeps a -0.0 weight's sign (compressed-tensors writes +0)", "[fp8]") {
  std::vector<bfloat16_t> w(64, qtl::from_float<bfloat16_t>(1.0f));
  w[5] = qtl::from_float<bfloat16_t>(-0.0f);
  for (auto scheme : {fp8_checkpoint_scheme::tensor, fp8_checkpoint_scheme::channel, fp8_checkpoint_scheme::block}) {
    for (fp8_block_rule rule : {fp8_block_rule::hf, fp8_block_rule::compressed_tensors}) {
      qtl::fp8_checkpoint_options opt;
      opt.scheme = scheme;
      opt.rule = rule;
      CHECK(run(w, 2, 32, opt).codes[5] == 0x80);
    }
  }
}

TEST_CASE("fp8_checkpoint_quantize refuses NaN/Inf naming the element, unless allowed; argument checks", "[fp8]") {
  index_t const n = 8;
  index_t const k = 256;
  std::vector<bfloat16_t> w(static_cast<std::size_t>(n * k), qtl::from_float<bfloat16_t>(0.25f));
  w[static_cast<std::size_t>(5 * k + 200)] = qtl::from_float<bfloat16_t>(-std::numeric_limits<float>::infinity());
  for (auto scheme : {fp8_checkpoint_scheme::tensor, fp8_checkpoint_scheme::channel, fp8_checkpoint_scheme::block}) {
    qtl::fp8_checkpoint_options opt;
    opt.scheme = scheme;
    opt.first_row = 0;
    CHECK_THROWS_WITH(run(w, n, k, opt), Catch::Contains("element [5, 200] is -Inf"));
    opt.allow_nonfinite = true;
    CHECK_NOTHROW(run(w, n, k, opt));
  }
  qtl::fp8_checkpoint_options opt;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(n * k));
  std::vector<float> scales(3);
  CHECK_THROWS_AS(qtl::fp8_checkpoint_quantize(qtl_test::cview(w, n, k),
                                               qtl::make_view(reinterpret_cast<float8_e4m3fn_t*>(codes.data()), n, k),
                                               std::span<float>(scales), opt),
                  qtl::shape_error);  // 2 block scales, not 3
  opt.block_k = 0;
  CHECK_THROWS_AS(run(w, n, k, opt), qtl::shape_error);
}
