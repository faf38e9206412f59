// qtl/exact.hpp: each operation is one IEEE float operation rounded to nearest even. The oracle is
// the same operation in double rounded to float, which is correctly rounded for +, -, x and / of
// floats (53 >= 2 * 24 + 2: double rounding is innocuous), on random bit patterns of every class
// (subnormals, ±0, ±Inf, NaN) and on hand-worked ties; and at compile time.
#include <qtl/exact.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <random>

namespace {

using qtl::detail::add_rn;
using qtl::detail::div_rn;
using qtl::detail::mul_rn;
using qtl::detail::mul_rn_unfused;
using qtl::detail::sub_rn;

// Ties at float's precision, each rounded to the even significand.
static_assert(add_rn(1.0f, 0x1p-24f) == 1.0f);                  // 1 + half an ulp: tie to even (down)
static_assert(add_rn(1.0f + 0x1p-23f, 0x1p-24f) == 1.0f + 0x1p-22f);  // odd + half an ulp: up
static_assert(sub_rn(1.0f, 0x1p-25f) == 1.0f);                  // half an ulp below 1 is a quarter above 1 - ulp
static_assert(mul_rn(1.0f + 0x1p-12f, 1.0f + 0x1p-12f) == 1.0f + 0x1p-11f);  // 2^-24 dropped: tie to even
static_assert(div_rn(1.0f, 3.0f) == 0x1.555556p-2f);
static_assert(mul_rn_unfused(3.0f, 0.5f, 0) == 1.5f);

/// `a` and `b` equal as bits, or both NaN (the NaN payload is the hardware's).
bool same(float a, float b) { return (a != a && b != b) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

float pattern(std::mt19937& rng) {
  std::uint32_t bits = rng();
  switch (rng() % 8) {
    case 0: bits &= 0x807fffffu; break;                                   // subnormal or ±0
    case 1: bits = (bits & 0x80000000u) | 0x7f800000u; break;             // ±Inf
    case 2: bits = (bits & 0x3fffffffu) | 0x3f000000u; break;             // near 1
    default: break;                                                       // anything, NaN included
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

TEST_CASE("add_rn, sub_rn, mul_rn, div_rn are correctly rounded on every class of float", "[exact]") {
  std::mt19937 rng(20261205);
  std::uint32_t const opaque = qtl::detail::opaque_zero();
  REQUIRE(opaque == 0);
  for (int i = 0; i != 400000; ++i) {
    float const a = pattern(rng);
    float const b = pattern(rng);
    double const x = a;
    double const y = b;
    INFO("a bits " << std::hex << std::bit_cast<std::uint32_t>(a) << " b bits " << std::bit_cast<std::uint32_t>(b));
    REQUIRE(same(add_rn(a, b), static_cast<float>(x + y)));
    REQUIRE(same(sub_rn(a, b), static_cast<float>(x - y)));
    REQUIRE(same(mul_rn(a, b), static_cast<float>(x * y)));
    REQUIRE(same(div_rn(a, b), static_cast<float>(x / y)));
    REQUIRE(same(mul_rn_unfused(a, b, opaque), static_cast<float>(x * y)));
  }
}

TEST_CASE("mul_rn_unfused keeps the product's rounding inside a - b sum", "[exact]") {
  // (1 + 2^-12)^2 - 1: the rounded product gives 2^-11; an FMA would give 2^-11 + 2^-24.
  volatile float a = 1.0f + 0x1p-12f;
  volatile float c = 1.0f;
  float const p = mul_rn_unfused(a, a, qtl::detail::opaque_zero());
  CHECK(sub_rn(p, c) == 0x1p-11f);
}
