// qtl::regex_set (first match wins, split over several combined DFAs) against the same patterns
// compiled one by one with qtl::regex.
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

#include <qtl/match/regex.hpp>
#include <qtl/match/regex_set.hpp>
#include "thin.hpp"

namespace {

using strings = std::vector<std::string>;

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
  for (int t = 0; t != qtl_test::rounds(3000); ++t) {
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
  CHECK(matched > static_cast<std::size_t>(qtl_test::rounds(3000) / 30));  // a fair share of the texts match something
}

}  // namespace
