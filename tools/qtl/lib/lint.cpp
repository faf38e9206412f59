// qtl lint's work: the problems of a config against a checkpoint's modules (checkpoint.hpp;
// the kinds of problem: tools/qtl/lint.cpp).

#include <map>
#include <set>
#include <unordered_set>

#include <qtl/rules/mixed.hpp>

#include "../config_tools.hpp"
#include "checkpoint.hpp"

namespace qtl::tool {

namespace {

/// The config's entries that can decide a module, with the field each comes from.
std::vector<std::pair<std::string, std::string>> config_entries(quant_config const& cfg) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto const& e : cfg.skip_list) {
    out.emplace_back(e, cfg.skip_list_field.empty() ? "skip list" : cfg.skip_list_field);
  }
  for (auto const& r : cfg.dynamic) {
    out.emplace_back(r.key, "dynamic");
  }
  for (auto const& e : cfg.extra_config) {
    out.emplace_back(e.key, "extra_config");
  }
  if (is_mixed(cfg)) {
    for (auto const& g : cfg.config_groups) {
      for (auto const& t : g.targets) {
        out.emplace_back(t, "config_groups." + g.name + ".targets");
      }
    }
  }
  return out;
}

/// `describe(d)`, and the scheme a mixed-precision config gives (`[group_1 (pack-quantized)]`).
std::string described(decision const& d) {
  return describe(d) + (d.scheme ? " [" + *d.scheme + "]" : std::string());
}

}  // namespace

lint_result lint_config(lint_options const& o) {
  std::filesystem::path const config_path = quant_config_path(o.config, o.source.checkpoint);
  config_file const file = read_config_file(config_path, o.mapping);
  quant_config const& cfg = file.config;
  // The linear modules are checked; the others (norms, embeddings, routers) only name the
  // entries that match nothing else.
  std::vector<std::string> modules;
  std::unordered_set<std::string> not_linear;
  for (auto& m : gather_modules(o.source.modules, o.source.checkpoint, file)) {
    if (m.role == module_role::linear) {
      modules.push_back(std::move(m.name));
    } else {
      not_linear.insert(std::move(m.name));
    }
  }
  compiled_config const cc(cfg);  // rules and lists indexed once: linear in modules + config
  std::vector<consumer> const engines = {engine_consumer(cfg, true), engine_consumer(cfg, false)};
  bool const mixed = is_mixed(cfg);
  // The engine's layer of a checkpoint module: the fused layer, or under ModelOpt's mixed
  // loaders the fused MoE layer of an expert's linear.
  auto const engine_layer = [&](std::string const& m) {
    std::optional<std::string> f = fused_name(cc, m);
    if (auto const moe = mixed && cfg.family == quant_family::modelopt ? moe_layer_of(m) : std::nullopt) {
      f = moe;
    }
    return f;
  };
  // The modules plus the fused names the engines build from them.
  std::vector<std::string> names = modules;
  std::map<std::string, std::vector<std::string>> fused_groups;
  for (auto const& m : modules) {
    if (auto const f = engine_layer(m)) {
      auto& g = fused_groups[*f];
      if (g.empty()) {
        names.push_back(*f);
      }
      g.push_back(m);
    }
  }
  std::vector<std::string> problems;
  try {
    validate_config_values(cfg, file.quant_object, config_path.string(), value_rules::engines);
  } catch (config_error const& e) {
    problems.push_back(std::string("value: ") + e.what());
  }
  std::map<std::string, std::map<std::string, decision>> by_module;  // module -> consumer -> d
  for (auto const& m : names) {
    auto const ds = decide_all(cc, m, infer_layer_kind(m), engines);
    for (auto const& d : ds) {
      by_module[m][d.consumer] = d;
      if (d.error) {
        bool const fused = fused_groups.count(m) != 0;
        problems.push_back(std::string(fused ? "fused" : "error") + ": " + m + ": " + d.consumer +
                           (d.error_from_qtl() ? ": QTL cannot tell what it does: " : " raises ") + *d.error);
      }
    }
    auto const groups = disagreements(ds);
    if (groups.size() > 1) {
      std::string p = "disagree: " + m + ":";
      for (auto const& g : groups) {
        p += " " + g.front().consumer + " -> " + described(g.front()) + ";";
      }
      problems.push_back(p);
    }
  }
  // A mixed compressed-tensors checkpoint holds each module as the compressed-tensors library
  // (which llm-compressor writes with) decided it: each engine must load the same scheme.
  std::unordered_set<std::string> writer_rules;
  if (mixed && cfg.family == quant_family::compressed_tensors) {
    for (auto const& m : modules) {
      decision const w = decide(cc, consumer::compressed_tensors, m, infer_layer_kind(m));
      if (w.rule) {
        writer_rules.insert(*w.rule);
      }
      std::string const layer = engine_layer(m).value_or(m);
      for (consumer const c : engines) {
        decision const& d = by_module[layer][std::string(consumer_name(c))];
        if (!d.error && !d.same_outcome(w)) {
          problems.push_back("disagree: " + m + ": compressed_tensors (the writer) -> " + described(w) + "; " +
                             d.consumer + (layer == m ? std::string() : " [as " + layer + "]") + " -> " +
                             described(d) + ";");
        }
      }
    }
  }
  // Shards of one fused layer must get one decision from each engine.
  for (auto const& [fused, shards] : fused_groups) {
    for (consumer const c : engines) {
      std::string const cn(consumer_name(c));
      decision const& first = by_module[shards.front()][cn];
      for (auto const& s : shards) {
        decision const& d = by_module[s][cn];
        if (!d.same_outcome(first)) {
          problems.push_back("fused: " + fused + ": " + cn + " decides shard " + shards.front() +
                             " -> " + described(first) + " but " + s + " -> " + described(d));
          break;
        }
      }
    }
  }
  // Entries that decide nothing.
  bool const had_modules = !modules.empty() || !not_linear.empty();
  if (had_modules) {
    // The rules that decided something, once (a lookup per entry, not a scan of every
    // decision: linear in modules + entries).
    std::unordered_set<std::string> used_rules = writer_rules;
    for (auto const& [m, per] : by_module) {
      for (auto const& [cn, d] : per) {
        if (d.rule) {
          used_rules.insert(*d.rule);
        }
      }
    }
    for (auto const& [entry, field] : config_entries(cfg)) {
      bool const used = used_rules.count(entry) != 0 || used_rules.count("model." + entry) != 0 ||
                        (entry.starts_with("model.") && used_rules.count(entry.substr(6)) != 0);
      if (!used) {
        bool const names_other = not_linear.count(entry) != 0 || not_linear.count("model." + entry) != 0;
        problems.push_back("unused: " + field + " entry '" + entry + "' matches none of the " +
                           std::to_string(modules.size()) + " linear modules for " +
                           std::string(consumer_name(engines[0])) + " or " +
                           std::string(consumer_name(engines[1])) +
                           (names_other ? " (it names a module that is not a linear layer: never quantized)" : ""));
      }
    }
  }
  lint_result r;
  r.problems = std::move(problems);
  r.names = names.size();
  r.fused = fused_groups.size();
  r.entries = config_entries(cfg).size();
  r.had_modules = had_modules;
  return r;
}

}  // namespace qtl::tool
