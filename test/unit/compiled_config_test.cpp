// qtl::decide(compiled_config, ...) against qtl::decide(quant_config, ...), the reference loops, for
// every consumer on random configs and names (the indexes inside: skip_index_test.cpp,
// dialect_index_test.cpp).
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

namespace {

using qtl_test::generator;
using qtl_test::pieces;
using qtl_test::strings;

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

}  // namespace
