#pragma once
// Checked flags of the qtl tool: a CLI11 check with a short message. Integers: CLI11's own Range
// says "not in range" for a value that is not a number at all, and PositiveNumber prints its upper
// bound, the largest double, with all its 309 digits. Names: one of a family's list (qtl/type_list.hpp).

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>
#include <qtl/type_list.hpp>

namespace qtl::tool {

/// A check that a flag's value is a decimal integer in [lo, hi]: "abc is not an integer", "-2 is not
/// a positive integer", "5000 is not an integer from 0 to 4096" (CLI11 puts the flag's name in
/// front).
inline CLI::Validator integer_in(std::int64_t lo, std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
  bool const unbounded = hi == std::numeric_limits<std::int64_t>::max();
  std::string const range = unbounded ? lo == 1 ? "a positive integer" : lo == 0 ? "a non-negative integer"
                                                                               : "an integer from " + std::to_string(lo)
                                      : "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  // for --help, as CLI11's own checks put it
  std::string const help = unbounded ? lo == 1 ? "POSITIVE" : lo == 0 ? "NONNEGATIVE" : ">= " + std::to_string(lo)
                                     : "in [" + std::to_string(lo) + " - " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        std::int64_t v = 0;
        auto const [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        bool const whole = end == s.data() + s.size();
        if (ec == std::errc::result_out_of_range && whole) {
          return s + " is out of range: expected " + range;
        }
        if (ec != std::errc() || !whole) {
          return s + " is not an integer";
        }
        return v < lo || v > hi ? s + " is not " + range : std::string();
      },
      help);
}

/// A check that a flag's value names a type of `List` ('-' and '_' alike, as qtl::dispatch_name
/// takes it): "--recipe: 'x' is not one of {sglang, sglang-legacy, vllm}".
template <class List>
CLI::Validator one_of_names() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return qtl::has_name<List>(s) ? std::string() : "'" + s + "' is not one of " + qtl::names_of<List>();
      },
      qtl::names_of<List>());
}

}  // namespace qtl::tool
