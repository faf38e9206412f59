// The fast paths of the rules against the reference loops, on random configs and names:
// qtl::decide(compiled_config, ...) against qtl::decide(quant_config, ...) for every consumer,
// skip_list_index against linear_skip_finder, fused_index against the mapping scan,
// substring_set against the `e in text` loop, and regex_set (split into several combined DFAs)
// against patterns compiled one by one; the dialect indexes (qtl/rules/dialect_index.hpp) on
// hand-worked adversarial lists (invalid patterns after and before matching ones, wrapped forms
// that compile where the pattern does not), and glob_to_regex against glob_match.
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

#include <qtl/match/containing_index.hpp>
#include <qtl/match/glob.hpp>
#include <qtl/match/regex.hpp>
#include <qtl/match/regex_set.hpp>
#include <qtl/match/substring_set.hpp>
#include <qtl/rules/compiled_config.hpp>
#include <qtl/rules/consumers.hpp>
#include <qtl/rules/skip.hpp>
#include <qtl/rules/skip_index.hpp>

namespace {

using strings = std::vector<std::string>;

/// Module-name pieces that the consumers' rules treat specially (fused and shard names,
/// "experts", "language_model.", vision prefixes, case, empty components).
constexpr std::string_view pieces[] = {
    "model",     "layers",  "0",         "1",         "12",      "mlp",          "experts",     "3",
    "gate_proj", "up_proj", "gate_up_proj", "down_proj", "qkv_proj", "q_proj",    "k_proj",      "v_proj",
    "self_attn", "lm_head", "embed_tokens", "language_model", "vision_tower", "Gate", "q_a_proj", "",
    "w1",        "w13",     "o_proj",    "norm",
};

struct generator {
  std::mt19937_64 rng;

  std::size_t below(std::size_t n) { return static_cast<std::size_t>(rng() % n); }
  bool chance(int percent) { return below(100) < static_cast<std::size_t>(percent); }

  std::string name() {
    std::string out;
    std::size_t const k = 1 + below(6);
    for (std::size_t i = 0; i != k; ++i) {
      out += (i ? "." : "") + std::string(pieces[below(std::size(pieces))]);
    }
    if (chance(5)) {
      out += ".";
    }
    return out;
  }

  /// A glob or pattern-ish entry: wildcards, classes, regex metacharacters, an invalid regex.
  std::string pattern_entry(strings const& names) {
    std::string n = names[below(names.size())];
    constexpr std::string_view specials[] = {"*", "?", "[0-9]", "[!a-m]", "[", "]", "(", ")", "\\", "$", "^",
                                             "+", "|", ".*", "[]x]", "[z-a]", "\n", "\x80", "{2}", "(?!0)"};
    for (std::size_t k = 0, m = 1 + below(3); k != m; ++k) {
      std::size_t const at = below(n.size() + 1);
      std::string_view const sp = specials[below(std::size(specials))];
      if (chance(50)) {
        n.insert(at, sp);
      } else {
        n.replace(at, std::min<std::size_t>(sp.size(), n.size() - at), sp);
      }
    }
    return chance(20) ? "re:" + n : n;
  }

  /// A skip-list entry: a whole name, a run of components, a fragment of one, a `re:` entry.
  std::string entry(strings const& names) {
    std::string const n = names[below(names.size())];
    if (chance(25)) {
      return pattern_entry(names);
    }
    switch (below(6)) {
      case 0: return n;
      case 1: {
        std::size_t const dot = n.find('.');
        return dot == std::string::npos ? n : n.substr(dot + 1);
      }
      case 2: return n.substr(0, below(n.size() + 1));
      case 3: return n.substr(below(n.size() + 1));
      case 4: return "re:" + std::string(chance(50) ? ".*" : "") + std::string(pieces[below(std::size(pieces))]);
      default: return std::string(pieces[below(std::size(pieces))]);
    }
  }

  /// A GPTQ `dynamic` key.
  std::string dynamic_key(strings const& names) {
    std::string const sign = chance(30) ? "-:" : (chance(50) ? "+:" : "");
    std::string const piece(pieces[below(std::size(pieces))]);
    switch (below(8)) {
      case 0: return sign + "model\\.layers\\." + std::to_string(below(13)) + "\\..*";
      case 1: return sign + ".*" + piece + ".*";
      case 2: return sign + ".*\\." + std::to_string(below(13)) + "\\..*" + piece;
      case 3: return sign + "(?!.*" + piece + ")model.*";  // lookahead: off the combined DFA
      case 4: return sign + piece + "$";
      case 5: return sign + names[below(names.size())];
      case 6: return chance(10) ? sign + "(" : sign + "model\\.(layers|norm)\\.\\d+";  // a bad pattern now and then
      default: return sign + piece + "|" + ".*proj\\b";
    }
  }

  qtl::quant_config config(strings const& names) {
    qtl::quant_config cfg;
    constexpr qtl::quant_family families[] = {qtl::quant_family::gptq, qtl::quant_family::awq,
                                              qtl::quant_family::fp8,  qtl::quant_family::mxfp4,
                                              qtl::quant_family::modelopt, qtl::quant_family::compressed_tensors,
                                              qtl::quant_family::auto_round};
    cfg.family = families[below(std::size(families))];
    cfg.quant_algo = chance(50) ? "NVFP4" : "FP8";
    std::size_t const n_skip = below(12);
    for (std::size_t i = 0; i != n_skip; ++i) {
      cfg.skip_list.push_back(entry(names));
    }
    std::size_t const n_dyn = below(10);
    for (std::size_t i = 0; i != n_dyn; ++i) {
      qtl::dynamic_rule r{dynamic_key(names), {}};
      if (chance(50)) {
        r.body.bits = qtl::py_value::of_int(chance(50) ? 8 : 4);
      }
      if (chance(10)) {
        r.body.type = qtl::py_type::boolean;
        r.body.self = qtl::py_value::of_bool(false);
      }
      cfg.dynamic.push_back(r);
    }
    std::size_t const n_block = chance(30) ? below(4) : 0;
    for (std::size_t i = 0; i != n_block; ++i) {
      cfg.modules_in_block_to_quantize.push_back(entry(names));
    }
    std::size_t const n_extra = chance(40) ? below(8) : 0;
    for (std::size_t i = 0; i != n_extra; ++i) {
      qtl::extra_config_entry e;
      e.key = chance(50) ? names[below(names.size())] : entry(names);
      if (chance(60)) {
        e.bits = qtl::py_value::of_int(chance(50) ? 16 : 8);
      }
      if (chance(30)) {
        e.group_size = qtl::py_value::of_int(64);
      }
      cfg.extra_config.push_back(e);
    }
    std::size_t const n_blocks = chance(30) ? below(3) : 0;
    for (std::size_t i = 0; i != n_blocks; ++i) {
      std::string const n = names[below(names.size())];
      cfg.block_name_to_quantize.push_back(n.substr(0, below(n.size() + 1)));
    }
    switch (below(4)) {
      case 0: break;
      case 1: cfg.packed_modules_mapping = {{"qkv_proj", {"q_proj", "k_proj", "v_proj"}},
                                            {"gate_up_proj", {"gate_proj", "up_proj"}}};
        break;
      case 2: cfg.packed_modules_mapping = {{"w13", {"w1", "w3"}}, {"qkv_proj", {"q_proj"}}, {"qkv_proj", {"k_proj"}}};
        break;
      default: cfg.packed_modules_mapping = {{"experts", {}}, {"gate_up_proj", {"gate_proj", "up_proj"}}};
    }
    return cfg;
  }
};

}  // namespace

TEST_CASE("decide(compiled_config) equals decide(quant_config) on random configs, every consumer", "[rules]") {
  generator g{std::mt19937_64(20261203)};
  std::size_t checks = 0;
  for (int round = 0; round != 150; ++round) {
    strings names;
    for (int i = 0; i != 30; ++i) {
      names.push_back(g.name());
    }
    qtl::quant_config const cfg = g.config(names);
    qtl::compiled_config const cc(cfg);
    for (std::string const& n : names) {
      for (qtl::consumer const c : qtl::all_consumers) {
        for (qtl::layer_kind const kind : {qtl::infer_layer_kind(n), qtl::layer_kind::moe}) {
          qtl::decision const ref = qtl::decide(cfg, c, n, kind);
          qtl::decision const fast = qtl::decide(cc, c, n, kind);
          ++checks;
          if (to_json(ref) != to_json(fast)) {
            FAIL("round " << round << " consumer " << consumer_name(c) << "\n  reference " << to_json(ref)
                          << "\n  compiled  " << to_json(fast));
          }
        }
      }
    }
  }
  std::printf("compiled_config: %zu decisions compared\n", checks);
}

TEST_CASE("skip_list_index answers as linear_skip_finder; fused_index as the mapping scan", "[rules]") {
  generator g{std::mt19937_64(7)};
  for (int round = 0; round != 200; ++round) {
    strings names;
    for (int i = 0; i != 20; ++i) {
      names.push_back(g.name());
    }
    strings list;
    for (std::size_t i = 0, n = g.below(40); i != n; ++i) {
      list.push_back(g.entry(names));
    }
    if (g.chance(20)) {
      list.push_back(g.chance(50) ? "" : "...");
    }
    qtl::skip_list_index const index(list);
    qtl::linear_skip_finder<strings> const linear{list};
    for (int i = 0; i != 40; ++i) {
      std::string const n = g.chance(80) ? names[g.below(names.size())] : g.entry(names);
      INFO("name '" << n << "'");
      CHECK(index.equal(n) == linear.equal(n));
      CHECK(index.path(n) == linear.path(n));
      CHECK(index.substring(n) == linear.substring(n));
      CHECK(index.experts_superstring(n) == linear.experts_superstring(n));
    }
    qtl::quant_config const cfg = g.config(names);
    qtl::fused_index const fused(cfg.packed_modules_mapping);
    for (std::string_view const p : pieces) {
      CHECK(fused(p) == qtl::detail::find_fused(cfg.packed_modules_mapping, p));
    }
  }
}

TEST_CASE("substring_set::first_in equals the first-entry loop (case-folded too)", "[match]") {
  // hand-worked: entries ending inside others, a repeated entry, the empty entry
  qtl::substring_set const s(strings{"gate_up", "up", "mlp.gate", "up", "lm_head"});
  CHECK(s.first_in("model.layers.0.mlp.gate_up_proj") == 0);
  CHECK(s.first_in("model.layers.0.mlp.up_proj") == 1);
  CHECK(s.first_in("model.layers.0.mlp.gate") == 2);
  CHECK(s.first_in("lm_head") == 4);
  CHECK(s.first_in("") == -1);
  CHECK(qtl::substring_set(strings{"x", ""}).first_in("abc") == 1);
  CHECK(qtl::substring_set(strings{"GATE"}, true).first_in("mlp.gate_proj") == 0);
  CHECK(qtl::substring_set(strings{"GATE"}, false).first_in("mlp.gate_proj") == -1);
  std::mt19937_64 rng(11);
  auto word = [&](std::size_t max) {
    std::string w;
    for (std::size_t i = 0, n = rng() % (max + 1); i != n; ++i) {
      w += "abAB."[rng() % 5];
    }
    return w;
  };
  for (int round = 0; round != 500; ++round) {
    strings entries;
    for (std::size_t i = 0, n = rng() % 12; i != n; ++i) {
      entries.push_back(word(4));
    }
    bool const fold = rng() % 2 == 0;
    qtl::substring_set const set(entries, fold);
    for (int t = 0; t != 20; ++t) {
      std::string const text = word(12);
      auto lower = [](std::string x) {
        for (char& c : x) {
          c = qtl::detail::ascii_lower(c);
        }
        return x;
      };
      int expect = -1;
      for (std::size_t i = 0; i != entries.size() && expect < 0; ++i) {
        bool const hit = fold ? lower(text).find(lower(entries[i])) != std::string::npos
                              : text.find(entries[i]) != std::string::npos;
        expect = hit ? static_cast<int>(i) : -1;
      }
      INFO("text '" << text << "' fold " << fold);
      CHECK(set.first_in(text) == expect);
    }
  }
}

TEST_CASE("containing_index::first_containing equals the first-text loop", "[match]") {
  strings const hand = {"model.layers.0.mlp.experts.3.w1", "model.layers.1.mlp.experts.0.w1", "short"};
  qtl::containing_index const x(hand);
  CHECK(x.first_containing("layers.1.mlp.experts") == 1);
  CHECK(x.first_containing("mlp.experts") == 0);  // shorter than a gram: every text is asked
  CHECK(x.first_containing("layers.2.mlp.experts") == -1);
  CHECK(x.first_containing("") == 0);
  std::mt19937_64 rng(13);
  auto word = [&](std::size_t min, std::size_t max) {
    std::string w;
    for (std::size_t i = 0, n = min + rng() % (max - min + 1); i != n; ++i) {
      w += "ab.1"[rng() % 4];
    }
    return w;
  };
  for (int round = 0; round != 300; ++round) {
    strings texts;
    for (std::size_t i = 0, n = rng() % 20; i != n; ++i) {
      texts.push_back(word(0, 24));
    }
    qtl::containing_index const index(texts);
    for (int t = 0; t != 30; ++t) {
      std::string query = word(0, 12);
      if (!texts.empty() && rng() % 2 == 0) {  // a piece of a text: often found
        std::string const& from = texts[rng() % texts.size()];
        std::size_t const a = rng() % (from.size() + 1);
        query = from.substr(a, rng() % (from.size() - a + 1));
      }
      long expect = -1;
      for (std::size_t i = 0; i != texts.size() && expect < 0; ++i) {
        expect = texts[i].find(query) != std::string::npos ? static_cast<long>(i) : -1;
      }
      INFO("query '" << query << "'");
      CHECK(index.first_containing(query) == expect);
    }
  }
}

TEST_CASE("regex_set split over several combined DFAs equals patterns compiled one by one", "[match]") {
  // Search-like patterns blow up a combined DFA: the set must group them, and answer as the loop.
  strings patterns;
  std::mt19937_64 rng(5);
  for (int i = 0; i != 400; ++i) {
    patterns.push_back(".*" + std::to_string(rng() % 20) + ".*[a-c]" + std::to_string(rng() % 20) + ".*x");
    if (i % 50 == 0) {
      patterns.push_back("(?=.*7)model");  // lookahead, on its own engine
    }
    if (i % 70 == 0) {
      patterns.push_back("layer$");
    }
  }
  qtl::regex_set const set(patterns);
  CHECK(set.combined_groups() > 1);
  std::vector<qtl::regex> one_by_one;
  for (std::string const& p : patterns) {
    one_by_one.emplace_back(p);
  }
  std::size_t matched = 0;
  for (int t = 0; t != 3000; ++t) {
    std::string text;
    for (std::size_t i = 0, n = rng() % 14; i != n; ++i) {
      text += "0123456789abcxmodel\n"[rng() % 20];
    }
    if (t % 10 == 0) {
      text = "model" + text + (t % 20 == 0 ? "layer" : "layer\n");
    }
    int expect = -1;
    for (std::size_t r = 0; r != one_by_one.size() && expect < 0; ++r) {
      expect = one_by_one[r].match(text) ? static_cast<int>(r) : -1;
    }
    matched += expect >= 0 ? 1 : 0;
    INFO("text '" << text << "'");
    CHECK(set.first_match(text) == expect);
  }
  CHECK(matched > 100);
}

namespace {

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

}  // namespace

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

TEST_CASE("glob_to_regex matches exactly what glob_match matches", "[match]") {
  std::mt19937_64 rng(17);
  constexpr std::string_view pieces_of_globs[] = {"a", "b", ".", "*", "?", "[", "]", "!", "-", "^", "\\", "\n",
                                                  "\x80", "[a-b]", "[!a]", "[]a]", "[b-a]", "(", "|", "$"};
  constexpr char text_bytes[] = "ab.-]^!\\\n\x80(|$";
  std::size_t translated = 0;
  for (int round = 0; round != 3000; ++round) {
    std::string glob;
    for (std::size_t i = 0, n = rng() % 7; i != n; ++i) {
      glob += pieces_of_globs[rng() % std::size(pieces_of_globs)];
    }
    std::optional<std::string> const re = qtl::glob_to_regex(glob);
    if (!re) {
      continue;
    }
    ++translated;
    qtl::regex const r(*re);
    for (int t = 0; t != 10; ++t) {
      std::string text;
      for (std::size_t i = 0, n = rng() % 6; i != n; ++i) {
        text += text_bytes[rng() % (sizeof text_bytes - 1)];
      }
      INFO("glob '" << glob << "' regex '" << *re << "' text '" << text << "'");
      CHECK(r.match(text) == qtl::glob_match(glob, text));  // glob_match never throws for these
    }
  }
  CHECK(translated > 1500);
}

TEST_CASE("glob_required_literal: every text the glob matches contains the literal", "[match]") {
  CHECK(qtl::glob_required_literal("*layers.3.self_attn*[0-9]") == "layers.3.self_attn");
  CHECK(qtl::glob_required_literal("*.up_proj") == ".up_proj");
  CHECK(qtl::glob_required_literal("a?bc*[!x]de") == "bc");
  CHECK(qtl::glob_required_literal("[unclosed") == "[unclosed");  // an unclosed '[' is a literal
  CHECK(qtl::glob_required_literal("*?*") == "");
  std::mt19937_64 rng(29);
  constexpr std::string_view pieces[] = {"a", "b", ".", "*", "?", "[", "]", "!", "[a-b]", "[!a]", "ab", "ba."};
  constexpr char text_bytes[] = "ab.]![";
  std::size_t matched = 0;
  for (int round = 0; round != 2000; ++round) {
    std::string glob;
    for (std::size_t i = 0, n = rng() % 7; i != n; ++i) {
      glob += pieces[rng() % std::size(pieces)];
    }
    if (!qtl::glob_to_regex(glob)) {
      continue;
    }
    std::string const literal = qtl::glob_required_literal(glob);
    for (int t = 0; t != 20; ++t) {
      std::string text;
      for (std::size_t i = 0, n = rng() % 9; i != n; ++i) {
        text += text_bytes[rng() % (sizeof text_bytes - 1)];
      }
      if (qtl::glob_match(glob, text)) {
        ++matched;
        INFO("glob '" << glob << "' literal '" << literal << "' text '" << text << "'");
        CHECK(text.find(literal) != std::string::npos);
      }
    }
  }
  CHECK(matched > 500);
}

TEST_CASE("substring_set::first_proper_in skips only the entry equal to the text", "[match]") {
  qtl::substring_set const s(strings{"model.x", "x", "", "model.x"});
  CHECK(s.first_proper_in("model.x") == 1);
  CHECK(s.first_proper_in("model.xy") == 0);
  CHECK(s.first_proper_in("") == -1);
  CHECK(qtl::substring_set(strings{"ab"}).first_proper_in("ab") == -1);
  std::mt19937_64 rng(19);
  for (int round = 0; round != 400; ++round) {
    strings entries;
    for (std::size_t i = 0, n = rng() % 10; i != n; ++i) {
      std::string w;
      for (std::size_t k = 0, m = rng() % 4; k != m; ++k) {
        w += "ab."[rng() % 3];
      }
      entries.push_back(w);
    }
    qtl::substring_set const set(entries);
    for (int t = 0; t != 20; ++t) {
      std::string text;
      for (std::size_t k = 0, m = rng() % 5; k != m; ++k) {
        text += "ab."[rng() % 3];
      }
      int expect = -1;
      for (std::size_t i = 0; i != entries.size() && expect < 0; ++i) {
        expect = entries[i] != text && text.find(entries[i]) != std::string::npos ? static_cast<int>(i) : -1;
      }
      INFO("text '" << text << "'");
      CHECK(set.first_proper_in(text) == expect);
    }
  }
}

TEST_CASE("dialect indexes on long lists (several combined DFAs) equal the reference", "[rules]") {
  generator g{std::mt19937_64(23)};
  strings names;
  for (int i = 0; i != 25; ++i) {
    names.push_back(g.name());
  }
  for (int round = 0; round != 3; ++round) {
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

TEST_CASE("regex_required_literal: every match contains the literal", "[match]") {
  CHECK(qtl::regex_required_literal(R"(.*layers\.1000\.mlp\.experts\.5\..*)") == "layers.1000.mlp.experts.5.");
  CHECK(qtl::regex_required_literal("ab*cde") == "cde");   // b is optional: "a", then "cde"
  CHECK(qtl::regex_required_literal("abc+d") == "abc");    // c repeats: "abc", then "d"
  CHECK(qtl::regex_required_literal("a|bcd").empty());     // alternation at the top
  CHECK(qtl::regex_required_literal(R"(\x41bcd)").empty());  // an escape the scan does not read
  CHECK(qtl::regex_required_literal("x{2}yz").empty());
  CHECK(qtl::regex_required_literal("(gate|up)_proj[0-9]") == "_proj");
  std::mt19937_64 rng(29);
  constexpr std::string_view atoms[] = {"a", "b", "ab", ".", "*", "+", "?", "(a|b)", "[ab]", "[^a]", "\\.",
                                        "\\d", "$", "^", "(?!a)", "a*?", "\\b", "(ab)+", "[]a]", "\\\\"};
  std::size_t with_literal = 0;
  for (int round = 0; round != 1000; ++round) {
    std::string p;
    for (std::size_t i = 0, n = 1 + rng() % 6; i != n; ++i) {
      p += atoms[rng() % std::size(atoms)];
    }
    try {
      qtl::check_regex(p);
    } catch (qtl::regex_error const&) {
      continue;
    } catch (qtl::regex_unsupported_error const&) {  // "(ab)++": possessive
      continue;
    }
    std::string const lit = qtl::regex_required_literal(p);
    if (lit.empty()) {
      continue;
    }
    ++with_literal;
    qtl::regex const r(p);
    for (int t = 0; t != 10; ++t) {
      std::string text;
      for (std::size_t i = 0, n = rng() % 8; i != n; ++i) {
        text += "ab.1\\"[rng() % 5];
      }
      if (r.search(text)) {
        INFO("pattern '" << p << "' literal '" << lit << "' text '" << text << "'");
        CHECK(text.find(lit) != std::string::npos);
      }
    }
  }
  CHECK(with_literal > 150);
}

TEST_CASE("substring_set::each_in reports every occurring entry", "[match]") {
  std::mt19937_64 rng(31);
  for (int round = 0; round != 400; ++round) {
    strings entries;
    for (std::size_t i = 0, n = rng() % 10; i != n; ++i) {
      std::string w;
      for (std::size_t k = 0, m = rng() % 4; k != m; ++k) {
        w += "ab."[rng() % 3];
      }
      entries.push_back(w);
    }
    qtl::substring_set const set(entries);
    std::string text;
    for (std::size_t k = 0, m = rng() % 8; k != m; ++k) {
      text += "ab."[rng() % 3];
    }
    std::vector<int> seen;
    set.each_in(text, [&](int i) { seen.push_back(i); });
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    std::vector<int> expect;
    for (std::size_t i = 0; i != entries.size(); ++i) {
      bool first_of_its_text = std::find(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(i),
                                         entries[i]) == entries.begin() + static_cast<std::ptrdiff_t>(i);
      if (first_of_its_text && text.find(entries[i]) != std::string::npos) {
        expect.push_back(static_cast<int>(i));
      }
    }
    INFO("text '" << text << "'");
    CHECK(seen == expect);
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
