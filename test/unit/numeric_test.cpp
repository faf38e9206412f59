// qtl/numeric.hpp against two oracles:
//  * test/support/numeric_oracle.hpp: values from the bit fields through std::ldexp, encoding by
//    nearest-value search — independent of the header's bit logic, always built;
//  * the CUDA Toolkit's host conversions (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h, cuda_fp6.h,
//    cuda_fp4.h), where the toolkit is present (QTL_HAVE_CUDA_HOST_HEADERS).
// Decoders are checked on every code. Encoders are checked on a dense sweep of float bit patterns
// (every 2^sweep_shift-th pattern of all 2^32, plus ±radius ulps around every value and every
// midpoint of the format — all of its rounding boundaries — and the special values); all 2^32
// patterns only in the hidden "[exhaustive]" case (see `sweep_shift`). NaNs compare as NaNs.
#include <qtl/numeric.hpp>

#include <catch2/catch.hpp>
#include <numeric_oracle.hpp>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>
#include "thin.hpp"

#if defined(QTL_HAVE_CUDA_HOST_HEADERS)
#  include <cuda_bf16.h>
#  include <cuda_fp16.h>
#  include <cuda_fp4.h>
#  include <cuda_fp6.h>
#  include <cuda_fp8.h>
#endif  // ^^^ QTL_HAVE_CUDA_HOST_HEADERS ^^^

namespace {

using qtl::saturation;
using qtl_test::bits_of;
using qtl_test::float_of;

// The sweeps: every 2^6-th float pattern (2^26 = 67M per format and mode) against the CUDA
// Toolkit, every 2^8-th against the (slower) table oracle, plus the boundary neighbourhoods. Not all
// 2^32 patterns by default: that is the hidden "[exhaustive]" test case at the end, which took
// 248 s of CPU on one core of the 2-core build machine (-O2, all 17 modes, about 15 s per mode;
// 0 mismatches) — far beyond "a few seconds per format" for every `meson test`. The rounding
// boundaries, where encoders differ, are covered exhaustively by the ±radius neighbourhoods of
// every value and midpoint.
constexpr int sweep_shift = 6;
constexpr int oracle_sweep_shift = 8;
constexpr int radius = 4;

/// True when both are NaN, or both are the same number with the same sign.
bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b);
}
bool same_value(float a, qtl_test::decoded d) {
  if (d.is_nan) {
    return std::isnan(a);
  }
  return !std::isnan(a) && static_cast<double>(a) == d.value && std::signbit(a) == std::signbit(d.value);
}

/// The finite values of `f` and the first value past its maximum (for the overflow boundary).
std::vector<double> boundary_points(qtl_test::table_encoder const& enc) {
  std::vector<double> pts;
  for (std::uint32_t c = 0; c < enc.finite_codes(); ++c) {
    pts.push_back(qtl_test::decode(enc.fmt(), c).value);
  }
  pts.push_back(2 * pts.back() - pts[pts.size() - 2]);
  return pts;
}

std::vector<double> e8m0_points() {
  std::vector<double> pts;
  for (int c = 0; c <= 255; ++c) {
    pts.push_back(std::ldexp(1.0, c - 127));  // 2^128 is the overflow boundary
  }
  for (int c = 0; c <= 255; ++c) {
    pts.push_back(1.5 * std::ldexp(1.0, c - 127));  // torch's nearest boundary
  }
  pts.push_back(0.0);
  return pts;
}

/// Runs `mine` and `ref` on every pattern; codes must be equal, or both decode to NaN.
template <class Mine, class Ref, class IsNan>
void check_codes(std::string const& what, std::vector<std::uint32_t> const& patterns, Mine const& mine,
                 Ref const& ref, IsNan const& code_is_nan) {
  std::size_t bad = 0;
  std::string first;
  for (std::uint32_t const u : patterns) {
    float const x = float_of(u);
    std::uint32_t const a = mine(x);
    std::uint32_t const b = ref(x);
    if (a != b && !(code_is_nan(a) && code_is_nan(b))) {
      if (bad++ == 0) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "x = %a (0x%08X): qtl 0x%X, reference 0x%X", static_cast<double>(x), u, a, b);
        first = buf;
      }
    }
  }
  INFO(what << ": " << patterns.size() << " patterns, " << bad << " mismatches; first: " << first);
  CHECK(bad == 0);
}

struct narrow_case {
  qtl_test::format fmt;
  std::function<float(std::uint8_t)> decode;
};

std::vector<narrow_case> narrow_formats() {
  return {{qtl_test::e4m3fn, qtl::e4m3fn_to_float},
          {qtl_test::e5m2, qtl::e5m2_to_float},
          {qtl_test::e3m2, qtl::e3m2_to_float},
          {qtl_test::e2m3, qtl::e2m3_to_float},
          {qtl_test::e2m1, qtl::e2m1_to_float}};
}

bool nan_code(qtl_test::format const& f, std::uint32_t c) { return qtl_test::decode(f, c).is_nan; }

}  // namespace

TEST_CASE("every code of every 8-bit-or-narrower format decodes to the value of its bit fields", "[numeric]") {
  for (narrow_case const& nc : narrow_formats()) {
    int nans = 0;
    for (std::uint32_t c = 0; c < (1u << nc.fmt.width()); ++c) {
      qtl_test::decoded const want = qtl_test::decode(nc.fmt, c);
      nans += want.is_nan ? 1 : 0;
      INFO(nc.fmt.name << " code 0x" << std::hex << c);
      REQUIRE(same_value(nc.decode(static_cast<std::uint8_t>(c)), want));
    }
    int const want_nans = nc.fmt.sp == qtl_test::specials::ieee          ? 2 * ((1 << nc.fmt.m) - 1)
                          : nc.fmt.sp == qtl_test::specials::none        ? 0
                                                                          : 2;
    CHECK(nans == want_nans);
  }
  for (std::uint32_t c = 0; c < 256; ++c) {
    INFO("e8m0 code " << c);
    REQUIRE(same_value(qtl::e8m0_to_float(static_cast<std::uint8_t>(c)), qtl_test::decode_e8m0(c)));
  }
  // The sub-byte decoders read only their low bits.
  for (std::uint32_t c = 0; c < 256; ++c) {
    REQUIRE(same_float(qtl::e2m1_to_float(static_cast<std::uint8_t>(c)), qtl::e2m1_to_float(c & 0xFu)));
    REQUIRE(same_float(qtl::e3m2_to_float(static_cast<std::uint8_t>(c)), qtl::e3m2_to_float(c & 0x3Fu)));
    REQUIRE(same_float(qtl::e2m3_to_float(static_cast<std::uint8_t>(c)), qtl::e2m3_to_float(c & 0x3Fu)));
  }
}

TEST_CASE("all 65536 fp16 and bf16 codes decode to the value of their bit fields", "[numeric]") {
  for (std::uint32_t c = 0; c < 65536; ++c) {
    INFO("code 0x" << std::hex << c);
    REQUIRE(same_value(qtl::fp16_to_float(static_cast<std::uint16_t>(c)), qtl_test::decode(qtl_test::fp16, c)));
    REQUIRE(same_value(qtl::bf16_to_float(static_cast<std::uint16_t>(c)), qtl_test::decode(qtl_test::bf16, c)));
    REQUIRE(same_float(qtl::to_float(qtl::half_t{static_cast<std::uint16_t>(c)}), qtl::fp16_to_float(c)));
    REQUIRE(same_float(qtl::to_float(qtl::bfloat16_t{static_cast<std::uint16_t>(c)}), qtl::bf16_to_float(c)));
  }
}

TEST_CASE("every non-NaN code survives decode then encode, in every mode", "[numeric]") {
  for (std::uint32_t c = 0; c < 65536; ++c) {
    auto const h = static_cast<std::uint16_t>(c);
    if (!nan_code(qtl_test::fp16, c)) {
      REQUIRE(qtl::float_to_fp16(qtl::fp16_to_float(h)) == h);
      if (!std::isinf(qtl::fp16_to_float(h))) {
        REQUIRE(qtl::float_to_fp16(qtl::fp16_to_float(h), saturation::finite) == h);
      }
    }
    if (!nan_code(qtl_test::bf16, c)) {
      REQUIRE(qtl::float_to_bf16(qtl::bf16_to_float(h)) == h);
    }
  }
  for (std::uint32_t c = 0; c < 256; ++c) {
    auto const b = static_cast<std::uint8_t>(c);
    INFO("code 0x" << std::hex << c);
    if (!nan_code(qtl_test::e4m3fn, c)) {
      REQUIRE(qtl::float_to_e4m3fn(qtl::e4m3fn_to_float(b)) == b);
      REQUIRE(qtl::float_to_e4m3fn(qtl::e4m3fn_to_float(b), saturation::finite) == b);
    }
    if (!nan_code(qtl_test::e5m2, c)) {
      REQUIRE(qtl::float_to_e5m2(qtl::e5m2_to_float(b)) == b);
    }
    if (c < 64) {
      REQUIRE(qtl::float_to_e3m2(qtl::e3m2_to_float(b)) == b);
      REQUIRE(qtl::float_to_e2m3(qtl::e2m3_to_float(b), qtl::round_mode::toward_zero) == b);
    }
    if (c < 16) {
      REQUIRE(qtl::float_to_e2m1(qtl::e2m1_to_float(b)) == b);
    }
    if (c < 255) {
      for (auto const r : {qtl::e8m0_rounding::nearest, qtl::e8m0_rounding::toward_zero, qtl::e8m0_rounding::up}) {
        REQUIRE(qtl::float_to_e8m0(qtl::e8m0_to_float(b), r) == b);
      }
    }
  }
}

TEST_CASE("encoders equal the nearest-value oracle on a dense sweep", "[numeric][sweep]") {
  using qtl_test::table_encoder;
  std::uint64_t const stride = std::uint64_t{1} << (oracle_sweep_shift + qtl_test::thin_shift());

  SECTION("fp16 and bf16") {
    for (auto const* f : {&qtl_test::fp16, &qtl_test::bf16}) {
      table_encoder const enc(*f);
      auto const pats = qtl_test::sweep_patterns(stride, boundary_points(enc), radius);
      bool const is_fp16 = f->name == "fp16";
      for (bool const sat : {false, true}) {
        auto const s = sat ? saturation::finite : saturation::none;
        check_codes(f->name + (sat ? " satfinite" : " nosat"), pats,
                    [&](float x) -> std::uint32_t { return is_fp16 ? qtl::float_to_fp16(x, s) : qtl::float_to_bf16(x, s); },
                    [&](float x) { return enc.encode(x, true, sat); },
                    [&](std::uint32_t c) { return nan_code(*f, c); });
      }
    }
  }
  SECTION("float8 e4m3fn and e5m2") {
    for (auto const* f : {&qtl_test::e4m3fn, &qtl_test::e5m2}) {
      table_encoder const enc(*f);
      auto const pats = qtl_test::sweep_patterns(stride, boundary_points(enc), radius);
      bool const is_e4m3 = f->name == "e4m3fn";
      for (bool const sat : {false, true}) {
        auto const s = sat ? saturation::finite : saturation::none;
        check_codes(f->name + (sat ? " satfinite" : " nosat"), pats,
                    [&](float x) -> std::uint32_t { return is_e4m3 ? qtl::float_to_e4m3fn(x, s) : qtl::float_to_e5m2(x, s); },
                    [&](float x) { return enc.encode(x, true, sat); },
                    [&](std::uint32_t c) { return nan_code(*f, c); });
      }
    }
  }
  SECTION("float6 e3m2 / e2m3 and float4 e2m1") {
    for (auto const* f : {&qtl_test::e3m2, &qtl_test::e2m3, &qtl_test::e2m1}) {
      table_encoder const enc(*f);
      auto const pats = qtl_test::sweep_patterns(stride, boundary_points(enc), radius);
      for (bool const nearest : {true, false}) {
        auto const r = nearest ? qtl::round_mode::nearest_even : qtl::round_mode::toward_zero;
        int const which = f->name == "e3m2" ? 0 : f->name == "e2m3" ? 1 : 2;
        auto const mine = [&](float x) -> std::uint32_t {
          return which == 0 ? qtl::float_to_e3m2(x, r) : which == 1 ? qtl::float_to_e2m3(x, r) : qtl::float_to_e2m1(x, r);
        };
        check_codes(f->name + (nearest ? " rn" : " rz"), pats, mine,
                    [&](float x) { return enc.encode(x, nearest, true); }, [](std::uint32_t) { return false; });
      }
    }
  }
  SECTION("float8 e8m0fnu, every rounding and saturation") {
    auto const pats = qtl_test::sweep_patterns(stride, e8m0_points(), radius);
    using R = qtl::e8m0_rounding;
    using O = qtl_test::e8m0_rule;
    for (auto const& [r, o, name] : {std::tuple{R::nearest, O::nearest, "nearest"},
                                    std::tuple{R::toward_zero, O::toward_zero, "toward_zero"},
                                    std::tuple{R::up, O::up, "up"}}) {
      for (bool const sat : {false, true}) {
        auto const s = sat ? saturation::finite : saturation::none;
        check_codes(std::string("e8m0 ") + name + (sat ? " satfinite" : " nosat"), pats,
                    [&](float x) -> std::uint32_t { return qtl::float_to_e8m0(x, r, s); },
                    [&](float x) { return qtl_test::encode_e8m0(x, o, sat); },
                    [](std::uint32_t c) { return c == 0xFF; });
      }
    }
  }
}

TEST_CASE("canonical NaNs are the documented codes", "[numeric]") {
  for (std::uint32_t const u : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0x7FA00000u}) {
    for (std::uint32_t const sign : {0u, 0x80000000u}) {
      float const x = float_of(u | sign);
      std::uint32_t const s = sign != 0 ? 1u : 0u;
      CHECK(qtl::float_to_fp16(x) == ((s << 15) | 0x7E00u));
      CHECK(qtl::float_to_bf16(x) == 0x7FC0u);
      CHECK(qtl::float_to_e4m3fn(x, saturation::finite) == ((s << 7) | 0x7Fu));
      CHECK(qtl::float_to_e5m2(x, saturation::finite) == ((s << 7) | 0x7Fu));
      CHECK(qtl::float_to_e8m0(x, qtl::e8m0_rounding::up, saturation::finite) == 0xFFu);
      CHECK(qtl::float_to_e3m2(x) == 0x1Fu);
      CHECK(qtl::float_to_e2m3(x) == 0x1Fu);
      CHECK(qtl::float_to_e2m1(x) == 0x7u);
    }
  }
}

TEST_CASE("typed conversions agree with the raw codecs", "[numeric]") {
  for (std::uint32_t i = 0; i < (1u << 20); ++i) {
    float const x = float_of(i * 4099u + 0x1234u);
    REQUIRE(qtl::from_float<qtl::half_t>(x).bits == qtl::float_to_fp16(x));
    REQUIRE(qtl::from_float<qtl::bfloat16_t>(x).bits == qtl::float_to_bf16(x));
    REQUIRE(qtl::from_float<qtl::float8_e4m3fn_t>(x).bits == qtl::float_to_e4m3fn(x));
    REQUIRE(qtl::from_float<qtl::float8_e4m3fn_t>(x, saturation::finite).bits ==
            qtl::float_to_e4m3fn(x, saturation::finite));
    REQUIRE(qtl::from_float<qtl::float8_e5m2_t>(x).bits == qtl::float_to_e5m2(x));
    REQUIRE(qtl::from_float<qtl::float8_e8m0fnu_t>(x).bits == qtl::float_to_e8m0(x));
    REQUIRE(same_float(qtl::from_float<float>(x), x));
  }
  for (std::uint32_t c = 0; c < 256; ++c) {
    auto const b = static_cast<std::uint8_t>(c);
    REQUIRE(same_float(qtl::to_float(qtl::float8_e4m3fn_t{b}), qtl::e4m3fn_to_float(b)));
    REQUIRE(same_float(qtl::to_float(qtl::float8_e5m2_t{b}), qtl::e5m2_to_float(b)));
    REQUIRE(same_float(qtl::to_float(qtl::float8_e8m0fnu_t{b}), qtl::e8m0_to_float(b)));
  }
}

TEST_CASE("the branch-free fp16/bf16 conversions equal the generic codec", "[numeric]") {
  using qtl::detail::special_codes;
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    auto const c = static_cast<std::uint16_t>(h);
    REQUIRE(bits_of(qtl::fp16_to_float(c)) == bits_of(qtl::detail::decode<5, 10, special_codes::ieee>(c)));
  }
  // Every exponent and sign with the mantissas next to each rounding point of fp16 (bit 13) and
  // bf16 (bit 16): half an ulp and the neighbours of it, odd and even kept bits.
  std::vector<std::uint32_t> probes;
  for (std::uint32_t hi = 0; hi < 512; ++hi) {
    for (int cut : {13, 16}) {
      std::uint32_t const half = 1u << (cut - 1);
      for (std::uint32_t kept : {0u, 1u << cut, 3u << cut, 0x7FFFFFu >> cut << cut}) {
        for (std::uint32_t low : {0u, 1u, half - 1, half, half + 1, (half << 1) - 1}) {
          probes.push_back((hi << 23) | ((kept | low) & 0x7FFFFFu));
        }
      }
    }
  }
  for (std::uint64_t u = 12345; u < (std::uint64_t{1} << 32); u += std::uint64_t{1} << (oracle_sweep_shift + qtl_test::thin_shift())) {
    probes.push_back(static_cast<std::uint32_t>(u));
  }
  for (std::uint32_t u : probes) {
    INFO("bits 0x" << std::hex << u);
    REQUIRE(qtl::float_to_fp16(float_of(u)) ==
            qtl::detail::encode<5, 10, special_codes::ieee, 0x7E00u, true>(u, saturation::none, true));
    REQUIRE(qtl::float_to_bf16(float_of(u)) ==
            qtl::detail::encode<8, 7, special_codes::ieee, 0x7FC0u, false>(u, saturation::none, true));
  }
}

TEST_CASE("round_half_even equals std::nearbyint in round-to-nearest mode", "[numeric][sweep]") {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  std::size_t bad = 0;
  std::uint32_t first = 0;
  auto check = [&](std::uint32_t u) {
    float const x = float_of(u);
    if (!same_float(qtl::round_half_even(x), std::nearbyint(x)) && bad++ == 0) {
      first = u;
    }
  };
  for (std::uint64_t u = 777; u < (std::uint64_t{1} << 32); u += std::uint64_t{1} << (sweep_shift + qtl_test::thin_shift())) {
    check(static_cast<std::uint32_t>(u));
  }
  // Every half-integer and its neighbours up to 2^24, and the region around 2^23.
  for (std::uint32_t k = 0; k < (1u << 24); k += 1 + k / 64) {
    std::uint32_t const b = bits_of(static_cast<float>(k) + 0.5f);
    for (std::uint32_t d = 0; d < 3; ++d) {
      check(b - 1 + d);
      check((b - 1 + d) | 0x80000000u);
    }
  }
  INFO("first mismatch at 0x" << std::hex << first);
  CHECK(bad == 0);
}

#if defined(QTL_HAVE_CUDA_HOST_HEADERS)

namespace {

float half_raw_to_float(__half_raw h) { return __half2float(__half(h)); }

}  // namespace

TEST_CASE("decoders equal the CUDA Toolkit's on every code", "[numeric][cuda-host]") {
  for (std::uint32_t c = 0; c < 65536; ++c) {
    __half_raw hr;
    hr.x = static_cast<unsigned short>(c);
    __nv_bfloat16_raw br;
    br.x = static_cast<unsigned short>(c);
    INFO("code 0x" << std::hex << c);
    REQUIRE(same_float(qtl::fp16_to_float(static_cast<std::uint16_t>(c)), __half2float(__half(hr))));
    REQUIRE(same_float(qtl::bf16_to_float(static_cast<std::uint16_t>(c)), __bfloat162float(__nv_bfloat16(br))));
  }
  for (std::uint32_t c = 0; c < 256; ++c) {
    auto const b = static_cast<std::uint8_t>(c);
    INFO("code 0x" << std::hex << c);
    REQUIRE(same_float(qtl::e4m3fn_to_float(b), half_raw_to_float(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3))));
    REQUIRE(same_float(qtl::e5m2_to_float(b), half_raw_to_float(__nv_cvt_fp8_to_halfraw(b, __NV_E5M2))));
    __nv_bfloat16 const e8 = __nv_bfloat16(__nv_cvt_e8m0_to_bf16raw(b));
    REQUIRE(same_float(qtl::e8m0_to_float(b), __bfloat162float(e8)));
    if (c < 64) {
      REQUIRE(same_float(qtl::e3m2_to_float(b), half_raw_to_float(__nv_cvt_fp6_to_halfraw(b, __NV_E3M2))));
      REQUIRE(same_float(qtl::e2m3_to_float(b), half_raw_to_float(__nv_cvt_fp6_to_halfraw(b, __NV_E2M3))));
    }
    if (c < 16) {
      REQUIRE(same_float(qtl::e2m1_to_float(b), half_raw_to_float(__nv_cvt_fp4_to_halfraw(b, __NV_E2M1))));
    }
  }
}

TEST_CASE("encoders equal the CUDA Toolkit's host conversions on a dense sweep", "[numeric][sweep][cuda-host]") {
  std::uint64_t const stride = std::uint64_t{1} << (sweep_shift + qtl_test::thin_shift());
  using qtl_test::table_encoder;

  SECTION("fp16: __float2half_rn") {
    auto const pats = qtl_test::sweep_patterns(stride, boundary_points(table_encoder(qtl_test::fp16)), radius);
    check_codes("fp16", pats, [](float x) -> std::uint32_t { return qtl::float_to_fp16(x); },
                [](float x) -> std::uint32_t { return __half_raw(__float2half_rn(x)).x; },
                [](std::uint32_t c) { return nan_code(qtl_test::fp16, c); });
  }
  SECTION("bf16: __float2bfloat16_rn") {
    auto const pats = qtl_test::sweep_patterns(stride, boundary_points(table_encoder(qtl_test::bf16)), radius);
    check_codes("bf16", pats, [](float x) -> std::uint32_t { return qtl::float_to_bf16(x); },
                [](float x) -> std::uint32_t { return __nv_bfloat16_raw(__float2bfloat16_rn(x)).x; },
                [](std::uint32_t c) { return nan_code(qtl_test::bf16, c); });
  }
  SECTION("fp8: __nv_cvt_float_to_fp8, __NV_SATFINITE and __NV_NOSAT") {
    for (auto const* f : {&qtl_test::e4m3fn, &qtl_test::e5m2}) {
      auto const pats = qtl_test::sweep_patterns(stride, boundary_points(table_encoder(*f)), radius);
      bool const is_e4m3 = f->name == "e4m3fn";
      for (bool const sat : {false, true}) {
        auto const s = sat ? saturation::finite : saturation::none;
        check_codes(f->name + (sat ? " __NV_SATFINITE" : " __NV_NOSAT"), pats,
                    [&](float x) -> std::uint32_t { return is_e4m3 ? qtl::float_to_e4m3fn(x, s) : qtl::float_to_e5m2(x, s); },
                    [&](float x) -> std::uint32_t {
                      return __nv_cvt_float_to_fp8(x, sat ? __NV_SATFINITE : __NV_NOSAT, is_e4m3 ? __NV_E4M3 : __NV_E5M2);
                    },
                    [&](std::uint32_t c) { return nan_code(*f, c); });
      }
    }
  }
  SECTION("fp6 and fp4: __nv_cvt_float_to_fp6 / _fp4, cudaRoundNearest and cudaRoundZero") {
    for (auto const* f : {&qtl_test::e3m2, &qtl_test::e2m3, &qtl_test::e2m1}) {
      auto const pats = qtl_test::sweep_patterns(stride, boundary_points(table_encoder(*f)), radius);
      for (bool const nearest : {true, false}) {
        auto const r = nearest ? qtl::round_mode::nearest_even : qtl::round_mode::toward_zero;
        cudaRoundMode const cr = nearest ? cudaRoundNearest : cudaRoundZero;
        int const which = f->name == "e3m2" ? 0 : f->name == "e2m3" ? 1 : 2;
        auto const mine = [&](float x) -> std::uint32_t {
          return which == 0 ? qtl::float_to_e3m2(x, r) : which == 1 ? qtl::float_to_e2m3(x, r) : qtl::float_to_e2m1(x, r);
        };
        auto const ref = [&](float x) -> std::uint32_t {
          return which == 0   ? __nv_cvt_float_to_fp6(x, __NV_E3M2, cr)
                 : which == 1 ? __nv_cvt_float_to_fp6(x, __NV_E2M3, cr)
                              : __nv_cvt_float_to_fp4(x, __NV_E2M1, cr);
        };
        check_codes(f->name + (nearest ? " cudaRoundNearest" : " cudaRoundZero"), pats, mine, ref,
                    [](std::uint32_t) { return false; });
      }
    }
  }
  SECTION("e8m0: __nv_cvt_float_to_e8m0, cudaRoundZero and cudaRoundPosInf, both saturations") {
    auto const pats = qtl_test::sweep_patterns(stride, e8m0_points(), radius);
    for (bool const up : {false, true}) {
      for (bool const sat : {false, true}) {
        auto const r = up ? qtl::e8m0_rounding::up : qtl::e8m0_rounding::toward_zero;
        auto const s = sat ? saturation::finite : saturation::none;
        check_codes(std::string("e8m0 ") + (up ? "cudaRoundPosInf" : "cudaRoundZero") +
                        (sat ? " __NV_SATFINITE" : " __NV_NOSAT"),
                    pats, [&](float x) -> std::uint32_t { return qtl::float_to_e8m0(x, r, s); },
                    [&](float x) -> std::uint32_t {
                      return __nv_cvt_float_to_e8m0(x, sat ? __NV_SATFINITE : __NV_NOSAT,
                                                    up ? cudaRoundPosInf : cudaRoundZero);
                    },
                    [](std::uint32_t c) { return c == 0xFF; });
      }
    }
  }
}

#endif  // ^^^ QTL_HAVE_CUDA_HOST_HEADERS ^^^

#if defined(QTL_HAVE_CUDA_HOST_HEADERS)

// Hidden (not run by `meson test`: 248 s of CPU on one core of the build machine, measured with
// /usr/bin/time). Run it with `unit_numeric "[exhaustive]"`: every one of the 2^32 float bit
// patterns, every mode that both QTL and the Toolkit offer, plus round_half_even vs nearbyint.
TEST_CASE("encoders equal the CUDA Toolkit's host conversions on all 2^32 floats", "[.][exhaustive][cuda-host]") {
  constexpr int n_modes = 17;
  char const* const names[n_modes] = {"fp16 rn", "bf16 rn", "e4m3 nosat", "e4m3 satfinite", "e5m2 nosat",
                                      "e5m2 satfinite", "e3m2 rn", "e3m2 rz", "e2m3 rn", "e2m3 rz", "e2m1 rn",
                                      "e2m1 rz", "e8m0 rz nosat", "e8m0 rz satfinite", "e8m0 rp nosat",
                                      "e8m0 rp satfinite", "round_half_even vs nearbyint"};
  std::uint64_t bad[n_modes] = {};
  auto const nan8 = [](std::uint32_t c, bool e4m3) {
    return e4m3 ? (c & 0x7Fu) == 0x7Fu : (c & 0x7Cu) == 0x7Cu && (c & 0x3u) != 0;
  };
  for (std::uint64_t w = 0; w < (std::uint64_t{1} << 32); ++w) {
    std::uint32_t const u = static_cast<std::uint32_t>(w);
    float const x = float_of(u);
    bool const xnan = std::isnan(x);
    // fp16 / bf16: equal codes, or both NaN (x NaN gives NaN in both).
    bad[0] += qtl::float_to_fp16(x) != __half_raw(__float2half_rn(x)).x && !xnan;
    bad[1] += qtl::float_to_bf16(x) != __nv_bfloat16_raw(__float2bfloat16_rn(x)).x && !xnan;
    for (int k = 0; k < 4; ++k) {
      bool const e4m3 = k < 2;
      bool const sat = k % 2 == 1;
      auto const s = sat ? saturation::finite : saturation::none;
      std::uint32_t const a = e4m3 ? qtl::float_to_e4m3fn(x, s) : qtl::float_to_e5m2(x, s);
      std::uint32_t const b = __nv_cvt_float_to_fp8(x, sat ? __NV_SATFINITE : __NV_NOSAT, e4m3 ? __NV_E4M3 : __NV_E5M2);
      bad[2 + k] += a != b && !(nan8(a, e4m3) && nan8(b, e4m3));
    }
    for (int k = 0; k < 2; ++k) {
      auto const r = k == 0 ? qtl::round_mode::nearest_even : qtl::round_mode::toward_zero;
      cudaRoundMode const cr = k == 0 ? cudaRoundNearest : cudaRoundZero;
      bad[6 + k] += qtl::float_to_e3m2(x, r) != __nv_cvt_float_to_fp6(x, __NV_E3M2, cr);
      bad[8 + k] += qtl::float_to_e2m3(x, r) != __nv_cvt_float_to_fp6(x, __NV_E2M3, cr);
      bad[10 + k] += qtl::float_to_e2m1(x, r) != __nv_cvt_float_to_fp4(x, __NV_E2M1, cr);
    }
    for (int k = 0; k < 4; ++k) {
      bool const up = k >= 2;
      bool const sat = k % 2 == 1;
      bad[12 + k] += qtl::float_to_e8m0(x, up ? qtl::e8m0_rounding::up : qtl::e8m0_rounding::toward_zero,
                                        sat ? saturation::finite : saturation::none) !=
                     __nv_cvt_float_to_e8m0(x, sat ? __NV_SATFINITE : __NV_NOSAT, up ? cudaRoundPosInf : cudaRoundZero);
    }
    bad[16] += !same_float(qtl::round_half_even(x), std::nearbyint(x));
  }
  for (int k = 0; k < n_modes; ++k) {
    INFO(names[k] << ": " << bad[k] << " mismatches in 2^32 patterns");
    CHECK(bad[k] == 0);
  }
}

#endif  // ^^^ QTL_HAVE_CUDA_HOST_HEADERS ^^^
