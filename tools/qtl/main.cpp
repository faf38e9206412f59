// qtl: the command-line tool of the Quantization Template Library.
//
//   qtl inspect FILE...                         tensors, dtypes, shapes, metadata, scheme
//   qtl op NAME [FLAGS] IN.safetensors OUT.safetensors
//                                               one library operation on a file's tensors
//   qtl quantize | explain | lint | demo        whole checkpoints and configs (commands.hpp)
//
// Exit codes: 0 success, 1 command line, 2 files and data, 3 lint found problems (see common.hpp).

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "inspect.hpp"
#include "ops.hpp"

namespace {

constexpr char const* version = "qtl 0.1.0";

}  // namespace

int main(int argc, char** argv) {
  using namespace qtl::tool;
  CLI::App app{"qtl: quantize, repack and inspect safetensors checkpoints (QTL, the Quantization "
               "Template Library).\nExit codes: 0 success, 1 command-line error, 2 file or data "
               "error, 3 qtl lint found problems.",
               "qtl"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version);

  // qtl inspect ---------------------------------------------------------------------------------
  auto* inspect_cmd = app.add_subcommand(
      "inspect", "list tensors, dtypes, shapes, bytes, metadata and the quantization scheme "
                 "(GPTQ, AWQ, FP8, NVFP4, MXFP4 naming) of safetensors files");
  std::vector<std::string> inspect_paths;
  bool inspect_json = false;
  inspect_cmd
      ->add_option("FILE", inspect_paths,
                   "a .safetensors file, a *.safetensors.index.json, or a folder holding one")
      ->required();
  inspect_cmd->add_flag("--json", inspect_json, "print JSON instead of a table");
  std::string inspect_assume;
  inspect_cmd->add_option("--assume", inspect_assume, "read the tensors as a layout their shapes do not name: marlin")
      ->check(CLI::IsMember({"marlin"}));

  // qtl op NAME -----------------------------------------------------------------------------------
  auto* op_cmd = app.add_subcommand(
      "op", "apply one library operation to the tensors of IN and write the results to OUT "
            "(the contract of each op: test/data/golden/README.md)");
  op_cmd->require_subcommand(1);
  std::string in_path, out_path;
  struct registered {
    CLI::App* cmd;
    op_runner run;
    std::string name;
  };
  std::vector<registered> ops;
  for (auto const& spec : all_ops()) {
    auto* cmd = op_cmd->add_subcommand(spec.name, spec.help);
    op_runner run = spec.define(*cmd);
    cmd->add_option("IN", in_path, "input .safetensors file")->required();
    cmd->add_option("OUT", out_path,
                    "output .safetensors file (written to a temporary file, then renamed)")
        ->required();
    ops.push_back({cmd, std::move(run), spec.name});
  }

  // qtl quantize / explain / lint / demo ------------------------------------------------------
  std::vector<command> const commands = define_commands(app);

  // CLI11 would report an unknown subcommand or op as "A subcommand is required"; name it instead.
  if (argc >= 2 && argv[1][0] != '-' && std::string_view(argv[1]) != "op" &&
      std::string_view(argv[1]) != "inspect" &&
      std::none_of(commands.begin(), commands.end(),
                   [&](command const& c) { return c.cmd->get_name() == argv[1]; })) {
    std::cerr << "qtl: error: unknown subcommand '" << argv[1] << "'; `qtl --help` lists them\n";
    return exit_usage;
  }
  // Likewise an unknown op as "A subcommand is required"; name it instead.
  if (argc >= 3 && std::string_view(argv[1]) == "op" && argv[2][0] != '-') {
    bool known = false;
    for (auto const& op : ops) {
      known = known || op.name == argv[2];
    }
    if (!known) {
      std::cerr << "qtl: error: unknown op '" << argv[2] << "'; `qtl op --help` lists the ops\n";
      return exit_usage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (CLI::ParseError const& e) {
    // --help and --version exit 0; every parse error of CLI11's is a command-line error.
    return app.exit(e) == 0 ? exit_ok : exit_usage;
  }

  try {
    if (inspect_cmd->parsed()) {
      inspect(inspect_paths, inspect_json, std::cout, inspect_assume);
      return exit_ok;
    }
    for (auto const& c : commands) {
      if (c.cmd->parsed()) {
        return c.run();
      }
    }
    for (auto const& op : ops) {
      if (op.cmd->parsed()) {
        op_io io(op.name, in_path, out_path);
        op.run(io);
        io.write();
        return exit_ok;
      }
    }
    std::cerr << "qtl: error: no operation given\n";
    return exit_usage;
  } catch (usage_error const& e) {  // messages are escaped: they may quote the files' text
    std::cerr << "qtl: error: " << shown(e.what(), shown_line_limit) << "\nRun with --help for more information.\n";
    return exit_usage;
  } catch (std::exception const& e) {  // qtl::error and its subclasses, std::bad_alloc, ...
    std::cerr << "qtl: error: " << shown(e.what(), shown_line_limit) << "\n";
    return exit_data;
  }
}
