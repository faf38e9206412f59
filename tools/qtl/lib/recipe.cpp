// A `qtl quantize --recipe` file: reading, checking, and the group of a module (recipe.hpp).

#include "recipe.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <qtl/io/json_parse.hpp>

#include "../config_tools.hpp"
#include "quantize_plan.hpp"

namespace qtl::tool {

namespace {

using ojson = nlohmann::ordered_json;

/// A target or ignore entry compiled. @throws config_error naming `where`
recipe_target compiled_target(ojson const& v, std::string const& where) {
  if (!v.is_string() || v.get_ref<std::string const&>().empty()) {
    throw config_error(where + " must be a non-empty string, not " + v.dump());
  }
  recipe_target t;
  t.text = v.get<std::string>();
  if (t.text.starts_with("re:")) {
    try {
      t.re = std::make_shared<qtl::regex>(t.text.substr(3));
    } catch (std::exception const& e) {
      throw config_error(where + " '" + qtl::io::printable(t.text) + "': " + e.what());
    }
  } else if (t.text.find('.') == std::string::npos && t.text.front() >= 'A' && t.text.front() <= 'Z') {
    // A class name, as compressed-tensors matches them; a checkpoint has no classes, only names.
    if (t.text != "Linear") {
      throw config_error(where + " '" + qtl::io::printable(t.text) + "'" +
                         ": a class name qtl cannot see in a checkpoint (Linear is the one class target: every "
                         "linear layer); name the modules, or match them with re:");
    }
    t.linear_class = true;
  }
  return t;
}

/// The list `v` of targets. @throws config_error
std::vector<recipe_target> target_list(ojson const& v, std::string const& where, bool may_be_empty) {
  if (!v.is_array() || (!may_be_empty && v.empty())) {
    throw config_error(where + " must be " + (may_be_empty ? "a list" : "a non-empty list") + " of strings");
  }
  std::vector<recipe_target> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    out.push_back(compiled_target(v[i], where + "[" + std::to_string(i) + "]"));
  }
  return out;
}

/// A group's options into quantize_options, each key checked for its type and format.
/// @throws config_error
quantize_options group_options(ojson const& g, std::string const& where) {
  quantize_options o;
  ojson const& f = g.at("format");
  if (!f.is_string()) {
    throw config_error(where + ".format must be a string, not " + f.dump());
  }
  o.format = f.get<std::string>();
  bool const known = std::find(quantize_formats.begin(), quantize_formats.end(), o.format) != quantize_formats.end();
  if (!known || o.format == "gptq") {
    std::string list;
    for (std::string_view n : quantize_formats) {
      list += n == "gptq" ? "" : (list.empty() ? "" : ", ") + std::string(n);
    }
    throw config_error(where + ".format " + f.dump() +
                       (known ? " is not written as compressed-tensors" : " is not a format qtl quantize writes") +
                       " (a recipe takes " + list + ")");
  }
  bool const integer = o.format == "w4a16" || o.format == "w8a16";
  for (auto const& [key, v] : g.items()) {
    if (key == "targets" || key == "format" || key == "name") {
      continue;
    }
    std::string const at = where + "." + key;
    if (key == "group_size" && integer) {
      if (!v.is_number_integer() || (v.get<std::int64_t>() <= 0 && v.get<std::int64_t>() != -1)) {
        throw config_error(at + " must be -1 (one group per column) or a positive integer, not " + v.dump());
      }
      o.group_size = v.get<std::int64_t>();
    } else if (key == "symmetric" && integer) {
      if (!v.is_boolean()) {
        throw config_error(at + " must be true or false, not " + v.dump());
      }
      (v.get<bool>() ? o.sym : o.asym) = true;
    } else if (key == "fp8_scheme" && o.format == "fp8") {
      if (!v.is_string() || (v != "tensor" && v != "channel" && v != "ct-block")) {
        throw config_error(
            at + " must be \"tensor\", \"channel\" or \"ct-block\" (compressed-tensors' FP8 forms), not " + v.dump());
      }
      o.fp8_scheme = v.get<std::string>();
    } else if (key == "group_size" || key == "symmetric" || key == "fp8_scheme") {
      throw config_error(at + " does not apply to format " + o.format +
                         (key == "fp8_scheme" ? " (fp8 only)" : " (w4a16 and w8a16 only)"));
    } else {
      throw config_error(at + ": unknown key (a group takes targets, format, name, group_size, symmetric, fp8_scheme)");
    }
  }
  return o;
}

/// Whether target `t` matches the module `name` by its name (exact, or re.match).
bool name_matches(recipe_target const& t, std::string const& name) {
  return t.re ? t.re->match(name) : !t.linear_class && t.text == name;
}

/// The group of the first target of `order` matching `name` by name, else by class.
std::optional<std::size_t> first_group(recipe const& r, std::vector<std::pair<std::string, std::size_t>> const& order,
                                       std::string const& name, bool linear, std::string* target) {
  auto const target_of = [&](std::string const& text) -> recipe_target const& {
    for (auto const& g : r.groups) {
      for (auto const& t : g.targets) {
        if (t.text == text) {
          return t;
        }
      }
    }
    throw std::logic_error("recipe target not found");
  };
  for (bool by_class : {false, true}) {
    for (auto const& [text, group] : order) {
      recipe_target const& t = target_of(text);
      if (by_class ? (t.linear_class && linear) : name_matches(t, name)) {
        if (target != nullptr) {
          *target = text;
        }
        return group;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

recipe read_recipe(std::filesystem::path const& path) {
  recipe r;
  r.path = path;
  std::string const where = "--recipe " + path.string();
  std::string const text = read_text_file(path, "--recipe");
  ojson const doc = qtl::io::parse_json_like_python<config_error>(text, where + ": ");
  if (!doc.is_object()) {
    throw config_error(where + ": expected an object {\"groups\": [...], \"ignore\": [...]}, not " +
                       std::string(doc.type_name()));
  }
  for (auto const& [key, v] : doc.items()) {
    if (key != "groups" && key != "ignore" && key != "form") {
      throw config_error(where + ": unknown key " + ojson(key).dump() + " (a recipe takes groups, ignore and form)");
    }
  }
  if (auto const form = doc.find("form"); form != doc.end()) {
    if (*form != "compressed-tensors" && *form != "modelopt") {
      throw config_error(where + ": form must be \"compressed-tensors\" or \"modelopt\", not " + form->dump());
    }
    r.modelopt = *form == "modelopt";
  }
  auto const groups = doc.find("groups");
  if (groups == doc.end() || !groups->is_array() || groups->empty()) {
    throw config_error(where + ": groups must be a non-empty list of groups");
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < groups->size(); ++i) {
    ojson const& g = (*groups)[i];
    std::string const at = where + ": groups[" + std::to_string(i) + "]";
    if (!g.is_object()) {
      throw config_error(at + " must be an object, not " + g.dump());
    }
    for (char const* required : {"targets", "format"}) {
      if (!g.contains(required)) {
        throw config_error(at + " has no " + required);
      }
    }
    recipe_group rg;
    rg.targets = target_list(g.at("targets"), at + ".targets", false);
    rg.options = group_options(g, at);
    rg.name = "group_" + std::to_string(i);
    if (auto const n = g.find("name"); n != g.end()) {
      if (!n->is_string() || n->get_ref<std::string const&>().empty()) {
        throw config_error(at + ".name must be a non-empty string, not " + n->dump());
      }
      rg.name = n->get<std::string>();
    }
    if (!names.insert(rg.name).second) {
      throw config_error(at + ": a second group named " + ojson(rg.name).dump());
    }
    if (r.modelopt && rg.options.format != "nvfp4") {
      throw config_error(at + ".format " + ojson(rg.options.format).dump() +
                         ": the modelopt form writes nvfp4 only (W4A16_NVFP4); ModelOpt's FP8 and NVFP4 W4A4 "
                         "need a static activation scale (input_scale) from calibration, which qtl does not do");
    }
    r.groups.push_back(std::move(rg));
  }
  if (auto const ig = doc.find("ignore"); ig != doc.end()) {
    r.ignore = target_list(*ig, where + ": ignore", true);
  }
  // compressed-tensors' dict target -> scheme (the later group wins), and vLLM's order of it.
  std::map<std::string, std::size_t> owner;
  for (std::size_t i = 0; i < r.groups.size(); ++i) {
    for (auto const& t : r.groups[i].targets) {
      if (!owner.contains(t.text)) {
        r.vllm_order.emplace_back(t.text, 0);
      }
      owner[t.text] = i;
    }
  }
  for (auto& [text, group] : r.vllm_order) {
    group = owner.at(text);
  }
  r.ct_order = r.vllm_order;
  std::stable_sort(r.ct_order.begin(), r.ct_order.end(), [](auto const& a, auto const& b) {
    bool const ra = a.first.starts_with("re:");
    bool const rb = b.first.starts_with("re:");
    return ra != rb ? rb : a.first < b.first;
  });
  return r;
}

std::optional<std::size_t> recipe_group_of(recipe const& r, std::string const& name, std::string const& engine_name,
                                           bool linear, std::string& why, std::string& conflict) {
  for (auto const& t : r.ignore) {
    if (name_matches(t, name) || (t.linear_class && linear)) {
      why = "recipe ignore '" + t.text + "'";
      return std::nullopt;
    }
  }
  std::string ct_target;
  std::string vllm_target;
  std::optional<std::size_t> const ct = first_group(r, r.ct_order, name, linear, &ct_target);
  // vLLM asks with the fused layer's name (qkv_proj): a name, else a class, else every shard's
  // name (the shards agree: check_recipe_fused_layers)
  std::optional<std::size_t> vllm = first_group(r, r.vllm_order, engine_name, linear, &vllm_target);
  if (!vllm && engine_name != name) {
    vllm = first_group(r, r.vllm_order, name, linear, &vllm_target);
  }
  if (ct != vllm) {
    auto const said = [&](std::optional<std::size_t> g, std::string const& t) {
      return g ? r.groups[*g].name + " ('" + t + "')" : std::string("no group");
    };
    conflict =
        "--recipe " + r.path.string() + ": " + qtl::io::printable(name) + ": compressed-tensors " +
        "(transformers) takes " + said(ct, ct_target) +
        " (exact names, then regexes in sorted order, then classes), vLLM takes " + said(vllm, vllm_target) + " for " +
        qtl::io::printable(engine_name) +
        " (the first target in the config's order matching it, then classes); make the groups' targets "
        "not overlap" +
        (engine_name != name ? std::string(" (vLLM asks with the fused layer's name: let the shard's target match ") +
                                   qtl::io::printable(engine_name) + " too)"
                             : std::string());
  }
  if (!ct) {
    why = "matched by no recipe group";
  }
  return ct;
}

}  // namespace qtl::tool
