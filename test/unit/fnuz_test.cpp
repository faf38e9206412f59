// float8_e4m3fnuz and <qtl/fnuz.hpp>: the codec against torch's conversions (golden cases recorded
// from `x.to(torch.float8_e4m3fnuz)` and back), the codec's rules checked over every code and every
// float around each rounding boundary, sglang's normalize_e4m3fn_to_e4m3fnuz against the golden
// cases recorded from its own function, in place and out of place, the scale doubling at the top of
// each scale type's range, and the shape errors.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>
#include <golden.hpp>
#include <test_data.hpp>

#include <qtl/element/fp8.hpp>
#include <qtl/fnuz.hpp>
#include <qtl/numeric.hpp>
#include <qtl/scalar_type.hpp>

namespace {

using qtl::float8_e4m3fn_t;
using qtl::float8_e4m3fnuz_t;
using qtl::index_t;
using qtl::make_view;

TEST_CASE("float_to_e4m3fnuz reproduces torch's .to(float8_e4m3fnuz) bit for bit", "[fnuz][golden]") {
  for (auto const& c : qtl::test::golden_cases("float8-e4m3fnuz-encode")) {
    INFO(c.name);
    auto const x = qtl::test::tensor_values<float>(c.in, "x");
    auto const want = qtl::test::tensor_values<std::uint8_t>(c.expected, "codes");
    REQUIRE(x.size() == want.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      INFO("x = " << x[i]);
      REQUIRE(qtl::float_to_e4m3fnuz(x[i]) == want[i]);
      REQUIRE(qtl::from_float<float8_e4m3fnuz_t>(x[i]).bits == want[i]);
    }
  }
}

TEST_CASE("e4m3fnuz_to_float reproduces torch's decoding of every code, 0x80 a NaN", "[fnuz][golden]") {
  for (auto const& c : qtl::test::golden_cases("float8-e4m3fnuz-decode")) {
    INFO(c.name);
    auto const codes = qtl::test::tensor_values<std::uint8_t>(c.in, "codes");
    auto const want = qtl::test::tensor_values<float>(c.expected, "x");
    for (std::size_t i = 0; i < codes.size(); ++i) {
      REQUIRE(qtl::float_to_bits(qtl::e4m3fnuz_to_float(codes[i])) == qtl::float_to_bits(want[i]));
    }
  }
  CHECK(qtl::is_nan(qtl::e4m3fnuz_to_float(0x80)));
  CHECK(qtl::is_nan(qtl::to_float(float8_e4m3fnuz_t{0x80})));
}

TEST_CASE("the fnuz codec: bias 8, max 240, no -0, 0x80 the only NaN; saturation", "[fnuz]") {
  using qtl::saturation;
  float const inf = std::numeric_limits<float>::infinity();
  float const nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(qtl::e4m3fnuz_to_float(0x7F) == 240.0f);
  CHECK(qtl::e4m3fnuz_to_float(0x40) == 1.0f);  // exponent 8 - bias 8
  CHECK(qtl::e4m3fnuz_to_float(0x01) == std::ldexp(1.0f, -10));
  CHECK(qtl::e4m3fnuz_to_float(0xFF) == -240.0f);
  // every code but 0x80 round-trips and is half the e4m3fn value of the same byte
  for (int b = 0; b < 256; ++b) {
    auto const c = static_cast<std::uint8_t>(b);
    if (c == 0x80) {
      continue;
    }
    float const v = qtl::e4m3fnuz_to_float(c);
    REQUIRE(qtl::float_to_e4m3fnuz(v) == c);
    REQUIRE(qtl::float_to_e4m3fnuz(v, saturation::finite) == c);
    if ((c & 0x7F) != 0x7F) {
      REQUIRE(v * 2.0f == qtl::e4m3fn_to_float(c));
    }
  }
  // -0 and negative values that round to zero are +0; overflow: NaN or +-240
  CHECK(qtl::float_to_e4m3fnuz(-0.0f) == 0x00);
  CHECK(qtl::float_to_e4m3fnuz(-std::ldexp(1.0f, -12)) == 0x00);
  CHECK(qtl::float_to_e4m3fnuz(247.99f) == 0x7F);
  CHECK(qtl::float_to_e4m3fnuz(248.0f) == 0x80);  // the 240/256 tie rounds to even: past max
  CHECK(qtl::float_to_e4m3fnuz(-248.0f) == 0x80);
  CHECK(qtl::float_to_e4m3fnuz(-248.0f, saturation::finite) == 0xFF);
  CHECK(qtl::float_to_e4m3fnuz(inf) == 0x80);
  CHECK(qtl::float_to_e4m3fnuz(-inf, saturation::finite) == 0xFF);
  CHECK(qtl::float_to_e4m3fnuz(nan) == 0x80);
  CHECK(qtl::float_to_e4m3fnuz(-nan, saturation::finite) == 0x80);
}

TEST_CASE("float8_e4m3fnuz as a scalar type and an fp8_format; get_fp8_min_max", "[fnuz]") {
  constexpr auto t = qtl::float8_e4m3fnuz;
  static_assert(t.name() == "float8_e4m3fnuz" && t.size_bits() == 8 && t.has_nans() && !t.has_infs());
  static_assert(t.max() == 240.0 && t.min() == -240.0);
  static_assert(qtl::scalar_type::from_name("float8_e4m3fnuz") == t && qtl::scalar_type::from_id(t.id()) == t);
  CHECK(t.max() == qtl::e4m3fnuz_to_float(0x7F));
  using F = qtl::fp8_format<float8_e4m3fnuz_t>;
  CHECK(qtl::e4m3fnuz_to_float(F::max_code) == F::max);
  CHECK(qtl::is_nan(qtl::e4m3fnuz_to_float(F::nan_code)));
  CHECK(qtl::e4m3fnuz_to_float(0x08) == std::ldexp(1.0f, 1 - F::bias));  // smallest normal
  // vLLM: +-224 where the platform's FP8 is fnuz, else finfo(float8_e4m3fn)
  CHECK(qtl::get_fp8_min_max(true).max == 224.0f);
  CHECK(qtl::get_fp8_min_max(true).min == -224.0f);
  CHECK(qtl::get_fp8_min_max(false).max == qtl::fp8_format<float8_e4m3fn_t>::max);
  CHECK(qtl::get_fp8_min_max(false).min == -448.0f);
}

// The bytes of QTL's doubling of scale tensor `name` of a case, and of the engine's.
template <class T>
void check_doubled(qtl::test::golden_case const& c, char const* name) {
  auto const s = qtl::test::tensor_values<T>(c.in, name);
  auto const got = qtl::double_scales(make_view(s.data(), static_cast<index_t>(s.size())));
  auto const want = qtl::test::tensor_values<T>(c.expected, name);
  std::vector<T> const g(got.storage().begin(), got.storage().end());
  CHECK(qtl_test::raw(g) == qtl_test::raw(want));
}

TEST_CASE("normalize_e4m3fn_to_e4m3fnuz reproduces sglang's golden cases bit for bit", "[fnuz][golden]") {
  for (auto const& c : qtl::test::golden_cases("normalize-e4m3fn-to-e4m3fnuz")) {
    INFO(c.name);
    auto w = qtl::test::tensor_values<float8_e4m3fn_t>(c.in, "weight");
    auto const want = qtl::test::tensor_values<std::uint8_t>(c.expected, "weight");
    auto const n = static_cast<index_t>(w.size());
    auto const got = qtl::normalize_e4m3fn_to_e4m3fnuz(make_view(std::as_const(w).data(), n));
    REQUIRE(got.size() == n);
    for (index_t i = 0; i < n; ++i) {
      REQUIRE(got.data()[i].bits == want[static_cast<std::size_t>(i)]);
    }
    // in place, as the engine: the weight's own memory re-read as fnuz
    auto* as_fnuz = reinterpret_cast<float8_e4m3fnuz_t*>(w.data());
    qtl::normalize_e4m3fn_to_e4m3fnuz(make_view(std::as_const(w).data(), n), make_view(as_fnuz, n));
    CHECK(qtl_test::raw(w) == want);
    for (char const* name : {"weight_scale", "input_scale"}) {
      if (c.in.find(name) == nullptr) {
        CHECK(c.expected.find(name) == nullptr);
        continue;
      }
      auto const type = c.in.at(name).type;
      if (type == qtl::io::dtype::F32) {
        check_doubled<float>(c, name);
      } else {
        REQUIRE(type == qtl::io::dtype::BF16);
        check_doubled<qtl::bfloat16_t>(c, name);
      }
    }
  }
}

TEST_CASE("double_scales: exact, Inf past each type's top, in place", "[fnuz]") {
  std::vector<float> s = {1.5f, std::numeric_limits<float>::max(), -3e38f, std::numeric_limits<float>::denorm_min(),
                          0.0f};
  qtl::double_scales(make_view(std::as_const(s).data(), 5), make_view(s.data(), 5));
  CHECK(s[0] == 3.0f);
  CHECK(std::isinf(s[1]));
  CHECK(s[2] == -std::numeric_limits<float>::infinity());
  CHECK(qtl::float_to_bits(s[3]) == 2);  // the smallest subnormal (bits 1), doubled exactly
  CHECK(s[4] == 0.0f);
  CHECK(std::isinf(qtl::to_float(qtl::double_scale(qtl::half_t{0x7BFF}))));  // 65504 * 2
  CHECK(qtl::to_float(qtl::double_scale(qtl::half_t{0x3C00})) == 2.0f);
  CHECK(qtl::double_scale(qtl::bfloat16_t{0x7F7F}).bits == 0x7F80);  // bf16 max * 2 = Inf
  CHECK(qtl::double_scale(qtl::bfloat16_t{0x0001}).bits == 0x0002);  // subnormal, exact
}

TEST_CASE("normalize_e4m3fn_to_e4m3fnuz maps 0x80 only, and rejects mismatched extents", "[fnuz]") {
  for (int b = 0; b < 256; ++b) {
    auto const c = static_cast<std::uint8_t>(b);
    CHECK(qtl::e4m3fn_to_e4m3fnuz_code(c) == (c == 0x80 ? 0 : c));
  }
  std::vector<float8_e4m3fn_t> w(4, float8_e4m3fn_t{0x80});
  std::vector<float8_e4m3fnuz_t> out(3);
  CHECK_THROWS_WITH(qtl::normalize_e4m3fn_to_e4m3fnuz(make_view(std::as_const(w).data(), 4), make_view(out.data(), 3)),
                    Catch::Contains("normalize_e4m3fn_to_e4m3fnuz") && Catch::Contains("out has 3 elements"));
  std::vector<float> s(2);
  CHECK_THROWS_AS(qtl::double_scales(make_view(std::as_const(s).data(), 2), make_view(s.data(), 1)), qtl::shape_error);
}

}  // namespace
