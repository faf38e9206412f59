// qtl/ct_quantize.hpp: compressed-tensors pack-quantized on row-major W [N, K]. The host loop
// against a plain per-element walk of the element rules (ct_int_group_params, ct_int_code, which
// quantize_ct_test.cpp pins to compressed-tensors' numbers; the golden cases 1924.. pin the op to
// compressed-tensors itself), the word layout by hand, row slices, NaN/Inf and the argument checks.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <qtl/ct_quantize.hpp>

#include "ct_quantize_cases.hpp"

namespace {

using qtl::bfloat16_t;
using qtl::half_t;
using qtl::index_t;
using namespace qtl_test::ct;

/// `f()` throws E with `text` in its message.
template <class E, class F>
void expect_error(F&& f, std::string const& text) {
  try {
    f();
  } catch (E const& e) {
    std::string const what = e.what();
    CAPTURE(what);
    REQUIRE(what.find(text) != std::string::npos);
    return;
  }
  FAIL("no error: " << text);
}

}  // namespace

TEMPLATE_TEST_CASE("ct_pack_quantize equals the element rules walked one element at a time", "[ct]", float, half_t,
                   bfloat16_t) {
  index_t const n = 19;
  for (index_t k : {index_t{128}, index_t{384}, index_t{24}}) {
    auto const w = random_weights<TestType>(n, k, static_cast<unsigned>(k));
    for (int bits : {4, 8}) {
      for (bool sym : {true, false}) {
        for (index_t gs : {index_t{32}, index_t{128}, index_t{-1}, index_t{8}, index_t{24}}) {
          if (gs != -1 && k % gs != 0) {
            continue;
          }
          qtl::ct_pack_options opt;
          opt.bits = bits;
          opt.group_size = gs;
          opt.symmetric = sym;
          CAPTURE(k, bits, sym, gs);
          check_equal(run(w, n, k, opt), reference(w, n, k, opt));
        }
      }
    }
  }
}

TEST_CASE("ct_pack_quantize packs element j of a word into bits [b*j, b*j+b)", "[ct]") {
  // One row of 8 floats, symmetric, channel: amax 7.5 -> s = 1 (int4: 7.5 / 7.5), codes w itself
  // (clamped to [-8, 7]) plus 8.
  std::vector<float> const w = {-7.5f, -3.0f, -1.0f, 0.0f, 1.0f, 2.0f, 3.0f, 7.0f};
  qtl::ct_pack_options opt;
  opt.group_size = -1;
  auto const r = run(w, 1, 8, opt);
  REQUIRE(r.scales == std::vector<float>{1.0f});
  // codes: rne(-7.5) = -8 -> 0, -3 -> 5, -1 -> 7, 0 -> 8, 1 -> 9, 2 -> 10, 3 -> 11, 7 -> 15
  REQUIRE(static_cast<std::uint32_t>(r.packed[0]) == 0xFBA98750u);
  // 8 bits: four bytes a word; weight 3 (0.0) is code 0 + 128 in the word's high byte
  opt.bits = 8;
  auto const r8 = run(w, 1, 8, opt);
  REQUIRE(r8.packed.size() == 2);
  REQUIRE((static_cast<std::uint32_t>(r8.packed[0]) >> 24) == 128u);  // 0 -> 128
}

TEST_CASE("ct_pack_quantize runs any slice of rows with the same bytes", "[ct]") {
  index_t const n = 37;
  index_t const k = 256;
  auto const w = random_weights<bfloat16_t>(n, k, 7);
  qtl::ct_pack_options opt;
  opt.symmetric = false;
  opt.group_size = 64;
  auto const whole = run(w, n, k, opt);
  result<bfloat16_t> pieces;
  for (index_t r0 : {index_t{0}, index_t{5}, index_t{32}}) {
    index_t const r1 = r0 == 0 ? 5 : r0 == 5 ? 32 : n;
    std::vector<bfloat16_t> const part(w.begin() + r0 * k, w.begin() + r1 * k);
    opt.first_row = r0;
    auto const p = run(part, r1 - r0, k, opt);
    pieces.packed.insert(pieces.packed.end(), p.packed.begin(), p.packed.end());
    pieces.scales.insert(pieces.scales.end(), p.scales.begin(), p.scales.end());
    pieces.zero_points.insert(pieces.zero_points.end(), p.zero_points.begin(), p.zero_points.end());
  }
  check_equal(pieces, whole);
}

TEMPLATE_TEST_CASE("ct_pack_quantize refuses NaN and Inf naming row and column, unless allowed", "[ct]", float, half_t,
                   bfloat16_t) {
  index_t const n = 4;
  index_t const k = 64;
  float const inf = std::numeric_limits<float>::infinity();
  for (auto [bad, word] : {std::pair{std::nanf(""), "NaN"}, std::pair{inf, "+Inf"}, std::pair{-inf, "-Inf"}}) {
    auto w = random_weights<TestType>(n, k, 3);
    w[static_cast<std::size_t>(2 * k + 37)] = qtl::from_float<TestType>(bad);
    w[static_cast<std::size_t>(3 * k + 1)] = qtl::from_float<TestType>(bad);  // a later one is not named
    qtl::ct_pack_options opt;
    opt.group_size = 32;
    opt.first_row = 100;
    CAPTURE(word);
    try {
      run(w, n, k, opt);
      FAIL("no error");
    } catch (qtl::value_error const& e) {
      std::string const what = e.what();
      CAPTURE(what);
      REQUIRE(what.find("element [102, 37] is " + std::string(word)) != std::string::npos);
      REQUIRE(what.find("allow_nonfinite") != std::string::npos);
    }
    opt.allow_nonfinite = true;
    for (bool sym : {true, false}) {
      opt.symmetric = sym;
      check_equal(run(w, n, k, opt), reference(w, n, k, opt));
    }
  }
}

TEST_CASE("ct_pack_quantize checks its arguments", "[ct]") {
  std::vector<float> w(4 * 64, 1.0f);
  std::vector<std::int32_t> packed(4 * 8);
  std::vector<float> scales(4 * 2);
  std::vector<std::int32_t> zp(4 * 2);
  auto const call = [&](index_t k, qtl::ct_pack_options const& opt, index_t packed_cols = 8, index_t scale_cols = 2) {
    qtl::ct_pack_quantize(qtl::make_view(static_cast<float const*>(w.data()), 4, k),
                          qtl::ct_pack_outputs<float>{qtl::make_view(packed.data(), 4, packed_cols),
                                                      qtl::make_view(scales.data(), 4, scale_cols),
                                                      qtl::make_view(zp.data(), 4, scale_cols)},
                          opt);
  };
  qtl::ct_pack_options opt;
  opt.group_size = 32;
  call(64, opt);  // the shapes that fit
  opt.bits = 2;
  expect_error<qtl::value_error>([&] { call(64, opt); }, "bits is 2");
  opt.bits = 4;
  opt.group_size = 0;
  expect_error<qtl::value_error>([&] { call(64, opt); }, "group_size 0");
  opt.group_size = 48;
  expect_error<qtl::shape_error>([&] { call(64, opt); }, "does not divide K = 64");
  opt.group_size = -1;
  expect_error<qtl::shape_error>([&] { call(60, opt, 8, 1); }, "K = 60 is not a multiple of 8");
  expect_error<qtl::shape_error>([&] { call(0, opt, 0, 1); }, "K = 0");
  opt.group_size = 32;
  expect_error<qtl::shape_error>([&] { call(64, opt, 16); }, "packed has shape");
  opt.symmetric = false;
  expect_error<qtl::shape_error>([&] { call(64, opt, 8, 1); }, "scales has shape");
}
