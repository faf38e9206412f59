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
//   w4a16, w8a16, nvfp4, mxfp4, mxfp8: compressed-tensors (docs/spec/interop.md §3.2): quant_method,
//                        format (pack-quantized, nvfp4-pack-quantized, mxfp4-pack-quantized,
//                        mxfp8-quantized),
//                        quantization_status compressed, kv_cache_scheme null, ignore = the
//                        linear layers the run kept (so every consumer skips exactly those),
//                        config_groups.group_0 {targets [Linear], weights, input_activations
//                        null, output_activations null, format}; only keys QuantizationScheme
//                        and QuantizationArgs accept (both extra="forbid")
//   --recipe             compressed-tensors, one config group per recipe group with its own format,
//                        top-level format "mixed-precision" when the groups' formats differ
//   --recipe, form modelopt  ModelOpt MIXED_PRECISION: quant_method modelopt, quant_algo
//                        MIXED_PRECISION, quantized_layers {module: {quant_algo W4A16_NVFP4,
//                        group_size 16}} for every module written, nothing else (a module not in
//                        the map loads unquantized); also as hf_quant_config.json

#include <cstdint>
#include <string>
#include <vector>

#include <qtl/io/quant_config.hpp>

#include "quantize_plan.hpp"

namespace qtl::tool {

/// What a run wrote, as far as the config says it.
struct written_format {
  enum class kind { gptq, fp8, pack_quantized, nvfp4, mxfp4, mxfp8 };
  kind what = kind::fp8;
  fp8_scheme scheme = fp8_scheme::channel;  ///< fp8
  std::string checkpoint_format;            ///< gptq: "gptq" or "gptq_v2"
  int bits = 4;                             ///< pack_quantized
  std::int64_t group_size = 128;            ///< pack_quantized: -1 for channelwise
  bool sym = true;                          ///< pack_quantized
  std::vector<std::string> ignore;          ///< pack_quantized, nvfp4, mxfp4: the linear layers kept
  std::vector<std::string> routers;         ///< the MoE routers kept (compressed-tensors fp8 lists them too)
};

/// The `weights` QuantizationArgs of a compressed-tensors format written (pack-quantized, NVFP4,
/// MXFP4, FP8 float-quantized).
nlohmann::ordered_json compressed_tensors_weights(written_format const& f);

/// One config group of a recipe's config: its name, targets (as the recipe gives them) and format.
struct written_group {
  std::string name;
  std::vector<std::string> targets;
  written_format format;
};

/// The compressed-tensors config of a `--recipe` run: one config group per recipe group, each
/// with its own `format`; the top-level `format` the groups' one format, else "mixed-precision";
/// `ignore` as given (the recipe's entries and every module the run kept that a group matches).
nlohmann::ordered_json mixed_quantization_config(std::vector<written_group> const& groups,
                                                 std::vector<std::string> const& ignore);

/// The ModelOpt MIXED_PRECISION config of a `--recipe` run in the modelopt form, as config.json's
/// `quantization_config` (`hf_quant_config` false) or as hf_quant_config.json (true): every module
/// of `w4a16_nvfp4` in `quantized_layers` as W4A16_NVFP4, group 16. The exclude list stays empty:
/// vLLM excludes a layer whose name merely contains an entry (`mlp.gate` in `mlp.gate_up_proj`),
/// and a module the map does not name loads unquantized anyway.
nlohmann::ordered_json modelopt_mixed_config(std::vector<std::string> const& w4a16_nvfp4, bool hf_quant_config);

/// `base` (the --config's quantization object, or {}) with the written format's keys set.
nlohmann::ordered_json written_quantization_config(nlohmann::ordered_json const& base, quant_config const& cfg,
                                                   written_format const& f);

}  // namespace qtl::tool
