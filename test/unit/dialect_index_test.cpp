// The dialect indexes (qtl/rules/dialect_index.hpp) through compiled_config against the reference
// loops, for every consumer: invalid patterns after and before matching ones, wrapped forms that
// compile where the pattern does not, fnmatch globs with classes, newlines and non-ASCII bytes, long
// lists over several combined DFAs, search-like patterns behind the literal prefilter.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <qtl/rules/compiled_config.hpp>
#include <qtl/rules/consumers.hpp>

#include "rule_generator.hpp"
#include "thin.hpp"

namespace {

using qtl_test::generator;
using qtl_test::pieces;
using qtl_test::strings;

/// Every consumer's decision from the compiled config equals the reference's, for each name.
void check_all_consumers(qtl::quant_config const& cfg, strings const& names) {
  qtl::compiled_config const cc(cfg);
  for (std::string const& n : names) {
    for (qtl::consumer const c : qtl::all_consumers) {
      for (qtl::layer_kind const kind : {qtl::infer_layer_kind(n), qtl::layer_kind::moe}) {
        std::string const ref = to_json(qtl::decide(cfg, c, n, kind));
        std::string const fast = to_json(qtl::decide(cc, c, n, kind));
        INFO("consumer " << consumer_name(c) << " name '" << n << "'");
        CHECK(ref == fast);
      }
    }
  }
}

qtl::decision decide_compiled(qtl::quant_config const& cfg, qtl::consumer c, std::string_view name) {
  qtl::compiled_config const cc(cfg);
  return qtl::decide(cc, c, name);
}

TEST_CASE("dialect indexes: invalid patterns raise exactly when the reference loop reaches them", "[rules]") {
  using qtl::consumer;
  qtl::quant_config cfg;
  cfg.family = qtl::quant_family::compressed_tensors;
  // exact entry, then an invalid regex, then a regex that matches everything with "mlp"
  cfg.skip_list = {"lm_head", "re:(", "re:.*mlp.*", "model.layers.0.mlp.down_proj"};
  qtl::decision d = decide_compiled(cfg, consumer::vllm_compressed_tensors, "lm_head");
  CHECK(d.skipped);
  CHECK(d.rule == "lm_head");
  CHECK(!d.error);
  d = decide_compiled(cfg, consumer::vllm_compressed_tensors, "model.layers.0.mlp.down_proj");
  REQUIRE(d.error);
  CHECK(d.error->starts_with("re.error: "));
  // sglang's reading: "lm_head" is a case-insensitive substring
  d = decide_compiled(cfg, consumer::sglang_compressed_tensors, "model.LM_HEAD.x");
  CHECK(d.rule == "lm_head");
  check_all_consumers(cfg, {"lm_head", "model.layers.0.mlp.down_proj", "model.LM_HEAD.x", "norm", ""});

  // The library's match_name: entry 0 matches the fused layer through its second shard, so the
  // invalid entry 1 is never reached (a per-shard search would raise on the first shard).
  cfg.skip_list = {"re:.*k_proj$", "re:(", "model.layers.0.self_attn.q_proj"};
  cfg.packed_modules_mapping = {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}}};
  d = decide_compiled(cfg, consumer::compressed_tensors, "model.layers.0.self_attn.qkv_proj");
  CHECK(d.skipped);
  CHECK(d.rule == "re:.*k_proj$");
  CHECK(!d.error);
  check_all_consumers(cfg, {"model.layers.0.self_attn.qkv_proj", "model.layers.0.self_attn.o_proj",
                            "model.layers.0.self_attn.q_proj", "x.qkv_proj"});
}

TEST_CASE("dialect indexes: wrapped forms do not hide an invalid pattern", "[rules]") {
  using qtl::consumer;
  qtl::quant_config cfg;
  cfg.family = qtl::quant_family::modelopt;
  cfg.quant_algo = "NVFP4";
  // "a)(b" is invalid, "(?:a)(b)\Z" would compile: sglang ModelOpt must raise, as re.fullmatch does
  cfg.skip_list = {"lm_head", "a)(b", "*mlp*"};
  qtl::decision d = decide_compiled(cfg, consumer::sglang_modelopt, "model.layers.0.mlp.down_proj");
  REQUIRE(d.error);
  CHECK(d.error->starts_with("re.error: "));
  d = decide_compiled(cfg, consumer::sglang_modelopt, "model.lm_head");  // a component matches entry 0
  CHECK(d.rule == "lm_head");
  CHECK(!d.error);
  // vLLM ModelOpt: an entry equal to the name is not a substring hit; the next one is
  cfg.skip_list = {"model.x", "x", "model.*"};
  d = decide_compiled(cfg, consumer::vllm_modelopt, "model.x");
  CHECK(d.rule == "model.x");  // exact membership (step 1) decides first
  d = decide_compiled(cfg, consumer::vllm_modelopt, "model.xy");
  CHECK(d.rule == "model.x");  // a proper substring
  cfg.skip_list = {"model.y", "y.z", "model.*"};
  d = decide_compiled(cfg, consumer::vllm_modelopt, "model.y.z.w");
  CHECK(d.rule == "model.y");
  check_all_consumers(cfg, {"model.x", "model.xy", "model.y.z.w", "model", "y.z"});

  // transformers v5: for "a\\" the key + "\\." compiles ("a", "\\\\", any) and the key does not
  cfg.skip_list = {"a\\", "b"};
  d = decide_compiled(cfg, consumer::transformers_v5, "a\\x");  // re.match("a\\\\.", ...) hits first
  CHECK(d.rule == "a\\");
  CHECK(!d.error);
  d = decide_compiled(cfg, consumer::transformers_v5, "b.c");
  REQUIRE(d.error);  // re.match("a\\", ...) raises before "b" is tried
  check_all_consumers(cfg, {"a\\x", "b.c", "ab", "x.b"});
  // an invalid key that is also a suffix of the name: its regex raises before endswith is asked
  cfg.skip_list = {"*.up_proj"};
  d = decide_compiled(cfg, consumer::transformers_v5, "*.up_proj");
  REQUIRE(d.error);
  CHECK(d.error->starts_with("re.error: "));

  // AutoRound: an invalid regex key is skipped, never raised
  cfg.family = qtl::quant_family::auto_round;
  cfg.skip_list.clear();
  qtl::extra_config_entry bad;
  bad.key = "(mlp";
  bad.bits = qtl::py_value::of_int(8);
  qtl::extra_config_entry good;
  good.key = ".*mlp.*";
  good.bits = qtl::py_value::of_int(16);
  cfg.extra_config = {bad, good};
  d = decide_compiled(cfg, consumer::sglang_auto_round, "model.layers.0.mlp.up_proj");
  CHECK(d.skipped);
  CHECK(d.rule == ".*mlp.*");
  CHECK(!d.error);
  check_all_consumers(cfg, {"model.layers.0.mlp.up_proj", "mlp", "x(mlp", "model.layers.0.mlp"});
}

TEST_CASE("dialect indexes: fnmatch globs with classes, newlines and non-ASCII bytes", "[rules]") {
  qtl::quant_config cfg;
  cfg.family = qtl::quant_family::fp8;
  // the last entry makes glob_match raise (a non-ASCII byte in a class) for every name it reaches
  cfg.skip_list = {"model.layers.[!0-4]*", "*.mlp.gate", "lm_?ead", "x\xc3\xa9*", "[]]", "a*b*c", "[\xc3]*"};
  strings const names = {"model.layers.7.mlp", "model.layers.3.mlp", "m.mlp.gate", "m.mlp.gate_up",
                         "lm_head", "lm_\nead", "x\xc3\xa9y", "\xc3", "]", "a\nb\nc", "abx", ""};
  check_all_consumers(cfg, names);
  CHECK(decide_compiled(cfg, qtl::consumer::fnmatch, "lm_\nead").rule == "lm_?ead");  // ? takes a newline
  CHECK(decide_compiled(cfg, qtl::consumer::fnmatch, "model.layers.7.mlp").rule == "model.layers.[!0-4]*");
  CHECK(decide_compiled(cfg, qtl::consumer::fnmatch, "model.layers.3.mlp").error);
}

TEST_CASE("dialect indexes on long lists (several combined DFAs) equal the reference", "[rules]") {
  generator g{std::mt19937_64(23)};
  strings names;
  for (int i = 0; i != 25; ++i) {
    names.push_back(g.name());
  }
  for (int round = 0; round != qtl_test::rounds(3); ++round) {
    qtl::quant_config cfg = g.config(names);
    for (int i = 0; i != 300; ++i) {
      cfg.skip_list.push_back(g.chance(50) ? g.pattern_entry(names) : g.entry(names));
      if (i % 5 == 0) {
        qtl::extra_config_entry e;
        e.key = g.pattern_entry(names);
        e.bits = qtl::py_value::of_int(16);
        cfg.extra_config.push_back(e);
      }
    }
    check_all_consumers(cfg, names);
  }
}

TEST_CASE("dialect indexes with search-like patterns behind the literal prefilter", "[rules]") {
  // AutoRound's exported keys (`.*mlp\.gate.*`), compressed-tensors' `re:.*...$`, ModelOpt's `*x*`
  qtl::quant_config cfg;
  cfg.family = qtl::quant_family::auto_round;
  for (int i = 0; i != 50; ++i) {
    qtl::extra_config_entry e;
    e.key = ".*layers\\." + std::to_string(i) + "\\.mlp\\.(gate|up)_proj.*";
    e.bits = qtl::py_value::of_int(i % 2 ? 16 : 8);
    cfg.extra_config.push_back(e);
    cfg.skip_list.push_back(i % 3 == 0 ? "re:.*\\." + std::to_string(i) + "\\.mlp\\.gate$"
                                       : "*layers." + std::to_string(i) + ".self_attn*");
  }
  strings names;
  for (int i = 0; i != 60; i += 3) {
    for (std::string_view const leaf : {"mlp.gate", "mlp.gate_proj", "mlp.up_proj", "self_attn.q_proj"}) {
      names.push_back("model.layers." + std::to_string(i) + "." + std::string(leaf));
    }
  }
  names.push_back("model.layers.3.mlp.gate\n");
  check_all_consumers(cfg, names);
}

}  // namespace
