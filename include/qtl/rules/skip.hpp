#pragma once
/// \file
/// Skip lists: sglang's `is_layer_skipped` (the reference, dotted-boundary matching with the
/// fused-shard expansion and the fallback fused map) and vLLM's `is_layer_skipped` (exact list
/// membership or plain substring). Both are `constexpr`: a skip list known at compile time is
/// checked with `static_assert`, and the same functions run on lists read from a config.
///
/// Name spaces (`docs/spec/matchers.md` §2.1): the engine's module names are *fused*
/// (`model.layers.0.self_attn.qkv_proj`) while checkpoints list *shards* (`...q_proj`). A fused
/// name is turned into one name per shard and every shard must agree:
///
///     prefix  model.layers.0.self_attn.qkv_proj      proj = last component = "qkv_proj"
///     shards  model.layers.0.self_attn.q_proj        (prefix.replace("qkv_proj", "q_proj"))
///             model.layers.0.self_attn.k_proj
///             model.layers.0.self_attn.v_proj
///     all skipped -> skipped; none skipped -> quantized; some -> the reference raises ValueError
///
/// The reference builds a shard name with Python's `str.replace`, which replaces *every*
/// occurrence of the fused name (`shard_naming::replace_all`, the default);
/// `shard_naming::last_component` replaces only the last component, the safe variant.

#include <array>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <qtl/error.hpp>
#include <qtl/fixed_string.hpp>
#include <qtl/match/module_path.hpp>

namespace qtl {

/// One fused module and its shards, e.g. `{"qkv_proj", {"q_proj", "k_proj", "v_proj"}}`.
/// Functions taking a fused mapping accept any range whose elements have `.first` (convertible
/// to `std::string_view`) and `.second` (a range of such), so `std::vector<std::pair<std::string,
/// std::vector<std::string>>>` from a config works as well as a `constexpr` array of these.
using fused_entry = std::pair<std::string_view, std::span<std::string_view const>>;

/// An empty fused mapping (the reference's default `MappingProxyType({})`).
using fused_mapping_view = std::span<fused_entry const>;

namespace detail {
inline constexpr std::string_view fallback_qkv_shards[] = {"q_proj", "k_proj", "v_proj"};
inline constexpr std::string_view fallback_gate_up_shards[] = {"gate_proj", "up_proj"};
}  // namespace detail

/// The reference's `_FALLBACK_FUSED_SHARDS`: used by sglang's `is_layer_skipped` whenever the
/// layer's last component is not a key of the given mapping (typical for HF FP8 configs, which
/// ship no `packed_modules_mapping`).
inline constexpr std::array<fused_entry, 2> fallback_fused_shards = {{
    {"qkv_proj", detail::fallback_qkv_shards},
    {"gate_up_proj", detail::fallback_gate_up_shards},
}};

/// How a shard name is derived from a fused module name.
enum class shard_naming {
  replace_all,     ///< Python `prefix.replace(proj, shard)`: every occurrence (the reference)
  last_component,  ///< only the last dotted component is replaced (safe variant)
};

/// The longest module name (after shard substitution) the rules handle: longer names are a
/// `qtl::value_error` (real module names are under 200 characters).
inline constexpr std::size_t max_module_name = 1024;

/// "No rule": the index reported when no list entry decided.
inline constexpr std::size_t no_rule = static_cast<std::size_t>(-1);

/// What a skip check found, without throwing: the reference's exceptions become flags, so that
/// the decision record of `qtl/rules/consumers.hpp` can report the error the consumer raises.
struct skip_outcome {
  bool skipped = false;
  /// Some but not all shards of a fused layer are skipped (the reference raises `ValueError`).
  bool mixed_shards = false;
  /// The fused mapping lists no shard for the layer (the reference's `assert is_skipped is not
  /// None` fails: `AssertionError`).
  bool no_shards = false;
  /// Index in the list of the entry that decided (for a fused layer: the entry that skipped the
  /// first shard), or `no_rule`.
  std::size_t rule = no_rule;

  constexpr bool failed() const { return mixed_shards || no_shards; }
  friend constexpr bool operator==(skip_outcome const&, skip_outcome const&) = default;
};

/// The reference's message for `mixed_shards` (sglang and vLLM `is_layer_skipped`).
inline std::string mixed_shards_message(std::string_view prefix) {
  return "Detected some but not all shards of " + std::string(prefix) +
         " are quantized. All shards of fused layers to have the same precision.";
}

namespace detail {

using module_name = static_string<max_module_name>;

[[noreturn]] inline void throw_module_name_too_long(std::string_view prefix) {
  throw value_error("qtl::rules: module name '" + std::string(prefix) + "' is longer than " +
                    std::to_string(max_module_name) + " characters after shard substitution");
}

/// `s.split(".")[-1]`.
constexpr std::string_view last_component(std::string_view s) {
  std::size_t const dot = s.rfind('.');
  return dot == std::string_view::npos ? s : s.substr(dot + 1);
}

/// Python `s.replace(from, to)` (every non-overlapping occurrence, left to right; an empty
/// `from` inserts `to` before every character and at the end, as Python does).
constexpr module_name py_replace(std::string_view s, std::string_view from, std::string_view to) {
  module_name out;
  auto const put = [&](std::string_view piece) {
    if (out.size() + piece.size() > max_module_name) {
      throw_module_name_too_long(s);
    }
    out.append(piece);
  };
  if (from.empty()) {
    for (char const& c : s) {
      put(to);
      put(std::string_view(&c, 1));
    }
    put(to);
    return out;
  }
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t const hit = s.find(from, pos);
    if (hit == std::string_view::npos) {
      put(s.substr(pos));
      break;
    }
    put(s.substr(pos, hit - pos));
    put(to);
    pos = hit + from.size();
  }
  return out;
}

/// The shard name of `prefix` whose last component is `proj`.
constexpr module_name shard_name(std::string_view prefix, std::string_view proj, std::string_view shard,
                                 shard_naming naming) {
  if (naming == shard_naming::replace_all) {
    return py_replace(prefix, proj, shard);
  }
  module_name out;
  std::string_view const head = prefix.substr(0, prefix.size() - proj.size());
  if (head.size() + shard.size() > max_module_name) {
    throw_module_name_too_long(prefix);
  }
  out.append(head);
  out.append(shard);
  return out;
}

/// The entry of `mapping` whose fused name is `proj`, or nullptr.
template <class Mapping>
constexpr auto const* find_fused(Mapping const& mapping, std::string_view proj) {
  for (auto const& entry : mapping) {
    if (std::string_view(entry.first) == proj) {
      return &entry;
    }
  }
  return static_cast<std::remove_cvref_t<decltype(*std::begin(mapping))> const*>(nullptr);
}

/// Applies `find(name) -> index or no_rule` to every shard name; all shards must agree.
template <class Shards, class Find>
constexpr skip_outcome shard_agreement(std::string_view prefix, std::string_view proj, Shards const& shards,
                                       shard_naming naming, Find&& find) {
  skip_outcome out;
  bool first = true;
  for (auto const& shard : shards) {
    module_name const name = shard_name(prefix, proj, std::string_view(shard), naming);
    std::size_t const rule = find(name.view());
    bool const skipped = rule != no_rule;
    if (first) {
      out.skipped = skipped;
      out.rule = rule;
      first = false;
    } else if (skipped != out.skipped) {
      out.mixed_shards = true;
      return out;
    }
  }
  out.no_shards = first;
  return out;
}

/// Index of the first entry of `list` for which `pred(entry)` holds, or `no_rule`.
template <class List, class Pred>
constexpr std::size_t find_entry(List const& list, Pred&& pred) {
  std::size_t i = 0;
  for (auto const& entry : list) {
    if (pred(std::string_view(entry))) {
      return i;
    }
    ++i;
  }
  return no_rule;
}

/// Index of the first entry equal to `name` (Python `name in list`), or `no_rule`.
template <class List>
constexpr std::size_t find_equal(List const& list, std::string_view name) {
  return find_entry(list, [&](std::string_view e) { return e == name; });
}

}  // namespace detail

/// The reference's loops over a skip list, one question each; every answer is the index of
/// the first entry (in list order) that answers yes, or `no_rule`. `qtl::skip_list_index`
/// (`qtl/rules/skip_index.hpp`) answers the same questions from hash tables and automata; the
/// `*_with` functions below take either.
template <class List>
struct linear_skip_finder {
  List const& list;
  /// `module_path_match(entry, name)`.
  constexpr std::size_t path(std::string_view name) const {
    return detail::find_entry(list, [&](std::string_view e) { return module_path_match(e, name); });
  }
  /// `entry == name`.
  constexpr std::size_t equal(std::string_view name) const { return detail::find_equal(list, name); }
  /// `entry in name` (a plain substring).
  constexpr std::size_t substring(std::string_view name) const {
    return detail::find_entry(list, [&](std::string_view e) { return name.find(e) != std::string_view::npos; });
  }
  /// `"experts" in entry and name in entry`.
  constexpr std::size_t experts_superstring(std::string_view name) const {
    return detail::find_entry(list, [&](std::string_view e) {
      return e.find("experts") != std::string_view::npos && e.find(name) != std::string_view::npos;
    });
  }
};
template <class List>
linear_skip_finder(List const&) -> linear_skip_finder<List>;

/// The reference's lookup of a fused name in a mapping (`mapping.get(proj)`, a scan).
template <class Mapping>
struct linear_fused_finder {
  Mapping const& mapping;
  constexpr auto const* operator()(std::string_view proj) const { return detail::find_fused(mapping, proj); }
};
template <class Mapping>
linear_fused_finder(Mapping const&) -> linear_fused_finder<Mapping>;

/// sglang's `is_layer_skipped(prefix, ignored_layers, fused_mapping)`, without throwing.
///
/// 1. `proj` = last component; the shards come from `fused` when it has `proj`, else from
///    `fallback_fused_shards` (even when `fused` is not empty).
/// 2. A fused layer: each shard name is skipped iff some entry `module_path_match`es it; all
///    shards must agree (`mixed_shards` otherwise). The fused name itself is never compared
///    (sglang#26213: a list naming `gate_up_proj` does not skip it).
/// 3. Otherwise: some entry `module_path_match`es `prefix`; then, if `"gate_up_proj"` occurs in
///    `prefix` and both `prefix` with it replaced by `gate_proj` and by `up_proj` are *literally*
///    in the list, skipped; else if `"experts"` occurs in `prefix`, also skipped when `prefix` is
///    a plain substring of an entry that contains `"experts"` (one listed expert leaf skips the
///    whole fused MoE).
template <class Finder, class FindFused>
constexpr skip_outcome sglang_skip_outcome_with(std::string_view prefix, Finder const& ignored,
                                                FindFused const& find_fused, shard_naming naming);

template <class Ignored, class Mapping = fused_mapping_view>
constexpr skip_outcome sglang_skip_outcome(std::string_view prefix, Ignored const& ignored, Mapping const& fused = {},
                                           shard_naming naming = shard_naming::replace_all) {
  return sglang_skip_outcome_with(prefix, linear_skip_finder{ignored}, linear_fused_finder{fused}, naming);
}

/// `sglang_skip_outcome` asking `ignored` (a `linear_skip_finder` or a `skip_list_index`) and
/// `find_fused(proj)` (the mapping's entry for a fused name, or null).
template <class Finder, class FindFused>
constexpr skip_outcome sglang_skip_outcome_with(std::string_view prefix, Finder const& ignored,
                                                FindFused const& find_fused, shard_naming naming) {
  std::string_view const proj = detail::last_component(prefix);
  auto const find_path = [&](std::string_view name) { return ignored.path(name); };
  if (auto const* entry = find_fused(proj)) {
    return detail::shard_agreement(prefix, proj, entry->second, naming, find_path);
  }
  if (auto const* entry = detail::find_fused(fallback_fused_shards, proj)) {
    return detail::shard_agreement(prefix, proj, entry->second, naming, find_path);
  }
  skip_outcome out;
  out.rule = find_path(prefix);
  out.skipped = out.rule != no_rule;
  if (prefix.find("gate_up_proj") != std::string_view::npos) {
    auto const gate = detail::py_replace(prefix, "gate_up_proj", "gate_proj");
    auto const up = detail::py_replace(prefix, "gate_up_proj", "up_proj");
    std::size_t const g = ignored.equal(gate.view());
    if (g != no_rule && ignored.equal(up.view()) != no_rule) {
      if (!out.skipped) {
        out.rule = g;
      }
      out.skipped = true;
    }
  } else if (prefix.find("experts") != std::string_view::npos && !out.skipped) {
    out.rule = ignored.experts_superstring(prefix);
    out.skipped = out.rule != no_rule;
  }
  return out;
}

/// sglang's `is_layer_skipped`, exactly as the reference (see `sglang_skip_outcome`): throws
/// `qtl::value_error` with the reference's message when some but not all shards are skipped,
/// and when the mapping lists no shard for the layer.
template <class Ignored, class Mapping = fused_mapping_view>
constexpr bool is_layer_skipped(std::string_view prefix, Ignored const& ignored, Mapping const& fused = {},
                                shard_naming naming = shard_naming::replace_all) {
  skip_outcome const out = sglang_skip_outcome(prefix, ignored, fused, naming);
  if (out.mixed_shards) {
    throw value_error(mixed_shards_message(prefix));
  }
  if (out.no_shards) {
    throw value_error("qtl::is_layer_skipped: the fused mapping lists no shard for '" + std::string(prefix) +
                      "' (the reference fails an assertion)");
  }
  return out.skipped;
}

/// `is_layer_skipped` over a braced list: `is_layer_skipped(p, {"lm_head", "mlp.gate"})`.
template <class Mapping = fused_mapping_view>
constexpr bool is_layer_skipped(std::string_view prefix, std::initializer_list<std::string_view> ignored,
                                Mapping const& fused = {}, shard_naming naming = shard_naming::replace_all) {
  return is_layer_skipped(prefix, std::span<std::string_view const>(ignored.begin(), ignored.size()), fused, naming);
}

/// How vLLM's `is_layer_skipped` compares a name with the list.
enum class vllm_skip_match {
  exact,      ///< `prefix in ignored_layers` (default; FP8 family, ModelOpt step 1)
  substring,  ///< `any(ignored in prefix)` (`skip_with_substr=True`: newer AWQ)
};

template <class Finder, class FindFused>
constexpr skip_outcome vllm_skip_outcome_with(std::string_view prefix, Finder const& ignored,
                                              FindFused const& find_fused, vllm_skip_match mode,
                                              shard_naming naming);

/// vLLM's `quant_utils.is_layer_skipped(prefix, ignored_layers, fused_mapping,
/// skip_with_substr)` (revision of `docs/spec/matchers.md` §2.2), without throwing:
/// - fused (only when `fused` has the last component; no fallback map): shard names must agree;
/// - else, in exact mode, a prefix containing `"experts"` is skipped iff it is a substring of an
///   entry containing `"experts"` (the entry's exact membership is subsumed);
/// - else membership (exact) or substring.
/// The fused name itself is not compared (before vLLM PR #43981).
template <class Ignored, class Mapping = fused_mapping_view>
constexpr skip_outcome vllm_skip_outcome(std::string_view prefix, Ignored const& ignored, Mapping const& fused = {},
                                         vllm_skip_match mode = vllm_skip_match::exact,
                                         shard_naming naming = shard_naming::replace_all) {
  return vllm_skip_outcome_with(prefix, linear_skip_finder{ignored}, linear_fused_finder{fused}, mode, naming);
}

/// `vllm_skip_outcome` asking `ignored` (a `linear_skip_finder` or a `skip_list_index`) and
/// `find_fused(proj)`.
template <class Finder, class FindFused>
constexpr skip_outcome vllm_skip_outcome_with(std::string_view prefix, Finder const& ignored,
                                              FindFused const& find_fused, vllm_skip_match mode,
                                              shard_naming naming) {
  auto const find = [&](std::string_view name) {
    return mode == vllm_skip_match::exact ? ignored.equal(name) : ignored.substring(name);
  };
  std::string_view const proj = detail::last_component(prefix);
  if (auto const* entry = find_fused(proj)) {
    return detail::shard_agreement(prefix, proj, entry->second, naming, find);
  }
  skip_outcome out;
  if (mode == vllm_skip_match::exact && prefix.find("experts") != std::string_view::npos) {
    out.rule = ignored.experts_superstring(prefix);
  } else {
    out.rule = find(prefix);
  }
  out.skipped = out.rule != no_rule;
  return out;
}

/// vLLM's `is_layer_skipped`; throws `qtl::value_error` as vLLM raises `ValueError`.
template <class Ignored, class Mapping = fused_mapping_view>
constexpr bool vllm_is_layer_skipped(std::string_view prefix, Ignored const& ignored, Mapping const& fused = {},
                                     vllm_skip_match mode = vllm_skip_match::exact,
                                     shard_naming naming = shard_naming::replace_all) {
  skip_outcome const out = vllm_skip_outcome(prefix, ignored, fused, mode, naming);
  if (out.mixed_shards) {
    throw value_error(mixed_shards_message(prefix));
  }
  if (out.no_shards) {
    throw value_error("qtl::vllm_is_layer_skipped: the fused mapping lists no shard for '" + std::string(prefix) + "'");
  }
  return out.skipped;
}

/// The legacy AWQ rule `is_layer_skipped_awq` (sglang, older vLLM): skipped iff some entry is a
/// plain substring of `prefix` (`gate` skips `mlp.gate_up_proj`). Returns the entry's index or
/// `no_rule`.
template <class Ignored>
constexpr std::size_t awq_skip_rule(std::string_view prefix, Ignored const& ignored) {
  return detail::find_entry(ignored, [&](std::string_view e) { return prefix.find(e) != std::string_view::npos; });
}

}  // namespace qtl
