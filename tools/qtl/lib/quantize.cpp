// qtl quantize's work (quantize_checkpoint, checkpoint.hpp): round-to-nearest quantization of every linear weight of a checkpoint, written in
// the layout sglang and vLLM load (research/checkpoint_formats.md).
//
//   qtl quantize IN OUT_DIR --format gptq|fp8 [--bits 4|8] [--group-size N] [--sym|--asym]
//                [--fp8-scheme tensor|channel|block] [--config QUANT_CONFIG.json] [--threads N]
//                [--device auto|cpu|cuda]
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
//         Activations dynamic: no input_scale.
// Everything else is copied unchanged; the shards keep their names, each shard's tensors ordered by
// element size (4-, 2-, then 1-byte) so that every tensor stays aligned; the index is rewritten;
// config.json gets the `quantization_config` (GPTQ also writes quantize_config.json); the input
// folder's other files are copied.
//
// Streaming: every output shard is created in a staging folder beside OUT_DIR, its header written
// first (offsets are known from the shapes), then worker threads quantize one tensor at a time (GPTQ
// in 256-column slices) and write the results at their offsets; input pages are released after use,
// so memory stays at a few tensors. Commit, lock and what a signal or a kill leaves: the folder is
// swapped in whole (staged_output.hpp), so OUT_DIR always holds one complete checkpoint.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include <qtl/group_size.hpp>

#include "../common.hpp"
#include "../config_tools.hpp"
#include "checkpoint.hpp"
#include "quant_config_writer.hpp"
#include "quantize_plan.hpp"
#include "../staged_output.hpp"
#include "tensor_writers.hpp"

namespace qtl::tool {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

/// A float type for a dtype the quantizers take.
bool is_float(dtype t) { return t == dtype::F16 || t == dtype::BF16 || t == dtype::F32; }

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
  if (a.format != "gptq" && a.format != "fp8") {
    throw usage_error("--format must be gptq or fp8");
  }
  if (a.sym && a.asym) {
    throw usage_error("--sym and --asym exclude each other");
  }
  bool const gptq = a.format == "gptq";
  // Flags of the other format are mistakes, not silently ignored.
  if (gptq && a.fp8_scheme) {
    throw usage_error("--fp8-scheme applies to --format fp8, not gptq");
  }
  if (!gptq) {
    for (auto const& [given, flag] : {std::pair{a.bits.has_value(), "--bits"}, std::pair{a.group_size.has_value(), "--group-size"},
                                      std::pair{a.sym, "--sym"}, std::pair{a.asym, "--asym"}}) {
      if (given) {
        throw usage_error(std::string(flag) + " applies to --format gptq, not fp8");
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
  if (scheme_name != "tensor" && scheme_name != "channel" && scheme_name != "block") {
    throw usage_error("--fp8-scheme " + scheme_name + ": expected tensor, channel or block");
  }
  fp8_scheme const scheme = scheme_name == "tensor"    ? fp8_scheme::tensor
                            : scheme_name == "channel" ? fp8_scheme::channel
                                                       : fp8_scheme::block;
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
    if (!gptq && cfg.family != quant_family::fp8 && cfg.family != quant_family::compressed_tensors) {
      throw usage_error("--config " + config_path + " is a '" + cfg.quant_method +
                        "' config, not fp8 or compressed-tensors");
    }
    if (!gptq && cfg.family == quant_family::fp8 && scheme == fp8_scheme::channel) {
      throw usage_error("--fp8-scheme channel is written as compressed-tensors; an HF 'fp8' config "
                        "describes block (weight_block_size) or per-tensor scales");
    }
  } else if (gptq) {
    cfg.family = quant_family::gptq;
    cfg.quant_method = "gptq";
    qobj = ojson::object();
  } else {
    cfg.family = scheme == fp8_scheme::block ? quant_family::fp8 : quant_family::compressed_tensors;
    cfg.quant_method = scheme == fp8_scheme::block ? "fp8" : "compressed-tensors";
    cfg.skip_list = {"lm_head"};
    cfg.skip_list_field = scheme == fp8_scheme::block ? "modules_to_not_convert" : "ignore";
    qobj = ojson::object();
  }
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
      if (kind == layer_kind::linear || kind == layer_kind::lm_head) {
        std::string const engine_name = fused_name(cfg, module).value_or(module);
        decision const d = decide(cfg, sg, engine_name, kind);
        if (d.error) {
          throw data_error(module + ": " + d.consumer + " would raise " + *d.error + " for " + engine_name);
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
            // The library's rule (qtl/group_size.hpp), and the engines' stricter one: they need
            // K % group_size == 0 for every size but -1 (vLLM/sglang create_weights), so a size
            // above K, which the rule reads as one group per column, is refused too.
            std::int64_t const gcfg = j.config_group_size;
            group_size_result const gr = normalize_group_size(gcfg, k);
            if (!gr.ok() || (gcfg != -1 && k % gcfg != 0)) {
              throw data_error(name + ": K = " + std::to_string(k) + " is not a multiple of group_size " +
                               std::to_string(gcfg) + " (the engines need K % group_size == 0, or -1)");
            }
            j.group_rows = gr.rows;
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
          } else {
            j.kind = job_kind::fp8;
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
        skipped[module] = "not a linear layer";
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
    std::string const header = lay_out(s);
    s.file = std::make_unique<output_file>(staged, s.name);
    if (::ftruncate(s.file->fd(), static_cast<off_t>(s.total)) != 0) {
      throw data_error(s.file->shown() + ": cannot size the file: " + std::strerror(errno));
    }
    unsigned char len[8];
    std::uint64_t const hn = header.size();
    for (int i = 0; i < 8; ++i) {
      len[i] = static_cast<unsigned char>(hn >> (8 * i));
    }
    s.file->pwrite_all(len, 8, 0);
    s.file->pwrite_all(header.data(), header.size(), 8);
  }

  std::uint64_t total_in = 0;
  for (auto const& j : jobs) {
    total_in += j.in->bytes.size();
  }
  unsigned const threads = a.threads > 0 ? static_cast<unsigned>(a.threads)
                                         : std::max(1u, std::thread::hardware_concurrency());
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> done_bytes{0};
  std::atomic<bool> failed{false};
  std::mutex err_mu;
  std::string first_error;
  std::mutex progress_mu;
  auto worker = [&]() {
    for (;;) {
      std::size_t const i = next.fetch_add(1);
      if (i >= jobs.size() || failed.load()) {
        return;
      }
      job& j = jobs[i];
      shard_plan const& s = shards[j.shard];
      try {
        if (j.kind == job_kind::copy) {
          write_copy(j, s);
        } else if (j.kind == job_kind::gptq) {
          write_gptq(j, s);
        } else {
          write_fp8(j, s, scheme);
        }
        release(*j.in);
      } catch (std::exception const& e) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (!failed.exchange(true)) {
          first_error = j.in->name + ": " + e.what();
        }
        return;
      }
      std::uint64_t const d = done_bytes.fetch_add(j.in->bytes.size()) + j.in->bytes.size();
      if (sink != nullptr) {
        std::lock_guard<std::mutex> lock(progress_mu);
        sink->progress(d, total_in);
      }
    }
  };
  guard_checkpoint_mappings(ckpt);
  test_stop_point("reading");
  unsigned used_threads = 1;
  {
    // The calling thread is the first worker; a thread the system will not create (ulimit -u,
    // address space) leaves fewer workers, not an abort.
    std::vector<std::thread> pool;
    pool.reserve(threads - 1);
    std::string problem;
    for (unsigned t = 1; t < threads; ++t) {
      try {
        pool.emplace_back(worker);
      } catch (std::system_error const& e) {
        problem = e.what();
        break;
      }
    }
    used_threads = static_cast<unsigned>(pool.size()) + 1;
    if (!problem.empty()) {
      note("qtl quantize: warning: could start only " + std::to_string(used_threads) + " of " +
           std::to_string(threads) + " threads (" + problem + "); going on with " + std::to_string(used_threads) + "\n");
    }
    worker();
    for (auto& t : pool) {
      t.join();
    }
  }
  if (sink != nullptr) {
    sink->finished();
  }
  if (failed) {
    throw data_error(first_error);
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
  wf.gptq = gptq;
  wf.scheme = scheme;
  wf.checkpoint_format = checkpoint_format;
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
    ojson index = {{"metadata", {{"total_size", 0}}}, {"weight_map", ojson::object()}};
    std::uint64_t data_bytes = 0;
    for (auto const& s : shards) {
      data_bytes += s.total - s.header_bytes;
      for (auto const& t : s.tensors) {
        index["weight_map"][t.name] = s.name;
      }
    }
    index["metadata"]["total_size"] = data_bytes;
    small_file(staged, "model.safetensors.index.json", index.dump(2) + "\n");
  }
  // The input folder's other files (tokenizer, generation_config.json, ...), copied; folders are
  // not. Each is read to its end or the run fails naming it (never a short copy).
  if (fs::is_directory(in_path)) {
    std::set<std::string> mine = {"config.json", "quantize_config.json", "model.safetensors.index.json",
                                  "hf_quant_config.json"};
    for (auto const& s : shards) {
      mine.insert(s.name);
    }
    for (auto const& entry : fs::directory_iterator(in_path)) {
      std::string const fname = entry.path().filename().string();
      std::error_code dir_ec;
      if (mine.count(fname) != 0 || fname.empty() || fname[0] == '.' || entry.path().extension() == ".safetensors" ||
          fname.find(".safetensors.index.json") != std::string::npos || entry.is_directory(dir_ec)) {
        continue;
      }
      copy_extra_file(entry.path(), staged, fname);
    }
  }

  // --- commit: flush every shard, then swap the finished folder in ----------------------------
  for (auto& s : shards) {
    s.file->flush();
  }
  note(staged.commit());
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report.variant = gptq ? "checkpoint_format " + checkpoint_format : scheme_name + " scales";
  report.threads = used_threads;
  for (auto const& j : jobs) {
    if (j.kind == job_kind::copy) {
      ++report.tensors_copied;
    } else if (j.kind == job_kind::gptq) {
      report.layers.push_back({j.module, "gptq " + std::to_string(j.bits) + "-bit group " +
                                             std::to_string(j.config_group_size) + (j.sym ? " sym" : " asym")});
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
