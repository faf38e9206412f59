// The `quantization_config` qtl quantize writes (see quant_config_writer.hpp).

#include "quant_config_writer.hpp"

namespace qtl::tool {

using ojson = nlohmann::ordered_json;

ojson written_quantization_config(ojson const& base, quant_config const& cfg, written_format const& f) {
  ojson q = base.is_object() ? base : ojson::object();
  if (f.gptq) {
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
    ojson w = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true},
               {"strategy", f.scheme == fp8_scheme::tensor ? "tensor" : f.scheme == fp8_scheme::channel ? "channel" : "block"},
               {"dynamic", false}};
    ojson act = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "token"}, {"dynamic", true}};
    if (f.scheme == fp8_scheme::block) {
      w["block_structure"] = {128, 128};
      act["strategy"] = "group";
      act["group_size"] = 128;
    }
    q["config_groups"] = {{"group_0", {{"targets", {"Linear"}}, {"weights", w}, {"input_activations", act}}}};
  }
  return q;
}

}  // namespace qtl::tool
