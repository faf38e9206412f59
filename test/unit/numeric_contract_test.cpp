// The encoders and decoders of qtl/numeric.hpp stay exact when the consumer compiles with
// floating-point contraction on and FMA available (what `-ffp-contract=fast -march=native` gives):
// this TU compiles the header under `#pragma GCC optimize("fp-contract=fast")` and
// `target("fma,avx2")` and checks it against the independent oracle (test/support/
// numeric_oracle.hpp, included first, so compiled with the project's flags) on a sweep of every
// 2^10-th float pattern plus every rounding boundary. The header uses integer bit logic only, so
// this guards against a future edit that introduces contractible float arithmetic.
#include <catch2/catch.hpp>

#include "skip.hpp"
#include <numeric_oracle.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#  define QTL_TEST_CONTRACTED 1
#  pragma GCC push_options
#  pragma GCC optimize("fp-contract=fast")
#  pragma GCC target("fma,avx2")
#endif  // ^^^ g++ on x86-64 ^^^

#include <qtl/numeric.hpp>

namespace contracted {

// Every encoder and mode on one input; compiled with contraction and FMA.
struct codes {
  std::uint32_t c[19];
};

codes encode_all(float x) {
  using qtl::saturation;
  using R = qtl::e8m0_rounding;
  return {{qtl::float_to_fp16(x), qtl::float_to_fp16(x, saturation::finite), qtl::float_to_bf16(x),
           qtl::float_to_e4m3fn(x), qtl::float_to_e4m3fn(x, saturation::finite), qtl::float_to_e5m2(x),
           qtl::float_to_e5m2(x, saturation::finite), qtl::float_to_e3m2(x),
           qtl::float_to_e3m2(x, qtl::round_mode::toward_zero), qtl::float_to_e2m3(x),
           qtl::float_to_e2m3(x, qtl::round_mode::toward_zero), qtl::float_to_e2m1(x),
           qtl::float_to_e2m1(x, qtl::round_mode::toward_zero), qtl::float_to_e8m0(x, R::nearest),
           qtl::float_to_e8m0(x, R::toward_zero), qtl::float_to_e8m0(x, R::up),
           qtl::float_to_e8m0(x, R::up, saturation::finite), qtl_test::bits_of(qtl::round_half_even(x)),
           qtl_test::bits_of(qtl::fp16_to_float(qtl::float_to_fp16(x)))}};
}

float decode_e4m3fn(std::uint8_t c) { return qtl::e4m3fn_to_float(c); }
float decode_e5m2(std::uint8_t c) { return qtl::e5m2_to_float(c); }
float decode_fp16(std::uint16_t c) { return qtl::fp16_to_float(c); }

}  // namespace contracted

#if defined(QTL_TEST_CONTRACTED)
#  pragma GCC pop_options
#endif  // ^^^ QTL_TEST_CONTRACTED ^^^

namespace {

using qtl_test::table_encoder;

bool cpu_runs_contracted_code() {
#if defined(QTL_TEST_CONTRACTED)
  return __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
#else
  return true;
#endif  // ^^^ QTL_TEST_CONTRACTED ^^^
}

bool same(std::uint32_t a, std::uint32_t b, int index) {
  if (a == b) {
    return true;
  }
  switch (index) {
    case 0:
    case 1:
      return qtl_test::decode(qtl_test::fp16, a).is_nan && qtl_test::decode(qtl_test::fp16, b).is_nan;
    case 2:
      return qtl_test::decode(qtl_test::bf16, a).is_nan && qtl_test::decode(qtl_test::bf16, b).is_nan;
    case 3:
    case 4:
      return qtl_test::decode(qtl_test::e4m3fn, a).is_nan && qtl_test::decode(qtl_test::e4m3fn, b).is_nan;
    case 5:
    case 6:
      return qtl_test::decode(qtl_test::e5m2, a).is_nan && qtl_test::decode(qtl_test::e5m2, b).is_nan;
    case 17:
    case 18:
      return std::isnan(qtl_test::float_of(a)) && std::isnan(qtl_test::float_of(b));
    default:
      return false;  // fp6/fp4 have no NaN; e8m0 has the single NaN code 0xFF
  }
}

}  // namespace

TEST_CASE("number formats are exact under -ffp-contract=fast with FMA", "[numeric][sweep]") {
  if (!cpu_runs_contracted_code()) {
    return qtl_test::skip("this CPU has no FMA/AVX2: the contracted build cannot run here");
  }
#if !defined(QTL_TEST_CONTRACTED)
  WARN("not g++ on x86-64: the header is checked with the default flags only");
#endif  // ^^^ QTL_TEST_CONTRACTED ^^^
  table_encoder const fp16(qtl_test::fp16), bf16(qtl_test::bf16), e4m3(qtl_test::e4m3fn), e5m2(qtl_test::e5m2),
      e3m2(qtl_test::e3m2), e2m3(qtl_test::e2m3), e2m1(qtl_test::e2m1);
  std::vector<double> points;
  for (table_encoder const* t : {&fp16, &bf16, &e4m3, &e5m2, &e3m2, &e2m3, &e2m1}) {
    for (std::uint32_t c = 0; c < t->finite_codes(); ++c) {
      points.push_back(qtl_test::decode(t->fmt(), c).value);
    }
  }
  for (int e = -127; e <= 128; ++e) {
    points.push_back(std::ldexp(1.0, e));
    points.push_back(1.5 * std::ldexp(1.0, e));
  }
  for (double k = 0.5; k < 1 << 24; k = k < 4096 ? k + 1 : k * 1.001) {  // round_half_even's ties
    points.push_back(std::floor(k) + 0.5);
  }
  auto const patterns = qtl_test::sweep_patterns(std::uint64_t{1} << 10, points, 2);
  using qtl_test::e8m0_rule;
  std::size_t bad = 0;
  for (std::uint32_t const u : patterns) {
    float const x = qtl_test::float_of(u);
    contracted::codes const got = contracted::encode_all(x);
    float const rounded = std::nearbyint(x);
    qtl_test::decoded const rt = qtl_test::decode(qtl_test::fp16, fp16.encode(x, true, false));
    std::uint32_t const want[19] = {
        fp16.encode(x, true, false), fp16.encode(x, true, true), bf16.encode(x, true, false),
        e4m3.encode(x, true, false), e4m3.encode(x, true, true), e5m2.encode(x, true, false),
        e5m2.encode(x, true, true), e3m2.encode(x, true, true), e3m2.encode(x, false, true),
        e2m3.encode(x, true, true), e2m3.encode(x, false, true), e2m1.encode(x, true, true),
        e2m1.encode(x, false, true), qtl_test::encode_e8m0(x, e8m0_rule::nearest, false),
        qtl_test::encode_e8m0(x, e8m0_rule::toward_zero, false), qtl_test::encode_e8m0(x, e8m0_rule::up, false),
        qtl_test::encode_e8m0(x, e8m0_rule::up, true), qtl_test::bits_of(rounded),
        rt.is_nan ? 0x7FC00000u : qtl_test::bits_of(static_cast<float>(rt.value))};
    for (int i = 0; i < 19; ++i) {
      if (!same(got.c[i], want[i], i)) {
        if (bad++ < 5) {
          UNSCOPED_INFO("x = 0x" << std::hex << u << ", encoder #" << std::dec << i << ": got 0x" << std::hex
                                 << got.c[i] << ", want 0x" << want[i]);
        }
      }
    }
  }
  INFO(patterns.size() << " patterns x 19 encoders");
  CHECK(bad == 0);

  for (std::uint32_t c = 0; c < 65536; ++c) {
    auto const same_value = [](float a, qtl_test::decoded d) {
      return d.is_nan ? std::isnan(a) : (static_cast<double>(a) == d.value && std::signbit(a) == std::signbit(d.value));
    };
    INFO("code 0x" << std::hex << c);
    REQUIRE(same_value(contracted::decode_fp16(static_cast<std::uint16_t>(c)), qtl_test::decode(qtl_test::fp16, c)));
    if (c < 256) {
      REQUIRE(same_value(contracted::decode_e4m3fn(static_cast<std::uint8_t>(c)), qtl_test::decode(qtl_test::e4m3fn, c)));
      REQUIRE(same_value(contracted::decode_e5m2(static_cast<std::uint8_t>(c)), qtl_test::decode(qtl_test::e5m2, c)));
    }
  }
}
