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
#include <qtl/rules/compiled_dynamic.hpp>
#include <qtl/rules/config.hpp>
#include <qtl/rules/consumer.hpp>
#include <qtl/rules/decision.hpp>
#include <qtl/rules/dialects.hpp>
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

/// compressed-tensors engines' `should_ignore_layer` message for a fused layer whose shards are
/// not all ignored or all kept.
inline std::string ct_mixed_shards_message(std::vector<std::string> const& shards, std::string_view layer) {
  return "Found a different quantization schemes for " + detail::py_list_repr(shards) + " in " + std::string(layer) +
         ". vLLM requires all to use the same scheme.";
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
    return detail::find_entry(
        cfg.skip_list, [&](std::string_view e) { return detail::ct_match_name(name, e, cfg.packed_modules_mapping); });
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
        detail::apply_skip(
            d, vllm_skip_outcome_with(module, ix.list(), ix.fused(), vllm_skip_match::substring, opt.naming), list, w,
            detail::value_error_text(mixed_shards_message(module)));
        break;
      case consumer::sglang_compressed_tensors:
      case consumer::vllm_compressed_tensors: {
        std::vector<std::string> shards;
        bool const sg = c == consumer::sglang_compressed_tensors;
        skip_outcome const o = detail::ct_should_ignore(module, ix, sg, opt.naming, &shards);
        detail::apply_skip(d, o, list, w, detail::value_error_text(ct_mixed_shards_message(shards, d.module)));
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
        gptq_layer_decision const g = get_linear_quant_method_by(
            base, cfg.dynamic, module, kind == layer_kind::moe ? layer_kind::linear : kind,
            vl ? false_test::equals_false : false_test::is_false, [&] {
              return opt.dynamic != nullptr ? opt.dynamic->find(module) : find_dynamic_rule(cfg.dynamic, module);
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
      auto const ignored = [&](std::string_view name) {
        std::vector<std::string> shards;
        skip_outcome const o = detail::ct_should_ignore(name, ix, false, opt.naming, &shards);
        detail::ignore_step step;
        step.skipped = o.skipped;
        if (o.rule != no_rule && o.rule < list.size()) {
          step.rule = list[o.rule];
        }
        step.error = detail::skip_error(o, name, detail::value_error_text(ct_mixed_shards_message(shards, name)));
        return step;
      };
      detail::apply_mixed(cfg, c, module, kind, mx, ignored, d);
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
