// Compile-time rules (qtl/rules/skip.hpp, qtl/rules/dynamic.hpp): a constexpr skip list and a
// constexpr dynamic rule table decide layers in static_assert. Building this file is the test.
#include <array>
#include <string_view>

#include <qtl/rules/dynamic.hpp>
#include <qtl/rules/skip.hpp>

namespace {

using namespace std::string_view_literals;

// -- _module_path_match through is_layer_skipped (docs/spec/semantics.md §4.1, §8.7) ---------------------
constexpr std::array<std::string_view, 3> skip_list = {"lm_head", "mlp.gate", "model.layers.34."};

static_assert(qtl::is_layer_skipped("lm_head", skip_list));
static_assert(qtl::is_layer_skipped("model.layers.0.mlp.gate", skip_list));
static_assert(!qtl::is_layer_skipped("model.layers.0.mlp.gate_up_proj", skip_list));         // sglang#23467
static_assert(qtl::is_layer_skipped("model.layers.34.mlp.experts.0.down_proj", skip_list));  // #26287
static_assert(!qtl::is_layer_skipped("model.layers.340.mlp.down_proj", skip_list));
static_assert(qtl::is_layer_skipped("model.layers.34.self_attn.qkv_proj", skip_list));  // every shard

// Fused layers: every shard must agree; the outcome reports a mix instead of throwing.
constexpr std::array<std::string_view, 1> only_q = {"model.layers.0.self_attn.q_proj"};
static_assert(qtl::sglang_skip_outcome("model.layers.0.self_attn.qkv_proj", only_q).mixed_shards);
static_assert(!qtl::sglang_skip_outcome("model.layers.1.self_attn.qkv_proj", only_q).failed());

// A model's own packed mapping, and the safe last-component shard naming.
constexpr std::string_view mla_shards[] = {"q_a_proj", "kv_a_proj_with_mqa"};
constexpr std::array<qtl::fused_entry, 1> mla = {{{"fused_qkv_a_proj_with_mqa", mla_shards}}};
constexpr std::array<std::string_view, 2> mla_list = {"self_attn.q_a_proj", "self_attn.kv_a_proj_with_mqa"};
static_assert(qtl::is_layer_skipped("model.layers.2.self_attn.fused_qkv_a_proj_with_mqa", mla_list, mla));

constexpr std::array<std::string_view, 3> stack = {"m.qkv_proj_x.q_proj", "m.qkv_proj_x.k_proj", "m.qkv_proj_x.v_proj"};
static_assert(!qtl::is_layer_skipped("m.qkv_proj_x.qkv_proj", stack));  // str.replace hits both
static_assert(qtl::is_layer_skipped("m.qkv_proj_x.qkv_proj", stack, qtl::fused_mapping_view{},
                                    qtl::shard_naming::last_component));

// vLLM: exact membership (no fallback map), or substring.
constexpr std::array<std::string_view, 1> short_name = {"linear_attn.in_proj_qkv"};
static_assert(!qtl::vllm_is_layer_skipped("model.layers.0.linear_attn.in_proj_qkv", short_name));
static_assert(qtl::vllm_is_layer_skipped("model.layers.0.linear_attn.in_proj_qkv", short_name,
                                         qtl::fused_mapping_view{}, qtl::vllm_skip_match::substring));
static_assert(qtl::awq_skip_rule("model.layers.0.mlp.gate_up_proj", std::array{"gate"sv}) == 0);

// -- GPTQ dynamic rules at compile time ---------------------------------------------------------
constexpr qtl::dynamic_rule_body override_8_64 = [] {
  qtl::dynamic_rule_body b;
  b.bits = qtl::py_value::of_int(8);
  b.group_size = qtl::py_value::of_int(64);
  return b;
}();
constexpr std::array<qtl::static_dynamic_rule, 3> rules = {{
    {"-:^model\\.layers\\.(?!(?:0|2)\\.)\\d+\\.", {}},  // GPTQModel: keep layers 0 and 2 only
    {"+:.*\\.2\\..*gate.*", override_8_64},
    {".*down.*", {}},
}};

static_assert(qtl::find_dynamic_rule(rules, "model.layers.1.mlp.down_proj").is_negative());
static_assert(qtl::find_dynamic_rule(rules, "model.layers.2.mlp.gate_up_proj").rule == 1);
static_assert(qtl::find_dynamic_rule(rules, "model.layers.0.mlp.down_proj").rule == 2);
static_assert(qtl::find_dynamic_rule(rules, "lm_head").what == qtl::dynamic_match::kind::none);

constexpr qtl::gptq_params base{};  // gptq_marlin, 4-bit symmetric, group 128
constexpr auto layer2_gate =
    qtl::get_linear_quant_method(base, rules, "model.layers.2.mlp.gate_up_proj", qtl::layer_kind::linear);
static_assert(layer2_gate.quantized());
static_assert(layer2_gate.override_.params.bits == 8 && layer2_gate.override_.params.group_size == 64);
static_assert(layer2_gate.override_.params.quant_type == qtl::uint8b128);
static_assert(layer2_gate.override_.params.pack_factor == 4);
static_assert(qtl::get_linear_quant_method(base, rules, "model.layers.7.self_attn.o_proj", qtl::layer_kind::linear)
                  .method == qtl::linear_method::unquantized_linear);
static_assert(qtl::get_linear_quant_method(base, rules, "model.norm", qtl::layer_kind::other).method ==
              qtl::linear_method::none);

// Python's types: `true` is an int (group size 1), `1` is not a bool.
constexpr std::array<qtl::static_dynamic_rule, 1> quirky = {{{".*", [] {
                                                                qtl::dynamic_rule_body b;
                                                                b.group_size = qtl::py_value::of_bool(true);
                                                                b.desc_act = qtl::py_value::of_int(1);
                                                                return b;
                                                              }()}}};
constexpr auto quirk = qtl::override_config(base, quirky, qtl::find_dynamic_rule(quirky, "x"));
static_assert(quirk.params.group_size == 1 && !quirk.params.desc_act);
static_assert(qtl::gptq_marlin_type(4, false) == std::nullopt);

constexpr std::array<qtl::static_dynamic_rule, 1> skip_all = {{{"-:.*", {}}}};
static_assert(qtl::override_config(base, skip_all, qtl::find_dynamic_rule(skip_all, "x")).error ==
              qtl::gptq_error::zero_division);

}  // namespace
