// Example 05: skip and override rules, at compile time and from a config.
//
// A small Llama-style model (4 layers) is quantized with GPTQ and a `dynamic` rule table that
// keeps layers 0 and 2 only (GPTQModel writes such negative lookaheads into real configs) and
// gives layer 2's MLP 8 bits. The same rules are
//   1. checked at compile time with static_assert (a constexpr rule table), and
//   2. loaded from the JSON config at run time, then asked, layer by layer, what sglang and vLLM
//      will do. The two must agree; the program checks it and prints one JSON line per layer.
// A second config (FP8 with a short `modules_to_not_convert` entry) shows where sglang's and
// vLLM's loaders disagree on the same file.

#include <array>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include <qtl/io/quant_config.hpp>
#include <qtl/rules/consumers.hpp>
#include <qtl/rules/dynamic.hpp>
#include <qtl/rules/skip.hpp>

namespace {

// -- 1. the rules as a constexpr table -----------------------------------------------------------
constexpr qtl::dynamic_rule_body eight_bits = [] {
  qtl::dynamic_rule_body b;
  b.bits = qtl::py_value::of_int(8);
  return b;
}();
constexpr std::array<qtl::static_dynamic_rule, 2> rules = {{
    {R"(-:^model\.layers\.(?!(?:0|2)\.)\d+\.)", {}},
    {R"(+:model\.layers\.2\.mlp\..*)", eight_bits},
}};
constexpr qtl::gptq_params base{};  // 4-bit symmetric, group 128, gptq_marlin

constexpr qtl::gptq_layer_decision at(std::string_view module) {
  return qtl::get_linear_quant_method(base, rules, module, qtl::layer_kind::linear);
}
static_assert(at("model.layers.0.self_attn.qkv_proj").quantized());
static_assert(!at("model.layers.1.self_attn.qkv_proj").quantized());  // skipped by the -: rule
static_assert(!at("model.layers.3.mlp.down_proj").quantized());
static_assert(at("model.layers.2.mlp.gate_up_proj").override_.params.bits == 8);
static_assert(at("model.layers.2.mlp.gate_up_proj").override_.params.quant_type == qtl::uint8b128);
static_assert(at("model.layers.2.self_attn.o_proj").override_.params.bits == 4);

// A constexpr skip list: `mlp.gate` (a router) must not take the dense gate_up_proj.
constexpr std::array<std::string_view, 2> skip = {"lm_head", "mlp.gate"};
static_assert(qtl::is_layer_skipped("lm_head", skip));
static_assert(!qtl::is_layer_skipped("model.layers.0.mlp.gate_up_proj", skip));

// -- 2. the same rules in the checkpoint's config.json ------------------------------------------
constexpr std::string_view gptq_config_json = R"({
  "architectures": ["LlamaForCausalLM"],
  "quantization_config": {
    "quant_method": "gptq", "bits": 4, "group_size": 128, "sym": true, "desc_act": false,
    "dynamic": {
      "-:^model\\.layers\\.(?!(?:0|2)\\.)\\d+\\.": {},
      "+:model\\.layers\\.2\\.mlp\\..*": {"bits": 8}
    }
  }
})";

constexpr std::string_view fp8_config_json = R"({
  "quantization_config": {
    "quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
    "modules_to_not_convert": ["lm_head", "layers.3.self_attn"]
  }
})";

constexpr std::array<std::string_view, 4> projections = {"self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj",
                                                         "mlp.down_proj"};

}  // namespace

int main() {
  qtl::quant_config const gptq = qtl::io::parse_quant_config(gptq_config_json);
  int mismatches = 0;
  std::cout << "# GPTQ dynamic rules: decisions of sglang and vLLM per layer\n";
  for (int layer = 0; layer != 4; ++layer) {
    for (std::string_view const proj : projections) {
      std::string const module = "model.layers." + std::to_string(layer) + "." + std::string(proj);
      // compile-time table and run-time config: the same answer
      qtl::gptq_layer_decision const ct = at(module);
      for (qtl::consumer const c : {qtl::consumer::sglang_gptq, qtl::consumer::vllm_gptq}) {
        qtl::decision const d = qtl::decide(gptq, c, module, qtl::layer_kind::linear);
        bool const same = d.skipped == !ct.quantized() && (d.skipped || d.bits == ct.override_.params.bits);
        mismatches += same ? 0 : 1;
        std::cout << qtl::to_json(d) << "\n";
      }
    }
  }

  qtl::quant_config const fp8 = qtl::io::parse_quant_config(fp8_config_json);
  std::array<qtl::consumer, 3> const readers = {qtl::consumer::sglang_fp8, qtl::consumer::vllm_fp8,
                                                qtl::consumer::transformers_v5};
  std::cout << "# FP8 modules_to_not_convert: where the readers disagree\n";
  for (std::string_view const module : {"model.layers.3.self_attn.qkv_proj", "model.layers.3.self_attn.o_proj",
                                        "model.layers.3.mlp.down_proj", "lm_head"}) {
    auto const groups = qtl::disagreements(qtl::decide_all(fp8, module, qtl::infer_layer_kind(module), readers));
    std::cout << module << ": " << (groups.size() == 1 ? "all agree" : "DISAGREE") << "\n";
    for (auto const& group : groups) {
      std::cout << "  " << (group.front().skipped ? "skipped  " : "quantized") << " by";
      for (qtl::decision const& d : group) {
        std::cout << " " << d.consumer;
      }
      std::cout << "\n";
    }
  }
  if (mismatches != 0) {
    std::cerr << mismatches << " run-time decisions differ from the compile-time table\n";
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
