// Skip lists, dynamic overrides and the consumers' dialects (qtl/rules/*.hpp): the examples of
// docs/spec/semantics.md §4.1-§4.5 and §8.7, the reference's quirks, and one test per bug of
// docs/spec/matchers.md §7 that concerns these rules (named after the issue).
#include <catch2/catch.hpp>

#include <array>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <qtl/rules/compiled_config.hpp>
#include <qtl/rules/compiled_dynamic.hpp>
#include <qtl/rules/consumers.hpp>
#include <qtl/rules/decision.hpp>
#include <qtl/rules/dynamic.hpp>
#include <qtl/rules/skip.hpp>

#if __has_include(<nlohmann/json.hpp>)
#define QTL_RULES_TEST_HAVE_JSON 1
#include <qtl/io/quant_config.hpp>
#else
#define QTL_RULES_TEST_HAVE_JSON 0
#endif

namespace {

using strings = std::vector<std::string>;

qtl::quant_config skip_config(qtl::quant_family family, strings list, qtl::packed_mapping fused = {}) {
  qtl::quant_config cfg;
  cfg.family = family;
  cfg.skip_list = std::move(list);
  cfg.packed_modules_mapping = std::move(fused);
  return cfg;
}

qtl::packed_mapping const llama_packed = {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}},
                                          {"gate_up_proj", {"gate_proj", "up_proj"}}};

qtl::dynamic_rule rule(std::string key, qtl::dynamic_rule_body body = {}) { return {std::move(key), body}; }

qtl::dynamic_rule_body fields(qtl::py_value bits, qtl::py_value group = {}, qtl::py_value desc = {},
                              qtl::py_value sym = {}) {
  qtl::dynamic_rule_body b;
  b.bits = bits;
  b.group_size = group;
  b.desc_act = desc;
  b.sym = sym;
  return b;
}

qtl::dynamic_rule_body non_object(qtl::py_value v) {
  qtl::dynamic_rule_body b;
  b.type = v.type;
  b.self = v;
  return b;
}

qtl::quant_config gptq_config(std::vector<qtl::dynamic_rule> rules, std::int64_t bits = 4, bool sym = true) {
  qtl::quant_config cfg;
  cfg.family = qtl::quant_family::gptq;
  cfg.quant_method = "gptq";
  cfg.bits = bits;
  cfg.group_size = 128;
  cfg.sym = sym;
  cfg.desc_act = false;
  cfg.dynamic = std::move(rules);
  return cfg;
}

}  // namespace

TEST_CASE("is_layer_skipped matches on dotted boundaries (docs/spec/semantics.md 8.7)", "[rules][skip]") {
  using qtl::is_layer_skipped;
  // sglang#23467: `mlp.gate` must not skip the dense `mlp.gate_up_proj` (a plain substring did).
  CHECK_FALSE(is_layer_skipped("model.layers.0.mlp.gate_up_proj", {"model.layers.0.mlp.gate"}));
  CHECK(is_layer_skipped("model.layers.0.mlp.gate", {"mlp.gate"}));
  CHECK(is_layer_skipped("model.layers.0.self_attn.qkv_proj", {"model.layers.0"}));
  CHECK_THROWS_WITH(is_layer_skipped("model.layers.0.self_attn.qkv_proj", {"self_attn.q_proj"}),
                    Catch::Contains("Detected some but not all shards of model.layers.0.self_attn.qkv_proj"));
  CHECK(is_layer_skipped("model.layers.3.mlp.experts", {"model.layers.3.mlp.experts.7.down_proj"}));
  CHECK_FALSE(is_layer_skipped("model.layers.0.mlp.down_proj", std::vector<std::string>{}));
}

TEST_CASE("sglang#26287: trailing-dot entries cover a layer's children but not layer 340", "[rules][skip][bug]") {
  std::array<std::string_view, 1> const list = {"model.layers.34."};
  CHECK(qtl::is_layer_skipped("model.layers.34.mlp.experts.0.down_proj", list));
  CHECK(qtl::is_layer_skipped("model.layers.34.self_attn.qkv_proj", list));
  CHECK_FALSE(qtl::is_layer_skipped("model.layers.340.mlp.down_proj", list));
}

TEST_CASE("sglang#23973: a unified in_proj_ba listed by name stays skipped (not in the fallback map)",
          "[rules][skip][bug]") {
  CHECK(qtl::is_layer_skipped("model.layers.0.linear_attn.in_proj_ba", {"model.layers.0.linear_attn.in_proj_ba"}));
  CHECK(qtl::is_layer_skipped("model.layers.0.linear_attn.in_proj_qkvz", {"linear_attn.in_proj_qkvz"}));
}

TEST_CASE("sglang#26213 / vLLM#43981: a fused name listed directly is never compared (reference)",
          "[rules][skip][bug]") {
  strings const list = {"model.layers.3.moe.share_expert.gate_up_proj"};
  CHECK_FALSE(qtl::is_layer_skipped("model.layers.3.moe.share_expert.gate_up_proj", list, llama_packed));
  CHECK_FALSE(qtl::vllm_is_layer_skipped("model.layers.3.moe.share_expert.gate_up_proj", list, llama_packed));
  // Listing both shards does skip it.
  strings const shards = {"model.layers.3.moe.share_expert.gate_proj", "model.layers.3.moe.share_expert.up_proj"};
  CHECK(qtl::is_layer_skipped("model.layers.3.moe.share_expert.gate_up_proj", shards, llama_packed));
}

TEST_CASE("the fallback map applies even when the given mapping lacks the layer", "[rules][skip]") {
  qtl::packed_mapping const other = {{"fused_qkv_a_proj_with_mqa", {"q_a_proj", "kv_a_proj_with_mqa"}}};
  strings const list = {"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"};
  CHECK(qtl::is_layer_skipped("model.layers.0.mlp.gate_up_proj", list, other));
  // vLLM has no fallback: the fused name is compared exactly.
  CHECK_FALSE(qtl::vllm_is_layer_skipped("model.layers.0.mlp.gate_up_proj", list, other));
  CHECK(qtl::is_layer_skipped("model.layers.0.self_attn.fused_qkv_a_proj_with_mqa",
                              {"self_attn.q_a_proj", "self_attn.kv_a_proj_with_mqa"}, other));
}

TEST_CASE("shard names replace every occurrence by default, the last component on request", "[rules][skip]") {
  // The fused name also occurs earlier in the path: Python's str.replace rewrites both.
  std::string_view const prefix = "model.qkv_proj_stack.0.qkv_proj";
  strings const list = {"model.qkv_proj_stack.0.q_proj", "model.qkv_proj_stack.0.k_proj",
                        "model.qkv_proj_stack.0.v_proj"};
  CHECK_FALSE(qtl::is_layer_skipped(prefix, list));  // shards: model.q_proj_stack.0.q_proj, ...
  CHECK(qtl::is_layer_skipped(prefix, list, qtl::fused_mapping_view{}, qtl::shard_naming::last_component));
  CHECK(qtl::detail::py_replace("a.qkv_proj.qkv_proj", "qkv_proj", "q_proj") == "a.q_proj.q_proj");
  CHECK(qtl::detail::py_replace("ab", "", "-") == "-a-b-");
}

TEST_CASE("the gate_up and experts extra rules of the unfused branch", "[rules][skip]") {
  // `gate_up_proj` inside the path (not the last component): both literal replacements listed.
  strings const list = {"model.gate_proj.w", "model.up_proj.w"};
  CHECK(qtl::is_layer_skipped("model.gate_up_proj.w", list));
  CHECK_FALSE(qtl::is_layer_skipped("model.gate_up_proj.w", strings{"model.gate_proj.w"}));
  // experts: the prefix is a raw substring of an entry that contains "experts".
  CHECK(qtl::is_layer_skipped("layers.3.mlp.experts", strings{"model.layers.3.mlp.experts.0.w1"}));
  CHECK_FALSE(qtl::is_layer_skipped("layers.3.mlp.experts", strings{"model.layers.3.mlp.gate"}));
}

TEST_CASE("an empty shard list fails as the reference's assertion", "[rules][skip]") {
  std::array<qtl::fused_entry, 1> const empty = {{{"w_proj", {}}}};
  auto const out = qtl::sglang_skip_outcome("model.w_proj", strings{"x"}, empty);
  CHECK(out.no_shards);
  CHECK_THROWS_AS(qtl::is_layer_skipped("model.w_proj", strings{"x"}, empty), qtl::value_error);
}

TEST_CASE("vLLM#21669: vLLM's FP8 list is exact, so short entries never match", "[rules][consumers][bug]") {
  auto const cfg = skip_config(qtl::quant_family::fp8, {"linear_attn.in_proj_qkv"});
  std::string_view const name = "model.layers.0.linear_attn.in_proj_qkv";
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::vllm_fp8, name).skipped);
  CHECK(qtl::decide(cfg, qtl::consumer::sglang_fp8, name).skipped);
  CHECK(qtl::decide(cfg, qtl::consumer::vllm_awq, name).skipped);  // substring mode
}

TEST_CASE("sglang's FP8 entries are model.-normalized (and then match nested paths)", "[rules][consumers]") {
  auto const cfg = skip_config(qtl::quant_family::fp8, {"layers.0.mlp.gate"});
  CHECK(qtl::decide(cfg, qtl::consumer::sglang_fp8, "model.layers.0.mlp.gate").rule == "layers.0.mlp.gate");
  // hazard of docs/spec/matchers.md §7: the bare form also matches an MTP copy of the path
  CHECK(qtl::decide(cfg, qtl::consumer::sglang_fp8, "model.mtp.layers.0.mlp.gate").skipped);
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::vllm_fp8, "model.layers.0.mlp.gate").skipped);
}

TEST_CASE("vLLM#41457: some but not all shards listed is the consumer's ValueError", "[rules][consumers][bug]") {
  auto const cfg = skip_config(qtl::quant_family::fp8, {"model.layers.0.self_attn.q_proj"}, llama_packed);
  for (auto const c : {qtl::consumer::sglang_fp8, qtl::consumer::vllm_fp8, qtl::consumer::vllm_modelopt}) {
    auto const d = qtl::decide(cfg, c, "model.layers.0.self_attn.qkv_proj");
    INFO(qtl::to_json(d));
    REQUIRE(d.error);
    CHECK_THAT(*d.error, Catch::StartsWith("ValueError: Detected some but not all shards"));
  }
}

TEST_CASE("sglang#24929: compressed-tensors entries with a .linear suffix miss in sglang", "[rules][consumers][bug]") {
  auto const cfg =
      skip_config(qtl::quant_family::compressed_tensors, {"model.vision_tower.layers.0.self_attn.q_proj.linear"});
  std::string_view const name = "model.vision_tower.layers.0.self_attn.q_proj";
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::sglang_compressed_tensors, name).skipped);
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::vllm_compressed_tensors, name).skipped);
  // sglang's literal entries are case-insensitive substrings; vLLM's are exact names.
  auto const upper = skip_config(qtl::quant_family::compressed_tensors, {"Self_Attn"});
  CHECK(qtl::decide(upper, qtl::consumer::sglang_compressed_tensors, name).skipped);
  CHECK_FALSE(qtl::decide(upper, qtl::consumer::vllm_compressed_tensors, name).skipped);
}

TEST_CASE("vLLM#48508: re: entries are regexes, not substrings", "[rules][consumers][bug]") {
  auto const cfg = skip_config(qtl::quant_family::compressed_tensors, {"re:.*lm_head.*", "re:vision_tower.*"});
  for (auto const c : {qtl::consumer::sglang_compressed_tensors, qtl::consumer::vllm_compressed_tensors}) {
    CHECK(qtl::decide(cfg, c, "lm_head").rule == "re:.*lm_head.*");
    CHECK(qtl::decide(cfg, c, "vision_tower.blocks.0.fc1").skipped);
    CHECK_FALSE(qtl::decide(cfg, c, "model.vision_tower.blocks.0.fc1").skipped);  // re.match anchors
  }
}

TEST_CASE("compressed-tensors: a fused name listed literally is not expanded", "[rules][consumers]") {
  auto const cfg = skip_config(qtl::quant_family::compressed_tensors,
                               {"model.layers.0.self_attn.qkv_proj", "model.layers.1.self_attn.q_proj"}, llama_packed);
  CHECK(qtl::decide(cfg, qtl::consumer::vllm_compressed_tensors, "model.layers.0.self_attn.qkv_proj").skipped);
  auto const d = qtl::decide(cfg, qtl::consumer::vllm_compressed_tensors, "model.layers.1.self_attn.qkv_proj");
  REQUIRE(d.error);
  CHECK(*d.error ==
        "ValueError: Found a different quantization schemes for ['q_proj', 'k_proj', 'v_proj'] in "
        "model.layers.1.self_attn.qkv_proj. vLLM requires all to use the same scheme.");
}

TEST_CASE("the compressed-tensors library: any shard suffices, where vLLM needs all", "[rules][consumers]") {
  auto const cfg =
      skip_config(qtl::quant_family::compressed_tensors, {"model.layers.0.self_attn.q_proj"}, llama_packed);
  std::string_view const name = "model.layers.0.self_attn.qkv_proj";
  auto const lib = qtl::decide(cfg, qtl::consumer::compressed_tensors, name);
  CHECK(lib.skipped);
  CHECK_FALSE(lib.error);
  CHECK(qtl::decide(cfg, qtl::consumer::vllm_compressed_tensors, name).error);
  CHECK(qtl::consumer_from_label("compressed_tensors_match_name (any shard)") == qtl::consumer::compressed_tensors);
}

TEST_CASE("ModelOpt: sglang's MLA tail rule ignores the layer index (hazard)", "[rules][consumers][bug]") {
  auto const cfg = skip_config(qtl::quant_family::modelopt, {"model.layers.5.self_attn.kv_a_proj_with_mqa"});
  std::string_view const name = "model.layers.7.self_attn.fused_qkv_a_proj_with_mqa";
  CHECK(qtl::decide(cfg, qtl::consumer::sglang_modelopt, name).skipped);
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::vllm_modelopt, name).skipped);
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::fnmatch, name).skipped);
}

TEST_CASE("ModelOpt wildcards: fnmatch, components and the language_model. root", "[rules][consumers]") {
  auto const cfg = skip_config(qtl::quant_family::modelopt, {"*mlp.gate", "mtp*", "lm_head"});
  CHECK(qtl::decide(cfg, qtl::consumer::fnmatch, "model.layers.0.mlp.gate").skipped);
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::fnmatch, "model.mtp.0.fc").skipped);
  CHECK(qtl::decide(cfg, qtl::consumer::sglang_modelopt, "model.mtp.0.fc").skipped);  // a component matches
  CHECK(qtl::decide(cfg, qtl::consumer::vllm_modelopt, "model.language_model.lm_head").skipped);
  // vLLM#25987: an MTP layer excluded as `model.layers.61*` must not be quantized as MoE
  auto const mtp = skip_config(qtl::quant_family::modelopt, {"model.layers.61*"});
  for (auto const c : {qtl::consumer::sglang_modelopt, qtl::consumer::vllm_modelopt, qtl::consumer::fnmatch}) {
    CHECK(qtl::decide(mtp, c, "model.layers.61.mlp.experts", qtl::layer_kind::moe).skipped);
    CHECK_FALSE(qtl::decide(mtp, c, "model.layers.6.mlp.experts", qtl::layer_kind::moe).skipped);
  }
}

TEST_CASE("AWQ substring: `gate` skips the dense gate_up_proj, `b_proj` skips q_b_proj (vLLM#51265)",
          "[rules][consumers][bug]") {
  auto const cfg = skip_config(qtl::quant_family::awq, {"gate", "b_proj"});
  CHECK(qtl::decide(cfg, qtl::consumer::sglang_awq, "model.layers.0.mlp.gate_up_proj").skipped);
  CHECK(qtl::decide(cfg, qtl::consumer::sglang_awq, "model.layers.0.self_attn.q_b_proj").skipped);
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::sglang_is_layer_skipped, "model.layers.0.mlp.gate_up_proj").skipped);
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::sglang_is_layer_skipped, "model.layers.0.self_attn.q_b_proj").skipped);
}

TEST_CASE("transformers: v5 reads entries as regexes (prime-rl#2442), v4 as substrings", "[rules][consumers][bug]") {
  auto const cfg = skip_config(qtl::quant_family::fp8, {"model.layers.0.mlp.gate."});
  // `.` is any character: the unescaped entry also hits gate_proj.
  CHECK(qtl::decide(cfg, qtl::consumer::transformers_v5, "model.layers.0.mlp.gate_proj").skipped);
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::transformers_v4, "model.layers.0.mlp.gate_proj").skipped);
  // transformers#48349: language_model. entries never match a text-only load
  auto const vlm = skip_config(qtl::quant_family::fp8, {"model.language_model.layers.0.mlp"});
  CHECK_FALSE(qtl::decide(vlm, qtl::consumer::transformers_v5, "model.layers.0.mlp.down_proj").skipped);
  // v5 suffix rule: `fc1` also matches `xfc1` (no dot boundary)
  auto const suffix = skip_config(qtl::quant_family::fp8, {"fc1"});
  CHECK(qtl::decide(suffix, qtl::consumer::transformers_v5, "model.blocks.0.xfc1").skipped);
  CHECK_FALSE(qtl::decide(suffix, qtl::consumer::transformers_v4_bnb, "model.blocks.0.xfc1").skipped);
  CHECK(qtl::decide(suffix, qtl::consumer::transformers_v4_bnb, "model.blocks.0.fc1").skipped);
}

TEST_CASE("more of docs/spec/matchers.md §7: the entries users wrote and what each reader makes of them",
          "[rules][consumers][bug]") {
  using qtl::consumer;
  // sglang#20128: an AWQ FusedMoE listed in modules_to_not_convert must stay unquantized.
  auto const awq = skip_config(qtl::quant_family::awq, {"model.layers.0.mlp.experts"});
  CHECK(qtl::decide(awq, consumer::sglang_awq, "model.layers.0.mlp.experts", qtl::layer_kind::moe).skipped);
  // sglang#9712 / #6853: ModelOpt `*qkv_a_proj*` entries reach the fused MLA projection.
  auto const mla = skip_config(qtl::quant_family::modelopt, {"*qkv_a_proj*"});
  for (auto const c : {consumer::sglang_modelopt, consumer::vllm_modelopt, consumer::fnmatch}) {
    CHECK(qtl::decide(mla, c, "model.layers.0.self_attn.fused_qkv_a_proj_with_mqa").skipped);
  }
  // sglang#36761 (open): a glob naming a shard does not reach the engine's fused qkv_proj.
  auto const shard_glob = skip_config(qtl::quant_family::modelopt,
                                      {"*.self_attn.q_proj", "*.self_attn.k_proj", "*.self_attn.v_proj"}, llama_packed);
  CHECK_FALSE(qtl::decide(shard_glob, consumer::fnmatch, "model.layers.0.self_attn.qkv_proj").skipped);
  CHECK_FALSE(qtl::decide(shard_glob, consumer::vllm_modelopt, "model.layers.0.self_attn.qkv_proj").skipped);
  // vLLM#44081 / #45132: `lm_head*` excludes the lm_head; ModelOpt#1687: `*visual*` a whole tower.
  auto const star = skip_config(qtl::quant_family::modelopt, {"lm_head*", "*visual*"});
  for (auto const c : {consumer::sglang_modelopt, consumer::vllm_modelopt, consumer::fnmatch}) {
    CHECK(qtl::decide(star, c, "lm_head").skipped);
    CHECK(qtl::decide(star, c, "model.visual.blocks.3.attn.qkv").skipped);
    CHECK_FALSE(qtl::decide(star, c, "model.layers.3.self_attn.o_proj").skipped);
  }
  // transformers#47578: a bare leaf name matches as a leaf (v4) or a suffix (v5), not in vLLM FP8.
  auto const leaf = skip_config(qtl::quant_family::fp8, {"W_down"});
  CHECK(qtl::decide(leaf, consumer::transformers_v4, "model.layers.0.mlp.W_down").skipped);
  CHECK(qtl::decide(leaf, consumer::transformers_v5, "model.layers.0.mlp.W_down").skipped);
  CHECK_FALSE(qtl::decide(leaf, consumer::vllm_fp8, "model.layers.0.mlp.W_down").skipped);
  // llm-compressor#2803: without `re:` a backslash entry is a literal name, never a regex.
  auto const literal = skip_config(qtl::quant_family::compressed_tensors, {"model\\.layers\\.0\\.mlp\\.down_proj"});
  CHECK_FALSE(qtl::decide(literal, consumer::vllm_compressed_tensors, "model.layers.0.mlp.down_proj").skipped);
  auto const re = skip_config(qtl::quant_family::compressed_tensors, {"re:model\\.layers\\.0\\.mlp\\.down_proj"});
  CHECK(qtl::decide(re, consumer::vllm_compressed_tensors, "model.layers.0.mlp.down_proj").skipped);
}

TEST_CASE("get_dynamic_override: first match wins in key order, re.match anchors the start only", "[rules][dynamic]") {
  std::vector<qtl::dynamic_rule> const rules = {
      rule("-:model\\.layers\\.[2-9]\\..*"),
      rule("+:model\\.layers\\.1\\..*", fields(qtl::py_value::of_int(8), qtl::py_value::of_int(32))),
      rule("model\\.layers\\.1\\.mlp.*", fields(qtl::py_value::of_int(2))),
  };
  auto const m1 = qtl::find_dynamic_rule(rules, "model.layers.1.mlp.down_proj");
  CHECK(m1.is_positive());
  CHECK(m1.rule == 1);
  CHECK(qtl::dynamic_override_field(rules, m1, "bits", qtl::py_value::of_int(4)).value == qtl::py_value::of_int(8));
  CHECK(qtl::dynamic_override_field(rules, m1, "desc_act", qtl::py_value::of_bool(true)).value ==
        qtl::py_value::of_bool(true));  // missing key: the default
  CHECK(qtl::find_dynamic_rule(rules, "model.layers.5.mlp.down_proj").is_negative());
  CHECK(qtl::find_dynamic_rule(rules, "model.layers.0.mlp.down_proj").what == qtl::dynamic_match::kind::none);
  CHECK(qtl::find_dynamic_rule(rules, "x.model.layers.5.mlp").what == qtl::dynamic_match::kind::none);
}

TEST_CASE("dynamic rules see the fused runtime name: per-shard rules never fire", "[rules][dynamic][bug]") {
  auto const cfg = gptq_config({rule("-:.*\\.gate_proj.*")});
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::sglang_gptq, "model.layers.0.mlp.gate_up_proj").skipped);
  // GPTQModel#1680: `.*.mlp.gate.*` (unescaped dots) also takes the fused gate_up_proj
  auto const wide = gptq_config({rule("-:.*.mlp.gate.*")});
  CHECK(qtl::decide(wide, qtl::consumer::sglang_gptq, "model.layers.0.mlp.gate_up_proj").skipped);
  CHECK(qtl::decide(wide, qtl::consumer::sglang_gptq, "model.layers.0.mlp.gate").skipped);
}

TEST_CASE("auto-round#769: rules written against tensor names never match modules", "[rules][dynamic][bug]") {
  auto const cfg = gptq_config({rule("-:lm_head.weight")});
  auto const d = qtl::decide(cfg, qtl::consumer::sglang_gptq, "model.layers.0.mlp.down_proj");
  CHECK_FALSE(d.skipped);
  // lm_head is only a GPTQ layer when lm_head_quantized
  auto q = cfg;
  q.lm_head_quantized = true;
  CHECK_FALSE(qtl::decide(q, qtl::consumer::sglang_gptq, "lm_head", qtl::layer_kind::lm_head).skipped);
}

TEST_CASE("get_linear_quant_method: layer kinds, lm_head and the empty prefix (sglang#37848)",
          "[rules][dynamic][bug]") {
  std::vector<qtl::dynamic_rule> const rules = {rule("-:lm_head"), rule(".*", fields(qtl::py_value::of_int(8)))};
  qtl::gptq_params base;
  base.lm_head_quantized = true;
  using qtl::layer_kind;
  using qtl::linear_method;
  CHECK(qtl::get_linear_quant_method(base, rules, "lm_head", layer_kind::lm_head).method ==
        linear_method::unquantized_embedding);
  CHECK(qtl::get_linear_quant_method(base, rules, "model.norm", layer_kind::other).method == linear_method::none);
  auto const q = qtl::get_linear_quant_method(base, rules, "model.layers.0.mlp.down_proj", layer_kind::linear);
  CHECK(q.method == linear_method::quantized);
  CHECK(q.override_.params.bits == 8);
  CHECK(q.override_.params.quant_type == qtl::uint8b128);
  // A layer built without a prefix gets no override at all (the bypass of sglang#37848).
  auto const e = qtl::get_linear_quant_method(base, rules, "", layer_kind::linear);
  CHECK(e.method == linear_method::quantized);
  CHECK(e.override_.params.bits == 4);
  base.lm_head_quantized = false;
  CHECK(qtl::get_linear_quant_method(base, rules, "lm_head", layer_kind::lm_head).method == linear_method::none);
}

TEST_CASE("override_config reproduces Python's type checks", "[rules][dynamic]") {
  using qtl::py_value;
  qtl::gptq_params base;  // gptq_marlin, 4 bits, sym
  auto run = [&](qtl::dynamic_rule_body body, qtl::gptq_kernel k = qtl::gptq_kernel::gptq_marlin) {
    std::vector<qtl::dynamic_rule> const rules = {rule(".*", body)};
    base.kernel = k;
    return qtl::override_config(base, rules, qtl::find_dynamic_rule(rules, "m.x"));
  };
  // bool is an int: group_size true -> 1
  CHECK(run(fields({}, py_value::of_bool(true))).params.group_size == 1);
  // 1 is not a bool: desc_act stays; 4.0 is not an int: bits stay
  CHECK_FALSE(run(fields({}, {}, py_value::of_int(1))).params.desc_act);
  CHECK(run(fields(py_value::of_float(8.0))).params.bits == 4);
  // bits true -> 1 bit, rejected by gptq, printed as Python prints it
  auto const t = run(fields(py_value::of_bool(true)), qtl::gptq_kernel::gptq);
  CHECK(t.error == qtl::gptq_error::unsupported_bits);
  CHECK(qtl::gptq_error_message(t) ==
        "ValueError: Currently, only 2/3/4/8-bit weight quantization is supported for GPTQ, but got True bits.");
  // 3 bits: pack factor 32 // 3 = 10
  CHECK(run(fields(py_value::of_int(3)), qtl::gptq_kernel::gptq).params.pack_factor == 10);
  // gptq_marlin: asymmetric 4-bit is not in TYPE_MAP
  auto const a = run(fields({}, {}, {}, py_value::of_bool(false)));
  CHECK(qtl::gptq_error_message(a) == "ValueError: Unsupported quantization config: bits=4, sym=False");
  // 8-bit symmetric -> uint8b128
  CHECK(run(fields(py_value::of_int(8))).params.quant_type == qtl::uint8b128);
  // a negative rule reached by override_config: bits = False -> 32 // 0
  std::vector<qtl::dynamic_rule> const neg = {rule("-:.*")};
  auto const z = qtl::override_config(base, neg, qtl::find_dynamic_rule(neg, "m.x"));
  CHECK(z.error == qtl::gptq_error::zero_division);
}

TEST_CASE("rule bodies that are not objects: sglang's `is False`, vLLM's `== False`", "[rules][dynamic]") {
  using qtl::py_value;
  auto const f = gptq_config({rule(".*", non_object(py_value::of_bool(false)))});
  CHECK(qtl::decide(f, qtl::consumer::sglang_gptq, "m.layers.0.o_proj").skipped);
  CHECK(qtl::decide(f, qtl::consumer::vllm_gptq, "m.layers.0.o_proj").skipped);
  auto const zero = gptq_config({rule(".*", non_object(py_value::of_int(0)))});
  auto const s = qtl::decide(zero, qtl::consumer::sglang_gptq, "m.layers.0.o_proj");
  REQUIRE(s.error);
  CHECK(*s.error == "AttributeError: 'int' object has no attribute 'get'");
  CHECK(qtl::decide(zero, qtl::consumer::vllm_gptq, "m.layers.0.o_proj").skipped);
  auto const yes = gptq_config({rule(".*", non_object(py_value::of_bool(true)))});
  auto const y = qtl::decide(yes, qtl::consumer::sglang_gptq, "m.layers.0.o_proj");
  REQUIRE(y.error);
  CHECK(*y.error == "AttributeError: 'bool' object has no attribute 'get'");
}

TEST_CASE("vLLM#25455: modules_in_block_to_quantize is a substring whitelist in vLLM only", "[rules][consumers][bug]") {
  auto cfg = gptq_config({});
  cfg.modules_in_block_to_quantize = {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
  cfg.packed_modules_mapping = llama_packed;
  CHECK(qtl::decide(cfg, qtl::consumer::vllm_gptq, "model.layers.0.self_attn.qkv_proj").skipped);
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::vllm_gptq, "model.layers.0.mlp.gate_up_proj").skipped);
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::sglang_gptq, "model.layers.0.self_attn.qkv_proj").skipped);
  cfg.modules_in_block_to_quantize = {"mlp.gate_proj"};
  auto const d = qtl::decide(cfg, qtl::consumer::vllm_gptq, "model.layers.0.mlp.gate_up_proj");
  REQUIRE(d.error);
  CHECK_THAT(*d.error, Catch::Contains("some but not all shards"));
}

TEST_CASE("decisions carry the rule, the overridden fields and the quant type", "[rules][consumers]") {
  auto const cfg =
      gptq_config({rule("+:.*\\.18\\..*gate.*", fields(qtl::py_value::of_int(8), qtl::py_value::of_int(64)))});
  auto const d = qtl::decide(cfg, qtl::consumer::sglang_gptq, "model.layers.18.mlp.gate_up_proj");
  CHECK(qtl::to_json(d) ==
        "{\"module\": \"model.layers.18.mlp.gate_up_proj\", \"consumer\": \"sglang_gptq\", \"skipped\": false, "
        "\"bits\": 8, \"group_size\": 64, \"desc_act\": false, \"sym\": true, \"quant_type\": \"uint8b128\", "
        "\"rule\": \"+:.*\\\\.18\\\\..*gate.*\", \"error\": null}");
  auto const base = qtl::decide(cfg, qtl::consumer::sglang_gptq, "model.layers.17.mlp.gate_up_proj");
  CHECK_FALSE(base.rule);
  CHECK(base.bits == 4);
  CHECK(base.quant_type == qtl::uint4b8);
  // a config gptq_marlin cannot take runs the gptq branch (3 bits)
  auto const three = gptq_config({}, 3);
  auto const t = qtl::decide(three, qtl::consumer::sglang_gptq, "model.layers.0.o_proj");
  CHECK_FALSE(t.error);
  CHECK(t.quant_type == qtl::uint3b4);
  auto const five = gptq_config({}, 5);
  CHECK(qtl::decide(five, qtl::consumer::sglang_gptq, "model.layers.0.o_proj").error);
}

TEST_CASE("a bad dynamic pattern is an error of the layers that reach it", "[rules][dynamic]") {
  auto const cfg = gptq_config({rule("-:model\\.layers\\.0\\..*"), rule("+:(unclosed")});
  CHECK(qtl::decide(cfg, qtl::consumer::sglang_gptq, "model.layers.0.o_proj").skipped);
  auto const d = qtl::decide(cfg, qtl::consumer::sglang_gptq, "model.layers.1.o_proj");
  REQUIRE(d.error);
  CHECK_THAT(*d.error, Catch::StartsWith("re.error: "));
}

TEST_CASE("patterns Python runs: a lookbehind is decided, a backreference is QTL's limit, not re.error",
          "[rules][dynamic]") {
  // `decide` on the config's lists and on the compiled indexes: the same decision
  auto const both = [](qtl::quant_config const& cfg, qtl::consumer c, std::string const& name) {
    qtl::compiled_config const cc(cfg);
    auto const d = qtl::decide(cfg, c, name);
    CHECK(qtl::to_json(d) == qtl::to_json(qtl::decide(cc, c, name)));
    return d;
  };
  auto const gptq = qtl::consumer::sglang_gptq;
  auto const behind = gptq_config({rule(R"(-:(?<=layers\.0\.)mlp.*)"), rule(R"(-:model\.layers\.\d+\.(?<=\.1\.)mlp.*)")});
  // re.match starts at 0, where no 9 bytes lie behind: rule 0 never matches, as in Python
  auto const zero = both(behind, gptq, "model.layers.0.mlp.down_proj");
  CHECK_FALSE(zero.error);
  CHECK_FALSE(zero.skipped);
  auto const one = both(behind, gptq, "model.layers.1.mlp.down_proj");
  CHECK_FALSE(one.error);
  CHECK(one.skipped);
  CHECK(one.rule == R"(-:model\.layers\.\d+\.(?<=\.1\.)mlp.*)");
  CHECK_FALSE(both(behind, gptq, "model.layers.1.self_attn.o_proj").skipped);
  // backreferences: Python would run them; QTL says it cannot tell, for the names that reach them
  for (std::string const key : {R"(+:(a)\1)", "+:(?P<n>a)(?P=n)"}) {
    INFO(key);
    auto const cfg = gptq_config({rule(R"(-:model\.layers\.0\..*)"), rule(key)});
    CHECK(both(cfg, gptq, "model.layers.0.o_proj").skipped);
    auto const d = both(cfg, gptq, "model.layers.1.o_proj");
    REQUIRE(d.error);
    CHECK(d.error_from_qtl());
    CHECK_THAT(*d.error, Catch::StartsWith("qtl::regex_unsupported_error: ") && Catch::Contains("backreference") &&
                             !Catch::Contains("re.error"));
  }
  // a variable-width lookbehind is Python's re.error
  auto const variable = both(gptq_config({rule("+:(?<=a|bc)x")}), gptq, "model.layers.1.o_proj");
  REQUIRE(variable.error);
  CHECK_FALSE(variable.error_from_qtl());
  CHECK_THAT(*variable.error, Catch::StartsWith("re.error: ") && Catch::Contains("look-behind requires fixed-width"));
  // an AutoRound regex key QTL does not run is not "never hits" (that is for keys Python rejects)
  qtl::quant_config ar;
  ar.family = qtl::quant_family::auto_round;
  ar.bits = 4;
  ar.group_size = 128;
  ar.sym = true;
  qtl::extra_config_entry lacking;
  lacking.key = R"(.*(m)\1lp.*)";
  lacking.bits = qtl::py_value::of_int(16);
  qtl::extra_config_entry invalid;
  invalid.key = R"(.*(mlp.*)";
  invalid.bits = qtl::py_value::of_int(16);
  ar.extra_config = {invalid, lacking};
  for (auto const c : {qtl::consumer::vllm_auto_round, qtl::consumer::sglang_auto_round}) {
    auto const d = both(ar, c, "model.layers.1.mlp.down_proj");
    REQUIRE(d.error);
    CHECK_THAT(*d.error, Catch::StartsWith("qtl::regex_unsupported_error: "));
  }
  // a compressed-tensors `re:` entry
  qtl::quant_config ct;
  ct.family = qtl::quant_family::compressed_tensors;
  ct.skip_list = {"lm_head", R"(re:.*(?P<x>m)(?P=x)lp.*)"};
  auto const d = both(ct, qtl::consumer::vllm_compressed_tensors, "model.layers.1.mlp.down_proj");
  REQUIRE(d.error);
  CHECK_THAT(*d.error, Catch::StartsWith("qtl::regex_unsupported_error: "));
}

namespace {
/// What `find_dynamic_rule` says for `name`, or the message of the `regex_error` it throws.
std::string loop_answer(std::vector<qtl::dynamic_rule> const& rules, std::string const& name) {
  try {
    auto const m = qtl::find_dynamic_rule(rules, name);
    return std::to_string(static_cast<int>(m.what)) + "/" + std::to_string(m.rule);
  } catch (qtl::regex_error const& e) {
    return std::string("error: ") + e.what();
  }
}
std::string compiled_answer(qtl::compiled_dynamic_rules const& rules, std::string const& name) {
  try {
    auto const m = rules.find(name);
    return std::to_string(static_cast<int>(m.what)) + "/" + std::to_string(m.rule);
  } catch (qtl::regex_error const& e) {
    return std::string("error: ") + e.what();
  }
}
}  // namespace

TEST_CASE("compiled dynamic rules: the first rule in order wins, as in the loop", "[rules][dynamic]") {
  // A later, more specific rule never beats an earlier one; lookahead rules (not on the combined
  // DFA) keep their place in the order; a bad pattern is reached only by names no earlier rule takes.
  std::vector<qtl::dynamic_rule> const rules = {
      rule("-:model\\.layers\\.(?!1\\.)\\d+\\.mlp\\..*"),
      rule("+:model\\.layers\\.1\\..*"),
      rule("model\\.layers\\.1\\.mlp\\.up_proj"),
      rule("-:.*\\bself_attn\\b.*"),
      rule("+:model\\.layers\\.2\\.mlp"),
      rule("+:(unclosed"),
      rule("+:.*"),
  };
  qtl::compiled_dynamic_rules const compiled(rules);
  CHECK(compiled.size() == rules.size());
  auto const m = compiled.find("model.layers.1.mlp.up_proj");
  CHECK(m.is_positive());
  CHECK(m.rule == 1);
  CHECK(compiled.find("model.layers.2.mlp.up_proj").is_negative());
  CHECK(compiled.find("model.layers.3.self_attn.o_proj").rule == 3);
  CHECK_THROWS_AS(compiled.find("lm_head"), qtl::regex_error);
  for (std::string const name :
       {"model.layers.0.mlp.down_proj", "model.layers.1.mlp.up_proj", "model.layers.10.mlp.gate_proj",
        "model.layers.1.self_attn.q_proj", "model.layers.2.mlp", "model.layers.2.mlpx", "model.layers.2.self_attnx",
        "lm_head", "", "\n", "model.layers.1.\n"}) {
    INFO(name);
    CHECK(compiled_answer(compiled, name) == loop_answer(rules, name));
  }
}

TEST_CASE("compiled dynamic rules past the regex cache: 300 rules", "[rules][dynamic]") {
  std::vector<qtl::dynamic_rule> rules;
  for (int i = 0; i != 300; ++i) {
    rules.push_back(rule((i % 3 == 0 ? "-:" : "+:") + std::string("model\\.layers\\.") + std::to_string(i % 97) +
                         "\\.mlp\\.experts\\." + std::to_string(i) + "\\..*"));
  }
  rules.push_back(rule("+:model\\.layers\\.\\d+\\.mlp\\.experts\\.1\\d*\\..*"));
  qtl::compiled_dynamic_rules const compiled(rules);
  for (int layer = 0; layer < 100; layer += 7) {
    for (int e = 0; e < 400; e += 13) {
      std::string const name =
          "model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(e) + ".up_proj";
      INFO(name);
      REQUIRE(compiled_answer(compiled, name) == loop_answer(rules, name));
    }
  }
}

TEST_CASE("decide with compiled dynamic rules equals decide without", "[rules][dynamic][consumers]") {
  auto const cfg = gptq_config({rule("-:model\\.layers\\.0\\..*"),
                                rule("+:.*\\.1\\..*", fields(qtl::py_value::of_int(8), qtl::py_value::of_int(32))),
                                rule("+:(unclosed")});
  qtl::compiled_dynamic_rules const compiled(cfg.dynamic);
  qtl::decide_options opt;
  opt.dynamic = &compiled;
  for (std::string const m : {"model.layers.0.o_proj", "model.layers.1.mlp.gate_up_proj", "model.layers.2.o_proj",
                              "lm_head", "model.embed_tokens"}) {
    for (qtl::consumer const c : {qtl::consumer::sglang_gptq, qtl::consumer::vllm_gptq}) {
      INFO(m);
      CHECK(qtl::to_json(qtl::decide(cfg, c, m, opt)) == qtl::to_json(qtl::decide(cfg, c, m)));
    }
  }
}

TEST_CASE("AutoRound: vLLM searches, sglang fullmatches; dots alone do not make a regex key", "[rules][consumers]") {
  qtl::quant_config cfg;
  cfg.family = qtl::quant_family::auto_round;
  cfg.bits = 4;
  cfg.group_size = 128;
  cfg.sym = true;
  cfg.block_name_to_quantize = {"model.layers"};
  qtl::extra_config_entry lit;
  lit.key = "model.layers.1.mlp";
  lit.bits = qtl::py_value::of_int(8);
  qtl::extra_config_entry re;
  re.key = "mlp\\.down_proj";
  re.bits = qtl::py_value::of_int(16);
  cfg.extra_config = {lit, re};
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::vllm_auto_round, "model.layers.1.mlp.up_proj").rule);
  CHECK(qtl::decide(cfg, qtl::consumer::vllm_auto_round, "model.layers.1.mlp.down_proj").skipped);
  CHECK_FALSE(qtl::decide(cfg, qtl::consumer::sglang_auto_round, "model.layers.1.mlp.down_proj").skipped);
  // outside block_name_to_quantize: 16 bits, unquantized
  CHECK(qtl::decide(cfg, qtl::consumer::sglang_auto_round, "visual.blocks.0.fc1").skipped);
  CHECK(qtl::detail::auto_round_regex_key("a\\.b"));
  CHECK_FALSE(qtl::detail::auto_round_regex_key("a.b"));
}

TEST_CASE("consumer labels of the golden files name consumers", "[rules][consumers]") {
  using qtl::consumer;
  CHECK(qtl::consumer_from_label("sglang_Fp8Config (model.-normalized, dot-boundary, fused shards)") ==
        consumer::sglang_fp8);
  CHECK(qtl::consumer_from_label("vllm_INC (exact key, else re.search over keys containing *+?^$()[]{}|\\)") ==
        consumer::vllm_auto_round);
  CHECK(qtl::consumer_from_label("sglang/vllm is_layer_skipped_awq (substring)") == consumer::sglang_awq);
  CHECK(qtl::consumer_from_label("fnmatch_glob_reading") == consumer::fnmatch_subtree);
  CHECK(qtl::consumer_from_label("fnmatch_only (ModelOpt's own semantics)") == consumer::fnmatch);
  CHECK(qtl::consumer_from_label("transformers_v4_finegrained_fp8 (substring)") == consumer::transformers_v4);
  CHECK(qtl::consumer_from_label("vllm_get_dynamic_override") == consumer::vllm_gptq);
  CHECK_FALSE(qtl::consumer_from_label("no_such_engine"));
  for (auto const c : qtl::all_consumers) {
    CHECK(qtl::consumer_from_name(qtl::consumer_name(c)) == c);
  }
}

TEST_CASE("decide_all and disagreements group consumers by outcome", "[rules][consumers]") {
  auto const cfg = skip_config(qtl::quant_family::awq, {"gate"});
  std::array<qtl::consumer, 2> const cs = {qtl::consumer::sglang_awq, qtl::consumer::sglang_is_layer_skipped};
  auto const all = qtl::decide_all(cfg, "model.layers.0.mlp.gate_up_proj", qtl::layer_kind::linear, cs);
  auto const groups = qtl::disagreements(all);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].front().consumer == "sglang_awq");
  CHECK(groups[0].front().skipped);
  auto const same = qtl::disagreements(qtl::decide_all(cfg, "model.layers.0.o_proj", qtl::layer_kind::linear, cs));
  CHECK(same.size() == 1);
}

TEST_CASE("layers other than linear, lm_head and MoE are not the skip lists' business", "[rules][consumers]") {
  auto const cfg = skip_config(qtl::quant_family::fp8, {});
  CHECK(qtl::infer_layer_kind("model.embed_tokens") == qtl::layer_kind::other);
  CHECK(qtl::infer_layer_kind("model.layers.0.mlp.experts") == qtl::layer_kind::moe);
  auto const d = qtl::decide(cfg, qtl::consumer::vllm_fp8, "model.embed_tokens");
  CHECK(d.skipped);
  CHECK_FALSE(d.rule);
  auto const q = qtl::decide(cfg, qtl::consumer::vllm_fp8, "model.layers.0.o_proj");
  CHECK(q.bits == 8);
  CHECK(q.quant_type == qtl::float8_e4m3fn);
}

// ------------------------------------------------------------------------------------------------
// Differential replay against the reference Python itself: test/data/rules/reference_cases.jsonl
// was produced by gen_reference_cases.py, which runs the reference's own is_layer_skipped and
// get_linear_quant_method (extracted verbatim) on random names, lists, mappings and rule tables.
#if QTL_RULES_TEST_HAVE_JSON
TEST_CASE("every reference case replays identically", "[rules][reference]") {
  std::ifstream in(std::string(QTL_TEST_DATA_DIR) + "/rules/reference_cases.jsonl");
  REQUIRE(in);
  std::string line;
  std::size_t skip_cases = 0;
  std::size_t dynamic_cases = 0;
  while (std::getline(in, line)) {
    auto const c = nlohmann::ordered_json::parse(line);
    INFO(line);
    std::string const expected = c["expected"].get<std::string>();
    std::string const prefix = c["prefix"].get<std::string>();
    if (c["kind"] == "skip") {
      ++skip_cases;
      auto const ignored = c["ignored"].get<strings>();
      qtl::packed_mapping mapping;
      if (!c["mapping"].is_null()) {
        mapping = qtl::io::packed_modules_mapping_of(c["mapping"], "mapping");
      }
      auto const out = qtl::sglang_skip_outcome(prefix, ignored, mapping);
      if (expected == "error") {
        CHECK(out.mixed_shards);
      } else if (expected == "assert") {
        CHECK(out.no_shards);
      } else {
        CHECK_FALSE(out.failed());
        CHECK(out.skipped == (expected == "skip"));
      }
      continue;
    }
    ++dynamic_cases;
    std::vector<qtl::dynamic_rule> rules;
    for (auto const& r : c["dynamic"]) {
      std::string const key = r[0].get<std::string>();
      rules.push_back({key, qtl::io::detail::rule_body(r[1], key)});
    }
    qtl::gptq_params base;
    base.kernel = c["method"] == "gptq" ? qtl::gptq_kernel::gptq : qtl::gptq_kernel::gptq_marlin;
    base.bits = c["bits"].get<std::int64_t>();
    base.group_size = c["group_size"].get<std::int64_t>();
    base.desc_act = c["desc_act"].get<bool>();
    base.sym = c["sym"].get<bool>();
    base.lm_head_quantized = c["lm_head_quantized"].get<bool>();
    base.pack_factor = 32 / base.bits;
    base.quant_type =
        base.kernel == qtl::gptq_kernel::gptq_marlin ? qtl::gptq_marlin_type(base.bits, base.sym) : std::nullopt;
    std::string const layer = c["layer"].get<std::string>();
    qtl::layer_kind const kind = layer == "linear"    ? qtl::layer_kind::linear
                                 : layer == "lm_head" ? qtl::layer_kind::lm_head
                                                      : qtl::layer_kind::other;
    auto const d = qtl::get_linear_quant_method(base, rules, prefix, kind);
    if (expected == "none") {
      CHECK(d.method == qtl::linear_method::none);
    } else if (expected == "unquantized_linear") {
      CHECK(d.method == qtl::linear_method::unquantized_linear);
    } else if (expected == "unquantized_embedding") {
      CHECK(d.method == qtl::linear_method::unquantized_embedding);
    } else if (expected == "error") {
      CHECK(d.method == qtl::linear_method::quantized);
      CHECK(qtl::gptq_error_message(d.override_) == c["error"].get<std::string>());
    } else {
      REQUIRE(expected == "quantized");
      CHECK(d.method == qtl::linear_method::quantized);
      CHECK(d.override_.error == qtl::gptq_error::none);
      auto const& r = c["result"];
      qtl::gptq_params const& p = d.override_.params;
      CHECK(p.bits == r["bits"].get<std::int64_t>());
      CHECK(p.group_size == r["group_size"].get<std::int64_t>());
      CHECK(p.desc_act == r["desc_act"].get<bool>());
      CHECK(p.sym == r["sym"].get<bool>());
      CHECK(p.pack_factor == r["pack_factor"].get<std::int64_t>());
      if (r["quant_type"].is_null()) {
        CHECK_FALSE(p.quant_type);
      } else {
        REQUIRE(p.quant_type);
        CHECK(p.quant_type->name().view() == r["quant_type"].get<std::string>());
      }
    }
  }
  CHECK(skip_cases >= 1000);
  CHECK(dynamic_cases >= 1000);
}
#endif

#if QTL_RULES_TEST_HAVE_JSON
TEST_CASE("every reference rule table finds the same rule compiled", "[rules][reference][dynamic]") {
  std::ifstream in(std::string(QTL_TEST_DATA_DIR) + "/rules/reference_cases.jsonl");
  REQUIRE(in);
  std::string line;
  std::size_t cases = 0;
  while (std::getline(in, line)) {
    auto const c = nlohmann::ordered_json::parse(line);
    if (c["kind"] == "skip") {
      continue;
    }
    INFO(line);
    std::vector<qtl::dynamic_rule> rules;
    for (auto const& r : c["dynamic"]) {
      std::string const key = r[0].get<std::string>();
      rules.push_back({key, qtl::io::detail::rule_body(r[1], key)});
    }
    std::string const prefix = c["prefix"].get<std::string>();
    qtl::compiled_dynamic_rules const compiled(rules);
    CHECK(compiled_answer(compiled, prefix) == loop_answer(rules, prefix));
    ++cases;
  }
  CHECK(cases >= 1000);
}
#endif
