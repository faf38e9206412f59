#pragma once
/// \file
/// The element layer of FP8 quantization (`qtl/fp8.hpp` runs it on the host, `qtl/cuda/fp8.cuh`
/// on the device, and kernel authors build their own kernels from it): the formats, the NaN,
/// zero-scale and scale-operation policies, the options of each variant, the `QTL_HOST_DEVICE
/// constexpr` element functions (amax leaves, the branch-free saturating encode, scales, the
/// per-element quantize, dequantize and requantize) and the shape check the host API shares.
/// Every element is
///
///     q = rne(clamp(x * (1/scale), -max, max))      in float32, max = 448 (e4m3fn) or 57344 (e5m2)
///
/// with exactly rounded float operations (`qtl/exact.hpp`); `qtl/fp8.hpp`'s file comment gives the
/// variants, the policies where the peers disagree, and `docs/spec/semantics.md` §2-§3 the spec.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include <qtl/error.hpp>
#include <qtl/exact.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl {

// ---------------------------------------------------------------------------------------------
// formats and element code
// ---------------------------------------------------------------------------------------------

/// The FP8 storage formats `scaled_fp8_quant` writes.
template <class T>
concept fp8_storage = std::is_same_v<T, float8_e4m3fn_t> || std::is_same_v<T, float8_e5m2_t>;

/// The element types it reads (converted exactly to float32 before any arithmetic).
template <class T>
concept fp8_quant_input = std::is_same_v<T, float> || std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>;

/// Layout constants of an FP8 format: 1 sign bit | `exponent_bits` | `mantissa_bits`. Defined for
/// the `fp8_storage` formats and for float8_e4m3fnuz, which the `scaled_fp8_quant` family does not
/// write (the engines quantize to it with max 224, not the format's 240: `get_fp8_min_max`).
template <class Fp8>
struct fp8_format;

/// e4m3fn: bias 7, no Inf, NaN = 0x7F/0xFF, max 448 (0x7E), min subnormal 2^-9 (0x01).
template <>
struct fp8_format<float8_e4m3fn_t> {
  static constexpr int exponent_bits = 4;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 7;
  static constexpr float max = 448.0f;
  static constexpr std::uint8_t max_code = 0x7E;
  static constexpr std::uint8_t nan_code = 0x7F;  ///< with the sign bit: numeric.hpp's canonical NaN
  static constexpr char const* name = "float8_e4m3fn";
};
/// e4m3fnuz (ROCm): bias 8, no Inf, no -0, NaN = 0x80 only, max 240 (0x7F), min subnormal 2^-10.
template <>
struct fp8_format<float8_e4m3fnuz_t> {
  static constexpr int exponent_bits = 4;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 8;
  static constexpr float max = 240.0f;
  static constexpr std::uint8_t max_code = 0x7F;
  static constexpr std::uint8_t nan_code = 0x80;  ///< the code of -0 in the other formats
  static constexpr char const* name = "float8_e4m3fnuz";
};
/// e5m2: bias 15, IEEE-like (Inf 0x7C), max 57344 (0x7B), min subnormal 2^-16 (0x01).
template <>
struct fp8_format<float8_e5m2_t> {
  static constexpr int exponent_bits = 5;
  static constexpr int mantissa_bits = 2;
  static constexpr int bias = 15;
  static constexpr float max = 57344.0f;
  static constexpr std::uint8_t max_code = 0x7B;
  static constexpr std::uint8_t nan_code = 0x7F;  ///< with the sign bit: numeric.hpp's canonical NaN
  static constexpr char const* name = "float8_e5m2";
};

/// The (min, max) pair of `get_fp8_min_max`.
struct fp8_min_max {
  float min;
  float max;
};
/// vLLM's `get_fp8_min_max()` (`quant_utils.py`): the range FP8 quantization scales to on the
/// platform, `(-224, 224)` where the platform's FP8 is float8_e4m3fnuz (`is_fp8_fnuz`: ROCm MI300;
/// the engines avoid 240, the format's max, for accuracy), else `finfo(float8_e4m3fn)`,
/// `(-448, 448)`: every other platform's FP8 type is e4m3fn.
QTL_HOST_DEVICE constexpr fp8_min_max get_fp8_min_max(bool is_fp8_fnuz) {
  return is_fp8_fnuz ? fp8_min_max{-224.0f, 224.0f} : fp8_min_max{-448.0f, 448.0f};
}

/// What a NaN element becomes (see the file comment).
enum class fp8_nan : std::uint8_t {
  to_max,     ///< +max, as the CUDA kernels' `fminf/fmaxf` clamp (default)
  propagate,  ///< the positive NaN code 0x7F, whatever the NaN's sign (torch's clamp keeps the sign)
};

/// How a zero scale turns into the multiplier `1/scale`.
enum class fp8_zero_scale : std::uint8_t {
  reciprocal,  ///< `1/0 = inf`: zeros -> NaN -> per the NaN policy, others -> ±max (per-tensor)
  guard,       ///< `scale == 0 ? 0 : 1/scale`: everything quantizes to ±0 (sglang per-token)
};

/// How the scale is applied to an element.
enum class fp8_scale_op : std::uint8_t {
  multiply_reciprocal,  ///< `x * (1/scale)` (every sglang/vLLM CUDA kernel)
  divide,               ///< `x / scale` (vLLM per-token kernel, the torch references)
};

namespace detail {

// Raw bits of the input types, for the exact amax reduction: for non-negative, non-NaN values the
// integer order of the bits is the numeric order, so amax is an integer max of |x|'s bits.
template <class T>
struct input_bits;
template <>
struct input_bits<float> {
  using word = std::uint32_t;
  static constexpr word abs_mask = 0x7fffffffu;
  static constexpr word inf = 0x7f800000u;
  QTL_HOST_DEVICE static constexpr word get(float x) { return float_to_bits(x); }
  QTL_HOST_DEVICE static constexpr float value(word w) { return bits_to_float(w); }
};
template <>
struct input_bits<half_t> {
  using word = std::uint16_t;
  static constexpr word abs_mask = 0x7fffu;
  static constexpr word inf = 0x7c00u;
  QTL_HOST_DEVICE static constexpr word get(half_t x) { return x.bits; }
  QTL_HOST_DEVICE static constexpr float value(word w) { return to_float(half_t{w}); }
};
template <>
struct input_bits<bfloat16_t> {
  using word = std::uint16_t;
  static constexpr word abs_mask = 0x7fffu;
  static constexpr word inf = 0x7f80u;
  QTL_HOST_DEVICE static constexpr word get(bfloat16_t x) { return x.bits; }
  QTL_HOST_DEVICE static constexpr float value(word w) { return to_float(bfloat16_t{w}); }
};

}  // namespace detail

/// Bits of |x| with NaN mapped to +0: the leaf of every amax reduction (max of these = bits of
/// the largest non-NaN magnitude).
template <fp8_quant_input T>
QTL_HOST_DEVICE constexpr typename detail::input_bits<T>::word amax_bits(T x) {
  using B = detail::input_bits<T>;
  auto const a = static_cast<typename B::word>(B::get(x) & B::abs_mask);
  return static_cast<typename B::word>(a & (0u - static_cast<unsigned>(a <= B::inf)));  // NaN -> 0
}
/// The float32 value of `amax_bits` (exact).
template <fp8_quant_input T>
QTL_HOST_DEVICE constexpr float amax_value(typename detail::input_bits<T>::word bits) {
  return detail::input_bits<T>::value(bits);
}

namespace detail {

// FP8 code (sign excluded) of the float whose bits are `mag` (sign clear, at most the bits of
// the format's max, not NaN): one round-to-nearest-even to the format's grid, branch-free.
//
//   normal |v| >= 2^(1-bias):  round the 23-bit float mantissa to M bits (RNE on the integer
//                              bits, a carry rolls into the exponent), then re-bias 127 -> bias
//   subnormal:                 |v| + 2^E, E = 24-bias-M, is a float whose ulp is the fp8
//                              subnormal step 2^(1-bias-M): the FPU's RNE does the rounding and
//                              the low bits of the sum are the code (0 .. 2^M, the last one
//                              being the smallest normal)
template <class Fp8>
QTL_HOST_DEVICE constexpr std::uint32_t fp8_encode_magnitude(std::uint32_t mag) {
  using F = fp8_format<Fp8>;
  constexpr int drop = 23 - F::mantissa_bits;
  constexpr std::uint32_t rebias = std::uint32_t(127 - F::bias) << F::mantissa_bits;
  constexpr std::uint32_t min_normal = std::uint32_t(127 + 1 - F::bias) << 23;
  constexpr float magic = bits_to_float(std::uint32_t(127 + 24 - F::bias - F::mantissa_bits) << 23);
  constexpr std::uint32_t magic_bits = float_to_bits(magic);
  std::uint32_t const rounded = mag + ((1u << (drop - 1)) - 1u) + ((mag >> drop) & 1u);
  std::uint32_t const normal = (rounded >> drop) - rebias;
  std::uint32_t const subnormal = float_to_bits(add_rn(bits_to_float(mag), magic)) - magic_bits;
  // A mask, not a `?:`: with -ftrapping-math g++ will not if-convert a select that would
  // speculate the float addition, and the loop would not vectorize.
  // (signed compares: SSE2 has no unsigned one, and the magnitudes are below 2^31)
  std::uint32_t const is_subnormal = 0u - std::uint32_t(std::int32_t(mag) < std::int32_t(min_normal));
  return (subnormal & is_subnormal) | (normal & ~is_subnormal);
}

}  // namespace detail

/// FP8 code of a float already inside [-max, max] and not NaN: one round-to-nearest-even to the
/// format's grid. Equal to numeric.hpp's `from_float<Fp8>` on that domain (tested), which it only
/// specialises: branch-free integer logic, so that host loops vectorize.
template <fp8_storage Fp8>
QTL_HOST_DEVICE constexpr std::uint8_t fp8_encode_clamped(float v) {
  std::uint32_t const bits = float_to_bits(v);
  return static_cast<std::uint8_t>(((bits >> 24) & 0x80u) | detail::fp8_encode_magnitude<Fp8>(bits & 0x7fffffffu));
}

/// The FP8 code of `v` (= x * (1/scale), already scaled) after the kernels' clamp to ±max:
/// ±Inf and beyond -> ±max; NaN per `Nan` (`to_max`: +max whatever its sign, `propagate`: the
/// format's NaN code with its sign, numeric.hpp's canonical NaN). The clamp and the NaN test are
/// done on the bits: under g++'s default `-ftrapping-math` a float comparison is control flow
/// that stops the vectorizer, an integer one is not; the result is the same.
template <fp8_storage Fp8, fp8_nan Nan = fp8_nan::to_max>
QTL_HOST_DEVICE constexpr std::uint8_t fp8_saturate_encode(float v) {
  constexpr std::int32_t max_bits = static_cast<std::int32_t>(float_to_bits(fp8_format<Fp8>::max));
  std::uint32_t const bits = float_to_bits(v);
  std::uint32_t sign = (bits >> 24) & 0x80u;
  auto const mag = static_cast<std::int32_t>(bits & 0x7fffffffu);
  std::uint32_t const nan = 0u - std::uint32_t(mag > 0x7f800000);  // all ones for a NaN
  // |v| clamped to max on the bits; a NaN's bits exceed Inf's, so it becomes max too
  auto const clamped = static_cast<std::uint32_t>(mag < max_bits ? mag : max_bits);
  if constexpr (Nan == fp8_nan::to_max) {
    sign &= ~nan;  // NaN -> +max: drop its sign
    return static_cast<std::uint8_t>(sign | detail::fp8_encode_magnitude<Fp8>(clamped));
  } else {
    // A NaN becomes the positive NaN code whatever its sign: CUDA's float arithmetic makes every
    // NaN result the canonical +NaN (0x7fffffff) where x86 keeps an operand's sign (and makes -NaN
    // of Inf·0), so a NaN's sign is not a result both executors can agree on.
    sign &= ~nan;
    // max_code | nan_code == nan_code for both formats: turn max into the NaN code
    static_assert((fp8_format<Fp8>::max_code | fp8_format<Fp8>::nan_code) == fp8_format<Fp8>::nan_code);
    return static_cast<std::uint8_t>(sign | detail::fp8_encode_magnitude<Fp8>(clamped) |
                                     (nan & fp8_format<Fp8>::nan_code));
  }
}

/// The multiplier `1/scale` of the reciprocal recipe, with the zero-scale policy.
QTL_HOST_DEVICE constexpr float fp8_inverse_scale(float scale, fp8_zero_scale zero = fp8_zero_scale::reciprocal) {
  if (scale == 0.0f) {  // ±inf, spelled out so that the function stays usable in constant expressions
    return zero == fp8_zero_scale::guard ? 0.0f : bits_to_float((float_to_bits(scale) & 0x80000000u) | 0x7f800000u);
  }
  return detail::div_rn(1.0f, scale);
}

/// The per-element operation of every variant: the code of `x` under scale `scale` whose
/// reciprocal is `inv` (the caller computes `fp8_inverse_scale(scale)` once).
template <fp8_storage Fp8, fp8_nan Nan = fp8_nan::to_max, fp8_scale_op Op = fp8_scale_op::multiply_reciprocal>
QTL_HOST_DEVICE constexpr std::uint8_t fp8_quantize_element(float x, float scale, float inv) {
  if constexpr (Op == fp8_scale_op::divide) {
    return fp8_saturate_encode<Fp8, Nan>(detail::div_rn(x, scale));
  } else {
    return fp8_saturate_encode<Fp8, Nan>(detail::mul_rn(x, inv));
  }
}

/// Dynamic per-tensor / per-token scale: `amax / max` (IEEE division), no floor.
template <fp8_storage Fp8>
QTL_HOST_DEVICE constexpr float fp8_scale_from_amax(float amax) {
  return detail::div_rn(amax, fp8_format<Fp8>::max);
}

/// Rounds a positive finite float up to a power of two, exactly: `2^ceil(log2(s))` (a power of two
/// stays). This is CUDA's `__nv_cvt_float_to_e8m0(s, satfinite, cudaRoundPosInf)` read back, and
/// what the UE8M0 scales of DeepGEMM mean; `exp2(ceil(log2(s)))` in float can round down for s
/// just above a power of two, which this does not. 0 stays 0; Inf and NaN are returned unchanged.
QTL_HOST_DEVICE constexpr float round_up_to_power_of_two(float s) {
  std::uint32_t const bits = float_to_bits(s);
  std::uint32_t const mag = bits & 0x7fffffffu;
  if (mag == 0 || mag >= 0x7f800000u) {
    return s;
  }
  if (mag < 0x00800000u) {  // subnormal: the next power of two above its highest set bit
    std::uint32_t p = 1;
    while (p < mag) {
      p <<= 1;
    }
    return bits_to_float((bits & 0x80000000u) | p);
  }
  std::uint32_t const up = (mag & 0x007fffffu) != 0 ? (mag & 0x7f800000u) + 0x00800000u : mag;
  return bits_to_float((bits & 0x80000000u) | up);
}

/// Per-token-group scale: `max(amax, eps) / max`, then optionally `2^ceil(log2(.))` (UE8M0).
template <fp8_storage Fp8>
QTL_HOST_DEVICE constexpr float fp8_group_scale(float amax, float eps, bool power_of_two) {
  float const a = amax > eps ? amax : eps;
  float const s = detail::div_rn(a, fp8_format<Fp8>::max);
  return power_of_two ? round_up_to_power_of_two(s) : s;
}

// ---------------------------------------------------------------------------------------------
// options
// ---------------------------------------------------------------------------------------------

/// Options of the per-tensor variants (static and dynamic).
struct fp8_tensor_options {
  fp8_nan nan = fp8_nan::to_max;
  fp8_zero_scale zero_scale = fp8_zero_scale::reciprocal;
};

/// Options of dynamic per-token quantization. Defaults: sglang (`amax/max`, no floor, guarded
/// reciprocal, multiply); `vllm_per_token_options` gives vLLM's recipe.
struct fp8_token_options {
  fp8_nan nan = fp8_nan::to_max;
  fp8_zero_scale zero_scale = fp8_zero_scale::guard;
  fp8_scale_op op = fp8_scale_op::multiply_reciprocal;
  /// vLLM's `scale_ub`: each row's amax is first lowered to at most this (+inf: no bound).
  float upper_bound = std::numeric_limits<float>::infinity();
  /// Lower bound of each scale (vLLM: `1/(max*512)`); 0: none.
  float min_scale = 0.0f;
};

/// vLLM's per-token recipe: `scale = max(min(amax, ub)/max, 1/(max*512))`, `q = x / scale`.
template <fp8_storage Fp8>
constexpr fp8_token_options vllm_per_token_options(float upper_bound = std::numeric_limits<float>::infinity()) {
  fp8_token_options o;
  o.op = fp8_scale_op::divide;
  o.upper_bound = upper_bound;
  o.min_scale = 1.0f / (fp8_format<Fp8>::max * 512.0f);
  return o;
}

/// Per-token scale of one row from its amax, under `o` (the element code shared by host and GPU).
template <fp8_storage Fp8>
QTL_HOST_DEVICE constexpr float fp8_token_scale(float amax, fp8_token_options const& o) {
  float const a = amax < o.upper_bound ? amax : o.upper_bound;
  float const s = fp8_scale_from_amax<Fp8>(a);
  return s > o.min_scale ? s : o.min_scale;
}

/// Where the per-token-group scales go: scale (m, g) of an [M, N] input with G = N / GroupSize
/// groups per row.
enum class group_scale_layout : std::uint8_t {
  row_major,     ///< `[M, G]`: offset m * G + g
  column_major,  ///< `[G, Mp]` storage of the logical `[M, G]`: offset g * Mp + m, Mp = M rounded
                 ///< up to `row_align` (4 for DeepGEMM's TMA-aligned scales, else 1)
};

/// Options of per-token-group quantization (defaults: sglang/vLLM `per_token_group_quant_fp8`).
struct fp8_group_options {
  fp8_nan nan = fp8_nan::to_max;
  fp8_scale_op op = fp8_scale_op::divide;  ///< the torch reference divides; Triton multiplies
  float eps = 1e-10f;                      ///< floor of each group's amax
  bool power_of_two_scale = false;         ///< UE8M0: scale = 2^ceil(log2(scale))
  group_scale_layout layout = group_scale_layout::row_major;
  index_t row_align = 1;  ///< column-major only: rows of the scale storage rounded up to this
};

/// Offset of scale (m, g) in the storage of `layout` (rows = M of the output, groups = G).
QTL_HOST_DEVICE constexpr index_t group_scale_offset(group_scale_layout layout, index_t m, index_t g, index_t rows,
                                                     index_t groups, index_t row_align) {
  if (layout == group_scale_layout::row_major) {
    return m * groups + g;
  }
  index_t const padded = (rows + row_align - 1) / row_align * row_align;
  return g * padded + m;
}
/// Number of floats the scale storage of `layout` needs.
constexpr index_t group_scale_storage_size(group_scale_layout layout, index_t rows, index_t groups, index_t row_align) {
  if (layout == group_scale_layout::row_major) {
    return rows * groups;
  }
  return (rows + row_align - 1) / row_align * row_align * groups;
}

/// One element of `per_tensor_dequantize`: `fp8 -> fp16` (exact), times the scale in float32,
/// rounded once to `Out` (half_t: the reference's result when the scale is a float or a 0-dim
/// tensor; float: when it is a 1-element tensor, which torch promotes to float32). Also the element
/// of vLLM's `scaled_dequantize`, whose codes may be e4m3fnuz.
template <class Out, class Fp8>
QTL_HOST_DEVICE constexpr Out dequantize_fp8_element(Fp8 q, float scale) {
  static_assert(fp8_storage<Fp8> || std::is_same_v<Fp8, float8_e4m3fnuz_t>,
                "qtl::dequantize_fp8_element: Fp8 is float8_e4m3fn, float8_e5m2 or float8_e4m3fnuz");
  float const p = detail::mul_rn(to_float(q), scale);
  if constexpr (std::is_same_v<Out, float>) {
    return p;
  } else {
    return from_float<Out>(p);
  }
}

/// One element of `requantize_with_max_scale`: dequantize with the shard's scale through fp16
/// (lossy, as the reference), then quantize statically with the maximum scale, `inv_max = 1/max`.
template <fp8_storage Fp8>
QTL_HOST_DEVICE constexpr Fp8 requantize_fp8_element(Fp8 q, float shard_scale, float inv_max) {
  float const x = to_float(dequantize_fp8_element<half_t>(q, shard_scale));
  return Fp8{fp8_quantize_element<Fp8>(x, 0.0f, inv_max)};
}

namespace detail {

// Checks of every variant: rows contiguous, same width, output at least as tall as the input.
template <class T, class Fp8>
void check_fp8_shapes(char const* fn, view2d<T const> in, view2d<Fp8> out) {
  if (in.extent[0] < 0 || in.extent[1] < 0) {
    throw shape_error(std::string(fn) + ": input has a negative extent " + shape_string(in.extent[0], in.extent[1]));
  }
  if (in.extent[1] > 1 && in.stride[1] != 1) {
    throw shape_error(std::string(fn) + ": input rows must be contiguous (stride[1] == 1), got stride " +
                      std::to_string(in.stride[1]));
  }
  if (out.extent[1] > 1 && out.stride[1] != 1) {
    throw shape_error(std::string(fn) + ": output rows must be contiguous (stride[1] == 1), got stride " +
                      std::to_string(out.stride[1]));
  }
  if (out.extent[1] != in.extent[1] || out.extent[0] < in.extent[0]) {
    throw shape_error(std::string(fn) + ": output " + shape_string(out.extent[0], out.extent[1]) +
                      " must have the input's columns and at least its rows; input is " +
                      shape_string(in.extent[0], in.extent[1]));
  }
}

}  // namespace detail

}  // namespace qtl
