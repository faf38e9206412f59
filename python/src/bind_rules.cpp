// is_layer_skipped, get_dynamic_override, override_config (qtl/rules/skip.hpp, qtl/rules/dynamic.hpp:
// the rules `qtl explain` runs), in the reference's signatures:
//
//   is_layer_skipped(prefix, ignored_layers, fused_mapping={}) -> bool
//   get_dynamic_override(config, layer_name, key=None, default_value=None) -> False | rule body | value
//   override_config(config, prefix) -> None (config updated in place)
//
// What stands for the reference's `QuantizationConfig`: either the plain dict of the checkpoint's
// `quantization_config` (its keys: "dynamic", "bits", "group_size", "desc_act", "sym",
// "quant_method" standing for `config.dynamic`, `weight_bits`, `group_size`, `desc_act`, `is_sym`,
// `get_name()`), or any object with the reference's attributes (`dynamic`, `weight_bits`,
// `group_size`, `desc_act`, `is_sym`, `get_name()`, optionally `TYPE_MAP`), sglang's own included.
// override_config writes back what the reference writes (in the dict: "bits", "group_size",
// "desc_act", "pack_factor", and for gptq_marlin "sym" and "quant_type", a qtl.ScalarType), in
// the reference's order, up to the error it raises.
//
// Patterns are matched by QTL's regex engine with Python's `re.match` semantics; a pattern Python
// rejects raises qtl.RegexError (where the reference raises re.error), one that Python runs but
// QTL's engine does not (a backreference, inline flags, ...) qtl.UnsupportedError.

#include <nanobind/stl/string.h>

#include <qtl/rules/config.hpp>
#include <qtl/rules/dynamic.hpp>
#include <qtl/rules/skip.hpp>

#include "bindings.hpp"

namespace qtl::py {
namespace {

std::string str_of(nb::handle h, char const* what) {
  if (!PyUnicode_Check(h.ptr())) {
    throw dtype_error(std::string(what) + ": expected a str, got " + nb::type_name(h.type()).c_str());
  }
  return nb::cast<std::string>(h);
}

std::vector<std::string> str_list(nb::handle obj, char const* what) {
  std::vector<std::string> out;
  if (PyUnicode_Check(obj.ptr())) {
    throw dtype_error(std::string(what) + ": expected a list of str, got a str");
  }
  for (nb::handle h : obj) {
    out.push_back(str_of(h, what));
  }
  return out;
}

/// The reference's `Mapping[str, List[str]]`.
qtl::packed_mapping mapping_of(nb::handle obj) {
  qtl::packed_mapping out;
  if (obj.is_none()) {
    return out;
  }
  if (!nb::hasattr(obj, "items")) {
    throw dtype_error("fused_mapping: expected a mapping of str to a list of str, got " +
                      std::string(nb::type_name(obj.type()).c_str()));
  }
  for (nb::handle item : obj.attr("items")()) {
    nb::object key = item[0];
    nb::object value = item[1];
    out.emplace_back(str_of(key, "fused_mapping key"), str_list(value, "fused_mapping value"));
  }
  return out;
}

bool is_layer_skipped(std::string const& prefix, nb::handle ignored, nb::handle fused) {
  auto const list = str_list(ignored, "ignored_layers");
  auto const mapping = mapping_of(fused);
  return qtl::is_layer_skipped(prefix, list, mapping);
}

/// A Python value as the rules see it (`isinstance` decides what a field does).
qtl::py_value py_value_of(nb::handle h) {
  PyObject* p = h.ptr();
  if (p == Py_None) {
    return qtl::py_value::of(qtl::py_type::none);
  }
  if (PyBool_Check(p)) {
    return qtl::py_value::of_bool(p == Py_True);
  }
  if (PyLong_Check(p)) {
    int overflow = 0;
    long long const v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow != 0) {
      throw qtl::config_error("qtl: the integer " + std::string(nb::str(h).c_str()) + " in the config is out of range");
    }
    return qtl::py_value::of_int(v);
  }
  if (PyFloat_Check(p)) {
    return qtl::py_value::of_float(PyFloat_AsDouble(p));
  }
  if (PyUnicode_Check(p)) {
    return qtl::py_value::of(qtl::py_type::string);
  }
  if (PyList_Check(p) || PyTuple_Check(p)) {
    return qtl::py_value::of(qtl::py_type::list);
  }
  if (PyDict_Check(p) || nb::hasattr(h, "get")) {
    return qtl::py_value::of(qtl::py_type::dict);
  }
  return qtl::py_value::of(qtl::py_type::string);  // another object: neither int, bool nor a mapping
}

/// `config.dynamic` (a dict's "dynamic", absent: {}), as the rule list and the Python bodies.
struct dynamic_rules {
  std::vector<qtl::dynamic_rule> rules;
  std::vector<nb::object> bodies;
};

nb::object dynamic_of(nb::handle config) {
  if (PyDict_Check(config.ptr())) {
    nb::dict d = nb::borrow<nb::dict>(config);
    return d.contains("dynamic") ? nb::object(d["dynamic"]) : nb::object(nb::dict());
  }
  if (!nb::hasattr(config, "dynamic")) {
    throw dtype_error(
        "config: expected the quantization_config dict or a QuantizationConfig with a `dynamic` "
        "attribute, got " +
        std::string(nb::type_name(config.type()).c_str()));
  }
  return config.attr("dynamic");
}

dynamic_rules rules_of(nb::handle config) {
  nb::object dyn = dynamic_of(config);
  dynamic_rules out;
  if (dyn.is_none()) {
    return out;
  }
  if (!nb::hasattr(dyn, "items")) {
    throw qtl::config_error("config.dynamic: expected a dict of pattern -> overrides, got " +
                            std::string(nb::type_name(dyn.type()).c_str()));
  }
  for (nb::handle item : dyn.attr("items")()) {
    nb::object body = item[1];
    qtl::dynamic_rule r;
    r.key = str_of(item[0], "config.dynamic key");
    qtl::py_value const self = py_value_of(body);
    r.body.type = self.type;
    r.body.self = self;
    if (self.type == qtl::py_type::dict) {
      auto const field = [&](char const* name) {
        nb::object v = body.attr("get")(name, nb::handle(Py_Ellipsis));
        return v.ptr() == Py_Ellipsis ? qtl::py_value{} : py_value_of(v);
      };
      r.body.bits = field("bits");
      r.body.group_size = field("group_size");
      r.body.desc_act = field("desc_act");
      r.body.sym = field("sym");
    }
    out.rules.push_back(std::move(r));
    out.bodies.push_back(std::move(body));
  }
  return out;
}

qtl::dynamic_match find_rule(dynamic_rules const& d, std::string const& layer_name) {
  return qtl::find_dynamic_rule(d.rules, layer_name);
}

nb::object get_dynamic_override(nb::handle config, std::string const& layer_name, nb::handle key,
                                nb::handle default_value) {
  dynamic_rules const d = rules_of(config);
  qtl::dynamic_match const m = find_rule(d, layer_name);
  if (m.is_negative()) {
    return nb::bool_(false);
  }
  if (m.is_positive()) {
    nb::object const& body = d.bodies[m.rule];
    if (key.is_none()) {
      return body;
    }
    return body.attr("get")(key, default_value);  // a body that is not a dict: AttributeError, as the reference
  }
  return nb::borrow(default_value);
}

/// The config's fields, read from a dict or from the reference's attributes.
struct config_access {
  nb::handle config;
  bool is_dict;

  nb::object get(char const* dict_key, char const* attr, nb::handle fallback) const {
    if (is_dict) {
      nb::dict d = nb::borrow<nb::dict>(config);
      return d.contains(dict_key) ? nb::object(d[dict_key]) : nb::borrow(fallback);
    }
    return nb::hasattr(config, attr) ? nb::object(config.attr(attr)) : nb::borrow(fallback);
  }
  void set(char const* dict_key, char const* attr, nb::handle value) const {
    if (is_dict) {
      nb::borrow<nb::dict>(config)[dict_key] = value;
    } else {
      nb::setattr(config, attr, value);
    }
  }
  std::string name() const {
    nb::object n;
    if (is_dict) {
      n = get("quant_method", "", nb::str(""));
    } else if (nb::hasattr(config, "get_name")) {
      n = config.attr("get_name")();
    } else {
      return "";
    }
    return PyUnicode_Check(n.ptr()) ? nb::cast<std::string>(n) : std::string();
  }
};

std::int64_t required_int(config_access const& c, char const* key, char const* attr, bool* is_bool = nullptr) {
  nb::object v = c.get(key, attr, nb::none());
  qtl::py_value const p = py_value_of(v);
  if (!p.is_int()) {
    throw qtl::config_error(std::string("qtl.override_config: config ") + (c.is_dict ? "[\"" : ".") +
                            (c.is_dict ? key : attr) + (c.is_dict ? "\"]" : "") + " must be an int, got " +
                            nb::type_name(v.type()).c_str());
  }
  if (is_bool != nullptr) {
    *is_bool = p.is_bool();
  }
  return p.integer;
}

bool optional_bool(config_access const& c, char const* key, char const* attr, bool fallback) {
  nb::object v = c.get(key, attr, nb::bool_(fallback));
  if (!PyBool_Check(v.ptr())) {
    throw qtl::config_error(std::string("qtl.override_config: config ") + (c.is_dict ? key : attr) +
                            " must be a bool, got " + nb::type_name(v.type()).c_str());
  }
  return v.ptr() == Py_True;
}

nb::object bits_object(qtl::gptq_params const& p) {
  return p.bits_is_bool ? nb::object(nb::bool_(p.bits != 0)) : nb::object(nb::int_(p.bits));
}

void override_config(nb::handle config, std::string const& prefix) {
  config_access const c{config, PyDict_Check(config.ptr()) != 0};
  std::string const name = c.name();
  bool const marlin = name == "gptq_marlin";
  qtl::gptq_params base;
  // Other names (a dict of a "gptq" checkpoint, awq, ...) take the "gptq" path of the library; its
  // bits check is the reference's `elif get_name() == "gptq"` branch only.
  base.kernel = marlin ? qtl::gptq_kernel::gptq_marlin : qtl::gptq_kernel::gptq;
  base.bits = required_int(c, "bits", "weight_bits", &base.bits_is_bool);
  base.group_size = required_int(c, "group_size", "group_size");
  base.desc_act = optional_bool(c, "desc_act", "desc_act", false);
  base.sym = marlin ? optional_bool(c, "sym", "is_sym", true) : true;
  dynamic_rules const d = rules_of(config);
  qtl::dynamic_match const m = find_rule(d, prefix);
  qtl::gptq_override const o = qtl::override_config(base, d.rules, m);
  qtl::gptq_params const& p = o.params;
  if (o.error == qtl::gptq_error::attribute_error) {
    // The first lookup fails: nothing is written (Python's own error and message).
    d.bodies[m.rule].attr("get")("bits", bits_object(base));
    throw qtl::config_error("qtl.override_config: " + qtl::gptq_error_message(o));
  }
  c.set("bits", "weight_bits", bits_object(p));
  // The rule's own object where the reference assigns it: `"group_size": true` stays True.
  nb::object group = nb::int_(p.group_size);
  if (m.is_negative()) {
    group = nb::bool_(false);
  } else if (m.is_positive()) {
    nb::object v = d.bodies[m.rule].attr("get")("group_size", nb::none());
    if (PyLong_Check(v.ptr())) {
      group = v;
    }
  }
  c.set("group_size", "group_size", group);
  c.set("desc_act", "desc_act", nb::bool_(p.desc_act));
  if (o.error == qtl::gptq_error::zero_division) {
    PyErr_SetString(PyExc_ZeroDivisionError, "integer division or modulo by zero");
    throw nb::python_error();
  }
  c.set("pack_factor", "pack_factor", nb::int_(p.pack_factor));
  if (marlin) {
    c.set("sym", "is_sym", nb::bool_(p.sym));
  }
  if (o.error == qtl::gptq_error::unsupported_marlin ||
      (o.error == qtl::gptq_error::unsupported_bits && name == "gptq")) {
    std::string msg = qtl::gptq_error_message(o);
    msg.erase(0, std::string("ValueError: ").size());
    throw qtl::config_error(msg);
  }
  if (marlin && p.quant_type) {
    nb::object q = nb::cast(*p.quant_type);
    if (!c.is_dict && nb::hasattr(config, "TYPE_MAP")) {  // the caller's own ScalarType objects
      q = config.attr("TYPE_MAP")[nb::make_tuple(bits_object(p), nb::bool_(p.sym))];
    }
    c.set("quant_type", "quant_type", q);
  }
}

}  // namespace

void bind_rules(nb::module_& m) {
  m.def("is_layer_skipped", &is_layer_skipped, nb::arg("prefix"), nb::arg("ignored_layers"),
        nb::arg("fused_mapping").none() = nb::none());
  m.def("get_dynamic_override", &get_dynamic_override, nb::arg("config"), nb::arg("layer_name"),
        nb::arg("key").none() = nb::none(), nb::arg("default_value").none() = nb::none());
  m.def("override_config", &override_config, nb::arg("config"), nb::arg("prefix"));
}

}  // namespace qtl::py
