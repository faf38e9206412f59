#pragma once
// The subcommands of `qtl` beyond `inspect` and `op`: `quantize`, `explain`, `lint` and
// `demo`. Each adds its CLI11 subcommand and flags to the app in `define_*` and returns the
// function that runs it once the line is parsed; that function returns the exit code.
//
// Exit codes: those of common.hpp (0, 1, 2), plus `lint`'s 3 (it found a problem).

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace qtl::tool {

/// `qtl lint` found a problem in the config.
inline constexpr int exit_lint = 3;

struct command {
  CLI::App* cmd;
  std::function<int()> run;
};

command define_quantize(CLI::App& app);  // quantize_cmd.cpp
command define_explain(CLI::App& app);   // explain.cpp
command define_lint(CLI::App& app);      // lint.cpp
command define_demo(CLI::App& app);      // demo.cpp
command define_convert(CLI::App& app);   // convert_cmd.cpp

/// The IN and OUT_DIR arguments of the checkpoint jobs (`quantize`, `convert`).
inline void add_checkpoint_paths(CLI::App* cmd, std::string& in, std::string& out_dir) {
  cmd->add_option("IN", in, "a .safetensors file, a *.safetensors.index.json, or a folder")->required();
  cmd->add_option("OUT_DIR", out_dir,
                  "output folder (created, or replaced whole by the finished output: see staged_output.hpp)")
      ->required();
}

/// The config tools' (`explain`, `lint`) --config, and below their --modules and
/// --packed-modules-mapping (their --checkpoint each words for itself).
inline void add_config_option(CLI::App* cmd, std::string& config) {
  cmd->add_option("--config", config,
                  "config.json with quantization_config, a bare quantization config, or hf_quant_config.json "
                  "(default: --checkpoint's config.json, else its hf_quant_config.json)");
}
inline void add_module_options(CLI::App* cmd, std::string& modules, std::string& mapping) {
  cmd->add_option("--modules", modules, "file with one module name per line (- for stdin)");
  cmd->add_option("--packed-modules-mapping", mapping,
                  "JSON {fused: [shards]} (default: the config's packed_modules_mapping, else "
                  "qkv_proj/gate_up_proj)");
}

/// Every subcommand of this header, in `qtl --help` order.
inline std::vector<command> define_commands(CLI::App& app) {
  return {define_quantize(app), define_convert(app), define_explain(app), define_lint(app), define_demo(app)};
}

}  // namespace qtl::tool
