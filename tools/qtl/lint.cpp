// qtl lint: problems of a quantization config against a checkpoint's modules.
//
//   qtl lint --config CONFIG [--checkpoint PATH] [--modules FILE|-] [--packed-modules-mapping FILE]
//
// Checked, with sglang's and vLLM's loaders for the config's family (qtl/rules/consumers.hpp):
//   unused      a skip-list entry or `dynamic` rule that decides no module (typo, wrong prefix);
//   disagree    a module the two engines treat differently (research/matchers.md §7);
//   fused       a fused layer (qkv_proj, gate_up_proj, ...) whose shards get different decisions,
//               or that an engine refuses ("Detected some but not all shards ...");
//   error       any other exception an engine would raise for a module (bad regex, ...).
// Modules: --modules, else --checkpoint's tensor names, else the config document's `module_names`;
// the fused names the engines build from them are checked too. Exit 3 on any problem, 0 when clean.

#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_set>

#include "commands.hpp"
#include "common.hpp"
#include "config_tools.hpp"

namespace qtl::tool {

namespace {

struct lint_args {
  std::string config;
  std::string checkpoint;
  std::string modules;
  std::string mapping;
};

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
  return out;
}

}  // namespace

command define_lint(CLI::App& app) {
  auto args = std::make_shared<lint_args>();
  auto* cmd = app.add_subcommand(
      "lint", "find problems in a quantization config: entries that match no module, entries sglang "
              "and vLLM read differently, fused layers whose shards disagree (exit 3 when found)");
  cmd->add_option("--config", args->config,
                  "config.json with quantization_config, a bare quantization config, or hf_quant_config.json")
      ->required();
  cmd->add_option("--checkpoint", args->checkpoint, "the checkpoint whose modules the config must fit");
  cmd->add_option("--modules", args->modules, "file with one module name per line (- for stdin)");
  cmd->add_option("--packed-modules-mapping", args->mapping, "JSON {fused: [shards]}");
  return {cmd, [args]() {
            quant_config const cfg = load_config(args->config, args->mapping);
            auto const modules = gather_modules(args->modules, args->checkpoint, args->config);
            compiled_config const cc(cfg);  // rules and lists indexed once: linear in modules + config
            std::vector<consumer> const engines = {engine_consumer(cfg, true), engine_consumer(cfg, false)};
            // The modules plus the fused names the engines build from them.
            std::vector<std::string> names = modules;
            std::map<std::string, std::vector<std::string>> fused_groups;
            for (auto const& m : modules) {
              if (auto const f = fused_name(cc, m)) {
                auto& g = fused_groups[*f];
                if (g.empty()) {
                  names.push_back(*f);
                }
                g.push_back(m);
              }
            }
            std::vector<std::string> problems;
            try {
              validate_config_values(cfg, read_quant_object(args->config), args->config, value_rules::engines);
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
                                     " raises " + *d.error);
                }
              }
              auto const groups = disagreements(ds);
              if (groups.size() > 1) {
                std::string p = "disagree: " + m + ":";
                for (auto const& g : groups) {
                  p += " " + g.front().consumer + " -> " + describe(g.front()) + ";";
                }
                problems.push_back(p);
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
                                       " -> " + describe(first) + " but " + s + " -> " + describe(d));
                    break;
                  }
                }
              }
            }
            // Entries that decide nothing.
            if (!modules.empty()) {
              // The rules that decided something, once (a lookup per entry, not a scan of every
              // decision: linear in modules + entries).
              std::unordered_set<std::string> used_rules;
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
                  problems.push_back("unused: " + field + " entry '" + entry + "' matches none of the " +
                                     std::to_string(modules.size()) + " modules for " +
                                     std::string(consumer_name(engines[0])) + " or " +
                                     std::string(consumer_name(engines[1])));
                }
              }
            } else {
              std::cerr << "qtl lint: no module names (give --checkpoint or --modules): only the "
                           "entries themselves were checked\n";
            }
            std::ostringstream out;
            for (auto const& p : problems) {
              out << p << '\n';
            }
            out << "qtl lint: " << names.size() << " modules (" << fused_groups.size() << " fused), "
                << config_entries(cfg).size() << " config entries, " << problems.size() << " problem"
                << (problems.size() == 1 ? "" : "s") << '\n';
            std::cout << out.str();
            return problems.empty() ? exit_ok : exit_lint;
          }};
}

}  // namespace qtl::tool
