#pragma once
// The work of `qtl quantize`, `qtl explain` and `qtl lint` as a library: the CLI (tools/qtl/*.cpp)
// parses the command line into these options and prints the results; the Python bindings call
// the same functions. Link `qtl_commands_dep` (tools/qtl/meson.build).
//
//   quantize_checkpoint(src, dst, options, sink)   -> quantize_report   (files written under dst)
//   explain_config(options)                        -> explain_result    (one decision per module x consumer)
//   lint_config(options)                           -> lint_result       (problems, as lines)
//
// Errors: every function throws `usage_error` for options that do not fit together (the CLI's
// exit code 1) and `qtl::error` (`data_error`, `qtl::config_error`, ...) for files and data (exit
// code 2), with the messages the CLI prints after "qtl: error: ".

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <qtl/rules/decision.hpp>

#include "errors.hpp"

namespace qtl::tool {

// ------------------------------------------------------------------------------------------------
// qtl quantize

/// Every flag of `qtl quantize`. An unset optional is a flag not given: the config's value applies,
/// else the default in its comment; a given flag that contradicts the config's value is refused.
struct quantize_options {
  std::string format;                     ///< --format (required): "gptq", "fp8", or compressed-tensors
                                          ///< "w4a16", "w8a16" (pack-quantized), "nvfp4", "mxfp4"
  std::optional<int> bits;                ///< --bits: GPTQ 4 or 8 (default 4); gptq only
  std::optional<std::int64_t> group_size; ///< --group-size: -1 (one group per column) or > 0 (default
                                          ///< 128); gptq, w4a16, w8a16
  bool sym = false;                       ///< --sym: symmetric (the default when neither is given)
  bool asym = false;                      ///< --asym: zero points per group; gptq, w4a16, w8a16
  std::optional<std::string> fp8_scheme;  ///< --fp8-scheme: "tensor", "channel" (default), "block"
                                          ///< (HF fp8) or "ct-block" (compressed-tensors FP8_BLOCK); fp8 only
  std::filesystem::path config;           ///< --config: skip lists and rules that decide the layers, and the
                                          ///< integer formats' bits, group size, symmetry (empty: none)
  int threads = 0;                        ///< --threads: worker threads, 0 = every core (at most 4096)
  bool allow_nonfinite = false;           ///< --allow-nonfinite: quantize weights holding NaN or Inf
  bool force = false;                     ///< --force: replace an output folder of other files too
  bool allow_empty = false;               ///< --allow-empty: write the output when no layer is quantized
  bool keep_expert_stacks = false;        ///< --keep-expert-stacks: copy, unquantized and listed in `ignore`,
                                          ///< a 3-D expert stack whose layout qtl does not know (refused by default)
};

/// The most worker threads `quantize_options::threads` takes.
inline constexpr int max_quantize_threads = 4096;

/// Where a running quantization reports. Called from worker threads, one call at a time.
class progress_sink {
 public:
  virtual ~progress_sink() = default;
  /// `done` of `total` input bytes are quantized or copied.
  virtual void progress(std::uint64_t done, std::uint64_t total) = 0;
  /// A line for the user that is not an error (stale outputs removed, fewer threads than asked).
  virtual void note(std::string const& line) { (void)line; }
  /// Every tensor is written (the output is not committed yet).
  virtual void finished() {}
};

/// A quantized layer of the output and how ("gptq 4-bit group 128 sym", "fp8 e4m3 channel").
struct quantized_layer {
  std::string module;
  std::string scheme;
};

/// A linear layer left unquantized and why ("lm_head", "rule 'model.layers.0.mlp'", ...).
struct kept_layer {
  std::string module;
  std::string why;
};

/// What `quantize_checkpoint` wrote.
struct quantize_report {
  std::string format;                  ///< as given: "gptq", "fp8", "w4a16", ...
  std::string variant;                 ///< "checkpoint_format gptq" / "gptq_v2", "channel scales",
                                       ///< "compressed-tensors pack-quantized, group 128 sym", ...
  unsigned threads = 1;                ///< worker threads that ran
  std::vector<quantized_layer> layers; ///< in checkpoint order
  std::vector<kept_layer> kept;        ///< sorted by module
  std::size_t tensors_copied = 0;      ///< tensors written unchanged
  std::uint64_t bytes_in = 0;          ///< tensor bytes read
  std::uint64_t bytes_out = 0;         ///< bytes of the output shards
  double seconds = 0;                  ///< wall time of the whole run
  std::vector<std::string> notes;      ///< every line given to `progress_sink::note`, in order
};

/// Quantizes every linear weight of the checkpoint `src` (a .safetensors file, an index or a
/// folder) into the folder `dst`, replacing it whole (all or nothing; the side files of the
/// input's folder are copied). The layout of each format: the comment of
/// tools/qtl/lib/quantize.cpp.
/// @throws usage_error, data_error, qtl::error (the CLI's messages)
quantize_report quantize_checkpoint(std::filesystem::path const& src, std::filesystem::path const& dst,
                                    quantize_options const& options, progress_sink* sink = nullptr);

// ------------------------------------------------------------------------------------------------
// qtl explain and qtl lint

/// Where explain and lint take module names from: `modules` (a file with one per line, "-" for
/// standard input), else `checkpoint`'s modules (unfused; only its linear layers are decided),
/// else the config document's own `module_names` (the golden configs carry one).
struct module_source {
  std::string modules;
  std::filesystem::path checkpoint;
};

/// The flags of `qtl explain`.
struct explain_options {
  std::filesystem::path config;          ///< --config (empty: the checkpoint's own)
  std::string consumer = "loaders";      ///< --consumer: loaders, sglang, vllm, all or a dialect's name
  module_source source;                  ///< --modules, --checkpoint
  std::filesystem::path mapping;         ///< --packed-modules-mapping (empty: the config's)
};

/// One decision of one consumer for one module.
struct explain_row {
  std::string module;
  qtl::decision decision;  ///< `decision.module` is `module`
  std::string decided_as;  ///< the fused layer the consumer decided instead (an engine's
                           ///< `qkv_proj` for a checkpoint's `q_proj`), or empty
  std::string kept;        ///< why the module is not decided ("not a linear layer"), or empty:
                           ///< the decision then says skipped, nothing more
};

/// Every (module, consumer) decision, module-major, in module order.
struct explain_result {
  std::vector<explain_row> rows;
  bool mixed = false;  ///< a mixed-precision config: each decision's `scheme` says which entry gave it
};

/// What each consumer does with each module under the config. A checkpoint's shard of a fused
/// layer is decided, for sglang's and vLLM's loaders, as the fused layer those engines build.
/// @throws usage_error for an unknown consumer or when there are no module names
explain_result explain_config(explain_options const& options);

/// The flags of `qtl lint`.
struct lint_options {
  std::filesystem::path config;   ///< --config (empty: the checkpoint's own)
  module_source source;           ///< --modules, --checkpoint
  std::filesystem::path mapping;  ///< --packed-modules-mapping
};

/// The problems of a config ("unused: ...", "disagree: ...", "fused: ...", "error: ...",
/// "value: ..."), one line each; none when the config is clean.
struct lint_result {
  std::vector<std::string> problems;
  std::size_t names = 0;          ///< linear modules checked, with the fused names built from them
  std::size_t fused = 0;          ///< fused layers among them
  std::size_t entries = 0;        ///< config entries (skip list, dynamic, extra_config)
  bool had_modules = true;        ///< false: no module names, only the entries themselves were checked
};

/// Lints the config against the modules (see tools/qtl/lint.cpp for what each kind means).
lint_result lint_config(lint_options const& options);

}  // namespace qtl::tool
