// The `quantization_config` qtl quantize writes (see quant_config_writer.hpp).

#include "quant_config_writer.hpp"

#include <algorithm>

namespace qtl::tool {

using ojson = nlohmann::ordered_json;

ojson compressed_tensors_weights(written_format const& f) {
  using kind = written_format::kind;
  if (f.what == kind::pack_quantized) {
    bool const channel = f.group_size == -1;
    return {{"num_bits", f.bits},
            {"type", "int"},
            {"symmetric", f.sym},
            {"group_size", channel ? ojson(nullptr) : ojson(f.group_size)},
            {"strategy", channel ? "channel" : "group"},
            {"dynamic", false},
            {"actorder", nullptr}};
  }
  if (f.what == kind::nvfp4) {
    return {{"num_bits", 4}, {"type", "float"}, {"symmetric", true}, {"group_size", 16},
            {"strategy", "tensor_group"}, {"dynamic", false}};
  }
  if (f.what == kind::mxfp8) {  // compressed-tensors' MXFP8 preset's weights
    return {{"num_bits", 8},      {"type", "float"},  {"symmetric", true},          {"group_size", 32},
            {"strategy", "group"}, {"dynamic", false}, {"scale_dtype", "torch.uint8"}};
  }
  if (f.what == kind::mxfp4) {
    return {{"num_bits", 4},      {"type", "float"},  {"symmetric", true},          {"group_size", 32},
            {"strategy", "group"}, {"dynamic", false}, {"scale_dtype", "torch.uint8"}};
  }
  ojson w = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true},
             {"strategy", f.scheme == fp8_scheme::tensor ? "tensor" : f.scheme == fp8_scheme::channel ? "channel" : "block"},
             {"dynamic", false}};
  if (f.scheme == fp8_scheme::block) {
    w["block_structure"] = {128, 128};
  }
  return w;
}

namespace {

/// The compressed-tensors format name of a format written as compressed-tensors.
std::string ct_format_name(written_format const& f) {
  using kind = written_format::kind;
  return f.what == kind::pack_quantized ? "pack-quantized"
         : f.what == kind::nvfp4        ? "nvfp4-pack-quantized"
         : f.what == kind::mxfp4        ? "mxfp4-pack-quantized"
         : f.what == kind::mxfp8        ? "mxfp8-quantized"
                                        : "float-quantized";
}

/// The dynamic FP8 activations of a float-quantized config group (FP8_DYNAMIC: per token;
/// FP8_BLOCK: groups of 128), else null (the weight-only schemes).
ojson ct_input_activations(written_format const& f) {
  if (f.what != written_format::kind::fp8) {
    return nullptr;
  }
  ojson act = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "token"}, {"dynamic", true}};
  if (f.scheme == fp8_scheme::block) {
    act["strategy"] = "group";
    act["group_size"] = 128;
  }
  return act;
}

/// A config group: QuantizationScheme's keys for format `f` on `targets`.
ojson ct_config_group(written_format const& f, std::vector<std::string> const& targets) {
  return {{"targets", targets},
          {"weights", compressed_tensors_weights(f)},
          {"input_activations", ct_input_activations(f)},
          {"output_activations", nullptr},
          {"format", ct_format_name(f)}};
}

}  // namespace

ojson mixed_quantization_config(std::vector<written_group> const& groups, std::vector<std::string> const& ignore) {
  ojson q = ojson::object();
  q["quant_method"] = "compressed-tensors";
  std::string format;
  for (auto const& g : groups) {
    std::string const f = ct_format_name(g.format);
    format = format.empty() || format == f ? f : "mixed-precision";
  }
  q["format"] = format;
  q["quantization_status"] = "compressed";
  q["kv_cache_scheme"] = nullptr;
  q["ignore"] = ignore;
  q["config_groups"] = ojson::object();
  for (auto const& g : groups) {
    q["config_groups"][g.name] = ct_config_group(g.format, g.targets);
  }
  return q;
}

ojson modelopt_mixed_config(std::vector<std::string> const& w4a16_nvfp4, bool hf_quant_config) {
  ojson layers = ojson::object();
  for (auto const& m : w4a16_nvfp4) {
    layers[m] = {{"quant_algo", "W4A16_NVFP4"}, {"group_size", 16}};
  }
  ojson const producer = {{"name", "qtl"}, {"version", QTL_VERSION}};
  if (hf_quant_config) {
    return {{"producer", producer},
            {"quantization",
             {{"quant_algo", "MIXED_PRECISION"},
              {"kv_cache_quant_algo", nullptr},
              {"exclude_modules", ojson::array()},
              {"quantized_layers", layers}}}};
  }
  return {{"quant_method", "modelopt"}, {"quant_algo", "MIXED_PRECISION"}, {"producer", producer},
          {"kv_cache_scheme", nullptr}, {"ignore", ojson::array()},        {"quantized_layers", layers}};
}

ojson written_quantization_config(ojson const& base, quant_config const& cfg, written_format const& f) {
  ojson q = base.is_object() ? base : ojson::object();
  using kind = written_format::kind;
  if (f.what == kind::pack_quantized || f.what == kind::nvfp4 || f.what == kind::mxfp4 || f.what == kind::mxfp8) {
    q["quant_method"] = "compressed-tensors";
    q["format"] = ct_format_name(f);
    q["quantization_status"] = "compressed";
    if (!q.contains("kv_cache_scheme")) {
      q["kv_cache_scheme"] = nullptr;
    }
    q["ignore"] = f.ignore;
    q["config_groups"] = {{"group_0", ct_config_group(f, {"Linear"})}};
  } else if (f.what == kind::gptq) {
    q["quant_method"] = "gptq";
    q["bits"] = *cfg.bits;
    q["group_size"] = *cfg.group_size;
    q["desc_act"] = false;
    q["sym"] = *cfg.sym;
    if (!q.contains("lm_head")) {
      q["lm_head"] = false;
    }
    q["checkpoint_format"] = f.checkpoint_format;
  } else if (cfg.family == quant_family::fp8) {
    q["quant_method"] = "fp8";
    q["fmt"] = "e4m3";
    q["activation_scheme"] = "dynamic";
    if (f.scheme == fp8_scheme::block) {
      q["weight_block_size"] = {128, 128};
    } else {
      q.erase("weight_block_size");
    }
    if (!q.contains("modules_to_not_convert") && !q.contains("ignored_layers")) {
      q["modules_to_not_convert"] = cfg.skip_list;
    }
  } else {
    q["quant_method"] = "compressed-tensors";
    q["format"] = "float-quantized";
    q["quantization_status"] = "compressed";
    if (!q.contains("ignore")) {
      q["ignore"] = cfg.skip_list;
    }
    // The routers by exact name (compressed-tensors matches `ignore` entries exactly or as `re:`;
    // the Hugging Face fp8 lists above match substrings, so there `mlp.gate` would also skip
    // `mlp.gate_proj`: the engines build routers unquantized anyway).
    for (auto const& r : f.routers) {
      if (std::find(q["ignore"].begin(), q["ignore"].end(), r) == q["ignore"].end()) {
        q["ignore"].push_back(r);
      }
    }
    q["config_groups"] = {{"group_0", ct_config_group(f, {"Linear"})}};
  }
  return q;
}

}  // namespace qtl::tool
