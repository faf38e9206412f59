// Compile-time checks of the element code of qtl/fp8.hpp: the worked examples of
// docs/spec/semantics.md §8.1-§8.2, evaluated by the compiler (FP4 and MX: fp4_static.cpp).
#include <qtl/fp8.hpp>

namespace {

using qtl::float8_e4m3fn_t;
using qtl::float8_e5m2_t;

constexpr std::uint8_t e4m3(float v) { return qtl::fp8_saturate_encode<float8_e4m3fn_t>(v); }

// docs/spec/semantics.md §8.1: e4m3fn codes (the kernels' clamp makes 465..480 saturate, not NaN).
static_assert(e4m3(1.0f) == 0x38);
static_assert(e4m3(6.4f) == 0x4D);
static_assert(e4m3(0.7265625f) == 0x34);
static_assert(e4m3(0.0009765625f) == 0x00);  // 2^-10: tie between 0 and 2^-9 -> even code 0
static_assert(e4m3(0.0029296875f) == 0x02);  // 1.5 * 2^-9: tie between codes 1 and 2 -> 2
static_assert(e4m3(-0.0f) == 0x80);
static_assert(e4m3(-224.0f) == 0xF6);
static_assert(e4m3(448.0f) == 0x7E);
static_assert(e4m3(464.0f) == 0x7E);
static_assert(e4m3(465.0f) == 0x7E && e4m3(479.0f) == 0x7E && e4m3(480.0f) == 0x7E);
static_assert(e4m3(-1e30f) == 0xFE);
// NaN: +max under the kernels' fminf/fmaxf (whatever the sign), the positive NaN code when
// propagated (whatever the sign too: a device's NaN results are all +NaN).
static_assert(e4m3(qtl::bits_to_float(0x7fc00000u)) == 0x7E && e4m3(qtl::bits_to_float(0xffc00000u)) == 0x7E);
static_assert(qtl::fp8_saturate_encode<float8_e4m3fn_t, qtl::fp8_nan::propagate>(qtl::bits_to_float(0xffc00000u)) ==
              0x7F);
// the smallest normal and the largest subnormal meet at the boundary of the two encoder paths
static_assert(e4m3(0.015625f) == 0x08 && e4m3(0.013671875f) == 0x07);
static_assert(e4m3(qtl::bits_to_float(0x3c7fffffu)) == 0x08);  // just below 2^-6 rounds up to it

// e5m2: max 57344 = 0x7B, subnormal step 2^-16.
static_assert(qtl::fp8_saturate_encode<float8_e5m2_t>(1e9f) == 0x7B);
static_assert(qtl::fp8_saturate_encode<float8_e5m2_t>(1.0f) == 0x3C);
static_assert(qtl::fp8_saturate_encode<float8_e5m2_t>(0.0000152587890625f) == 0x01);

// docs/spec/semantics.md §8.2: x = [0.1, -3.5, 7.0], amax 7 -> s = 7/448 = 0.015625, 1/s = 64.
constexpr float s82 = qtl::fp8_scale_from_amax<float8_e4m3fn_t>(7.0f);
static_assert(s82 == 0.015625f && qtl::fp8_inverse_scale(s82) == 64.0f);
static_assert(qtl::fp8_quantize_element<float8_e4m3fn_t>(0.1f, s82, 64.0f) == 0x4D);
static_assert(qtl::fp8_quantize_element<float8_e4m3fn_t>(-3.5f, s82, 64.0f) == 0xF6);
static_assert(qtl::fp8_quantize_element<float8_e4m3fn_t>(7.0f, s82, 64.0f) == 0x7E);
// zero scale: 1/0 = inf (then 0 * inf = NaN -> +448, which constant evaluation refuses to
// compute: see the unit test); the guard gives 0
static_assert(qtl::is_inf(qtl::fp8_inverse_scale(0.0f)) && qtl::fp8_inverse_scale(0.0f) > 0.0f);
static_assert(qtl::fp8_quantize_element<float8_e4m3fn_t>(-1.0f, 0.0f, qtl::fp8_inverse_scale(0.0f)) == 0xFE);
static_assert(qtl::fp8_inverse_scale(0.0f, qtl::fp8_zero_scale::guard) == 0.0f);

// vLLM per-token recipe: floor 1/(448*512), upper bound on amax.
constexpr auto vllm = qtl::vllm_per_token_options<float8_e4m3fn_t>(2.0f);
static_assert(qtl::fp8_token_scale<float8_e4m3fn_t>(0.0f, vllm) == 1.0f / 229376.0f);
static_assert(qtl::fp8_token_scale<float8_e4m3fn_t>(7.0f, vllm) == 2.0f / 448.0f);
static_assert(qtl::fp8_token_scale<float8_e4m3fn_t>(0.0f, qtl::fp8_token_options{}) == 0.0f);

// UE8M0 scales: the power of two at or above, exactly.
static_assert(qtl::round_up_to_power_of_two(0.25f) == 0.25f);
static_assert(qtl::round_up_to_power_of_two(0.2500001f) == 0.5f);
static_assert(qtl::round_up_to_power_of_two(3.0f) == 4.0f);
static_assert(qtl::round_up_to_power_of_two(qtl::bits_to_float(0x00000003u)) == qtl::bits_to_float(0x00000004u));
static_assert(qtl::fp8_group_scale<float8_e4m3fn_t>(0.0f, 1e-10f, false) == 1e-10f / 448.0f);
static_assert(qtl::fp8_group_scale<float8_e4m3fn_t>(448.0f, 1e-10f, true) == 1.0f);
static_assert(qtl::fp8_group_scale<float8_e4m3fn_t>(449.0f, 1e-10f, true) == 2.0f);

// per-token-group scale layouts: [M, G] row-major, or [G, Mp] column-major with Mp = ceil4(M).
static_assert(qtl::group_scale_offset(qtl::group_scale_layout::row_major, 2, 1, 5, 3, 1) == 7);
static_assert(qtl::group_scale_offset(qtl::group_scale_layout::column_major, 2, 1, 5, 3, 1) == 7);
static_assert(qtl::group_scale_offset(qtl::group_scale_layout::column_major, 2, 1, 5, 3, 4) == 10);
static_assert(qtl::group_scale_storage_size(qtl::group_scale_layout::column_major, 5, 3, 4) == 24);

// assert_fp8_all_close's byte distance, and real sign flips.
static_assert(qtl::fp8_compare_codes<float8_e4m3fn_t>(0x7E, 0x7F).differ &&
              !qtl::fp8_compare_codes<float8_e4m3fn_t>(0x7E, 0x7F).differ_large);
static_assert(qtl::fp8_compare_codes<float8_e4m3fn_t>(0x00, 0x80).differ_large &&
              !qtl::fp8_compare_codes<float8_e4m3fn_t>(0x00, 0x80).sign_flip);
static_assert(qtl::fp8_compare_codes<float8_e4m3fn_t>(0x38, 0xB8).sign_flip);
static_assert(!qtl::fp8_compare_codes<float8_e4m3fn_t>(0x38, 0x38).differ);

}  // namespace
