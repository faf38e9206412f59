#pragma once
/// \file
/// The element layer of the load-time converters (`docs/spec/converters.md`): the recipes where
/// sglang and vLLM differ, the power-of-two ("ceil to UE8M0") rules, the FP8 block dequant
/// element, the per-block FP8 cast, the DeepGEMM packed UE8M0 index map and its inverse, and the
/// sglang/ModelOpt MXFP4 element. Everything is `QTL_HOST_DEVICE constexpr`: the host loops of
/// <qtl/convert.hpp> run it, and so can a kernel.
///
/// A DeepSeek-style FP8 block weight is e4m3 codes q [N,K] (or [E,N,K]) with one float32 scale
/// per BN x BK block, s [ceil(N/BN), ceil(K/BK)]; w = fl(e4m3(q) * s[n/BN][k/BK]). The last block
/// row and column may be partial; padding elements never exist.

#include <concepts>
#include <cstdint>
#include <type_traits>

#include <qtl/element/fp8.hpp>
#include <qtl/exact.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/type_list.hpp>

namespace qtl::convert {

// ---------------------------------------------------------------------------------------------
// vocabulary
// ---------------------------------------------------------------------------------------------

/// How a float32 block scale is rounded up to a power of two (docs/spec/converters.md §1.3).
enum class pow2_rule : std::uint8_t {
  none,  ///< not rounded: sf = amax/448 (vLLM's and DeepGEMM's `use_ue8m0=False`)
  bits,  ///< e = bexp(|x|) + (mant != 0), clamped to 1..254 (DeepGEMM >= 7f2a703, sglang >= 002ed7e)
  log2,  ///< 2^ceil(fl(log2f(|x|))), correctly rounded log2f (vLLM; sglang <= 6082c49)
};

/// The precision the FP8 block weight is dequantized to before it is requantized.
enum class dequant_precision : std::uint8_t {
  bf16,  ///< fl(e4m3(q) * s) then one RNE to bf16 (sglang `block_quant_dequant(..., bfloat16)`)
  f32,   ///< fl(e4m3(q) * s) kept in float32 (vLLM `requant_weight_ue8m0_inplace`)
};

/// A BN x BK weight block (rows x columns).
template <int BN, int BK>
struct block_shape {
  static_assert(BN > 0 && BK > 0, "qtl::convert::block_shape: both extents must be positive");
  static constexpr int n = BN;
  static constexpr int k = BK;
};

/// A run-time block shape, for the operations the engines run with any `block_size`
/// (`block_quant_dequant`, `per_block_cast_to_fp8`, FP8 block -> MXFP4).
struct block_size {
  int n = 128;
  int k = 128;
};

/// The load-time requantization of an engine: dequant precision, power-of-two rule, block shape.
template <dequant_precision Precision, pow2_rule Rule, class Block = block_shape<128, 128>>
struct requant_recipe {
  static_assert(Rule != pow2_rule::none, "qtl::convert::requant_recipe: a UE8M0 requant rounds to powers of two");
  static_assert(Block::n == 128 && Block::k == 128,
                "qtl::convert::requant_recipe: both engines requantize 128x128 blocks only (sglang asserts "
                "it; DeepGEMM's packed layout broadcasts one scale over 128 rows)");
  static constexpr dequant_precision precision = Precision;
  static constexpr pow2_rule rule = Rule;
  using block = Block;
};

namespace recipe {
/// sglang from 002ed7e (`requant_weight_ue8m0`, per expert as its newest copy): bf16 dequant, bits rule.
using sglang = requant_recipe<dequant_precision::bf16, pow2_rule::bits>;
/// sglang up to 6082c49: bf16 dequant, log2 rule.
using sglang_legacy = requant_recipe<dequant_precision::bf16, pow2_rule::log2>;
/// vLLM `requant_weight_ue8m0_inplace` (007d500): float32 dequant, log2 rule.
using vllm = requant_recipe<dequant_precision::f32, pow2_rule::log2>;
}  // namespace recipe

/// Every UE8M0 requant recipe, named as `--recipe` and Python's `recipe=` spell them.
using recipes = type_list<recipe::sglang, recipe::sglang_legacy, recipe::vllm>;
}  // namespace qtl::convert

template <>
inline constexpr std::string_view qtl::name_of<qtl::convert::recipe::sglang> = "sglang";
template <>
inline constexpr std::string_view qtl::name_of<qtl::convert::recipe::sglang_legacy> = "sglang-legacy";
template <>
inline constexpr std::string_view qtl::name_of<qtl::convert::recipe::vllm> = "vllm";

namespace qtl::convert {

template <class R>
concept requant_recipe_type = requires {
  { R::precision } -> std::convertible_to<dequant_precision>;
  { R::rule } -> std::convertible_to<pow2_rule>;
  typename R::block;
};

// ---------------------------------------------------------------------------------------------
// power-of-two rules
// ---------------------------------------------------------------------------------------------

/// The bits rule: float32 bits -> the power of two `float(clamp(bexp + (mant != 0), 1, 254) << 23)`.
/// 0 and denormals -> 2^-126; Inf, NaN and values above 2^127 -> 2^127.
QTL_HOST_DEVICE constexpr float ceil_pow2_bits(float x) {
  std::uint32_t const a = float_to_bits(x) & 0x7FFFFFFFu;
  std::int32_t e = static_cast<std::int32_t>(a >> 23) + static_cast<std::int32_t>((a & 0x7FFFFFu) != 0);
  e = e < 1 ? 1 : (e > 254 ? 254 : e);
  return bits_to_float(static_cast<std::uint32_t>(e) << 23);
}

namespace detail {

/// 2^e as a float for e in [-149, 128] (denormal below -126, +Inf at 128).
QTL_HOST_DEVICE constexpr float exp2_int(int e) {
  if (e >= 128) {
    return bits_to_float(0x7F800000u);
  }
  if (e >= -126) {
    return bits_to_float(static_cast<std::uint32_t>(e + 127) << 23);
  }
  return bits_to_float(1u << (e + 149));
}

}  // namespace detail

/// The log2 rule `2^ceil(fl(log2f(|x|)))` with a correctly rounded log2f, computed exactly from the
/// bits (no libm). |x| = 2^k (1 + r), 0 < r < 1: the float nearest to log2|x| = k + log2(1+r) is k
/// exactly when log2(1+r) is below half an ulp of the binade of |k + log2(1+r)|, 2^(b-24), i.e.
/// when r < 2^(b-24) ln 2 (to first order; the second-order term is 2^-25 relative, far from any
/// multiple of 2^-23 there); then the result is 2^k < |x|, else 2^(k+1). (With b = 3, [8,16),
/// r < 2.77·2^-23: the "m0 = 3" of docs/spec/converters.md §1.3.) 0 -> 0.0, Inf -> Inf, NaN -> NaN.
QTL_HOST_DEVICE constexpr float ceil_pow2_log2(float x) {
  std::uint32_t const a = float_to_bits(x) & 0x7FFFFFFFu;
  if (a == 0 || a >= 0x7F800000u) {
    return bits_to_float(a);  // +0, +Inf, NaN
  }
  // normalize: |x| = 2^k * (1 + frac / 2^fbits), frac < 2^fbits
  int k = 0;
  std::uint32_t frac = 0;
  int fbits = 23;
  if ((a >> 23) != 0) {
    k = static_cast<int>(a >> 23) - 127;
    frac = a & 0x7FFFFFu;
  } else {
    int top = 22;
    while (((a >> top) & 1u) == 0) {
      --top;
    }
    k = top - 149;
    fbits = top;
    frac = a & ((1u << top) - 1u);
  }
  if (frac == 0) {
    return detail::exp2_int(k);
  }
  if (k == 0) {
    return 2.0f;  // log2|x| is a small positive float: its ceil is 1
  }
  // b: the binade exponent of |k + log2(1+r)|, just above |k| for k > 0, just below it for k < 0
  unsigned const m = static_cast<unsigned>(k > 0 ? k : -k);
  int b = 0;
  while ((m >> (b + 1)) != 0) {
    ++b;
  }
  if (k < 0 && (m & (m - 1)) == 0) {
    b -= 1;
  }
  // r < 2^(b-24) ln 2  <=>  frac < 2^(fbits + b - 24) ln 2
  constexpr double ln2 = 0.69314718055994530942;
  double threshold = ln2;
  for (int i = 0; i < fbits + b - 24; ++i) threshold *= 2.0;
  for (int i = 0; i > fbits + b - 24; --i) threshold *= 0.5;
  return detail::exp2_int(static_cast<double>(frac) < threshold ? k : k + 1);
}

/// The power of two of `x` by `Rule` (`none`: x itself).
template <pow2_rule Rule>
QTL_HOST_DEVICE constexpr float ceil_pow2(float x) {
  if constexpr (Rule == pow2_rule::bits) {
    return ceil_pow2_bits(x);
  } else if constexpr (Rule == pow2_rule::log2) {
    return ceil_pow2_log2(x);
  } else {
    return x;
  }
}

// ---------------------------------------------------------------------------------------------
// FP8 block dequant and the per-block cast
// ---------------------------------------------------------------------------------------------

/// One element of `block_quant_dequant`: fl(e4m3(q) * s), one float32 multiply (no FMA).
/// NaN codes (0x7F/0xFF) give NaN.
QTL_HOST_DEVICE constexpr float dequant_element(std::uint8_t code, float scale) {
  return qtl::detail::mul_rn(e4m3fn_to_float(code), scale);
}

/// The dequantized element as the requant sees it: rounded once to bf16 (NaN -> 0x7FC0, a positive
/// NaN) under `bf16`, kept under `f32`.
template <dequant_precision P>
QTL_HOST_DEVICE constexpr float dequant_element_as(std::uint8_t code, float scale) {
  float const d = dequant_element(code, scale);
  if constexpr (P == dequant_precision::bf16) {
    return bf16_to_float(float_to_bf16(d));
  } else {
    return d;
  }
}

/// The amax floor of `per_block_cast_to_fp8`: float32(1e-4) = 0x38D1B717.
inline constexpr float cast_amax_floor = 1e-4f;
static_assert(float_to_bits(cast_amax_floor) == 0x38D1B717u);

/// The largest e4m3fn value, the divisor of the block scale.
inline constexpr float e4m3_max = 448.0f;

/// The NaN-propagating |x| max of torch's `amax` (a NaN operand makes the result NaN).
QTL_HOST_DEVICE constexpr float amax_step(float acc, float x) {
  float const a = bits_to_float(float_to_bits(x) & 0x7FFFFFFFu);
  if (is_nan(acc) || is_nan(a)) {
    return bits_to_float(0x7FC00000u);
  }
  return a > acc ? a : acc;
}

/// The block scale of `per_block_cast_to_fp8` from the block's amax:
/// sf = ceil_pow2<Rule>(fl(max(amax, 1e-4) / 448)) (torch's clamp keeps a NaN amax NaN).
template <pow2_rule Rule>
QTL_HOST_DEVICE constexpr float cast_block_scale(float amax) {
  float const clamped = is_nan(amax) ? amax : (amax < cast_amax_floor ? cast_amax_floor : amax);
  return ceil_pow2<Rule>(qtl::detail::div_rn(clamped, e4m3_max));
}

/// One element of the cast: e4m3(fl(x * inv_sf)) with torch's cast (RNE, not saturating:
/// (464, 480), beyond and Inf -> NaN 0x7F|sign). inv_sf = fl(1/sf).
QTL_HOST_DEVICE constexpr std::uint8_t cast_element(float x, float inv_sf) {
  return float_to_e4m3fn(qtl::detail::mul_rn(x, inv_sf));
}

/// The requant's block scale from a finite input scale: each output code is a function of the
/// input code alone and |dequant| grows with the code's magnitude (`c & 0x7F`; 0x7F, the NaN, is
/// the largest and propagates), so the block's amax is the dequant of its largest magnitude `top`.
template <requant_recipe_type Recipe>
QTL_HOST_DEVICE constexpr float requant_block_scale(std::uint8_t top, float scale) {
  return cast_block_scale<Recipe::rule>(amax_step(0.0f, dequant_element_as<Recipe::precision>(top, scale)));
}

/// One code of the requant: e4m3(fl(dequant(code, scale) * inv_sf)), inv_sf = fl(1/sf).
template <requant_recipe_type Recipe>
QTL_HOST_DEVICE constexpr std::uint8_t requant_element(std::uint8_t code, float scale, float inv_sf) {
  return cast_element(dequant_element_as<Recipe::precision>(code, scale), inv_sf);
}

// ---------------------------------------------------------------------------------------------
// DeepGEMM's MN-major TMA-aligned packed UE8M0 scales (SM100, recipe (1,128,128), SFB)
// ---------------------------------------------------------------------------------------------

/// The packed layout of G groups of N rows and kb K-blocks (docs/spec/converters.md §3.5):
///
///   int32 W[g][p][n], p < P = ceil(kb/4), n < A = align(N, 4)         (storage order g, p, n)
///   W[g][p][n] = b(n, 4p) | b(n, 4p+1) << 8 | b(n, 4p+2) << 16 | b(n, 4p+3) << 24
///   b(n, j)    = j < kb ? bexp(sf[g][n/128][j]) : 0      rows N..A-1: 0
///
/// torch's view of it is [G, N, P] with strides (P*A, 1, A).
struct dg_packed_layout {
  std::int64_t groups = 1;
  std::int64_t mn = 0;        ///< N, the rows the scales are broadcast to
  std::int64_t k_blocks = 0;  ///< kb
  static constexpr int rows_per_scale = 128;

  QTL_HOST_DEVICE constexpr std::int64_t aligned_mn() const { return (mn + 3) / 4 * 4; }
  QTL_HOST_DEVICE constexpr std::int64_t packed_k() const { return (k_blocks + 3) / 4; }
  QTL_HOST_DEVICE constexpr std::int64_t scale_rows() const { return (mn + rows_per_scale - 1) / rows_per_scale; }
  /// Offset of word (g, p, n).
  QTL_HOST_DEVICE constexpr std::int64_t word(std::int64_t g, std::int64_t p, std::int64_t n) const {
    return (g * packed_k() + p) * aligned_mn() + n;
  }
  QTL_HOST_DEVICE constexpr std::int64_t words() const { return groups * packed_k() * aligned_mn(); }
};

/// The UE8M0 byte of a positive normal power of two: its exponent field (bits >> 23). The packer
/// does not round: `is_ue8m0_packable` is its precondition.
QTL_HOST_DEVICE constexpr std::uint8_t ue8m0_byte(float pow2) {
  return static_cast<std::uint8_t>(float_to_bits(pow2) >> 23);
}
/// True for the scales DeepGEMM's kernels accept: sign and mantissa clear, exponent 1..254.
QTL_HOST_DEVICE constexpr bool is_ue8m0_packable(float s) {
  std::uint32_t const b = float_to_bits(s);
  std::uint32_t const e = b >> 23;
  return (b & 0x807FFFFFu) == 0 && e >= 1 && e <= 254;
}
/// The engines' decode of a packed byte: float(b << 23) (0 -> +0.0, 255 -> +Inf; not OCP E8M0).
QTL_HOST_DEVICE constexpr float ue8m0_decode(std::uint8_t b) {
  return bits_to_float(static_cast<std::uint32_t>(b) << 23);
}
/// The packed byte of an E8M0 scale code (DeepSeek-V4's `F8_E8M0` scales): the code itself. vLLM's
/// `_upcast_e8m0_to_fp32` makes it the float b << 23, whose exponent field the packer takes.
QTL_HOST_DEVICE constexpr std::uint8_t ue8m0_byte(std::uint8_t e8m0) { return e8m0; }
/// True for the E8M0 codes whose upcast DeepGEMM's kernels accept: 1..254 (0 upcasts to +0.0,
/// 255 to +Inf).
QTL_HOST_DEVICE constexpr bool is_ue8m0_packable(std::uint8_t e8m0) { return is_ue8m0_packable(ue8m0_decode(e8m0)); }
/// Word p of one block row `row` [kb] of scales (power-of-two floats or E8M0 codes): byte t =
/// ue8m0_byte(row[4p+t]), 0 past kb (little-endian, K-block 4p in the low byte).
template <class Scale>
QTL_HOST_DEVICE constexpr std::int32_t dg_pack_word(Scale const* row, std::int64_t k_blocks, std::int64_t p) {
  std::uint32_t w = 0;
  for (int t = 0; t < 4; ++t) {
    std::int64_t const j = 4 * p + t;
    if (j < k_blocks) {
      w |= static_cast<std::uint32_t>(ue8m0_byte(row[j])) << (8 * t);
    }
  }
  return static_cast<std::int32_t>(w);
}
/// Byte t of a packed word.
QTL_HOST_DEVICE constexpr std::uint8_t packed_byte(std::int32_t word, int t) {
  return static_cast<std::uint8_t>((static_cast<std::uint32_t>(word) >> (8 * t)) & 0xFFu);
}

// ---------------------------------------------------------------------------------------------
// FP8 block -> MXFP4, sglang/ModelOpt `MXFP4QuantizeUtil.quantize` (every step in bf16)
// ---------------------------------------------------------------------------------------------

/// Elements per MXFP4 scale.
inline constexpr int mxfp4_block = 32;

namespace detail {

/// Correctly rounded log2 of a positive normal or subnormal float, as a bf16-representable value
/// after one RNE to bf16 (the exact log2 is within 2^-30 relative of the float one, and the bf16
/// grid is 2^16 times coarser: the double rounding only matters at a bf16 tie, which a log2 of a
/// bf16 value never hits exactly).
QTL_HOST_DEVICE constexpr float bf16_log2(float d) {
  std::uint32_t const a = float_to_bits(d);
  int k = 0;
  double r = 0.0;
  if ((a >> 23) != 0) {
    k = static_cast<int>(a >> 23) - 127;
    r = static_cast<double>(a & 0x7FFFFFu) / 8388608.0;
  } else {
    int top = 22;
    while (((a >> top) & 1u) == 0) {
      --top;
    }
    k = top - 149;
    r = static_cast<double>(a & ((1u << top) - 1u)) / static_cast<double>(1u << top);
  }
  // log2(1 + r) by atanh series: ln(1+r) = 2 atanh(r / (2 + r)); |z| <= 1/3, 30 terms > 1e-28
  double const z = r / (2.0 + r);
  double const z2 = z * z;
  double term = z;
  double sum = 0.0;
  for (int i = 1; i < 60; i += 2) {
    sum += term / i;
    term *= z2;
  }
  double const l = static_cast<double>(k) + 2.0 * sum / 0.69314718055994530942;
  return bf16_to_float(float_to_bf16(static_cast<float>(l)));
}

}  // namespace detail

/// The bf16 bits of d = bf(amax / 6), the input of the MXFP4 exponent.
QTL_HOST_DEVICE constexpr std::uint16_t mxfp4_scaled_amax(float amax) {
  return float_to_bf16(qtl::detail::div_rn(amax, 6.0f));
}

/// The exponent of d (bf16 bits, not negative): L = bf(log2f(d)), e = ceil(max(L, -127)) (d = 0 -> -127).
QTL_HOST_DEVICE constexpr int mxfp4_exponent_of(std::uint16_t d_bits) {
  float const d = bf16_to_float(d_bits);
  if (!(d > 0.0f)) {
    return -127;  // log2(0) = -inf, floored at -127
  }
  float const l = detail::bf16_log2(d);
  float const lc = l < -127.0f ? -127.0f : l;
  int e = static_cast<int>(lc);
  if (static_cast<float>(e) < lc) {
    ++e;
  }
  return e;
}

/// The shared exponent e of 32 bf16 values whose amax (exact, |x| max) is `amax`:
///   d = bf(amax / 6), L = bf(log2f(d)), e = ceil(max(L, -127))      (amax 0 -> -127)
QTL_HOST_DEVICE constexpr int mxfp4_exponent(float amax) { return mxfp4_exponent_of(mxfp4_scaled_amax(amax)); }

/// The E2M1 nibble of one element x (a bf16 value) under exponent e: y = x / 2^e (exact), the code
/// is how many of 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 are strictly below |y| (ties go toward zero),
/// and the sign bit is set for y <= 0, so every zero is 0x8.
QTL_HOST_DEVICE constexpr std::uint8_t mxfp4_nibble(float x, int e) {
  float const y = qtl::detail::mul_rn(x, detail::exp2_int(-e));
  float const a = bits_to_float(float_to_bits(y) & 0x7FFFFFFFu);
  constexpr float bounds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  std::uint8_t code = 0;
  for (float b : bounds) {
    code = static_cast<std::uint8_t>(code + (a > b ? 1 : 0));
  }
  return static_cast<std::uint8_t>(code | (y <= 0.0f ? 0x8u : 0u));
}

/// The NVFP4 global scale of QTL's FP8-block -> NVFP4: fl(1 / fl(amax / 2688)), 1 for amax 0
/// (the precondition, checked by the host's `nvfp4_shared_global_scale`: amax finite, >= 0).
QTL_HOST_DEVICE constexpr float nvfp4_shared_global_scale_of(float amax) {
  return amax == 0.0f ? 1.0f : qtl::detail::div_rn(1.0f, qtl::detail::div_rn(amax, 2688.0f));
}

/// The E8M0 scale byte of exponent e: e + 127.
QTL_HOST_DEVICE constexpr std::uint8_t mxfp4_scale_byte(int e) { return static_cast<std::uint8_t>(e + 127); }

// ---------------------------------------------------------------------------------------------
// Per-tensor FP8: sglang `input_to_float8` (the CPU tail of `block_quant_to_tensor_quant`)
// ---------------------------------------------------------------------------------------------

/// The amax floor of `input_to_float8` (`clamp(min=1e-12)`).
inline constexpr float input_to_float8_amax_floor = 1e-12f;

/// The multiplier of `input_to_float8`: scale = fl(448 / max(amax, 1e-12)). The scale it returns
/// is fl(1 / scale), which is not fl(amax / 448) (docs/spec/converters.md §6 E5: one ulp apart).
QTL_HOST_DEVICE constexpr float input_to_float8_scale(float amax) {
  return qtl::detail::div_rn(e4m3_max, amax < input_to_float8_amax_floor ? input_to_float8_amax_floor : amax);
}

/// One element: e4m3(clamp(fl(x * scale), -448, 448)) (RNE after the clamp).
QTL_HOST_DEVICE constexpr std::uint8_t input_to_float8_element(float x, float scale) {
  return fp8_saturate_encode<float8_e4m3fn_t>(qtl::detail::mul_rn(x, scale));
}

}  // namespace qtl::convert
