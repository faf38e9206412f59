#pragma once
/// \file
/// The element layer of vLLM's `GroupShape` quantization (`quant_utils.py`: `scaled_quantize`,
/// `scaled_dequantize`, `group_broadcast`; `qtl/scaled_quantize.hpp` runs it on the host,
/// `qtl/cuda/scaled_quantize.cuh` on the device): the group shape and its normalisation, the
/// compute-dtype arithmetic of one group's scale and of one element, and the index map of the
/// broadcast. `docs/spec/engines.md` §5 is the spec.
///
/// An [M, N] input is cut into groups of `gm × gn` elements (a -1 extent: the whole dimension).
/// vLLM computes in the compute dtype C (the input's, or `compute_dtype`), rounding to C after each
/// torch operation:
///
///     xc     = C(x)                                   (exact when C is the input's dtype)
///     amax   = max(max |xc| over the group, C(1e-12))  (a NaN in the group: NaN)
///     scale  = C(C(1 / amax) * fp8_max)               (`fp8_max / amax` is torch's reciprocal, then *)
///     q      = Q(clamp(C(xc * scale), ±finfo(Q).max))  (Q's RNE; NaN: Q's positive NaN code)
///     x_s    = float(1 / float(scale))                (the returned, float32 dequantization scale)
///
/// `fp8_max` is `get_fp8_min_max()`'s: 448, or 224 on a platform whose FP8 is e4m3fnuz; the clamp
/// is Q's own range (448, 240, 57344). C(1e-12) is 0 in fp16, so an fp16 group of zeros gets the
/// scale Inf and NaN codes, as in vLLM. Where torch on x86 gives a NaN the sign of the arithmetic
/// (0 · Inf in f32 or f16 is -NaN there, code 0xFF for e4m3fn), QTL gives the positive code, as the
/// GPU's canonical NaN does.

#include <cstdint>
#include <type_traits>

#include <qtl/element/fp8.hpp>
#include <qtl/element/quantize.hpp>
#include <qtl/exact.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// vLLM's `GroupShape(row, col)`: the extents of one quantization group; an extent that is not
/// positive (vLLM writes -1) means the whole dimension.
struct group_shape {
  index_t row = -1;
  index_t col = -1;

  /// `GroupShape.PER_TENSOR`, `PER_TOKEN` (one group per row), `PER_CHANNEL` (one per column).
  static constexpr group_shape per_tensor() { return {-1, -1}; }
  static constexpr group_shape per_token() { return {1, -1}; }
  static constexpr group_shape per_channel() { return {-1, 1}; }
  constexpr bool is_per_tensor() const { return row == -1 && col == -1; }
  friend constexpr bool operator==(group_shape, group_shape) = default;
};

/// vLLM's `_normalize_quant_group_shape`: extents that are not positive become the input's.
QTL_HOST_DEVICE constexpr group_shape normalize_group_shape(group_shape g, index_t rows, index_t cols) {
  return {g.row > 0 ? g.row : rows, g.col > 0 ? g.col : cols};
}

/// What `scaled_quantize_shape_check` finds wrong with the shapes of a `scaled_quantize`.
enum class scaled_quantize_shape : std::uint8_t {
  ok,
  negative_extent,  ///< the input has a negative extent
  empty_group,      ///< a -1 group extent over an empty dimension (vLLM: ZeroDivisionError)
  not_divisible,    ///< the normalized group does not divide the input (vLLM asserts)
  q_extents,        ///< the codes are not the input's [M, N]
  scale_extents,    ///< the scales are not [M / gm, N / gn]
  bad_fp8_max,      ///< fp8_max is not finite and positive
};

/// The shape rule of `scaled_quantize`, shared by the host op (which names the failure) and the
/// CUDA launcher (which returns cudaErrorInvalidValue).
QTL_HOST_DEVICE constexpr scaled_quantize_shape scaled_quantize_shape_check(index_t rows, index_t cols,
                                                                            group_shape group, index_t q_rows,
                                                                            index_t q_cols, index_t s_rows,
                                                                            index_t s_cols, float fp8_max) {
  group_shape const g = normalize_group_shape(group, rows, cols);
  if (rows < 0 || cols < 0) {
    return scaled_quantize_shape::negative_extent;
  }
  if (g.row <= 0 || g.col <= 0) {
    return scaled_quantize_shape::empty_group;
  }
  if (rows % g.row != 0 || cols % g.col != 0) {
    return scaled_quantize_shape::not_divisible;
  }
  if (q_rows != rows || q_cols != cols) {
    return scaled_quantize_shape::q_extents;
  }
  if (s_rows != rows / g.row || s_cols != cols / g.col) {
    return scaled_quantize_shape::scale_extents;
  }
  if (!(fp8_max > 0.0f && fp8_max <= 3.40282347e38f)) {
    return scaled_quantize_shape::bad_fp8_max;
  }
  return scaled_quantize_shape::ok;
}

/// The formats `scaled_quantize` writes: e4m3fn, e5m2 and ROCm's e4m3fnuz.
template <class Q>
concept scaled_quant_storage = fp8_storage<Q> || std::is_same_v<Q, float8_e4m3fnuz_t>;

/// `get_fp8_min_max()`'s max on the platform whose FP8 type is `Q`: 224 for e4m3fnuz, else 448.
template <scaled_quant_storage Q>
inline constexpr float default_fp8_max = get_fp8_min_max(std::is_same_v<Q, float8_e4m3fnuz_t>).max;

/// The compute type of `scaled_quantize<Q, C, T>`: C, or the input's type T when C is void.
template <class C, class T>
using scaled_quantize_compute_t = std::conditional_t<std::is_void_v<C>, T, C>;

/// The bits of |C(x)|: the leaf of a group's amax. Unsigned order is the numeric order, and a NaN's
/// bits exceed Inf's, so the max of these bits is the amax or a NaN (torch's `aminmax` propagates).
template <fp8_quant_input C, class T>
QTL_HOST_DEVICE constexpr std::uint32_t scaled_quantize_amax_bits(T x) {
  return float_to_bits(detail::qnt::round_to<C>(to_float(x))) & 0x7fffffffu;
}

/// The group's scale in C, as a float: `C(C(1 / max(amax, C(1e-12))) * fp8_max)`; a NaN amax
/// (bits above Inf's) gives the quiet NaN.
template <fp8_quant_input C>
QTL_HOST_DEVICE constexpr float scaled_quantize_scale(std::uint32_t amax_bits, float fp8_max) {
  if (amax_bits > 0x7f800000u) {
    return bits_to_float(0x7fc00000u);
  }
  float const floor = detail::qnt::round_to<C>(static_cast<float>(1e-12));  // torch: the scalar in C
  float const amax = bits_to_float(amax_bits);
  float const a = amax < floor ? floor : amax;
  float const inv = detail::qnt::round_to<C>(detail::div_rn(1.0f, a));
  return detail::qnt::round_to<C>(detail::mul_rn(inv, fp8_max));
}

/// The code of one element: `Q(clamp(C(C(x) * scale), ±finfo(Q).max))`, a NaN as Q's positive NaN.
template <scaled_quant_storage Q, fp8_quant_input C, class T>
QTL_HOST_DEVICE constexpr Q scaled_quantize_element(T x, float scale) {
  constexpr float max = fp8_format<Q>::max;
  float const v = detail::qnt::round_to<C>(detail::mul_rn(detail::qnt::round_to<C>(to_float(x)), scale));
  if (v != v) {
    return from_float<Q>(bits_to_float(0x7fc00000u));
  }
  return from_float<Q>(v > max ? max : (v < -max ? -max : v));
}

/// The returned scale, `scale.float().reciprocal()`: float32 `1 / scale` (a NaN: the quiet NaN).
QTL_HOST_DEVICE constexpr float scaled_quantize_inverse(float scale) {
  float const r = detail::div_rn(1.0f, scale);
  return r != r ? bits_to_float(0x7fc00000u) : r;
}

/// How `group_broadcast` maps a dimension of `from` elements onto one of `to`: element i of `to`
/// reads element `i / factor` of `from`. `from == to`: 1; `from == 1`: everything reads element 0;
/// otherwise `to` must be a multiple of `from` (vLLM asserts it), each element repeated
/// `to / from` times. Returns 0 where `from` does not broadcast to `to`.
QTL_HOST_DEVICE constexpr index_t group_broadcast_factor(index_t from, index_t to) {
  if (from == to) {
    return 1;
  }
  if (from == 1) {
    return to > 1 ? to : 1;
  }
  if (from <= 0 || to < 0 || to % from != 0) {
    return 0;
  }
  return to == 0 ? 1 : to / from;
}

}  // namespace qtl
