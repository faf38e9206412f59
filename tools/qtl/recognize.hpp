#pragma once
// Recognises the quantization scheme of a checkpoint from its tensor names, dtypes and shapes
// (docs/spec/checkpoint_formats.md). A *module* is a tensor name up to its last '.' (or, for
// gpt-oss MXFP4, up to "_blocks"/"_scales"); each module is classified by the tensors it holds:
//
//   GPTQ   M.qweight I32 [K*b/32, N], M.scales [G, N], M.qzeros I32 [G, N*b/32], M.g_idx I32 [K]
//   AWQ    M.qweight I32 [K, N*b/32], M.scales [G, N], M.qzeros I32 [G, N*b/32] (no g_idx)
//          (told apart from GPTQ by qweight's columns: N for GPTQ, N*b/32 for AWQ)
//   INT    M.weight_packed I32 [N, K*b/32] + M.weight_scale [N, G] + M.weight_shape I64 [2]
//          (+ M.weight_zero_point I32 [N*b/32, G] when asymmetric): compressed-tensors pack-quantized
//   FP8    M.weight F8_E4M3|F8_E5M2 [N, K] with M.weight_scale_inv (block, HF "fp8") or
//          M.weight_scale: [] / [1] per tensor, [N, 1] per channel, 2-D block; M.input_scale: static
//   NVFP4  M.weight U8 [N, K/2] + M.weight_scale F8_E4M3 [N, K/16] + M.weight_scale_2 (ModelOpt), or
//          M.weight_packed U8 + M.weight_scale F8_E4M3 + M.weight_global_scale (compressed-tensors)
//   MXFP4  M_blocks U8 [.., K/32, 16] + M_scales U8 [.., K/32] (gpt-oss), or
//          M.weight(_packed) U8 [N, K/2] + M.weight_scale U8|F8_E8M0 [N, K/32]

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <qtl/io/safetensors.hpp>

namespace qtl::tool {

/// One recognised quantized module.
struct quantized_module {
  std::string module;   // e.g. "model.layers.0.self_attn.q_proj"
  std::string scheme;   // GPTQ, AWQ, INT (compressed-tensors pack-quantized), FP8, NVFP4, MXFP4
  std::string variant;  // e.g. "4-bit, group 128, act-order" or "per-channel weight scale"
  std::vector<std::string> tensors;  // the names it is made of
};

/// What the checkpoint's config says about FP8 weight scales, where shapes are ambiguous: a single
/// scale is per tensor, or the one block of a layer no larger than a block ([1, 1] for an
/// FP8_BLOCK layer of at most 128x128), or the channel of a one-row layer.
enum class fp8_scale_hint { none, tensor, channel, block };

/// The hint of a `quantization_config` object (compressed-tensors: the weights strategy shared by
/// every config group; HF "fp8": block when weight_block_size is set), `none` when it says nothing.
fp8_scale_hint fp8_scale_hint_of(qtl::io::json const& quantization_config);

/// Every quantized module among `tensors`, sorted by module name; `hint` settles the FP8 scale
/// shapes that fit more than one scheme.
std::vector<quantized_module> recognize(std::vector<qtl::io::tensor_info const*> const& tensors,
                                        fp8_scale_hint hint = fp8_scale_hint::none);

}  // namespace qtl::tool
