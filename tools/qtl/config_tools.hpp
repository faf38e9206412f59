#pragma once
// Quantization configs for `qtl explain`, `qtl lint` and `qtl quantize`: loading a config (a
// `config.json` with `quantization_config`, a bare quantization config, an `hf_quant_config.json`),
// naming consumers ("sglang", "vllm", "all" or a dialect's own name), listing the modules of a
// checkpoint and the engines' fused names of unfused Hugging Face modules.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <qtl/io/config_values.hpp>
#include <qtl/io/quant_config.hpp>
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

/// The config of `path`; `mapping_path` (may be empty) replaces its `packed_modules_mapping`
/// (a JSON object {fused: [shard, ...]}, or a document with a `packed_modules_mapping` key).
/// @throws qtl::config_error naming the file and the field.
config_file read_config_file(std::filesystem::path const& path, std::filesystem::path const& mapping_path = {});

/// `cfg`'s `dynamic` rules compiled once, for `decide_options::dynamic` (explain and lint decide
/// every module with them). Null when the rules together exceed a regex limit although each
/// compiles alone: `decide` then matches them one by one, with the same result.
std::unique_ptr<compiled_dynamic_rules const> compile_dynamic_rules(quant_config const& cfg);

using qtl::io::validate_config_values;
using qtl::io::value_rules;

/// The consumers `name` stands for, given the config's family: `sglang` and `vllm` are the
/// engine's loader for that family (GPTQ: sglang_gptq; FP8: sglang_fp8; ...), `all` every
/// dialect, anything else a dialect's own name (`vllm_compressed_tensors`).
/// @throws usage_error for an unknown name.
std::vector<consumer> resolve_consumers(std::string const& name, quant_config const& cfg);

/// The engine's consumer for the config's family (`sglang == true`: sglang's, else vLLM's).
consumer engine_consumer(quant_config const& cfg, bool sglang);

/// Module names of a checkpoint (a file, folder or index): every tensor name ending in `.weight`
/// (or GPTQ's `.qweight`) with that suffix stripped, unfused, in checkpoint order, each once.
std::vector<std::string> checkpoint_modules(std::filesystem::path const& path);

/// The modules an explain or lint run looks at: `modules` (a file, "-" for stdin) if given, else
/// `checkpoint`'s, else the `module_names` list of the config document itself (golden configs).
std::vector<std::string> gather_modules(std::string const& modules, std::filesystem::path const& checkpoint,
                                        config_file const& config);

/// One module name per non-empty line of `path` ("-": standard input).
std::vector<std::string> read_module_list(std::string const& path);

/// The fused module an engine builds from `module` (`...self_attn.q_proj` -> `...self_attn.qkv_proj`)
/// by the config's `packed_modules_mapping`, else the reference's fallback (qkv_proj, gate_up_proj);
/// nullopt when the module is not a shard.
std::optional<std::string> fused_name(quant_config const& cfg, std::string const& module);

/// The shard names of the fused module `module` (`prefix.qkv_proj` -> prefix.q_proj, ...), empty
/// when its last component is not a fused name.
std::vector<std::string> shard_names(quant_config const& cfg, std::string const& module);

/// A one-line human reading of a decision: "skipped (rule 'lm_head')", "4-bit uint4b8 g128 sym", ...
std::string describe(decision const& d);

}  // namespace qtl::tool
