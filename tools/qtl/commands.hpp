#pragma once
// The subcommands of `qtl` beyond `inspect` and `op`: `quantize`, `explain`, `lint` and
// `demo`. Each adds its CLI11 subcommand and flags to the app in `define_*` and returns the
// function that runs it once the line is parsed; that function returns the exit code.
//
// Exit codes: those of common.hpp (0, 1, 2), plus `lint`'s 3 (it found a problem).

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace qtl::tool {

/// `qtl lint` found a problem in the config.
inline constexpr int exit_lint = 3;

struct command {
  CLI::App* cmd;
  std::function<int()> run;
};

command define_quantize(CLI::App& app);  // quantize_cmd.cpp
command define_explain(CLI::App& app);   // explain.cpp
command define_lint(CLI::App& app);      // lint.cpp
command define_demo(CLI::App& app);      // demo.cpp
command define_convert(CLI::App& app);   // convert_cmd.cpp

/// Every subcommand of this header, in `qtl --help` order.
inline std::vector<command> define_commands(CLI::App& app) {
  return {define_quantize(app), define_convert(app), define_explain(app), define_lint(app), define_demo(app)};
}

}  // namespace qtl::tool
