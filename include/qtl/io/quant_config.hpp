#pragma once
/// \file
/// Loading a checkpoint's quantization config into `qtl::quant_config` (`qtl/rules/config.hpp`).
///
/// Accepted documents (detected from their shape):
/// - a model's `config.json`: its `quantization_config` object is read;
/// - ModelOpt's `hf_quant_config.json`: `{"producer": {"name": "modelopt", ...},
///   "quantization": {"quant_algo": ..., "exclude_modules": [...]}}`;
/// - a `quantize_config.json` (GPTQ/AWQ; AutoGPTQ wrote no `quant_method`: `bits` without a
///   method means GPTQ), or a bare `quantization_config` object.
/// A top-level `packed_modules_mapping` (the golden files carry the model's there) is read too.
///
/// JSON is parsed with nlohmann's `ordered_json`: the order of `dynamic` rules and
/// `extra_config` keys decides which rule wins, and a plain `json` object would sort them.
///
/// Errors: an unknown `quant_method` and a malformed field throw `qtl::config_error` naming the
/// field (`quantization_config.dynamic["-:.*"]: ...`); text that is not JSON throws
/// `qtl::config_error` with the parser's message. Loading is lenient where the engines are
/// strict only by accident: GPTQ's `sym` and `desc_act`, which sglang's and vLLM's GPTQ loaders
/// require, default to `true` and `false` as GPTQModel writes them. Regex patterns are not
/// compiled here: as in Python, a bad pattern is an error of the layers that reach it, reported
/// in their decision.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <qtl/error.hpp>
#include <qtl/io/json_parse.hpp>
#include <qtl/rules/config.hpp>

namespace qtl::io {

namespace detail {

using ojson = nlohmann::ordered_json;

[[noreturn]] inline void bad_field(std::string const& field, std::string const& what) {
  throw config_error("quant config: field '" + field + "': " + what);
}

/// `base.` (nothing for the document itself).
inline std::string dot(std::string const& base) { return base.empty() ? std::string() : base + "."; }

inline std::string type_of(ojson const& v) { return v.type_name(); }

inline std::string key_path(std::string const& base, std::string const& key) {
  return base + "[" + ojson(key).dump() + "]";
}

/// A JSON value as Python sees it (`py_value`); integers beyond int64 are a `config_error`.
inline py_value to_py(ojson const& v, std::string const& field) {
  switch (v.type()) {
    case ojson::value_t::null:
      return py_value::of(py_type::none);
    case ojson::value_t::boolean:
      return py_value::of_bool(v.get<bool>());
    case ojson::value_t::number_integer:
      return py_value::of_int(v.get<std::int64_t>());
    case ojson::value_t::number_unsigned: {
      auto const u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        bad_field(field, "integer " + std::to_string(u) + " is out of range");
      }
      return py_value::of_int(static_cast<std::int64_t>(u));
    }
    case ojson::value_t::number_float:
      return py_value::of_float(v.get<double>());
    case ojson::value_t::string:
      return py_value::of(py_type::string);
    case ojson::value_t::array:
      return py_value::of(py_type::list);
    case ojson::value_t::object:
      return py_value::of(py_type::dict);
    default:
      break;
  }
  bad_field(field, "unsupported JSON value of type " + type_of(v));
}

/// An optional integer field (not a bool: a config writing `"bits": true` is malformed).
inline std::optional<std::int64_t> opt_int(ojson const& obj, char const* key, std::string const& base) {
  auto const it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::nullopt;
  }
  std::string const field = dot(base) + key;
  if (!it->is_number_integer()) {
    bad_field(field, "expected an integer, got " + type_of(*it) + " " + it->dump());
  }
  return to_py(*it, field).integer;
}

inline std::optional<bool> opt_bool(ojson const& obj, char const* key, std::string const& base) {
  auto const it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::nullopt;
  }
  if (!it->is_boolean()) {
    bad_field(dot(base) + key, "expected true or false, got " + type_of(*it) + " " + it->dump());
  }
  return it->get<bool>();
}

inline std::string opt_string(ojson const& obj, char const* key, std::string const& base) {
  auto const it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return {};
  }
  if (!it->is_string()) {
    bad_field(dot(base) + key, "expected a string, got " + type_of(*it));
  }
  return it->get<std::string>();
}

/// A list of strings; `flatten` also accepts a list of lists of strings (vLLM's
/// `modules_in_block_to_quantize`).
inline std::vector<std::string> string_list(ojson const& v, std::string const& field, bool flatten = false) {
  std::vector<std::string> out;
  if (v.is_null()) {
    return out;
  }
  if (!v.is_array()) {
    bad_field(field, "expected a list of strings, got " + type_of(v));
  }
  std::size_t i = 0;
  for (ojson const& e : v) {
    std::string const f = field + "[" + std::to_string(i++) + "]";
    if (e.is_string()) {
      out.push_back(e.get<std::string>());
    } else if (flatten && e.is_array()) {
      for (std::string& s : string_list(e, f)) {
        out.push_back(std::move(s));
      }
    } else {
      bad_field(f, "expected a string, got " + type_of(e));
    }
  }
  return out;
}

inline quant_family family_of(std::string const& method, std::string const& field) {
  std::string m;
  for (char const c : method) {
    m += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  if (m == "gptq" || m == "gptq_marlin" || m == "gptqmodel" || m == "gptq_marlin_24") {
    return quant_family::gptq;
  }
  if (m == "awq" || m == "awq_marlin") {
    return quant_family::awq;
  }
  if (m == "fp8") {
    return quant_family::fp8;
  }
  if (m == "mxfp4") {
    return quant_family::mxfp4;
  }
  if (m == "modelopt" || m == "modelopt_fp4" || m == "modelopt_fp8") {
    return quant_family::modelopt;
  }
  if (m == "compressed-tensors" || m == "compressed_tensors") {
    return quant_family::compressed_tensors;
  }
  if (m == "auto-round" || m == "auto_round" || m == "intel/auto-round") {
    return quant_family::auto_round;
  }
  bad_field(field, "unknown quantization method '" + method +
                       "' (known: gptq, gptq_marlin, gptqmodel, awq, awq_marlin, fp8, mxfp4, "
                       "modelopt, modelopt_fp4, compressed-tensors, auto-round)");
}

inline dynamic_rule_body rule_body(ojson const& v, std::string const& field) {
  dynamic_rule_body b;
  b.self = to_py(v, field);
  b.type = b.self.type;
  if (v.is_object()) {
    auto const get = [&](char const* k) {
      auto const it = v.find(k);
      return it == v.end() ? py_value{} : to_py(*it, field + "." + k);
    };
    b.bits = get("bits");
    b.group_size = get("group_size");
    b.desc_act = get("desc_act");
    b.sym = get("sym");
  }
  return b;
}

}  // namespace detail

/// The `packed_modules_mapping` object `v` ({"qkv_proj": ["q_proj", "k_proj", "v_proj"], ...}; null:
/// none), in its order; `field` names it in errors.
/// @throws config_error for anything but an object of lists of strings
inline packed_mapping packed_modules_mapping_of(nlohmann::ordered_json const& v, std::string const& field) {
  packed_mapping out;
  if (v.is_null()) {
    return out;
  }
  if (!v.is_object()) {
    detail::bad_field(field, "expected an object of lists of strings, got " + detail::type_of(v));
  }
  for (auto const& [k, shards] : v.items()) {
    out.emplace_back(k, detail::string_list(shards, detail::key_path(field, k)));
  }
  return out;
}

namespace detail {

/// One `config_groups` entry (`field` names it in errors). A missing or null `targets` is an
/// empty list (the group then decides nothing), as a missing `weights` is no weights.
inline ct_config_group config_group(std::string const& name, ojson const& group, std::string const& field) {
  if (!group.is_object()) {
    bad_field(field, "expected an object, got " + type_of(group));
  }
  ct_config_group g;
  g.name = name;
  g.format = opt_string(group, "format", field);
  if (auto const it = group.find("targets"); it != group.end()) {
    g.targets = string_list(*it, field + ".targets");
  }
  if (auto const wt = group.find("weights"); wt != group.end() && !wt->is_null()) {
    std::string const wf = field + ".weights";
    if (!wt->is_object()) {
      bad_field(wf, "expected an object, got " + type_of(*wt));
    }
    g.has_weights = true;
    g.num_bits = opt_int(*wt, "num_bits", wf);
    g.group_size = opt_int(*wt, "group_size", wf);
    g.symmetric = opt_bool(*wt, "symmetric", wf);
    g.type = opt_string(*wt, "type", wf);
    g.strategy = opt_string(*wt, "strategy", wf);
  }
  if (auto const at = group.find("input_activations"); at != group.end() && !at->is_null()) {
    if (!at->is_object()) {
      bad_field(field + ".input_activations", "expected an object or null, got " + type_of(*at));
    }
    g.input_activations = true;
  }
  return g;
}

/// ModelOpt's `quantized_layers` object {module: {"quant_algo": ..., "group_size": ...}} (null: none).
inline std::vector<modelopt_layer> quantized_layers_of(ojson const& v, std::string const& field) {
  std::vector<modelopt_layer> out;
  if (v.is_null()) {
    return out;
  }
  if (!v.is_object()) {
    bad_field(field, "expected an object of {\"quant_algo\": ...} entries, got " + type_of(v));
  }
  for (auto const& item : v.items()) {
    std::string const f = key_path(field, item.key());
    ojson const& body = item.value();
    if (!body.is_object()) {
      bad_field(f, "expected an object, got " + type_of(body));
    }
    modelopt_layer e;
    e.module = item.key();
    e.quant_algo = opt_string(body, "quant_algo", f);  // missing: an error of the layers that reach it
    e.group_size = opt_int(body, "group_size", f);
    out.push_back(std::move(e));
  }
  return out;
}

/// Reads a `quantization_config`-shaped object (`base` names it in errors).
inline quant_config parse_quantization_object(ojson const& q, std::string const& base,
                                              bool assume_gptq_without_method) {
  if (!q.is_object()) {
    bad_field(base, "expected an object, got " + type_of(q));
  }
  quant_config cfg;
  std::string method = opt_string(q, "quant_method", base);
  if (method.empty()) {
    if (assume_gptq_without_method && q.contains("bits")) {
      method = "gptq";  // AutoGPTQ's quantize_config.json wrote no quant_method
    } else {
      bad_field(dot(base) + "quant_method", "missing");
    }
  }
  cfg.quant_method = method;
  cfg.family = family_of(method, dot(base) + "quant_method");
  cfg.bits = opt_int(q, "bits", base);
  cfg.group_size = opt_int(q, "group_size", base);
  cfg.desc_act = opt_bool(q, "desc_act", base);
  cfg.sym = opt_bool(q, "sym", base);
  cfg.zero_point = opt_bool(q, "zero_point", base);
  cfg.lm_head_quantized = opt_bool(q, "lm_head", base).value_or(false);
  cfg.checkpoint_format = opt_string(q, "checkpoint_format", base);
  cfg.quant_algo = opt_string(q, "quant_algo", base);

  if (auto const it = q.find("dynamic"); it != q.end() && !it->is_null()) {
    std::string const field = dot(base) + "dynamic";
    if (!it->is_object()) {
      bad_field(field, "expected an object of rules, got " + type_of(*it));
    }
    for (auto const& [key, body] : it->items()) {
      cfg.dynamic.push_back({key, rule_body(body, key_path(field, key))});
    }
  }
  if (auto const it = q.find("modules_in_block_to_quantize"); it != q.end()) {
    cfg.modules_in_block_to_quantize = string_list(*it, dot(base) + "modules_in_block_to_quantize", /*flatten=*/true);
  }
  // The skip list: the first of these fields that is present and not null.
  for (char const* k :
       {"ignored_layers", "modules_to_not_convert", "ignore", "exclude_modules", "llm_int8_skip_modules"}) {
    if (auto const it = q.find(k); it != q.end() && !it->is_null()) {
      cfg.skip_list = string_list(*it, dot(base) + k);
      cfg.skip_list_field = k;
      break;
    }
  }
  if (auto const it = q.find("extra_config"); it != q.end() && !it->is_null()) {
    std::string const field = dot(base) + "extra_config";
    if (!it->is_object()) {
      bad_field(field, "expected an object, got " + type_of(*it));
    }
    for (auto const& item : it->items()) {
      std::string const& key = item.key();
      ojson const& body = item.value();  // not a structured binding: clang 14 cannot capture one
      std::string const f = key_path(field, key);
      if (!body.is_object()) {
        bad_field(f, "expected an object, got " + type_of(body));
      }
      extra_config_entry e;
      e.key = key;
      auto const get = [&](char const* k) {
        auto const jt = body.find(k);
        return jt == body.end() ? py_value{} : to_py(*jt, f + "." + k);
      };
      e.bits = get("bits");
      e.group_size = get("group_size");
      e.sym = get("sym");
      e.json = body.dump();
      cfg.extra_config.push_back(std::move(e));
    }
  }
  if (auto const it = q.find("block_name_to_quantize"); it != q.end() && !it->is_null()) {
    std::string const field = dot(base) + "block_name_to_quantize";
    if (it->is_string()) {
      std::string const s = it->get<std::string>();
      std::size_t pos = 0;
      while (true) {  // Python str.split(","): keeps empty pieces
        std::size_t const comma = s.find(',', pos);
        cfg.block_name_to_quantize.push_back(s.substr(pos, comma - pos));
        if (comma == std::string::npos) {
          break;
        }
        pos = comma + 1;
      }
    } else {
      cfg.block_name_to_quantize = string_list(*it, field, /*flatten=*/true);
    }
  }
  if (auto const it = q.find("packed_modules_mapping"); it != q.end()) {
    cfg.packed_modules_mapping = packed_modules_mapping_of(*it, dot(base) + "packed_modules_mapping");
  }
  if (cfg.family == quant_family::compressed_tensors) {
    cfg.format = opt_string(q, "format", base);
  }
  if (cfg.family == quant_family::modelopt) {
    cfg.moe_quant_algo = opt_string(q, "moe_quant_algo", base);
  }
  // compressed-tensors: every config group, in order; the weights of the first give the base
  // parameters.
  if (auto const it = q.find("config_groups"); it != q.end() && !it->is_null()) {
    std::string const field = dot(base) + "config_groups";
    if (!it->is_object()) {
      bad_field(field, "expected an object, got " + type_of(*it));
    }
    for (auto const& [name, group] : it->items()) {
      cfg.config_groups.push_back(config_group(name, group, key_path(field, name)));
    }
    if (!cfg.config_groups.empty() && cfg.config_groups.front().has_weights) {
      ct_config_group const& g = cfg.config_groups.front();
      cfg.bits = g.num_bits;
      cfg.group_size = g.group_size;
      cfg.sym = g.symmetric;
      if (!g.type.empty()) {
        cfg.weight_type = g.type;
      }
      auto const wt = it->begin()->find("weights");
      if (auto const at = wt->find("actorder"); at != wt->end() && !at->is_null()) {
        cfg.desc_act = at->is_boolean() ? at->get<bool>() : (at->is_string() && at->get<std::string>() == "group");
      }
    }
  }
  if (auto const it = q.find("quantized_layers"); it != q.end() && cfg.family == quant_family::modelopt) {
    cfg.quantized_layers = quantized_layers_of(*it, dot(base) + "quantized_layers");
  }
  // ModelOpt inside config.json may nest its fields in `quantization`.
  if (auto const it = q.find("quantization"); it != q.end() && it->is_object()) {
    std::string const f = dot(base) + "quantization";
    if (cfg.quant_algo.empty()) {
      cfg.quant_algo = opt_string(*it, "quant_algo", f);
    }
    if (cfg.moe_quant_algo.empty()) {
      cfg.moe_quant_algo = opt_string(*it, "moe_quant_algo", f);
    }
    if (cfg.quantized_layers.empty() && cfg.family == quant_family::modelopt) {
      if (auto const jt = it->find("quantized_layers"); jt != it->end()) {
        cfg.quantized_layers = quantized_layers_of(*jt, f + ".quantized_layers");
      }
    }
    if (!cfg.group_size) {
      cfg.group_size = opt_int(*it, "group_size", f);
    }
    if (cfg.skip_list_field.empty()) {
      if (auto const jt = it->find("exclude_modules"); jt != it->end() && !jt->is_null()) {
        cfg.skip_list = string_list(*jt, f + ".exclude_modules");
        cfg.skip_list_field = "exclude_modules";
      }
    }
  }
  return cfg;
}

}  // namespace detail

/// Reads a parsed JSON document (see the file comment for the accepted shapes).
inline quant_config quant_config_from_json(nlohmann::ordered_json const& doc) {
  using detail::ojson;
  if (!doc.is_object()) {
    detail::bad_field("(document)", "expected a JSON object, got " + detail::type_of(doc));
  }
  quant_config cfg;
  if (auto const it = doc.find("quantization_config"); it != doc.end()) {
    cfg = detail::parse_quantization_object(*it, "quantization_config", false);
  } else if (auto const pr = doc.find("producer"); pr != doc.end() && doc.contains("quantization")) {
    // hf_quant_config.json (ModelOpt)
    ojson const& q = doc["quantization"];
    if (!q.is_object()) {
      detail::bad_field("quantization", "expected an object, got " + detail::type_of(q));
    }
    cfg.family = quant_family::modelopt;
    cfg.quant_method = "modelopt";
    cfg.quant_algo = detail::opt_string(q, "quant_algo", "quantization");
    cfg.moe_quant_algo = detail::opt_string(q, "moe_quant_algo", "quantization");
    cfg.group_size = detail::opt_int(q, "group_size", "quantization");
    if (auto const jt = q.find("quantized_layers"); jt != q.end()) {
      cfg.quantized_layers = detail::quantized_layers_of(*jt, "quantization.quantized_layers");
    }
    if (auto const jt = q.find("exclude_modules"); jt != q.end() && !jt->is_null()) {
      cfg.skip_list = detail::string_list(*jt, "quantization.exclude_modules");
      cfg.skip_list_field = "exclude_modules";
    }
  } else {
    cfg = detail::parse_quantization_object(doc, "", true);
  }
  if (auto const it = doc.find("packed_modules_mapping"); it != doc.end()) {
    cfg.packed_modules_mapping = packed_modules_mapping_of(*it, "packed_modules_mapping");
  }
  return cfg;
}

/// Parses JSON text; malformed JSON is a `qtl::config_error` with the parser's message.
/// Parsed in linear time, duplicate keys as Python's `json.loads` reads them (the last value, at
/// the first key's position: qtl/io/json_parse.hpp).
inline quant_config parse_quant_config(std::string_view text) {
  return quant_config_from_json(parse_json_like_python<config_error>(text, "quant config: "));
}

/// Reads a file (`config.json`, `hf_quant_config.json`, `quantize_config.json`).
inline quant_config load_quant_config(std::filesystem::path const& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw config_error("quant config: cannot open '" + path.string() + "'");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return parse_quant_config(ss.str());
  } catch (config_error const& e) {
    throw config_error(path.string() + ": " + e.what());
  }
}

}  // namespace qtl::io
