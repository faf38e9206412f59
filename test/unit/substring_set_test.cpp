// qtl::substring_set (Aho-Corasick) against the `e in text` loops: the first entry in a text
// (case-folded too), the first entry that is not the text itself, and every entry that occurs.
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

#include <qtl/match/substring_set.hpp>

namespace {

using strings = std::vector<std::string>;

/// A word of at most `max` letters of `alphabet`.
std::string random_word(std::mt19937_64& rng, std::size_t max, std::string_view alphabet) {
  std::string w;
  for (std::size_t i = 0, n = rng() % (max + 1); i != n; ++i) {
    w += alphabet[rng() % alphabet.size()];
  }
  return w;
}

/// Up to `max_count` words of at most 3 letters of "ab.", repeats and empty words included.
strings random_entries(std::mt19937_64& rng, std::size_t max_count) {
  strings entries;
  for (std::size_t i = 0, n = rng() % max_count; i != n; ++i) {
    entries.push_back(random_word(rng, 3, "ab."));
  }
  return entries;
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
  auto word = [&](std::size_t max) { return random_word(rng, max, "abAB."); };
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
          c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;  // ASCII only, as the set folds
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

TEST_CASE("substring_set::first_proper_in skips only the entry equal to the text", "[match]") {
  qtl::substring_set const s(strings{"model.x", "x", "", "model.x"});
  CHECK(s.first_proper_in("model.x") == 1);
  CHECK(s.first_proper_in("model.xy") == 0);
  CHECK(s.first_proper_in("") == -1);
  CHECK(qtl::substring_set(strings{"ab"}).first_proper_in("ab") == -1);
  std::mt19937_64 rng(19);
  for (int round = 0; round != 400; ++round) {
    strings const entries = random_entries(rng, 10);
    qtl::substring_set const set(entries);
    for (int t = 0; t != 20; ++t) {
      std::string const text = random_word(rng, 4, "ab.");
      int expect = -1;
      for (std::size_t i = 0; i != entries.size() && expect < 0; ++i) {
        expect = entries[i] != text && text.find(entries[i]) != std::string::npos ? static_cast<int>(i) : -1;
      }
      INFO("text '" << text << "'");
      CHECK(set.first_proper_in(text) == expect);
    }
  }
}

TEST_CASE("substring_set::each_in reports every occurring entry", "[match]") {
  std::mt19937_64 rng(31);
  for (int round = 0; round != 400; ++round) {
    strings const entries = random_entries(rng, 10);
    qtl::substring_set const set(entries);
    std::string const text = random_word(rng, 7, "ab.");
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

}  // namespace
