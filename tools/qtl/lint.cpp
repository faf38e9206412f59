// qtl lint: problems of a quantization config against a checkpoint's modules.
//
//   qtl lint [--config CONFIG] [--checkpoint PATH] [--modules FILE|-] [--packed-modules-mapping FILE]
//
// Checked, with sglang's and vLLM's loaders for the config's family (qtl/rules/consumers.hpp):
//   unused      a skip-list entry, `dynamic` rule or mixed-precision target that decides no
//               linear module (typo, wrong prefix, or a norm or embedding, which no engine
//               quantizes);
//   disagree    a module the two engines treat differently (under a mixed-precision config also:
//               a scheme other than the group the compressed-tensors library, which wrote the
//               checkpoint, gave it);
//   fused       a fused layer (qkv_proj, gate_up_proj, ...) whose shards get different decisions,
//               or that an engine refuses ("Detected some but not all shards ...");
//   error       any other exception an engine would raise for a module (bad regex, ...).
// Modules: --modules, else --checkpoint's linear layers, else the config document's `module_names`;
// the fused names the engines build from them are checked too. The config: --config, else the
// checkpoint's config.json (or hf_quant_config.json). Exit 3 on any problem, 0 when clean.
// Text from the files is printed escaped (`shown`, common.hpp). The work is lint_config
// (lib/checkpoint.hpp); this file parses and prints.

#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "common.hpp"
#include "config_tools.hpp"
#include "lib/checkpoint.hpp"

namespace qtl::tool {

command define_lint(CLI::App& app) {
  struct args_t {
    lint_options o;
    std::string config, checkpoint, mapping;
  };
  auto args = std::make_shared<args_t>();
  auto* cmd = app.add_subcommand(
      "lint", "find problems in a quantization config: entries that match no module, entries sglang "
              "and vLLM read differently, fused layers whose shards disagree (exit 3 when found)");
  add_config_option(cmd, args->config);
  cmd->add_option("--checkpoint", args->checkpoint,
                  "the checkpoint whose linear layers the config must fit");
  add_module_options(cmd, args->o.source.modules, args->mapping);
  return {cmd, [args]() {
            args->o.config = args->config;
            args->o.source.checkpoint = args->checkpoint;
            args->o.mapping = args->mapping;
            lint_result const r = lint_config(args->o);
            if (!r.had_modules) {
              std::cerr << "qtl lint: no module names (give --checkpoint or --modules): only the "
                           "entries themselves were checked\n";
            }
            std::ostringstream out;
            for (auto const& p : r.problems) {
              out << shown(p, shown_line_limit) << '\n';
            }
            out << "qtl lint: " << r.names << " linear modules (" << r.fused << " fused), " << r.entries
                << " config entries, " << r.problems.size() << " problem" << (r.problems.size() == 1 ? "" : "s")
                << '\n';
            std::cout << out.str();
            return r.problems.empty() ? exit_ok : exit_lint;
          }};
}

}  // namespace qtl::tool
