#pragma once
/// \file
/// GPTQ's own round-to-nearest quantizer for asymmetric integer weights: `Quantizer.find_params`
/// and `quantize` of the GPTQ paper's code, kept unchanged by AutoGPTQ and GPTQModel (without its
/// MSE search), on one group of weights. `qtl quantize --format gptq --asym` writes this rule.
///
///   maxq       = 2^bits - 1
///   xmin, xmax = min(group min, 0), max(group max, 0)        (the range always holds 0)
///   xmin, xmax = -1, +1 when both are 0                       (an all-zero group)
///   s          = (xmax - xmin) / maxq                         (float32: GPTQ quantizes W.float())
///   z          = rne(-xmin / s)                               (torch.round; in [0, maxq])
///   q          = clamp(rne(w / s) + z, 0, maxq)               (NaN: 0)
///   w'         = s · (q - z)
///
/// Versus the reference rule of `qtl::quantize_weights` with zero points
/// (`detail::qnt::asymmetric_scale`: s = (max - min) / qmax, z = rne(|min / s|) clamped to qmax),
/// which keeps GPTQ's checkpoint layout but not its quantizer: a group of one sign far from 0 has
/// |min / s| beyond qmax there, so its zero point clamps to qmax and every code to qmax: the group
/// dequantizes to 0 (uniform in [0.4, 0.6], or a constant); here it is quantized on [0, max].
/// Each operation rounds once (float32), as torch does.

#include <cstdint>

#include <qtl/element/quantize.hpp>
#include <qtl/macros.hpp>

namespace qtl {

/// Scale `s` (float32) and zero point `zp` (an integer in [0, 2^bits - 1]) of a group whose largest
/// and smallest weights are `mx` and `mn`, by GPTQ's quantizer (see the file comment). A NaN
/// bound gives a NaN scale and zero point. @pre 1 <= bits <= 16
QTL_HOST_DEVICE constexpr group_params gptq_asym_group_params(float mx, float mn, int bits) {
  using namespace detail::qnt;
  float const maxq = static_cast<float>((1 << bits) - 1);
  float xmin = nan_min(mn, 0.0f);
  float xmax = nan_max(mx, 0.0f);
  if (xmin == 0.0f && xmax == 0.0f) {
    xmin = -1.0f;
    xmax = 1.0f;
  }
  float const s = div_rn(sub_rn(xmax, xmin), maxq);
  return {s, round_half_even(div_rn(-xmin, s))};
}

/// The code of weight `w` taken with scale `s` and zero point `zp`: clamp(rne(w / s) + zp, 0,
/// 2^bits - 1), 0 for NaN. `s` may be the group's scale as stored (rounded to F16 for a GPTQ
/// checkpoint), so that the codes are those closest under the scale the checkpoint holds.
QTL_HOST_DEVICE constexpr std::int32_t gptq_asym_code(float w, float s, float zp, int bits) {
  using namespace detail::qnt;
  float const maxq = static_cast<float>((1 << bits) - 1);
  float const q = clamp(add_rn(round_half_even(div_rn(w, s)), zp), 0.0f, maxq);
  return static_cast<std::int32_t>(select(isnan(q), 0.0f, q));  // a select: the loops vectorise
}

/// The dequantized value of code `q`: s · (q - zp), one rounding (float32).
QTL_HOST_DEVICE constexpr float gptq_asym_dequantize(std::int32_t q, float s, float zp) {
  return detail::qnt::mul_rn_unfused(detail::qnt::sub_rn(static_cast<float>(q), zp), s, 0);
}

// ------------------------------------------------------------------------------------------------
// A GPTQ checkpoint's groups (qtl/gptq_checkpoint.hpp): its two rules as element functions.

/// The rule a GPTQ checkpoint's groups are quantized by.
enum class gptq_rule : std::uint8_t {
  /// The reference's `quantize_weights` without zero points, uint4b8 (4 bits) or uint8b128 (8):
  /// s = max(|T(mx / qmax)|, |T(mn / qmin)|) in the weight's dtype T, code clamp(rne(T(w / s)),
  /// qmin, qmax) + bias under that s, zero point the bias.
  symmetric,
  /// GPTQ's own quantizer (above), the codes taken under the scale as stored (F16).
  asymmetric,
};

/// `quant_range_of(uint4b8)` for 4 bits, `quant_range_of(uint8b128)` for 8: [-2^(b-1), 2^(b-1) - 1],
/// bias 2^(b-1) (written out: device code may not read the host's scalar_type constants).
QTL_HOST_DEVICE constexpr quant_range gptq_symmetric_range(int bits) {
  int const half = 1 << (bits - 1);
  return {-static_cast<float>(half), static_cast<float>(half - 1), half};
}
static_assert(gptq_symmetric_range(4).qmin == quant_range_of(uint4b8).qmin &&
              gptq_symmetric_range(4).qmax == quant_range_of(uint4b8).qmax &&
              gptq_symmetric_range(4).bias == quant_range_of(uint4b8).bias &&
              gptq_symmetric_range(8).qmin == quant_range_of(uint8b128).qmin &&
              gptq_symmetric_range(8).qmax == quant_range_of(uint8b128).qmax &&
              gptq_symmetric_range(8).bias == quant_range_of(uint8b128).bias);

/// The scale of a group (before the checkpoint rounds it to F16) and its stored zero point, by
/// `rule`, for a group of T weights whose max and min are `mx`, `mn`. @pre bits is 4 or 8
template <class T>
QTL_HOST_DEVICE constexpr group_params gptq_group_params(gptq_rule rule, float mx, float mn, int bits) {
  if (rule == gptq_rule::asymmetric) {
    return gptq_asym_group_params(mx, mn, bits);
  }
  quant_range const r = gptq_symmetric_range(bits);
  return {detail::qnt::symmetric_scale<T>(mx, mn, r).s, static_cast<float>(r.bias)};
}

/// The stored code (0 .. 2^bits - 1) of T weight `w` in a group of `p` (gptq_group_params) whose
/// scale as stored is `stored_s`, by `rule`. @pre bits is 4 or 8
template <class T>
QTL_HOST_DEVICE constexpr std::int32_t gptq_code(gptq_rule rule, float w, group_params p, float stored_s, int bits) {
  if (rule == gptq_rule::asymmetric) {
    return gptq_asym_code(w, stored_s, p.zp, bits);
  }
  quant_range const r = gptq_symmetric_range(bits);
  return static_cast<std::int32_t>(detail::qnt::quantize_code<T>(w, {p.s, 0.0f}, r)) + r.bias;
}

}  // namespace qtl
