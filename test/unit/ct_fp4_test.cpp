// qtl/ct_fp4.hpp: compressed-tensors NVFP4 and MXFP4 on row-major W [N, K], and qtl::scan_amax
// (the amax pass that also finds non-finite weights). The ops against a per-element walk of the
// element rules (block_quantize<nvfp4> for NVFP4; ct_mx_scale_code, block_element_code for
// MXFP4), CT's conventions by hand, row slices, NaN/Inf and the argument checks; the golden cases
// 1936.. pin both to compressed-tensors itself.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <qtl/ct_fp4.hpp>
#include <qtl/ct_mxfp8.hpp>
#include <qtl/fp8.hpp>

#include "test_data.hpp"

namespace {

using qtl::bfloat16_t;
using qtl::float4_e2m1x2_t;
using qtl::half_t;
using qtl::index_t;
using qtl_test::cview;

template <class T>
struct fp4_out {
  std::vector<float4_e2m1x2_t> values;
  std::vector<std::uint8_t> scales;
};

/// Blocks of their own ranges, with an all-zero block and -0.0 weights in row 0, a constant
/// block with one 6.9 (between 6 and 7: CT's MX scale clips it) in row 1.
template <class T>
std::vector<T> weights(index_t n, index_t k, std::uint32_t seed) {
  auto w = qtl_test::block_ranged_normal<T>(n, k, seed, 6);
  for (index_t c = 0; c < 32; ++c) {
    w[static_cast<std::size_t>(c)] = qtl::from_float<T>(c < 16 ? 0.0f : -0.0f);
    w[static_cast<std::size_t>(k + c)] = qtl::from_float<T>(c == 5 ? 6.9f : -3.0f);
  }
  return w;
}

template <class T>
fp4_out<T> run_mxfp4(std::vector<T> const& w, index_t n, index_t k, qtl::ct_fp4_options const& opt = {}) {
  fp4_out<T> o{std::vector<float4_e2m1x2_t>(static_cast<std::size_t>(n * k / 2)),
               std::vector<std::uint8_t>(static_cast<std::size_t>(n * k / 32))};
  qtl::ct_mxfp4_quantize(cview(w, n, k), qtl::make_view(o.values.data(), n, k / 2),
                         qtl::make_view(reinterpret_cast<qtl::float8_e8m0fnu_t*>(o.scales.data()), n, k / 32), opt);
  return o;
}

template <class T>
fp4_out<T> run_nvfp4(std::vector<T> const& w, index_t n, index_t k, float gs) {
  fp4_out<T> o{std::vector<float4_e2m1x2_t>(static_cast<std::size_t>(n * k / 2)),
               std::vector<std::uint8_t>(static_cast<std::size_t>(n * k / 16))};
  qtl::ct_nvfp4_quantize(cview(w, n, k), gs, qtl::make_view(o.values.data(), n, k / 2),
                         qtl::make_view(reinterpret_cast<qtl::float8_e4m3fn_t*>(o.scales.data()), n, k / 16));
  return o;
}

std::uint8_t nibble(std::vector<float4_e2m1x2_t> const& v, index_t i) {
  return static_cast<std::uint8_t>(v[static_cast<std::size_t>(i / 2)].bits >> (i % 2 * 4) & 0xF);
}

/// bf16 rows of 32-element blocks for the AVX-512 MX executors (k/32 = 35 blocks a row: two
/// 16-block steps and three left): block maxima at the scale rules' edges (zero and -0, bf16
/// subnormals and 2^-126, significands just below and at 1.75, the largest finite bf16), then
/// blocks of their own ranges; elements that underflow bf16 under their block's scale (CT's +0
/// code for MXFP4).
std::vector<bfloat16_t> mx_executor_edges(index_t n, index_t k) {
  auto w = qtl_test::block_ranged_normal<bfloat16_t>(n, k, 11, 40);
  float const maxima[] = {0.0f,       0x1p-133f,   0x1p-126f,  0x1.cp-126f, 0x1.bep3f, 0x1.cp3f,
                          0x1.cp-10f, 0x1.fep127f, 0x1.cp127f, 1.0f,        0x1.8p0f,  6.9f};
  for (index_t r = 0; r < n; ++r) {
    for (index_t b = 0; b < 12; ++b) {
      float const mx = maxima[(r + b) % 12];
      for (index_t e = 0; e < 32; ++e) {
        float const v = e == r % 32 ? (b % 2 == 0 ? mx : -mx) : (e % 3 == 0 ? -mx * 0x1p-140f : mx * 0.3f);
        w[static_cast<std::size_t>(r * k + b * 32 + e)] = qtl::from_float<bfloat16_t>(v);
      }
    }
  }
  w[17] = qtl::from_float<bfloat16_t>(-0.0f);
  return w;
}

}  // namespace

TEMPLATE_TEST_CASE("ct_mxfp4_quantize equals the element rules walked one element at a time", "[ct][fp4]", float,
                   half_t, bfloat16_t) {
  using T = TestType;
  index_t const n = 9;
  index_t const k = 256;
  auto const w = weights<T>(n, k, 7);
  auto const got = run_mxfp4(w, n, k);
  for (index_t r = 0; r < n; ++r) {
    for (index_t b = 0; b < k / 32; ++b) {
      float amax = 0.0f;
      for (index_t e = 0; e < 32; ++e) {
        amax = std::max(amax, std::fabs(qtl::to_float(w[static_cast<std::size_t>(r * k + b * 32 + e)])));
      }
      std::uint8_t const sc = qtl::ct_mx_scale_code<T>(amax);
      REQUIRE(got.scales[static_cast<std::size_t>(r * (k / 32) + b)] == sc);
      float const os = qtl::e8m0_reciprocal(sc);
      for (index_t e = 0; e < 32; ++e) {
        index_t const i = r * k + b * 32 + e;
        float const x = qtl::to_float(w[static_cast<std::size_t>(i)]);
        // CT divides in T: a quotient that underflows T is +0, whatever x's sign
        bool const zero = qtl::to_float(qtl::from_float<T>(x * os)) == 0.0f;
        std::uint8_t const want = zero ? 0 : qtl::block_element_code<qtl::mxfp4>(x, os);
        CAPTURE(r, b, e, x);
        REQUIRE(nibble(got.values, i) == want);
      }
    }
  }
}

TEST_CASE("ct_mxfp4_quantize: CT's scale rounds a block max of 6.9 down to 2^0 and clips it to 6", "[ct][fp4]") {
  index_t const n = 2;
  index_t const k = 32;
  auto const w = weights<float>(n, k, 1);
  auto const got = run_mxfp4(w, n, k);
  CHECK(got.scales[0] == 0);                // the all-zero / -0.0 block: scale code 0
  CHECK(got.values[8].bits == 0);           // -0.0 weights are code +0
  CHECK(got.scales[1] == 127);              // 6.9: 2^0 (the OCP rule takes 2^1)
  CHECK(nibble(got.values, k + 5) == 0x7);  // 6.9 -> 6, the largest code
  CHECK(nibble(got.values, k + 0) == 0xD);  // -3.0 -> -3 (0x8 | 5)
}

TEST_CASE("ct_mxfp4_quantize: bf16 rows by the AVX-512 executor equal the portable loop", "[ct][fp4]") {
  // with a NaN and an Inf in later rows: the executor stops at their step, the loop refuses or
  // quantizes them
  index_t const n = 8;
  index_t const k = 35 * 32;
  auto const w = mx_executor_edges(n, k);
  auto const fast = run_mxfp4(w, n, k);
  fp4_out<bfloat16_t> slow;
  {
    qtl::x86::scoped_level_cap cap(qtl::x86::level::avx2);
    slow = run_mxfp4(w, n, k);
  }
  CHECK(fast.scales == slow.scales);
  for (std::size_t i = 0; i < fast.values.size(); ++i) {
    REQUIRE(fast.values[i].bits == slow.values[i].bits);
  }
  auto odd = w;
  odd[static_cast<std::size_t>(5 * k + 20 * 32 + 3)] = qtl::from_float<bfloat16_t>(std::nanf(""));
  odd[static_cast<std::size_t>(6 * k + 2)] = qtl::from_float<bfloat16_t>(std::numeric_limits<float>::infinity());
  auto const fast_odd = run_mxfp4(odd, n, k, {true, 0});
  fp4_out<bfloat16_t> slow_odd;
  {
    qtl::x86::scoped_level_cap cap(qtl::x86::level::avx2);
    slow_odd = run_mxfp4(odd, n, k, {true, 0});
  }
  CHECK(fast_odd.scales == slow_odd.scales);
  for (std::size_t i = 0; i < fast_odd.values.size(); ++i) {
    REQUIRE(fast_odd.values[i].bits == slow_odd.values[i].bits);
  }
  CHECK_THROWS_WITH(run_mxfp4(odd, n, k), Catch::Contains("element [5, 643] is NaN"));
}

TEST_CASE("ct_mxfp4_quantize runs any slice of rows with the same bytes", "[ct][fp4]") {
  index_t const n = 12;
  index_t const k = 128;
  auto const w = weights<bfloat16_t>(n, k, 3);
  auto const whole = run_mxfp4(w, n, k);
  fp4_out<bfloat16_t> pieces{std::vector<float4_e2m1x2_t>(whole.values.size()),
                             std::vector<std::uint8_t>(whole.scales.size())};
  for (index_t r0 : {index_t{0}, index_t{5}}) {
    index_t const rows = r0 == 0 ? 5 : n - 5;
    qtl::ct_mxfp4_quantize(
        qtl::make_view(w.data() + r0 * k, rows, k), qtl::make_view(pieces.values.data() + r0 * k / 2, rows, k / 2),
        qtl::make_view(reinterpret_cast<qtl::float8_e8m0fnu_t*>(pieces.scales.data()) + r0 * k / 32, rows, k / 32),
        {false, r0});
  }
  CHECK(pieces.scales == whole.scales);
  for (std::size_t i = 0; i < whole.values.size(); ++i) {
    REQUIRE(pieces.values[i].bits == whole.values[i].bits);
  }
}

TEMPLATE_TEST_CASE("ct_mxfp4_quantize refuses NaN and Inf naming row and column, unless allowed", "[ct][fp4]", float,
                   half_t, bfloat16_t) {
  index_t const n = 4;
  index_t const k = 64;
  float const inf = std::numeric_limits<float>::infinity();
  for (auto [bad, word] : {std::pair{std::nanf(""), "NaN"}, std::pair{inf, "+Inf"}, std::pair{-inf, "-Inf"}}) {
    auto w = weights<TestType>(n, k, 5);
    w[static_cast<std::size_t>(2 * k + 37)] = qtl::from_float<TestType>(bad);
    w[static_cast<std::size_t>(3 * k + 1)] = qtl::from_float<TestType>(bad);  // a later one is not named
    CAPTURE(word);
    try {
      run_mxfp4(w, n, k, {false, 100});
      FAIL("no error");
    } catch (qtl::value_error const& e) {
      std::string const what = e.what();
      CAPTURE(what);
      REQUIRE(what.find("element [102, 37] is " + std::string(word)) != std::string::npos);
      REQUIRE(what.find("block's scale") != std::string::npos);
    }
    auto const allowed = run_mxfp4(w, n, k, {true, 0});
    CHECK(allowed.scales[static_cast<std::size_t>(2 * 2 + 1)] == 254);  // CT's undefined int cast, as documented
  }
}

TEST_CASE("ct_mxfp8_quantize: CT's power of two turns up at a significand of 1.75, divided by 2^8", "[ct][mxfp8]") {
  index_t const n = 2;
  index_t const k = 32;
  std::vector<float> w(static_cast<std::size_t>(n * k), 0.5f);
  w[3] = 1.74f;  // row 0: 2^0 / 2^8
  w[5] = -0.0f;
  w[k + 3] = -1.75f;  // row 1: 2^1 / 2^8
  std::vector<qtl::float8_e4m3fn_t> v(w.size());
  std::vector<qtl::float8_e8m0fnu_t> s(static_cast<std::size_t>(n));
  qtl::ct_mxfp8_quantize(cview(w, n, k), qtl::make_view(v.data(), n, k), qtl::make_view(s.data(), n, 1));
  CHECK(s[0].bits == 127 - 8);
  CHECK(s[1].bits == 127 + 1 - 8);
  CHECK(v[3].bits == 0x7E);      // 1.74 * 256 = 445.4 -> 448
  CHECK(v[0].bits == 0x70);      // 0.5 * 256 = 128
  CHECK(v[5].bits == 0x80);      // -0.0 kept
  CHECK(v[k + 3].bits == 0xF6);  // -1.75 * 128 = -224, exact
  CHECK(v[k].bits == 0x68);      // 0.5 * 128 = 64
}

TEST_CASE("ct_mxfp8_quantize: bf16 rows by the AVX-512 executor equal the portable loop", "[ct][mxfp8]") {
  // with a NaN and an Inf in later rows: the executor stops at their step, the loop refuses or
  // quantizes them
  index_t const n = 8;
  index_t const k = 35 * 32;
  auto const run = [&](std::vector<bfloat16_t> const& w, bool allow) {
    std::pair out{std::vector<qtl::float8_e4m3fn_t>(w.size()),
                  std::vector<qtl::float8_e8m0fnu_t>(static_cast<std::size_t>(n * k / 32))};
    qtl::ct_mxfp8_quantize(cview(w, n, k), qtl::make_view(out.first.data(), n, k),
                           qtl::make_view(out.second.data(), n, k / 32), {allow, 0});
    return out;
  };
  auto const same = [&](std::vector<bfloat16_t> const& w, bool allow) {
    auto const fast = run(w, allow);
    qtl::x86::scoped_level_cap cap(qtl::x86::level::avx2);
    auto const slow = run(w, allow);
    for (std::size_t i = 0; i < fast.second.size(); ++i) {
      REQUIRE(fast.second[i].bits == slow.second[i].bits);
    }
    for (std::size_t i = 0; i < fast.first.size(); ++i) {
      CAPTURE(i);
      REQUIRE(fast.first[i].bits == slow.first[i].bits);
    }
  };
  auto w = mx_executor_edges(n, k);
  same(w, false);
  w[static_cast<std::size_t>(5 * k + 20 * 32 + 3)] = qtl::from_float<bfloat16_t>(std::nanf(""));
  w[static_cast<std::size_t>(6 * k + 2)] = qtl::from_float<bfloat16_t>(std::numeric_limits<float>::infinity());
  same(w, true);
  CHECK_THROWS_WITH(run(w, false), Catch::Contains("element [5, 643] is NaN"));
}

TEMPLATE_TEST_CASE("ct_mxfp8_quantize refuses NaN and Inf naming row and column, unless allowed", "[ct][mxfp8]", float,
                   half_t, bfloat16_t) {
  index_t const n = 4;
  index_t const k = 64;
  auto w = weights<TestType>(n, k, 5);
  w[static_cast<std::size_t>(2 * k + 37)] = qtl::from_float<TestType>(std::nanf(""));
  std::vector<qtl::float8_e4m3fn_t> v(w.size());
  std::vector<qtl::float8_e8m0fnu_t> s(static_cast<std::size_t>(n * 2));
  auto const run = [&](bool allow) {
    qtl::ct_mxfp8_quantize(cview(w, n, k), qtl::make_view(v.data(), n, k), qtl::make_view(s.data(), n, 2),
                           {allow, 100});
  };
  CHECK_THROWS_WITH(run(false), Catch::Contains("element [102, 37] is NaN"));
  run(true);
  CHECK(s[2 * 2 + 1].bits == 254);
  CHECK(v[static_cast<std::size_t>(2 * k + 37)].bits == 0x7F);
  CHECK_THROWS_AS(
      qtl::ct_mxfp8_quantize(cview(w, n, 48), qtl::make_view(v.data(), n, 48), qtl::make_view(s.data(), n, 1)),
      qtl::shape_error);
}

TEMPLATE_TEST_CASE("ct_nvfp4_quantize is block_quantize<nvfp4> with CT's zero-block scale and +0 code", "[ct][fp4]",
                   float, half_t, bfloat16_t) {
  using T = TestType;
  index_t const n = 9;
  index_t const k = 128;
  auto const w = weights<T>(n, k, 11);
  float const gs = qtl::ct_nvfp4_global_scale(qtl::fp8_amax(cview(w, n, k)));
  auto const got = run_nvfp4(w, n, k, gs);
  std::vector<float4_e2m1x2_t> values(got.values.size());
  std::vector<qtl::float8_e4m3fn_t> scales(got.scales.size());
  qtl::block_quantize<qtl::nvfp4>(cview(w, n, k), qtl::make_view(values.data(), n, k / 2), std::span(scales), gs);
  for (std::size_t b = 0; b < scales.size(); ++b) {
    std::uint8_t const want = scales[b].bits == 0 ? 0x20 : scales[b].bits;  // E4M3 0.125
    REQUIRE(got.scales[b] == want);
  }
  for (index_t i = 0; i < n * k; ++i) {
    bool const zero = qtl::to_float(w[static_cast<std::size_t>(i)]) == 0.0f;
    std::uint8_t const want = zero ? 0 : nibble(values, i);
    CAPTURE(i);
    REQUIRE(nibble(got.values, i) == want);
  }
  CHECK(got.scales[0] == 0x20);        // the all-zero block
  CHECK(nibble(got.values, 16) == 0);  // -0.0: +0, where block_quantize writes 0x8
  CHECK(nibble(values, 16) == 0x8);
}

TEST_CASE("ct_fp4 ops check their arguments", "[ct][fp4]") {
  std::vector<float> w(4 * 48, 1.0f);
  std::vector<float4_e2m1x2_t> v(4 * 24);
  std::vector<qtl::float8_e8m0fnu_t> s8(4 * 2);
  std::vector<qtl::float8_e4m3fn_t> s4(4 * 3);
  auto const w48 = qtl::make_view(static_cast<float const*>(w.data()), 4, 48);
  CHECK_THROWS_AS(qtl::ct_mxfp4_quantize(w48, qtl::make_view(v.data(), 4, 24), qtl::make_view(s8.data(), 4, 1)),
                  qtl::shape_error);  // K = 48 is not a multiple of 32
  CHECK_THROWS_AS(qtl::ct_nvfp4_quantize(w48, 1.0f, qtl::make_view(v.data(), 4, 24), qtl::make_view(s4.data(), 4, 2)),
                  qtl::shape_error);  // scales [4, 2], expected [4, 3]
  CHECK_THROWS_AS(qtl::ct_nvfp4_quantize(w48, 0.0f, qtl::make_view(v.data(), 4, 24), qtl::make_view(s4.data(), 4, 3)),
                  qtl::value_error);  // global scale 0
  CHECK_NOTHROW(qtl::ct_nvfp4_quantize(w48, 1.0f, qtl::make_view(v.data(), 4, 24), qtl::make_view(s4.data(), 4, 3)));
}

TEMPLATE_TEST_CASE("scan_amax: fp8_amax and whether every element is finite, in one pass", "[fp8][amax]", float, half_t,
                   bfloat16_t) {
  using T = TestType;
  index_t const n = 5;
  index_t const k = 37;  // lanes and a tail
  auto w = qtl_test::block_ranged_normal<T>(n, k, 2, 4);
  auto const view = cview(w, n, k);
  qtl::amax_scan r = qtl::scan_amax(view);
  CHECK(r.finite);
  CHECK(r.amax == qtl::fp8_amax(view));
  float const inf = std::numeric_limits<float>::infinity();
  w[static_cast<std::size_t>(3 * k + 36)] = qtl::from_float<T>(std::nanf(""));  // in the tail
  r = qtl::scan_amax(view);
  CHECK_FALSE(r.finite);
  CHECK(r.amax == qtl::fp8_amax(view));  // NaN ignored
  CHECK(std::isfinite(r.amax));
  w[7] = qtl::from_float<T>(-inf);
  r = qtl::scan_amax(view);
  CHECK_FALSE(r.finite);
  CHECK(r.amax == inf);
  w[static_cast<std::size_t>(3 * k + 36)] = qtl::from_float<T>(1.0f);
  r = qtl::scan_amax(view);
  CHECK_FALSE(r.finite);
  CHECK(r.amax == inf);
  std::vector<T> const empty;
  r = qtl::scan_amax(cview(empty, 0, 0));
  CHECK(r.finite);
  CHECK(r.amax == 0.0f);
}

TEMPLATE_TEST_CASE("rounds_to_zero_in<T>(v) is round_to<T>(v) == 0 for every class of float", "[ct][fp4]", float,
                   half_t, bfloat16_t) {
  // every top half of a float (each exponent and sign, the leading mantissa bits) with the low
  // halves that decide a rounding (0, the tie, its neighbours, all ones), and every float within
  // 512 ulps of the thresholds of bf16 (2^-134) and f16 (2^-25)
  std::vector<std::uint32_t> bits;
  for (std::uint32_t hi = 0; hi < 0x10000u; ++hi) {
    for (std::uint32_t lo : {0x0000u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      bits.push_back(hi << 16 | lo);
    }
  }
  for (std::uint32_t t : {0x00008000u, 0x33000000u}) {
    for (std::uint32_t d = 0; d < 512; ++d) {
      for (std::uint32_t sign : {0u, 0x80000000u}) {
        bits.push_back(sign | (t + d));
        bits.push_back(sign | (t - d));
      }
    }
  }
  for (std::uint32_t b : bits) {
    float const v = qtl::bits_to_float(b);
    bool const want = qtl::detail::qnt::round_to<TestType>(v) == 0.0f;
    if (qtl::rounds_to_zero_in<TestType>(v) != want) {
      CAPTURE(b);
      REQUIRE(qtl::rounds_to_zero_in<TestType>(v) == want);
    }
  }
}
