#pragma once
/// \file
/// The vocabulary of FP8 checkpoint weights (`qtl/fp8_checkpoint.hpp` on the host,
/// `qtl/cuda/fp8_checkpoint.cuh` on the device): the scale schemes, the block scale rules and the
/// block scale as an element function.

#include <cstdint>
#include <optional>

#include <qtl/exact.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// How an FP8 checkpoint's weight scales are laid out.
enum class fp8_checkpoint_scheme : std::uint8_t { tensor, channel, block };

/// Whose rule turns a block's amax into its scale (`fp8_block_scale`).
enum class fp8_block_rule : std::uint8_t { hf, compressed_tensors };

/// What `fp8_checkpoint_quantize` computes, and how it treats non-finite weights.
struct fp8_checkpoint_options {
  fp8_checkpoint_scheme scheme = fp8_checkpoint_scheme::block;
  fp8_block_rule rule = fp8_block_rule::hf;  ///< block scheme only
  index_t block_n = 128;                     ///< block rows (block scheme)
  index_t block_k = 128;                     ///< block columns (block scheme)
  std::optional<float> tensor_amax;          ///< tensor scheme: the amax to scale by (a fused group's)
  bool allow_nonfinite = false;              ///< quantize NaN/Inf weights instead of refusing them
  index_t first_row = 0;                     ///< the row of W that w's row 0 is (only names rows in errors)
};

/// The scale of a block whose largest |x| is `amax` by `rule`: hf max(amax, 1e-12) / 448;
/// compressed_tensors amax / 448, and 2^-23 (float32's epsilon, its `calculate_qparams` guard) for
/// an all-zero block.
QTL_HOST_DEVICE constexpr float fp8_block_scale(fp8_block_rule rule, float amax) {
  if (rule == fp8_block_rule::hf) {
    return detail::div_rn(amax > 1e-12f ? amax : 1e-12f, 448.0f);
  }
  float const s = detail::div_rn(amax, 448.0f);
  return s == 0.0f ? 0x1p-23f : s;
}

}  // namespace qtl
