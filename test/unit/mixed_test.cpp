// Mixed-precision configs (qtl/rules/mixed.hpp): compressed-tensors config groups and ModelOpt
// quantized_layers read (qtl/io/quant_config.hpp), and every module of the configs of
// test/data/mixed decided as the readers decide it: the compressed-tensors library against its
// own recorded decisions (ct_library_expected.json, made by make_ct_library_cases.py), vLLM and
// sglang by the rules of their loaders (docs/spec/mixed_precision.md).
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <qtl/io/quant_config.hpp>
#include <qtl/rules/compiled_config.hpp>

namespace {

std::filesystem::path data_dir() { return std::filesystem::path(QTL_TEST_DATA_DIR) / "mixed"; }

qtl::packed_mapping const llama_packed = {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}},
                                          {"gate_up_proj", {"gate_proj", "up_proj"}}};

qtl::quant_config load(std::string const& name) {
  qtl::quant_config cfg = qtl::io::load_quant_config(data_dir() / name);
  cfg.packed_modules_mapping = llama_packed;  // what vLLM's Qwen3 model hands its loader
  return cfg;
}

/// The group a decision's `scheme` names (`group_1 (pack-quantized)` -> `group_1`), or "".
std::string group_of(qtl::decision const& d) {
  return d.scheme ? d.scheme->substr(0, d.scheme->find(' ')) : std::string();
}

qtl::decision decided(qtl::compiled_config const& cc, qtl::consumer c, std::string const& m) {
  qtl::decision const d = qtl::decide(cc, c, m);
  // The reference loops give the same decision as the compiled indexes.
  qtl::decision const ref = qtl::decide(cc.config(), c, m);
  CHECK(qtl::to_json(ref) == qtl::to_json(d));
  CHECK(ref.scheme == d.scheme);
  return d;
}

}  // namespace

TEST_CASE("compressed-tensors config groups are read with their formats and targets", "[mixed][io]") {
  auto const cfg = load("ct_fp8_nvfp4_overlap.json");
  CHECK(cfg.format == "mixed-precision");
  CHECK(qtl::is_mixed(cfg));
  REQUIRE(cfg.config_groups.size() == 2);
  CHECK(cfg.config_groups[0].name == "group_0");
  CHECK(cfg.config_groups[0].format == "float-quantized");
  CHECK(cfg.config_groups[0].targets.size() == 3);
  CHECK(cfg.config_groups[0].input_activations);
  CHECK(cfg.config_groups[1].format == "nvfp4-pack-quantized");
  CHECK(cfg.config_groups[1].strategy == "tensor_group");
  CHECK(cfg.config_groups[1].group_size == 16);
  CHECK(cfg.bits == 8);  // the first group still gives the base parameters
  CHECK(cfg.skip_list.size() == 2);
}

TEST_CASE("ModelOpt quantized_layers are read from hf_quant_config.json and config.json", "[mixed][io]") {
  auto const hf = load("modelopt_qwen3_6_hf_quant_config.json");
  CHECK(qtl::is_mixed(hf));
  REQUIRE(hf.quantized_layers.size() == 12);
  CHECK(hf.quantized_layers[2].module == "model.language_model.layers.0.mlp.experts");
  CHECK(hf.quantized_layers[2].quant_algo == "W4A16_NVFP4");
  CHECK(hf.quantized_layers[2].group_size == 16);
  auto const cj = load("modelopt_dsv4_nvfp4_config.json");
  CHECK(qtl::is_mixed(cj));
  CHECK(cj.moe_quant_algo == "NVFP4");
  CHECK(cj.quantized_layers.size() == 13);
  CHECK(cj.skip_list_field == "ignore");
  // config.json with the fields nested in `quantization`, as some exporters write it
  auto const nested = qtl::io::parse_quant_config(R"({"quantization_config": {"quant_method": "modelopt",
      "quantization": {"quant_algo": "MIXED_PRECISION", "moe_quant_algo": "NVFP4",
                       "quantized_layers": {"a.q_proj": {"quant_algo": "fp8"}}}}})");
  CHECK(qtl::is_mixed(nested));
  REQUIRE(nested.quantized_layers.size() == 1);
  CHECK(nested.moe_quant_algo == "NVFP4");
  // malformed entries name the field
  for (char const* bad : {R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "MIXED_PRECISION",
                              "quantized_layers": {"a.q_proj": "FP8"}}})",
                          R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "MIXED_PRECISION",
                              "quantized_layers": {"a.q_proj": {"quant_algo": 8}}}})",
                          R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": "Linear"}}})"}) {
    INFO(bad);
    CHECK_THROWS_AS(qtl::io::parse_quant_config(bad), qtl::config_error);
  }
  // an entry without quant_algo: the readers raise KeyError for the layers that reach it
  auto const keyless = qtl::io::parse_quant_config(R"({"producer": {"name": "modelopt"}, "quantization": {
      "quant_algo": "MIXED_PRECISION", "quantized_layers": {"a.q_proj": {"group_size": 16}}}})");
  qtl::compiled_config const kc(keyless);
  CHECK(qtl::decide(kc, qtl::consumer::vllm_modelopt, "a.q_proj").error == "KeyError: 'quant_algo'");
  CHECK_FALSE(qtl::decide(kc, qtl::consumer::vllm_modelopt, "a.o_proj").error);
}

TEST_CASE("the compressed-tensors library's groups, module by module, as the library itself decided", "[mixed][ct]") {
  std::ifstream in(data_dir() / "ct_library_expected.json");
  REQUIRE(in);
  auto const expected = nlohmann::json::parse(in);
  std::size_t count = 0;
  for (auto const& [file, modules] : expected["configs"].items()) {
    auto const cfg = load(file);
    qtl::compiled_config const cc(cfg);
    for (auto const& [module, group] : modules.items()) {
      qtl::layer_kind const kind = qtl::infer_layer_kind(module);
      if (module.ends_with("norm") || kind == qtl::layer_kind::other) {
        continue;  // not a Linear: the library never gives it a scheme, and QTL never decides it
      }
      INFO(file << ": " << module);
      qtl::decision const d = decided(cc, qtl::consumer::compressed_tensors, module);
      CHECK(group_of(d) == (group.is_null() ? std::string() : group.get<std::string>()));
      CHECK(d.skipped == group.is_null());
      ++count;
    }
  }
  CHECK(count == 38);  // 19 Linear modules in each of the two configs
}

TEST_CASE("overlapping targets: the library sorts them, vLLM and sglang take the config's order", "[mixed][ct]") {
  auto const cfg = load("ct_fp8_nvfp4_overlap.json");
  qtl::compiled_config const cc(cfg);
  using qtl::consumer;
  std::string const expert = "model.layers.1.mlp.experts.0.down_proj";
  // Both group_0's layer-1 regex and group_1's `.*mlp...` regex match: the library tries
  // "re:.*mlp..." first (sorted text), vLLM the config's first group.
  qtl::decision const lib = decided(cc, consumer::compressed_tensors, expert);
  CHECK(group_of(lib) == "group_1");
  CHECK(lib.bits == 4);
  CHECK(lib.group_size == 16);
  CHECK(lib.quant_type == qtl::float4_e2m1f);
  qtl::decision const vl = decided(cc, consumer::vllm_compressed_tensors, expert);
  CHECK(group_of(vl) == "group_0");
  CHECK(vl.rule == "re:model\\.layers\\.1\\.mlp\\.experts\\.0\\.(gate|up|down)_proj$");
  CHECK(vl.quant_type == qtl::float8_e4m3fn);
  CHECK_FALSE(vl.same_outcome(lib));
  // qkv_proj: no target names it; vLLM's fused step finds every shard in group_0.
  qtl::decision const qkv = decided(cc, consumer::vllm_compressed_tensors, "model.layers.0.self_attn.qkv_proj");
  CHECK(group_of(qkv) == "group_0");
  CHECK(qkv.rule == "re:.*self_attn\\.(q|k|v|o)_proj$");
  qtl::decision const gu = decided(cc, consumer::vllm_compressed_tensors, "model.layers.0.mlp.gate_up_proj");
  CHECK(group_of(gu) == "group_1");
  // lm_head: the library's exact target gives FP8; the engines never ask (ParallelLMHead).
  CHECK(group_of(decided(cc, consumer::compressed_tensors, "lm_head")) == "group_0");
  qtl::decision const head = decided(cc, consumer::vllm_compressed_tensors, "lm_head");
  CHECK(head.skipped);
  CHECK_FALSE(head.scheme);
  // ignored: the router
  qtl::decision const router = decided(cc, consumer::vllm_compressed_tensors, "model.layers.1.mlp.gate");
  CHECK(router.skipped);
  CHECK(router.rule == "re:.*mlp\\.gate$");
  // a linear layer no target matches: vLLM indexes its map with None, sglang raises ValueError
  qtl::decision const none = decided(cc, consumer::vllm_compressed_tensors, "model.layers.0.self_attn.x_proj");
  CHECK(none.error == "KeyError: None");
  CHECK_FALSE(none.bits);
  qtl::decision const sg = decided(cc, consumer::sglang_compressed_tensors, "model.layers.0.self_attn.x_proj");
  REQUIRE(sg.error);
  CHECK_THAT(*sg.error, Catch::StartsWith("ValueError: Unable to find matching target for"));
  // the library leaves it unquantized
  CHECK(decided(cc, consumer::compressed_tensors, "model.layers.0.self_attn.x_proj").skipped);
}

TEST_CASE("vLLM's target order: a target repeated in a later group belongs to that group", "[mixed][ct]") {
  auto cfg = qtl::io::parse_quant_config(R"({"quant_method": "compressed-tensors", "format": "mixed-precision",
    "config_groups": {
      "a": {"format": "float-quantized", "targets": ["re:.*down_proj", "Linear"],
            "weights": {"num_bits": 8, "type": "float"}},
      "b": {"format": "pack-quantized", "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "int", "group_size": 32, "symmetric": false}}}})");
  cfg.packed_modules_mapping = llama_packed;
  qtl::compiled_config const cc(cfg);
  qtl::decision const o = decided(cc, qtl::consumer::vllm_compressed_tensors, "model.layers.0.self_attn.o_proj");
  CHECK(group_of(o) == "b");  // "Linear" keeps its place after the regex but maps to group b
  CHECK(o.quant_type == qtl::uint4);
  CHECK(o.sym == false);
  CHECK(group_of(decided(cc, qtl::consumer::vllm_compressed_tensors, "model.layers.0.mlp.down_proj")) == "a");
  CHECK(group_of(decided(cc, qtl::consumer::compressed_tensors, "model.layers.0.self_attn.o_proj")) == "b");
  // a class-name target only: sglang's loader reads the top-level format, not the group's
  qtl::decision const sg = decided(cc, qtl::consumer::sglang_compressed_tensors, "model.layers.0.mlp.down_proj");
  CHECK(sg.error == "NotImplementedError: No compressed-tensors compatible scheme was found.");
  CHECK(group_of(sg) == "a");
  // a regex Python rejects is an error of the layers that reach it
  auto bad = qtl::io::parse_quant_config(R"({"quant_method": "compressed-tensors",
    "config_groups": {"a": {"targets": ["re:(unclosed"], "weights": {"num_bits": 8, "type": "float"}},
                      "b": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int"}}}})");
  qtl::compiled_config const bc(bad);
  qtl::decision const e = decided(bc, qtl::consumer::vllm_compressed_tensors, "model.layers.0.mlp.down_proj");
  REQUIRE(e.error);
  CHECK_THAT(*e.error, Catch::StartsWith("re.error"));
}

TEST_CASE("ModelOpt MIXED_PRECISION: each module's algorithm as vLLM and sglang resolve it", "[mixed][modelopt]") {
  using qtl::consumer;
  auto const cfg = load("modelopt_dsv4_nvfp4_config.json");
  qtl::compiled_config const cc(cfg);
  for (consumer const c : {consumer::vllm_modelopt, consumer::sglang_modelopt}) {
    INFO(qtl::consumer_name(c));
    qtl::decision const kv = decided(cc, c, "model.layers.0.self_attn.kv_a_proj_with_mqa");
    CHECK(kv.scheme == "FP8");
    CHECK(kv.bits == 8);
    CHECK(kv.rule == "model.layers.0.self_attn.kv_a_proj_with_mqa");
    // a fused layer from its shards' keys
    qtl::decision const gu = decided(cc, c, "model.layers.0.mlp.shared_experts.gate_up_proj");
    CHECK(gu.scheme == "FP8");
    CHECK(gu.rule == "model.layers.0.mlp.shared_experts.gate_proj");
    // the fused MoE layer from the first key under it
    qtl::decision const ex = decided(cc, c, "model.layers.0.mlp.experts");
    CHECK(ex.scheme == "NVFP4");
    CHECK(ex.group_size == 16);
    CHECK(ex.quant_type == qtl::float4_e2m1f);
    CHECK(ex.rule == "model.layers.0.mlp.experts.0.gate_proj");
    // algorithms neither loader has a linear method for: built unquantized
    for (char const* m : {"model.layers.0.self_attn.q_a_proj", "model.layers.0.self_attn.o_proj"}) {
      qtl::decision const d = decided(cc, c, m);
      CHECK(d.skipped);
      REQUIRE(d.scheme);
      CHECK_THAT(*d.scheme, Catch::Contains("built unquantized"));
    }
    // not in the map: unquantized, no rule
    qtl::decision const none = decided(cc, c, "model.layers.0.self_attn.kv_b_proj");
    CHECK(none.skipped);
    CHECK_FALSE(none.rule);
    // excluded by `ignore`
    CHECK(decided(cc, c, "model.layers.0.mlp.gate").skipped);
  }
  CHECK(qtl::moe_layer_of("model.layers.0.mlp.experts.17.down_proj") == "model.layers.0.mlp.experts");
  CHECK_FALSE(qtl::moe_layer_of("model.layers.0.mlp.shared_experts.down_proj"));
  CHECK_FALSE(qtl::moe_layer_of("model.layers.0.mlp.experts.x.down_proj"));
}

TEST_CASE("ModelOpt MIXED_PRECISION: where vLLM and sglang differ", "[mixed][modelopt]") {
  using qtl::consumer;
  auto const cfg = load("modelopt_qwen3_6_hf_quant_config.json");
  qtl::compiled_config const cc(cfg);
  // vLLM also tries the name with language_model.model. / model.language_model. exchanged
  std::string const qkv = "language_model.model.layers.1.self_attn.qkv_proj";
  CHECK(decided(cc, consumer::vllm_modelopt, qkv).scheme == "FP8");
  qtl::decision const sq = decided(cc, consumer::sglang_modelopt, qkv);
  CHECK(sq.skipped);
  CHECK_FALSE(sq.scheme);
  // W4A16_NVFP4 has a method in vLLM, not in sglang
  std::string const sh = "model.language_model.layers.0.mlp.shared_expert.gate_up_proj";
  qtl::decision const v = decided(cc, consumer::vllm_modelopt, sh);
  CHECK(v.scheme == "W4A16_NVFP4");
  CHECK(v.bits == 4);
  CHECK(v.group_size == 16);
  qtl::decision const s = decided(cc, consumer::sglang_modelopt, sh);
  CHECK(s.skipped);
  CHECK(s.scheme == "W4A16_NVFP4 (no method for it in this loader: built unquantized)");
  // lm_head: vLLM's ParallelLMHead takes the W4A16_NVFP4 method; sglang's is no LinearBase
  CHECK(decided(cc, consumer::vllm_modelopt, "lm_head").scheme == "W4A16_NVFP4");
  CHECK(decided(cc, consumer::sglang_modelopt, "lm_head").skipped);
  // mtp* excluded
  CHECK(decided(cc, consumer::vllm_modelopt, "mtp.layers.0.self_attn.q_proj").skipped);

  // Shards with different algorithms: both raise; sglang before asking its exclude list.
  auto mixed_shards = qtl::io::parse_quant_config(R"({"producer": {"name": "modelopt"}, "quantization": {
      "quant_algo": "MIXED_PRECISION", "exclude_modules": ["model.layers.0.self_attn.qkv_proj"],
      "quantized_layers": {"model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"},
                           "model.layers.0.self_attn.k_proj": {"quant_algo": "NVFP4"}}}})");
  mixed_shards.packed_modules_mapping = llama_packed;
  qtl::compiled_config const mc(mixed_shards);
  qtl::decision const se = decided(mc, consumer::sglang_modelopt, "model.layers.0.self_attn.qkv_proj");
  CHECK(se.error ==
        "ValueError: Mixed quant_algo within fused layer model.layers.0.self_attn.qkv_proj: "
        "{'FP8', 'NVFP4'}. All shards must use the same quantization.");
  qtl::decision const ve = decided(mc, consumer::vllm_modelopt, "model.layers.0.self_attn.qkv_proj");
  CHECK(ve.skipped);  // vLLM asks its exclude list first
  CHECK_FALSE(ve.error);
}
