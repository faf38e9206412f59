// qtl explain's work: for each module, the decision each consumer takes under a config
// (checkpoint.hpp). The module names: gather_modules (config_tools.hpp).

#include <qtl/rules/decision.hpp>
#include <qtl/rules/mixed.hpp>

#include "../config_tools.hpp"
#include "checkpoint.hpp"

namespace qtl::tool {

namespace {

/// The document's own `module_names` list (golden configs), or empty.
std::vector<checkpoint_module> document_modules(nlohmann::ordered_json const& doc) {
  std::vector<checkpoint_module> out;
  if (doc.is_object() && doc.contains("module_names") && doc["module_names"].is_array()) {
    for (auto const& m : doc["module_names"]) {
      if (m.is_string()) {
        out.push_back({m.get<std::string>()});
      }
    }
  }
  return out;
}

}  // namespace

std::vector<checkpoint_module> gather_modules(std::string const& modules, std::filesystem::path const& checkpoint,
                                              config_file const& config) {
  if (!modules.empty()) {
    std::vector<checkpoint_module> out;
    for (auto& m : read_module_list(modules)) {
      out.push_back({std::move(m)});
    }
    return out;
  }
  if (!checkpoint.empty()) {
    return checkpoint_modules(checkpoint);
  }
  return document_modules(config.document);
}

explain_result explain_config(explain_options const& o) {
  std::filesystem::path const config_path = quant_config_path(o.config, o.source.checkpoint);
  config_file const file = read_config_file(config_path, o.mapping);
  quant_config const& cfg = file.config;
  validate_config_values(cfg, file.quant_object, config_path.string(), value_rules::engines);
  auto const consumers = resolve_consumers(o.consumer, cfg);
  auto const modules = gather_modules(o.source.modules, o.source.checkpoint, file);
  if (modules.empty()) {
    throw usage_error("explain: no module names (give --modules FILE|- or --checkpoint PATH)");
  }
  // A checkpoint holds the unfused modules; the engines build (and decide) the fused layers.
  bool const fuse = o.source.modules.empty() && !o.source.checkpoint.empty();
  compiled_config const cc(cfg);  // rules and lists indexed once: linear in modules + config
  explain_result r;
  r.mixed = is_mixed(cfg);
  // ModelOpt's mixed loaders decide a checkpoint's expert `X.experts.E.gate_proj` as the fused
  // MoE layer `X.experts` they build (its quantized_layers key, or the first key under it).
  bool const moe_layers = fuse && r.mixed && cfg.family == quant_family::modelopt;
  r.rows.reserve(modules.size() * consumers.size());
  for (auto const& m : modules) {
    std::optional<std::string> fused = fuse ? fused_name(cc, m.name) : std::nullopt;
    if (auto const moe = moe_layers ? moe_layer_of(m.name) : std::nullopt) {
      fused = moe;
    }
    for (consumer const c : consumers) {
      explain_row row{m.name, {}, {}, kept_reason(m.role)};
      if (row.kept.empty()) {
        bool const as_fused = fused && decides_fused_layers(c);
        std::string const& name = as_fused ? *fused : m.name;
        row.decision = decide(cc, c, name, infer_layer_kind(name));
        if (as_fused) {
          row.decided_as = *fused;
        }
      } else {
        row.decision.consumer = consumer_name(c);
        row.decision.skipped = true;
      }
      row.decision.module = m.name;
      r.rows.push_back(std::move(row));
    }
  }
  return r;
}

}  // namespace qtl::tool
