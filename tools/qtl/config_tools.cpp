// Quantization configs for explain, lint and quantize (see config_tools.hpp).

#include "config_tools.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <qtl/io/json_parse.hpp>
#include <qtl/io/regular_file.hpp>
#include <qtl/io/safetensors.hpp>

#include "common.hpp"
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

/// The packed mapping in effect: the config's, else the reference's fallback.
packed_mapping effective_mapping(quant_config const& cfg) {
  if (!cfg.packed_modules_mapping.empty()) {
    return cfg.packed_modules_mapping;
  }
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

}  // namespace

config_file read_config_file(std::filesystem::path const& path, std::filesystem::path const& mapping_path) {
  config_file out;
  out.path = path;
  quant_config& cfg = out.config;
  std::string const text = read_text_file(path, "--config");
  try {
    cfg = qtl::io::parse_quant_config(text);
  } catch (config_error const& e) {
    throw config_error(path.string() + ": " + e.what());
  }
  out.document = qtl::io::parse_json_like_python<config_error>(text, "--config: " + path.string() + ": ");
  out.quant_object = out.document.is_object() && out.document.contains("quantization_config")
                         ? out.document["quantization_config"]
                         : out.document;
  if (!mapping_path.empty()) {
    nlohmann::ordered_json doc = read_json_document(mapping_path, "--packed-modules-mapping");
    if (doc.is_object() && doc.contains("packed_modules_mapping")) {
      doc = nlohmann::ordered_json(doc["packed_modules_mapping"]);
    }
    try {
      cfg.packed_modules_mapping = qtl::io::detail::mapping_of(doc, "packed_modules_mapping");
    } catch (config_error const& e) {
      throw config_error(mapping_path.string() + ": " + e.what());
    }
  }
  return out;
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

std::vector<consumer> resolve_consumers(std::string const& name, quant_config const& cfg) {
  if (name == "sglang" || name == "vllm") {
    return {engine_consumer(cfg, name == "sglang")};
  }
  if (name == "all") {
    return {all_consumers.begin(), all_consumers.end()};
  }
  if (auto const c = consumer_from_name(name)) {
    return {*c};
  }
  std::string known = "sglang, vllm, all";
  for (auto const c : all_consumers) {
    known += ", " + std::string(consumer_name(c));
  }
  throw usage_error("--consumer: unknown consumer '" + name + "' (one of: " + known + ")");
}

std::vector<std::string> checkpoint_modules(std::filesystem::path const& path) {
  guard_opening_inputs();
  auto const ckpt = qtl::io::safetensors_checkpoint::open(path);
  guard_checkpoint_mappings(ckpt);
  test_stop_point("reading");  // test hook (staged_output.hpp): truncate the input here
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (auto const& e : ckpt.tensors()) {
    std::string const& n = e.tensor->name;
    for (std::string_view suffix : {".weight", ".qweight"}) {
      if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
        std::string m = n.substr(0, n.size() - suffix.size());
        if (seen.insert(m).second) {
          out.push_back(std::move(m));
        }
        break;
      }
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
