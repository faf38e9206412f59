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

ojson written_quantization_config(ojson const& base, quant_config const& cfg, written_format const& f) {
  ojson q = base.is_object() ? base : ojson::object();
  using kind = written_format::kind;
  if (f.what == kind::pack_quantized || f.what == kind::nvfp4 || f.what == kind::mxfp4) {
    std::string const format = f.what == kind::pack_quantized ? "pack-quantized"
                               : f.what == kind::nvfp4        ? "nvfp4-pack-quantized"
                                                              : "mxfp4-pack-quantized";
    ojson const w = compressed_tensors_weights(f);
    q["quant_method"] = "compressed-tensors";
    q["format"] = format;
    q["quantization_status"] = "compressed";
    if (!q.contains("kv_cache_scheme")) {
      q["kv_cache_scheme"] = nullptr;
    }
    q["ignore"] = f.ignore;
    q["config_groups"] = {{"group_0",
                           {{"targets", {"Linear"}},
                            {"weights", w},
                            {"input_activations", nullptr},
                            {"output_activations", nullptr},
                            {"format", format}}}};
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
    ojson const w = compressed_tensors_weights(f);
    ojson act = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "token"}, {"dynamic", true}};
    if (f.scheme == fp8_scheme::block) {
      act["strategy"] = "group";
      act["group_size"] = 128;
    }
    q["config_groups"] = {{"group_0",
                           {{"targets", {"Linear"}},
                            {"weights", w},
                            {"input_activations", act},
                            {"output_activations", nullptr},
                            {"format", "float-quantized"}}}};
  }
  return q;
}

}  // namespace qtl::tool
