// qtl explain: for each module, the decision each consumer takes under a quantization config.
//
//   qtl explain --config CONFIG [--consumer NAME|all] [--modules FILE|-] [--checkpoint PATH]
//               [--packed-modules-mapping FILE] [--json]
//
// Modules come from --modules (one per line, `-` for stdin), else from --checkpoint's tensor
// names (`.weight` stripped, unfused), else from the document's own `module_names` (the golden
// configs carry one). --json prints one object per (module, consumer) with the keys of
// qtl/rules/decision.hpp (null where a key does not apply, never absent).

#include <fstream>
#include <iostream>
#include <sstream>

#include <qtl/rules/decision.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "config_tools.hpp"

namespace qtl::tool {

namespace {

struct explain_args {
  std::string config;
  std::string consumer = "sglang";
  std::string modules;
  std::string checkpoint;
  std::string mapping;
  bool json = false;
};

/// The document's own `module_names` list (golden configs), or empty.
std::vector<std::string> document_modules(std::string const& path) {
  std::vector<std::string> out;
  try {
    auto const doc = read_json_document(path, "--config");
    if (doc.is_object() && doc.contains("module_names") && doc["module_names"].is_array()) {
      for (auto const& m : doc["module_names"]) {
        if (m.is_string()) {
          out.push_back(m.get<std::string>());
        }
      }
    }
  } catch (config_error const&) {
    // load_config reports an unreadable or malformed file
  }
  return out;
}

}  // namespace

/// The modules an explain or lint run looks at (see the file comment for the order of sources).
std::vector<std::string> gather_modules(std::string const& modules, std::string const& checkpoint,
                                        std::string const& config) {
  if (!modules.empty()) {
    return read_module_list(modules);
  }
  if (!checkpoint.empty()) {
    return checkpoint_modules(checkpoint);
  }
  return document_modules(config);
}

command define_explain(CLI::App& app) {
  auto args = std::make_shared<explain_args>();
  auto* cmd = app.add_subcommand(
      "explain", "for each module, what each consumer (sglang, vLLM, ...) does under a quantization "
                 "config: skipped or not, bits, group size, the rule that decided, the error it raises");
  cmd->add_option("--config", args->config,
                  "config.json with quantization_config, a bare quantization config, or hf_quant_config.json")
      ->required();
  cmd->add_option("--consumer", args->consumer,
                  "sglang (default), vllm, all, or a dialect's name (e.g. vllm_compressed_tensors)");
  cmd->add_option("--modules", args->modules, "file with one module name per line (- for stdin)");
  cmd->add_option("--checkpoint", args->checkpoint,
                  "derive the module names from this checkpoint's tensors (.weight stripped)");
  cmd->add_option("--packed-modules-mapping", args->mapping,
                  "JSON {fused: [shards]} (default: the config's packed_modules_mapping, else "
                  "qkv_proj/gate_up_proj)");
  cmd->add_flag("--json", args->json, "one JSON object per line per (module, consumer)");
  return {cmd, [args]() {
            quant_config const cfg = load_config(args->config, args->mapping);
            validate_config_values(cfg, read_quant_object(args->config), args->config, value_rules::engines);
            auto const consumers = resolve_consumers(args->consumer, cfg);
            auto const modules = gather_modules(args->modules, args->checkpoint, args->config);
            if (modules.empty()) {
              throw usage_error("explain: no module names (give --modules FILE|- or --checkpoint PATH)");
            }
            std::size_t width = 6;
            for (auto const& m : modules) {
              width = std::max(width, m.size());
            }
            compiled_config const cc(cfg);  // rules and lists indexed once: linear in modules + config
            std::ostringstream out;
            for (auto const& m : modules) {
              for (consumer const c : consumers) {
                decision const d = decide(cc, c, m);
                if (args->json) {
                  out << to_json(d) << '\n';
                } else {
                  out << m << std::string(width + 2 - m.size(), ' ') << d.consumer << ": " << describe(d)
                      << '\n';
                }
              }
            }
            std::cout << out.str();
            return exit_ok;
          }};
}

}  // namespace qtl::tool
