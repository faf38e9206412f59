#pragma once
/// \file
/// Mixed-precision configs: which entry of the config gives a module its scheme, as each reader
/// finds it. Two kinds of config mix schemes:
///
/// - compressed-tensors with several `config_groups` (top-level `"format": "mixed-precision"`,
///   each group with its own `format`): a module takes the group of the target that matches it;
///   targets of different groups may overlap, and the readers break the tie differently;
/// - ModelOpt `quant_algo: MIXED_PRECISION`: a `quantized_layers` map gives each module its
///   algorithm (`FP8`, `NVFP4`, `W4A16_NVFP4`, `MXFP8`, `FP8_PB_WO`, ...).
///
/// `mixed_index` compiles a config's groups or map once; its questions answer with a
/// `scheme_match` (the entry, the target or key that decided, or the exception the reader
/// raises). The readers, their sources and revisions: docs/spec/mixed_precision.md.
///
/// | reader                         | finds the scheme of module M by                               |
/// |--------------------------------|---------------------------------------------------------------|
/// | compressed-tensors library     | targets sorted (non-regex first, then by text): the first     |
/// | (`match_targets`)              | equal to M or `re:` matching it, else the first naming a      |
/// |                                | class of M (`Linear`); none: M is not quantized               |
/// | vLLM / sglang                  | targets in config order (a target repeated in a later group   |
/// | (`find_matched_target`)        | belongs to that group): first equal or `re:`-matching the     |
/// |                                | engine's (fused) name; else first contained, case-insensitive,|
/// |                                | in the layer's class name; else the fused layer's shards, all |
/// |                                | matched, the first shard's target; none: an error             |
/// | vLLM ModelOpt mixed            | the key M (or `lm_head`, or M with `language_model.` moved);  |
/// |                                | else the shards' keys (one algorithm, else ValueError); else  |
/// |                                | the first key under `M.`                                      |
/// | sglang `modelopt_mixed`        | the same without the name variants                            |

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/match/regex.hpp>
#include <qtl/rules/config.hpp>
#include <qtl/rules/consumer.hpp>
#include <qtl/rules/skip.hpp>

namespace qtl {

/// ASCII `s.upper()` (ModelOpt's readers upper-case every `quant_algo`).
inline std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') {
      c = static_cast<char>(c - 'a' + 'A');
    }
  }
  return out;
}

/// Whether the config gives its modules different schemes: compressed-tensors with `"format":
/// "mixed-precision"` or more than one config group, ModelOpt with `quant_algo` MIXED_PRECISION.
inline bool is_mixed(quant_config const& cfg) {
  if (cfg.family == quant_family::compressed_tensors) {
    return cfg.format == "mixed-precision" || cfg.config_groups.size() > 1;
  }
  return cfg.family == quant_family::modelopt && ascii_upper(cfg.quant_algo) == "MIXED_PRECISION";
}

/// How a reader found a module's scheme.
struct scheme_match {
  std::size_t entry = no_rule;       ///< index in `config_groups` / `quantized_layers`, or no_rule: none
  std::string rule;                  ///< the target or key that decided, as written
  std::optional<std::string> error;  ///< what the reader raises for the module (`ValueError: ...`)

  bool found() const { return entry != no_rule; }
};

/// The class name an engine gives a linear layer, which class-name targets (`Linear`) match:
/// `QKVParallelLinear` for `qkv_proj`, `MergedColumnParallelLinear` for the other fused names of
/// `fused`, `RowParallelLinear` for the usual output projections, `ColumnParallelLinear`
/// otherwise. Every one contains `Linear`, the only class name real configs target.
inline std::string engine_linear_class(std::string_view module, packed_mapping const& fused) {
  std::string_view const leaf = detail::last_component(module);
  if (leaf == "qkv_proj") {
    return "QKVParallelLinear";
  }
  for (auto const& [name, shards] : fused) {
    if (leaf == name) {
      return "MergedColumnParallelLinear";
    }
  }
  for (std::string_view const row : {"o_proj", "down_proj", "out_proj", "dense", "wo", "c_proj", "w2"}) {
    if (leaf == row) {
      return "RowParallelLinear";
    }
  }
  return "ColumnParallelLinear";
}

/// The fused MoE layer an engine builds from a checkpoint's expert linear layer:
/// `X.experts.E.leaf` (E a number) -> `X.experts`; nothing for other names.
inline std::optional<std::string> moe_layer_of(std::string_view module) {
  std::size_t const at = module.rfind(".experts.");
  if (at == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view const rest = module.substr(at + 9);  // "E.leaf"
  std::size_t const dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos || rest.find('.', dot + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  for (char const ch : rest.substr(0, dot)) {
    if (ch < '0' || ch > '9') {
      return std::nullopt;
    }
  }
  return std::string(module.substr(0, at + 8));
}

/// A config's mixed-precision vocabulary compiled once: compressed-tensors targets and ModelOpt
/// keys in hash tables, regex targets compiled. Holds views of the config, which must outlive it
/// unchanged. Immutable; safe to share between threads.
class mixed_index {
 public:
  explicit mixed_index(quant_config const& cfg) : cfg_(&cfg) {
    // The readers' {target: group} dict: a target keeps its first position, and its group is
    // the last that lists it.
    std::unordered_map<std::string_view, std::size_t> pos;
    for (std::size_t g = 0; g != cfg.config_groups.size(); ++g) {
      for (std::string const& t : cfg.config_groups[g].targets) {
        auto const [it, fresh] = pos.emplace(t, targets_.size());
        if (fresh) {
          targets_.push_back({t, g, nullptr});
        } else {
          targets_[it->second].group = g;
        }
      }
    }
    for (std::size_t i = 0; i != targets_.size(); ++i) {
      std::string_view const t = targets_[i].text;
      if (t.starts_with("re:")) {
        try {
          targets_[i].re = std::make_shared<regex const>(t.substr(3), regex_verbs::match);
        } catch (error const&) {
          // Python raises when the pattern is first matched: `matches` reruns it there to throw.
        }
      } else {
        exact_.emplace(t, i);
      }
    }
    sorted_.resize(targets_.size());
    for (std::size_t i = 0; i != sorted_.size(); ++i) {
      sorted_[i] = i;
    }
    // compressed-tensors' match_targets: sorted(targets, key=lambda x: ("re:" in x, x)).
    std::sort(sorted_.begin(), sorted_.end(), [&](std::size_t a, std::size_t b) {
      std::string const& x = targets_[a].text;
      std::string const& y = targets_[b].text;
      bool const rx = x.find("re:") != std::string::npos;
      bool const ry = y.find("re:") != std::string::npos;
      return rx != ry ? ry : x < y;
    });
    for (std::size_t i = 0; i != cfg.quantized_layers.size(); ++i) {
      keys_.emplace(cfg.quantized_layers[i].module, i);  // JSON keys are unique
      by_key_.emplace_back(cfg.quantized_layers[i].module, i);
    }
    std::sort(by_key_.begin(), by_key_.end());
  }

  mixed_index(mixed_index const&) = delete;
  mixed_index& operator=(mixed_index const&) = delete;

  /// The compressed-tensors library (`apply_quantization_config` with `match_targets`): the
  /// group of a module of class `Linear` (`linear`) or of another class (never quantized).
  scheme_match ct_library(std::string_view name, bool linear) const {
    scheme_match m;
    if (!linear) {
      return m;
    }
    for (std::size_t const i : sorted_) {
      if (matches(i, name)) {
        return found(m, i);
      }
    }
    for (std::size_t const i : sorted_) {
      // _match_class: the target is the name of a class in the module's MRO (Linear, Module).
      if (targets_[i].text == "Linear" || targets_[i].text == "Module") {
        return found(m, i);
      }
    }
    return m;
  }

  /// vLLM's and sglang's `find_matched_target(name, layer, targets, fused)` (`class_name`: the
  /// layer's class, `engine_linear_class`, or `FusedMoE`); `sglang` only changes the error of a
  /// layer no target matches (vLLM's `target_scheme_map[None]` raises KeyError, sglang raises
  /// ValueError). For `FusedMoE` the map has one more key, last: vLLM's
  /// `_add_fused_moe_to_target_scheme_map` adds `FusedMoE` with the group of a `Linear` target.
  scheme_match ct_engine(std::string_view name, std::string_view class_name, bool sglang) const {
    scheme_match m;
    if (std::size_t const i = first_match(name); i != no_rule) {
      return found(m, i);
    }
    for (std::size_t i = 0; i != targets_.size(); ++i) {
      std::string_view const t = targets_[i].text;
      bool const hit = t.starts_with("re:") ? matches(i, class_name) : detail::icontains(class_name, t);
      if (hit) {
        return found(m, i);
      }
    }
    if (class_name == "FusedMoE") {
      if (auto const it = exact_.find("Linear"); it != exact_.end()) {
        return found(m, it->second);
      }
    }
    // _match_fused_layer: the first fused name the layer ends with; every shard must match.
    for (auto const& [fused, shards] : cfg_->packed_modules_mapping) {
      if (!name.ends_with(fused)) {
        continue;
      }
      std::size_t first = no_rule;
      bool all = !shards.empty();
      for (std::string const& s : shards) {
        std::size_t const i = first_match(detail::py_replace(name, fused, s).view());
        all = all && i != no_rule;
        if (first == no_rule) {
          first = i;
        }
      }
      if (all) {
        return found(m, first);
      }
      break;
    }
    m.error = sglang ? "ValueError: Unable to find matching target for " + std::string(name) +
                           " in the compressed-tensors config."
                     : std::string("KeyError: None");
    return m;
  }

  /// ModelOpt `MIXED_PRECISION`: the `quantized_layers` entry of the engine's layer `prefix`
  /// (`_resolve_quant_algo`); `vllm` adds vLLM's name variants. A fused layer whose shards list
  /// different algorithms is the readers' ValueError.
  scheme_match modelopt(std::string_view prefix, bool vllm) const {
    scheme_match m;
    std::vector<std::string> const cands = vllm ? candidates(prefix) : std::vector<std::string>{std::string(prefix)};
    for (std::string const& c : cands) {
      if (auto const it = keys_.find(c); it != keys_.end()) {
        return found_key(m, it->second);
      }
    }
    std::string_view const proj = detail::last_component(prefix);
    packed_mapping const& fused = cfg_->packed_modules_mapping;
    auto const entry = std::find_if(fused.begin(), fused.end(), [&](auto const& e) { return e.first == proj; });
    if (entry != fused.end()) {
      std::size_t const dot = prefix.rfind('.');
      std::string_view const base = dot == std::string_view::npos ? prefix : prefix.substr(0, dot);
      std::set<std::string> algos;
      std::size_t first = no_rule;
      for (std::string const& b : vllm ? candidates(base) : std::vector<std::string>{std::string(base)}) {
        for (std::string const& shard : entry->second) {
          if (auto const it = keys_.find(b + "." + shard); it != keys_.end()) {
            if (cfg_->quantized_layers[it->second].quant_algo.empty()) {
              return found_key(m, it->second);  // info["quant_algo"] raises
            }
            algos.insert(ascii_upper(cfg_->quantized_layers[it->second].quant_algo));
            first = first == no_rule ? it->second : first;
          }
        }
      }
      if (algos.size() > 1) {
        std::string set = "{";
        for (std::string const& a : algos) {
          set += (set.size() > 1 ? ", '" : "'") + a + "'";
        }
        m.error = "ValueError: Mixed quant_algo within fused layer " + std::string(prefix) + ": " + set +
                  "}. All shards must use the same quantization.";
        return m;
      }
      if (first != no_rule) {
        return found_key(m, first);
      }
    }
    for (std::string const& c : cands) {
      if (std::size_t const i = first_key_under(c + "."); i != no_rule) {
        return found_key(m, i);
      }
    }
    return m;
  }

 private:
  struct target {
    std::string text;
    std::size_t group;
    std::shared_ptr<regex const> re;  // null for names, and for a pattern that does not compile
  };

  quant_config const* cfg_;
  std::vector<target> targets_;                                   // dict order
  std::unordered_map<std::string_view, std::size_t> exact_;       // non-regex target -> its position
  std::vector<std::size_t> sorted_;                               // the library's order
  std::unordered_map<std::string_view, std::size_t> keys_;        // quantized_layers key -> index
  std::vector<std::pair<std::string_view, std::size_t>> by_key_;  // sorted keys

  /// `_is_equal_or_regex_match(value, target)` (and compressed-tensors' `match_name`).
  /// @throws the pattern's regex_error when it does not compile, as Python's re raises
  bool matches(std::size_t i, std::string_view value) const {
    target const& t = targets_[i];
    if (!std::string_view(t.text).starts_with("re:")) {
      return t.text == value;
    }
    return t.re ? t.re->match(value) : re_match(std::string_view(t.text).substr(3), value);
  }

  /// `_find_first_match(value, targets)`: the first target in dict order equal to or matching it.
  std::size_t first_match(std::string_view value) const {
    auto const it = exact_.find(value);
    std::size_t const exact = it == exact_.end() ? no_rule : it->second;
    for (std::size_t i = 0; i < targets_.size() && i < exact; ++i) {
      if (targets_[i].re || std::string_view(targets_[i].text).starts_with("re:")) {
        if (matches(i, value)) {
          return i;
        }
      }
    }
    return exact;
  }

  scheme_match& found(scheme_match& m, std::size_t i) const {
    m.entry = targets_[i].group;
    m.rule = targets_[i].text;
    return m;
  }
  scheme_match& found_key(scheme_match& m, std::size_t i) const {
    m.entry = i;
    m.rule = cfg_->quantized_layers[i].module;
    if (cfg_->quantized_layers[i].quant_algo.empty()) {
      m.error = "KeyError: 'quant_algo'";
    }
    return m;
  }

  /// The first key (in file order) that starts with `head`.
  std::size_t first_key_under(std::string const& head) const {
    std::size_t best = no_rule;
    auto it = std::lower_bound(by_key_.begin(), by_key_.end(), std::pair<std::string_view, std::size_t>(head, 0));
    for (; it != by_key_.end() && it->first.starts_with(head); ++it) {
      best = std::min(best, it->second);
    }
    return best;
  }

  /// vLLM's `_quantized_layer_prefix_candidates`: the prefix, `lm_head` for `*.lm_head`, and the
  /// prefix with `language_model.model.` and `model.language_model.` exchanged.
  static std::vector<std::string> candidates(std::string_view prefix) {
    std::vector<std::string> out{std::string(prefix)};
    auto const add = [&](std::string s) {
      if (std::find(out.begin(), out.end(), s) == out.end()) {
        out.push_back(std::move(s));
      }
    };
    if (prefix.ends_with(".lm_head")) {
      add("lm_head");
    }
    constexpr std::string_view a = "language_model.model.";
    constexpr std::string_view b = "model.language_model.";
    if (prefix.starts_with(a)) {
      add(std::string(b) + std::string(prefix.substr(a.size())));
    } else if (prefix.starts_with(b)) {
      add(std::string(a) + std::string(prefix.substr(b.size())));
    }
    return out;
  }
};

}  // namespace qtl
