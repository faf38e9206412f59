// Compile-time proofs of the quantization numerics (building this file is the test).
#include <qtl/quantize.hpp>

namespace {

// docs/spec/semantics.md §8.4: uint4b8, one group, column [1, -2, 3, 0.5]: s = max(3/7, 2/8) = 3/7,
// w/s = [2.33, -4.67, 7, 1.17] -> round [2, -5, 7, 1] -> stored +8 = [10, 3, 15, 9].
constexpr float col[] = {1.0f, -2.0f, 3.0f, 0.5f};
constexpr auto g = qtl::quantize_group<qtl::uint4b8>(col);
static_assert(g.codes[0] == 10 && g.codes[1] == 3 && g.codes[2] == 15 && g.codes[3] == 9);
static_assert(g.scale == 3.0f / 7.0f && g.w_ref[2] == 3.0f && g.zero_point == 0);

// Ties go to even: s = 1 (max 7 / 7; min -2 / -8 = 0.25 is smaller), so w/s = w.
constexpr float ties[] = {7.0f, -2.0f, 2.5f, -0.5f, 0.5f, 1.5f, 3.5f, -3.5f};
constexpr auto t = qtl::quantize_group<qtl::uint4b8>(ties);
static_assert(t.scale == 1.0f);
static_assert(t.codes[2] == 8 + 2 && t.codes[3] == 8 + 0 && t.codes[4] == 8 + 0 && t.codes[5] == 8 + 2);
static_assert(t.codes[6] == 8 + 4 && t.codes[7] == 8 - 4);

// Zero points (docs/spec/semantics.md §8.4): uint4, column [-1, 2, -3, 4]: s = 7/15, zp = round(|-3/s|) = 6,
// codes [4, 10, 0, 15].
constexpr float zcol[] = {-1.0f, 2.0f, -3.0f, 4.0f};
constexpr auto z = qtl::quantize_group<qtl::uint4>(zcol, {.zero_points = true});
static_assert(z.zero_point == 6 && z.codes[0] == 4 && z.codes[1] == 10 && z.codes[2] == 0 && z.codes[3] == 15);

// The |.| pathology of the reference with an all-positive group: [1, 2, 3, 4] -> s = 0.2, zp = 5,
// codes [10, 15, 15, 15].
constexpr float pos[] = {1.0f, 2.0f, 3.0f, 4.0f};
constexpr auto zp_pos = qtl::quantize_group<qtl::uint4>(pos, {.zero_points = true});
static_assert(zp_pos.zero_point == 5 && zp_pos.codes[0] == 10 && zp_pos.codes[1] == 15 && zp_pos.codes[3] == 15);

// Per-op rounding in fp16: column [0x3C53 (1.0810546875), 0x3C04 (1.00390625), 0]. s = fp16(mx / 7)
// = 0.1544189453125; w / s = 6.50119 in float32, which fp16 rounds to 6.5, and 6.5 rounds to even 6
// (a float32 pipeline would give 7).
constexpr qtl::half_t hcol[] = {{0x3C53}, {0x3C04}, {0x0000}};
constexpr auto h = qtl::quantize_group<qtl::uint4b8>(hcol);
static_assert(qtl::to_float(h.scale) == 0.1544189453125f);
static_assert(h.codes[1] == 8 + 6);
static_assert(h.codes[0] == 8 + 7 && h.codes[2] == 8 + 0);

// (An all-zero group divides 0 by 0, which is not a constant expression: see the unit tests.)

// The predicates behind the compile-time checks.
static_assert(qtl::is_gptq_quant_type(qtl::uint4b8) && qtl::is_gptq_quant_type(qtl::uint8b128));
static_assert(!qtl::is_gptq_quant_type(qtl::uint4) && !qtl::is_gptq_quant_type(qtl::int8));
static_assert(qtl::is_gptq_group_size(-1) && qtl::is_gptq_group_size(128) && !qtl::is_gptq_group_size(16));
static_assert(qtl::is_valid_group_size_param(qtl::group_none) && !qtl::is_valid_group_size_param(-3));

}  // namespace
