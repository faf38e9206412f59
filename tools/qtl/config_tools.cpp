// Quantization configs for explain, lint and quantize (see config_tools.hpp).

#include "config_tools.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <qtl/io/json_parse.hpp>
#include <qtl/io/regular_file.hpp>
#include <qtl/io/safetensors.hpp>

#include "common.hpp"
#include "recognize.hpp"
#include "staged_output.hpp"

namespace qtl::tool {

std::string read_text_file(std::filesystem::path const& path, char const* what) {
  std::string text;
  std::string why;
  if (!qtl::io::read_regular_file(path, max_config_bytes, text, why)) {
    throw config_error(std::string(what) + ": " + path.string() + ": " + why);
  }
  return text;
}

nlohmann::ordered_json read_json_document(std::filesystem::path const& path, char const* what) {
  return qtl::io::parse_json_like_python<config_error>(read_text_file(path, what),
                                                       std::string(what) + ": " + path.string() + ": ");
}

namespace {

std::string_view last_component(std::string_view m) {
  auto const dot = m.rfind('.');
  return dot == std::string_view::npos ? m : m.substr(dot + 1);
}

std::string_view parent_of(std::string_view m) {
  auto const dot = m.rfind('.');
  return dot == std::string_view::npos ? std::string_view{} : m.substr(0, dot);
}

/// The packed mapping in effect: the config's, else the default.
packed_mapping effective_mapping(quant_config const& cfg) {
  return cfg.packed_modules_mapping.empty() ? default_packed_modules_mapping() : cfg.packed_modules_mapping;
}

/// The quantization_config of a config document: config.json's object, else the document.
nlohmann::ordered_json const& quant_object_of(nlohmann::ordered_json const& doc) {
  auto const it = doc.is_object() ? doc.find("quantization_config") : doc.end();
  return it == doc.end() ? doc : *it;
}

/// A model's config.json (it names the model) with no quantization config in it.
bool is_unquantized_model_config(nlohmann::ordered_json const& doc) {
  return doc.is_object() && !doc.contains("quantization_config") && !doc.contains("quant_method") &&
         (doc.contains("model_type") || doc.contains("architectures"));
}

}  // namespace

packed_mapping default_packed_modules_mapping() {
  packed_mapping m;
  for (auto const& e : fallback_fused_shards) {
    std::vector<std::string> shards;
    for (auto const s : e.second) {
      shards.emplace_back(s);
    }
    m.emplace_back(std::string(e.first), std::move(shards));
  }
  return m;
}

config_file read_config_file(std::filesystem::path const& path, std::filesystem::path const& mapping_path) {
  config_file out;
  out.path = path;
  quant_config& cfg = out.config;
  std::string const text = read_text_file(path, "--config");
  out.document = qtl::io::parse_json_like_python<config_error>(text, "--config: " + path.string() + ": ");
  if (is_unquantized_model_config(out.document)) {
    throw config_error(path.string() + ": this config.json has no quantization_config (a model's config "
                                       "without quantization; give a quantized checkpoint's config.json "
                                       "or a quantization config)");
  }
  try {
    cfg = qtl::io::parse_quant_config(text);
  } catch (config_error const& e) {
    throw config_error(path.string() + ": " + e.what());
  }
  out.quant_object = quant_object_of(out.document);
  if (!mapping_path.empty()) {
    nlohmann::ordered_json doc = read_json_document(mapping_path, "--packed-modules-mapping");
    if (doc.is_object() && doc.contains("packed_modules_mapping")) {
      doc = nlohmann::ordered_json(doc["packed_modules_mapping"]);
    }
    try {
      cfg.packed_modules_mapping = qtl::io::packed_modules_mapping_of(doc, "packed_modules_mapping");
    } catch (config_error const& e) {
      throw config_error(mapping_path.string() + ": " + e.what());
    }
  }
  // A document that describes its model (`module_names`, as the golden configs do) is taken as
  // it is: its expected decisions were taken with its own mapping, none when it gives none. Any
  // other config gets the default.
  bool const describes_model = out.document.is_object() && out.document.contains("module_names");
  if (cfg.packed_modules_mapping.empty() && !describes_model) {
    cfg.packed_modules_mapping = default_packed_modules_mapping();
  }
  return out;
}

std::filesystem::path quant_config_path(std::filesystem::path const& config, std::filesystem::path const& checkpoint) {
  namespace fs = std::filesystem;
  if (!config.empty()) {
    return config;
  }
  if (checkpoint.empty()) {
    throw usage_error("give --config, or a --checkpoint whose config.json has a quantization_config");
  }
  std::error_code ec;
  fs::path dir = fs::is_directory(checkpoint, ec) ? checkpoint : checkpoint.parent_path();
  if (dir.empty()) {
    dir = ".";
  }
  fs::path const model_config = dir / "config.json";
  if (fs::exists(model_config, ec)) {
    nlohmann::ordered_json const doc = read_json_document(model_config, "the checkpoint's config.json");
    if (doc.is_object() && doc.contains("quantization_config")) {
      return model_config;
    }
  }
  if (fs::path const modelopt = dir / "hf_quant_config.json"; fs::exists(modelopt, ec)) {
    return modelopt;
  }
  throw usage_error("no --config, and " + shown(model_config.string()) +
                    (fs::exists(model_config, ec) ? " has no quantization_config" : " does not exist") +
                    " (nor is there an hf_quant_config.json): give --config");
}

consumer engine_consumer(quant_config const& cfg, bool sglang) {
  switch (cfg.family) {
    case quant_family::gptq: return sglang ? consumer::sglang_gptq : consumer::vllm_gptq;
    case quant_family::awq: return sglang ? consumer::sglang_awq : consumer::vllm_awq;
    case quant_family::fp8: return sglang ? consumer::sglang_fp8 : consumer::vllm_fp8;
    // MXFP4: sglang's Mxfp4Config calls the reference's is_layer_skipped; vLLM's the same
    // exact-membership is_layer_skipped as its FP8 loader.
    case quant_family::mxfp4: return sglang ? consumer::sglang_is_layer_skipped : consumer::vllm_fp8;
    case quant_family::modelopt: return sglang ? consumer::sglang_modelopt : consumer::vllm_modelopt;
    case quant_family::compressed_tensors:
      return sglang ? consumer::sglang_compressed_tensors : consumer::vllm_compressed_tensors;
    case quant_family::auto_round: return sglang ? consumer::sglang_auto_round : consumer::vllm_auto_round;
  }
  return consumer::sglang_is_layer_skipped;
}

std::vector<consumer> loading_consumers(quant_config const& cfg) {
  std::vector<consumer> out = {engine_consumer(cfg, true), engine_consumer(cfg, false)};
  switch (cfg.family) {
    case quant_family::fp8: out.insert(out.end(), {consumer::transformers_v4, consumer::transformers_v5}); break;
    case quant_family::compressed_tensors: out.push_back(consumer::compressed_tensors); break;
    case quant_family::modelopt: out.push_back(consumer::fnmatch); break;
    case quant_family::mxfp4: out.insert(out.end(), {consumer::transformers_v5, consumer::fnmatch_subtree}); break;
    case quant_family::awq: out.push_back(consumer::sglang_is_layer_skipped); break;
    case quant_family::gptq:
    case quant_family::auto_round: break;
  }
  return out;
}

bool decides_fused_layers(consumer c) {
  std::string_view const n = consumer_name(c);
  return n.starts_with("sglang_") || n.starts_with("vllm_");
}

std::vector<consumer> resolve_consumers(std::string const& name, quant_config const& cfg) {
  if (name == "loaders") {
    return loading_consumers(cfg);
  }
  if (name == "sglang" || name == "vllm") {
    return {engine_consumer(cfg, name == "sglang")};
  }
  if (name == "all") {
    return {all_consumers.begin(), all_consumers.end()};
  }
  if (auto const c = consumer_from_name(name)) {
    return {*c};
  }
  std::string known = "loaders, sglang, vllm, all";
  for (auto const c : all_consumers) {
    known += ", " + std::string(consumer_name(c));
  }
  throw usage_error("--consumer: unknown consumer '" + shown(name) + "' (one of: " + known + ")");
}

std::string kept_reason(module_role role) {
  switch (role) {
    case module_role::linear: return {};
    case module_role::moe_router: return "MoE router (the engines build it unquantized)";
    case module_role::not_linear: return "not a linear layer";
  }
  return {};
}

module_role name_role(std::string_view module) {
  layer_kind const kind = infer_layer_kind(module);
  if (kind == layer_kind::lm_head) {
    return module_role::linear;
  }
  if (kind != layer_kind::linear) {
    return module_role::not_linear;
  }
  std::string_view const leaf = last_component(module);
  bool const router = leaf == "gate" || leaf == "shared_expert_gate" || leaf == "router";
  return router ? module_role::moe_router : module_role::linear;
}

module_role weight_role(std::string_view module, qtl::io::tensor_info const& weight) {
  bool const float_type = weight.type == dtype::F16 || weight.type == dtype::BF16 || weight.type == dtype::F32;
  if (weight.shape.size() != 2 || !float_type || weight.shape[0] <= 0 || weight.shape[1] <= 0) {
    return module_role::not_linear;
  }
  return name_role(module);
}

std::vector<checkpoint_module> checkpoint_modules(std::filesystem::path const& path) {
  guard_opening_inputs();
  auto const ckpt = qtl::io::safetensors_checkpoint::open(path);
  guard_checkpoint_mappings(ckpt);
  test_stop_point("reading");  // test hook (staged_output.hpp): truncate the input here
  std::vector<qtl::io::tensor_info const*> infos;
  for (auto const& e : ckpt.tensors()) {
    infos.push_back(e.tensor);
  }
  // The quantized modules, by each of their tensors' names.
  std::map<std::string_view, std::string> quantized;
  std::vector<quantized_module> const recognized = recognize(infos);
  for (auto const& q : recognized) {
    for (auto const& t : q.tensors) {
      quantized.emplace(t, q.module);
    }
  }
  std::vector<checkpoint_module> out;
  std::set<std::string> seen;
  for (qtl::io::tensor_info const* t : infos) {
    std::string_view const n = t->name;
    checkpoint_module m;
    if (auto const it = quantized.find(n); it != quantized.end()) {
      m.name = it->second;
    } else if (n.ends_with(".qweight")) {
      m.name = std::string(n.substr(0, n.size() - 8));  // GPTQ/AWQ without the tensors beside it
    } else if (n.ends_with(".weight")) {
      m.name = std::string(n.substr(0, n.size() - 7));
      m.role = weight_role(m.name, *t);
    } else {
      continue;  // biases, scales, ...
    }
    if (seen.insert(m.name).second) {
      out.push_back(std::move(m));
    }
  }
  return out;
}

std::vector<std::string> read_module_list(std::string const& path) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path);
    if (!file) {
      throw data_error("--modules: cannot open '" + path + "'");
    }
    in = &file;
  }
  std::vector<std::string> out;
  std::string line;
  while (std::getline(*in, line)) {
    auto const b = line.find_first_not_of(" \t\r");
    auto const e = line.find_last_not_of(" \t\r");
    if (b != std::string::npos) {
      out.push_back(line.substr(b, e - b + 1));
    }
  }
  return out;
}

std::optional<std::string> fused_name(quant_config const& cfg, std::string const& module) {
  std::string_view const leaf = last_component(module);
  std::string_view const parent = parent_of(module);
  for (auto const& [fused, shards] : effective_mapping(cfg)) {
    for (auto const& s : shards) {
      if (s == leaf) {
        return parent.empty() ? fused : std::string(parent) + "." + fused;
      }
    }
  }
  return std::nullopt;
}

std::vector<std::string> shard_names(quant_config const& cfg, std::string const& module) {
  std::string_view const leaf = last_component(module);
  std::string_view const parent = parent_of(module);
  for (auto const& [fused, shards] : effective_mapping(cfg)) {
    if (fused == leaf) {
      std::vector<std::string> out;
      for (auto const& s : shards) {
        out.push_back(parent.empty() ? s : std::string(parent) + "." + s);
      }
      return out;
    }
  }
  return {};
}

namespace {

/// The first mapping entry that lists `leaf` as a shard: the config's mapping (indexed), else
/// the fallback (`fallback` holds it).
packed_mapping::value_type const* shard_entry(compiled_config const& cc, std::string_view leaf,
                                              packed_mapping& fallback) {
  if (!cc.config().packed_modules_mapping.empty()) {
    return cc.fused().of_shard(leaf);
  }
  fallback = effective_mapping(cc.config());
  for (auto const& e : fallback) {
    if (std::find(e.second.begin(), e.second.end(), leaf) != e.second.end()) {
      return &e;
    }
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> fused_name(compiled_config const& cc, std::string const& module) {
  std::string_view const parent = parent_of(module);
  packed_mapping fallback;
  auto const* e = shard_entry(cc, last_component(module), fallback);
  if (e == nullptr) {
    return std::nullopt;
  }
  return parent.empty() ? e->first : std::string(parent) + "." + e->first;
}

std::string describe(decision const& d) {
  std::string out;
  if (d.error) {
    out = "ERROR " + *d.error;
  } else if (d.skipped) {
    out = "skipped";
  } else {
    out = "quantized";
    if (d.bits) {
      out += " " + std::to_string(*d.bits) + "-bit";
    }
    if (d.quant_type) {
      out += " " + std::string(d.quant_type->name().view());
    }
    if (d.group_size) {
      out += " group " + std::to_string(*d.group_size);
    }
    if (d.sym) {
      out += *d.sym ? " sym" : " asym";
    }
    if (d.desc_act && *d.desc_act) {
      out += " desc_act";
    }
  }
  if (d.rule) {
    out += " (rule '" + *d.rule + "')";
  }
  return out;
}

}  // namespace qtl::tool
