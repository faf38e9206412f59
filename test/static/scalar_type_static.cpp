// Every property of every named scalar type, pinned at compile time against the table of
// docs/spec/semantics.md §1.7 (vLLM's values), with QTL's deviations for float8_e8m0fnu: the name
// keeps torch's `u`, and max()/min() are the exact 2^127 / 2^-127 (vLLM's formula breaks there).
#include <qtl/scalar_type.hpp>

#include <cstdint>
#include <string_view>

namespace {

using qtl::nan_repr;
using qtl::scalar_type;

struct expected {
  int exponent, mantissa;
  bool is_signed;
  std::int32_t bias;
  bool finite;
  nan_repr nan;
  int bits;
  std::string_view name;
  double max, min;
  std::uint64_t id;
  bool has_nans, has_infs, is_ieee_754;  // vLLM C++ semantics (false for integers)
};

consteval bool matches(scalar_type t, expected e) {
  return t.exponent == e.exponent && t.mantissa == e.mantissa && t.is_signed == e.is_signed &&
         t.bias == e.bias && t.finite_values_only == e.finite && t.nan == e.nan && t.size_bits() == e.bits &&
         t.name() == e.name && t.max() == e.max && t.min() == e.min && t.id() == e.id &&
         t.is_integer() == (e.exponent == 0) && t.is_floating_point() == (e.exponent != 0) &&
         t.has_bias() == (e.bias != 0) && t.has_nans() == e.has_nans && t.has_infs() == e.has_infs &&
         t.is_ieee_754() == e.is_ieee_754 &&
         (t.is_floating_point() || (t.max_int() == e.max && t.min_int() == e.min)) &&
         scalar_type::from_id(e.id) == t && scalar_type::from_name(e.name) == t;
}

constexpr nan_repr N0 = nan_repr::none, N1 = nan_repr::ieee_754, N2 = nan_repr::extd_range_max_min;

//                   e  m  sgn   bias fin    nan bits name    max  min  id  has_nans has_infs is_ieee_754
static_assert(matches(qtl::int4, {0, 3, true, 0, false, N1, 4, "int4", 7, -8, 0x4000000010300, false, false, false}));
static_assert(matches(qtl::uint4, {0, 4, false, 0, false, N1, 4, "uint4", 15, 0, 0x4000000000400, false, false, false}));
static_assert(matches(qtl::int8, {0, 7, true, 0, false, N1, 8, "int8", 127, -128, 0x4000000010700, false, false, false}));
static_assert(matches(qtl::uint8, {0, 8, false, 0, false, N1, 8, "uint8", 255, 0, 0x4000000000800, false, false, false}));
static_assert(matches(qtl::uint2b2, {0, 2, false, 2, false, N1, 2, "uint2b2", 1, -2, 0x4000000040200, false, false, false}));
static_assert(matches(qtl::uint3b4, {0, 3, false, 4, false, N1, 3, "uint3b4", 3, -4, 0x4000000080300, false, false, false}));
static_assert(matches(qtl::uint4b8, {0, 4, false, 8, false, N1, 4, "uint4b8", 7, -8, 0x4000000100400, false, false, false}));
static_assert(matches(qtl::uint8b128,
                      {0, 8, false, 128, false, N1, 8, "uint8b128", 127, -128, 0x4000001000800, false, false, false}));
static_assert(matches(qtl::float4_e2m1f,
                      {2, 1, true, 0, true, N0, 4, "float4_e2m1f", 6.0, -6.0, 0x2000000010102, false, false, false}));
static_assert(matches(qtl::float6_e3m2f,
                      {3, 2, true, 0, true, N0, 6, "float6_e3m2f", 28.0, -28.0, 0x2000000010203, false, false, false}));
static_assert(matches(qtl::float6_e2m3f,
                      {2, 3, true, 0, true, N0, 6, "float6_e2m3f", 7.5, -7.5, 0x2000000010302, false, false, false}));
static_assert(matches(qtl::float8_e4m3fn,
                      {4, 3, true, 0, true, N2, 8, "float8_e4m3fn", 448.0, -448.0, 0xa000000010304, true, false, false}));
static_assert(matches(qtl::float8_e5m2,
                      {5, 2, true, 0, false, N1, 8, "float8_e5m2", 57344.0, -57344.0, 0x4000000010205, true, true, true}));
// QTL's: ROCm's e4m3fnuz (exponent bias 8, 0x80 the only NaN), nan_repr 3, an id vLLM does not have.
static_assert(matches(qtl::float8_e4m3fnuz, {4, 3, true, 0, true, nan_repr::neg_zero, 8, "float8_e4m3fnuz", 240.0,
                                             -240.0, 0xe000000010304, true, false, false}));
// 2^127 = 1.7014118346046923e38 and 2^-127 = 5.877471754111438e-39, exactly.
static_assert(matches(qtl::float8_e8m0fnu, {8, 0, false, 0, true, N2, 8, "float8_e8m0fnu",
                                            1.7014118346046923e38, 5.877471754111438e-39, 0xa000000000008, true, false, false}));
static_assert(qtl::float8_e8m0fnu.max() == 170141183460469231731687303715884105728.0);
static_assert(qtl::float8_e8m0fnu.min() * qtl::float8_e8m0fnu.max() == 1.0);
static_assert(matches(qtl::float16_e8m7, {8, 7, true, 0, false, N1, 16, "float16_e8m7",
                                          3.3895313892515355e38, -3.3895313892515355e38, 0x4000000010708, true, true, true}));
static_assert(matches(qtl::float16_e5m10,
                      {5, 10, true, 0, false, N1, 16, "float16_e5m10", 65504.0, -65504.0, 0x4000000010a05, true, true, true}));

// The float maxima are the largest finite codes of qtl/numeric.hpp.
static_assert(qtl::float8_e4m3fn.max() == qtl::e4m3fn_to_float(0x7E));
static_assert(qtl::float8_e4m3fnuz.max() == qtl::e4m3fnuz_to_float(0x7F));
static_assert(qtl::float8_e5m2.max() == qtl::e5m2_to_float(0x7B));
static_assert(qtl::float6_e3m2f.max() == qtl::e3m2_to_float(0x1F));
static_assert(qtl::float6_e2m3f.max() == qtl::e2m3_to_float(0x1F));
static_assert(qtl::float4_e2m1f.max() == qtl::e2m1_to_float(0x7));
static_assert(qtl::float16_e5m10.max() == qtl::fp16_to_float(0x7BFF));
static_assert(qtl::float16_e8m7.max() == qtl::bf16_to_float(0x7F7F));
static_assert(qtl::float8_e8m0fnu.max() == qtl::e8m0_to_float(0xFE));
static_assert(qtl::float8_e8m0fnu.min() == qtl::e8m0_to_float(0x00));

// Predicates (vLLM C++ semantics: integers have no NaN and no Inf).
static_assert(!qtl::uint4b8.has_nans() && !qtl::uint4b8.has_infs() && !qtl::uint4b8.is_ieee_754());
static_assert(!qtl::int8.has_bias() && qtl::uint8b128.has_bias());
static_assert(qtl::float16_e5m10.is_ieee_754() && qtl::float16_e5m10.has_nans() && qtl::float16_e5m10.has_infs());
static_assert(qtl::float8_e5m2.is_ieee_754() && qtl::float8_e5m2.has_infs());
static_assert(!qtl::float8_e4m3fn.is_ieee_754() && qtl::float8_e4m3fn.has_nans() && !qtl::float8_e4m3fn.has_infs());
static_assert(!qtl::float4_e2m1f.has_nans() && !qtl::float4_e2m1f.has_infs() && !qtl::float4_e2m1f.is_ieee_754());
static_assert(!qtl::float6_e3m2f.has_nans() && !qtl::float6_e2m3f.has_nans());
static_assert(qtl::float8_e8m0fnu.has_nans() && !qtl::float8_e8m0fnu.has_infs() && !qtl::float8_e8m0fnu.is_signed);
static_assert(qtl::int4.max_int() == 7 && qtl::int4.min_int() == -8 && qtl::uint8b128.max_int() == 127 &&
              qtl::uint8b128.min_int() == -128 && qtl::uint4.min_int() == 0);

// Aliases and lookups.
static_assert(qtl::bfloat16 == qtl::float16_e8m7 && qtl::float16 == qtl::float16_e5m10);
static_assert(scalar_type::from_name("bfloat16") == qtl::float16_e8m7);
static_assert(scalar_type::from_name("float16") == qtl::float16_e5m10);
static_assert(scalar_type::from_name("float8_e8m0fn") == qtl::float8_e8m0fnu);
static_assert(!scalar_type::from_name("float8_e4m3fnu") && !scalar_type::from_name("") &&
              !scalar_type::from_name("uint4b8 ") && !scalar_type::from_name("UINT4B8"));
static_assert(!scalar_type::from_id(0) && !scalar_type::from_id(qtl::uint4b8.id() ^ (std::uint64_t{1} << 57)));
static_assert(sizeof(qtl::named_scalar_types) / sizeof(scalar_type) == 17);

// Negative biases keep their sign in the id and the name.
constexpr scalar_type int4_bm3 = {.exponent = 0, .mantissa = 3, .is_signed = true, .bias = -3};
static_assert(int4_bm3.id() == 0x4000000010300 + (std::uint64_t{0xFFFFFFFDu} << 17));
static_assert(int4_bm3.name() == "int4b-3" && int4_bm3.max() == 10 && int4_bm3.min() == -5);

// Usable as a template argument, and through scalar_constant.
template <scalar_type T>
constexpr int bits_of = T.size_bits();
static_assert(bits_of<qtl::uint4b8> == 4 && bits_of<qtl::float16_e8m7> == 16);
static_assert(qtl::scalar_constant<qtl::uint8b128>::value == qtl::uint8b128);
static_assert(qtl::is_scalar_constant_v<qtl::scalar_constant<qtl::int4>> && !qtl::is_scalar_constant_v<int>);

}  // namespace
