// qtl explain: for each module, the decision each consumer takes under a quantization config.
//
//   qtl explain --config CONFIG [--consumer NAME|all] [--modules FILE|-] [--checkpoint PATH]
//               [--packed-modules-mapping FILE] [--json]
//
// Modules come from --modules (one per line, `-` for stdin), else from --checkpoint's tensor
// names (`.weight` stripped, unfused), else from the document's own `module_names` (the golden
// configs carry one). --json prints one object per (module, consumer) with the keys of
// qtl/rules/decision.hpp (null where a key does not apply, never absent). The work is
// explain_config (lib/checkpoint.hpp); this file parses and prints.

#include <algorithm>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "common.hpp"
#include "config_tools.hpp"
#include "lib/checkpoint.hpp"

namespace qtl::tool {

command define_explain(CLI::App& app) {
  struct args_t {
    explain_options o;
    std::string config, checkpoint, mapping;
    bool json = false;
  };
  auto args = std::make_shared<args_t>();
  auto* cmd = app.add_subcommand(
      "explain", "for each module, what each consumer (sglang, vLLM, ...) does under a quantization "
                 "config: skipped or not, bits, group size, the rule that decided, the error it raises");
  cmd->add_option("--config", args->config,
                  "config.json with quantization_config, a bare quantization config, or hf_quant_config.json")
      ->required();
  cmd->add_option("--consumer", args->o.consumer,
                  "sglang (default), vllm, all, or a dialect's name (e.g. vllm_compressed_tensors)");
  cmd->add_option("--modules", args->o.source.modules, "file with one module name per line (- for stdin)");
  cmd->add_option("--checkpoint", args->checkpoint,
                  "derive the module names from this checkpoint's tensors (.weight stripped)");
  cmd->add_option("--packed-modules-mapping", args->mapping,
                  "JSON {fused: [shards]} (default: the config's packed_modules_mapping, else "
                  "qkv_proj/gate_up_proj)");
  cmd->add_flag("--json", args->json, "one JSON object per line per (module, consumer)");
  return {cmd, [args]() {
            args->o.config = args->config;
            args->o.source.checkpoint = args->checkpoint;
            args->o.mapping = args->mapping;
            explain_result const r = explain_config(args->o);
            std::size_t width = 6;
            for (auto const& row : r.rows) {
              width = std::max(width, row.module.size());
            }
            std::ostringstream out;
            for (auto const& row : r.rows) {
              if (args->json) {
                out << to_json(row.decision) << '\n';
              } else {
                out << row.module << std::string(width + 2 - row.module.size(), ' ') << row.decision.consumer
                    << ": " << describe(row.decision) << '\n';
              }
            }
            std::cout << out.str();
            return exit_ok;
          }};
}

}  // namespace qtl::tool
