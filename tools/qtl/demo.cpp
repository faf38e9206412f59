// qtl demo: the whole tool on a small checkpoint, with no input.
//
//   qtl demo [--out DIR]
//
// 1. builds a 2-layer Llama-shaped checkpoint (hidden 256, intermediate 512, 4 heads of 64, 2 KV
//    heads, vocabulary 512; fp16 weights from a fixed seed, normal-like with sigma 0.02) and two
//    quantization configs with skip and `dynamic` rules;
// 2. quantizes it to GPTQ int4 (layer 0's attention overridden to 8-bit group 64 by a `+:` rule,
//    layer 1's down_proj kept by a `-:` rule) and to FP8 with 128x128 block scales (lm_head and
//    layer 1's down_proj kept by `modules_to_not_convert`), through `qtl quantize`;
// 3. reads both results back with the safetensors reader, unpacks and dequantizes every layer
//    (GPTQ: w = scales[g_idx[k], n] * (q - z), v1 zeros stored minus one; FP8: code * block scale)
//    and prints, per layer, what was done and the error against the original weight, checking that
//    no element is off by more than half a quantization step (exit 2 otherwise).
// Files go to a temporary folder that is removed at the end, or to --out DIR, which keeps them:
// DIR must be new, empty or an earlier demo's (its `.qtl-output` marker says so); --force writes
// into any folder (files the demo does not write stay, the demo's own are overwritten).

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <qtl/dispatch.hpp>
#include <qtl/numeric.hpp>
#include <qtl/pack.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "staged_output.hpp"

namespace qtl::tool {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr int hidden = 256;
constexpr int intermediate = 512;
constexpr int layers = 2;
constexpr int vocab = 512;
constexpr int heads = 4;
constexpr int kv_heads = 2;
constexpr int head_dim = 64;

/// splitmix64: a fixed, portable stream of 64-bit values.
struct rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Roughly N(0, 1): the sum of 4 uniforms on [0, 1), centred and scaled (Irwin-Hall).
  float normal() {
    double u = 0;
    for (int i = 0; i < 4; ++i) {
      u += static_cast<double>(next() >> 11) * 0x1.0p-53;
    }
    return static_cast<float>((u - 2.0) * std::sqrt(3.0));
  }
};

struct layer_shape {
  std::string name;
  int n;
  int k;
};

std::vector<layer_shape> linear_layers() {
  std::vector<layer_shape> out;
  for (int i = 0; i < layers; ++i) {
    std::string const p = "model.layers." + std::to_string(i) + ".";
    out.push_back({p + "self_attn.q_proj", heads * head_dim, hidden});
    out.push_back({p + "self_attn.k_proj", kv_heads * head_dim, hidden});
    out.push_back({p + "self_attn.v_proj", kv_heads * head_dim, hidden});
    out.push_back({p + "self_attn.o_proj", hidden, heads * head_dim});
    out.push_back({p + "mlp.gate_proj", intermediate, hidden});
    out.push_back({p + "mlp.up_proj", intermediate, hidden});
    out.push_back({p + "mlp.down_proj", hidden, intermediate});
  }
  out.push_back({"lm_head", vocab, hidden});
  return out;
}

void write_text(fs::path const& p, std::string const& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out) {
    throw data_error(p.string() + ": cannot write");
  }
}

/// Writes the fp16 checkpoint and its config.json; returns the original weights by name.
std::map<std::string, std::vector<half_t>> build_checkpoint(fs::path const& dir) {
  std::map<std::string, std::vector<half_t>> w;
  rng r{20260501};
  std::vector<qtl::io::tensor_entry> entries;
  auto add = [&](std::string const& name, std::vector<std::int64_t> shape, float sigma, float mean) {
    std::size_t n = 1;
    for (auto d : shape) {
      n *= static_cast<std::size_t>(d);
    }
    auto& v = w[name];
    v.resize(n);
    for (auto& x : v) {
      x = from_float<half_t>(mean + sigma * r.normal());
    }
    qtl::io::tensor_entry e;
    e.name = name;
    e.type = dtype::F16;
    e.shape = std::move(shape);
    e.bytes = std::as_bytes(std::span<half_t const>(v));
    entries.push_back(std::move(e));
  };
  add("model.embed_tokens.weight", {vocab, hidden}, 0.02f, 0.0f);
  for (auto const& l : linear_layers()) {
    if (l.name == "lm_head") {
      continue;
    }
    add(l.name + ".weight", {l.n, l.k}, 0.02f, 0.0f);
  }
  for (int i = 0; i < layers; ++i) {
    std::string const p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {hidden}, 0.01f, 1.0f);
    add(p + "post_attention_layernorm.weight", {hidden}, 0.01f, 1.0f);
  }
  add("model.norm.weight", {hidden}, 0.01f, 1.0f);
  add("lm_head.weight", {vocab, hidden}, 0.02f, 0.0f);
  qtl::io::write_safetensors(dir / "model.safetensors", entries, qtl::io::json{{"format", "pt"}});
  ojson cfg = {{"architectures", {"LlamaForCausalLM"}},
               {"model_type", "llama"},
               {"hidden_size", hidden},
               {"intermediate_size", intermediate},
               {"num_hidden_layers", layers},
               {"num_attention_heads", heads},
               {"num_key_value_heads", kv_heads},
               {"head_dim", head_dim},
               {"hidden_act", "silu"},
               {"max_position_embeddings", 2048},
               {"rms_norm_eps", 1e-5},
               {"rope_theta", 10000.0},
               {"vocab_size", vocab},
               {"tie_word_embeddings", false},
               {"attention_bias", false},
               {"mlp_bias", false},
               {"bos_token_id", 1},
               {"eos_token_id", 2},
               {"torch_dtype", "float16"}};
  write_text(dir / "config.json", cfg.dump(2) + "\n");
  return w;
}

/// Creates the --out folder, or checks that the demo may write into it (new, empty, an earlier
/// demo's, or `force`), and marks it as the demo's.
void prepare_out(fs::path const& root, bool force) {
  std::error_code ec;
  auto const st = fs::status(root, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    throw data_error(root.string() + ": --out names a file that is not a folder; the demo writes a folder there");
  }
  if (!fs::exists(st)) {
    fs::create_directories(root, ec);
    if (ec) {
      throw data_error(root.string() + ": cannot create the --out folder: " + ec.message());
    }
  } else if (std::string const foreign = force ? std::string() : foreign_entries(root, "demo"); !foreign.empty()) {
    throw data_error(root.string() + ": the --out folder holds " + foreign +
                     ", which qtl demo did not write; the demo writes model/, gptq-int4/, fp8-block/ and two "
                     "configs there: choose a new or empty folder or an earlier demo's, or give --force");
  }
  write_text(root / output_marker, output_marker_text("demo", "demo"));
}

/// Runs `qtl quantize` with `args` as if from the command line.
void quantize(std::vector<std::string> args, bool force) {
  CLI::App app{"qtl"};
  command const c = define_quantize(app);
  if (force) {
    args.push_back("--force");
  }
  args.insert(args.begin(), "quantize");
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  app.parse(args);
  if (int const rc = c.run(); rc != 0) {
    throw data_error("qtl quantize failed with exit code " + std::to_string(rc));
  }
}

struct error_stats {
  double max_abs = 0;
  double sum_sq_err = 0;
  double sum_sq = 0;
  double worst_ratio = 0;  // max |err| / allowed
  std::size_t n = 0;
  void add(double w, double d, double allowed) {
    double const e = std::fabs(w - d);
    max_abs = std::max(max_abs, e);
    sum_sq_err += e * e;
    sum_sq += w * w;
    worst_ratio = std::max(worst_ratio, allowed > 0 ? e / allowed : (e > 0 ? 1e9 : 0.0));
    ++n;
  }
  double rel_rms() const { return sum_sq > 0 ? std::sqrt(sum_sq_err / sum_sq) : 0.0; }
};

std::string fmt_err(error_stats const& s) {
  std::ostringstream o;
  o << std::scientific << std::setprecision(2) << "rel rms " << s.rel_rms() << ", max " << s.max_abs;
  return o.str();
}

/// GPTQ: dequantizes layer `m` of the quantized checkpoint against the original `w` [N, K].
std::string check_gptq(qtl::io::safetensors_file const& f, std::string const& m, std::vector<half_t> const& w,
                       int n, int k, bool v1, bool& ok) {
  auto const* qw = f.find(m + ".qweight");
  if (qw == nullptr) {
    auto const* t = f.find(m + ".weight");
    bool const same = t != nullptr && t->bytes.size() == w.size() * 2 &&
                      std::memcmp(t->bytes.data(), w.data(), t->bytes.size()) == 0;
    ok = ok && same;
    return same ? "kept fp16 (bytes identical)" : "MISSING or changed";
  }
  auto const qweight = qtl::io::tensor_values<std::int32_t>(*qw);
  auto const qzeros = qtl::io::tensor_values<std::int32_t>(f.at(m + ".qzeros"));
  auto const scales = qtl::io::tensor_values<half_t>(f.at(m + ".scales"), dtype::F16);
  auto const g_idx = qtl::io::tensor_values<std::int32_t>(f.at(m + ".g_idx"));
  int const bits = static_cast<int>(qw->shape[0] * 32 / k);
  int const groups = static_cast<int>(f.at(m + ".scales").shape[0]);
  host_tensor<std::int32_t, 2> q({k, n});
  host_tensor<std::int32_t, 2> z({groups, n});
  auto const qv = make_view(qweight.data(), k * bits / 32, n);
  auto const zv = make_view(qzeros.data(), groups, n * bits / 32);
  qtl::dispatch_bits<4, 8>(bits, [&]<int Bits>() {
    unpack_rows<Bits>(qv, q.view());
    unpack_cols<Bits>(zv, z.view());
  });
  error_stats st;
  for (int nn = 0; nn < n; ++nn) {
    for (int kk = 0; kk < k; ++kk) {
      int const g = g_idx[static_cast<std::size_t>(kk)];
      double const s = to_float(scales[static_cast<std::size_t>(g * n + nn)]);
      int const zero = z.view()(g, nn) + (v1 ? 1 : 0);
      double const d = s * (q.view()(kk, nn) - zero);
      // half a step, plus the fp16 roundings of w / s and of the scale in the reference (each
      // 2^-11 relative, i.e. up to 2^-11 |w| apiece)
      double const x = to_float(w[static_cast<std::size_t>(nn * k + kk)]);
      st.add(x, d, 0.5 * s + std::fabs(x) * 0x1.0p-10 + 1e-7);
    }
  }
  ok = ok && st.worst_ratio <= 1.0;
  std::ostringstream o;
  o << "gptq int" << bits << " g" << k / groups << ", " << fmt_err(st) << (st.worst_ratio <= 1.0 ? "" : "  FAIL");
  return o.str();
}

/// FP8 block: dequantizes layer `m` against the original `w` [N, K].
std::string check_fp8(qtl::io::safetensors_file const& f, std::string const& m, std::vector<half_t> const& w,
                      int n, int k, bool& ok) {
  auto const* t = f.find(m + ".weight");
  auto const* si = f.find(m + ".weight_scale_inv");
  if (t == nullptr || t->type != dtype::F8_E4M3 || si == nullptr) {
    bool const same = t != nullptr && t->bytes.size() == w.size() * 2 &&
                      std::memcmp(t->bytes.data(), w.data(), t->bytes.size()) == 0;
    ok = ok && same;
    return same ? "kept fp16 (bytes identical)" : "MISSING or changed";
  }
  auto const codes = qtl::io::tensor_values<std::uint8_t>(*t, dtype::F8_E4M3);
  auto const scales = qtl::io::tensor_values<float>(*si);
  int const bk = (k + 127) / 128;
  error_stats st;
  for (int nn = 0; nn < n; ++nn) {
    for (int kk = 0; kk < k; ++kk) {
      double const s = scales[static_cast<std::size_t>((nn / 128) * bk + kk / 128)];
      double const d = e4m3fn_to_float(codes[static_cast<std::size_t>(nn * k + kk)]) * s;
      double const x = to_float(w[static_cast<std::size_t>(nn * k + kk)]);
      // e4m3 keeps 3 mantissa bits: half an ulp is 2^-4 of the value (2^-10 * s below the normals)
      st.add(x, d, std::max(std::fabs(x) * 0x1.0p-4, s * 0x1.0p-10) * 1.001);
    }
  }
  ok = ok && st.worst_ratio <= 1.0;
  return "fp8 e4m3 128x128 blocks, " + fmt_err(st) + (st.worst_ratio <= 1.0 ? "" : "  FAIL");
}

int run_demo(std::string const& out_opt, bool force) {
  fs::path root;
  bool const keep = !out_opt.empty();
  if (keep) {
    root = out_opt;
    prepare_out(root, force);
  } else {
    std::string tmpl = (fs::temp_directory_path() / "qtl-demo-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw data_error("cannot create a temporary folder: " + std::string(std::strerror(errno)));
    }
    root = tmpl;
  }
  struct cleanup {
    fs::path p;
    bool active;
    ~cleanup() {
      if (active) {
        std::error_code ec;
        fs::remove_all(p, ec);
      }
    }
  } guard{root, !keep};

  fs::path const model = root / "model";
  fs::path const gptq_dir = root / "gptq-int4";
  fs::path const fp8_dir = root / "fp8-block";
  fs::create_directories(model);
  std::cout << "== 1. a Llama-shaped fp16 checkpoint: " << layers << " layers, hidden " << hidden
            << ", intermediate " << intermediate << ", vocabulary " << vocab << "\n";
  auto const weights = build_checkpoint(model);

  ojson gptq_cfg = {{"quantization_config",
                     {{"quant_method", "gptq"},
                      {"bits", 4},
                      {"group_size", 128},
                      {"sym", true},
                      {"desc_act", false},
                      {"dynamic",
                       {{"+:.*\\.0\\.self_attn\\..*", {{"bits", 8}, {"group_size", 64}}},
                        {"-:.*\\.1\\.mlp\\.down_proj", ojson::object()}}}}}};
  ojson fp8_cfg = {{"quantization_config",
                    {{"quant_method", "fp8"},
                     {"fmt", "e4m3"},
                     {"activation_scheme", "dynamic"},
                     {"weight_block_size", {128, 128}},
                     {"modules_to_not_convert", {"lm_head", "model.layers.1.mlp.down_proj"}}}}};
  write_text(root / "gptq_config.json", gptq_cfg.dump(2) + "\n");
  write_text(root / "fp8_config.json", fp8_cfg.dump(2) + "\n");
  std::cout << "   GPTQ config (" << (root / "gptq_config.json").string() << "): "
            << gptq_cfg["quantization_config"].dump() << "\n";
  std::cout << "   FP8 config (" << (root / "fp8_config.json").string() << "): "
            << fp8_cfg["quantization_config"].dump() << "\n\n";

  std::cout << "== 2. qtl quantize " << model.string() << " " << gptq_dir.string()
            << " --format gptq --config gptq_config.json\n";
  quantize({model.string(), gptq_dir.string(), "--format", "gptq", "--config", (root / "gptq_config.json").string()}, force);
  std::cout << "\n== qtl quantize " << model.string() << " " << fp8_dir.string()
            << " --format fp8 --fp8-scheme block --config fp8_config.json\n";
  quantize({model.string(), fp8_dir.string(), "--format", "fp8", "--fp8-scheme", "block", "--config",
            (root / "fp8_config.json").string()},
           force);

  std::cout << "\n== 3. read back, dequantize, compare with the original weights\n";
  auto const gf = qtl::io::safetensors_file::open(gptq_dir / "model.safetensors");
  auto const ff = qtl::io::safetensors_file::open(fp8_dir / "model.safetensors");
  std::ifstream gin(gptq_dir / "config.json");
  ojson const gconf = ojson::parse(gin);
  bool const v1 = gconf["quantization_config"]["checkpoint_format"] == "gptq";
  bool ok = true;
  std::cout << "   " << std::left << std::setw(34) << "layer" << std::setw(58) << "GPTQ" << "FP8\n";
  for (auto const& l : linear_layers()) {
    auto const& w = weights.at(l.name + ".weight");
    std::cout << "   " << std::setw(34) << l.name << std::setw(58) << check_gptq(gf, l.name, w, l.n, l.k, v1, ok)
              << check_fp8(ff, l.name, w, l.n, l.k, ok) << "\n";
  }
  std::cout << "\n" << (ok ? "demo: every layer within half a quantization step of the original"
                           : "demo: FAILED: a layer is off by more than half a step or was changed")
            << "\n";
  if (keep) {
    std::cout << "files: " << root.string() << " (model/, gptq-int4/, fp8-block/, the two configs)\n";
  } else {
    std::cout << "files: " << root.string() << " (a temporary folder, removed now; --out DIR keeps them)\n";
  }
  return ok ? exit_ok : exit_data;
}

}  // namespace

command define_demo(CLI::App& app) {
  auto out = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "demo", "build a small Llama-shaped checkpoint, quantize it to GPTQ int4 and FP8, read the "
              "results back and print the error of every layer");
  cmd->add_option("--out", *out,
                  "keep the files in this folder: a new, empty or earlier demo's folder (default: a temporary "
                  "folder, removed)");
  cmd->add_flag("--force", *force, "write into the --out folder even when it holds other files (they stay)");
  return {cmd, [out, force]() {
            try {
              return run_demo(*out, *force);
            } catch (fs::filesystem_error const& e) {  // a message naming the path, not the library's words
              throw data_error((e.path1().empty() ? std::string() : e.path1().string() + ": ") + e.code().message());
            }
          }};
}

}  // namespace qtl::tool
