// qtl/io/config_values.hpp: one set of value rules for a config wherever it comes from: bits (what
// the engines' GPTQ loaders take against what qtl quantize writes), group sizes, null bits or group
// size, desc_act, `dynamic` overrides (integers only, not booleans or strings; sym/desc_act
// booleans; an override that is not an object) and weight_block_size; each error names the source,
// the field and the value.
#include <qtl/io/config_values.hpp>
#include <qtl/io/quant_config.hpp>

#include <catch2/catch.hpp>

#include <string>

namespace {

using qtl::io::value_rules;

/// Validates the quantization object `q` (JSON text) as `rules` say; returns the error's message,
/// or "ok".
std::string check(std::string const& q, value_rules rules = value_rules::engines) {
  auto const qobj = nlohmann::ordered_json::parse(q);
  qtl::quant_config const cfg = qtl::io::quant_config_from_json(qobj);
  try {
    qtl::io::validate_config_values(cfg, qobj, "cfg.json", rules);
  } catch (qtl::config_error const& e) {
    return e.what();
  }
  return "ok";
}

}  // namespace

TEST_CASE("bits and group_size: what the loaders take, what qtl writes", "[io][config_values]") {
  CHECK(check(R"({"quant_method": "gptq", "bits": 4, "group_size": 128})") == "ok");
  CHECK(check(R"({"quant_method": "gptq", "bits": 3, "group_size": -1})") == "ok");
  CHECK(check(R"({"quant_method": "gptq", "bits": 3, "group_size": 128})", value_rules::written) ==
        "cfg.json: bits 3: qtl quantize writes 4- or 8-bit GPTQ");
  CHECK(check(R"({"quant_method": "gptq", "bits": 5, "group_size": 128})") ==
        "cfg.json: bits 5: GPTQ loaders take 2, 3, 4 or 8 bits");
  CHECK(check(R"({"quant_method": "gptq", "bits": 4, "group_size": 0})") ==
        "cfg.json: group_size 0: a group size is -1 (one group per column) or positive");
  CHECK(check(R"({"quant_method": "gptq", "bits": null, "group_size": 128})") ==
        "cfg.json: bits is null (the engines read None and fail)");
  CHECK(check(R"({"quant_method": "awq", "bits": 4, "group_size": null})") ==
        "cfg.json: group_size is null (the engines read None and fail)");
  CHECK(check(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true})") == "ok");
  CHECK(check(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true})", value_rules::written) ==
        "cfg.json: desc_act true: qtl quantize writes no act-order checkpoints");
}

TEST_CASE("dynamic overrides follow the same rules, integers only", "[io][config_values]") {
  auto const with = [](std::string const& rule) {
    return check(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "dynamic": {"+:.*mlp.*": )" + rule + "}}");
  };
  CHECK(with(R"({"bits": 8, "group_size": 64, "sym": false})") == "ok");
  CHECK(with(R"({"bits": true})") ==
        R"(cfg.json: dynamic["+:.*mlp.*"].bits is true, not an integer (the engines would use it as the layer's value))");
  CHECK(with(R"({"group_size": "64"})") ==
        R"(cfg.json: dynamic["+:.*mlp.*"].group_size is a string, not an integer (the engines would use it as the layer's value))");
  CHECK(with(R"({"bits": 6})") == R"(cfg.json: dynamic["+:.*mlp.*"].bits 6: GPTQ loaders take 2, 3, 4 or 8 bits)");
  CHECK(with(R"({"group_size": -2})") ==
        R"(cfg.json: dynamic["+:.*mlp.*"].group_size -2: a group size is -1 (one group per column) or positive)");
  CHECK(with(R"({"sym": 1})") == R"(cfg.json: dynamic["+:.*mlp.*"].sym is 1, not true or false)");
  CHECK(with("[4]") == R"(cfg.json: dynamic["+:.*mlp.*"] is a list, not an object of overrides)");
}

TEST_CASE("weight_block_size is [block_n, block_k] of positive integers", "[io][config_values]") {
  CHECK(check(R"({"quant_method": "fp8", "weight_block_size": [128, 128]})") == "ok");
  CHECK(check(R"({"quant_method": "fp8", "weight_block_size": null})") == "ok");
  for (char const* bad : {"[128]", "[128, 0]", "[128, 1.5]", "\"128x128\"", "[128, 128, 1]"}) {
    INFO(bad);
    CHECK(check(std::string(R"({"quant_method": "fp8", "weight_block_size": )") + bad + "}") ==
          std::string("cfg.json: weight_block_size ") + nlohmann::ordered_json::parse(bad).dump() +
              " is not [block_n, block_k] of positive integers");
  }
}
