#pragma once
// The table of `qtl op` operations. Each op is a small adapter between a safetensors file and one
// library function; the normative contract (names, dtypes, flags) is test/data/golden/README.md.
//
// An op adds its flags to its CLI11 subcommand in `define` and returns the function that runs it
// once the command line is parsed; that function reads its inputs from `op_io`, calls the library
// and emits the outputs, which `qtl op` then writes atomically.

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

#include "common.hpp"

namespace qtl::tool {

using op_runner = std::function<void(op_io&)>;

struct op_spec {
  char const* name;
  char const* help;
  std::function<op_runner(CLI::App&)> define;
};

// One function per group of library headers, each in its own translation unit (ops_*.cpp).
std::vector<op_spec> pack_ops();        // qtl/pack.hpp
std::vector<op_spec> quantize_ops();    // qtl/quantize.hpp
std::vector<op_spec> fp8_ops();         // qtl/fp8.hpp, qtl/fp4.hpp
std::vector<op_spec> layout_ops();      // qtl/blockscale.hpp, qtl/moe.hpp
std::vector<op_spec> marlin_ops();      // qtl/marlin.hpp
std::vector<op_spec> convert_ops();     // qtl/convert.hpp

/// Every op, in the order `qtl op --help` lists them.
inline std::vector<op_spec> all_ops() {
  std::vector<op_spec> all;
  for (auto const& group : {pack_ops(), quantize_ops(), fp8_ops(), layout_ops(), marlin_ops(), convert_ops()}) {
    all.insert(all.end(), group.begin(), group.end());
  }
  return all;
}

}  // namespace qtl::tool
