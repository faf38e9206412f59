// qtl::containing_index against the first-text loop: the first of many texts that contains a
// given string.
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

namespace {

using strings = std::vector<std::string>;

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

}  // namespace
