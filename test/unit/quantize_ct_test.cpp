// qtl/element/quantize.hpp: compressed-tensors' integer rule (ct_int_group_params, ct_int_code,
// ct_int_dequantize), the rule `qtl quantize --format w4a16|w8a16` writes, and
// qtl/element/fp4.hpp's ct_mx_scale_code (`--format mxfp4`) and ct_nvfp4_global_scale (`--format
// nvfp4`). Hand-worked cases in constant evaluation and at run time; the heavy interop tier checks
// the same rules against compressed-tensors 0.20.0 itself (test/interop/heavy/test_consumers.py).
#include <qtl/fp4.hpp>
#include <qtl/quantize.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace {

using qtl::bfloat16_t;
using qtl::half_t;
using qtl::group_params;

float h(float x) { return qtl::to_float(qtl::from_float<half_t>(x)); }

// Symmetric 4-bit, fp16: amax 1 -> s = fp16(1 / 7.5) = 1092 * 2^-13 (0.13330078125), not the
// GPTQ rule's 1/7. Then 1.0 / s = 7.5018..., which rounds in fp16 to 7.5, rne 8, clamped to 7.
static_assert(qtl::ct_int_group_params<half_t>(1.0f, -0.5f, 4, true).s == 1092.0f * 0x1p-13f);
static_assert(qtl::ct_int_group_params<half_t>(1.0f, -0.5f, 4, true).zp == 0.0f);
static_assert(qtl::ct_int_code<half_t>(1.0f, {1092.0f * 0x1p-13f, 0.0f}, 4) == 7.0f);
// 8-bit: amax 1 -> fp16(1 / 127.5) = 1028 * 2^-17.
static_assert(qtl::ct_int_group_params<half_t>(-1.0f, -1.0f, 8, true).s == 1028.0f * 0x1p-17f);
// The range always includes 0: a group of positive weights 0.5..1 has mn = 0 (asymmetric,
// float): s = 1/15, zp = rne(-8 - 0) = -8, so 1.0 -> rne(15 - 8) = 7 and 0.5 -> rne(7.5 - 8) = 0 (tie to even).
static_assert(qtl::ct_int_group_params<float>(1.0f, 0.5f, 4, false).zp == -8.0f);
static_assert(qtl::ct_int_code<float>(1.0f, qtl::ct_int_group_params<float>(1.0f, 0.5f, 4, false), 4) == 7.0f);
// Asymmetric, float: mn -1, mx 2: s = 3/15, zp = rne(-8 - (-1 / s)) = -3; 2 -> 7, -1 -> -8.
static_assert(qtl::ct_int_group_params<float>(2.0f, -1.0f, 4, false).zp == -3.0f);
static_assert(qtl::ct_int_code<float>(2.0f, qtl::ct_int_group_params<float>(2.0f, -1.0f, 4, false), 4) == 7.0f);
static_assert(qtl::ct_int_code<float>(-1.0f, qtl::ct_int_group_params<float>(2.0f, -1.0f, 4, false), 4) == -8.0f);
// The zero point is added in T before the rounding: fp16 0.515625 + 100 = 100.515625 rounds to
// 100.5 (ulp 1/16 there), then to the even 100; rne(0.515625) + 100 would be 101.
static_assert(qtl::ct_int_code<half_t>(0.515625f, {1.0f, 100.0f}, 8) == 100.0f);
static_assert(qtl::ct_int_code<float>(0.515625f, {1.0f, 100.0f}, 8) == 101.0f);
// A zero scale becomes T's epsilon (after the zero point): the all-zero group.
static_assert(qtl::ct_int_group_params<half_t>(0.0f, 0.0f, 4, true).s == 0x1p-10f);
static_assert(qtl::ct_int_group_params<bfloat16_t>(0.0f, 0.0f, 4, true).s == 0x1p-7f);
static_assert(qtl::ct_int_group_params<float>(0.0f, 0.0f, 8, true).s == std::numeric_limits<float>::epsilon());
// Dequantization in the scale's dtype: fp16(fp16(q - zp) * s).
static_assert(qtl::ct_int_dequantize<half_t>(7.0f, {1092.0f * 0x1p-13f, 0.0f}) == 7644.0f * 0x1p-13f);

// compressed-tensors' MXFP4 exponent: amax rounded to a power of two (up from a significand of
// 1.75), divided by 4. amax 6 -> 2^0; 6.9 -> 2^0 too (clips to 6; the library rule takes 2^1);
// 7 -> 2^1.
static_assert(qtl::ct_mx_scale_code<half_t>(6.0f) == 127);
static_assert(qtl::ct_mx_scale_code<half_t>(6.875f) == 127);
static_assert(qtl::ct_mx_scale_code<half_t>(7.0f) == 128);
static_assert(qtl::ct_mx_scale_code<float>(1.0f) == 125);
// Zero and fp16 subnormals: exponent field 0 gives 2^-127, which fp16 flushes to 0 and CT's
// epsilon makes 1 (byte 127); bf16 and float keep 2^-127 (byte 0). From 0.75 * 2^-14 the
// rounding carries into fp16's exponent field: 2^-14, byte 111.
static_assert(qtl::ct_mx_scale_code<half_t>(0.0f) == 127);
static_assert(qtl::ct_mx_scale_code<bfloat16_t>(0.0f) == 0);
static_assert(qtl::ct_mx_scale_code<float>(0.0f) == 0);
static_assert(qtl::ct_mx_scale_code<half_t>(0.5f * 0x1p-14f) == 127);
static_assert(qtl::ct_mx_scale_code<half_t>(0.75f * 0x1p-14f) == 111);
static_assert(qtl::ct_mx_scale_code<half_t>(0x1p-14f) == 111);

// compressed-tensors' NVFP4 global scale, torch's `2688 / amax` = fl(fl(1 / amax) * 2688): for
// amax 9.487008 (0x4117CAC9) 1/amax = 0.10540626 and the product rounds to 0x438DAADD, one ulp
// above the single division of the library rule (0x438DAADC), as torch 2.15 prints both.
static_assert(std::bit_cast<std::uint32_t>(qtl::ct_nvfp4_global_scale(std::bit_cast<float>(0x4117CAC9u))) ==
              0x438DAADDu);
static_assert(std::bit_cast<std::uint32_t>(qtl::nvfp4_global_scale_from_amax(std::bit_cast<float>(0x4117CAC9u))) ==
              0x438DAADCu);
// Below: 3.1251962 (0x40480337), CT 0x445706C8, one division 0x445706C9.
static_assert(std::bit_cast<std::uint32_t>(qtl::ct_nvfp4_global_scale(std::bit_cast<float>(0x40480337u))) ==
              0x445706C8u);
// Zero, and amax so small that 2688 / amax overflows (torch: clamp to tiny, nan_to_num), are 1;
// 8e-36 is not; +inf gives 0 (refused by the quantizers), NaN 1.
static_assert(qtl::ct_nvfp4_global_scale(0.0f) == 1.0f && qtl::ct_nvfp4_global_scale(7e-36f) == 1.0f);
static_assert(qtl::ct_nvfp4_global_scale(8e-36f) > 3.3e38f);
static_assert(qtl::ct_nvfp4_global_scale(std::numeric_limits<float>::infinity()) == 0.0f);
static_assert(qtl::ct_nvfp4_global_scale(std::numeric_limits<float>::quiet_NaN()) == 1.0f);

}  // namespace

TEST_CASE("compressed-tensors rule: every step rounds to the weight dtype", "[quantize][ct]") {
  // Random fp16 groups: the scale is fp16(amax / 7.5) of the widened range, each code is the
  // rounding of fp16(fp16(w / s) + zp), and the dequantized value lies within 0.6 of a step (half
  // a step, plus the fp16 roundings of w / s + zp and of the rounded zero point at the clamps).
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  for (int trial = 0; trial < 2000; ++trial) {
    bool const sym = trial % 2 == 0;
    int const bits = trial % 4 < 2 ? 4 : 8;
    float w[32];
    float mx = -INFINITY;
    float mn = INFINITY;
    for (float& x : w) {
      x = h(dist(rng) + (trial % 3 == 0 ? 0.1f : 0.0f));  // some groups all positive
      mx = std::max(mx, x);
      mn = std::min(mn, x);
    }
    group_params const p = qtl::ct_int_group_params<half_t>(mx, mn, bits, sym);
    float const levels = float((1 << bits) - 1);
    float const lo = std::min(mn, 0.0f);
    float const hi = std::max(mx, 0.0f);
    if (sym) {
      REQUIRE(p.s == h(std::max(-lo, hi) / (levels / 2)));
    } else {
      REQUIRE(p.s == h(h(hi - lo) / levels));
    }
    float const qmin = -float(1 << (bits - 1));
    float const qmax = -qmin - 1;
    for (float x : w) {
      float const q = qtl::ct_int_code<half_t>(x, p, bits);
      REQUIRE(q == std::nearbyint(std::clamp(h(h(x / p.s) + p.zp), qmin, qmax)));
      REQUIRE(std::fabs(qtl::ct_int_dequantize<half_t>(q, p) - x) <= p.s * 0.6f + std::fabs(x) * 0x1p-9f);
    }
  }
}

TEST_CASE("compressed-tensors rule: zero scales, NaN codes are 0, infinities clamp", "[quantize][ct]") {
  // (divisions by zero: run time, not constant evaluation) The asymmetric all-zero group: zp is
  // computed with s0 = 0, 0/0 is NaN, taken as 0; s is fp16's epsilon.
  CHECK(qtl::ct_int_group_params<half_t>(0.0f, 0.0f, 4, false).zp == 0.0f);
  CHECK(qtl::ct_int_group_params<half_t>(0.0f, 0.0f, 4, false).s == 0x1p-10f);
  // A range that underflows fp16 (mx - mn = 2^-24, / 15 -> 0): zp from the zero scale,
  // qmin - (mn / 0) = +inf, clamped to qmax.
  CHECK(qtl::ct_int_group_params<half_t>(0.0f, -0x1p-24f, 4, false).zp == 7.0f);
  CHECK(qtl::ct_int_group_params<half_t>(0.0f, -0x1p-24f, 4, false).s == 0x1p-10f);
  group_params const p{0.25f, 0.0f};
  CHECK(qtl::ct_int_code<half_t>(std::numeric_limits<float>::quiet_NaN(), p, 4) == 0.0f);
  CHECK(qtl::ct_int_code<half_t>(INFINITY, p, 4) == 7.0f);
  CHECK(qtl::ct_int_code<half_t>(-INFINITY, p, 8) == -128.0f);
  CHECK(qtl::ct_int_code<bfloat16_t>(1000.0f, p, 8) == 127.0f);
}
