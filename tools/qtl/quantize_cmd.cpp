// qtl quantize: the command line of quantize_checkpoint (lib/checkpoint.hpp, which documents
// what is written; the layouts: lib/quantize.cpp). This file parses the flags, draws the
// progress bar on a terminal and prints the summary.
//
//   qtl quantize IN OUT_DIR --recipe RECIPE.json [--threads N] [--allow-nonfinite] [--allow-empty]
//   qtl quantize IN OUT_DIR --format gptq|fp8|w4a16|w8a16|nvfp4|mxfp4|mxfp8 [--bits 4|8] [--group-size N]
//                [--sym|--asym] [--fp8-scheme tensor|channel|block|ct-block] [--config QUANT_CONFIG.json] [--threads N]
//                [--allow-nonfinite] [--allow-empty] [--keep-expert-stacks]

#include <charconv>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "common.hpp"
#include "int_flags.hpp"
#include "lib/checkpoint.hpp"
#include "lib/checkpoint_job.hpp"
#include "lib/quantize_plan.hpp"

namespace qtl::tool {

namespace {

struct quantize_args {
  quantize_options o;
  std::string in;
  std::string out_dir;
  int bits = 4;
  std::string group_size_text;
  std::string fp8_scheme = "channel";
  std::string config;
  std::string recipe;
  CLI::Option* bits_opt = nullptr;
  CLI::Option* group_opt = nullptr;
  CLI::Option* scheme_opt = nullptr;
};

int run_quantize(quantize_args& a) {
  quantize_options& o = a.o;
  if (a.bits_opt->count() > 0) {
    o.bits = a.bits;
  }
  if (a.group_opt->count() > 0) {
    o.group_size = parse_group_size(a.group_size_text);
  }
  if (a.scheme_opt->count() > 0) {
    o.fp8_scheme = a.fp8_scheme;
  }
  o.config = a.config;
  o.recipe = a.recipe;
  if (o.format.empty() && o.recipe.empty()) {
    throw usage_error("give --format, or --recipe");
  }
  terminal_progress bar;
  quantize_report const r = quantize_checkpoint(a.in, a.out_dir, o, &bar);
  std::ostringstream out;
  out << "qtl quantize: " << a.in << " -> " << a.out_dir << " (" << r.format << ", " << r.variant << ", "
      << r.threads << " thread" << (r.threads == 1 ? "" : "s") << ")\n";
  out << "  " << std::left << std::setw(48) << "layer" << "done\n";
  for (auto const& l : r.layers) {
    out << "  " << std::setw(48) << shown(l.module) << l.scheme << "\n";
  }
  for (auto const& k : r.kept) {
    out << "  " << std::setw(48) << shown(k.module) << "kept: " << shown(k.why) << "\n";
  }
  out << "  " << r.layers.size() << " layers quantized, " << r.kept.size() << " kept, " << r.tensors_copied
      << " tensors copied\n";
  out << "  in " << human_bytes(r.bytes_in) << ", out " << human_bytes(r.bytes_out) << ", " << std::fixed
      << std::setprecision(2) << r.seconds << " s, " << std::setprecision(3)
      << (r.seconds > 0 ? static_cast<double>(r.bytes_in) / r.seconds / 1e9 : 0.0) << " GB/s of input\n";
  std::cout << out.str();
  return exit_ok;
}

}  // namespace

command define_quantize(CLI::App& app) {
  auto a = std::make_shared<quantize_args>();
  auto* cmd = app.add_subcommand(
      "quantize", "round-to-nearest quantization of every linear weight of a checkpoint to GPTQ "
                  "(int4/int8), FP8 or compressed-tensors (W4A16, W8A16, NVFP4A16, MXFP4), in the layout "
                  "sglang, vLLM and transformers load");
  add_checkpoint_paths(cmd, a->in, a->out_dir);
  cmd->add_option("--format", a->o.format,
                  "gptq, fp8, or a compressed-tensors format: w4a16, w8a16 (pack-quantized), nvfp4 (NVFP4A16), "
                  "mxfp4, mxfp8 (or --recipe)")
      ->check(CLI::IsMember(std::vector<std::string>(quantize_formats.begin(), quantize_formats.end())));
  cmd->add_option("--recipe", a->recipe,
                  "a JSON file of ordered groups {targets, format, options} and an ignore list: one "
                  "compressed-tensors checkpoint, each group in its own format (mixed-precision), or with "
                  "\"form\": \"modelopt\" a ModelOpt MIXED_PRECISION one (nvfp4 groups only: W4A16_NVFP4); "
                  "instead of --format and its options (docs/tool.md)");
  a->bits_opt = cmd->add_option("--bits", a->bits, "GPTQ bits: 4 (default) or 8")->check(CLI::IsMember({4, 8}));
  a->group_opt = cmd->add_option("--group-size", a->group_size_text, "GPTQ/w4a16/w8a16 group size (default 128; -1: one group per column)");
  cmd->add_flag("--sym", a->o.sym, "symmetric integer weights, z = 2^(bits-1) (the default; --format gptq, w4a16, w8a16 only: fp8, nvfp4, mxfp4 and mxfp8 are always symmetric)");
  cmd->add_flag("--asym", a->o.asym, "asymmetric integer weights with per-group zero points (--format gptq, w4a16, w8a16 only)");
  a->scheme_opt = cmd->add_option("--fp8-scheme", a->fp8_scheme, "FP8 weight scales: tensor, channel (default), block (128x128, Hugging Face fp8) or "
                                  "ct-block (128x128, compressed-tensors FP8_BLOCK)")
      ->check(CLI::IsMember({"tensor", "channel", "block", "ct-block"}));
  cmd->add_option("--config", a->config,
                  "quantization config whose skip lists and dynamic rules decide the layers "
                  "(as `qtl explain --consumer sglang` shows); its bits, group size and symmetry apply "
                  "where no flag gives them (a flag that contradicts it is refused)");
  cmd->add_option("--threads", a->o.threads, "worker threads (default: every core)")->check(integer_in(0, max_quantize_threads));
  cmd->add_flag("--allow-nonfinite", a->o.allow_nonfinite,
                "quantize weights holding NaN or Inf (refused by default: their scales are not finite)");
  cmd->add_flag("--force", a->o.force, "replace OUT_DIR even when it holds files that are not a checkpoint's");
  cmd->add_flag("--allow-empty", a->o.allow_empty,
                "write the output even when no layer is quantized (refused by default, naming why)");
  cmd->add_flag("--keep-expert-stacks", a->o.keep_expert_stacks,
                "copy unquantized (with a warning, listed in the config's ignore) a 3-D MoE expert stack whose "
                "layout qtl does not know; refused by default. Known stacks (llama4, gpt_oss, the transformers v5 "
                "fused families) are always cut into per-expert weights and quantized");
  return {cmd, [a]() { return run_quantize(*a); }};
}

}  // namespace qtl::tool
