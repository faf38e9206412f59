#pragma once
/// \file
/// The values a quantization config may carry, checked with one set of rules wherever a value
/// comes from (a command line, a config's top level, a `dynamic` rule) and whoever asks (qtl
/// quantize before it writes a config; qtl lint and explain before they explain one):
///
///   bits         an integer: 2, 3, 4 or 8 for the engines' GPTQ loaders; 4 or 8 when written
///   group_size   an integer: -1 (one group per column) or positive (K % group_size is checked
///                per layer by the writer, which knows K)
///   desc_act     true or false (false when written: qtl writes no act-order checkpoints)
///   sym          true or false
///   null         for bits or group_size: an error (the engines read None and fail)
///   weight_block_size   [block_n, block_k], positive integers
/// A `dynamic` rule's body must be an object; its overrides follow the same rules (strings such
/// as "four" or "64", floats and booleans are refused, where the loaders would use them as is).

#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include <qtl/error.hpp>
#include <qtl/io/quant_config.hpp>

namespace qtl::io {

/// Which values a config may carry: what the engines' loaders take (`engines`: lint, explain) or,
/// stricter, what qtl quantize writes (`written`).
enum class value_rules { engines, written };

namespace detail {

inline std::string py_repr(py_value const& v) {
  switch (v.type) {
    case py_type::none: return "null";
    case py_type::boolean: return v.integer != 0 ? "true" : "false";
    case py_type::integer: return std::to_string(v.integer);
    case py_type::floating: return std::to_string(v.floating);
    case py_type::string: return "a string";
    case py_type::list: return "a list";
    case py_type::dict: return "an object";
    default: return "nothing";
  }
}

inline void check_bits(std::int64_t bits, std::string const& field, std::string const& source, value_rules rules) {
  bool const ok = rules == value_rules::written ? (bits == 4 || bits == 8)
                                                : (bits == 2 || bits == 3 || bits == 4 || bits == 8);
  if (!ok) {
    throw config_error(source + ": " + field + " " + std::to_string(bits) +
                       (rules == value_rules::written ? ": qtl quantize writes 4- or 8-bit GPTQ"
                                                      : ": GPTQ loaders take 2, 3, 4 or 8 bits"));
  }
}

inline void check_group_size(std::int64_t g, std::string const& field, std::string const& source) {
  if (g != -1 && g <= 0) {
    throw config_error(source + ": " + field + " " + std::to_string(g) +
                       ": a group size is -1 (one group per column) or positive");
  }
}

/// A `dynamic` override: an integer (a bool is not one here) or absent.
inline void check_rule_int(py_value const& v, std::string const& field, std::string const& source) {
  if (v.present() && v.type != py_type::integer) {
    throw config_error(source + ": " + field + " is " + py_repr(v) +
                       ", not an integer (the engines would use it as the layer's value)");
  }
}

}  // namespace detail

/// Checks the values of `cfg` and of `qobj` (its quantization object as in the file) by the
/// rules of the file comment. @throws config_error naming `source`, the field and the value.
inline void validate_config_values(quant_config const& cfg, nlohmann::ordered_json const& qobj,
                                   std::string const& source, value_rules rules) {
  if (cfg.family == quant_family::gptq || cfg.family == quant_family::awq || cfg.family == quant_family::auto_round) {
    if (qobj.is_object()) {
      for (char const* k : {"bits", "group_size"}) {
        if (auto const it = qobj.find(k); it != qobj.end() && it->is_null()) {
          throw config_error(source + ": " + k + " is null (the engines read None and fail)");
        }
      }
    }
    if (cfg.bits) {
      detail::check_bits(*cfg.bits, "bits", source, rules);
    }
    if (cfg.group_size) {
      detail::check_group_size(*cfg.group_size, "group_size", source);
    }
    if (rules == value_rules::written && cfg.desc_act.value_or(false)) {
      throw config_error(source + ": desc_act true: qtl quantize writes no act-order checkpoints");
    }
    for (auto const& r : cfg.dynamic) {
      std::string const where = "dynamic[" + nlohmann::ordered_json(r.key).dump() + "]";
      if (r.body.type != py_type::dict) {
        throw config_error(source + ": " + where + " is " + detail::py_repr(r.body.self) + ", not an object of overrides");
      }
      detail::check_rule_int(r.body.bits, where + ".bits", source);
      detail::check_rule_int(r.body.group_size, where + ".group_size", source);
      if (r.body.bits.present()) {
        detail::check_bits(r.body.bits.integer, where + ".bits", source, rules);
      }
      if (r.body.group_size.present()) {
        detail::check_group_size(r.body.group_size.integer, where + ".group_size", source);
      }
      for (auto const& [name, v] : {std::pair{"desc_act", r.body.desc_act}, std::pair{"sym", r.body.sym}}) {
        if (v.present() && !v.is_bool()) {
          throw config_error(source + ": " + where + "." + name + " is " + detail::py_repr(v) + ", not true or false");
        }
      }
      if (rules == value_rules::written && r.body.desc_act.present() && r.body.desc_act.integer != 0) {
        throw config_error(source + ": " + where + ".desc_act true: qtl quantize writes no act-order checkpoints");
      }
    }
  }
  if (qobj.is_object()) {
    if (auto const it = qobj.find("weight_block_size"); it != qobj.end() && !it->is_null()) {
      bool ok = it->is_array() && it->size() == 2;
      for (std::size_t i = 0; ok && i < 2; ++i) {
        ok = (*it)[i].is_number_integer() && (*it)[i].get<std::int64_t>() > 0;
      }
      if (!ok) {
        throw config_error(source + ": weight_block_size " + it->dump() + " is not [block_n, block_k] of positive integers");
      }
    }
  }
}

}  // namespace qtl::io
