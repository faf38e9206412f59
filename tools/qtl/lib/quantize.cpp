// qtl quantize's work (quantize_checkpoint, checkpoint.hpp): round-to-nearest quantization of
// every linear weight of a checkpoint, written in the layout sglang, vLLM and transformers load
// (research/checkpoint_formats.md; compressed-tensors: research/interop.md §3).
//
//   qtl quantize IN OUT_DIR --format gptq|fp8|w4a16|w8a16|nvfp4|mxfp4 [--bits 4|8] [--group-size N]
//                [--sym|--asym] [--fp8-scheme tensor|channel|block|ct-block] [--config QUANT_CONFIG.json]
//                [--threads N] [--device auto|cpu|cuda] [--allow-nonfinite]
//
// Which layers: every 2-D float `.weight` of a linear layer (embeddings and 1-D tensors are copied),
// decided by the config's rules as `qtl explain --consumer sglang` shows them, on the name the
// engine sees (q/k/v_proj -> qkv_proj, gate/up_proj -> gate_up_proj: shards of a fused layer always
// share one decision). Without --config: every linear layer but lm_head.
//
// What is written, per quantized layer L with HF weight W [N, K] (quantized along K):
//   gptq  L.qweight I32 [K*b/32, N]  codes packed along K (pack_rows), element j in bits [b*j, b*j+b)
//         L.qzeros  I32 [G, N*b/32]  zero points packed along N (pack_cols); v1 "gptq" stores z - 1
//                                     (when every z >= 1: always for --sym), else "gptq_v2" stores z
//         L.scales  F16 [G, N]        L.g_idx I32 [K] = k / group_size
//         codes and scales from qtl::quantize_weights (uint4b8/uint8b128 with --sym: z = 8/128;
//         uint4/uint8 with zero points with --asym), bit for bit as the reference; scales cast to F16
//         (exact for F16 weights; BF16/F32 weights get their scales rounded to F16, as GPTQModel does,
//         and the checkpoint dequantizes with those).
//   fp8   L.weight F8_E4M3 [N, K] and, by scheme,
//         tensor   L.weight_scale F32 [1] (compressed-tensors; [] under an HF "fp8" config)
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
//         F8_E4M3 [N, K/16] (linear), L.weight_global_scale F32 [1] = 448*6/amax, a divisor,
//         rounded as compressed-tensors computes it (qtl::ct_nvfp4_global_scale: fl(fl(1/amax)*2688),
//         where `qtl op nvfp4-quant` divides once); qtl::block_quantize<nvfp4> as that op, except
//         that a block scale of 0 (an all-zero block) is written as compressed-tensors' 0.125 and a
//         -0.0 weight as code 0 (compressed-tensors takes the sign from torch.sign).
//   mxfp4 L.weight_packed U8 [N, K/2], L.weight_scale U8 [N, K/32] biased E8M0 exponents:
//         compressed-tensors' producer rule (qtl::ct_mx_scale_code: amax rounded to a power of two,
//         up from a significand of 1.75, divided by 4; interop.md §3.1 d), not the library's MX rule
//         (block_quantize<mxfp4>: the smallest power of two >= amax/6); consumers decode both alike.
//   The compressed-tensors configs list in `ignore` every linear layer the run kept (and lm_head
//   whenever it is not quantized), so every consumer skips exactly what this run skipped.
// Everything else is copied unchanged; the shards keep their names, each shard's tensors ordered by
// element size (4-, 2-, then 1-byte) so that every tensor stays aligned; the index is rewritten;
// config.json gets the `quantization_config` (GPTQ also writes quantize_config.json); the input
// folder's other files are copied.
//
// Streaming: every output shard is created in a staging folder beside OUT_DIR, its header written
// first (offsets are known from the shapes), then worker threads quantize one tensor at a time (GPTQ
// and pack-quantized in 256-column slices) and write the results at their offsets; input pages are released after use,
// so memory stays at a few tensors. Commit, lock and what a signal or a kill leaves: the folder is
// swapped in whole (staged_output.hpp), so OUT_DIR always holds one complete checkpoint.

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <system_error>

#include <qtl/group_size.hpp>

#include "../common.hpp"
#include "../config_tools.hpp"
#include "checkpoint.hpp"
#include "quant_config_writer.hpp"
#include "quantize_plan.hpp"
#include "../staged_output.hpp"
#include "tensor_writers.hpp"
#include "worker_pool.hpp"

namespace qtl::tool {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

/// What a run writes.
enum class out_format { gptq, fp8, ct_int, nvfp4, mxfp4 };

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

/// An MoE router: a last component `gate` (Mixtral's `block_sparse_moe.gate`, Qwen-MoE's and
/// DeepSeek's `mlp.gate`, [num_experts, hidden]) or `shared_expert_gate` (Qwen2-MoE, [1, hidden]).
/// sglang and vLLM build these as linears without a quant_config, so they stay in the input's
/// dtype whatever the config says (and `ignore` lists them for compressed-tensors).
bool is_moe_router(std::string_view module) {
  std::size_t const dot = module.rfind('.');
  std::string_view const leaf = dot == std::string_view::npos ? module : module.substr(dot + 1);
  return leaf == "gate" || leaf == "shared_expert_gate";
}

}  // namespace

quantize_report quantize_checkpoint(fs::path const& src, fs::path const& dst, quantize_options const& a,
                                    progress_sink* sink) {
  auto const t0 = std::chrono::steady_clock::now();
  quantize_report report;
  report.format = a.format;
  auto note = [&](std::string const& text) {
    if (text.empty()) {
      return;
    }
    report.notes.push_back(text);
    if (sink != nullptr) {
      sink->note(text);
    }
  };
  if (a.device != "auto" && a.device != "cpu" && a.device != "cuda") {
    throw usage_error("--device " + a.device + ": expected auto, cpu or cuda");
  }
  if (a.device == "cuda") {
    check_device("cuda");
  }
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
  } else {
    throw usage_error("--format must be gptq, fp8, w4a16, w8a16, nvfp4 or mxfp4");
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
  std::string const scheme_name = a.fp8_scheme.value_or("channel");
  if (scheme_name != "tensor" && scheme_name != "channel" && scheme_name != "block" && scheme_name != "ct-block") {
    throw usage_error("--fp8-scheme " + scheme_name + ": expected tensor, channel, block or ct-block");
  }
  fp8_scheme const scheme = scheme_name == "tensor"    ? fp8_scheme::tensor
                            : scheme_name == "channel" ? fp8_scheme::channel
                                                       : fp8_scheme::block;
  bool const ct_block = scheme_name == "ct-block";  // FP8_BLOCK as compressed-tensors writes it
  std::string const config_path = a.config.string();
  // --- the config: read, or made from the flags ---------------------------------------------
  quant_config cfg;
  ojson qobj;
  ojson config_document;
  if (!a.config.empty()) {
    config_file file = read_config_file(a.config);
    cfg = std::move(file.config);
    qobj = std::move(file.quant_object);
    config_document = std::move(file.document);
    if (gptq && cfg.family != quant_family::gptq) {
      throw usage_error("--config " + config_path + " is a '" + cfg.quant_method + "' config, not GPTQ");
    }
    if (fmt == out_format::fp8 && cfg.family != quant_family::fp8 && cfg.family != quant_family::compressed_tensors) {
      throw usage_error("--config " + config_path + " is a '" + cfg.quant_method +
                        "' config, not fp8 or compressed-tensors");
    }
    if (!gptq && fmt != out_format::fp8 && cfg.family != quant_family::compressed_tensors) {
      throw usage_error("--config " + config_path + " is a '" + cfg.quant_method + "' config; --format " +
                        a.format + " is written as compressed-tensors and takes a compressed-tensors config");
    }
    if (fmt == out_format::fp8 && cfg.family == quant_family::fp8 && scheme == fp8_scheme::channel) {
      throw usage_error("--fp8-scheme channel is written as compressed-tensors; an HF 'fp8' config "
                        "describes block (weight_block_size) or per-tensor scales");
    }
    if (ct_block && cfg.family != quant_family::compressed_tensors) {
      throw usage_error("--fp8-scheme ct-block is written as compressed-tensors; --config " + config_path +
                        " is a '" + cfg.quant_method + "' config");
    }
  } else if (gptq) {
    cfg.family = quant_family::gptq;
    cfg.quant_method = "gptq";
    qobj = ojson::object();
  } else {
    bool const hf_fp8 = fmt == out_format::fp8 && scheme == fp8_scheme::block && !ct_block;
    cfg.family = hf_fp8 ? quant_family::fp8 : quant_family::compressed_tensors;
    cfg.quant_method = hf_fp8 ? "fp8" : "compressed-tensors";
    cfg.skip_list = {"lm_head"};
    cfg.skip_list_field = hf_fp8 ? "modules_to_not_convert" : "ignore";
    qobj = ojson::object();
  }
  // The integer formats' parameters: the flags over the (GPTQ) config's, else the defaults.
  std::int64_t int_bits = a.format == "w8a16" ? 8 : 4;
  std::int64_t int_group_size = a.group_size.value_or(128);
  bool int_sym = !a.asym;
  if (gptq) {
    if (!cfg.bits || a.bits) {
      cfg.bits = a.bits.value_or(4);
    }
    if (a.group_size) {
      cfg.group_size = *a.group_size;
    } else if (!cfg.group_size) {
      cfg.group_size = 128;
    }
    if (!cfg.sym || a.sym || a.asym) {
      cfg.sym = !a.asym;
    }
  }
  validate_config_values(cfg, qobj, a.config.empty() ? std::string("the command line") : "--config " + config_path,
                         value_rules::written);
  if (gptq) {
    cfg.desc_act = false;
  } else if (auto const it = qobj.find("weight_block_size");
             scheme == fp8_scheme::block && it != qobj.end() && !it->is_null() && *it != ojson::array({128, 128})) {
    throw config_error("--config " + config_path + ": weight_block_size " + it->dump() +
                       ": qtl quantize writes 128x128 blocks");
  }
  consumer const sg = engine_consumer(cfg, true);
  compiled_config const cc(cfg);  // rules and lists indexed once: deciding every tensor stays linear

  // --- input (after removing what killed runs left, so that a bad input cannot keep it) --------
  fs::path const& in_path = src;
  fs::path const& out_dir = dst;
  note(clean_stale_outputs(out_dir));
  guard_opening_inputs();
  auto const ckpt = qtl::io::safetensors_checkpoint::open(src);
  fs::path const in_dir = fs::is_directory(in_path) ? in_path : in_path.parent_path();
  std::error_code ec;
  if (fs::equivalent(in_dir.empty() ? fs::path(".") : in_dir, out_dir, ec)) {
    throw usage_error("OUT_DIR must differ from the input's folder (the input is read while the output is written)");
  }
  // The model config the output's config.json extends: the input folder's, else a full
  // config.json given as --config; an input that is quantized already is refused.
  ojson model_config = ojson::object();
  fs::path const in_config = in_dir / "config.json";
  if (fs::exists(fs::symlink_status(in_config, ec))) {
    model_config = read_json_document(in_config, "the input's config");
    if (!model_config.is_object()) {
      throw data_error(in_config.string() + ": the model config is a JSON " + model_config.type_name() +
                       ", not an object");
    }
  } else if (!a.config.empty()) {
    ojson const& doc = config_document;
    if (doc.is_object() && doc.contains("quantization_config") && doc.contains("model_type")) {
      model_config = doc;
      model_config.erase("quantization_config");
    }
  }
  refuse_quantized_input(ckpt, model_config, in_config);
  bool const sharded = ckpt.shards().size() > 1 ||
                       (in_path.string().size() > 5 && in_path.extension() == ".json") ||
                       (fs::is_directory(in_path) && fs::exists(in_path / "model.safetensors.index.json"));

  // --- plan ------------------------------------------------------------------------------------
  std::vector<shard_plan> shards(ckpt.shards().size());
  for (std::size_t i = 0; i < shards.size(); ++i) {
    shards[i].name = ckpt.shards()[i].path().filename().string();
  }
  std::vector<job> jobs;
  std::map<std::string, std::string> skipped;  // module -> why
  std::string const not_linear = "not a linear layer";
  std::string const moe_router = "MoE router (the engines build it unquantized)";
  std::set<int> bits_used;
  for (auto const& e : ckpt.tensors()) {
    tensor_info const& t = *e.tensor;
    job j;
    j.in = &t;
    j.allow_nonfinite = a.allow_nonfinite;
    j.shard = e.shard;
    auto& s = shards[e.shard];
    std::string const& name = t.name;
    bool const weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    std::string const module = weight ? name.substr(0, name.size() - 7) : std::string();
    if (weight && t.shape.size() == 2 && is_float(t.type) && t.shape[0] > 0 && t.shape[1] > 0) {
      layer_kind const kind = infer_layer_kind(module);
      if (kind == layer_kind::linear && is_moe_router(module)) {
        skipped[module] = moe_router;
      } else if (kind == layer_kind::linear || kind == layer_kind::lm_head) {
        std::string const engine_name = fused_name(cc, module).value_or(module);
        decision const d = decide(cc, sg, engine_name, kind);
        if (d.error) {
          throw data_error(module + ": " + d.consumer + (d.error_from_qtl() ? ": QTL cannot tell what it does: " : " would raise ") +
                           *d.error + " for " + engine_name);
        }
        if (d.skipped) {
          skipped[module] = d.rule ? "rule '" + *d.rule + "'" : (kind == layer_kind::lm_head ? "lm_head" : "not quantized by the config");
        } else {
          j.module = module;
          std::string const base = module;
          std::int64_t const n = t.shape[0];
          std::int64_t const k = t.shape[1];
          if (gptq) {
            j.kind = job_kind::gptq;
            j.bits = static_cast<int>(d.bits.value_or(*cfg.bits));
            j.sym = d.sym.value_or(*cfg.sym);
            j.config_group_size = d.group_size.value_or(*cfg.group_size);
            if (j.bits != 4 && j.bits != 8) {
              throw data_error(module + ": " + std::to_string(j.bits) + "-bit GPTQ is not written (4 or 8)");
            }
            bits_used.insert(j.bits);
            j.weight_type = *integer_weight_type(j.bits, j.sym);
            j.group_rows = group_rows(name, j.config_group_size, k);
            int const pf = 32 / j.bits;
            if (k % pf != 0 || n % pf != 0) {
              throw data_error(name + ": shape [" + std::to_string(n) + ", " + std::to_string(k) +
                               "]: N and K must be multiples of " + std::to_string(pf) + " for " +
                               std::to_string(j.bits) + "-bit packing");
            }
            std::int64_t const g = k / j.group_rows;
            j.outs = {s.tensors.size(), s.tensors.size() + 1, s.tensors.size() + 2, s.tensors.size() + 3};
            s.tensors.push_back({base + ".qweight", dtype::I32, {k / pf, n}});
            s.tensors.push_back({base + ".qzeros", dtype::I32, {g, n / pf}});
            s.tensors.push_back({base + ".scales", dtype::F16, {g, n}});
            s.tensors.push_back({base + ".g_idx", dtype::I32, {k}});
          } else if (fmt == out_format::ct_int) {
            j.kind = job_kind::ct_pack;
            j.bits = static_cast<int>(int_bits);
            j.sym = int_sym;
            j.config_group_size = int_group_size;
            j.weight_type = *integer_weight_type(j.bits, j.sym);
            j.group_rows = group_rows(name, j.config_group_size, k);
            int const pf = 32 / j.bits;
            if (k % pf != 0 || (!j.sym && n % pf != 0)) {
              throw data_error(name + ": shape [" + std::to_string(n) + ", " + std::to_string(k) + "]: K" +
                               (j.sym ? "" : " and N") + " must be multiples of " + std::to_string(pf) + " for " +
                               std::to_string(j.bits) + "-bit packing");
            }
            std::int64_t const g = k / j.group_rows;
            j.outs = {s.tensors.size(), s.tensors.size() + 1, s.tensors.size() + 2};
            s.tensors.push_back({base + ".weight_packed", dtype::I32, {n, k / pf}});
            s.tensors.push_back({base + ".weight_scale", t.type, {n, g}});
            s.tensors.push_back({base + ".weight_shape", dtype::I64, {2}});
            if (!j.sym) {
              j.outs.push_back(s.tensors.size());
              s.tensors.push_back({base + ".weight_zero_point", dtype::I32, {n / pf, g}});
            }
          } else if (fmt == out_format::nvfp4 || fmt == out_format::mxfp4) {
            bool const nv = fmt == out_format::nvfp4;
            j.kind = nv ? job_kind::nvfp4 : job_kind::mxfp4;
            std::int64_t const bs = nv ? 16 : 32;
            if (k % bs != 0) {
              throw data_error(name + ": K = " + std::to_string(k) + " is not a multiple of " + std::to_string(bs) +
                               " (" + a.format + " scales blocks of " + std::to_string(bs) + " elements of a row)");
            }
            j.outs = {s.tensors.size(), s.tensors.size() + 1};
            s.tensors.push_back({base + ".weight_packed", dtype::U8, {n, k / 2}});
            s.tensors.push_back({base + ".weight_scale", nv ? dtype::F8_E4M3 : dtype::U8, {n, k / bs}});
            if (nv) {
              j.outs.push_back(s.tensors.size());
              s.tensors.push_back({base + ".weight_global_scale", dtype::F32, {1}});
            }
          } else {
            j.kind = job_kind::fp8;
            j.ct_rules = ct_block;
            j.outs = {s.tensors.size(), s.tensors.size() + 1};
            s.tensors.push_back({name, dtype::F8_E4M3, {n, k}});
            bool const hf = cfg.family == quant_family::fp8;
            if (scheme == fp8_scheme::tensor) {
              s.tensors.push_back({base + ".weight_scale", dtype::F32,
                                   hf ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{1}});
            } else if (scheme == fp8_scheme::channel) {
              s.tensors.push_back({base + ".weight_scale", dtype::F32, {n, 1}});
            } else {
              s.tensors.push_back({base + (hf ? ".weight_scale_inv" : ".weight_scale"), dtype::F32,
                                   {(n + 127) / 128, (k + 127) / 128}});
            }
          }
          jobs.push_back(std::move(j));
          continue;
        }
      } else {
        skipped[module] = not_linear;
      }
    }
    j.kind = job_kind::copy;
    j.outs = {s.tensors.size()};
    s.tensors.push_back({name, t.type, t.shape});
    jobs.push_back(std::move(j));
  }

  // --- output files: headers now, data by the workers ---------------------------------------
  staged_output staged(out_dir, fs::is_directory(in_path) ? in_path : in_dir);
  for (auto& s : shards) {
    open_shard(staged, s);
  }

  std::uint64_t total_in = 0;
  for (auto const& j : jobs) {
    total_in += j.in->bytes.size();
  }
  guard_checkpoint_mappings(ckpt);
  test_stop_point("reading");
  worker_pool_jobs pool_jobs;
  pool_jobs.count = jobs.size();
  pool_jobs.run = [&](std::size_t i) {
    job& j = jobs[i];
    shard_plan const& s = shards[j.shard];
    if (j.kind == job_kind::copy) {
      write_copy(j, s);
    } else if (j.kind == job_kind::gptq) {
      write_gptq(j, s);
    } else if (j.kind == job_kind::ct_pack) {
      write_ct_pack(j, s);
    } else if (j.kind == job_kind::nvfp4 || j.kind == job_kind::mxfp4) {
      write_fp4(j, s);
    } else {
      write_fp8(j, s, scheme);
    }
    release(*j.in);
  };
  pool_jobs.bytes = [&](std::size_t i) { return static_cast<std::uint64_t>(jobs[i].in->bytes.size()); };
  pool_jobs.describe = [&](std::size_t i) { return jobs[i].in->name; };
  if (sink != nullptr) {
    pool_jobs.progress = [&](std::uint64_t done, std::uint64_t total) { sink->progress(done, total); };
  }
  pool_jobs.fewer_threads = [&](unsigned started, unsigned asked, std::string const& why) {
    note("qtl quantize: warning: could start only " + std::to_string(started) + " of " + std::to_string(asked) +
         " threads (" + why + "); going on with " + std::to_string(started) + "\n");
  };
  worker_pool_result const pool = run_worker_pool(static_cast<unsigned>(a.threads), pool_jobs);
  unsigned const used_threads = pool.threads;
  if (sink != nullptr) {
    sink->finished();
  }
  if (pool.failed) {
    throw data_error(pool.first_error);
  }

  // --- GPTQ zero points: v1 when every zero point is >= 1, else v2 ----------------------------
  bool any_zero = false;
  for (auto const& j : jobs) {
    any_zero = any_zero || (j.kind == job_kind::gptq && j.zero_has_zero);
  }
  std::string const checkpoint_format = any_zero ? "gptq_v2" : "gptq";
  write_gptq_zero_points(jobs, shards, !any_zero);

  // --- config files -------------------------------------------------------------------------
  written_format wf;
  using wkind = written_format::kind;
  wf.what = gptq                          ? wkind::gptq
            : fmt == out_format::fp8      ? wkind::fp8
            : fmt == out_format::ct_int   ? wkind::pack_quantized
            : fmt == out_format::nvfp4    ? wkind::nvfp4
                                          : wkind::mxfp4;
  wf.scheme = scheme;
  wf.checkpoint_format = checkpoint_format;
  wf.bits = static_cast<int>(int_bits);
  wf.group_size = int_group_size;
  wf.sym = int_sym;
  // compressed-tensors targets every Linear not ignored: list each linear layer kept, and
  // lm_head whenever it is not quantized (also when the checkpoint ties it to the embeddings).
  bool lm_head_quantized = false;
  for (auto const& j : jobs) {
    lm_head_quantized = lm_head_quantized || (j.kind != job_kind::copy && j.module == "lm_head");
  }
  if (!lm_head_quantized && skipped.count("lm_head") == 0) {
    wf.ignore.push_back("lm_head");
  }
  for (auto const& [m, why] : skipped) {
    if (why != not_linear) {
      wf.ignore.push_back(m);
    }
    if (why == moe_router) {
      wf.routers.push_back(m);
    }
  }
  ojson const q = written_quantization_config(qobj, cfg, wf);
  model_config["quantization_config"] = q;

  small_file(staged, "config.json", model_config.dump(2) + "\n");
  if (gptq) {
    small_file(staged, "quantize_config.json", q.dump(2) + "\n");
  }
  std::uint64_t total_out = 0;
  for (auto const& s : shards) {
    total_out += s.total;
  }
  if (sharded) {
    write_shard_index(staged, shards);
  }
  // The input folder's other files (tokenizer, generation_config.json, ...), copied; folders are
  // not. Each is read to its end or the run fails naming it (never a short copy).
  copy_input_extras(in_path, staged, shards);

  // --- commit: flush every shard, then swap the finished folder in ----------------------------
  for (auto& s : shards) {
    s.file->flush();
  }
  note(staged.commit());
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string const int_desc = "group " + std::to_string(int_group_size) + (int_sym ? " sym" : " asym");
  report.variant = gptq                        ? "checkpoint_format " + checkpoint_format
                   : fmt == out_format::fp8    ? scheme_name + " scales"
                   : fmt == out_format::ct_int ? "compressed-tensors pack-quantized, " + int_desc
                   : fmt == out_format::nvfp4  ? std::string("compressed-tensors nvfp4-pack-quantized")
                                               : std::string("compressed-tensors mxfp4-pack-quantized");
  report.threads = used_threads;
  for (auto const& j : jobs) {
    if (j.kind == job_kind::copy) {
      ++report.tensors_copied;
    } else if (j.kind == job_kind::gptq) {
      report.layers.push_back({j.module, "gptq " + std::to_string(j.bits) + "-bit group " +
                                             std::to_string(j.config_group_size) + (j.sym ? " sym" : " asym")});
    } else if (j.kind == job_kind::ct_pack) {
      report.layers.push_back({j.module, a.format + " int" + std::to_string(j.bits) + " " + int_desc});
    } else if (j.kind == job_kind::nvfp4) {
      report.layers.push_back({j.module, "nvfp4 e2m1, e4m3 scale per 16, global scale"});
    } else if (j.kind == job_kind::mxfp4) {
      report.layers.push_back({j.module, "mxfp4 e2m1, e8m0 scale per 32"});
    } else {
      report.layers.push_back({j.module, "fp8 e4m3 " + scheme_name});
    }
  }
  for (auto const& [m, why] : skipped) {
    report.kept.push_back({m, why});
  }
  report.bytes_in = total_in;
  report.bytes_out = total_out;
  return report;
}

}  // namespace qtl::tool
