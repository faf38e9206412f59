// The real configs of test/data/golden/configs: for every file, every consumer named in its
// `expected` field and every module of `module_names`, the decision QTL takes is the one the
// file states. Nothing here knows a particular file: drop a new config into the folder and it is
// checked the same way.
//
// Expected values (docs/spec/matchers.md §6): "skip" / "no_skip"; "base" (quantized with the
// base config, no rule); {"override": {...}, "rule": "..."} (quantized with these fields, by
// that dynamic rule); a string starting with "error" (the consumer raises); for AutoRound, the
// matched `extra_config` entry's value (an object) or null (no entry decided). A column whose
// value is a sentence ("identical to sglang ...") takes the sglang column of the same file.
// The verdicts are about the matching rules, so a layer is asked as a linear layer unless its
// name says lm_head or fused MoE (`qtl::infer_layer_kind`; an embedding would otherwise be
// "not quantized by this method" whatever the list says); columns about `get_dynamic_override`
// describe the override alone, so their layers are all asked as linear layers (an lm_head
// without `lm_head: true` would otherwise not be a GPTQ layer).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <qtl/io/quant_config.hpp>
#include <qtl/rules/consumers.hpp>

namespace {

using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

std::vector<fs::path> golden_configs() {
  std::vector<fs::path> out;
  for (auto const& e : fs::directory_iterator(fs::path(QTL_TEST_DATA_DIR) / "golden" / "configs")) {
    if (e.path().extension() == ".json") {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

ojson read_json(fs::path const& p) {
  std::ifstream in(p);
  return ojson::parse(in);
}

/// The column a sentence-valued column refers to: the first object-valued column whose label
/// starts with the engine the sentence names ("identical to sglang" -> an "sglang..." label).
ojson const* referenced_column(ojson const& expected, std::string const& sentence) {
  for (std::string const engine : {"sglang", "vllm"}) {
    if (sentence.find("identical to " + engine) == std::string::npos) {
      continue;
    }
    for (auto const& [label, column] : expected.items()) {
      if (column.is_object() && label.rfind(engine, 0) == 0) {
        return &column;
      }
    }
  }
  return nullptr;
}

void check_decision(qtl::quant_config const& cfg, qtl::decision const& d, ojson const& want) {
  INFO("decision: " << qtl::to_json(d));
  INFO("expected: " << want.dump());
  if (want.is_string()) {
    std::string const w = want.get<std::string>();
    if (w == "skip") {
      CHECK_FALSE(d.error);
      CHECK(d.skipped);
    } else if (w == "no_skip") {
      CHECK_FALSE(d.error);
      CHECK_FALSE(d.skipped);
    } else if (w == "base") {
      qtl::weight_params const base = qtl::base_weights(cfg);
      CHECK_FALSE(d.error);
      CHECK_FALSE(d.skipped);
      CHECK_FALSE(d.rule);
      CHECK(d.bits == base.bits);
      CHECK(d.group_size == base.group_size);
    } else if (w.rfind("error", 0) == 0) {
      CHECK(d.error);
    } else {
      FAIL("unknown expected verdict '" << w << "'");
    }
    return;
  }
  if (want.is_null()) {  // AutoRound: no extra_config entry decided
    CHECK_FALSE(d.error);
    CHECK_FALSE(d.rule);
    return;
  }
  REQUIRE(want.is_object());
  CHECK_FALSE(d.error);
  if (want.contains("override") && want.contains("rule")) {  // GPTQ dynamic override
    CHECK_FALSE(d.skipped);
    CHECK(d.rule == want["rule"].get<std::string>());
    for (auto const& [field, value] : want["override"].items()) {
      if (field == "bits") {
        CHECK(d.bits == value.get<std::int64_t>());
      } else if (field == "group_size") {
        CHECK(d.group_size == value.get<std::int64_t>());
      } else if (field == "desc_act") {
        CHECK(d.desc_act == value.get<bool>());
      } else if (field == "sym") {
        CHECK(d.sym == value.get<bool>());
      } else {
        FAIL("override field '" << field << "' is not part of a decision");
      }
    }
    return;
  }
  // AutoRound: the value of the entry that decided.
  REQUIRE(d.rule);
  auto const entry = std::find_if(cfg.extra_config.begin(), cfg.extra_config.end(),
                                  [&](qtl::extra_config_entry const& e) { return e.key == *d.rule; });
  REQUIRE(entry != cfg.extra_config.end());
  CHECK(ojson::parse(entry->json) == want);
  if (want.contains("bits")) {
    std::int64_t const bits = want["bits"].get<std::int64_t>();
    CHECK(d.skipped == (bits >= 16));
    if (bits < 16) {
      CHECK(d.bits == bits);
    }
  }
}

}  // namespace

TEST_CASE("every golden config gives the expected decision for every module and consumer", "[rules][golden]") {
  auto const files = golden_configs();
  REQUIRE_FALSE(files.empty());
  std::size_t checked = 0;
  for (fs::path const& path : files) {
    INFO("file: " << path.filename().string());
    ojson const doc = read_json(path);
    qtl::quant_config const cfg = qtl::io::quant_config_from_json(doc);
    ojson const& expected = doc.at("expected");
    for (auto const& [label, column_value] : expected.items()) {
      INFO("consumer label: " << label);
      auto const consumer = qtl::consumer_from_label(label);
      REQUIRE(consumer.has_value());
      ojson const* column = &column_value;
      if (column_value.is_string()) {
        column = referenced_column(expected, column_value.get<std::string>());
        REQUIRE(column != nullptr);
      }
      bool const override_only = label.find("dynamic_override") != std::string::npos;
      for (ojson const& m : doc.at("module_names")) {
        std::string const module = m.get<std::string>();
        INFO("module: " << module);
        REQUIRE(column->contains(module));
        qtl::layer_kind kind = override_only ? qtl::layer_kind::linear : qtl::infer_layer_kind(module);
        if (kind == qtl::layer_kind::other) {
          kind = qtl::layer_kind::linear;
        }
        check_decision(cfg, qtl::decide(cfg, *consumer, module, kind), (*column)[module]);
        ++checked;
      }
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("golden configs: where the consumers disagree", "[rules][golden]") {
  // The awq config is the textbook case: substring `gate` takes the dense gate_up_proj, the
  // dotted-path reading does not.
  ojson const doc = read_json(fs::path(QTL_TEST_DATA_DIR) / "golden" / "configs" / "awq_mixtral_gate_substring.json");
  qtl::quant_config const cfg = qtl::io::quant_config_from_json(doc);
  std::array<qtl::consumer, 3> const cs = {qtl::consumer::sglang_awq, qtl::consumer::vllm_awq,
                                           qtl::consumer::sglang_is_layer_skipped};
  auto const groups =
      qtl::disagreements(qtl::decide_all(cfg, "model.layers.0.mlp.gate_up_proj", qtl::layer_kind::linear, cs));
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].front().skipped);
  CHECK_FALSE(groups[1].front().skipped);
}

TEST_CASE("every consumer agrees with its Python re-statement on random lists", "[rules][consumers][reference]") {
  // test/data/rules/consumer_cases.jsonl (gen_consumer_cases.py): CPython's re and fnmatch, the
  // reference's own is_layer_skipped, and the dialects of docs/spec/matchers.md §2.
  std::ifstream in(fs::path(QTL_TEST_DATA_DIR) / "rules" / "consumer_cases.jsonl");
  REQUIRE(in);
  std::string line;
  REQUIRE(std::getline(in, line));
  std::vector<qtl::consumer> consumers;
  ojson const header = ojson::parse(line);  // kept alive: the loop reads into it
  for (auto const& name : header.at("consumers")) {
    auto const c = qtl::consumer_from_name(name.get<std::string>());
    REQUIRE(c);
    consumers.push_back(*c);
  }
  std::size_t checked = 0;
  while (std::getline(in, line)) {
    ojson const doc = ojson::parse(line);
    qtl::quant_config cfg;
    cfg.family = qtl::quant_family::modelopt;
    cfg.skip_list = doc.at("list").get<std::vector<std::string>>();
    cfg.packed_modules_mapping = qtl::io::packed_modules_mapping_of(doc.at("packed_modules_mapping"), "mapping");
    for (ojson const& c : doc.at("cases")) {
      std::string const module = c[0].get<std::string>();
      std::string const kind_name = c[1].get<std::string>();
      std::string const verdicts = c[2].get<std::string>();
      REQUIRE(verdicts.size() == consumers.size());
      qtl::layer_kind const kind = kind_name == "moe"       ? qtl::layer_kind::moe
                                   : kind_name == "lm_head" ? qtl::layer_kind::lm_head
                                                            : qtl::layer_kind::linear;
      for (std::size_t i = 0; i != consumers.size(); ++i) {
        qtl::decision const d = qtl::decide(cfg, consumers[i], module, kind);
        char const got = d.error ? 'e' : d.skipped ? 's' : 'n';
        INFO(line << "\n" << qtl::to_json(d));
        CHECK(got == verdicts[i]);
        ++checked;
      }
    }
  }
  CHECK(checked > 10000);
}

TEST_CASE("AutoRound resolution agrees with its Python re-statement", "[rules][consumers][reference]") {
  // test/data/rules/auto_round_cases.jsonl (gen_auto_round_cases.py): each line is a config as a
  // checkpoint carries it, the model's packed mapping, and per module and consumer the bits,
  // group size, sym and extra_config key that decide (or "error").
  std::ifstream in(fs::path(QTL_TEST_DATA_DIR) / "rules" / "auto_round_cases.jsonl");
  REQUIRE(in);
  std::string line;
  std::size_t checked = 0;
  while (std::getline(in, line)) {
    ojson const doc = ojson::parse(line);
    qtl::quant_config const cfg = qtl::io::quant_config_from_json(doc);
    for (ojson const& c : doc.at("cases")) {
      std::string const module = c[0].get<std::string>();
      qtl::layer_kind const kind = c[1] == "moe"       ? qtl::layer_kind::moe
                                   : c[1] == "lm_head" ? qtl::layer_kind::lm_head
                                                       : qtl::layer_kind::linear;
      auto const consumer = qtl::consumer_from_name(c[2].get<std::string>());
      REQUIRE(consumer);
      qtl::decision const d = qtl::decide(cfg, *consumer, module, kind);
      INFO(line << "\n" << qtl::to_json(d));
      ojson const& want = c[3];
      ++checked;
      if (want.is_string()) {
        CHECK(d.error);
        continue;
      }
      CHECK_FALSE(d.error);
      std::int64_t const bits = want["bits"].get<std::int64_t>();
      CHECK(d.skipped == (bits >= 16));
      if (bits < 16) {
        CHECK(d.bits == bits);
        CHECK(d.group_size == want["group_size"].get<std::int64_t>());
        CHECK(d.sym == want["sym"].get<bool>());
      }
      if (want["rule"].is_null()) {
        CHECK_FALSE(d.rule);
      } else {
        CHECK(d.rule == want["rule"].get<std::string>());
      }
    }
  }
  CHECK(checked > 2000);
}
