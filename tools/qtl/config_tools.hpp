#pragma once
// Quantization configs for `qtl explain`, `qtl lint` and `qtl quantize`: loading a config (a
// `config.json` with `quantization_config`, a bare quantization config, an `hf_quant_config.json`),
// naming consumers ("loaders", "sglang", "vllm", "all" or a dialect's own name), which modules of
// a checkpoint are linear layers (the only ones a config decides), and the engines' fused names of
// unfused Hugging Face modules.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <qtl/io/config_values.hpp>
#include <qtl/io/quant_config.hpp>
#include <qtl/io/safetensors.hpp>
#include <qtl/rules/compiled_config.hpp>
#include <qtl/rules/consumers.hpp>

namespace qtl::tool {

/// Config files are read whole up to this size (a 100k-rule `dynamic` is a few MB).
inline constexpr std::uint64_t max_config_bytes = std::uint64_t{256} << 20;

/// The text of the regular file `path` (`what` names it in messages: "--config").
/// @throws qtl::config_error "WHAT: PATH: is a directory, not a regular file", "...: cannot open: ..."
std::string read_text_file(std::filesystem::path const& path, char const* what);

/// The JSON document in `path`, in file order. @throws qtl::config_error naming the file.
nlohmann::ordered_json read_json_document(std::filesystem::path const& path, char const* what);

/// A config file as explain, lint and quantize take it, read and parsed once.
struct config_file {
  std::filesystem::path path;
  quant_config config;                  ///< the parsed rules (qtl/io/quant_config.hpp)
  nlohmann::ordered_json document;      ///< the whole document, in file order
  nlohmann::ordered_json quant_object;  ///< config.json's `quantization_config`, else the document
};

/// The packed mapping of a config that gives none (or an empty one): the fused layers of
/// Llama-style models, `qkv_proj` = q/k/v_proj and `gate_up_proj` = gate/up_proj. vLLM hands its
/// loaders the model's mapping (these for Llama, Qwen, Mistral, ...), and sglang's
/// `is_layer_skipped` falls back to the same two; explain, lint and quantize all take this one.
packed_mapping default_packed_modules_mapping();

/// The config of `path`; `mapping_path` (may be empty) replaces its `packed_modules_mapping`
/// (a JSON object {fused: [shard, ...]}, or a document with a `packed_modules_mapping` key); an
/// empty mapping becomes `default_packed_modules_mapping()`, except in a document that describes
/// its model (a `module_names` list, as the golden configs have), which is taken as it is.
/// @throws qtl::config_error naming the file and the field, or saying that a model config
/// (`model_type`, `architectures`) has no `quantization_config`.
config_file read_config_file(std::filesystem::path const& path, std::filesystem::path const& mapping_path = {});

/// The quantization config explain and lint read: `config` when given, else that of the
/// checkpoint `checkpoint` (a folder, or a file or index in one): its config.json when that has a
/// `quantization_config`, else its hf_quant_config.json (ModelOpt).
/// @throws usage_error when neither is given or the checkpoint's folder has no such config.
std::filesystem::path quant_config_path(std::filesystem::path const& config, std::filesystem::path const& checkpoint);

using qtl::io::validate_config_values;
using qtl::io::value_rules;

/// The consumers `name` stands for, given the config's family: `loaders` the dialects that load
/// the config's quant_method (`loading_consumers`), `sglang` and `vllm` the engine's loader for
/// that family (GPTQ: sglang_gptq; FP8: sglang_fp8; ...), `all` every dialect, anything else a
/// dialect's own name (`vllm_compressed_tensors`).
/// @throws usage_error for an unknown name.
std::vector<consumer> resolve_consumers(std::string const& name, quant_config const& cfg);

/// The engine's consumer for the config's family (`sglang == true`: sglang's, else vLLM's).
consumer engine_consumer(quant_config const& cfg, bool sglang);

/// The dialects that load a config of this family: sglang's and vLLM's loaders, and the
/// libraries that read the same field (FP8: transformers v4 and v5; compressed-tensors: the
/// library; ModelOpt: fnmatch; MXFP4: transformers v5 and the subtree glob; AWQ: sglang's
/// `is_layer_skipped` too, which its AWQ-Marlin loader calls).
std::vector<consumer> loading_consumers(quant_config const& cfg);

/// Whether the consumer decides the fused layers an engine builds (sglang's and vLLM's loaders:
/// they see `qkv_proj`, never `q_proj`), rather than the checkpoint's own modules.
bool decides_fused_layers(consumer c);

/// How the engines build a module of a checkpoint, which says whether a config decides it.
enum class module_role {
  linear,      ///< a linear layer (lm_head included): the config decides it
  moe_router,  ///< an MoE router: the engines build it as a linear without a quant_config
  not_linear,  ///< an embedding, a norm, MoE experts' stacked weights, ...: never quantized
};

/// Why a module of `role` is not decided: "not a linear layer", "MoE router (the engines build
/// it unquantized)"; empty for `linear`.
std::string kept_reason(module_role role);

/// The role the name alone gives a module: linear for a layer the name says is linear or lm_head
/// (`infer_layer_kind`: not an embedding, not `experts`), moe_router for such a layer whose last
/// component is `gate` (Mixtral, Qwen-MoE, DeepSeek: [num_experts, hidden]), `shared_expert_gate`
/// (Qwen2-MoE) or `router` (gpt-oss `mlp.router`, Llama 4 `feed_forward.router`), not_linear
/// otherwise.
module_role name_role(std::string_view module);

/// The role of the module `module` whose unquantized weight is `weight` (`module.weight`):
/// `name_role` for a non-empty 2-D float (F16, BF16, F32) weight, not_linear for anything else
/// (1-D norms, other dtypes, ...).
module_role weight_role(std::string_view module, qtl::io::tensor_info const& weight);

/// A module of a checkpoint and its role.
struct checkpoint_module {
  std::string name;
  module_role role = module_role::linear;
};

/// The modules of a checkpoint (a file, folder or index), unfused, in checkpoint order, each
/// once: every module with a `.weight` tensor (role: `weight_role`), and every quantized module
/// recognised by its tensors (GPTQ/AWQ `qweight`, compressed-tensors `weight_packed`, FP8
/// `weight` with `weight_scale`, ...: recognize.hpp), which is linear.
std::vector<checkpoint_module> checkpoint_modules(std::filesystem::path const& path);

/// The modules an explain or lint run looks at: `modules` (a file, "-" for stdin) if given, else
/// `checkpoint`'s, else the `module_names` list of the config document itself (golden configs).
/// Only a checkpoint's modules have a role other than linear (names alone do not say).
std::vector<checkpoint_module> gather_modules(std::string const& modules, std::filesystem::path const& checkpoint,
                                              config_file const& config);

/// One module name per non-empty line of `path` ("-": standard input).
std::vector<std::string> read_module_list(std::string const& path);

/// The fused module an engine builds from `module` (`...self_attn.q_proj` -> `...self_attn.qkv_proj`)
/// by the config's `packed_modules_mapping`, else `default_packed_modules_mapping()`; nullopt when
/// the module is not a shard.
std::optional<std::string> fused_name(quant_config const& cfg, std::string const& module);

/// The shard names of the fused module `module` (`prefix.qkv_proj` -> prefix.q_proj, ...), empty
/// when its last component is not a fused name.
std::vector<std::string> shard_names(quant_config const& cfg, std::string const& module);

/// `fused_name` by one hash look-up in the compiled mapping (lint and quantize ask for every
/// module; the `quant_config` form scans the mapping each time).
std::optional<std::string> fused_name(compiled_config const& cc, std::string const& module);

/// A one-line human reading of a decision: "skipped (rule 'lm_head')", "4-bit uint4b8 g128 sym", ...
std::string describe(decision const& d);

}  // namespace qtl::tool
