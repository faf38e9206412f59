// qtl/rules/skip_index.hpp against the reference loops on random lists and names: skip_list_index
// answers as linear_skip_finder, fused_index as the packed-modules mapping scan.
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

#include <qtl/rules/skip.hpp>
#include <qtl/rules/skip_index.hpp>

#include "rule_generator.hpp"

namespace {

using qtl_test::generator;
using qtl_test::pieces;
using qtl_test::strings;

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

}  // namespace
