// qtl quantize's work (quantize_checkpoint, checkpoint.hpp): round-to-nearest quantization of
// every linear weight of a checkpoint, written in the layout sglang, vLLM and transformers load
// (docs/spec/checkpoint_formats.md; compressed-tensors: docs/spec/interop.md §3).
//
//   qtl quantize IN OUT_DIR --format gptq|fp8|w4a16|w8a16|nvfp4|mxfp4|mxfp8 [--bits 4|8] [--group-size N]
//                [--sym|--asym] [--fp8-scheme tensor|channel|block|ct-block] [--config QUANT_CONFIG.json]
//                [--threads N] [--allow-nonfinite] [--allow-empty]
//   qtl quantize IN OUT_DIR --recipe RECIPE.json [--threads N] [--allow-nonfinite] [--allow-empty]
//
// --recipe (recipe.hpp): each module by the recipe group compressed-tensors matches it to, written as
// a --format run of that group's format and options writes it (the fused layers' one per-tensor
// scale included, below); modules no group matches are copied and listed in `ignore`; one
// compressed-tensors config group per recipe group ("mixed-precision" when their formats differ).
// Refused: a fused layer (q/k/v, gate/up, an MoE layer's experts) whose shards the recipe gives
// different schemes, and a module vLLM would give another group than compressed-tensors.
//
// Which layers: every 2-D F16/BF16/F32 `.weight` of a linear layer (embeddings and 1-D tensors are
// copied; a linear weight of another dtype is kept and listed), decided by the config's rules as
// `qtl explain --consumer sglang` shows them, on the name the engine sees (q/k/v_proj -> qkv_proj,
// gate/up_proj -> gate_up_proj: shards of a fused layer always share one decision). Without
// --config: every linear layer but lm_head. MoE experts stored per expert
// (`mlp.experts.E.gate_proj.weight`) are linear layers; routers (`mlp.gate`, `router`, ...) are kept.
// Fused 3-D expert stacks (Llama 4 and gpt-oss `experts.gate_up_proj` [E, H, 2I], transformers v5
// [E, 2I, H], and `down_proj`) are cut into per-expert 2-D weights `experts.E.{gate,up,down}_proj`
// [out, in] by the layout of the input's config.json (expert_stacks.hpp), each then decided and
// written as a per-expert weight would be (gpt-oss' bias stacks cut alike and copied); a stack of a
// layout qtl does not know is refused, naming it, unless --keep-expert-stacks copies it (its experts
// module then in `ignore`). A run that would quantize no layer is refused, naming why, unless
// --allow-empty.
//
// The integer formats' bits, group size and symmetry: a flag given, else the --config's value
// (GPTQ bits/group_size/sym; compressed-tensors num_bits/group_size or strategy channel/symmetric),
// else the default (4 bits, group 128, symmetric); a flag that contradicts the config's value is
// refused, and when a --config is given and some value came from elsewhere, each value's source is
// printed.
//
// What is written, per quantized layer L with HF weight W [N, K] (quantized along K):
//   gptq  L.qweight I32 [K*b/32, N]  codes packed along K (pack_rows), element j in bits [b*j, b*j+b)
//         L.qzeros  I32 [G, N*b/32]  zero points packed along N (pack_cols); v1 "gptq" stores z - 1
//                                     (when every z >= 1: always for --sym), else "gptq_v2" stores z
//         L.scales  F16 [G, N]        L.g_idx I32 [K] = k / group_size
//         --sym: codes and scales from qtl::quantize_weights (uint4b8/uint8b128, z = 8/128), bit for
//         bit as the reference; --asym: GPTQ's own quantizer (qtl::gptq_asym_group_params: the range
//         widened to hold 0, s = (max - min) / (2^b - 1), z = rne(-min / s), codes with the F16
//         scale), not the reference's rule, which loses groups of one sign far from 0. Scales cast
//         to F16 (exact for F16 weights; BF16/F32 weights get their scales rounded to F16, as
//         GPTQModel does, and the checkpoint dequantizes with those); a scale that F16 cannot hold
//         (overflow to Inf, or 0 for a group that is not all zero) is refused naming the layer
//         (--format w4a16/w8a16 keep scales in the weight's dtype).
//   fp8   L.weight F8_E4M3 [N, K] and, by scheme,
//         tensor   L.weight_scale F32 [1] (compressed-tensors; [] under an HF "fp8" config) =
//                  amax / 448 (IEEE division), amax of L's fused layer (below)
//         channel  L.weight_scale F32 [N, 1] (compressed-tensors)
//         block    L.weight_scale_inv F32 [ceil(N/128), ceil(K/128)] (HF "fp8"; weight_scale under a
//                  compressed-tensors config); scale = max(amax, 1e-12) / 448 per 128x128 block.
//         ct-block the same blocks as L.weight_scale under a compressed-tensors config (FP8_BLOCK:
//                  weights strategy block [128, 128], inputs group 128 dynamic), with
//                  compressed-tensors' scale amax / 448 (an all-zero block: float32's epsilon).
//         Activations dynamic: no input_scale.
//   w4a16, w8a16 (compressed-tensors pack-quantized, b = 4 or 8, pf = 32 / b)
//         L.weight_packed I32 [N, K/pf]  the codes of each row of W packed along K (pack_cols of the
//                                        [N, K] codes), element j in bits [b*j, b*j+b); code = q + 2^(b-1)
//         L.weight_scale  [N, G] in the weight's dtype (--group-size -1: G = 1, strategy channel)
//         L.weight_shape  I64 [2] = [N, K]
//         L.weight_zero_point I32 [N/pf, G] (--asym only) zero points packed along N (pack_rows)
//         codes, scales and zero points by compressed-tensors' own rule (qtl::ct_int_group_params,
//         ct_int_code: CT 0.20.0's calculate_qparams + quantize in the weight's dtype; symmetric
//         s = amax/7.5 (4-bit) or amax/127.5 (8-bit), asymmetric s = (max - min)/(2^b - 1) with the
//         range widened to 0 and a signed zero point added before rounding), so CT's compressor
//         writes the same bytes. --format gptq keeps the GPTQ reference rule (amax/7).
//   nvfp4 (NVFP4A16) L.weight_packed U8 [N, K/2] (element 2i in the low nibble), L.weight_scale
//         F8_E4M3 [N, K/16] (linear), L.weight_global_scale F32 [1] = 448*6/amax, a divisor, amax
//         of L's fused layer (below), rounded as compressed-tensors computes it
//         (qtl::ct_nvfp4_global_scale: fl(fl(1/amax)*2688), where `qtl op nvfp4-quant` divides
//         once); the block scales from that global scale, qtl::block_quantize<nvfp4> as that op, except
//         that a block scale of 0 (an all-zero block) is written as compressed-tensors' 0.125 and a
//         -0.0 weight as code 0 (compressed-tensors takes the sign from torch.sign).
//   mxfp8 L.weight F8_E4M3 [N, K], L.weight_scale U8 [N, K/32] biased E8M0 exponents, by
//         compressed-tensors' rule (qtl::ct_mxfp8_quantize: the MXFP4 rule below with E4M3's offset,
//         amax rounded to a power of two divided by 2^8; codes e4m3(x / s) saturating).
//   mxfp4 L.weight_packed U8 [N, K/2], L.weight_scale U8 [N, K/32] biased E8M0 exponents:
//         compressed-tensors' producer rule (qtl::ct_mx_scale_code: amax rounded to a power of two,
//         up from a significand of 1.75, divided by 4; docs/spec/interop.md §3.1 d), not the library's MX rule
//         (block_quantize<mxfp4>: the smallest power of two >= amax/6); consumers decode both alike.
//   Fused layers (scale_group_name, quantize_plan.hpp; docs/spec/checkpoint_formats.md §0.5): the
//   engines load q/k/v, gate/up (the config's packed_modules_mapping, else the input config.json's,
//   else qkv_proj/gate_up_proj), each MoE expert's gate/up (gate_proj/up_proj, w1/w3) and DeepSeek's
//   q_a_proj/kv_a_proj_with_mqa as one tensor with ONE per-tensor scale. NVFP4: vLLM's and sglang's
//   linears dequantize every shard with weight_global_scale.max(), their MoE layers with the gate's;
//   a shard quantized with its own global scale would come out scaled by the ratio. FP8 per-tensor:
//   they requantize every shard with the max scale at load (requantize_with_max_scale, through
//   fp16), a second rounding of each shard with a smaller scale. So both write one scale per fused
//   layer, from the max amax over its shards (a first pass reads the amax of every weight of a group
//   of two or more, wherever their files; the block scales and codes follow from it): what
//   llm-compressor writes for NVFP4 (its fused groups take the min of the shards' global scales, the
//   same number, as ct_nvfp4_global_scale decreases with amax), and for FP8 the scale the engine
//   keeps anyway, so that its requantization is an identity (llm-compressor leaves FP8 scales
//   unfused: the engine then rounds those shards twice). transformers, which does not fuse, reads
//   the same scales. No other per-tensor scale is written: activations are dynamic (no input_scale
//   or input_global_scale); channel and group scales concatenate along N unchanged, block scales too
//   where each shard's N is a multiple of 128 (which the engines require of a fused FP8-block
//   layer).
//   The compressed-tensors configs list in `ignore` every linear layer the run kept (and lm_head
//   whenever it is not quantized), so every consumer skips exactly what this run skipped.
// Everything else is copied unchanged; the shards keep their names (a single-file input becomes
// model.safetensors), each shard's tensors ordered by element size (4-, 2-, then 1-byte) so that
// every tensor stays aligned; two output tensors of one name are refused; the index is rewritten;
// config.json gets the `quantization_config` (GPTQ also writes quantize_config.json); the input
// folder's side files are copied (quantize_plan.hpp's `side_file_skip_reason` says which).
//
// Streaming: every output shard is created in a staging folder beside OUT_DIR, its header written
// first (offsets are known from the shapes), then worker threads quantize one tensor at a time (GPTQ
// and pack-quantized in 256-column slices) and write the results at their offsets; input pages are
// released after use, so memory stays at a few tensors (the first pass of NVFP4 and FP8 per-tensor
// over the fused layers' weights reads one tensor per thread and keeps one float per tensor).
// Commit, lock and what a signal or a kill leaves: the folder is swapped in whole
// (staged_output.hpp), so OUT_DIR always holds one complete checkpoint.

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include <qtl/ct_mxfp8.hpp>
#include <qtl/group_size.hpp>

#include "../common.hpp"
#include "../config_tools.hpp"
#include "checkpoint.hpp"
#include "checkpoint_job.hpp"
#include "quant_config_writer.hpp"
#include "quantize_plan.hpp"
#include "recipe.hpp"
#include "tensor_writers.hpp"
#include "worker_pool.hpp"

namespace qtl::tool {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

/// What a run writes.
enum class out_format { gptq, fp8, ct_int, nvfp4, mxfp4, mxfp8 };

/// Rows per group of an integer format's `group_size` along K = `k`: the library's rule
/// (qtl/group_size.hpp), and the engines' stricter one: they need K % group_size == 0 for every
/// size but -1 (vLLM/sglang create_weights), so a size above K, which the rule reads as one group
/// per column, is refused too. @throws data_error naming the tensor
std::int64_t group_rows(std::string const& name, std::int64_t group_size, std::int64_t k) {
  group_size_result const gr = normalize_group_size(group_size, k);
  if (!gr.ok() || (group_size != -1 && k % group_size != 0)) {
    throw data_error(name + ": K = " + std::to_string(k) + " is not a multiple of group_size " +
                     std::to_string(group_size) + " (the engines need K % group_size == 0, or -1)");
  }
  return gr.rows;
}

/// A float type for a dtype the quantizers take.
bool is_float(dtype t) { return t == dtype::F16 || t == dtype::BF16 || t == dtype::F32; }

/// Why a run quantizes no layer: what kept each candidate, grouped (for the error).
std::string empty_run_reasons(qtl::io::safetensors_checkpoint const& ckpt,
                              std::map<std::string, std::string> const& skipped, std::string const& stacks_why) {
  if (ckpt.tensors().empty()) {
    return "the checkpoint has no tensors";
  }
  std::vector<std::string> parts;
  if (!stacks_why.empty()) {
    parts.push_back(stacks_why);
  }
  std::map<std::string, std::vector<std::string>> by_why;
  for (auto const& [module, why] : skipped) {
    by_why[why].push_back(module);
  }
  for (auto const& [why, modules] : by_why) {
    std::size_t const n = modules.size();
    parts.push_back(std::to_string(n) + (n == 1 ? " weight is kept: " : " weights are kept: ") + why + " (" +
                    qtl::io::printable(modules.front()) + (n == 1 ? "" : ", ...") + ")");
  }
  if (parts.empty()) {
    parts.push_back("none of its " + std::to_string(ckpt.tensors().size()) +
                    " tensors is the 2-D `.weight` of a linear layer or a 3-D expert stack");
  }
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    text += (i == 0 ? "" : "; ") + parts[i];
  }
  return text;
}

/// Where the integer formats' parameters came from ("bits 4 (--bits 4)", ...), for the note.
struct param_sources {
  std::vector<std::string> shown;
  bool all_from_config = true;
};

/// One parameter of the integer formats: the flag's value when given, else the --config's, else
/// `fallback`. @throws usage_error when the flag contradicts the config's value, naming both
template <class V>
V merge_param(param_sources& sources, std::string_view field, std::optional<V> flag, std::string const& flag_text,
              std::optional<V> from_config, std::string const& config_text, V fallback) {
  auto const text = [](V v) {
    if constexpr (std::is_same_v<V, bool>) {
      return std::string(v ? "true" : "false");
    } else {
      return std::to_string(v);
    }
  };
  if (flag && from_config && *flag != *from_config) {
    throw usage_error(flag_text + " conflicts with " + config_text + ", whose " + std::string(field) + " is " +
                      text(*from_config) + " (drop one, or give the same value)");
  }
  V const v = flag ? *flag : from_config ? *from_config : fallback;
  std::string const source = flag && from_config ? flag_text + " and " + config_text
                             : flag              ? flag_text
                             : from_config       ? config_text
                                                 : std::string("default");
  sources.all_from_config = sources.all_from_config && from_config.has_value();
  sources.shown.push_back(std::string(field) + " " + text(v) + " (" + source + ")");
  return v;
}

/// The group size of a compressed-tensors config's first scheme: its `group_size`, or -1 for
/// strategy `channel` (whose group_size is null).
std::optional<std::int64_t> ct_config_group_size(quant_config const& cfg, ojson const& qobj) {
  if (cfg.group_size) {
    return cfg.group_size;
  }
  auto const groups = qobj.find("config_groups");
  if (groups == qobj.end() || !groups->is_object() || groups->empty()) {
    return std::nullopt;
  }
  ojson const& first = groups->begin().value();
  auto const w = first.is_object() ? first.find("weights") : first.end();
  if (w != first.end() && w->is_object() && w->value("strategy", ojson()) == "channel") {
    return -1;
  }
  return std::nullopt;
}


/// The run's settings: the format, the FP8 scheme, the config (read, or made from the flags) and
/// the integer formats' parameters (a flag, else the config's value, else the default).
struct settings {
  out_format fmt{};
  bool gptq = false;
  fp8_scheme scheme = fp8_scheme::channel;
  std::string scheme_name;
  bool ct_block = false;  // FP8_BLOCK as compressed-tensors writes it
  std::string config_path;
  quant_config cfg;
  ojson qobj;
  ojson config_document;
  std::int64_t int_bits = 4;
  std::int64_t int_group_size = 128;
  bool int_sym = true;
  bool modelopt = false;  // NVFP4 written in ModelOpt's names (a --recipe in the modelopt form)
};

/// The format of --format, after refusing flags that do not fit it or each other.
/// @throws usage_error naming the flag
out_format checked_format(quantize_options const& a) {
  out_format fmt{};
  if (a.format == "gptq") {
    fmt = out_format::gptq;
  } else if (a.format == "fp8") {
    fmt = out_format::fp8;
  } else if (a.format == "w4a16" || a.format == "w8a16") {
    fmt = out_format::ct_int;
  } else if (a.format == "nvfp4") {
    fmt = out_format::nvfp4;
  } else if (a.format == "mxfp4") {
    fmt = out_format::mxfp4;
  } else if (a.format == "mxfp8") {
    fmt = out_format::mxfp8;
  } else {
    std::string list;
    for (std::string_view f : quantize_formats) {
      list += (list.empty() ? "" : ", ") + std::string(f);
    }
    throw usage_error("--format must be one of " + list);
  }
  if (a.sym && a.asym) {
    throw usage_error("--sym and --asym exclude each other");
  }
  bool const gptq = fmt == out_format::gptq;
  bool const integer = gptq || fmt == out_format::ct_int;  // group size and symmetry apply
  // Flags of another format are mistakes, not silently ignored.
  if (fmt != out_format::fp8 && a.fp8_scheme) {
    throw usage_error("--fp8-scheme applies to --format fp8, not " + a.format);
  }
  if (!gptq && a.bits) {
    throw usage_error("--bits applies to --format gptq, not " + a.format +
                      (fmt == out_format::ct_int ? " (its name gives the bits)" : ""));
  }
  if (!integer) {
    for (auto const& [given, flag] : {std::pair{a.group_size.has_value(), "--group-size"},
                                      std::pair{a.sym, "--sym"}, std::pair{a.asym, "--asym"}}) {
      if (given) {
        throw usage_error(std::string(flag) + " applies to --format gptq, w4a16 or w8a16, not " + a.format +
                          (fmt == out_format::fp8 ? "" : " (its block size and scales are fixed)"));
      }
    }
  }
  if (a.bits && *a.bits != 4 && *a.bits != 8) {
    throw usage_error("--bits " + std::to_string(*a.bits) + ": GPTQ is written with 4 or 8 bits");
  }
  if (a.group_size && *a.group_size != -1 && *a.group_size <= 0) {
    throw usage_error("--group-size " + std::to_string(*a.group_size) +
                      ": expected -1 (one group per column) or a positive integer");
  }
  if (a.threads < 0 || a.threads > max_quantize_threads) {
    throw usage_error("--threads " + std::to_string(a.threads) + ": expected 0 (every core) to " +
                      std::to_string(max_quantize_threads));
  }
  return fmt;
}

/// The --config read and checked against the format, or, without one, the config the flags make.
/// @throws usage_error for a config of another family than the format writes
void read_or_make_config(settings& st, quantize_options const& a) {
  out_format const fmt = st.fmt;
  if (!a.config.empty()) {
    config_file file = read_config_file(a.config);
    st.cfg = std::move(file.config);
    st.qobj = std::move(file.quant_object);
    st.config_document = std::move(file.document);
    quant_config const& cfg = st.cfg;
    std::string const& config_path = st.config_path;
    if (st.gptq && cfg.family != quant_family::gptq) {
      throw usage_error("--config " + config_path + " is a '" + cfg.quant_method + "' config, not GPTQ");
    }
    if (fmt == out_format::fp8 && cfg.family != quant_family::fp8 && cfg.family != quant_family::compressed_tensors) {
      throw usage_error("--config " + config_path + " is a '" + cfg.quant_method +
                        "' config, not fp8 or compressed-tensors");
    }
    if (!st.gptq && fmt != out_format::fp8 && cfg.family != quant_family::compressed_tensors) {
      throw usage_error("--config " + config_path + " is a '" + cfg.quant_method + "' config; --format " +
                        a.format + " is written as compressed-tensors and takes a compressed-tensors config");
    }
    if (fmt == out_format::fp8 && cfg.family == quant_family::fp8 && st.scheme == fp8_scheme::channel) {
      throw usage_error("--fp8-scheme channel is written as compressed-tensors; an HF 'fp8' config "
                        "describes block (weight_block_size) or per-tensor scales");
    }
    if (st.ct_block && cfg.family != quant_family::compressed_tensors) {
      throw usage_error("--fp8-scheme ct-block is written as compressed-tensors; --config " + config_path +
                        " is a '" + cfg.quant_method + "' config");
    }
  } else if (st.gptq) {
    st.cfg.family = quant_family::gptq;
    st.cfg.quant_method = "gptq";
    st.qobj = ojson::object();
  } else {
    bool const hf_fp8 = fmt == out_format::fp8 && st.scheme == fp8_scheme::block && !st.ct_block;
    st.cfg.family = hf_fp8 ? quant_family::fp8 : quant_family::compressed_tensors;
    st.cfg.quant_method = hf_fp8 ? "fp8" : "compressed-tensors";
    st.cfg.skip_list = {"lm_head"};
    st.cfg.skip_list_field = hf_fp8 ? "modules_to_not_convert" : "ignore";
    st.qobj = ojson::object();
  }
}

/// The integer formats' bits, group size and symmetry: a flag given, else the config's value,
/// else the default; when a --config is given and some value came from elsewhere, each value's
/// source is noted. GPTQ's land in the config (it is written back), the others' in `st.int_*`.
void merge_integer_params(settings& st, quantize_options const& a, note_fn const& note) {
  quant_config& cfg = st.cfg;
  bool const from_file = !a.config.empty();
  std::string const config_text = "--config " + st.config_path;
  std::optional<bool> const sym_flag = a.sym    ? std::optional<bool>(true)
                                       : a.asym ? std::optional<bool>(false)
                                                : std::nullopt;
  std::string const sym_text = a.asym ? "--asym" : "--sym";
  std::string const group_text = "--group-size " + std::to_string(a.group_size.value_or(0));
  param_sources sources;
  if (st.gptq) {
    std::optional<std::int64_t> bits_flag;
    if (a.bits) {
      bits_flag = *a.bits;
    }
    cfg.bits = merge_param<std::int64_t>(sources, "bits", bits_flag, "--bits " + std::to_string(a.bits.value_or(0)),
                                         from_file ? cfg.bits : std::nullopt, config_text, 4);
    cfg.group_size = merge_param<std::int64_t>(sources, "group_size", a.group_size, group_text,
                                               from_file ? cfg.group_size : std::nullopt, config_text, 128);
    cfg.sym =
        merge_param<bool>(sources, "sym", sym_flag, sym_text, from_file ? cfg.sym : std::nullopt, config_text, true);
  } else {
    if (from_file && cfg.weight_type && *cfg.weight_type != "int") {
      throw usage_error("--format " + a.format + " writes int weights; " + config_text + " describes '" +
                        *cfg.weight_type + "' weights");
    }
    st.int_bits = merge_param<std::int64_t>(sources, "num_bits", st.int_bits, "--format " + a.format,
                                            from_file ? cfg.bits : std::nullopt, config_text, st.int_bits);
    st.int_group_size =
        merge_param<std::int64_t>(sources, "group_size", a.group_size, group_text,
                                  from_file ? ct_config_group_size(cfg, st.qobj) : std::nullopt, config_text, 128);
    st.int_sym = merge_param<bool>(sources, "symmetric", sym_flag, sym_text, from_file ? cfg.sym : std::nullopt,
                                   config_text, true);
  }
  if (from_file && !sources.all_from_config) {
    std::string line = "qtl quantize:";
    for (std::size_t i = 0; i < sources.shown.size(); ++i) {
      line += (i == 0 ? " " : ", ") + sources.shown[i];
    }
    note(line + "\n");
  }
}

/// The format and parameters the run writes (the layer lists come with the plan).
written_format written_format_for(settings const& st) {
  written_format wf;
  using wkind = written_format::kind;
  wf.what = st.gptq                        ? wkind::gptq
            : st.fmt == out_format::fp8    ? wkind::fp8
            : st.fmt == out_format::ct_int ? wkind::pack_quantized
            : st.fmt == out_format::nvfp4  ? wkind::nvfp4
            : st.fmt == out_format::mxfp8  ? wkind::mxfp8
                                           : wkind::mxfp4;
  wf.scheme = st.scheme;
  wf.bits = static_cast<int>(st.int_bits);
  wf.group_size = st.int_group_size;
  wf.sym = st.int_sym;
  return wf;
}

/// A compressed-tensors --config one of whose groups describes other weights than --format
/// writes (another type, bits, group size, strategy, symmetry or block) is refused naming the
/// first such key: the written config would replace the group's settings silently. Keys the
/// group leaves out or null take the format's values.
/// @throws usage_error
void refuse_replaced_weights(settings const& st, quantize_options const& a) {
  if (a.config.empty() || st.gptq || st.cfg.family != quant_family::compressed_tensors) {
    return;
  }
  auto const groups = st.qobj.find("config_groups");
  if (groups == st.qobj.end() || !groups->is_object()) {
    return;
  }
  ojson const want = compressed_tensors_weights(written_format_for(st));
  for (auto const& [name, group] : groups->items()) {
    auto const w = group.is_object() ? group.find("weights") : group.end();
    if (!group.is_object() || w == group.end() || !w->is_object()) {
      continue;
    }
    for (char const* key : {"type", "num_bits", "group_size", "strategy", "symmetric", "block_structure"}) {
      auto const have = w->find(key);
      auto const written = want.find(key);
      if (have == w->end() || have->is_null() || written == want.end() || *have == *written) {
        continue;
      }
      std::string const what = st.fmt == out_format::fp8 ? "--format fp8 --fp8-scheme " + st.scheme_name : "--format " + a.format;
      throw usage_error("--config " + st.config_path + ": config_groups." + name + ".weights." + key + " is " +
                        have->dump() + ", but " + what + " writes " + written->dump() +
                        " (the config's weight settings would be replaced; give a config of this format, or none)");
    }
  }
}

/// The run's settings from the flags and the --config. @throws usage_error, config_error
settings settings_of(quantize_options const& a, note_fn const& note) {
  settings st;
  st.fmt = checked_format(a);
  st.gptq = st.fmt == out_format::gptq;
  st.scheme_name = a.fp8_scheme.value_or("channel");
  std::string const& scheme_name = st.scheme_name;
  if (scheme_name != "tensor" && scheme_name != "channel" && scheme_name != "block" && scheme_name != "ct-block") {
    throw usage_error("--fp8-scheme " + scheme_name + ": expected tensor, channel, block or ct-block");
  }
  st.scheme = scheme_name == "tensor"    ? fp8_scheme::tensor
              : scheme_name == "channel" ? fp8_scheme::channel
                                         : fp8_scheme::block;
  st.ct_block = scheme_name == "ct-block";
  st.config_path = a.config.string();
  read_or_make_config(st, a);
  st.int_bits = a.format == "w8a16" ? 8 : 4;
  st.int_group_size = a.group_size.value_or(128);
  st.int_sym = !a.asym;
  if (st.gptq || st.fmt == out_format::ct_int) {
    merge_integer_params(st, a, note);
  }
  refuse_replaced_weights(st, a);
  validate_config_values(st.cfg, st.qobj,
                         a.config.empty() ? std::string("the command line") : "--config " + st.config_path,
                         value_rules::written);
  if (st.gptq) {
    st.cfg.desc_act = false;
  } else if (auto const it = st.qobj.find("weight_block_size");
             st.scheme == fp8_scheme::block && it != st.qobj.end() && !it->is_null() &&
             *it != ojson::array({128, 128})) {
    throw config_error("--config " + st.config_path + ": weight_block_size " + it->dump() +
                       ": qtl quantize writes 128x128 blocks");
  }
  return st;
}

/// The input's model config (else a full config.json given as --config) into `task.model_config`,
/// an input that is quantized already refused, and the fused layers: the config's
/// packed_modules_mapping, else the input config.json's (the output's config.json keeps it, so
/// that `qtl explain` on the output reads the same one). Returns the config compiled.
compiled_config adopt_input_config(checkpoint_job& task, settings& st, quantize_options const& a) {
  if (!task.has_config && !a.config.empty()) {
    ojson const& doc = st.config_document;
    if (doc.is_object() && doc.contains("quantization_config") && doc.contains("model_type")) {
      task.model_config = doc;
      task.model_config.erase("quantization_config");
    }
  }
  refuse_quantized_input(task.ckpt, task.model_config, task.in_config);
  if (auto const it = task.model_config.find("packed_modules_mapping");
      st.cfg.packed_modules_mapping.empty() && it != task.model_config.end()) {
    try {
      st.cfg.packed_modules_mapping = qtl::io::packed_modules_mapping_of(*it, "packed_modules_mapping");
    } catch (config_error const& e) {
      throw config_error(task.in_config.string() + ": " + e.what());
    }
  }
  return compiled_config(st.cfg);  // rules and lists indexed once: deciding every tensor stays linear
}

/// Adds the output tensor `t` to shard `s` as the job's next output.
void add_out(job& j, shard_plan& s, out_tensor t) {
  j.outs.push_back(s.tensors.size());
  s.tensors.push_back(std::move(t));
}

/// The job of a layer GPTQ quantizes: its parameters (the decision's, else the config's) and its
/// outputs qweight, qzeros, scales, g_idx. @throws data_error for a shape or width not written
void plan_gptq(job& j, shard_plan& s, decision const& d, quant_config const& cfg) {
  tensor_info const& t = *j.in;
  std::int64_t const n = t.shape[0];
  std::int64_t const k = t.shape[1];
  j.kind = job_kind::gptq;
  j.bits = static_cast<int>(d.bits.value_or(*cfg.bits));
  j.sym = d.sym.value_or(*cfg.sym);
  j.config_group_size = d.group_size.value_or(*cfg.group_size);
  if (j.bits != 4 && j.bits != 8) {
    throw data_error(j.module + ": " + std::to_string(j.bits) + "-bit GPTQ is not written (4 or 8)");
  }
  j.weight_type = *integer_weight_type(j.bits, j.sym);
  j.group_rows = group_rows(t.name, j.config_group_size, k);
  int const pf = 32 / j.bits;
  if (k % pf != 0 || n % pf != 0) {
    throw data_error(t.name + ": shape [" + std::to_string(n) + ", " + std::to_string(k) +
                     "]: N and K must be multiples of " + std::to_string(pf) + " for " + std::to_string(j.bits) +
                     "-bit packing");
  }
  std::int64_t const g = k / j.group_rows;
  add_out(j, s, {j.module + ".qweight", dtype::I32, {k / pf, n}});
  add_out(j, s, {j.module + ".qzeros", dtype::I32, {g, n / pf}});
  add_out(j, s, {j.module + ".scales", dtype::F16, {g, n}});
  add_out(j, s, {j.module + ".g_idx", dtype::I32, {k}});
}

/// The job of a layer written compressed-tensors pack-quantized (w4a16, w8a16): weight_packed,
/// weight_scale, weight_shape and, asymmetric, weight_zero_point. @throws data_error for a shape
void plan_ct_pack(job& j, shard_plan& s, settings const& st) {
  tensor_info const& t = *j.in;
  std::int64_t const n = t.shape[0];
  std::int64_t const k = t.shape[1];
  j.kind = job_kind::ct_pack;
  j.bits = static_cast<int>(st.int_bits);
  j.sym = st.int_sym;
  j.config_group_size = st.int_group_size;
  j.weight_type = *integer_weight_type(j.bits, j.sym);
  j.group_rows = group_rows(t.name, j.config_group_size, k);
  int const pf = 32 / j.bits;
  if (k % pf != 0 || (!j.sym && n % pf != 0)) {
    throw data_error(t.name + ": shape [" + std::to_string(n) + ", " + std::to_string(k) + "]: K" +
                     (j.sym ? "" : " and N") + " must be multiples of " + std::to_string(pf) + " for " +
                     std::to_string(j.bits) + "-bit packing");
  }
  std::int64_t const g = k / j.group_rows;
  add_out(j, s, {j.module + ".weight_packed", dtype::I32, {n, k / pf}});
  add_out(j, s, {j.module + ".weight_scale", t.type, {n, g}});
  add_out(j, s, {j.module + ".weight_shape", dtype::I64, {2}});
  if (!j.sym) {
    add_out(j, s, {j.module + ".weight_zero_point", dtype::I32, {n / pf, g}});
  }
}

/// The job of a layer written NVFP4 or MXFP4: weight_packed, weight_scale and, NVFP4,
/// weight_global_scale (shared by the layer's fused group); NVFP4 in ModelOpt's names: weight,
/// weight_scale and weight_scale_2 F32 [] (the same codes and block scales; the per-tensor scale a
/// multiplier, 1 / weight_global_scale). @throws data_error for K
void plan_fp4(job& j, shard_plan& s, settings const& st, compiled_config const& cc, std::string const& format) {
  tensor_info const& t = *j.in;
  std::int64_t const n = t.shape[0];
  std::int64_t const k = t.shape[1];
  bool const nv = st.fmt == out_format::nvfp4;
  j.kind = nv ? job_kind::nvfp4 : job_kind::mxfp4;
  std::int64_t const bs = nv ? 16 : 32;
  if (k % bs != 0) {
    throw data_error(t.name + ": K = " + std::to_string(k) + " is not a multiple of " + std::to_string(bs) + " (" +
                     format + " scales blocks of " + std::to_string(bs) + " elements of a row)");
  }
  j.scale_group = nv ? scale_group_name(cc, j.module) : std::string();
  j.modelopt = nv && st.modelopt;
  add_out(j, s, {j.module + (j.modelopt ? ".weight" : ".weight_packed"), dtype::U8, {n, k / 2}});
  add_out(j, s, {j.module + ".weight_scale", nv ? dtype::F8_E4M3 : dtype::U8, {n, k / bs}});
  if (j.modelopt) {
    add_out(j, s, {j.module + ".weight_scale_2", dtype::F32, {}});
  } else if (nv) {
    add_out(j, s, {j.module + ".weight_global_scale", dtype::F32, {1}});
  }
}

/// The job of a layer written compressed-tensors MXFP8: weight (E4M3) and weight_scale (E8M0).
/// @throws data_error for K
void plan_mxfp8(job& j, shard_plan& s) {
  tensor_info const& t = *j.in;
  std::int64_t const n = t.shape[0];
  std::int64_t const k = t.shape[1];
  j.kind = job_kind::mxfp8;
  if (k % ct_mxfp8_block != 0) {
    throw data_error(t.name + ": K = " + std::to_string(k) + " is not a multiple of 32 (mxfp8 scales blocks of 32 "
                     "elements of a row)");
  }
  add_out(j, s, {j.module + ".weight", dtype::F8_E4M3, {n, k}});
  add_out(j, s, {j.module + ".weight_scale", dtype::U8, {n, k / ct_mxfp8_block}});
}

/// The job of a layer written FP8: the weight and its scales by the scheme and the config's
/// family (an HF "fp8" config: a [] per-tensor scale, block scales as weight_scale_inv).
void plan_fp8(job& j, shard_plan& s, settings const& st, compiled_config const& cc) {
  tensor_info const& t = *j.in;
  std::int64_t const n = t.shape[0];
  std::int64_t const k = t.shape[1];
  j.kind = job_kind::fp8;
  j.ct_rules = st.ct_block;
  j.scheme = st.scheme;
  add_out(j, s, {j.module + ".weight", dtype::F8_E4M3, {n, k}});
  bool const hf = st.cfg.family == quant_family::fp8;
  if (st.scheme == fp8_scheme::tensor) {
    j.scale_group = scale_group_name(cc, j.module);
    add_out(j, s, {j.module + ".weight_scale", dtype::F32, hf ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{1}});
  } else if (st.scheme == fp8_scheme::channel) {
    add_out(j, s, {j.module + ".weight_scale", dtype::F32, {n, 1}});
  } else {
    add_out(j, s, {j.module + (hf ? ".weight_scale_inv" : ".weight_scale"), dtype::F32,
                   {(n + 127) / 128, (k + 127) / 128}});
  }
}

/// The plan: the jobs (one per input tensor, or per expert tensor cut out of a stack), the linear
/// layers kept (module -> why), the 3-D expert stacks copied whole (--keep-expert-stacks: their
/// names, and the experts modules holding them).
struct run_plan {
  std::vector<job> jobs;
  /// A --recipe run: each Linear's group (nothing: ignored or matched by none), and the modules
  /// kept although a group matches them (routers, embeddings, weights of other dtypes: listed in
  /// `ignore`, or compressed-tensors would look for their quantized tensors).
  std::map<std::string, std::optional<std::size_t>> recipe_groups;
  std::set<std::string> matched_kept;
  std::string recipe_conflict;  ///< the first module vLLM would give another group (recipe_group_of)
  std::map<std::string, std::string> skipped;
  std::vector<std::string> expert_stacks;
  std::set<std::string> stack_modules;
};

/// Why the 2-D `.weight` of `module` is kept, or nothing when the config quantizes it. Which
/// modules are linear layers: weight_role (config_tools.hpp), the rule explain and lint apply;
/// MoE routers stay in the input's dtype whatever the config says (`ignore` lists them).
/// @throws data_error when the engine would raise, or QTL cannot tell what it does
std::optional<std::string> kept_why(std::string const& module, tensor_info const& t, compiled_config const& cc,
                                    consumer const& sg, decision& d) {
  module_role const role = weight_role(module, t);
  if (role != module_role::linear) {
    return kept_reason(role);
  }
  layer_kind const kind = infer_layer_kind(module);
  std::string const engine_name = fused_name(cc, module).value_or(module);
  d = decide(cc, sg, engine_name, kind);
  if (d.error) {
    throw data_error(module + ": " + d.consumer + (d.error_from_qtl() ? ": QTL cannot tell what it does: " : " would raise ") +
                     *d.error + " for " + engine_name);
  }
  if (d.skipped) {
    return d.rule ? "rule '" + *d.rule + "'" : (kind == layer_kind::lm_head ? "lm_head" : "not quantized by the config");
  }
  return std::nullopt;
}

/// A --recipe run: the recipe and each group's settings (as a --format run of its options makes
/// them).
struct recipe_run {
  recipe r;
  std::vector<settings> groups;
};

/// Why the 2-D `.weight` of `module` is kept by the recipe, or nothing when a group quantizes it
/// (`group` set to it): the module's role as `kept_why` reads it, then the recipe's groups
/// (recipe.hpp) on the module's name and the fused layer's vLLM builds of it.
std::optional<std::string> recipe_kept_why(std::string const& module, tensor_info const& t, compiled_config const& cc,
                                           recipe_run const& rr, run_plan& p, std::size_t& group) {
  module_role const role = weight_role(module, t);
  std::string why;
  std::string const engine_name = fused_name(cc, module).value_or(module);
  std::string conflict;
  std::optional<std::size_t> const g =
      recipe_group_of(rr.r, module, engine_name, role != module_role::not_linear, why, conflict);
  if (p.recipe_conflict.empty()) {
    p.recipe_conflict = conflict;
  }
  if (role != module_role::linear) {
    if (g) {
      p.matched_kept.insert(module);
    }
    return kept_reason(role);
  }
  p.recipe_groups[module] = g;
  if (!g) {
    return why;
  }
  group = *g;
  return std::nullopt;
}

/// The layer an engine builds module `module` into, whose shards must share one scheme: an MoE
/// layer's experts (`...experts.E.*` -> `...experts`, one FusedMoE), else the fused layer
/// (`fused_name`: qkv_proj, gate_up_proj), else the module itself.
std::string engine_layer(compiled_config const& cc, std::string const& module) {
  for (std::size_t at = module.find(".experts."); at != std::string::npos; at = module.find(".experts.", at + 1)) {
    std::size_t const e = at + 9;
    std::size_t const dot = module.find('.', e);
    if (dot != std::string::npos && dot > e &&
        std::all_of(module.begin() + static_cast<std::ptrdiff_t>(e), module.begin() + static_cast<std::ptrdiff_t>(dot),
                    [](char c) { return c >= '0' && c <= '9'; })) {
      return module.substr(0, at + 8);
    }
  }
  return fused_name(cc, module).value_or(module);
}

/// The scheme a recipe group writes, as the engines compare them: its format and its weights'
/// arguments.
std::string group_scheme(recipe_run const& rr, std::optional<std::size_t> g) {
  if (!g) {
    return "unquantized";
  }
  settings const& gs = rr.groups[*g];
  return rr.r.groups[*g].options.format + " " + compressed_tensors_weights(written_format_for(gs)).dump();
}

/// Refuses a recipe that gives the shards of one engine layer (q/k/v, gate/up, an MoE layer's
/// experts) different schemes, or quantizes some and not others: the engines load such a layer as
/// one tensor with one scheme (vLLM raises on shards that disagree); then a module vLLM would
/// give another group than compressed-tensors. @throws data_error naming the layer and two of its
/// modules with their groups, or the module and both groups
void check_recipe_fused_layers(recipe_run const& rr, run_plan const& p, compiled_config const& cc) {
  std::map<std::string, std::pair<std::string, std::optional<std::size_t>>> first;  // layer -> module, group
  for (auto const& [module, g] : p.recipe_groups) {
    std::string const layer = engine_layer(cc, module);
    auto const [it, fresh] = first.try_emplace(layer, module, g);
    if (fresh || group_scheme(rr, it->second.second) == group_scheme(rr, g)) {
      continue;
    }
    auto const said = [&](std::optional<std::size_t> x) {
      return x ? rr.r.groups[*x].name + " (" + rr.r.groups[*x].options.format + ")" : std::string("no group");
    };
    throw data_error("--recipe " + rr.r.path.string() + ": the engines load " + qtl::io::printable(layer) +
                     " as one layer with one scheme, but the recipe gives " + qtl::io::printable(it->second.first) +
                     " " + said(it->second.second) + " and " + qtl::io::printable(module) + " " + said(g) +
                     "; give every module of the layer the same group");
  }
  if (!p.recipe_conflict.empty() && !rr.r.modelopt) {  // ModelOpt's loaders look modules up by name
    throw data_error(p.recipe_conflict);
  }
}

/// The splits of the checkpoint's expert stacks by name (expert_stacks.hpp): weight stacks by the
/// input's layout; a bias stack like its weight stack when that one is cut, else not at all (it
/// travels as its weights do). @throws data_error naming a stack whose layout is not understood,
/// unless --keep-expert-stacks (then it is copied)
std::map<std::string, stack_split> split_stacks(checkpoint_job const& task, quantize_options const& a) {
  std::map<std::string, stack_split> splits;
  std::map<std::string, tensor_info const*> biases;
  for (auto const& e : task.ckpt.tensors()) {
    tensor_info const& t = *e.tensor;
    if (!is_expert_stack(t)) {
      continue;
    }
    if (!bias_stack_weight(t.name).empty()) {
      biases[t.name] = &t;
      continue;
    }
    stack_split sp = split_expert_stack(t, task.model_config);
    if (!sp.why_not.empty() && !a.keep_expert_stacks) {
      throw data_error(qtl::io::printable(t.name) + " " + qtl::io::shape_string(t.shape) + ": a 3-D expert stack: " +
                       sp.why_not + "; --keep-expert-stacks copies it unquantized");
    }
    splits[t.name] = std::move(sp);
  }
  for (auto const& [name, t] : biases) {
    std::string const w = bias_stack_weight(name);
    auto it = splits.find(w);
    it = it != splits.end() ? it : splits.find(w + ".weight");
    if (it != splits.end() && !it->second.parts.empty()) {
      stack_split sp = split_expert_stack(*t, task.model_config);
      if (!sp.why_not.empty()) {
        throw data_error(qtl::io::printable(name) + " " + qtl::io::shape_string(t->shape) +
                         ": the biases of a cut expert stack: " + sp.why_not);
      }
      splits[name] = std::move(sp);
    }
  }
  return splits;
}

/// Every input tensor's jobs and outputs, added to `task.shards`: a 2-D linear weight quantized or
/// kept by the config, an expert stack cut into per-expert tensors planned alike (its biases
/// copied per expert), everything else copied.
run_plan plan_jobs(checkpoint_job& task, settings const& run_st, compiled_config const& cc, consumer const& sg,
                   quantize_options const& a, recipe_run const* rr) {
  run_plan p;
  std::map<std::string, stack_split> const splits = split_stacks(task, a);
  // one job: `t` written as `out_name` (a 2-D `.weight` of a linear layer by the config, else copied)
  auto const plan_tensor = [&](job j, tensor_info const& t, std::string const& out_name) {
    shard_plan& s = task.shards[j.shard];
    bool const weight = out_name.size() > 7 && out_name.compare(out_name.size() - 7, 7, ".weight") == 0;
    std::string const module = weight ? out_name.substr(0, out_name.size() - 7) : std::string();
    if (weight && t.shape.size() == 2 && !is_float(t.type)) {
      if (name_role(module) == module_role::linear) {  // named in the error of a run that quantizes nothing
        p.skipped[module] = std::string(qtl::io::dtype_name(t.type)) + " weights (qtl quantizes F16, BF16 and F32)";
      }
      std::string why;
      std::string conflict;
      if (rr != nullptr && recipe_group_of(rr->r, module, module, true, why, conflict)) {
        p.matched_kept.insert(module);
      }
    } else if (weight && t.shape.size() == 2 && t.shape[0] > 0 && t.shape[1] > 0) {
      decision d;
      std::size_t group = 0;
      if (auto why = rr != nullptr ? recipe_kept_why(module, t, cc, *rr, p, group) : kept_why(module, t, cc, sg, d)) {
        p.skipped[module] = *std::move(why);
      } else {
        settings const& st = rr != nullptr ? rr->groups[group] : run_st;
        j.module = module;
        j.group = group;
        if (st.gptq) {
          plan_gptq(j, s, d, st.cfg);
        } else if (st.fmt == out_format::ct_int) {
          plan_ct_pack(j, s, st);
        } else if (st.fmt == out_format::nvfp4 || st.fmt == out_format::mxfp4) {
          plan_fp4(j, s, st, cc, st.fmt == out_format::nvfp4 ? "nvfp4" : "mxfp4");
        } else if (st.fmt == out_format::mxfp8) {
          plan_mxfp8(j, s);
        } else {
          plan_fp8(j, s, st, cc);
        }
        p.jobs.push_back(std::move(j));
        return;
      }
    }
    j.kind = job_kind::copy;
    add_out(j, s, {out_name, t.type, t.shape});
    p.jobs.push_back(std::move(j));
  };
  for (auto const& e : task.ckpt.tensors()) {
    tensor_info const& t = *e.tensor;
    job j;
    j.in = &t;
    j.allow_nonfinite = a.allow_nonfinite;
    j.shard = e.shard;
    auto const split = splits.find(t.name);
    if (split == splits.end() || split->second.parts.empty()) {
      if (split != splits.end()) {  // not understood, copied whole: its experts module is not quantized
        p.expert_stacks.push_back(t.name);
        std::size_t const dot = t.name.find("experts");
        p.stack_modules.insert(t.name.substr(0, dot + 7));
      }
      plan_tensor(std::move(j), t, t.name);
      continue;
    }
    std::size_t const elem = qtl::io::dtype_size(t.type);
    for (stack_part const& part : split->second.parts) {
      auto view = std::make_shared<tensor_info>();
      view->name = t.name + " (" + part.name + ")";  // the stack, and the expert tensor cut out of it
      view->type = t.type;
      view->shape = part.shape;
      std::uint64_t const first = part.contiguous() ? part.first : part.block_begin;
      std::uint64_t const count = part.contiguous() ? numel_of(part.shape) : part.block_end - part.block_begin;
      view->bytes = t.bytes.subspan(first * elem, count * elem);
      tensor_info const& cut_view = *view;
      job c = j;
      c.in = view.get();
      c.cut_in = std::move(view);
      c.stack = &t;
      if (!part.contiguous()) {
        c.cut = part;
      }
      plan_tensor(std::move(c), cut_view, part.name);
    }
  }
  for (auto const& j : p.jobs) {
    for (std::size_t o : j.outs) {
      task.shards[j.shard].tensors[o].source = j.in->name;
    }
  }
  return p;
}

/// Refuses a plan that quantizes no layer (naming why) unless --allow-empty; warns that the 3-D
/// expert stacks --keep-expert-stacks kept are copied unquantized.
void check_quantized_layers(run_plan const& p, checkpoint_job const& task, quantize_options const& a,
                            note_fn const& note) {
  std::size_t quantized = 0;
  for (auto const& j : p.jobs) {
    quantized += j.kind == job_kind::copy ? 0 : 1;
  }
  std::size_t const stacks = p.expert_stacks.size();
  std::string const stacks_why =
      stacks == 0 ? std::string()
                  : std::to_string(stacks) + " tensor" + (stacks == 1 ? " is a" : "s are") + " 3-D expert stack" +
                        (stacks == 1 ? "" : "s") + " (" + qtl::io::printable(p.expert_stacks.front()) +
                        (stacks == 1 ? "" : ", ...") + ") of a layout qtl does not know (--keep-expert-stacks)";
  if (quantized == 0 && !a.allow_empty) {
    throw data_error("no linear layer to quantize in " + task.in_path.string() + ": " +
                     empty_run_reasons(task.ckpt, p.skipped, stacks_why) + "; --allow-empty writes the output anyway");
  }
  if (quantized > 0 && stacks > 0) {
    note("qtl quantize: warning: " + stacks_why + ": copied unquantized\n");
  }
}

/// The input bytes a job reads: its tensor's (a strided cut of an expert stack: its own elements,
/// not the expert's block it spans).
std::uint64_t input_bytes(job const& j) {
  return j.cut ? j.in->numel() * qtl::io::dtype_size(j.in->type) : static_cast<std::uint64_t>(j.in->bytes.size());
}

/// The pool's jobs: each plan job by its kind's writer, its input pages released after.
worker_pool_jobs writer_jobs(std::vector<job>& jobs, std::vector<shard_plan> const& shards) {
  worker_pool_jobs pool;
  pool.count = jobs.size();
  pool.run = [&jobs, &shards](std::size_t i) {
    job& j = jobs[i];
    write_job(j, shards[j.shard], j.scheme);
    release(j.in->bytes);
  };
  pool.bytes = [&jobs](std::size_t i) { return input_bytes(jobs[i]); };
  pool.describe = [&jobs](std::size_t i) { return jobs[i].in->name; };
  pool.file = [&jobs](std::size_t i) { return jobs[i].shard; };
  return pool;
}

/// What the quantization_config describes: the format's kind and parameters, and what
/// compressed-tensors must not target (it targets every Linear not ignored): each linear layer
/// kept, and lm_head whenever it is not quantized (also when the checkpoint ties it to the
/// embeddings); MoE routers listed as such.
written_format written_format_of(settings const& st, run_plan const& p, std::string const& checkpoint_format) {
  written_format wf = written_format_for(st);
  wf.checkpoint_format = checkpoint_format;
  bool lm_head_quantized = false;
  for (auto const& j : p.jobs) {
    lm_head_quantized = lm_head_quantized || (j.kind != job_kind::copy && j.module == "lm_head");
  }
  if (!lm_head_quantized && p.skipped.count("lm_head") == 0) {
    wf.ignore.push_back("lm_head");
  }
  for (auto const& m : p.stack_modules) {
    wf.ignore.push_back(m);  // a stack copied whole: the engines' FusedMoE layer of it stays unquantized
  }
  for (auto const& [m, why] : p.skipped) {
    if (why != kept_reason(module_role::not_linear)) {
      wf.ignore.push_back(m);
    }
    if (why == kept_reason(module_role::moe_router)) {
      wf.routers.push_back(m);
    }
  }
  return wf;
}

/// The integer formats' parameters as the report shows them: "group 128 sym".
std::string int_description(settings const& st) {
  return "group " + std::to_string(st.int_group_size) + (st.int_sym ? " sym" : " asym");
}

/// The recipe of --recipe read, each group's settings made as a --format run of its options
/// makes them. @throws usage_error for a flag beside --recipe (the recipe gives every format and
/// option), config_error for the recipe
recipe_run recipe_run_of(quantize_options const& a, note_fn const& note) {
  for (auto const& [given, flag] :
       {std::pair{!a.format.empty(), "--format"}, std::pair{a.bits.has_value(), "--bits"},
        std::pair{a.group_size.has_value(), "--group-size"}, std::pair{a.sym, "--sym"}, std::pair{a.asym, "--asym"},
        std::pair{a.fp8_scheme.has_value(), "--fp8-scheme"}, std::pair{!a.config.empty(), "--config"}}) {
    if (given) {
      throw usage_error(std::string(flag) + " does not apply with --recipe (the recipe gives each group's format "
                                            "and options)");
    }
  }
  recipe_run rr;
  rr.r = read_recipe(a.recipe);
  for (auto const& g : rr.r.groups) {
    quantize_options o = g.options;
    o.threads = a.threads;
    try {
      rr.groups.push_back(settings_of(o, note));
    } catch (usage_error const& e) {
      throw config_error("--recipe " + a.recipe.string() + ": " + g.name + ": " + e.what());
    }
    rr.groups.back().modelopt = rr.r.modelopt;
  }
  return rr;
}

/// The settings a --recipe run plans with before its groups decide: a compressed-tensors config
/// with no skip list (the fused layers come from the input's config.json).
settings recipe_base_settings() {
  settings st;
  st.cfg.family = quant_family::compressed_tensors;
  st.cfg.quant_method = "compressed-tensors";
  st.cfg.skip_list_field = "ignore";
  st.qobj = ojson::object();
  return st;
}

/// The config of a --recipe run: one config group per recipe group (its targets as written); in
/// `ignore` the recipe's entries, every linear layer the run kept (vLLM finds no target for a
/// Linear that no group matches and raises, unless `ignore` names it: as written_format_of) and
/// every module a group matches that the run kept (a router, an embedding a regex reaches).
ojson recipe_quantization_config(recipe_run const& rr, settings const& st, run_plan const& p) {
  std::vector<written_group> groups;
  for (std::size_t i = 0; i < rr.groups.size(); ++i) {
    written_group g{rr.r.groups[i].name, {}, written_format_for(rr.groups[i])};
    for (auto const& t : rr.r.groups[i].targets) {
      g.targets.push_back(t.text);
    }
    groups.push_back(std::move(g));
  }
  std::vector<std::string> ignore;
  auto const add = [&](std::string const& m) {
    if (std::find(ignore.begin(), ignore.end(), m) == ignore.end()) {
      ignore.push_back(m);
    }
  };
  for (auto const& t : rr.r.ignore) {
    add(t.text);
  }
  for (auto const& m : written_format_of(st, p, "").ignore) {
    add(m);
  }
  for (auto const& m : p.matched_kept) {
    add(m);
  }
  return mixed_quantization_config(groups, ignore);
}

/// The report's variant, layers (each with how it was written, by the settings of its group:
/// `groups[j.group]`, the run's own in a --format run), kept modules and copies.
void describe_run(quantize_report& report, std::vector<settings> const& groups, std::vector<std::string> const& formats,
                  run_plan const& p, std::string const& checkpoint_format) {
  settings const& st = groups.front();
  report.variant = st.gptq                        ? "checkpoint_format " + checkpoint_format
                   : st.fmt == out_format::fp8    ? st.scheme_name + " scales"
                   : st.fmt == out_format::ct_int ? "compressed-tensors pack-quantized, " + int_description(st)
                   : st.fmt == out_format::nvfp4  ? std::string("compressed-tensors nvfp4-pack-quantized")
                   : st.fmt == out_format::mxfp8  ? std::string("compressed-tensors mxfp8-quantized")
                                                  : std::string("compressed-tensors mxfp4-pack-quantized");
  if (groups.size() > 1 || formats.front() != report.format) {
    report.variant = (st.modelopt ? "ModelOpt MIXED_PRECISION, " : "compressed-tensors, ") +
                     std::to_string(groups.size()) + " recipe group" + (groups.size() == 1 ? "" : "s");
  }
  for (auto const& j : p.jobs) {
    settings const& gs = groups[j.group];
    std::string const& format = formats[j.group];
    std::string const int_desc = int_description(gs);
    if (j.kind == job_kind::copy) {
      ++report.tensors_copied;
    } else if (j.kind == job_kind::gptq) {
      report.layers.push_back({j.module, "gptq " + std::to_string(j.bits) + "-bit group " +
                                             std::to_string(j.config_group_size) + (j.sym ? " sym" : " asym")});
    } else if (j.kind == job_kind::ct_pack) {
      report.layers.push_back({j.module, format + " int" + std::to_string(j.bits) + " " + int_desc});
    } else if (j.kind == job_kind::nvfp4) {
      report.layers.push_back({j.module, "nvfp4 e2m1, e4m3 scale per 16, global scale"});
    } else if (j.kind == job_kind::mxfp4) {
      report.layers.push_back({j.module, "mxfp4 e2m1, e8m0 scale per 32"});
    } else if (j.kind == job_kind::mxfp8) {
      report.layers.push_back({j.module, "mxfp8 e4m3, e8m0 scale per 32"});
    } else {
      report.layers.push_back({j.module, "fp8 e4m3 " + gs.scheme_name});
    }
  }
  for (auto const& [m, why] : p.skipped) {
    report.kept.push_back({m, why});
  }
}

}  // namespace

quantize_report quantize_checkpoint(fs::path const& src, fs::path const& dst, quantize_options const& a,
                                    progress_sink* sink) {
  auto const t0 = std::chrono::steady_clock::now();
  quantize_report report;
  report.format = a.format;
  note_fn const note = [&](std::string const& text) {
    report.notes.push_back(text);
    if (sink != nullptr) {
      sink->note(text);
    }
  };
  std::optional<recipe_run> rr;
  if (!a.recipe.empty()) {
    rr = recipe_run_of(a, note);
    report.format = "recipe";
  }
  settings st = rr ? recipe_base_settings() : settings_of(a, note);
  consumer const sg = engine_consumer(st.cfg, true);

  // --- input and plan ---------------------------------------------------------------------------
  checkpoint_job task("quantize", src, dst, sink, note);
  compiled_config const cc = adopt_input_config(task, st, a);
  run_plan p = plan_jobs(task, st, cc, sg, a, rr ? &*rr : nullptr);
  if (rr) {
    check_recipe_fused_layers(*rr, p, cc);
  }
  check_quantized_layers(p, task, a, note);

  // --- output files (headers now, data by the workers), workers --------------------------------
  task.open_outputs(a.force);
  std::uint64_t total_in = 0;
  for (auto const& j : p.jobs) {
    total_in += input_bytes(j);
  }
  unsigned const threads = static_cast<unsigned>(a.threads);
  report.threads = task.run_workers(a.threads, writer_jobs(p.jobs, task.shards),
                                    [&] { share_group_amax(p.jobs, threads); });  // one per-tensor scale per fused layer

  // --- GPTQ zero points: v1 when every zero point is >= 1, else v2 ------------------------------
  bool any_zero = false;
  for (auto const& j : p.jobs) {
    any_zero = any_zero || (j.kind == job_kind::gptq && j.zero_has_zero);
  }
  std::string const checkpoint_format = any_zero ? "gptq_v2" : "gptq";
  write_gptq_zero_points(p.jobs, task.shards, !any_zero);

  // --- config files, commit ---------------------------------------------------------------------
  std::vector<std::string> modelopt_layers;  // the modelopt form: every module written, in job order
  for (auto const& j : p.jobs) {
    if (j.modelopt && (modelopt_layers.empty() || modelopt_layers.back() != j.module)) {
      modelopt_layers.push_back(j.module);
    }
  }
  bool const modelopt = rr && rr->r.modelopt;
  ojson const q = modelopt ? modelopt_mixed_config(modelopt_layers, false)
                  : rr     ? recipe_quantization_config(*rr, st, p)
                           : written_quantization_config(st.qobj, st.cfg, written_format_of(st, p, checkpoint_format));
  task.model_config["quantization_config"] = q;
  task.write_json("config.json", task.model_config);
  if (modelopt) {
    task.write_json("hf_quant_config.json", modelopt_mixed_config(modelopt_layers, true));
  }
  if (st.gptq) {
    task.write_json("quantize_config.json", q);  // GPTQ's own copy
  }
  task.commit();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rr) {
    std::vector<std::string> formats;
    for (auto const& g : rr->r.groups) {
      formats.push_back(g.options.format);
    }
    describe_run(report, rr->groups, formats, p, checkpoint_format);
  } else {
    describe_run(report, {st}, {a.format}, p, checkpoint_format);
  }
  report.bytes_in = total_in;
  report.bytes_out = task.bytes_out();
  return report;
}

}  // namespace qtl::tool
