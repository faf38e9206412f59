// Unit tests of qtl/match/glob.hpp (against CPython's fnmatch.fnmatchcase, from the committed
// corpus) and qtl/match/module_path.hpp (against sglang's _module_path_match re-stated).
#include <qtl/match/glob.hpp>
#include <qtl/match/module_path.hpp>
#include <qtl/match/regex.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <iterator>
#include <optional>
#include <random>
#include <string_view>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "test_data.hpp"


namespace {

// The reference, written as sglang writes it.
bool reference_module_path_match(std::string ignored, std::string prefix) {
  while (!ignored.empty() && ignored.back() == '.') ignored.pop_back();
  while (!prefix.empty() && prefix.back() == '.') prefix.pop_back();
  if (ignored == prefix) return true;
  if (prefix.rfind(ignored + ".", 0) == 0) return true;
  return ("." + prefix + ".").find("." + ignored + ".") != std::string::npos;
}

}  // namespace

TEST_CASE("glob_match agrees with CPython fnmatch.fnmatchcase on the committed corpus", "[glob]") {
  std::ifstream in(std::string(QTL_TEST_DATA_DIR) + "/regex/corpus.txt");
  REQUIRE(in.good());
  std::vector<std::string> texts;
  std::string line;
  std::size_t globs = 0, checks = 0, matches = 0, bad = 0;
  while (std::getline(in, line)) {
    qtl_test::corpus_line const cl = qtl_test::parse_corpus_line(line);
    std::string const& kind = cl.kind;
    std::istringstream ls(cl.rest);
    if (kind == "text") {
      texts.push_back(cl.text);
    } else if (kind == "glob") {
      std::string const g = cl.text;
      ++globs;
      std::string r;
      while (ls >> r) {
        auto const eq = r.find('=');
        std::string const& t = texts.at(std::stoul(r.substr(0, eq)));
        bool const expect = r[eq + 1] == '1';
        ++checks;
        matches += expect ? 1 : 0;
        if (qtl::glob_match(g, t) != expect && ++bad <= 20) {
          std::printf("disagreement: glob %s text \"%s\" (CPython %d)\n", g.c_str(), t.c_str(), int(expect));
        }
      }
    }
  }
  CHECK(bad == 0);
  CHECK(globs >= 1000);
  CHECK(matches > 1000);  // the corpus exercises matches, not only mismatches
  std::printf("glob corpus: %zu globs, %zu checks, %zu matches\n", globs, checks, matches);
}

TEST_CASE("glob_match keeps CPython's class quirks and the ModelOpt forms", "[glob]") {
  // forms seen in ModelOpt / gpt-oss / Quark configs
  CHECK(qtl::glob_match("model.layers.*.self_attn", "model.layers.3.self_attn"));
  CHECK(qtl::glob_match("*.attn.*", "layers.0.attn.wq_a"));
  CHECK(qtl::glob_match("lm_head*", "lm_head"));
  CHECK(qtl::glob_match("layers.61*", "layers.61.ffn.experts.0.w1"));
  CHECK_FALSE(qtl::glob_match("layers.6*.x", "layers.6.y"));
  CHECK(qtl::glob_match("*", ""));
  CHECK_FALSE(qtl::glob_match("?", ""));
  CHECK(qtl::glob_match("a*b*c", "a\nb\nc"));  // '*' crosses newlines (DOTALL)
  CHECK(qtl::glob_match("a?c", "a\nc"));
  // classes
  CHECK(qtl::glob_match("[]]", "]"));
  CHECK(qtl::glob_match("[!]]", "a"));
  CHECK_FALSE(qtl::glob_match("[!]]", "]"));
  CHECK(qtl::glob_match("[a-c]x", "bx"));
  CHECK(qtl::glob_match("[\\]", "\\"));        // backslash is an ordinary member
  CHECK(qtl::glob_match("[a-]", "-"));
  CHECK(qtl::glob_match("[", "["));             // unterminated: a literal '['
  CHECK(qtl::glob_match("[a", "[a"));
  CHECK_FALSE(qtl::glob_match("[z-a]", "m"));   // reversed range: dropped, nothing left
  CHECK(qtl::glob_match("[!z-a]", "m"));        // ... negated: any character
  CHECK(qtl::glob_match("[z-a!b]", "x"));       // CPython: "[^b]"
  CHECK_FALSE(qtl::glob_match("[z-a!b]", "b"));
  CHECK(qtl::glob_match("[a-c-e]", "-"));       // "a-c" then a literal '-' and 'e'
  CHECK_FALSE(qtl::glob_match("[a-c-e]", "d"));
  CHECK(qtl::glob_match("[^a]", "^"));
  CHECK(qtl::glob_match("[&~|]", "~"));
}

TEST_CASE("glob_match rejects what it cannot represent", "[glob]") {
  CHECK_THROWS_AS(qtl::glob_match("[\xc3\xa9]", "x"), qtl::regex_error);
  CHECK_THROWS_AS(qtl::glob_match("[" + std::string(300, 'a') + "]", "a"), qtl::value_error);
}

TEST_CASE("module_path_match is sglang's _module_path_match", "[module_path]") {
  // docs/spec/semantics.md §4.1 examples
  CHECK_FALSE(qtl::module_path_match("mlp.gate", "model.layers.0.mlp.gate_up_proj"));
  CHECK(qtl::module_path_match("mlp.gate", "model.layers.0.mlp.gate"));
  CHECK_FALSE(qtl::module_path_match("model.layers.1", "model.layers.10.mlp"));
  CHECK(qtl::module_path_match("layers.1.mlp", "model.layers.1.mlp.down_proj"));
  CHECK(qtl::module_path_match("q_proj.", "a.q_proj"));
  CHECK_FALSE(qtl::module_path_match(".mlp", "a.mlp"));
  CHECK_FALSE(qtl::module_path_match("", "a.b"));
  CHECK(qtl::module_path_match("", ""));
  CHECK(qtl::module_path_match("lm_head", "lm_head"));
  CHECK(qtl::module_path_match("model.layers.34.", "model.layers.34.mlp.experts"));  // sglang#26287
  CHECK(qtl::module_path_match("layers.0.mlp.gate", "model.mtp.layers.0.mlp.gate"));  // nested
  // exhaustive over short strings of '.', 'a', 'b' against the reference
  std::vector<std::string> words{""};
  for (int len = 1; len <= 5; ++len) {
    std::vector<std::string> next;
    for (auto const& w : words) {
      if (w.size() + 1 == static_cast<std::size_t>(len)) {
        for (char c : std::string(".ab")) {
          next.push_back(w + c);
        }
      }
    }
    words.insert(words.end(), next.begin(), next.end());
  }
  std::size_t checked = 0;
  for (auto const& ignored : words) {
    for (auto const& prefix : words) {
      if (qtl::module_path_match(ignored, prefix) != reference_module_path_match(ignored, prefix)) {
        FAIL("module_path_match(\"" << ignored << "\", \"" << prefix << "\")");
      }
      ++checked;
    }
  }
  CHECK(checked == words.size() * words.size());
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
