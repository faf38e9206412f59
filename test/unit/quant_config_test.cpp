// Loading quantization configs (qtl/io/quant_config.hpp): the three file shapes, key order, and
// config_error naming the field for unknown methods and malformed fields.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <qtl/io/quant_config.hpp>
#include <qtl/rules/consumers.hpp>

namespace {

qtl::quant_config parse(std::string const& text) { return qtl::io::parse_quant_config(text); }

void check_field_error(std::string const& text, std::string const& field) {
  INFO(text);
  try {
    (void)parse(text);
    FAIL("no config_error");
  } catch (qtl::config_error const& e) {
    CHECK_THAT(e.what(), Catch::Contains("'" + field + "'"));
  }
}

}  // namespace

TEST_CASE("config.json: quantization_config is read, dynamic rules keep the file's order", "[io][quant_config]") {
  // In sorted order the "-:" rule would come first and skip layer 1; in file order "+:" wins.
  auto const cfg = parse(R"({
    "architectures": ["LlamaForCausalLM"],
    "quantization_config": {
      "quant_method": "gptq", "bits": 4, "group_size": 128, "sym": true, "desc_act": false,
      "lm_head": true,
      "dynamic": {"+:model\\.layers\\.1\\..*": {"bits": 8}, "-:model\\.layers\\.[0-9]+\\..*": {}}
    }})");
  CHECK(cfg.family == qtl::quant_family::gptq);
  CHECK(cfg.lm_head_quantized);
  REQUIRE(cfg.dynamic.size() == 2);
  CHECK(cfg.dynamic[0].key == "+:model\\.layers\\.1\\..*");
  CHECK(cfg.dynamic[0].body.bits == qtl::py_value::of_int(8));
  CHECK(cfg.dynamic[1].body.type == qtl::py_type::dict);
  auto const d = qtl::decide(cfg, qtl::consumer::sglang_gptq, "model.layers.1.mlp.down_proj");
  CHECK_FALSE(d.skipped);
  CHECK(d.bits == 8);
  CHECK(qtl::decide(cfg, qtl::consumer::sglang_gptq, "model.layers.2.mlp.down_proj").skipped);
}

TEST_CASE("quantize_config.json without quant_method is GPTQ; with one, its family", "[io][quant_config]") {
  auto const old = parse(R"({"bits": 8, "group_size": -1, "desc_act": true, "sym": true, "true_sequential": true})");
  CHECK(old.family == qtl::quant_family::gptq);
  CHECK(old.bits == 8);
  CHECK(old.group_size == -1);
  CHECK(old.desc_act == true);
  auto const awq = parse(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true,
                             "modules_to_not_convert": ["gate"], "version": "gemm"})");
  CHECK(awq.family == qtl::quant_family::awq);
  CHECK(awq.skip_list == std::vector<std::string>{"gate"});
  CHECK(awq.skip_list_field == "modules_to_not_convert");
  CHECK(qtl::base_weights(awq).quant_type == qtl::uint4);
}

TEST_CASE("hf_quant_config.json (ModelOpt): quant_algo and exclude_modules", "[io][quant_config]") {
  auto const cfg = parse(R"({"producer": {"name": "modelopt", "version": "0.29.0"},
    "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": null, "group_size": 16,
                     "exclude_modules": ["lm_head", "model.layers.61*"]}})");
  CHECK(cfg.family == qtl::quant_family::modelopt);
  CHECK(cfg.quant_algo == "NVFP4");
  CHECK(cfg.skip_list_field == "exclude_modules");
  CHECK(cfg.skip_list.size() == 2);
  auto const w = qtl::base_weights(cfg);
  CHECK(w.bits == 4);
  CHECK(w.group_size == 16);
  CHECK(w.quant_type == qtl::float4_e2m1f);
}

TEST_CASE("FP8: ignored_layers is preferred over modules_to_not_convert", "[io][quant_config]") {
  auto const cfg = parse(R"({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
    "ignored_layers": ["lm_head"], "modules_to_not_convert": ["x"], "weight_block_size": [128, 128]}})");
  CHECK(cfg.skip_list_field == "ignored_layers");
  CHECK(cfg.skip_list == std::vector<std::string>{"lm_head"});
}

TEST_CASE("compressed-tensors: ignore and the first config group's weights", "[io][quant_config]") {
  auto const cfg = parse(R"({"quantization_config": {"quant_method": "compressed-tensors",
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int",
      "symmetric": true, "group_size": 128, "strategy": "group", "actorder": "group"}}},
    "ignore": ["lm_head", "re:.*mlp.gate$"], "format": "pack-quantized"}})");
  CHECK(cfg.family == qtl::quant_family::compressed_tensors);
  CHECK(cfg.bits == 4);
  CHECK(cfg.desc_act == true);
  CHECK(qtl::base_weights(cfg).quant_type == qtl::uint4b8);
  CHECK(qtl::decide(cfg, qtl::consumer::vllm_compressed_tensors, "model.layers.0.mlp.gate").skipped);
}

TEST_CASE("AutoRound: extra_config order, block_name_to_quantize split on commas", "[io][quant_config]") {
  auto const cfg = parse(R"({"quantization_config": {"quant_method": "auto-round", "bits": 4,
    "group_size": 128, "sym": true, "block_name_to_quantize": "model.layers,model.mtp",
    "extra_config": {"z.*": {"bits": 8}, "a": {"bits": 16, "data_type": "float"}}}})");
  CHECK(cfg.block_name_to_quantize == std::vector<std::string>{"model.layers", "model.mtp"});
  REQUIRE(cfg.extra_config.size() == 2);
  CHECK(cfg.extra_config[0].key == "z.*");
  CHECK(cfg.extra_config[1].json == R"({"bits":16,"data_type":"float"})");
}

TEST_CASE("vLLM's modules_in_block_to_quantize may be a list of lists", "[io][quant_config]") {
  auto const cfg = parse(R"({"quant_method": "gptq", "bits": 4, "group_size": 128,
    "modules_in_block_to_quantize": [["self_attn.q_proj", "self_attn.k_proj"], ["mlp.down_proj"]]})");
  CHECK(cfg.modules_in_block_to_quantize ==
        std::vector<std::string>{"self_attn.q_proj", "self_attn.k_proj", "mlp.down_proj"});
}

TEST_CASE("the quirky rule values are loaded with their Python types", "[io][quant_config]") {
  auto const cfg = parse(R"({"quant_method": "gptq", "bits": 4, "group_size": 128,
    "dynamic": {"a": true, "b": {"bits": 4.0, "group_size": true, "desc_act": 1, "sym": "yes"}}})");
  CHECK(cfg.dynamic[0].body.type == qtl::py_type::boolean);
  CHECK(cfg.dynamic[1].body.bits.type == qtl::py_type::floating);
  CHECK(cfg.dynamic[1].body.group_size == qtl::py_value::of_bool(true));
  CHECK(cfg.dynamic[1].body.desc_act == qtl::py_value::of_int(1));
  CHECK(cfg.dynamic[1].body.sym.type == qtl::py_type::string);
}

TEST_CASE("unknown methods and malformed fields are config_errors naming the field", "[io][quant_config]") {
  check_field_error(R"({"quantization_config": {"quant_method": "bitnet"}})", "quantization_config.quant_method");
  check_field_error(R"({"quantization_config": {"bits": 4}})", "quantization_config.quant_method");
  check_field_error(R"({"quantization_config": {"quant_method": "gptq", "bits": "4"}})", "quantization_config.bits");
  check_field_error(R"({"quantization_config": {"quant_method": "gptq", "bits": true}})", "quantization_config.bits");
  check_field_error(R"({"quantization_config": {"quant_method": "gptq", "sym": 1}})", "quantization_config.sym");
  check_field_error(R"({"quantization_config": {"quant_method": "gptq", "dynamic": []}})",
                    "quantization_config.dynamic");
  check_field_error(R"({"quantization_config": {"quant_method": "fp8", "ignored_layers": "lm_head"}})",
                    "quantization_config.ignored_layers");
  check_field_error(R"({"quantization_config": {"quant_method": "fp8", "ignored_layers": ["a", 3]}})",
                    "quantization_config.ignored_layers[1]");
  check_field_error(R"({"quantization_config": {"quant_method": "auto-round", "extra_config": {"x": 16}}})",
                    "quantization_config.extra_config[\"x\"]");
  check_field_error(R"({"quantization_config": {"quant_method": "gptq", "bits": 18446744073709551615}})",
                    "quantization_config.bits");
  check_field_error(R"({"quantization_config": {"quant_method": "gptq",
                        "dynamic": {"x": {"bits": 18446744073709551615}}}})",
                    "quantization_config.dynamic[\"x\"].bits");
  check_field_error(R"({"quantization_config": 7})", "quantization_config");
  check_field_error(R"([1, 2])", "(document)");
  check_field_error(R"({"quant_method": "fp8", "packed_modules_mapping": {"qkv_proj": "q_proj"}})",
                    "packed_modules_mapping[\"qkv_proj\"]");
  CHECK_THROWS_AS(parse("{not json"), qtl::config_error);
}

TEST_CASE("load_quant_config reads a file and names it in errors", "[io][quant_config]") {
  auto const dir = std::filesystem::temp_directory_path() / "qtl_quant_config_test";
  std::filesystem::create_directories(dir);
  auto const good = dir / "config.json";
  std::ofstream(good) << R"({"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}})";
  auto const cfg = qtl::io::load_quant_config(good);
  CHECK(cfg.family == qtl::quant_family::mxfp4);
  CHECK(qtl::base_weights(cfg).group_size == 32);
  auto const bad = dir / "bad.json";
  std::ofstream(bad) << R"({"quantization_config": {"quant_method": "nope"}})";
  CHECK_THROWS_WITH(qtl::io::load_quant_config(bad), Catch::Contains("bad.json"));
  CHECK_THROWS_AS(qtl::io::load_quant_config(dir / "missing.json"), qtl::config_error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("every golden config loads", "[io][quant_config]") {
  for (auto const& e :
       std::filesystem::directory_iterator(std::filesystem::path(QTL_TEST_DATA_DIR) / "golden" / "configs")) {
    INFO(e.path().string());
    auto const cfg = qtl::io::load_quant_config(e.path());
    CHECK_FALSE(cfg.quant_method.empty());
  }
}
