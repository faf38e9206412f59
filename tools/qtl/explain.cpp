// qtl explain: for each module, the decision each consumer takes under a quantization config.
//
//   qtl explain [--config CONFIG] [--consumer NAME|all] [--modules FILE|-] [--checkpoint PATH]
//               [--packed-modules-mapping FILE] [--json]
//
// Modules come from --modules (one per line, `-` for stdin), else from --checkpoint's modules
// (unfused), else from the document's own `module_names` (the golden configs carry one). The
// config: --config, else the checkpoint's config.json (or hf_quant_config.json). Consumers: by
// default the dialects that load the config's quant_method (config_tools.hpp). A checkpoint's
// modules that are not linear layers (norms, embeddings, MoE routers) are not decided: one line
// says why; a shard (`q_proj`) is decided, for sglang's and vLLM's loaders, as the fused layer
// those engines build (`qkv_proj`). --json prints one object per (module, consumer) with the keys
// of qtl/rules/decision.hpp (null where a key does not apply, never absent), then `decided_as`
// (the fused layer) or `kept` (why a module is not decided) where they apply, and under a
// mixed-precision config `scheme` (the group or algorithm a module gets); non-ASCII text as
// \u escapes. Text from the files is printed escaped (`shown`, common.hpp). The work is
// explain_config (lib/checkpoint.hpp); this file parses and prints.

#include <algorithm>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "common.hpp"
#include "config_tools.hpp"
#include "lib/checkpoint.hpp"

namespace qtl::tool {

namespace {

/// The row's JSON object: the decision's keys, then `scheme` (mixed-precision configs: null
/// where the module gets none), `decided_as` or `kept` where they apply.
std::string json_line(explain_row const& row, bool mixed) {
  std::string j = to_json(row.decision);
  j.pop_back();  // the closing brace
  if (mixed) {
    j += ", \"scheme\": " + (row.decision.scheme ? qtl::json_quote(*row.decision.scheme) : std::string("null"));
  }
  if (!row.decided_as.empty()) {
    j += ", \"decided_as\": " + qtl::json_quote(row.decided_as);
  }
  if (!row.kept.empty()) {
    j += ", \"kept\": " + qtl::json_quote(row.kept);
  }
  return ascii_json(j + "}");
}

}  // namespace

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
  add_config_option(cmd, args->config);
  cmd->add_option("--consumer", args->o.consumer,
                  "loaders (default: the dialects that load the config's quant_method), sglang, vllm, all "
                  "(every dialect), or a dialect's name (e.g. vllm_compressed_tensors)");
  cmd->add_option("--checkpoint", args->checkpoint,
                  "take the modules from this checkpoint (only its linear layers are decided)");
  add_module_options(cmd, args->o.source.modules, args->mapping);
  cmd->add_flag("--json", args->json, "one JSON object per line per (module, consumer)");
  return {cmd, [args]() {
            args->o.config = args->config;
            args->o.source.checkpoint = args->checkpoint;
            args->o.mapping = args->mapping;
            explain_result const r = explain_config(args->o);
            std::ostringstream out;
            if (args->json) {
              for (auto const& row : r.rows) {
                out << json_line(row, r.mixed) << '\n';
              }
              std::cout << out.str();
              return exit_ok;
            }
            std::size_t width = 6;
            for (auto const& row : r.rows) {
              width = std::max(width, shown(row.module).size());
            }
            for (std::size_t i = 0; i < r.rows.size(); ++i) {
              explain_row const& row = r.rows[i];
              std::string const module = shown(row.module);
              out << module << std::string(width + 2 - module.size(), ' ');
              if (!row.kept.empty()) {
                // Not decided: one line for every consumer.
                out << row.kept << '\n';
                while (i + 1 < r.rows.size() && r.rows[i + 1].module == row.module) {
                  ++i;
                }
                continue;
              }
              std::string line = row.decision.consumer + ": " + describe(row.decision);
              if (row.decision.scheme) {
                line += " [" + *row.decision.scheme + "]";
              }
              if (!row.decided_as.empty()) {
                line += " [as " + row.decided_as.substr(row.decided_as.rfind('.') + 1) + "]";
              }
              out << shown(line, shown_line_limit) << '\n';
            }
            std::cout << out.str();
            return exit_ok;
          }};
}

}  // namespace qtl::tool
