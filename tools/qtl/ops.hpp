#pragma once
// The table of `qtl op` operations. Each op is a small adapter between a safetensors file and one
// library function; the normative contract (names, dtypes, flags) is test/data/golden/README.md.
//
// An op adds its flags to its CLI11 subcommand in `define` and returns the function that runs it
// once the command line is parsed; that function reads its inputs from `op_io`, calls the library
// and emits the outputs, which `qtl op` then writes atomically.

#include <charconv>
#include <cstdint>
#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "common.hpp"
#include "int_flags.hpp"

namespace qtl::tool {

/// Prints "qtl: warning: <what>" on stderr: an input the op takes as the reference kernel does
/// (QTL is bit-exact with it on purpose) with a result the caller may not expect.
inline void warn(std::string const& what) { std::cerr << "qtl: warning: " << what << "\n"; }

/// `v` in the fewest digits that read back as it ("0.5", "-1", "nan", "inf"), for messages.
inline std::string float_text(double v) {
  char buf[32];
  auto const r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

/// The largest block edge `--block-size` takes: a block larger than that is no block.
inline constexpr std::int64_t max_block_edge = std::int64_t{1} << 20;

/// `--block-size BN,BK`: two integers from 1 to `max_block_edge`.
/// @throws usage_error naming the flag and what is wrong
inline std::pair<std::int64_t, std::int64_t> parse_block_size(std::string const& text) {
  auto const bs = parse_int_list("--block-size", text);
  if (bs.size() != 2 || bs[0] == 0 || bs[1] == 0) {
    throw usage_error("--block-size " + text + ": expected two positive integers BN,BK");
  }
  for (std::int64_t const v : bs) {
    if (v > max_block_edge) {
      throw usage_error("--block-size " + text + ": " + std::to_string(v) + " is too large (a block edge is at most " +
                        std::to_string(max_block_edge) + ")");
    }
  }
  return {bs[0], bs[1]};
}

/// Checks `--logical-widths` `text` (parsed into `lw`, the rows of each shard) against `max_rows`
/// rows in all (`bound` says what that bound is), summing without overflow. @throws data_error
inline void check_logical_widths(std::vector<std::int64_t> const& lw, std::string const& text, std::int64_t max_rows,
                                 std::string const& bound) {
  std::int64_t total = 0;
  for (std::int64_t const w : lw) {
    if (w > max_rows - total) {  // no overflow: total <= max_rows
      throw data_error("--logical-widths " + text + ": more than " + std::to_string(max_rows) + " rows in all (" +
                       bound + ")");
    }
    total += w;
  }
}

using op_runner = std::function<void(op_io&)>;

struct op_spec {
  std::string name;
  std::string help;
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
