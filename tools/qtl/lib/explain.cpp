// qtl explain's work: for each module, the decision each consumer takes under a config
// (checkpoint.hpp). The module names: gather_modules (config_tools.hpp).

#include <qtl/rules/decision.hpp>

#include "../config_tools.hpp"
#include "checkpoint.hpp"

namespace qtl::tool {

namespace {

/// The document's own `module_names` list (golden configs), or empty.
std::vector<std::string> document_modules(nlohmann::ordered_json const& doc) {
  std::vector<std::string> out;
  if (doc.is_object() && doc.contains("module_names") && doc["module_names"].is_array()) {
    for (auto const& m : doc["module_names"]) {
      if (m.is_string()) {
        out.push_back(m.get<std::string>());
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> gather_modules(std::string const& modules, std::filesystem::path const& checkpoint,
                                        config_file const& config) {
  if (!modules.empty()) {
    return read_module_list(modules);
  }
  if (!checkpoint.empty()) {
    return checkpoint_modules(checkpoint);
  }
  return document_modules(config.document);
}

explain_result explain_config(explain_options const& o) {
  config_file const file = read_config_file(o.config, o.mapping);
  quant_config const& cfg = file.config;
  validate_config_values(cfg, file.quant_object, o.config.string(), value_rules::engines);
  auto const consumers = resolve_consumers(o.consumer, cfg);
  auto const modules = gather_modules(o.source.modules, o.source.checkpoint, file);
  if (modules.empty()) {
    throw usage_error("explain: no module names (give --modules FILE|- or --checkpoint PATH)");
  }
  auto const rules = compile_dynamic_rules(cfg);
  decide_options opt;
  opt.dynamic = rules.get();
  explain_result r;
  r.rows.reserve(modules.size() * consumers.size());
  for (auto const& m : modules) {
    for (consumer const c : consumers) {
      r.rows.push_back({m, decide(cfg, c, m, opt)});
    }
  }
  return r;
}

}  // namespace qtl::tool
