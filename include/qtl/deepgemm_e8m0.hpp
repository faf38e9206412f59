#pragma once
/// \file
/// FP8-block weights with E8M0 scales (DeepSeek-V4's `F8_E8M0` block scales) -> DeepGEMM's packed
/// scale layout without requantization: vLLM `deepgemm_post_process_fp8_weight_block(wq, ws,
/// (128, 128), use_e8m0, is_bmm, bmm_batch_size)` on scales of dtype float8_e8m0fnu, bit for bit
/// (golden cases 2204.. recorded from vLLM's function; docs/spec/deepseek_v4.md §4). vLLM upcasts
/// the codes (`_upcast_e8m0_to_fp32`: code b -> the float b << 23, no requant) and packs them as
/// `qtl::convert::deepgemm_pack_ue8m0` packs float powers of two; the packed byte is the code.
///
///   plain  weight [G, N, K] (G = 1: [N, K]), scale [G, ceil(N/128), ceil(K/128)]
///          -> packed [G, P, A] of dg_packed_layout{G, N, ceil(K/128)}
///   bmm    one weight [N, K] (`wo_a`) viewed as B matrices [N/B, K], scale [N/128, K/128] viewed
///          as [B, N/(128 B), K/128] -> packed [B, P, A] of dg_packed_layout{B, N/B, K/128}
///
/// P = ceil(kb/4), A = rows rounded up to 4 (`dg_packed_layout`). The weight's bytes are not
/// touched (the engine only views them as [B, N/B, K]).

#include <cstdint>
#include <span>
#include <string>

#include <qtl/convert.hpp>
#include <qtl/element/convert.hpp>
#include <qtl/error.hpp>

namespace qtl::convert {

/// The packed layout vLLM gives the scales of `groups` weights [n, k] (`bmm_batch` 0), or of one
/// weight [n, k] viewed as `bmm_batch` matrices (groups must be 1). vLLM views the bmm weight as
/// [B, n/B, k] and its scales as [B, (n/B)/128, k/128], which needs n % B == 0, (n/B) % 128 == 0
/// and k % 128 == 0 (its `view` raises otherwise).
/// @throws shape_error for a non-positive extent or a shape the bmm views cannot take
inline dg_packed_layout deepgemm_post_process_layout(std::int64_t groups, std::int64_t n, std::int64_t k,
                                                     std::int64_t bmm_batch = 0) {
  char const* op = "deepgemm_post_process_e8m0";
  if (groups < 0 || n < 1 || k < 1 || bmm_batch < 0) {
    detail::fail_shape(op, "G = " + std::to_string(groups) + ", N = " + std::to_string(n) +
                               ", K = " + std::to_string(k) + " and the bmm batch " + std::to_string(bmm_batch) +
                               ": the extents must be positive");
  }
  if (bmm_batch == 0) {
    return deepgemm_layout(groups, n, (k + 127) / 128);
  }
  if (groups != 1) {
    detail::fail_shape(op, "the bmm view takes one 2-D weight, not " + std::to_string(groups) + " matrices");
  }
  if (n % bmm_batch != 0 || (n / bmm_batch) % 128 != 0 || k % 128 != 0) {
    detail::fail_shape(op, "the weight [" + std::to_string(n) + ", " + std::to_string(k) + "] cannot be viewed as " +
                               std::to_string(bmm_batch) + " matrices of 128x128 blocks (N/B and K must be " +
                               "multiples of 128)");
  }
  return deepgemm_layout(bmm_batch, n / bmm_batch, k / 128);
}

/// Packs the E8M0 scale codes `scale` [G, ceil(N/128), kb] into `out` [G, P, A] (`l` from
/// `deepgemm_post_process_layout`); pad rows 0.
/// @throws shape_error (sizes), value_error naming the first code 0 or 255 (they upcast to 0.0 and
///         Inf, which DeepGEMM's kernels trap on)
inline void deepgemm_post_process_e8m0(std::span<std::uint8_t const> scale, dg_packed_layout const& l,
                                       std::span<std::int32_t> out) {
  detail::deepgemm_pack("deepgemm_post_process_e8m0", scale, l, out);
}

}  // namespace qtl::convert
