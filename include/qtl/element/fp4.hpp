#pragma once
/// \file
/// The element layer of block-scaled quantization, NVFP4, MXFP4 and MXFP8 (`qtl/fp4.hpp` runs it on
/// the host, `qtl/cuda/fp4.cuh` on the device, and kernel authors build their own kernels from
/// it): the value and scale formats (`block_format`, `nvfp4`, `mxfp4`, `mxfp8`), the `QTL_HOST_DEVICE
/// constexpr` element functions of the recipes in `qtl/fp4.hpp`'s file comment (E2M1 encode,
/// global, block and output scales, element codes and values), the scale-buffer size and the
/// argument checks the host API shares. `docs/spec/blockscale.md` §1 and §5 is the spec.

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include <qtl/element/blockscale.hpp>
#include <qtl/element/fp8.hpp>
#include <qtl/error.hpp>
#include <qtl/exact.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/type_list.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// Two float4_e2m1f codes in one byte: element 2i in bits 0-3, element 2i+1 in bits 4-7
/// (torch `float4_e2m1fn_x2`, CUDA `__nv_fp4x2_e2m1`).
struct float4_e2m1x2_t {
  std::uint8_t bits;
  friend constexpr bool operator==(float4_e2m1x2_t, float4_e2m1x2_t) = default;
};

/// A block-scaled format: `Element` values (`float4_e2m1x2_t`: E2M1 pairs, or
/// `float8_e4m3fn_t`), one `Scale` (`float8_e4m3fn_t` with a float32 global scale: the NVFP4
/// recipe; `float8_e8m0fnu_t`: the MX recipe) per `BlockSize` consecutive elements of a row.
template <class Element, class Scale, int BlockSize>
struct block_format {
  static_assert(std::is_same_v<Element, float4_e2m1x2_t> || std::is_same_v<Element, float8_e4m3fn_t>,
                "qtl::block_format: Element must be float4_e2m1x2_t (E2M1 pairs) or float8_e4m3fn_t");
  static_assert(std::is_same_v<Scale, float8_e4m3fn_t> || std::is_same_v<Scale, float8_e8m0fnu_t>,
                "qtl::block_format: Scale must be float8_e4m3fn_t (NVFP4 recipe) or float8_e8m0fnu_t (MX)");
  static_assert(BlockSize >= 2 && BlockSize % 2 == 0 && BlockSize <= 256,
                "qtl::block_format: BlockSize must be even, between 2 and 256 (16 for NVFP4, 32 for MX)");

  using element = Element;
  using scale = Scale;
  static constexpr int block_size = BlockSize;
  /// Elements per stored `element` (2 for E2M1 pairs).
  static constexpr int elements_per_value = std::is_same_v<Element, float4_e2m1x2_t> ? 2 : 1;
  /// Largest magnitude of an element: 6 (E2M1) or 448 (E4M3).
  static constexpr float element_max = std::is_same_v<Element, float4_e2m1x2_t> ? 6.0f : 448.0f;
  /// True for the NVFP4 recipe (E4M3 scales relative to a float32 global scale).
  static constexpr bool has_global_scale = std::is_same_v<Scale, float8_e4m3fn_t>;
  /// Which rule encodes and decodes the elements and the scales. Every encoder and decoder of a
  /// block format (here, `qtl/x86/fp4.hpp`, `qtl/fp4.hpp`) names the type it handles in each branch
  /// and ends in `static_assert(detail::no_block_rule<F>)`: a type added to the lists above stops
  /// the build at every place that needs its rule, instead of taking another type's path.
  static constexpr bool e2m1_elements = std::is_same_v<Element, float4_e2m1x2_t>;
  static constexpr bool e4m3_elements = std::is_same_v<Element, float8_e4m3fn_t>;
  static constexpr bool e8m0_scales = std::is_same_v<Scale, float8_e8m0fnu_t>;
};

/// NVFP4: E2M1, E4M3 scale per 16, float32 global scale.
using nvfp4 = block_format<float4_e2m1x2_t, float8_e4m3fn_t, 16>;
/// MXFP4 (OCP MX): E2M1, UE8M0 scale per 32.
using mxfp4 = block_format<float4_e2m1x2_t, float8_e8m0fnu_t, 32>;
/// MXFP8 (OCP MX): E4M3, UE8M0 scale per 32.
using mxfp8 = block_format<float8_e4m3fn_t, float8_e8m0fnu_t, 32>;

/// Every block format, with its name: the one list that tests (`TEMPLATE_LIST_TEST_CASE`),
/// benchmarks, the Python bindings and `qtl op` walk. A new format is an alias above, an entry
/// here and its name below; the build then stops at each rule it lacks (`detail::no_block_rule`).
using block_formats = type_list<nvfp4, mxfp4, mxfp8>;
template <>
inline constexpr std::string_view name_of<nvfp4> = "nvfp4";
template <>
inline constexpr std::string_view name_of<mxfp4> = "mxfp4";
template <>
inline constexpr std::string_view name_of<mxfp8> = "mxfp8";

namespace detail {
/// False, for the `static_assert` that ends each chain of rules over a block format's types.
template <class F>
inline constexpr bool no_block_rule = false;
template <class F>
inline constexpr bool is_block_format = false;
template <class E, class S, int B>
inline constexpr bool is_block_format<block_format<E, S, B>> = true;
}  // namespace detail

/// A specialisation of `qtl::block_format`.
template <class F>
concept block_format_type = detail::is_block_format<F>;

// ---------------------------------------------------------------------------------------------
// element code (shared with qtl/cuda/fp4.cuh)
// ---------------------------------------------------------------------------------------------

namespace detail {
/// The E2M1 magnitude code of |x| counts the thresholds its bits exceed (integer order = numeric
/// order for non-negative floats): the midpoints .25 .75 1.25 1.75 2.5 3.5 5 between the eight
/// magnitudes, each tie to the even code (a midpoint above an odd code belongs to the code above
/// it: bits - 1). `e2m1_encode` and its vector forms in qtl/x86/fp4.hpp compare against these.
QTL_HOST_DEVICE constexpr std::uint32_t e2m1_threshold(int k) {
  std::uint32_t const t[7] = {float_to_bits(0.25f),      float_to_bits(0.75f) - 1u, float_to_bits(1.25f),
                              float_to_bits(1.75f) - 1u, float_to_bits(2.5f),       float_to_bits(3.5f) - 1u,
                              float_to_bits(5.0f)};
  return t[k];
}
}  // namespace detail

/// E2M1 code (low nibble) of `x`, RNE on the 8 magnitudes with ties to the even code, saturating
/// at ±6, NaN -> +6: numeric.hpp's `float_to_e2m1` (tested equal), as seven threshold compares
/// (`detail::e2m1_threshold`) so that host loops vectorize:
///
///     |x|  [0,.25] (.25,.75) [.75,1.25] (1.25,1.75) [1.75,2.5] (2.5,3.5) [3.5,5] (5,inf]
///     code    0        1         2          3           4          5        6       7
QTL_HOST_DEVICE constexpr std::uint8_t e2m1_encode(float x) {
  // On the bits of |x|: no float comparison, which g++'s default -ftrapping-math treats as
  // control flow.
  std::uint32_t const bits = float_to_bits(x);
  std::uint32_t const a = bits & 0x7fffffffu;
  using detail::e2m1_threshold;
  std::uint32_t const code = std::uint32_t(a > e2m1_threshold(0)) + std::uint32_t(a > e2m1_threshold(1)) +
                             std::uint32_t(a > e2m1_threshold(2)) + std::uint32_t(a > e2m1_threshold(3)) +
                             std::uint32_t(a > e2m1_threshold(4)) + std::uint32_t(a > e2m1_threshold(5)) +
                             std::uint32_t(a > e2m1_threshold(6));
  bool const nan = a > 0x7f800000u;
  return static_cast<std::uint8_t>(nan ? 0x7u : (((bits >> 28) & 0x8u) | code));
}

/// NVFP4 global scale from the tensor's amax: `448 * 6 / amax`; 1 when amax is 0 (see the file
/// comment).
QTL_HOST_DEVICE constexpr float nvfp4_global_scale_from_amax(float amax) {
  return amax == 0.0f ? 1.0f : detail::div_rn(448.0f * 6.0f, amax);
}

/// compressed-tensors' NVFP4 global scale of a tensor whose max magnitude is `amax`, exactly as
/// its release 0.20.0 writes it from float32 min/max (`generate_gparam`): `448 * 6 / a` with `a`
/// a torch tensor, which torch evaluates as `a.reciprocal() * 2688` (a Python number over a
/// tensor), so two roundings where `nvfp4_global_scale_from_amax` has one; they differ by an ulp
/// for about a quarter of all amax (test/unit/quantize_ct_test.cpp pins two):
///
///   a  = max(amax, FLT_MIN)          (torch.clamp(min=tiny); NaN stays NaN)
///   gs = fl(fl(1 / a) * 2688)        NaN or +inf (a below ~7.9e-36, or 0) -> 1
///
/// An infinite amax gives 0, which the quantizers reject (`check_global_scale`).
QTL_HOST_DEVICE constexpr float ct_nvfp4_global_scale(float amax) {
  float const a = amax < 0x1p-126f ? 0x1p-126f : amax;
  float const r = detail::div_rn(1.0f, a);
  // r * 2688 is exact in double; it rounds to +inf from halfway between FLT_MAX and 2^128
  bool const overflows = static_cast<double>(r) * 2688.0 >= 0x1.ffffffp127;
  return r != r || overflows ? 1.0f : detail::mul_rn(r, 448.0f * 6.0f);
}

/// The scale byte of a block whose max magnitude is `vmax` (`global_scale` is used by the NVFP4
/// recipe only).
template <block_format_type F>
QTL_HOST_DEVICE constexpr std::uint8_t block_scale_code(float vmax, float global_scale) {
  float const unit = detail::div_rn(vmax, F::element_max);
  if constexpr (F::has_global_scale) {
    // min(sf, 448) then RNE: fp8_saturate_encode (sf is never NaN here: the global scale is
    // finite and positive, vmax is not NaN)
    return fp8_saturate_encode<float8_e4m3fn_t>(detail::mul_rn(global_scale, unit));
  } else if constexpr (F::e8m0_scales) {
    return float_to_e8m0(unit, e8m0_rounding::up, saturation::finite);
  } else {
    static_assert(detail::no_block_rule<F>, "qtl::block_scale_code: no rule for this scale type");
  }
}

/// compressed-tensors' MX scale byte (biased E8M0 exponent) of a block whose max magnitude is
/// `amax`, a value of the weight dtype T, for elements whose largest power of two is
/// 2^`offset` (floor(log2(element max)), its `_MX_ELEM_OFFSET`: 2 for MXFP4's E2M1, 8 for MXFP8's
/// E4M3; below written for 2), exactly as its release 0.20.0 writes it
/// (`quantization/utils/mxfp_utils.py::generate_mx_scales` in T, then `calculate_qparams`' uint8
/// rounding, `maybe_convert_from_mx_exp`, the zero-scale epsilon 1 and `compress_mx_scale`),
/// not the library's MX rule (`block_scale_code<mxfp4>`: the smallest power of two >= amax/6):
///
///   p2 = amax rounded to a power of two on T's bits: up iff its significand is >= 1.75
///        (`round_to_power_2`: + 2^(m-2), then the mantissa masked); below T's smallest normal
///        (exponent field 0) that carry gives the smallest normal from 0.75 of it, else p2 = 0
///   c  = clamp(127 + log2(p2) - 2, 0, 255)                 (-inf for p2 = 0: 0)
///   s  = T(2^(c - 127)); 0 (fp16 only: c - 127 <= -25) becomes 1, so the byte is 127
///
/// So amax 6 gives 2^0 (6 / 1 = 6) but amax 6.9 also gives 2^0 and clips to 6 (the library rule
/// takes 2^1), amax 7 gives 2^1. Beyond CT's range: p2 = +inf (amax >= 1.75 * 2^emax of T, fp16
/// >= 61440) or NaN make CT's exponent infinite, whose int cast torch leaves undefined; 254 here.
template <class T>
QTL_HOST_DEVICE constexpr std::uint8_t ct_mx_scale_code(float amax, int offset = 2) {
  constexpr bool half = std::is_same_v<T, half_t>;
  constexpr float min_normal = half ? 0x1p-14f : 0x1p-126f;
  constexpr int emax = half ? 15 : 127;
  if (amax != amax) {
    return 254;
  }
  if (!(amax >= min_normal)) {
    if (half && amax >= 0.75f * min_normal) {
      return static_cast<std::uint8_t>(127 - 14 - offset);  // the carry into the exponent field: p2 = 2^-14
    }
    return half ? 127 : 0;  // c = 0 (bf16, float: also for p2 = 2^-126); fp16 flushes 2^-127 to 0, made 1
  }
  std::uint32_t const bits = float_to_bits(amax);
  int e = static_cast<int>((bits >> 23) & 0xFFu) - 127;
  e += (bits & 0x7FFFFFu) >= 0x600000u ? 1 : 0;  // significand >= 1.75: the next power of two
  if (e > emax) {
    return 254;
  }
  int c = 127 + e - offset;
  c = c < 0 ? 0 : c;
  if (half && c - 127 <= -25) {
    return 127;
  }
  return static_cast<std::uint8_t>(c);
}

namespace detail {
// e4m3fn_to_float for the codes 0x00..0x7E without its normalisation loop: a normal code is a
// float with the exponent re-biased, a subnormal one is m * 2^-9 (exact).
QTL_HOST_DEVICE constexpr float e4m3_decode_nonnegative(std::uint8_t c) {
  std::uint32_t const e = (c >> 3) & 0xFu;
  std::uint32_t const m = c & 0x7u;
  return e != 0 ? bits_to_float(((e + 120u) << 23) | (m << 20)) : mul_rn(static_cast<float>(m), 0x1p-9f);
}
}  // namespace detail

/// Whether `v` becomes ±0 when rounded to T (nearest even): |v| at most half T's smallest
/// subnormal, a tie that rounds to the even 0 (bf16: 2^-134; f16: 2^-25; float: v is ±0). The
/// test compressed-tensors' MXFP4 quotient x / 2^e, computed in T, meets (`ct_mxfp4_quantize`);
/// equal to `round_to<T>(v) == 0` for every float (test/unit/ct_fp4_test.cpp), without the
/// conversion.
template <class T>
QTL_HOST_DEVICE constexpr bool rounds_to_zero_in(float v) {
  float const a = bits_to_float(float_to_bits(v) & 0x7FFFFFFFu);
  if constexpr (std::is_same_v<T, half_t>) {
    return a <= 0x1p-25f;
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return a <= 0x1p-134f;
  } else {
    static_assert(std::is_same_v<T, float>, "qtl::rounds_to_zero_in: T is float, half_t or bfloat16_t");
    return a == 0.0f;
  }
}

/// 2^(127 - code) exactly (code 254 gives the subnormal 2^-127).
QTL_HOST_DEVICE constexpr float e8m0_reciprocal(std::uint8_t code) {
  int const e = 254 - int(code);
  return bits_to_float(e > 0 ? static_cast<std::uint32_t>(e) << 23 : 0x00400000u);
}

/// The multiplier applied to each element of a block: `os` of the file comment. An MX block of
/// scale code 0 (amax below 2^-127 times the element max: float32 subnormals only) is multiplied by
/// 2^127 exactly, so that code x 2^-127 stays within half a step of x; TransformerEngine's
/// `exp2f_rcp` and torchao's RCEIL path multiply such a block by 1 instead (every code 0 or -0).
/// Pinned in test/unit/fp4_test.cpp.
template <block_format_type F>
QTL_HOST_DEVICE constexpr float block_output_scale(std::uint8_t scale_code, float vmax, float global_scale) {
  if constexpr (F::has_global_scale) {
    float const sf = detail::e4m3_decode_nonnegative(scale_code);
    return sf == 0.0f ? 0.0f : detail::div_rn(1.0f, detail::mul_rn(sf, detail::div_rn(1.0f, global_scale)));
  } else if constexpr (F::e8m0_scales) {
    return vmax == 0.0f ? 0.0f : e8m0_reciprocal(scale_code);
  } else {
    static_assert(detail::no_block_rule<F>, "qtl::block_output_scale: no rule for this scale type");
  }
}

/// The code of one element (low nibble for E2M1, the byte for E4M3) under output scale `os`.
template <block_format_type F>
QTL_HOST_DEVICE constexpr std::uint8_t block_element_code(float x, float os) {
  float const v = detail::mul_rn(x, os);
  if constexpr (F::e2m1_elements) {
    return e2m1_encode(v);
  } else if constexpr (F::e4m3_elements) {
    return fp8_saturate_encode<float8_e4m3fn_t>(v);
  } else {
    static_assert(detail::no_block_rule<F>, "qtl::block_element_code: no rule for this element type");
  }
}

/// The dequantization factor of a block: `float(sf) / gs` (NVFP4) or `2^(sf - 127)` (MX).
template <block_format_type F>
QTL_HOST_DEVICE constexpr float block_dequant_scale(std::uint8_t scale_code, float global_scale) {
  if constexpr (F::has_global_scale) {
    return detail::div_rn(e4m3fn_to_float(scale_code), global_scale);
  } else if constexpr (F::e8m0_scales) {
    return e8m0_to_float(scale_code);
  } else {
    static_assert(detail::no_block_rule<F>, "qtl::block_dequant_scale: no rule for this scale type");
  }
}

/// The value of element code `c` (nibble or byte).
template <block_format_type F>
QTL_HOST_DEVICE constexpr float block_element_value(std::uint8_t c) {
  if constexpr (F::e2m1_elements) {
    return e2m1_to_float(c);
  } else if constexpr (F::e4m3_elements) {
    return e4m3fn_to_float(c);
  } else {
    static_assert(detail::no_block_rule<F>, "qtl::block_element_value: no rule for this element type");
  }
}

// ---------------------------------------------------------------------------------------------
// shapes
// ---------------------------------------------------------------------------------------------

/// Bytes of the scale buffer of an [M, K] input in `Layout` (padding included).
template <block_format_type F, blockscale_layout_type Layout = layout_linear>
constexpr index_t block_scale_bytes(index_t rows, index_t cols) {
  return Layout::pad_rows(rows) * Layout::pad_cols(cols / F::block_size);
}

namespace detail {

template <class F, class Layout, class T>
void check_block_shapes(char const* fn, view2d<T const> in, view2d<typename F::element const> values,
                        std::size_t scale_bytes) {
  index_t const m = in.extent[0];
  index_t const k = in.extent[1];
  if (m < 0 || k < 0) {
    throw shape_error(std::string(fn) + ": negative extent " + shape_string(m, k));
  }
  if (k % F::block_size != 0) {
    throw shape_error(std::string(fn) + ": K = " + std::to_string(k) + " is not a multiple of the block size " +
                      std::to_string(F::block_size));
  }
  if (k > 1 && in.stride[1] != 1) {
    throw shape_error(std::string(fn) + ": input rows must be contiguous (stride[1] == 1)");
  }
  index_t const vk = k / F::elements_per_value;
  if (values.extent[0] != m || values.extent[1] != vk || (vk > 1 && values.stride[1] != 1)) {
    throw shape_error(std::string(fn) + ": values must be a row-contiguous " + shape_string(m, vk) + ", got " +
                      shape_string(values.extent[0], values.extent[1]));
  }
  auto const need = static_cast<std::size_t>(block_scale_bytes<F, Layout>(m, k));
  if (scale_bytes != need) {
    throw shape_error(std::string(fn) + ": the scale buffer has " + std::to_string(scale_bytes) +
                      " bytes, the layout needs " + std::to_string(need));
  }
}

inline void check_global_scale(char const* fn, float gs) {
  if (!(gs > 0.0f) || is_inf(gs)) {
    throw value_error(std::string(fn) + ": the global scale must be finite and > 0, got " + std::to_string(gs));
  }
}

}  // namespace detail

}  // namespace qtl
