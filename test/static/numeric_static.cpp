// Number formats in constant evaluation: the worked examples of docs/spec/semantics.md §8.1 and
// docs/spec/blockscale.md §1, plus the edge codes of every format (the exhaustive checks are in
// test/unit/numeric_test.cpp).
#include <qtl/numeric.hpp>

#include <cstdint>
#include <limits>
#include <type_traits>

namespace {

using qtl::saturation;

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float nan = std::numeric_limits<float>::quiet_NaN();
constexpr float neg_nan = qtl::bits_to_float(0xFFC00000u);
constexpr float denorm_min = std::numeric_limits<float>::denorm_min();

// Storage types are the format's bits, nothing more.
static_assert(sizeof(qtl::half_t) == 2 && sizeof(qtl::float8_e8m0fnu_t) == 1);
static_assert(std::is_trivially_copyable_v<qtl::half_t> && std::is_trivially_copyable_v<qtl::float8_e4m3fn_t>);

// float8_e4m3fn (docs/spec/semantics.md §8.1).
static_assert(qtl::float_to_e4m3fn(1.0f) == 0x38);
static_assert(qtl::float_to_e4m3fn(6.4f) == 0x4D && qtl::e4m3fn_to_float(0x4D) == 6.5f);
static_assert(qtl::float_to_e4m3fn(0.7265625f) == 0x34 && qtl::e4m3fn_to_float(0x34) == 0.75f);
static_assert(qtl::float_to_e4m3fn(0.0009765625f) == 0x00);  // 2^-10: tie 0 / 2^-9 -> even 0
static_assert(qtl::float_to_e4m3fn(0.0029296875f) == 0x02);  // 1.5 * 2^-9: tie -> even code 2
static_assert(qtl::float_to_e4m3fn(-0.0f) == 0x80);
static_assert(qtl::float_to_e4m3fn(-224.0f) == 0xF6);
static_assert(qtl::float_to_e4m3fn(448.0f) == 0x7E && qtl::float_to_e4m3fn(464.0f) == 0x7E);
static_assert(qtl::float_to_e4m3fn(465.0f) == 0x7F && qtl::float_to_e4m3fn(479.0f) == 0x7F &&
              qtl::float_to_e4m3fn(480.0f) == 0x7F && qtl::float_to_e4m3fn(-1e30f) == 0xFF);
static_assert(qtl::float_to_e4m3fn(465.0f, saturation::finite) == 0x7E &&
              qtl::float_to_e4m3fn(-inf, saturation::finite) == 0xFE);
static_assert(qtl::float_to_e4m3fn(inf) == 0x7F && qtl::float_to_e4m3fn(-inf) == 0xFF);
static_assert(qtl::float_to_e4m3fn(nan, saturation::finite) == 0x7F && qtl::float_to_e4m3fn(neg_nan) == 0xFF);
static_assert(qtl::e4m3fn_to_float(0x01) == 0.001953125f && qtl::e4m3fn_to_float(0x08) == 0.015625f);
static_assert(qtl::e4m3fn_to_float(0x7E) == 448.0f && qtl::e4m3fn_to_float(0xFE) == -448.0f);
static_assert(qtl::is_nan(qtl::e4m3fn_to_float(0x7F)) && qtl::is_nan(qtl::e4m3fn_to_float(0xFF)));
static_assert(qtl::e4m3fn_to_float(0x78) == 256.0f);  // the top binade is finite

// float8_e5m2.
static_assert(qtl::float_to_e5m2(57344.0f) == 0x7B && qtl::float_to_e5m2(61439.0f) == 0x7B);
static_assert(qtl::float_to_e5m2(61440.0f) == 0x7C);  // tie 57344 (odd) / 65536 -> Inf
static_assert(qtl::float_to_e5m2(-61440.0f, saturation::finite) == 0xFB);
static_assert(qtl::float_to_e5m2(inf) == 0x7C && qtl::float_to_e5m2(inf, saturation::finite) == 0x7B);
static_assert(qtl::float_to_e5m2(nan) == 0x7F && qtl::float_to_e5m2(neg_nan) == 0xFF);
static_assert(qtl::e5m2_to_float(0x01) == 1.52587890625e-05f && qtl::e5m2_to_float(0x3C) == 1.0f);
static_assert(qtl::e5m2_to_float(0x7C) == inf && qtl::e5m2_to_float(0xFC) == -inf);
static_assert(qtl::is_nan(qtl::e5m2_to_float(0x7D)) && qtl::is_nan(qtl::e5m2_to_float(0xFF)));

// fp16 and bf16.
static_assert(qtl::float_to_fp16(1.0f) == 0x3C00 && qtl::float_to_fp16(65504.0f) == 0x7BFF);
static_assert(qtl::float_to_fp16(65519.99f) == 0x7BFF && qtl::float_to_fp16(65520.0f) == 0x7C00);
static_assert(qtl::float_to_fp16(65520.0f, saturation::finite) == 0x7BFF);
static_assert(qtl::float_to_fp16(5.9604644775390625e-08f) == 0x0001);  // 2^-24
static_assert(qtl::float_to_fp16(2.98023223876953125e-08f) == 0x0000);  // 2^-25: tie -> 0
static_assert(qtl::float_to_fp16(2.98023259e-08f) == 0x0001);          // just above the tie
static_assert(qtl::float_to_fp16(denorm_min) == 0 && qtl::float_to_fp16(-denorm_min) == 0x8000);
static_assert(qtl::float_to_fp16(nan) == 0x7E00 && qtl::float_to_fp16(neg_nan) == 0xFE00);
static_assert(qtl::fp16_to_float(0x3555) == 0.333251953125f && qtl::fp16_to_float(0x0001) == 5.9604644775390625e-08f);
static_assert(qtl::fp16_to_float(0xFC00) == -inf && qtl::is_nan(qtl::fp16_to_float(0x7C01)));
static_assert(qtl::float_to_bf16(1.0f) == 0x3F80 && qtl::float_to_bf16(qtl::bits_to_float(0x3F808000u)) == 0x3F80);
static_assert(qtl::float_to_bf16(qtl::bits_to_float(0x3F818000u)) == 0x3F82);  // tie -> even
static_assert(qtl::float_to_bf16(qtl::bits_to_float(0x3F808001u)) == 0x3F81);
static_assert(qtl::float_to_bf16(qtl::bits_to_float(0x7F7FFFFFu)) == 0x7F80);  // rounds past max -> Inf
static_assert(qtl::float_to_bf16(qtl::bits_to_float(0x7F7FFFFFu), saturation::finite) == 0x7F7F);
static_assert(qtl::float_to_bf16(denorm_min) == 0x0000 && qtl::float_to_bf16(qtl::bits_to_float(0x00008000u)) == 0);
static_assert(qtl::float_to_bf16(qtl::bits_to_float(0x00018000u)) == 0x0002);  // subnormal tie -> even
static_assert(qtl::float_to_bf16(neg_nan) == 0x7FC0 && qtl::bf16_to_float(0xC0A0) == -5.0f);

// float4_e2m1f: RNE on {0, .5, 1, 1.5, 2, 3, 4, 6}, saturating (docs/spec/blockscale.md §1.1).
static_assert(qtl::float_to_e2m1(0.25f) == 0x0 && qtl::float_to_e2m1(0.75f) == 0x2 &&
              qtl::float_to_e2m1(1.25f) == 0x2 && qtl::float_to_e2m1(1.75f) == 0x4 &&
              qtl::float_to_e2m1(2.5f) == 0x4 && qtl::float_to_e2m1(3.5f) == 0x6 && qtl::float_to_e2m1(5.0f) == 0x6);
static_assert(qtl::float_to_e2m1(5.0001f) == 0x7 && qtl::float_to_e2m1(1e30f) == 0x7 &&
              qtl::float_to_e2m1(-inf) == 0xF && qtl::float_to_e2m1(nan) == 0x7);
static_assert(qtl::float_to_e2m1(-0.01f) == 0x8);  // a negative value that rounds to zero is -0
static_assert(qtl::float_to_e2m1(5.9f, qtl::round_mode::toward_zero) == 0x6);
static_assert(qtl::e2m1_to_float(0x1) == 0.5f && qtl::e2m1_to_float(0x7) == 6.0f && qtl::e2m1_to_float(0xD) == -3.0f);
static_assert(qtl::e2m1_to_float(0xF5) == 3.0f);  // the high nibble is ignored

// float6.
static_assert(qtl::float_to_e3m2(28.0f) == 0x1F && qtl::float_to_e3m2(1e9f) == 0x1F && qtl::float_to_e3m2(-30.f) == 0x3F);
static_assert(qtl::e3m2_to_float(0x01) == 0.0625f && qtl::e3m2_to_float(0x04) == 0.25f);
static_assert(qtl::float_to_e2m3(7.5f) == 0x1F && qtl::float_to_e2m3(0.0625f) == 0x00 && qtl::float_to_e2m3(0.0626f) == 0x01);
static_assert(qtl::e2m3_to_float(0x01) == 0.125f && qtl::e2m3_to_float(0x08) == 1.0f && qtl::e2m3_to_float(0x3F) == -7.5f);

// float8_e8m0fnu: value 2^(code - 127).
using qtl::e8m0_rounding;
static_assert(qtl::e8m0_to_float(127) == 1.0f && qtl::e8m0_to_float(0) == qtl::bits_to_float(0x00400000u));
static_assert(qtl::e8m0_to_float(254) == qtl::bits_to_float(0x7F000000u) && qtl::is_nan(qtl::e8m0_to_float(255)));
static_assert(qtl::float_to_e8m0(1.0f) == 127 && qtl::float_to_e8m0(-1.0f) == 127);  // the sign is ignored
static_assert(qtl::float_to_e8m0(1.4f) == 127 && qtl::float_to_e8m0(1.5f) == 128);  // torch: 1.5 goes up
static_assert(qtl::float_to_e8m0(1.3f / 6, e8m0_rounding::up) == 125);  // docs/spec/blockscale.md worked example
static_assert(qtl::float_to_e8m0(3.0f, e8m0_rounding::up) == 129 && qtl::float_to_e8m0(4.0f, e8m0_rounding::up) == 129);
static_assert(qtl::float_to_e8m0(3.99f, e8m0_rounding::toward_zero) == 128);
static_assert(qtl::float_to_e8m0(0.0f, e8m0_rounding::up) == 0 && qtl::float_to_e8m0(denorm_min, e8m0_rounding::up) == 0);
static_assert(qtl::float_to_e8m0(qtl::bits_to_float(0x00400001u), e8m0_rounding::up) == 1);
static_assert(qtl::float_to_e8m0(inf, e8m0_rounding::up) == 255 &&
              qtl::float_to_e8m0(inf, e8m0_rounding::up, saturation::finite) == 254);
static_assert(qtl::float_to_e8m0(qtl::bits_to_float(0x7F000001u), e8m0_rounding::up) == 255 &&
              qtl::float_to_e8m0(qtl::bits_to_float(0x7F000001u), e8m0_rounding::up, saturation::finite) == 254);
static_assert(qtl::float_to_e8m0(nan, e8m0_rounding::toward_zero, saturation::finite) == 255);

// Typed conversions.
static_assert(qtl::to_float(qtl::from_float<qtl::half_t>(0.1f)) == 0.0999755859375f);
static_assert(qtl::from_float<qtl::bfloat16_t>(3.0f) == qtl::bfloat16_t{0x4040});
static_assert(qtl::from_float<qtl::float8_e4m3fn_t>(500.0f).bits == 0x7F &&
              qtl::from_float<qtl::float8_e4m3fn_t>(500.0f, saturation::finite).bits == 0x7E);
static_assert(qtl::from_float<qtl::float8_e5m2_t>(-2.0f).bits == 0xC0);
static_assert(qtl::to_float(qtl::float8_e8m0fnu_t{130}) == 8.0f && qtl::to_float(2.5f) == 2.5f);

// round_half_even = torch.round.
static_assert(qtl::round_half_even(0.5f) == 0.0f && qtl::round_half_even(1.5f) == 2.0f &&
              qtl::round_half_even(2.5f) == 2.0f && qtl::round_half_even(-2.5f) == -2.0f &&
              qtl::round_half_even(-0.5f) == 0.0f && qtl::round_half_even(2.4999998f) == 2.0f &&
              qtl::round_half_even(0.50000006f) == 1.0f && qtl::round_half_even(8388607.5f) == 8388608.0f);
static_assert(qtl::float_to_bits(qtl::round_half_even(-0.4f)) == 0x80000000u);  // keeps -0
static_assert(qtl::round_half_even(16777217.0f) == 16777217.0f && qtl::round_half_even(-inf) == -inf);
static_assert(qtl::is_nan(qtl::round_half_even(nan)));

// Every non-NaN code of every 8-bit-or-narrower format survives decode then encode, and decoding is
// monotone in the magnitude code (so the encoders' "nearest" has one meaning).
consteval bool narrow_codes_round_trip() {
  for (unsigned c = 0; c < 256; ++c) {
    auto const b = static_cast<std::uint8_t>(c);
    if ((c & 0x7F) != 0x7F && qtl::float_to_e4m3fn(qtl::e4m3fn_to_float(b), saturation::finite) != b) {
      return false;
    }
    if ((c & 0x7C) != 0x7C && qtl::float_to_e5m2(qtl::e5m2_to_float(b), saturation::finite) != b) {
      return false;
    }
    if (c < 255 && qtl::float_to_e8m0(qtl::e8m0_to_float(b), qtl::e8m0_rounding::toward_zero) != b) {
      return false;
    }
    if (c < 64 && (qtl::float_to_e3m2(qtl::e3m2_to_float(b)) != b || qtl::float_to_e2m3(qtl::e2m3_to_float(b)) != b)) {
      return false;
    }
    if (c < 16 && qtl::float_to_e2m1(qtl::e2m1_to_float(b)) != b) {
      return false;
    }
    if (c > 0 && c < 0x7E && !(qtl::e4m3fn_to_float(b - 1) < qtl::e4m3fn_to_float(b))) {
      return false;
    }
  }
  return true;
}
static_assert(narrow_codes_round_trip());

}  // namespace
