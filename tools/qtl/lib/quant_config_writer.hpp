#pragma once
// The `quantization_config` of `qtl quantize`'s output config.json (internal to the commands
// library): the consumer's keys for the format written, on top of the --config's object (its
// skip lists and rules kept, so that the engines decide as the run did).
//
//   gptq                 quant_method gptq, bits, group_size, desc_act false, sym, lm_head,
//                        checkpoint_format (gptq | gptq_v2); also written as quantize_config.json
//   fp8, HF config       quant_method fp8, fmt e4m3, activation_scheme dynamic,
//                        weight_block_size [128, 128] (block), modules_to_not_convert
//   fp8, compressed-tensors  format float-quantized, quantization_status compressed, ignore,
//                        config_groups.group_0 {targets [Linear], weights, input_activations}

#include <string>

#include <qtl/io/quant_config.hpp>

#include "quantize_plan.hpp"

namespace qtl::tool {

/// What a run wrote, as far as the config says it.
struct written_format {
  bool gptq = false;
  fp8_scheme scheme = fp8_scheme::channel;
  std::string checkpoint_format;  ///< GPTQ: "gptq" or "gptq_v2"
};

/// `base` (the --config's quantization object, or {}) with the written format's keys set.
nlohmann::ordered_json written_quantization_config(nlohmann::ordered_json const& base, quant_config const& cfg,
                                                   written_format const& f);

}  // namespace qtl::tool
