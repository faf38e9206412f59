// Mixed-precision configs (qtl/rules/mixed.hpp): compressed-tensors config groups and ModelOpt
// quantized_layers read (qtl/io/quant_config.hpp), and every module of the configs of
// test/data/mixed decided as the readers decide it: the compressed-tensors library against its
// own recorded decisions (ct_library_expected.json, made by make_ct_library_cases.py), vLLM and
// sglang by the rules of their loaders (docs/spec/mixed_precision.md).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

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

// Real published ModelOpt MIXED_PRECISION configs (test/data/mixed/real/, copied verbatim; the
// sources are in test/data/mixed/README.md). Every linear module a model of that config has is
// decided: the names are generated from the model's config.json (layer count, which layers are
// full attention, experts, vision blocks, MTP layer), each module decided as the layer the
// engine builds from it (its fused layer, or the fused MoE layer of an expert), and the outcome
// checked against the config's own entry for the module.
namespace {

/// vLLM's Qwen3.5 packed_modules_mapping (`Qwen3_5ForCausalLMBase`, models/qwen3_5.py).
qtl::packed_mapping const qwen3_5_packed = {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}},
                                            {"gate_up_proj", {"gate_proj", "up_proj"}},
                                            {"in_proj_qkvz", {"in_proj_qkv", "in_proj_z"}},
                                            {"in_proj_ba", {"in_proj_b", "in_proj_a"}}};

/// An MoE block's projections: `shared` + leaf (the shared expert), and `routed` + E + "." + leaf
/// for each of the `experts` routed experts.
void add_experts(std::vector<std::string>& out, std::string const& shared, std::string const& routed,
                 std::initializer_list<char const*> leaves, int experts) {
  for (char const* leaf : leaves) {
    out.push_back(shared + leaf);
    for (int e = 0; e != experts; ++e) {
      out.push_back(routed + std::to_string(e) + "." + leaf);
    }
  }
}

/// The linear modules of a Qwen3.5/3.6 checkpoint (`Qwen3_5ForConditionalGeneration`, or the MoE
/// one when `experts` > 0): `layers` decoder layers, every fourth (`full_attention_interval` 4)
/// full attention and the others Gated DeltaNet, a 27-block vision tower, one MTP layer.
std::vector<std::string> qwen3_5_modules(int layers, int experts) {
  std::vector<std::string> out;
  auto const mlp = [&](std::string const& p) {
    if (experts == 0) {
      for (char const* leaf : {"gate_proj", "up_proj", "down_proj"}) {
        out.push_back(p + "mlp." + leaf);
      }
      return;
    }
    out.push_back(p + "mlp.gate");
    out.push_back(p + "mlp.shared_expert_gate");
    add_experts(out, p + "mlp.shared_expert.", p + "mlp.experts.", {"gate_proj", "up_proj", "down_proj"}, experts);
  };
  for (int i = 0; i != layers; ++i) {
    std::string const p = "model.language_model.layers." + std::to_string(i) + ".";
    if (i % 4 == 3) {
      for (char const* leaf : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
        out.push_back(p + "self_attn." + leaf);
      }
    } else {
      for (char const* leaf : {"in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"}) {
        out.push_back(p + "linear_attn." + leaf);
      }
    }
    mlp(p);
  }
  out.push_back("lm_head");
  for (int b = 0; b != 27; ++b) {
    std::string const p = "model.visual.blocks." + std::to_string(b) + ".";
    for (char const* leaf : {"attn.qkv", "attn.proj", "mlp.linear_fc1", "mlp.linear_fc2"}) {
      out.push_back(p + leaf);
    }
  }
  out.push_back("model.visual.merger.linear_fc1");
  out.push_back("model.visual.merger.linear_fc2");
  out.push_back("mtp.fc");
  for (char const* leaf : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
    out.push_back(std::string("mtp.layers.0.self_attn.") + leaf);
  }
  mlp("mtp.layers.0.");
  return out;
}

/// The linear modules of a DeepSeek-V4 checkpoint in DeepSeek's own names (`layers.N.attn.wq_a`,
/// `layers.N.ffn.experts.E.w1`, `head`, `mtp.0....`): `layers` layers of `experts` routed
/// experts and one shared expert, one MTP layer.
std::vector<std::string> deepseek_v4_modules(int layers, int experts) {
  std::vector<std::string> out;
  auto const block = [&](std::string const& p) {
    for (char const* leaf : {"wq_a", "wq_b", "wkv", "wo_a", "wo_b"}) {
      out.push_back(p + "attn." + leaf);
    }
    out.push_back(p + "ffn.gate");
    add_experts(out, p + "ffn.shared_experts.", p + "ffn.experts.", {"w1", "w2", "w3"}, experts);
  };
  for (int i = 0; i != layers; ++i) {
    block("layers." + std::to_string(i) + ".");
  }
  out.push_back("head");
  block("mtp.0.");
  return out;
}

/// The layer an engine builds from checkpoint module `m`: the fused MoE layer of an expert, the
/// fused layer of a shard, else `m` itself.
std::string engine_layer(qtl::compiled_config const& cc, std::string const& m) {
  if (auto const moe = qtl::moe_layer_of(m)) {
    return *moe;
  }
  std::size_t const dot = m.rfind('.');
  std::string_view const leaf = dot == std::string::npos ? std::string_view(m) : std::string_view(m).substr(dot + 1);
  if (auto const* e = cc.fused().of_shard(leaf)) {
    return m.substr(0, m.size() - leaf.size()) + e->first;
  }
  return m;
}

struct real_case {
  char const* file;
  std::vector<std::string> modules;
  std::size_t keys;                        // quantized_layers entries
  bool (*excluded)(std::string const& m);  // whether the config's exclude patterns cover `m`
};

bool mtp(std::string const& m) { return m.starts_with("mtp"); }

/// DeepSeek-V4-Flash-NVFP4's `*.attn.*`, `*.ffn.shared_experts.*`, `head`, `mtp.*`.
bool dsv4_excluded(std::string const& m) {
  return m.starts_with("mtp.") || m.find(".attn.") != std::string::npos ||
         m.find(".shared_experts.") != std::string::npos || m == "head";
}

/// Checks every module of `rc` under vLLM's and sglang's ModelOpt mixed loaders against the
/// config's entry for it (the module's own key, or its fused MoE layer's); returns how many
/// distinct engine layers were decided.
std::size_t check_real_modelopt(real_case const& rc) {
  qtl::quant_config cfg = qtl::io::load_quant_config(data_dir() / "real" / rc.file);
  cfg.packed_modules_mapping = qwen3_5_packed;
  REQUIRE(qtl::is_mixed(cfg));
  REQUIRE(cfg.quantized_layers.size() == rc.keys);
  qtl::compiled_config const cc(cfg);
  std::map<std::string, std::string> algo_of;  // key -> algorithm as written
  for (qtl::modelopt_layer const& e : cfg.quantized_layers) {
    algo_of.emplace(e.module, e.quant_algo);
  }
  std::map<std::pair<std::string, qtl::consumer>, qtl::decision> decided_layers;
  std::set<std::string> keys_used;
  for (std::string const& m : rc.modules) {
    std::string key = m;
    if (!algo_of.count(key)) {
      key = qtl::moe_layer_of(m).value_or(m);
    }
    auto const it = algo_of.find(key);
    std::string const algo = it == algo_of.end() ? "" : it->second;
    if (!algo.empty()) {
      keys_used.insert(key);
    }
    std::string const layer = engine_layer(cc, m);
    bool const excluded = rc.excluded(m);
    for (qtl::consumer const c : {qtl::consumer::vllm_modelopt, qtl::consumer::sglang_modelopt}) {
      auto [pos, fresh] = decided_layers.try_emplace({layer, c});
      if (fresh) {
        pos->second = decided(cc, c, layer);
      }
      qtl::decision const& d = pos->second;
      bool const vllm = c == qtl::consumer::vllm_modelopt;
      INFO(rc.file << ": " << m << " as " << layer << " (" << qtl::consumer_name(c) << "), entry " << algo);
      CHECK_FALSE(d.error);
      if (excluded) {
        CHECK(d.skipped);
        REQUIRE(d.rule);
        CHECK(std::find(cfg.skip_list.begin(), cfg.skip_list.end(), *d.rule) != cfg.skip_list.end());
      } else if (algo.empty()) {
        CHECK(d.skipped);  // not in quantized_layers: built unquantized
        CHECK_FALSE(d.rule);
        CHECK_FALSE(d.scheme);
      } else if (!vllm && m == "lm_head") {
        CHECK(d.skipped);  // sglang's ParallelLMHead is no LinearBase
      } else if (algo == "FP8" || algo == "NVFP4" || (vllm && algo == "W4A16_NVFP4")) {
        CHECK_FALSE(d.skipped);
        CHECK(d.scheme == algo);
        CHECK(d.bits == (algo == "FP8" ? 8 : 4));
        CHECK(d.quant_type == (algo == "FP8" ? qtl::float8_e4m3fn : qtl::float4_e2m1f));
        CHECK(d.group_size == (algo == "FP8" ? std::optional<std::int64_t>() : std::optional<std::int64_t>(16)));
      } else {
        CHECK(d.skipped);
        CHECK(d.scheme == algo + " (no method for it in this loader: built unquantized)");
      }
    }
  }
  CHECK(keys_used.size() == rc.keys);  // the generated model has a module for every entry
  return decided_layers.size() / 2;
}

}  // namespace

TEST_CASE("real ModelOpt MIXED_PRECISION configs: every module decided as vLLM and sglang decide it",
          "[mixed][modelopt][real]") {
  // nvidia/Qwen3.6-35B-A3B-NVFP4: 40 layers, 256 experts; FP8 attention and DeltaNet
  // projections, W4A16_NVFP4 experts (one `mlp.experts` key per layer), shared experts, lm_head.
  // The layers vLLM builds: 30 DeltaNet layers (in_proj_qkvz, in_proj_ba, out_proj), 10 attention
  // layers (qkv_proj, o_proj), in each the router, shared-expert gate, gate_up_proj, down_proj
  // and fused experts; lm_head; 27 vision blocks of 4 and the merger's 2; the MTP layer's 8.
  CHECK(check_real_modelopt({"nvidia_Qwen3.6-35B-A3B-NVFP4_hf_quant_config.json", qwen3_5_modules(40, 256), 291,
                             mtp}) == 30 * 3 + 10 * 2 + 40 * 5 + 1 + 27 * 4 + 2 + 8);
  // nvidia/Qwen3.6-27B-NVFP4: 64 dense layers, W4A16_NVFP4 MLPs (gate_up_proj from its shards).
  // Layers: 48 DeltaNet of 3, 16 attention of 2, 64 MLPs of 2, lm_head, vision 110, MTP 5.
  CHECK(check_real_modelopt({"nvidia_Qwen3.6-27B-NVFP4_hf_quant_config.json", qwen3_5_modules(64, 0), 401, mtp}) ==
        48 * 3 + 16 * 2 + 64 * 2 + 1 + 27 * 4 + 2 + 5);
  // nvidia/DeepSeek-V4-Flash-NVFP4: 43 layers; only the routed experts are in the map (NVFP4),
  // attention, shared experts, head and MTP are excluded by pattern.
  // Layers: 44 blocks (43 and MTP) of 5 attention, router, 3 shared-expert and the fused experts;
  // head.
  CHECK(check_real_modelopt({"nvidia_DeepSeek-V4-Flash-NVFP4_hf_quant_config.json", deepseek_v4_modules(43, 256), 43,
                             dsv4_excluded}) == 44 * 10 + 1);
}

TEST_CASE("real ModelOpt configs in the engines' own layer names", "[mixed][modelopt][real]") {
  using qtl::consumer;
  qtl::quant_config cfg =
      qtl::io::load_quant_config(data_dir() / "real" / "nvidia_Qwen3.6-35B-A3B-NVFP4_hf_quant_config.json");
  cfg.packed_modules_mapping = qwen3_5_packed;
  qtl::compiled_config const cc(cfg);
  // vLLM's Qwen3.5 names its layers language_model.model.layers.N (and maps the keys the same
  // way, hf_to_vllm_mapper): the same decisions as under the checkpoint's names.
  for (auto const& [ckpt, engine] : std::vector<std::pair<std::string, std::string>>{
           {"model.language_model.layers.3.self_attn.qkv_proj", "language_model.model.layers.3.self_attn.qkv_proj"},
           {"model.language_model.layers.0.linear_attn.in_proj_qkvz",
            "language_model.model.layers.0.linear_attn.in_proj_qkvz"},
           {"model.language_model.layers.0.mlp.experts", "language_model.model.layers.0.mlp.experts"},
           {"lm_head", "language_model.lm_head"}}) {
    INFO(engine);
    qtl::decision const a = decided(cc, consumer::vllm_modelopt, ckpt);
    qtl::decision const b = decided(cc, consumer::vllm_modelopt, engine);
    CHECK(a.same_outcome(b));
    CHECK_FALSE(b.skipped);
  }
  // sglang's Qwen3.5 renames model.language_model. to model. at load and has no
  // hf_to_sglang_mapper for the keys: no key names one of its layers, every layer is built
  // unquantized (the FP8 attention and DeltaNet projections included).
  for (char const* m : {"model.layers.3.self_attn.qkv_proj", "model.layers.3.qkv_proj", "model.layers.3.o_proj",
                        "model.layers.0.linear_attn.in_proj_qkvz", "model.layers.0.linear_attn.out_proj",
                        "model.layers.0.mlp.experts", "model.layers.0.mlp.shared_expert.gate_up_proj"}) {
    INFO(m);
    qtl::decision const d = decided(cc, consumer::sglang_modelopt, m);
    CHECK(d.skipped);
    CHECK_FALSE(d.rule);
    CHECK_FALSE(d.scheme);
  }
}

TEST_CASE("compressed-tensors groups and a fused MoE layer: vLLM asks the first expert's projections",
          "[mixed][ct][moe]") {
  using qtl::consumer;
  auto const parse = [](char const* groups, char const* ignore) {
    qtl::quant_config cfg = qtl::io::parse_quant_config(
        std::string(R"({"quant_method": "compressed-tensors", "format": "mixed-precision", "ignore": )") + ignore +
        R"(, "config_groups": )" + groups + "}");
    cfg.packed_modules_mapping = llama_packed;
    return cfg;
  };
  char const* const fp8_attention_w4a16_rest = R"({
      "a": {"format": "float-quantized", "targets": ["re:.*self_attn.*"], "weights": {"num_bits": 8, "type": "float"}},
      "b": {"format": "pack-quantized", "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "int", "group_size": 128}}})";
  {
    // No regex names the projections: `Linear` reaches the FusedMoE layer through the key vLLM
    // adds for it (_add_fused_moe_to_target_scheme_map).
    auto const cfg = parse(fp8_attention_w4a16_rest, "[]");
    qtl::compiled_config const cc(cfg);
    qtl::decision const ex = decided(cc, consumer::vllm_compressed_tensors, "model.layers.0.mlp.experts");
    CHECK(group_of(ex) == "b");
    CHECK(ex.rule == "Linear");
    CHECK(ex.bits == 4);
    CHECK_FALSE(ex.error);
  }
  {
    // The projections split between groups: vLLM's ValueError.
    auto const cfg = parse(R"({
        "a": {"format": "float-quantized", "targets": ["re:.*down_proj$"], "weights": {"num_bits": 8, "type": "float"}},
        "b": {"format": "pack-quantized", "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int"}}})",
                           "[]");
    qtl::compiled_config const cc(cfg);
    qtl::decision const ex = decided(cc, consumer::vllm_compressed_tensors, "model.layers.0.mlp.experts");
    CHECK(ex.error == "ValueError: All MoE projections need to have same quantization scheme but found multiple");
    CHECK_FALSE(ex.bits);
    // each expert linear of the checkpoint, decided alone, has a scheme
    CHECK(group_of(decided(cc, consumer::vllm_compressed_tensors, "model.layers.0.mlp.experts.0.down_proj")) == "a");
  }
  {
    // Every projection ignored: the unquantized MoE method; the entry that ignored the first.
    auto const cfg = parse(fp8_attention_w4a16_rest, R"(["re:.*mlp\\.experts\\..*"])");
    qtl::compiled_config const cc(cfg);
    qtl::decision const ex = decided(cc, consumer::vllm_compressed_tensors, "model.layers.0.mlp.experts");
    CHECK(ex.skipped);
    CHECK_FALSE(ex.error);
    CHECK(ex.rule == "re:.*mlp\\.experts\\..*");
  }
  {
    // Only down_proj ignored: None against a scheme, vLLM's ValueError.
    auto const cfg = parse(fp8_attention_w4a16_rest, R"(["re:.*experts\\.0\\.down_proj"])");
    qtl::compiled_config const cc(cfg);
    qtl::decision const ex = decided(cc, consumer::vllm_compressed_tensors, "model.layers.0.mlp.experts");
    CHECK(ex.error == "ValueError: All MoE projections need to have same quantization scheme but found multiple");
  }
  {
    // The layer's own name in `ignore` is not asked: its projections are, and are quantized.
    auto const cfg = parse(fp8_attention_w4a16_rest, R"(["model.layers.0.mlp.experts"])");
    qtl::compiled_config const cc(cfg);
    qtl::decision const ex = decided(cc, consumer::vllm_compressed_tensors, "model.layers.0.mlp.experts");
    CHECK_FALSE(ex.skipped);
    CHECK(group_of(ex) == "b");
    // the library ignores it by name (and its linears are the experts, which it quantizes)
    CHECK(decided(cc, consumer::compressed_tensors, "model.layers.0.mlp.experts").skipped);
  }
  {
    // No target for the projections: find_matched_target's failure for the first of them.
    auto const cfg = parse(R"({
        "a": {"format": "float-quantized", "targets": ["re:.*self_attn.*"], "weights": {"num_bits": 8, "type": "float"}}})",
                           "[]");
    qtl::compiled_config const cc(cfg);
    CHECK(decided(cc, consumer::vllm_compressed_tensors, "model.layers.0.mlp.experts").error == "KeyError: None");
    // sglang's fused MoE under several groups stays unmodelled
    qtl::decision const sg = decided(cc, consumer::sglang_compressed_tensors, "model.layers.0.mlp.experts");
    REQUIRE(sg.error);
    CHECK_THAT(*sg.error, Catch::StartsWith("qtl::unsupported_error: sglang's scheme of a fused MoE layer"));
  }
}

TEST_CASE("a real compressed-tensors mixed-precision config: every layer of vLLM's DeepSeek-V4-Flash decided",
          "[mixed][ct][real]") {
  // RedHatAI/DeepSeek-V4-Flash-NVFP4-FP8's config.json (test/data/mixed/README.md): FP8 blocks
  // for the attention projections, NVFP4 for the MLP projections, by regex only. vLLM's layers
  // (models/deepseek_v4): per layer `attn.fused_wqa_wkv` (wq_a and wkv fused), `attn.wq_b`,
  // `attn.wo_a`, `attn.wo_b`, on the layers of compress ratio 4 the indexer's `attn.indexer.wq_b`
  // (built with the quant config; its `weights_proj` and the compressors' `fused_wkv_wgate`
  // without, so never asked), `ffn.shared_experts.gate_up_proj` and `.down_proj`, the fused
  // `ffn.experts`; `lm_head`.
  using qtl::consumer;
  qtl::quant_config cfg =
      qtl::io::load_quant_config(data_dir() / "real" / "RedHatAI_DeepSeek-V4-Flash-NVFP4-FP8_config.json");
  cfg.packed_modules_mapping = {{"fused_wqa_wkv", {"wq_a", "wkv"}}, {"gate_up_proj", {"gate_proj", "up_proj"}}};
  REQUIRE(cfg.format == "mixed-precision");
  REQUIRE(cfg.config_groups.size() == 2);
  qtl::compiled_config const cc(cfg);
  auto const model =
      nlohmann::json::parse(std::ifstream(data_dir() / "real" / "RedHatAI_DeepSeek-V4-Flash-NVFP4-FP8_config.json"));
  int const layers = model["num_hidden_layers"];
  auto const& ratios = model["compress_ratios"];
  REQUIRE(static_cast<int>(ratios.size()) == layers);
  std::size_t fp8 = 0;
  std::size_t nvfp4 = 0;
  for (int i = 0; i != layers; ++i) {
    std::string const p = "model.layers." + std::to_string(i) + ".";
    std::vector<std::string> attention = {p + "attn.fused_wqa_wkv", p + "attn.wq_b", p + "attn.wo_a", p + "attn.wo_b"};
    if (ratios[i] == 4) {
      attention.push_back(p + "attn.indexer.wq_b");
    }
    for (std::string const& m : attention) {
      INFO(m);
      qtl::decision const d = decided(cc, consumer::vllm_compressed_tensors, m);
      CHECK(group_of(d) == "group_0");
      CHECK(d.rule == "re:.*attn.*(fused_wqa_wkv|wq_b|wo_a|wo_b)$");
      CHECK(d.bits == 8);
      CHECK(d.quant_type == qtl::float8_e4m3fn);
      CHECK_FALSE(d.error);
      // sglang's linear layers read the top-level format
      CHECK(decided(cc, consumer::sglang_compressed_tensors, m).error ==
            "NotImplementedError: No compressed-tensors compatible scheme was found.");
      ++fp8;
    }
    for (std::string const& m :
         {p + "ffn.shared_experts.gate_up_proj", p + "ffn.shared_experts.down_proj", p + "ffn.experts"}) {
      INFO(m);
      qtl::decision const d = decided(cc, consumer::vllm_compressed_tensors, m);
      CHECK(group_of(d) == "group_1");
      CHECK(d.rule == "re:.*ffn.*(gate|up|down)_proj$");
      CHECK(d.bits == 4);
      CHECK(d.group_size == 16);
      CHECK(d.quant_type == qtl::float4_e2m1f);
      CHECK_FALSE(d.error);
      ++nvfp4;
    }
  }
  qtl::decision const head = decided(cc, consumer::vllm_compressed_tensors, "lm_head");
  CHECK(head.skipped);
  CHECK(fp8 == 43 * 4 + 21);  // 21 layers of compress ratio 4
  CHECK(nvfp4 == 43 * 3);
}
