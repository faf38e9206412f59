#pragma once
/// \file
/// Each consumer's way of matching a module name against its config's lists, and the helpers the
/// decisions share (`detail`): sglang's doubled FP8 list, compressed-tensors' `should_ignore` and
/// `match_name`, ModelOpt's patterns in sglang and vLLM, AutoRound's regex keys, fnmatch, the
/// transformers rules, Python's error texts, and a mixed-precision reader's decision. The table of
/// dialects is `qtl/rules/consumers.hpp`'s, which decides with these.

#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/group_size.hpp>
#include <qtl/match/glob.hpp>
#include <qtl/match/regex.hpp>
#include <qtl/rules/compiled_dynamic.hpp>
#include <qtl/rules/config.hpp>
#include <qtl/rules/consumer.hpp>
#include <qtl/rules/decision.hpp>
#include <qtl/rules/dynamic.hpp>
#include <qtl/rules/mixed.hpp>
#include <qtl/rules/skip.hpp>
#include <qtl/rules/weight_params.hpp>
#include <qtl/scalar_type.hpp>

namespace qtl {

namespace detail {

inline std::string py_list_repr(std::vector<std::string> const& items) {
  std::string out = "[";
  for (std::size_t i = 0; i != items.size(); ++i) {
    out += (i ? ", '" : "'") + items[i] + "'";
  }
  return out + "]";
}

inline std::string regex_error_text(regex_error const& e) { return std::string("re.error: ") + e.what(); }

/// The error of a failed skip outcome for `module` (`mixed_message` for mixed shards), if any.
inline std::optional<std::string> skip_error(skip_outcome const& o, std::string_view module,
                                             std::string const& mixed_message) {
  if (o.mixed_shards) {
    return mixed_message;
  }
  if (o.no_shards) {
    return "AssertionError: the fused mapping lists no shard for " + std::string(module);
  }
  return std::nullopt;
}

/// Fills a decision from a skip outcome over `list` (entries as written in the config).
inline void apply_skip(decision& d, skip_outcome const& o, std::vector<std::string> const& list, weight_params const& w,
                       std::string const& mixed_message) {
  if (auto e = skip_error(o, d.module, mixed_message)) {
    d.error = std::move(e);
  }
  d.skipped = o.skipped;
  if (o.rule != no_rule && o.rule < list.size()) {
    d.rule = list[o.rule];
  }
  if (!d.skipped) {
    d.bits = w.bits;
    d.group_size = w.group_size;
    d.desc_act = w.desc_act;
    d.sym = w.sym;
    d.quant_type = w.quant_type;
  }
}

inline std::string value_error_text(std::string const& m) { return "ValueError: " + m; }

/// sglang's `Fp8Config` list: every entry twice, without a leading `model.` and with it.
inline std::vector<std::string> sglang_fp8_list(std::vector<std::string> const& list) {
  std::vector<std::string> out;
  out.reserve(2 * list.size());
  for (std::string const& e : list) {
    std::string const bare = std::string_view(e).starts_with("model.") ? e.substr(6) : e;
    out.push_back(bare);
    out.push_back("model." + bare);
  }
  return out;
}

/// compressed-tensors' `_is_equal_or_regex_match(value, target, check_contains)`.
inline bool ct_entry_match(std::string_view entry, std::string_view name, bool check_contains) {
  if (entry.starts_with("re:")) {
    return re_match(entry.substr(3), name);
  }
  if (check_contains) {
    return icontains(name, entry);
  }
  return entry == name;
}

/// compressed-tensors' `should_ignore_layer(layer_name, ignore, fused_mapping)`, asking `ix`
/// (`linear_config_index` or a compiled config's) for the list's answers.
template <class Index>
skip_outcome ct_should_ignore(std::string_view name, Index const& ix, bool check_contains, shard_naming naming,
                              std::vector<std::string>* shard_names) {
  auto const find = [&](std::string_view n) { return ix.ct_find(n, check_contains); };
  std::string_view const proj = last_component(name);
  auto const* entry = ix.fused()(proj);
  if (entry != nullptr && ix.list().equal(name) == no_rule) {
    if (shard_names != nullptr) {
      *shard_names = entry->second;
    }
    return shard_agreement(name, proj, entry->second, naming, find);
  }
  skip_outcome out;
  out.rule = find(name);
  out.skipped = out.rule != no_rule;
  return out;
}

/// compressed-tensors' `match_name(name, target, fused)` (`utils/match.py`): a name that ends
/// with a fused suffix (a plain `endswith`, in mapping order) matches when *any* of its shard
/// names (the suffix replaced) matches; else `re:` entries `re.match`, others are exact.
inline bool ct_match_name(std::string_view name, std::string_view target, packed_mapping const& fused) {
  for (auto const& [suffix, shards] : fused) {
    if (name.ends_with(suffix)) {
      std::string_view const stem = name.substr(0, name.size() - suffix.size());
      for (std::string const& shard : shards) {
        if (ct_entry_match(target, std::string(stem) + shard, false)) {
          return true;
        }
      }
      return false;
    }
  }
  return ct_entry_match(target, name, false);
}

/// sglang ModelOpt's regex of an exclude pattern: `.` -> `\.`, `*` -> `.*`, the rest as is.
inline std::string sglang_modelopt_regex(std::string_view pattern) {
  std::string re;
  for (char const c : pattern) {
    if (c == '.') {
      re += "\\.";
    } else if (c == '*') {
      re += ".*";
    } else {
      re += c;
    }
  }
  return re;
}

/// The names sglang ModelOpt matches patterns against: the prefix, and the prefix with every
/// `language_model.` removed when it has one.
inline std::vector<std::string> sglang_modelopt_candidates(std::string_view prefix) {
  std::vector<std::string> candidates{std::string(prefix)};
  if (contains(prefix, "language_model.")) {
    candidates.push_back(std::string(py_replace(prefix, "language_model.", "").view()));
  }
  return candidates;
}

/// The MLA tails of sglang ModelOpt's special case.
inline constexpr std::string_view sglang_modelopt_mla_tails[] = {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
                                                                 "kv_b_proj"};

/// Whether one pattern excludes the layer (`candidates`: `sglang_modelopt_candidates(prefix)`;
/// `leaf`: the prefix's last component).
inline bool sglang_modelopt_pattern_excludes(std::string_view pattern, std::vector<std::string> const& candidates,
                                             std::string_view leaf) {
  std::string const re = sglang_modelopt_regex(pattern);
  for (std::string const& cand : candidates) {
    if (re_fullmatch(re, cand)) {
      return true;
    }
    std::string_view rest = cand;
    while (true) {
      std::size_t const dot = rest.find('.');
      if (re_fullmatch(re, rest.substr(0, dot))) {
        return true;
      }
      if (dot == std::string_view::npos) {
        break;
      }
      rest = rest.substr(dot + 1);
    }
  }
  std::string_view const tail = last_component(pattern);
  for (std::string_view const t : sglang_modelopt_mla_tails) {
    if (tail == t && contains(leaf, tail)) {
      return true;
    }
  }
  return false;
}

/// sglang ModelOpt's `is_layer_excluded(prefix)`: the index of the first pattern that excludes
/// the layer, or `no_rule`. A pattern becomes a regex by `.` -> `\.` and `*` -> `.*` (other
/// metacharacters stay active) and is `re.fullmatch`ed against the name (and the name without
/// `language_model.`) or any of its dotted components; the MLA tail rule excludes a layer whose
/// last component contains the pattern's last component when that is one of `q_a_proj`,
/// `q_b_proj`, `kv_a_proj_with_mqa`, `kv_b_proj`, whatever the pattern's layer index.
inline std::size_t sglang_modelopt_excluded(std::string_view prefix, std::vector<std::string> const& patterns) {
  std::vector<std::string> const candidates = sglang_modelopt_candidates(prefix);
  std::string_view const leaf = last_component(prefix);
  for (std::size_t i = 0; i != patterns.size(); ++i) {
    if (sglang_modelopt_pattern_excludes(patterns[i], candidates, leaf)) {
      return i;
    }
  }
  return no_rule;
}

/// vLLM ModelOpt's steps 2 and 3 of `is_layer_excluded`: an entry other than the name itself
/// that is a plain substring of it (the `language_model.`-stripped test of vLLM is implied by
/// this one), then `fnmatch(prefix, entry)`.
inline std::size_t vllm_modelopt_excluded(std::string_view prefix, std::vector<std::string> const& patterns) {
  std::size_t r = find_entry(patterns, [&](std::string_view e) { return e != prefix && contains(prefix, e); });
  if (r == no_rule) {
    r = find_entry(patterns, [&](std::string_view e) { return glob_match(e, prefix); });
  }
  return r;
}

/// An AutoRound `extra_config` key counts as a regex when it has one of `*+?^$()[]{}|\`
/// (a `.` does not).
constexpr bool auto_round_regex_key(std::string_view key) {
  return key.find_first_of("*+?^$()[]{}|\\") != std::string_view::npos;
}

/// Whether the regex key hits `name`: re.search (vLLM) or re.fullmatch (sglang); an invalid key
/// never hits (vLLM: `except re.error: continue`). @throws qtl::regex_unsupported_error for a key
/// QTL's engine does not run (Python would: QTL cannot tell whether it hits).
inline bool auto_round_regex_hit(std::string_view key, std::string_view name, bool search) {
  try {
    return search ? re_search(key, name) : re_fullmatch(key, name);
  } catch (regex_error const&) {
    return false;
  }
}

/// `fnmatch.fnmatchcase(module, entry)`, or with `subtree` also of `entry + ".*"`.
inline bool fnmatch_entry(std::string_view entry, std::string_view module, bool subtree) {
  return glob_match(entry, module) || (subtree && glob_match(std::string(entry) + ".*", module));
}

/// transformers v4 (bitsandbytes style) beyond the leaf: `key == name or key + "." in name`.
inline bool transformers_v4_bnb_entry(std::string_view entry, std::string_view module) {
  return entry == module || contains(module, std::string(entry) + ".");
}

/// transformers v5's `should_convert_module` test of one key: `re.match(key + "\.", name) or
/// re.match(key, name) or name.endswith(key)`.
inline bool transformers_v5_entry(std::string_view entry, std::string_view module) {
  return re_match(std::string(entry) + "\\.", module) || re_match(entry, module) || module.ends_with(entry);
}

/// What an engine's ignore step says of one name: skipped (by the entry `rule`), or the error
/// it raises.
struct ignore_step {
  bool skipped = false;
  std::optional<std::string> rule;
  std::optional<std::string> error;
};

/// vLLM's `CompressedTensorsMoEMethod.get_moe_method(config, layer, prefix)` under several config
/// groups: the fused MoE layer `X.experts` takes the scheme its first expert's projections
/// `X.experts.0.gate_proj`, `.0.up_proj` and `.0.down_proj` get as layers of class `FusedMoE`
/// (`get_scheme_dict`: the ignore list, then `find_matched_target`). All three must agree; all
/// ignored: unquantized, `ignored_by` the entry that ignored the first. `ignored(name)`: the
/// ignore step of one name (an ignore_step). Agreement is judged by group, where vLLM compares the
/// groups' scheme dicts: two groups with identical arguments would agree there.
template <class Ignored>
scheme_match vllm_ct_fused_moe(std::string_view module, mixed_index const& mx, Ignored const& ignored,
                               std::optional<std::string>& ignored_by) {
  std::array<std::optional<std::size_t>, 3> groups;  // per projection; nullopt: ignored
  scheme_match last;
  std::size_t i = 0;
  for (char const* proj : {".0.gate_proj", ".0.up_proj", ".0.down_proj"}) {
    std::string const name = std::string(module) + proj;
    ignore_step const step = ignored(name);
    if (step.error) {
      scheme_match failed;
      failed.error = step.error;
      return failed;
    }
    if (step.skipped) {
      if (!ignored_by) {
        ignored_by = step.rule;
      }
      last = {};
    } else {
      last = mx.ct_engine(name, "FusedMoE", false);
      if (last.error) {
        return last;
      }
      groups[i] = last.entry;
    }
    ++i;
  }
  if (groups[0] != groups[2] || groups[1] != groups[2]) {
    scheme_match split;
    split.error = "ValueError: All MoE projections need to have same quantization scheme but found multiple";
    return split;
  }
  return last;  // down_proj's, the dict vLLM keeps
}

/// The decision of a mixed-precision reader (qtl/rules/mixed.hpp) from `d`, the decision its
/// ignore or exclude list gave (`d.skipped`, `d.error`): the scheme of the matched group or
/// `quantized_layers` entry replaces the config's base weights. `mx`: the config's index;
/// `ignored`: the compressed-tensors engines' ignore step for another name (vllm_ct_fused_moe).
template <class Ignored>
void apply_mixed(quant_config const& cfg, consumer c, std::string_view module, layer_kind kind, mixed_index const& mx,
                 Ignored const& ignored, decision& d) {
  auto const clear = [&] {
    d.bits.reset();
    d.group_size.reset();
    d.desc_act.reset();
    d.sym.reset();
    d.quant_type.reset();
  };
  auto const take = [&](weight_params const& w, std::string scheme) {
    d.bits = w.bits;
    d.group_size = w.group_size;
    d.desc_act.reset();
    d.sym = w.sym;
    d.quant_type = w.quant_type;
    d.scheme = std::move(scheme);
  };
  if (cfg.family == quant_family::compressed_tensors) {
    bool const library = c == consumer::compressed_tensors;
    if (!library && kind == layer_kind::lm_head) {
      // ParallelLMHead is no LinearBase: the engines' compressed-tensors config leaves it be.
      clear();
      d.skipped = true;
      d.rule.reset();
      d.error.reset();
      return;
    }
    bool const fused_moe = !library && kind == layer_kind::moe;
    if (fused_moe && c == consumer::vllm_compressed_tensors) {
      d.skipped = false;  // vLLM asks the ignore list about the experts' projections, not the layer
      d.error.reset();
      d.rule.reset();
    }
    if (d.skipped || d.error) {
      return;
    }
    clear();
    if (fused_moe && c == consumer::sglang_compressed_tensors) {
      d.error =
          "qtl::unsupported_error: sglang's scheme of a fused MoE layer under several config groups is not "
          "modelled (decide the experts' own linear layers)";
      return;
    }
    std::optional<std::string> ignored_by;
    scheme_match const m = fused_moe ? vllm_ct_fused_moe(module, mx, ignored, ignored_by)
                           : library ? mx.ct_library(module, kind != layer_kind::moe)
                                     : mx.ct_engine(module, engine_linear_class(module, cfg.packed_modules_mapping),
                                                    c == consumer::sglang_compressed_tensors);
    if (m.error) {
      d.error = m.error;
      return;
    }
    if (!m.found()) {
      d.skipped = true;  // the library: no target, no scheme; vLLM's MoE: every projection ignored
      d.rule = ignored_by;
      return;
    }
    ct_config_group const& g = cfg.config_groups[m.entry];
    d.rule = m.rule;
    std::string const format = g.format.empty() ? cfg.format : g.format;
    std::string scheme = g.name + " (" + format + ")";
    if (!g.has_weights) {
      d.skipped = true;  // no weight quantization: vLLM falls back to the unquantized method
      d.scheme = std::move(scheme);
      return;
    }
    if (c == consumer::sglang_compressed_tensors && cfg.format == "mixed-precision") {
      // sglang picks the scheme by the top-level format, which names none of its schemes.
      d.error = "NotImplementedError: No compressed-tensors compatible scheme was found.";
      d.scheme = std::move(scheme);
      return;
    }
    take(ct_group_weights(g), std::move(scheme));
    return;
  }
  bool const vllm = c == consumer::vllm_modelopt;
  scheme_match const m = mx.modelopt(module, vllm);
  if (!vllm && m.error) {
    clear();
    d.error = m.error;  // sglang resolves the algorithm before it asks the exclude list
    return;
  }
  if (!vllm && kind == layer_kind::lm_head) {
    clear();
    d.skipped = true;  // sglang's ParallelLMHead is no LinearBase
    return;
  }
  if (d.skipped || d.error) {
    return;
  }
  clear();
  if (m.error) {
    d.error = m.error;
    return;
  }
  if (!m.found()) {
    d.skipped = true;  // not in quantized_layers: unquantized
    return;
  }
  std::string const algo = ascii_upper(cfg.quantized_layers[m.entry].quant_algo);
  d.rule = m.rule;
  bool const loads = algo == "FP8" || algo == "NVFP4" || (vllm && algo == "W4A16_NVFP4");
  if (!loads) {
    d.skipped = true;
    d.scheme = algo + " (no method for it in this loader: built unquantized)";
    return;
  }
  take(modelopt_algo_weights(algo, modelopt_mixed_nvfp4_group(cfg, vllm)), algo);
}

}  // namespace detail

}  // namespace qtl
