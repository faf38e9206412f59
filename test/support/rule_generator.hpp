#pragma once
// Random inputs for the rules' tests (compiled_config, skip_index, dialect_index): module names made
// of the pieces the consumers' rules treat specially, skip-list entries and GPTQ `dynamic` keys
// (wildcards, classes, invalid patterns now and then) and whole quant_configs of every family.
#include <qtl/rules/config.hpp>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace qtl_test {

using strings = std::vector<std::string>;

/// Module-name pieces that the consumers' rules treat specially (fused and shard names,
/// "experts", "language_model.", vision prefixes, case, empty components).
constexpr std::string_view pieces[] = {
    "model",     "layers",  "0",         "1",         "12",      "mlp",          "experts",     "3",
    "gate_proj", "up_proj", "gate_up_proj", "down_proj", "qkv_proj", "q_proj",    "k_proj",      "v_proj",
    "self_attn", "lm_head", "embed_tokens", "language_model", "vision_tower", "Gate", "q_a_proj", "",
    "w1",        "w13",     "o_proj",    "norm",
};

/// Random module names, skip-list entries, GPTQ `dynamic` keys and whole configs, from one seed.
struct generator {
  std::mt19937_64 rng;

  std::size_t below(std::size_t n) { return static_cast<std::size_t>(rng() % n); }
  bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }

  std::string name() {
    std::string out;
    std::size_t const k = 1 + below(6);
    for (std::size_t i = 0; i != k; ++i) {
      out += (i ? "." : "") + std::string(pieces[below(std::size(pieces))]);
    }
    if (chance(5)) {
      out += ".";
    }
    return out;
  }

  /// A glob or pattern-ish entry: wildcards, classes, regex metacharacters, an invalid regex.
  std::string pattern_entry(strings const& names) {
    std::string n = names[below(names.size())];
    constexpr std::string_view specials[] = {"*", "?", "[0-9]", "[!a-m]", "[", "]", "(", ")", "\\", "$", "^",
                                             "+", "|", ".*", "[]x]", "[z-a]", "\n", "\x80", "{2}", "(?!0)"};
    for (std::size_t k = 0, m = 1 + below(3); k != m; ++k) {
      std::size_t const at = below(n.size() + 1);
      std::string_view const sp = specials[below(std::size(specials))];
      if (chance(50)) {
        n.insert(at, sp);
      } else {
        n.replace(at, std::min<std::size_t>(sp.size(), n.size() - at), sp);
      }
    }
    return chance(20) ? "re:" + n : n;
  }

  /// A skip-list entry: a whole name, a run of components, a fragment of one, a `re:` entry.
  std::string entry(strings const& names) {
    std::string const n = names[below(names.size())];
    if (chance(25)) {
      return pattern_entry(names);
    }
    switch (below(6)) {
      case 0: return n;
      case 1: {
        std::size_t const dot = n.find('.');
        return dot == std::string::npos ? n : n.substr(dot + 1);
      }
      case 2: return n.substr(0, below(n.size() + 1));
      case 3: return n.substr(below(n.size() + 1));
      case 4: return "re:" + std::string(chance(50) ? ".*" : "") + std::string(pieces[below(std::size(pieces))]);
      default: return std::string(pieces[below(std::size(pieces))]);
    }
  }

  /// A GPTQ `dynamic` key.
  std::string dynamic_key(strings const& names) {
    std::string const sign = chance(30) ? "-:" : (chance(50) ? "+:" : "");
    std::string const piece(pieces[below(std::size(pieces))]);
    switch (below(8)) {
      case 0: return sign + "model\\.layers\\." + std::to_string(below(13)) + "\\..*";
      case 1: return sign + ".*" + piece + ".*";
      case 2: return sign + ".*\\." + std::to_string(below(13)) + "\\..*" + piece;
      case 3: return sign + "(?!.*" + piece + ")model.*";  // lookahead: off the combined DFA
      case 4: return sign + piece + "$";
      case 5: return sign + names[below(names.size())];
      case 6: return chance(10) ? sign + "(" : sign + "model\\.(layers|norm)\\.\\d+";  // a bad pattern now and then
      default: return sign + piece + "|" + ".*proj\\b";
    }
  }

  qtl::quant_config config(strings const& names) {
    qtl::quant_config cfg;
    constexpr qtl::quant_family families[] = {qtl::quant_family::gptq, qtl::quant_family::awq,
                                              qtl::quant_family::fp8,  qtl::quant_family::mxfp4,
                                              qtl::quant_family::modelopt, qtl::quant_family::compressed_tensors,
                                              qtl::quant_family::auto_round};
    cfg.family = families[below(std::size(families))];
    cfg.quant_algo = chance(50) ? "NVFP4" : "FP8";
    std::size_t const n_skip = below(12);
    for (std::size_t i = 0; i != n_skip; ++i) {
      cfg.skip_list.push_back(entry(names));
    }
    std::size_t const n_dyn = below(10);
    for (std::size_t i = 0; i != n_dyn; ++i) {
      qtl::dynamic_rule r{dynamic_key(names), {}};
      if (chance(50)) {
        r.body.bits = qtl::py_value::of_int(chance(50) ? 8 : 4);
      }
      if (chance(10)) {
        r.body.type = qtl::py_type::boolean;
        r.body.self = qtl::py_value::of_bool(false);
      }
      cfg.dynamic.push_back(r);
    }
    std::size_t const n_block = chance(30) ? below(4) : 0;
    for (std::size_t i = 0; i != n_block; ++i) {
      cfg.modules_in_block_to_quantize.push_back(entry(names));
    }
    std::size_t const n_extra = chance(40) ? below(8) : 0;
    for (std::size_t i = 0; i != n_extra; ++i) {
      qtl::extra_config_entry e;
      e.key = chance(50) ? names[below(names.size())] : entry(names);
      if (chance(60)) {
        e.bits = qtl::py_value::of_int(chance(50) ? 16 : 8);
      }
      if (chance(30)) {
        e.group_size = qtl::py_value::of_int(64);
      }
      cfg.extra_config.push_back(e);
    }
    std::size_t const n_blocks = chance(30) ? below(3) : 0;
    for (std::size_t i = 0; i != n_blocks; ++i) {
      std::string const n = names[below(names.size())];
      cfg.block_name_to_quantize.push_back(n.substr(0, below(n.size() + 1)));
    }
    switch (below(4)) {
      case 0: break;
      case 1: cfg.packed_modules_mapping = {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}},
                                            {"gate_up_proj", {"gate_proj", "up_proj"}}};
        break;
      case 2: cfg.packed_modules_mapping = {{"w13", {"w1", "w3"}}, {"qkv_proj", {"q_proj"}}, {"qkv_proj", {"k_proj"}}};
        break;
      default: cfg.packed_modules_mapping = {{"experts", {}}, {"gate_up_proj", {"gate_proj", "up_proj"}}};
    }
    return cfg;
  }
};

}  // namespace qtl_test
