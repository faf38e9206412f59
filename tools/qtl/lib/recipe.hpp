#pragma once
// A `qtl quantize --recipe` file (internal to the commands library): ordered groups of targets,
// each with one format of `quantize_formats` and its options, and an ignore list; written as a
// compressed-tensors checkpoint (one config group per recipe group, top-level format
// "mixed-precision" when the groups' formats differ), or with "form": "modelopt" as a ModelOpt
// MIXED_PRECISION one.
//
//   {"groups": [{"targets": ["re:.*self_attn\\..*_proj$"], "format": "fp8", "fp8_scheme": "ct-block"},
//               {"targets": ["re:.*mlp\\.experts\\..*"], "format": "nvfp4", "name": "experts"},
//               {"targets": ["Linear"], "format": "w4a16", "group_size": 128, "symmetric": false}],
//    "ignore": ["lm_head", "re:.*mlp\\.gate$"]}
//
// "form": "compressed-tensors" (the default) or "modelopt". The ModelOpt form names each quantized
// module in `quantized_layers` (config.json's quantization_config with quant_method modelopt, and
// hf_quant_config.json) with its algorithm, as vLLM's ModelOptMixedPrecisionConfig reads it; the
// one algorithm it takes is W4A16_NVFP4 (format nvfp4: NVFP4 weights, group 16, activations
// unquantized). ModelOpt's FP8 and NVFP4 (W4A4) carry a static activation scale (`input_scale`)
// that only calibration gives, which qtl quantize does not do, and vLLM's mixed loader has no
// method for ModelOpt's weight-only FP8 forms: a group of another format is refused.
//
// Keys of a group: targets (required: module names, `re:` regexes that Python's re.match
// applies, or the class name Linear: every linear layer), format (required), name (the config
// group's name, default group_<i>), group_size (w4a16, w8a16: -1 or > 0, default 128), symmetric
// (w4a16, w8a16: default true), fp8_scheme (fp8: tensor, channel (default) or ct-block). Every
// format the tool writes as compressed-tensors is a recipe format (gptq and the Hugging Face fp8
// block form are not compressed-tensors). Unknown keys are refused (a misspelt option would
// otherwise be dropped silently).
//
// Which group quantizes module M: as compressed-tensors' apply_quantization_config decides
// (0.20.0, quantization/lifecycle/apply.py and utils/match.py): M matched by an `ignore` entry
// is not quantized; else of the targets (a target named in two groups belongs to the later one,
// as its target -> scheme dict keeps it), sorted by ("re:" in t, t), the first that matches M's
// name (exact or re.match), else the first class target: that target's group. vLLM's
// find_matched_target takes the first target in the config's order that matches the name instead;
// where the two would pick different groups the recipe is refused, naming the module (the
// checkpoint would load differently in transformers and in vLLM). vLLM asks for a fused layer by
// its own name (qkv_proj): a target that names q_proj alone does not reach it there.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <qtl/match/regex.hpp>

#include "checkpoint.hpp"

namespace qtl::tool {

/// One target of a recipe group or ignore list, compiled.
struct recipe_target {
  std::string text;                ///< as written
  std::shared_ptr<qtl::regex> re;  ///< `re:` targets
  bool linear_class = false;       ///< "Linear"
};

/// One group of a recipe.
struct recipe_group {
  std::string name;  ///< the config group's name
  std::vector<recipe_target> targets;
  quantize_options options;  ///< format, group_size, sym/asym, fp8_scheme (nothing else set)
};

/// A recipe read from its file.
struct recipe {
  std::filesystem::path path;
  bool modelopt = false;  ///< "form": "modelopt" (ModelOpt MIXED_PRECISION), else compressed-tensors
  std::vector<recipe_group> groups;
  std::vector<recipe_target> ignore;
  /// The group index each distinct target belongs to (the later group's when two name it), in
  /// compressed-tensors' order: sorted by ("re:" in t, t).
  std::vector<std::pair<std::string, std::size_t>> ct_order;
  /// The same targets in vLLM's order: first appearance across the groups.
  std::vector<std::pair<std::string, std::size_t>> vllm_order;
};

/// Reads and checks a recipe. @throws qtl::config_error naming the file and the key (malformed
/// JSON, a missing or mistyped key, an unknown key or format, an invalid regex, a class target
/// other than Linear)
recipe read_recipe(std::filesystem::path const& path);

/// What a recipe does with module `name` (a Linear when `linear`; `engine_name` the fused layer
/// vLLM builds of it, else `name`): the group index, or nothing when it is ignored or matched by
/// no group (`why` says which). Where vLLM would pick another group than compressed-tensors,
/// `conflict` is set to a message naming the module and both groups (the caller refuses the run).
std::optional<std::size_t> recipe_group_of(recipe const& r, std::string const& name, std::string const& engine_name,
                                           bool linear, std::string& why, std::string& conflict);

}  // namespace qtl::tool
