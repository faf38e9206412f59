#pragma once
/// \file
/// `qtl::quant_config`: the fields of a checkpoint's quantization config that decide, per layer,
/// whether and how a consumer quantizes it. It is plain data (no JSON library):
/// `qtl/io/quant_config.hpp` fills it from `config.json`'s `quantization_config`, a
/// `quantize_config.json` or an `hf_quant_config.json`; code may also build one by hand.
///
/// Order matters and is kept: `dynamic` rules and `extra_config` keys are tried in the config's
/// key order (first match wins).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <qtl/rules/dynamic.hpp>

namespace qtl {

/// The quantization family a config declares (`quant_method`, or ModelOpt's `producer`).
enum class quant_family : std::uint8_t {
  gptq,                ///< `gptq`, `gptq_marlin`, `gptqmodel` (`dynamic`, `bits`, `sym`, ...)
  awq,                 ///< `awq`, `awq_marlin`
  fp8,                 ///< `fp8` (`ignored_layers` / `modules_to_not_convert`)
  mxfp4,               ///< `mxfp4` (`modules_to_not_convert`)
  modelopt,            ///< `modelopt` / `modelopt_fp4` (`ignore` or `exclude_modules`)
  compressed_tensors,  ///< `compressed-tensors` (`ignore`, `config_groups`)
  auto_round,          ///< `auto-round` / `intel/auto-round` (`extra_config`)
};

/// The canonical name of a family (the `quant_method` QTL writes back).
constexpr std::string_view family_name(quant_family f) {
  switch (f) {
    case quant_family::gptq:
      return "gptq";
    case quant_family::awq:
      return "awq";
    case quant_family::fp8:
      return "fp8";
    case quant_family::mxfp4:
      return "mxfp4";
    case quant_family::modelopt:
      return "modelopt";
    case quant_family::compressed_tensors:
      return "compressed-tensors";
    case quant_family::auto_round:
      return "auto-round";
  }
  return "?";
}

/// An AutoRound `extra_config` entry: a layer name or a regex key, and the fields it sets.
struct extra_config_entry {
  std::string key;
  py_value bits;
  py_value group_size;
  py_value sym;
  std::string json;  ///< the entry's value as compact JSON (what the golden files compare)
};

/// One compressed-tensors `config_groups` entry, in file order: its targets (`re:` regexes,
/// module names, class names such as `Linear`), its own `format` (mixed-precision checkpoints:
/// `float-quantized`, `pack-quantized`, `nvfp4-pack-quantized`, `mxfp4-pack-quantized`,
/// `mxfp8-quantized`, ...; empty: the config's `format` applies) and its weights' parameters.
struct ct_config_group {
  std::string name;  ///< the group's key (`group_0`)
  std::string format;
  std::vector<std::string> targets;
  bool has_weights = false;  ///< a `weights` object is present
  std::optional<std::int64_t> num_bits;
  std::optional<std::int64_t> group_size;
  std::optional<bool> symmetric;
  std::string type;      ///< `int` or `float` (empty: not given)
  std::string strategy;  ///< `tensor`, `channel`, `group`, `tensor_group`, `block` (empty: not given)
  bool input_activations = false;  ///< an `input_activations` object is present (not null)
};

/// One ModelOpt `quantized_layers` entry (`MIXED_PRECISION`), in file order: the module and its
/// algorithm as written (`FP8`, `FP8_PB_WO`, `NVFP4`, `W4A16_NVFP4`, `MXFP8`, ...; empty: the
/// entry has none, which the readers raise KeyError for when they reach it).
struct modelopt_layer {
  std::string module;
  std::string quant_algo;
  std::optional<std::int64_t> group_size;
};

/// A fused module of the model and its shards (`packed_modules_mapping`).
using packed_mapping = std::vector<std::pair<std::string, std::vector<std::string>>>;

/// Everything the rules read from a quantization config.
struct quant_config {
  quant_family family = quant_family::gptq;
  std::string quant_method;  ///< as written in the file

  // Base weight parameters (GPTQ, AWQ, AutoRound, compressed-tensors' first config group).
  std::optional<std::int64_t> bits;
  std::optional<std::int64_t> group_size;
  std::optional<bool> desc_act;
  std::optional<bool> sym;
  std::optional<bool> zero_point;          ///< AWQ
  bool lm_head_quantized = false;          ///< GPTQ `lm_head`
  std::string checkpoint_format;           ///< GPTQ `checkpoint_format` (`gptq`, `gptq_v2`, ...)
  std::optional<std::string> weight_type;  ///< compressed-tensors weights `type` (`int`/`float`)
  std::string quant_algo;                  ///< ModelOpt `quant_algo` (`NVFP4`, `FP8`, `MIXED_PRECISION`, ...)
  std::string moe_quant_algo;              ///< ModelOpt `moe_quant_algo` (read, reported; no engine decides by it)
  std::string format;                      ///< compressed-tensors' top-level `format` (`mixed-precision`, ...)

  /// compressed-tensors `config_groups`, in file order (`qtl/rules/mixed.hpp` decides by them
  /// when the config mixes schemes).
  std::vector<ct_config_group> config_groups;
  /// ModelOpt `quantized_layers`, in file order.
  std::vector<modelopt_layer> quantized_layers;

  /// GPTQ `dynamic`, in the file's key order.
  std::vector<dynamic_rule> dynamic;
  /// vLLM GPTQ `modules_in_block_to_quantize` (flattened); empty when absent.
  std::vector<std::string> modules_in_block_to_quantize;

  /// The skip list and the field it came from: `ignored_layers` / `modules_to_not_convert`
  /// (FP8, MXFP4, AWQ, transformers), `ignore` (compressed-tensors, ModelOpt `config.json`),
  /// `exclude_modules` (ModelOpt `hf_quant_config.json`).
  std::vector<std::string> skip_list;
  std::string skip_list_field;

  /// AutoRound.
  std::vector<extra_config_entry> extra_config;
  std::vector<std::string> block_name_to_quantize;

  /// The model's `packed_modules_mapping` (the golden files carry it beside the config; an
  /// engine takes it from its model class).
  packed_mapping packed_modules_mapping;
};

}  // namespace qtl
