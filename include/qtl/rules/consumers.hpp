#pragma once
/// \file
/// The consumers' dialects: one checkpoint config, read by many engines, each with its own
/// matching rules (`docs/spec/matchers.md` §2). `qtl::decide(config, consumer, module, kind)`
/// answers "what will sglang do with this layer, what will vLLM do"; `qtl::decide_all` asks
/// every consumer and `qtl::disagreements` says where they differ.
///
/// | consumer                   | list / field              | how an entry matches a module name      |
/// |----------------------------|---------------------------|-----------------------------------------|
/// | sglang_fp8                 | ignored_layers / m_t_n_c  | entries doubled with/without `model.`,  |
/// |                            |                           | then `is_layer_skipped` (dotted path)   |
/// | vllm_fp8                   | same                      | exact membership, fused shards agree,   |
/// |                            |                           | experts: name ⊂ an entry with "experts" |
/// | sglang_is_layer_skipped    | skip list                 | the reference `is_layer_skipped`        |
/// | sglang_awq                 | modules_to_not_convert    | plain substring (`is_layer_skipped_awq`)|
/// | vllm_awq                   | modules_to_not_convert    | substring, fused shards agree           |
/// | sglang_compressed_tensors  | ignore                    | `re:` re.match, else case-insensitive   |
/// |                            |                           | substring; fused shards agree           |
/// | vllm_compressed_tensors    | ignore                    | `re:` re.match, else exact; fused agree |
/// | compressed_tensors         | ignore                    | the library's `match_name`: `re:`       |
/// |                            |                           | re.match, else exact; a name ending in  |
/// |                            |                           | a fused suffix: any shard suffices      |
/// | sglang_modelopt            | ignore / exclude_modules  | is_layer_skipped, or glob->regex        |
/// |                            |                           | fullmatch on the path or any component, |
/// |                            |                           | or the MLA tail rule                    |
/// | vllm_modelopt              | same                      | exact+fused, substring, fnmatch         |
/// | fnmatch                    | same                      | `fnmatch.fnmatchcase(name, entry)`      |
/// | fnmatch_subtree            | skip list                 | fnmatch of the module or a subtree      |
/// | transformers_v4            | modules_to_not_convert    | leaf in list, or substring              |
/// | transformers_v4_bnb        | llm_int8_skip_modules     | leaf in list, `key.` ⊂ name, or equal   |
/// | transformers_v5            | modules_to_not_convert    | re.match(key + `\.`) / re.match(key) /  |
/// |                            |                           | endswith(key)                           |
/// | sglang_gptq, vllm_gptq     | dynamic (+ vLLM's         | `get_linear_quant_method`               |
/// |                            | modules_in_block_to_q.)   |                                         |
/// | sglang_auto_round          | extra_config              | exact key, else re.fullmatch            |
/// | vllm_auto_round            | extra_config              | exact key, else re.search               |
///
/// A consumer reads the config's skip list whatever family declared it (the question "what
/// would vLLM's FP8 loader do with this list" is legitimate for any list).
/// Python exceptions become the decision's `error` (`ValueError: ...`, `re.error: ...`); so do
/// QTL's own limits, prefixed `qtl::` (`qtl::regex_unsupported_error: ...`).

#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <qtl/error.hpp>
#include <qtl/group_size.hpp>
#include <qtl/match/glob.hpp>
#include <qtl/match/regex.hpp>
#include <qtl/rules/config.hpp>
#include <qtl/rules/consumer.hpp>
#include <qtl/rules/compiled_dynamic.hpp>
#include <qtl/rules/decision.hpp>
#include <qtl/rules/dynamic.hpp>
#include <qtl/rules/mixed.hpp>
#include <qtl/rules/skip.hpp>
#include <qtl/scalar_type.hpp>

namespace qtl {

/// The layer kind a module name suggests: `lm_head` for a last component `lm_head`, `moe` for
/// `experts`, `other` for embeddings (`embed_tokens`, `wte`), `linear` otherwise.
constexpr layer_kind infer_layer_kind(std::string_view module) {
  std::string_view const leaf = detail::last_component(module);
  if (leaf == "lm_head") {
    return layer_kind::lm_head;
  }
  if (leaf == "experts") {
    return layer_kind::moe;
  }
  if (detail::contains(leaf, "embed") || leaf == "wte" || leaf == "wpe") {
    return layer_kind::other;
  }
  return layer_kind::linear;
}

/// Options of `decide`.
struct decide_options {
  /// How shard names are derived from fused names (the reference: `replace_all`).
  shard_naming naming = shard_naming::replace_all;
  /// The GPTQ kernel family; by default `gptq_marlin` when `(bits, sym)` is in its `TYPE_MAP`
  /// and the group size is one Marlin takes (-1, 32, 64, 128), else `gptq` (as sglang and vLLM
  /// prefer Marlin when the config allows it).
  std::optional<gptq_kernel> kernel;
  /// The config's `dynamic` rules compiled once (`compiled_dynamic_rules(cfg.dynamic)`, built
  /// from the same config): the GPTQ consumers then find a layer's rule in one pass. Null: each
  /// call matches the rules one by one (`find_dynamic_rule`). The decision is the same.
  compiled_dynamic_rules const* dynamic = nullptr;
};

/// The unsigned integer storage type of a `bits`-wide symmetric (biased by 2^(bits-1)) or
/// asymmetric (zero-point) weight: uint4b8, uint8b128, uint4, ...; nothing outside 1..16 bits.
constexpr std::optional<scalar_type> integer_weight_type(std::int64_t bits, bool sym) {
  if (bits < 1 || bits > 16) {
    return std::nullopt;
  }
  scalar_type t{};
  t.mantissa = static_cast<std::uint8_t>(bits);
  t.bias = sym ? static_cast<std::int32_t>(std::int64_t{1} << (bits - 1)) : 0;
  return t;
}

/// The weight parameters of a quantized (not skipped) layer under the config's base settings.
struct weight_params {
  std::optional<std::int64_t> bits;
  std::optional<std::int64_t> group_size;
  std::optional<bool> desc_act;
  std::optional<bool> sym;
  std::optional<scalar_type> quant_type;
};

/// compressed-tensors weight arguments as weight parameters: `type` "float" 8 bits
/// `float8_e4m3fn`, 4 bits `float4_e2m1f`; integers their storage type (symmetric by default).
inline weight_params ct_weights(std::optional<std::int64_t> bits, std::optional<std::int64_t> group_size,
                                std::optional<bool> sym, std::string_view type) {
  weight_params w;
  w.bits = bits;
  w.group_size = group_size;
  w.sym = sym;
  if (bits) {
    if (type == "float") {
      if (*bits == 8) {
        w.quant_type = float8_e4m3fn;
      } else if (*bits == 4) {
        w.quant_type = float4_e2m1f;
      }
    } else {
      w.quant_type = integer_weight_type(*bits, sym.value_or(true));
    }
  }
  return w;
}

/// The base weight parameters of the config's family (FP8: 8 bits `float8_e4m3fn`; MXFP4: 4 bits,
/// group 32, `float4_e2m1f`; ModelOpt NVFP4: 4 bits, group 16 unless given, `float4_e2m1f`;
/// integer families: their `bits`/`group_size`/`sym` and the integer storage type).
inline weight_params base_weights(quant_config const& cfg) {
  weight_params w;
  switch (cfg.family) {
    case quant_family::fp8:
      w.bits = 8;
      w.quant_type = float8_e4m3fn;
      break;
    case quant_family::mxfp4:
      w.bits = 4;
      w.group_size = 32;
      w.quant_type = float4_e2m1f;
      break;
    case quant_family::modelopt:
      if (cfg.quant_algo == "NVFP4" || cfg.quant_algo == "nvfp4") {
        w.bits = 4;
        w.group_size = cfg.group_size.value_or(16);
        w.quant_type = float4_e2m1f;
      } else if (cfg.quant_algo == "FP8" || cfg.quant_algo == "fp8" || cfg.quant_algo == "MXFP8") {
        w.bits = 8;
        w.quant_type = float8_e4m3fn;
        if (cfg.quant_algo == "MXFP8") {
          w.group_size = 32;
        }
      } else {
        w.bits = cfg.bits;
        w.group_size = cfg.group_size;
      }
      break;
    case quant_family::compressed_tensors:
      w = ct_weights(cfg.bits, cfg.group_size, cfg.sym, cfg.weight_type.value_or("int"));
      w.desc_act = cfg.desc_act;
      break;
    case quant_family::awq: {
      w.bits = cfg.bits.value_or(4);
      w.group_size = cfg.group_size.value_or(128);
      bool const zp = cfg.zero_point.value_or(true);
      w.sym = !zp;
      w.quant_type = integer_weight_type(*w.bits, !zp);
      break;
    }
    case quant_family::gptq:
    case quant_family::auto_round:
      w.bits = cfg.bits.value_or(4);
      w.group_size = cfg.group_size.value_or(128);
      w.sym = cfg.sym.value_or(true);
      w.desc_act = cfg.desc_act.value_or(false);
      w.quant_type = integer_weight_type(*w.bits, *w.sym);
      break;
  }
  return w;
}

/// The weight parameters of a compressed-tensors config group.
inline weight_params ct_group_weights(ct_config_group const& g) {
  return ct_weights(g.num_bits, g.group_size, g.symmetric, g.type);
}

/// The weight parameters of a ModelOpt algorithm (upper case): FP8 (`FP8`, `FP8_PB_WO`,
/// `FP8_PER_CHANNEL_PER_TOKEN`) 8 bits `float8_e4m3fn`, MXFP8 also group 32; NVFP4 and
/// W4A16_NVFP4 4 bits `float4_e2m1f` in groups of `nvfp4_group`; nothing for others.
inline weight_params modelopt_algo_weights(std::string const& algo, std::int64_t nvfp4_group) {
  weight_params w;
  if (algo == "FP8" || algo == "FP8_PB_WO" || algo == "FP8_PER_CHANNEL_PER_TOKEN" || algo == "MXFP8") {
    w.bits = 8;
    w.quant_type = float8_e4m3fn;
    if (algo == "MXFP8") {
      w.group_size = 32;
    }
  } else if (algo == "NVFP4" || algo == "W4A16_NVFP4") {
    w.bits = 4;
    w.group_size = nvfp4_group;
    w.quant_type = float4_e2m1f;
  }
  return w;
}

/// The NVFP4 group size a ModelOpt mixed reader gives every NVFP4 layer: vLLM the config's
/// `group_size`, else the first NVFP4 or W4A16_NVFP4 entry's (default 16); sglang the first
/// NVFP4 entry's (default 16).
inline std::int64_t modelopt_mixed_nvfp4_group(quant_config const& cfg, bool vllm) {
  if (vllm && cfg.group_size) {
    return *cfg.group_size;
  }
  for (modelopt_layer const& e : cfg.quantized_layers) {
    std::string const a = ascii_upper(e.quant_algo);
    if (a == "NVFP4" || (vllm && a == "W4A16_NVFP4")) {
      return e.group_size.value_or(16);
    }
  }
  return 16;
}

/// The GPTQ parameters of the config (the reference's config object before any override).
inline gptq_params gptq_base_params(quant_config const& cfg, std::optional<gptq_kernel> kernel) {
  gptq_params p;
  p.bits = cfg.bits.value_or(4);
  p.group_size = cfg.group_size.value_or(128);
  p.desc_act = cfg.desc_act.value_or(false);
  p.sym = cfg.sym.value_or(true);
  p.lm_head_quantized = cfg.lm_head_quantized;
  bool const marlin_ok = gptq_marlin_type(p.bits, p.sym).has_value() && is_gptq_group_size(p.group_size);
  p.kernel = kernel.value_or(marlin_ok ? gptq_kernel::gptq_marlin : gptq_kernel::gptq);
  p.pack_factor = p.bits > 0 ? 32 / p.bits : 0;
  p.quant_type =
      p.kernel == gptq_kernel::gptq_marlin ? gptq_marlin_type(p.bits, p.sym) : integer_weight_type(p.bits, p.sym);
  return p;
}

namespace detail {

inline std::string py_list_repr(std::vector<std::string> const& items) {
  std::string out = "[";
  for (std::size_t i = 0; i != items.size(); ++i) {
    out += (i ? ", '" : "'") + items[i] + "'";
  }
  return out + "]";
}

inline std::string regex_error_text(regex_error const& e) { return std::string("re.error: ") + e.what(); }

/// Fills a decision from a skip outcome over `list` (entries as written in the config).
inline void apply_skip(decision& d, skip_outcome const& o, std::vector<std::string> const& list, weight_params const& w,
                       std::string const& mixed_message) {
  if (o.mixed_shards) {
    d.error = mixed_message;
  } else if (o.no_shards) {
    d.error = "AssertionError: the fused mapping lists no shard for " + d.module;
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

/// The decision of a mixed-precision reader (qtl/rules/mixed.hpp) from `d`, the decision its
/// ignore or exclude list gave (`d.skipped`, `d.error`): the scheme of the matched group or
/// `quantized_layers` entry replaces the config's base weights. `mx`: the config's index.
inline void apply_mixed(quant_config const& cfg, consumer c, std::string_view module, layer_kind kind,
                        mixed_index const& mx, decision& d) {
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
    if (d.skipped || d.error) {
      return;
    }
    clear();
    if (!library && kind == layer_kind::moe) {
      d.error = "qtl::unsupported_error: the scheme of a fused MoE layer under several config groups is not "
                "modelled (decide the experts' own linear layers)";
      return;
    }
    scheme_match const m = library ? mx.ct_library(module, kind != layer_kind::moe)
                                   : mx.ct_engine(module, engine_linear_class(module, cfg.packed_modules_mapping),
                                                  c == consumer::sglang_compressed_tensors);
    if (m.error) {
      d.error = m.error;
      return;
    }
    if (!m.found()) {
      d.skipped = true;  // the library: no target, no scheme
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

/// The reference's way of asking a config's lists (`decide` without a `compiled_config`): a
/// scan of the list for every question, sglang's doubled FP8 list built for each call.
struct linear_config_index {
  quant_config const& cfg;

  linear_skip_finder<std::vector<std::string>> list() const { return {cfg.skip_list}; }
  template <class F>
  auto with_fp8_list(F&& f) const {
    std::vector<std::string> const doubled = detail::sglang_fp8_list(cfg.skip_list);
    return f(linear_skip_finder<std::vector<std::string>>{doubled});
  }
  linear_fused_finder<packed_mapping> fused() const { return {cfg.packed_modules_mapping}; }
  /// The config's mixed-precision index, built for this call.
  mixed_index mixed() const { return mixed_index(cfg); }
  /// The first `modules_in_block_to_quantize` entry that is a substring of `name`.
  std::size_t in_block(std::string_view name) const {
    return linear_skip_finder<std::vector<std::string>>{cfg.modules_in_block_to_quantize}.substring(name);
  }

  // The dialects' scans, one question each: the first skip-list entry (or extra_config key)
  // that answers yes, or no_rule. `qtl::compiled_config` answers the same from indexes.

  /// compressed-tensors' `_is_equal_or_regex_match(name, entry, check_contains)`.
  std::size_t ct_find(std::string_view name, bool check_contains) const {
    return detail::find_entry(cfg.skip_list,
                              [&](std::string_view e) { return detail::ct_entry_match(e, name, check_contains); });
  }
  /// compressed-tensors' library `match_name(name, entry, packed_modules_mapping)`.
  std::size_t ct_library(std::string_view name) const {
    return detail::find_entry(cfg.skip_list, [&](std::string_view e) {
      return detail::ct_match_name(name, e, cfg.packed_modules_mapping);
    });
  }
  /// sglang ModelOpt's `is_layer_excluded`.
  std::size_t sglang_modelopt(std::string_view prefix) const {
    return detail::sglang_modelopt_excluded(prefix, cfg.skip_list);
  }
  /// vLLM ModelOpt's substring and fnmatch steps.
  std::size_t vllm_modelopt(std::string_view prefix) const {
    return detail::vllm_modelopt_excluded(prefix, cfg.skip_list);
  }
  /// `fnmatch.fnmatchcase(module, entry)` (and of `entry + ".*"` with `subtree`).
  std::size_t fnmatch(std::string_view module, bool subtree) const {
    return detail::find_entry(cfg.skip_list,
                              [&](std::string_view e) { return detail::fnmatch_entry(e, module, subtree); });
  }
  /// transformers v4 bitsandbytes: `key == module or key + "." in module`.
  std::size_t transformers_v4_bnb(std::string_view module) const {
    return detail::find_entry(cfg.skip_list,
                              [&](std::string_view e) { return detail::transformers_v4_bnb_entry(e, module); });
  }
  /// transformers v5's `should_convert_module`.
  std::size_t transformers_v5(std::string_view module) const {
    return detail::find_entry(cfg.skip_list,
                              [&](std::string_view e) { return detail::transformers_v5_entry(e, module); });
  }
  /// The first `extra_config` key equal to `name`.
  std::size_t auto_round_exact(std::string_view name) const {
    for (std::size_t i = 0; i != cfg.extra_config.size(); ++i) {
      if (cfg.extra_config[i].key == name) {
        return i;
      }
    }
    return no_rule;
  }
  /// The first regex key of `extra_config` that hits `name` (`auto_round_regex_hit`).
  std::size_t auto_round_regex(std::string_view name, bool search) const {
    for (std::size_t i = 0; i != cfg.extra_config.size(); ++i) {
      std::string_view const key = cfg.extra_config[i].key;
      if (detail::auto_round_regex_key(key) && detail::auto_round_regex_hit(key, name, search)) {
        return i;
      }
    }
    return no_rule;
  }
  /// Whether some `block_name_to_quantize` entry is a prefix of `module`.
  bool in_blocks(std::string_view module) const {
    return detail::find_entry(cfg.block_name_to_quantize, [&](std::string_view b) { return module.starts_with(b); }) !=
           no_rule;
  }
  /// The indices of the `extra_config` keys that start with `module`, ascending.
  std::vector<std::size_t> keys_starting_with(std::string_view module) const {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i != cfg.extra_config.size(); ++i) {
      if (std::string_view(cfg.extra_config[i].key).starts_with(module)) {
        out.push_back(i);
      }
    }
    return out;
  }
};

/// `decide`, asking the config's lists through `ix` (`linear_config_index`, or the indexes of a
/// `compiled_config`): one body, so both give the same decision.
template <class Index>
decision decide_with(quant_config const& cfg, consumer c, std::string_view module, layer_kind kind,
                     decide_options const& opt, Index const& ix) {
  decision d;
  d.module = std::string(module);
  d.consumer = std::string(consumer_name(c));
  weight_params const w = base_weights(cfg);
  std::vector<std::string> const& list = cfg.skip_list;
  packed_mapping const& fused = cfg.packed_modules_mapping;
  bool const gptq_like = c == consumer::sglang_gptq || c == consumer::vllm_gptq;
  bool const auto_round_like = c == consumer::sglang_auto_round || c == consumer::vllm_auto_round;
  if (kind == layer_kind::other && !gptq_like && !auto_round_like) {
    d.skipped = true;  // the quantization method does not handle this kind of layer
    return d;
  }
  try {
    switch (c) {
      case consumer::sglang_fp8: {
        skip_outcome o = ix.with_fp8_list(
            [&](auto const& doubled) { return sglang_skip_outcome_with(module, doubled, ix.fused(), opt.naming); });
        if (o.rule != no_rule) {
          o.rule /= 2;
        }
        detail::apply_skip(d, o, list, w, detail::value_error_text(mixed_shards_message(module)));
        break;
      }
      case consumer::vllm_fp8:
        detail::apply_skip(d, vllm_skip_outcome_with(module, ix.list(), ix.fused(), vllm_skip_match::exact, opt.naming),
                           list, w, detail::value_error_text(mixed_shards_message(module)));
        break;
      case consumer::sglang_is_layer_skipped:
        detail::apply_skip(d, sglang_skip_outcome_with(module, ix.list(), ix.fused(), opt.naming), list, w,
                           detail::value_error_text(mixed_shards_message(module)));
        break;
      case consumer::sglang_awq: {
        skip_outcome o;
        o.rule = ix.list().substring(module);  // awq_skip_rule
        o.skipped = o.rule != no_rule;
        detail::apply_skip(d, o, list, w, {});
        break;
      }
      case consumer::vllm_awq:
        detail::apply_skip(d,
                           vllm_skip_outcome_with(module, ix.list(), ix.fused(), vllm_skip_match::substring, opt.naming),
                           list, w, detail::value_error_text(mixed_shards_message(module)));
        break;
      case consumer::sglang_compressed_tensors:
      case consumer::vllm_compressed_tensors: {
        std::vector<std::string> shards;
        bool const sg = c == consumer::sglang_compressed_tensors;
        skip_outcome const o = detail::ct_should_ignore(module, ix, sg, opt.naming, &shards);
        detail::apply_skip(
            d, o, list, w,
            detail::value_error_text("Found a different quantization schemes for " + detail::py_list_repr(shards) +
                                     " in " + d.module + ". vLLM requires all to use the same scheme."));
        break;
      }
      case consumer::compressed_tensors: {
        skip_outcome o;
        o.rule = ix.ct_library(module);
        o.skipped = o.rule != no_rule;
        detail::apply_skip(d, o, list, w, {});
        break;
      }
      case consumer::sglang_modelopt: {
        skip_outcome o;
        if (kind != layer_kind::moe) {
          o = sglang_skip_outcome_with(module, ix.list(), ix.fused(), opt.naming);
        }
        if (!o.failed() && !o.skipped) {
          o.rule = ix.sglang_modelopt(module);
          o.skipped = o.rule != no_rule;
        }
        detail::apply_skip(d, o, list, w, detail::value_error_text(mixed_shards_message(module)));
        break;
      }
      case consumer::vllm_modelopt: {
        if (!is_mixed(cfg) &&  // the mixed config's own get_quant_method has no such check
            (detail::contains(module, "vision_tower") || detail::contains(module, "vision_model") ||
             detail::contains(module, "vit_large_projector"))) {
          d.skipped = true;  // vLLM forces vision modules unquantized, whatever the list says
          break;
        }
        skip_outcome o = vllm_skip_outcome_with(module, ix.list(), ix.fused(), vllm_skip_match::exact, opt.naming);
        if (!o.failed() && !o.skipped) {
          o.rule = ix.vllm_modelopt(module);
          o.skipped = o.rule != no_rule;
        }
        detail::apply_skip(d, o, list, w, detail::value_error_text(mixed_shards_message(module)));
        break;
      }
      case consumer::fnmatch:
      case consumer::fnmatch_subtree: {
        bool const subtree = c == consumer::fnmatch_subtree;
        skip_outcome o;
        o.rule = ix.fnmatch(module, subtree);
        o.skipped = o.rule != no_rule;
        detail::apply_skip(d, o, list, w, {});
        break;
      }
      case consumer::transformers_v4:
      case consumer::transformers_v4_bnb: {
        std::string_view const leaf = detail::last_component(module);
        skip_outcome o;
        o.rule = ix.list().equal(leaf);
        if (o.rule == no_rule) {
          o.rule = c == consumer::transformers_v4 ? ix.list().substring(module) : ix.transformers_v4_bnb(module);
        }
        o.skipped = o.rule != no_rule;
        detail::apply_skip(d, o, list, w, {});
        break;
      }
      case consumer::transformers_v5: {
        skip_outcome o;
        o.rule = ix.transformers_v5(module);
        o.skipped = o.rule != no_rule;
        detail::apply_skip(d, o, list, w, {});
        break;
      }
      case consumer::sglang_gptq:
      case consumer::vllm_gptq: {
        bool const vl = c == consumer::vllm_gptq;
        gptq_params const base = gptq_base_params(cfg, opt.kernel);
        // The config object itself rejects a base it cannot serve (its __init__ raises).
        gptq_override const init = override_config(base, cfg.dynamic, dynamic_match{});
        if (init.error != gptq_error::none) {
          d.error = gptq_error_message(init);
          break;
        }
        bool whitelisted = true;
        if (vl && !cfg.modules_in_block_to_quantize.empty()) {
          // vLLM's is_layer_gptq_quantized: plain substring, fused shards must agree.
          auto const find = [&](std::string_view n) { return ix.in_block(n); };
          std::string_view const proj = detail::last_component(module);
          if (auto const* entry = ix.fused()(proj)) {
            skip_outcome const o = detail::shard_agreement(module, proj, entry->second, opt.naming, find);
            if (o.mixed_shards) {
              d.error = detail::value_error_text(mixed_shards_message(module));
              break;
            }
            whitelisted = o.skipped;  // "skipped" = found in the whitelist here
          } else {
            whitelisted = find(module) != no_rule;
          }
        }
        gptq_layer_decision const g =
            get_linear_quant_method_by(base, cfg.dynamic, module, kind == layer_kind::moe ? layer_kind::linear : kind,
                                       vl ? false_test::equals_false : false_test::is_false, [&] {
                                         return opt.dynamic != nullptr ? opt.dynamic->find(module)
                                                                       : find_dynamic_rule(cfg.dynamic, module);
                                       });
        if (g.rule.what != dynamic_match::kind::none) {
          d.rule = cfg.dynamic[g.rule.rule].key;
        }
        if (g.method != linear_method::quantized || !whitelisted) {
          d.skipped = true;
          break;
        }
        gptq_params const& p = g.override_.params;
        if (g.override_.error != gptq_error::none) {
          d.error = gptq_error_message(g.override_);
        }
        d.bits = p.bits;
        d.group_size = p.group_size;
        d.desc_act = p.desc_act;
        d.sym = p.sym;
        d.quant_type = p.kernel == gptq_kernel::gptq_marlin ? p.quant_type : integer_weight_type(p.bits, p.sym);
        break;
      }
      case consumer::sglang_auto_round:
      case consumer::vllm_auto_round: {
        bool const search = c == consumer::vllm_auto_round;
        std::int64_t const base_bits = cfg.bits.value_or(4);
        std::int64_t const base_group = cfg.group_size.value_or(128);
        bool const base_sym = cfg.sym.value_or(true);
        struct layer_cfg {
          std::int64_t bits;
          std::int64_t group_size;
          bool sym;
          std::size_t rule;
          bool operator==(layer_cfg const& o) const {
            return bits == o.bits && group_size == o.group_size && sym == o.sym;
          }
        };
        auto const entry_cfg = [&](std::size_t i, bool quantized) {
          extra_config_entry const& e = cfg.extra_config[i];
          layer_cfg r{quantized ? base_bits : 16, quantized ? base_group : -1, quantized ? base_sym : true, i};
          if (e.bits.is_int()) {
            r.bits = e.bits.integer;
          }
          if (e.group_size.is_int()) {
            r.group_size = e.group_size.integer;
          }
          if (e.sym.is_int()) {
            r.sym = e.sym.integer != 0;
          }
          return r;
        };
        // get_config(name, quantized): exact key, else the first regex key that matches.
        auto const get_config = [&](std::string_view name, bool quantized) {
          std::size_t i = ix.auto_round_exact(name);
          if (i == no_rule) {
            i = ix.auto_round_regex(name, search);  // an invalid key is skipped
          }
          if (i != no_rule) {
            return entry_cfg(i, quantized);
          }
          return layer_cfg{quantized ? base_bits : 16, quantized ? base_group : -1, quantized ? base_sym : true,
                           no_rule};
        };
        std::optional<layer_cfg> chosen;
        if (std::size_t const i = ix.auto_round_exact(module); i != no_rule) {
          chosen = entry_cfg(i, true);
        }
        if (!chosen) {
          bool quantized = kind != layer_kind::lm_head;
          if (!cfg.block_name_to_quantize.empty()) {
            quantized = ix.in_blocks(module);
          }
          if (kind == layer_kind::moe && !cfg.extra_config.empty()) {
            std::vector<layer_cfg> subs;
            for (std::size_t const i : ix.keys_starting_with(module)) {
              subs.push_back(get_config(cfg.extra_config[i].key, quantized));
            }
            if (!subs.empty()) {
              for (layer_cfg const& s : subs) {
                if (!(s == subs.front())) {
                  d.error = detail::value_error_text("Fused MoE layer '" + d.module +
                                                     "' requires consistent quant config for all sub-layers");
                }
              }
              chosen = subs.front();
            }
          }
          if (!chosen && !cfg.extra_config.empty() && !d.error) {
            for (auto const& [fused_key, sub_keys] : fused) {
              std::string_view const m = module;
              std::size_t const first = m.find(fused_key);
              if (first == std::string_view::npos || m.find(fused_key, first + 1) != std::string_view::npos) {
                continue;  // only a fused key occurring exactly once
              }
              std::vector<std::string> sub_names;
              std::vector<layer_cfg> subs;
              for (std::string const& s : sub_keys) {
                sub_names.emplace_back(detail::py_replace(m, fused_key, s).view());
                subs.push_back(get_config(sub_names.back(), quantized));
              }
              for (layer_cfg const& s : subs) {
                if (!(s == subs.front())) {
                  d.error =
                      detail::value_error_text("Fused module '" + d.module + "' requires consistent quant config for " +
                                               detail::py_list_repr(sub_names));
                }
              }
              if (!subs.empty()) {
                chosen = subs.front();
              }
              break;
            }
          }
          if (!chosen) {
            chosen = get_config(module, quantized);
          }
        }
        if (chosen->rule != no_rule) {
          d.rule = cfg.extra_config[chosen->rule].key;
        }
        d.skipped = chosen->bits >= 16;
        if (!d.skipped) {
          d.bits = chosen->bits;
          d.group_size = chosen->group_size;
          d.sym = chosen->sym;
          d.desc_act = cfg.desc_act;
          d.quant_type = integer_weight_type(chosen->bits, chosen->sym);
        }
        break;
      }
    }
    bool const ct_reader = c == consumer::compressed_tensors || c == consumer::vllm_compressed_tensors ||
                           c == consumer::sglang_compressed_tensors;
    bool const modelopt_reader = c == consumer::vllm_modelopt || c == consumer::sglang_modelopt;
    if (is_mixed(cfg) && (cfg.family == quant_family::compressed_tensors ? ct_reader : modelopt_reader)) {
      auto const& mx = ix.mixed();
      detail::apply_mixed(cfg, c, module, kind, mx, d);
    }
  } catch (regex_error const& e) {
    d.error = detail::regex_error_text(e);
  } catch (regex_unsupported_error const& e) {  // Python would run the pattern: QTL cannot tell
    d.error = std::string("qtl::regex_unsupported_error: ") + e.what();
  } catch (value_error const& e) {  // a module name that outgrows max_module_name
    d.error = std::string("qtl::value_error: ") + e.what();
  }
  return d;
}

/// The decision of consumer `c` for `module`, a layer of the stated kind. Never throws for a
/// config the loader accepted: the consumer's exceptions are recorded in `error`, and so are
/// QTL's own limits (a shard name longer than `max_module_name`: `qtl::value_error: ...`; a
/// pattern Python's `re` accepts that QTL's engine does not run: `qtl::regex_unsupported_error:
/// ...`: the engine's answer is then not known, `decision::error_from_qtl`).
/// Each call scans the config's lists (the reference's loops); `decide(compiled_config, ...)`
/// (`qtl/rules/compiled_config.hpp`) gives the same decision from indexes built once.
inline decision decide(quant_config const& cfg, consumer c, std::string_view module, layer_kind kind,
                       decide_options const& opt = {}) {
  return decide_with(cfg, c, module, kind, opt, linear_config_index{cfg});
}

/// `decide` with the layer kind inferred from the name (`infer_layer_kind`).
inline decision decide(quant_config const& cfg, consumer c, std::string_view module, decide_options const& opt = {}) {
  return decide(cfg, c, module, infer_layer_kind(module), opt);
}

/// The decisions of `consumers` for one layer.
inline std::vector<decision> decide_all(quant_config const& cfg, std::string_view module, layer_kind kind,
                                        std::span<consumer const> consumers = all_consumers,
                                        decide_options const& opt = {}) {
  std::vector<decision> out;
  out.reserve(consumers.size());
  for (consumer const c : consumers) {
    out.push_back(decide(cfg, c, module, kind, opt));
  }
  return out;
}

/// Groups decisions by outcome (`decision::same_outcome`): one group means every consumer
/// agrees; more than one is a disagreement, each group listing its consumers.
inline std::vector<std::vector<decision>> disagreements(std::vector<decision> const& decisions) {
  std::vector<std::vector<decision>> groups;
  for (decision const& d : decisions) {
    bool placed = false;
    for (auto& g : groups) {
      if (g.front().same_outcome(d)) {
        g.push_back(d);
        placed = true;
        break;
      }
    }
    if (!placed) {
      groups.push_back({d});
    }
  }
  return groups;
}

}  // namespace qtl
