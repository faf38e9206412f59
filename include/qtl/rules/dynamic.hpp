#pragma once
/// \file
/// GPTQ `dynamic` rules: `get_dynamic_override`, `override_config` and the per-layer decision of
/// `get_linear_quant_method` (`docs/spec/semantics.md` §4.3-§4.5), `constexpr`.
///
/// A `dynamic` object maps a rule key to a rule body, in the config's key order:
///
///     "dynamic": {
///       "+:.*\\.18\\..*gate.*": {"bits": 4, "group_size": 32},   positive: override these fields
///       ".*\\.19\\..*gate.*":   {"bits": 8, "group_size": 64},   no prefix = positive
///       "-:.*down.*":           {}                               negative: leave unquantized
///     }
///
/// The first rule whose pattern `re.match`es the layer name (anchored at the start only) wins.
/// Patterns are matched against the *fused* runtime name (`mlp.gate_up_proj`): there is no
/// packed-mapping expansion, so a per-shard rule `.*gate_proj.*` never fires on `gate_up_proj`.
///
/// Python's types decide what a rule field does (`override_config` tests `isinstance`), so a
/// field keeps its JSON type (`py_value`). Quirks of the reference, reproduced:
/// - `bool` is an `int` in Python: `"group_size": true` sets group size 1, `"bits": true` sets
///   bits 1 (then GPTQ rejects it, printing `True`);
/// - `"desc_act": 1` / `"sym": 0` are ignored (not `bool`); `"bits": 4.0` and `"bits": "4"` are
///   ignored (not `int`);
/// - a negative rule makes every field lookup return `False`, so `override_config` called on a
///   layer a `-:` rule matches sets `bits = False` and divides by zero (`ZeroDivisionError`);
///   `get_linear_quant_method` never gets there;
/// - a positive rule whose body is not an object (`true`, some third-party configs): sglang
///   returns the body itself; `false` then *skips* the layer (`is False`), anything else crashes
///   on `.get` (`AttributeError`); vLLM compares with `== False`, so `0` and `0.0` skip too.

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include <qtl/error.hpp>
#include <qtl/match/regex.hpp>
#include <qtl/rules/skip.hpp>
#include <qtl/scalar_type.hpp>

namespace qtl {

/// The Python type of a JSON value after `json.loads` (`absent`: the key is not there).
enum class py_type : std::uint8_t { absent, none, boolean, integer, floating, string, list, dict };

/// A JSON scalar as Python sees it; strings, lists and objects keep only their type.
struct py_value {
  py_type type = py_type::absent;
  std::int64_t integer = 0;  ///< the value of a `boolean` (0/1) or an `integer`
  double floating = 0.0;     ///< the value of a `floating`

  static constexpr py_value of_bool(bool b) { return {py_type::boolean, b ? 1 : 0, 0.0}; }
  static constexpr py_value of_int(std::int64_t i) { return {py_type::integer, i, 0.0}; }
  static constexpr py_value of_float(double d) { return {py_type::floating, 0, d}; }
  static constexpr py_value of(py_type t) { return {t, 0, 0.0}; }

  constexpr bool present() const { return type != py_type::absent; }
  /// `isinstance(x, int)`: true for `bool` too.
  constexpr bool is_int() const { return type == py_type::boolean || type == py_type::integer; }
  /// `isinstance(x, bool)`.
  constexpr bool is_bool() const { return type == py_type::boolean; }
  /// `x is False`.
  constexpr bool is_false() const { return type == py_type::boolean && integer == 0; }
  /// `x == False`: also `0` and `0.0`.
  constexpr bool equals_false() const {
    return (is_int() && integer == 0) || (type == py_type::floating && floating == 0.0);
  }
  /// Python's name of the type (`type(x).__name__`).
  constexpr std::string_view type_name() const {
    switch (type) {
      case py_type::none:
        return "NoneType";
      case py_type::boolean:
        return "bool";
      case py_type::integer:
        return "int";
      case py_type::floating:
        return "float";
      case py_type::string:
        return "str";
      case py_type::list:
        return "list";
      case py_type::dict:
        return "dict";
      case py_type::absent:
        break;
    }
    return "absent";
  }
  friend constexpr bool operator==(py_value const&, py_value const&) = default;
};

/// `repr()` of an `int` or `bool` value (`True`, `False`, `-3`).
inline std::string py_int_repr(py_value const& v) {
  if (v.is_bool()) {
    return v.integer != 0 ? "True" : "False";
  }
  return std::to_string(v.integer);
}

/// The body of a `dynamic` rule: an object whose fields `override_config` reads, or (quirk) a
/// non-object JSON value (`type` is then not `dict`).
struct dynamic_rule_body {
  py_type type = py_type::dict;
  py_value self = py_value::of(py_type::dict);  ///< the value itself when not an object
  py_value bits;
  py_value group_size;
  py_value desc_act;
  py_value sym;

  /// `body.get(field)`: `absent` when the key is missing or unknown.
  constexpr py_value get(std::string_view field) const {
    if (field == "bits") {
      return bits;
    }
    if (field == "group_size") {
      return group_size;
    }
    if (field == "desc_act") {
      return desc_act;
    }
    if (field == "sym") {
      return sym;
    }
    return {};
  }
  friend constexpr bool operator==(dynamic_rule_body const&, dynamic_rule_body const&) = default;
};

/// A rule whose key is known at compile time (`constexpr` rule tables).
struct static_dynamic_rule {
  std::string_view key;
  dynamic_rule_body body;
};

/// A rule read from a config.
struct dynamic_rule {
  std::string key;
  dynamic_rule_body body;
};

/// The sign of a rule key and its pattern: `-:p` negative, `+:p` or `p` positive.
struct dynamic_key {
  bool negative = false;
  std::string_view pattern;
};

/// Splits a rule key into its sign and pattern (`pattern.removeprefix("-:"/"+:")`).
constexpr dynamic_key parse_dynamic_key(std::string_view key) {
  if (key.starts_with("-:")) {
    return {true, key.substr(2)};
  }
  if (key.starts_with("+:")) {
    return {false, key.substr(2)};
  }
  return {false, key};
}

/// The rule that `get_dynamic_override` finds for a layer.
struct dynamic_match {
  enum class kind : std::uint8_t { none, negative, positive };
  kind what = kind::none;
  std::size_t rule = no_rule;  ///< index in the rule list

  constexpr bool is_negative() const { return what == kind::negative; }
  constexpr bool is_positive() const { return what == kind::positive; }
  friend constexpr bool operator==(dynamic_match const&, dynamic_match const&) = default;
};

/// The matcher of `dynamic` keys: Python `re.match` on QTL's engine.
struct re_match_fn {
  constexpr bool operator()(std::string_view pattern, std::string_view name) const { return re_match(pattern, name); }
};

/// The first rule (in order) whose pattern `re.match`es `layer_name`. A bad pattern reached
/// before a match throws `qtl::regex_error` at run time (Python raises `re.error` there too)
/// and does not compile in constant evaluation. `Rules`: a range of elements with `.key`.
template <class Rules, class Match = re_match_fn>
constexpr dynamic_match find_dynamic_rule(Rules const& rules, std::string_view layer_name, Match&& match = {}) {
  std::size_t i = 0;
  for (auto const& rule : rules) {
    dynamic_key const k = parse_dynamic_key(std::string_view(rule.key));
    if (match(k.pattern, layer_name)) {
      return {k.negative ? dynamic_match::kind::negative : dynamic_match::kind::positive, i};
    }
    ++i;
  }
  return {};
}

namespace detail {
template <class Rules>
constexpr auto const& rule_at(Rules const& rules, std::size_t i) {
  auto it = std::begin(rules);
  std::advance(it, static_cast<std::ptrdiff_t>(i));
  return *it;
}
}  // namespace detail

/// What `get_dynamic_override(config, layer_name, key, default)` returns, given the rule found:
/// `False` for a negative rule; `body.get(key, default)` for a positive one (for a body that is
/// not an object, `attribute_error` is set: Python's `.get` raises `AttributeError`); `default`
/// when nothing matched.
struct dynamic_field {
  py_value value;
  bool attribute_error = false;
};

template <class Rules>
constexpr dynamic_field dynamic_override_field(Rules const& rules, dynamic_match m, std::string_view field,
                                               py_value default_value) {
  if (m.is_negative()) {
    return {py_value::of_bool(false), false};
  }
  if (!m.is_positive()) {
    return {default_value, false};
  }
  dynamic_rule_body const& body = detail::rule_at(rules, m.rule).body;
  if (body.type != py_type::dict) {
    return {body.self, true};
  }
  py_value const v = body.get(field);
  return {v.present() ? v : default_value, false};
}

/// The GPTQ kernel family whose `override_config` branch applies (`config.get_name()`).
enum class gptq_kernel : std::uint8_t { gptq, gptq_marlin };

/// `gptq_marlin`'s `TYPE_MAP`: `(4, sym) -> uint4b8`, `(8, sym) -> uint8b128`; nothing for
/// asymmetric or other widths.
constexpr std::optional<scalar_type> gptq_marlin_type(std::int64_t bits, bool sym) {
  if (sym && bits == 4) {
    return uint4b8;
  }
  if (sym && bits == 8) {
    return uint8b128;
  }
  return std::nullopt;
}

/// The per-layer GPTQ parameters the reference's config object carries.
struct gptq_params {
  gptq_kernel kernel = gptq_kernel::gptq_marlin;
  std::int64_t bits = 4;
  bool bits_is_bool = false;  ///< `weight_bits` holds a Python `bool` (quirk: `"bits": true`)
  std::int64_t group_size = 128;
  bool desc_act = false;
  bool sym = true;
  bool lm_head_quantized = false;
  std::int64_t pack_factor = 8;                     ///< `32 // bits` (sglang: floor division)
  std::optional<scalar_type> quant_type = uint4b8;  ///< `gptq_marlin` only

  friend constexpr bool operator==(gptq_params const&, gptq_params const&) = default;
};

/// The error `override_config` raises, if any.
enum class gptq_error : std::uint8_t {
  none,
  unsupported_marlin,  ///< ValueError "Unsupported quantization config: bits=…, sym=…"
  unsupported_bits,    ///< ValueError "Currently, only 2/3/4/8-bit weight quantization …"
  zero_division,       ///< ZeroDivisionError (`32 // 0`: bits overridden to `False` or 0)
  attribute_error,     ///< AttributeError (a rule body that is not an object)
};

/// The outcome of `override_config`: the parameters as far as the reference got, and its error.
struct gptq_override {
  gptq_params params;
  gptq_error error = gptq_error::none;
  py_value bad_field;  ///< the body for `attribute_error`
};

/// Python floor division `a // b` (b != 0).
constexpr std::int64_t py_floordiv(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) {
    --q;
  }
  return q;
}

/// `override_config(config, prefix)` for the rule `m` found for the layer: bits, group size,
/// desc_act (and sym for `gptq_marlin`) overridden by the rule where the field has the Python
/// type the reference checks; `pack_factor = 32 // bits`; `gptq_marlin` re-derives `quant_type`
/// from `TYPE_MAP` (error if absent); `gptq` requires bits in {2, 3, 4, 8}.
template <class Rules>
constexpr gptq_override override_config(gptq_params base, Rules const& rules, dynamic_match m) {
  gptq_override out{base, gptq_error::none, {}};
  gptq_params& p = out.params;
  auto const fetch = [&](std::string_view field, py_value def) -> std::optional<py_value> {
    dynamic_field const f = dynamic_override_field(rules, m, field, def);
    if (f.attribute_error) {
      out.error = gptq_error::attribute_error;
      out.bad_field = f.value;
      return std::nullopt;
    }
    return f.value;
  };
  auto const as_int = [](std::int64_t v) { return py_value::of_int(v); };
  auto const as_bits = [&](gptq_params const& q) {
    return q.bits_is_bool ? py_value::of_bool(q.bits != 0) : py_value::of_int(q.bits);
  };
  auto const bits = fetch("bits", as_bits(p));
  if (!bits) {
    return out;
  }
  if (bits->is_int()) {
    p.bits = bits->integer;
    p.bits_is_bool = bits->is_bool();
  }
  auto const group = fetch("group_size", as_int(p.group_size));
  if (!group) {
    return out;
  }
  if (group->is_int()) {
    p.group_size = group->integer;
  }
  auto const desc = fetch("desc_act", py_value::of_bool(p.desc_act));
  if (!desc) {
    return out;
  }
  if (desc->is_bool()) {
    p.desc_act = desc->integer != 0;
  }
  if (p.bits == 0) {
    out.error = gptq_error::zero_division;
    return out;
  }
  p.pack_factor = py_floordiv(32, p.bits);  // negative bits: Python floors (the checks below fail)
  if (p.kernel == gptq_kernel::gptq_marlin) {
    auto const sym = fetch("sym", py_value::of_bool(p.sym));
    if (!sym) {
      return out;
    }
    if (sym->is_bool()) {
      p.sym = sym->integer != 0;
    }
    p.quant_type = gptq_marlin_type(p.bits, p.sym);
    if (!p.quant_type) {
      out.error = gptq_error::unsupported_marlin;
    }
  } else if (!(p.bits == 2 || p.bits == 3 || p.bits == 4 || p.bits == 8)) {
    out.error = gptq_error::unsupported_bits;
  }
  return out;
}

/// The message Python prints for an `override_config` error (`Type: message`).
inline std::string gptq_error_message(gptq_override const& o) {
  gptq_params const& p = o.params;
  py_value const bits = p.bits_is_bool ? py_value::of_bool(p.bits != 0) : py_value::of_int(p.bits);
  switch (o.error) {
    case gptq_error::none:
      return {};
    case gptq_error::unsupported_marlin:
      return "ValueError: Unsupported quantization config: bits=" + py_int_repr(bits) +
             ", sym=" + (p.sym ? "True" : "False");
    case gptq_error::unsupported_bits:
      return "ValueError: Currently, only 2/3/4/8-bit weight quantization is supported for GPTQ, "
             "but got " +
             py_int_repr(bits) + " bits.";
    case gptq_error::zero_division:
      return "ZeroDivisionError: integer division or modulo by zero";
    case gptq_error::attribute_error:
      return "AttributeError: '" + std::string(o.bad_field.type_name()) + "' object has no attribute 'get'";
  }
  return {};
}

/// The kind of layer the caller asks about (the reference tests `isinstance`).
enum class layer_kind : std::uint8_t {
  linear,   ///< `LinearBase`
  lm_head,  ///< `ParallelLMHead`
  moe,      ///< `FusedMoE` (the fused experts of a layer)
  other,    ///< anything else (embeddings, norms, attention)
};

/// How a consumer compares `get_dynamic_override(...)` with `False`.
enum class false_test : std::uint8_t {
  is_false,      ///< sglang: `is False`
  equals_false,  ///< vLLM: `== False` (also `0`, `0.0`)
};

/// What `get_linear_quant_method` returns.
enum class linear_method : std::uint8_t {
  none,                   ///< `None`: the method does not handle this layer
  unquantized_linear,     ///< `UnquantizedLinearMethod()`
  unquantized_embedding,  ///< `UnquantizedEmbeddingMethod()` (a skipped, quantized lm_head)
  quantized,              ///< `linear_method_cls(cloned_config)`
};

/// The per-layer decision of `get_linear_quant_method(config, layer, prefix, cls)`.
struct gptq_layer_decision {
  linear_method method = linear_method::none;
  dynamic_match rule;       ///< the rule `get_dynamic_override` found
  gptq_override override_;  ///< the cloned config after `override_config` (when quantized)

  constexpr bool quantized() const { return method == linear_method::quantized; }
};

/// `get_linear_quant_method` for a layer of the stated kind:
/// - neither a linear layer nor an lm_head with `lm_head_quantized` -> `none`;
/// - the rule found is negative (or, quirk, a positive rule whose body is `False`; vLLM:
///   `== False`) -> `unquantized_embedding` for the lm_head, else `unquantized_linear`;
/// - else quantized with the overridden copy of the config; an empty prefix gets no override.
///
/// `find_rule()` returns the rule of `prefix` (`find_dynamic_rule(rules, prefix)`, or the same
/// from a `compiled_dynamic_rules`); it is called only for a layer the method handles.
template <class Rules, class FindRule>
constexpr gptq_layer_decision get_linear_quant_method_by(gptq_params const& base, Rules const& rules,
                                                         std::string_view prefix, layer_kind kind, false_test test,
                                                         FindRule&& find_rule) {
  gptq_layer_decision d;
  d.override_.params = base;
  bool const lm_head_q = kind == layer_kind::lm_head && base.lm_head_quantized;
  if (kind != layer_kind::linear && !lm_head_q) {
    return d;
  }
  d.rule = find_rule();
  bool skip = d.rule.is_negative();
  if (d.rule.is_positive()) {
    dynamic_rule_body const& body = detail::rule_at(rules, d.rule.rule).body;
    if (body.type != py_type::dict) {
      skip = test == false_test::is_false ? body.self.is_false() : body.self.equals_false();
    }
  }
  if (skip) {
    d.method = lm_head_q ? linear_method::unquantized_embedding : linear_method::unquantized_linear;
    return d;
  }
  d.method = linear_method::quantized;
  if (!prefix.empty()) {
    d.override_ = override_config(base, rules, d.rule);
  }
  return d;
}

/// `get_linear_quant_method_by` with the rule found by `find_dynamic_rule(rules, prefix, match)`.
template <class Rules, class Match = re_match_fn>
constexpr gptq_layer_decision get_linear_quant_method(gptq_params const& base, Rules const& rules,
                                                      std::string_view prefix, layer_kind kind,
                                                      false_test test = false_test::is_false, Match&& match = {}) {
  return get_linear_quant_method_by(base, rules, prefix, kind, test,
                                    [&] { return find_dynamic_rule(rules, prefix, match); });
}

}  // namespace qtl
