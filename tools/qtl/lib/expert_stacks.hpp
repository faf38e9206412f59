#pragma once
// Fused 3-D MoE expert stacks cut into per-expert 2-D tensors (internal to the commands library).
//
// transformers stores some families' experts as one 3-D tensor per projection; the engines load
// quantized MoE checkpoints with per-expert names (vLLM/sglang FusedMoE.make_expert_params_mapping:
// `<prefix>.experts.<e>.{gate_proj,up_proj,down_proj}.<param>`), and llm-compressor writes those
// names (model_free_ptq's split_fused_moe_experts, its linearized expert modules). So a stack is
// cut into one 2-D weight [N, K] (out, in) per expert and projection, each quantized as a 2-D
// weight would be. The layouts (docs/spec/checkpoint_formats.md §0.6), E experts, hidden size H,
// expert intermediate size I, from the input's config.json:
//
//   family                       gate_up_proj   gate, up of expert e              down_proj  down of e
//   llama4 (Llama4TextExperts)   [E, H, 2I]     [e, :, :I].T, [e, :, I:].T        [E, I, H]  [e].T
//   gpt_oss (GptOssExperts)      [E, H, 2I]     [e, :, 0::2].T, [e, :, 1::2].T    [E, I, H]  [e].T
//   transformers v5 fused        [E, 2I, H]     [e, :I], [e, I:]                  [E, H, I]  [e]
//     (mixtral, qwen2_moe, qwen3_moe, qwen3_5_moe, qwen3_next, qwen3_vl_moe, olmoe,
//      deepseek_v3, deepseek_v4: `@use_experts_implementation` defaults)
//
// Biases (gpt-oss `gate_up_proj_bias` [E, 2I], `down_proj_bias` [E, H]) are cut by the same rule
// into `experts.<e>.<proj>.bias` and copied. Names: the stack's name without a trailing
// `.weight`, ending in `experts.gate_up_proj` (or `_bias`) or `experts.down_proj`.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <qtl/io/safetensors.hpp>

namespace qtl::tool {

/// One tensor cut out of a stack: element (n, k) of the [N, K] part (a bias: [N], K = 1) is
/// element `first + n * row_step + k * col_step` of the stack; it reads only the stack's elements
/// [block_begin, block_end) (its expert's block).
struct stack_part {
  std::string name;                 ///< `<prefix>experts.<e>.<proj>.weight` or `.bias`
  std::vector<std::int64_t> shape;  ///< [N, K], or [N] for a bias
  std::uint64_t first = 0;
  std::int64_t row_step = 0;
  std::int64_t col_step = 0;
  std::uint64_t block_begin = 0;
  std::uint64_t block_end = 0;
  /// The part is the stack's elements [first, first + N*K) in order (no gathering needed).
  bool contiguous() const;
};

/// What becomes of one tensor that looks like an expert stack.
struct stack_split {
  std::vector<stack_part> parts;  ///< the per-expert tensors, expert by expert; empty when refused
  std::string why_not;            ///< why it is not cut (its layout is not understood); empty when cut
};

/// Whether `t` is a stack candidate: a 3-D float tensor under an `experts` module, or a 2-D float
/// `experts.gate_up_proj_bias` / `experts.down_proj_bias`.
bool is_expert_stack(qtl::io::tensor_info const& t);

/// The per-expert tensors of the stack `t` (is_expert_stack) by the layout of the model that
/// config.json `model_config` describes, or why it is not understood (the family unknown, the
/// config without the expert dimensions, a shape other than the family's, a projection other
/// than gate_up_proj/down_proj). A bias stack is cut by the same rule as its weight stack; the
/// caller cuts it only when it cut that weight stack (`bias_stack_weight`).
stack_split split_expert_stack(qtl::io::tensor_info const& t, nlohmann::ordered_json const& model_config);

/// The name of the weight stack a bias stack belongs to (`...gate_up_proj_bias` ->
/// `...gate_up_proj`), or "" when `t` is not a bias stack.
std::string bias_stack_weight(std::string const& name);

/// `part`'s elements gathered from the stack's bytes `stack` (elements of `elem` bytes) into `out`
/// ([N, K] row-major), tile by tile so that neither side is read with a long stride for long.
void gather_part(stack_part const& part, std::span<std::byte const> stack, std::size_t elem, std::byte* out);

}  // namespace qtl::tool
