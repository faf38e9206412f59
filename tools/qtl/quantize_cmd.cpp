// qtl quantize: round-to-nearest quantization of every linear weight of a checkpoint, written in
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
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include <qtl/fp8.hpp>
#include <qtl/group_size.hpp>
#include <qtl/io/regular_file.hpp>
#include <qtl/pack.hpp>
#include <qtl/transpose.hpp>
#include <qtl/quantize.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "config_tools.hpp"
#include "recognize.hpp"
#include "staged_output.hpp"

namespace qtl::tool {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

/// A small file of the staged output, written whole and flushed.
void small_file(staged_output& out, std::string const& name, std::string const& text) {
  output_file f(out, name);
  f.pwrite_all(text.data(), text.size(), 0);
  f.flush();
}

/// Copies the regular file `from` into the staged output as `name`, reading it to its end.
/// @throws data_error naming `from` when it is not a regular file or cannot be read whole.
void copy_extra_file(fs::path const& from, staged_output& out, std::string const& name) {
  struct stat st {};
  std::string why;
  int const fd = qtl::io::open_regular_file(from, st, why);
  if (fd < 0) {
    throw data_error(from.string() + ": " + why + " (the input folder's other files are copied)");
  }
  output_file f(out, name);
  std::vector<char> buf(std::size_t{1} << 20);
  std::uint64_t off = 0;
  for (;;) {
    ssize_t const r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r < 0) {
      int const err = errno;
      ::close(fd);
      throw data_error(from.string() + ": cannot read: " + std::strerror(err));
    }
    if (r == 0) {
      break;
    }
    f.pwrite_all(buf.data(), static_cast<std::size_t>(r), off);
    off += static_cast<std::uint64_t>(r);
  }
  ::close(fd);
  if (off != static_cast<std::uint64_t>(st.st_size)) {
    throw data_error(from.string() + ": read " + std::to_string(off) + " of its " + std::to_string(st.st_size) +
                     " bytes (it changed while it was copied)");
  }
  f.flush();
}

// ------------------------------------------------------------------------------------------------
// The plan: output shards, their tensors and the jobs that produce them

enum class job_kind { copy, gptq, fp8 };
enum class fp8_scheme { tensor, channel, block };

struct out_tensor {
  std::string name;
  dtype type;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // absolute offset in the shard file
  std::uint64_t bytes = 0;
};

struct job {
  job_kind kind = job_kind::copy;
  tensor_info const* in = nullptr;
  std::size_t shard = 0;               // output shard
  std::vector<std::size_t> outs;       // indices into the shard's tensors
  std::string module;                  // quantized layers
  std::string why;                     // skipped layers: the reason
  // GPTQ
  int bits = 4;
  index_t group_size = 128;  // effective (K when channelwise)
  std::int64_t config_group_size = 128;
  bool sym = true;
  // results kept to the end: GPTQ zero points (G x N, unpacked) and the error statistics
  std::vector<std::int32_t> zeros;
  bool zero_has_zero = false;
  bool allow_nonfinite = false;  // --allow-nonfinite
};

struct shard_plan {
  std::string name;
  std::vector<out_tensor> tensors;
  std::uint64_t header_bytes = 0;  // 8 + N
  std::uint64_t total = 0;
  std::unique_ptr<output_file> file;
};

std::uint64_t numel_of(std::vector<std::int64_t> const& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) {
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

/// Assigns offsets (4-, 2-, then 1-byte tensors, stably) and builds the header text.
std::string lay_out(shard_plan& s) {
  std::vector<std::size_t> order(s.tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return qtl::io::dtype_size(s.tensors[a].type) > qtl::io::dtype_size(s.tensors[b].type);
  });
  ojson header = ojson::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::uint64_t off = 0;
  for (std::size_t i : order) {
    auto& t = s.tensors[i];
    t.bytes = numel_of(t.shape) * qtl::io::dtype_size(t.type);
    header[t.name] = {{"dtype", std::string(qtl::io::dtype_name(t.type))},
                      {"shape", t.shape},
                      {"data_offsets", {off, off + t.bytes}}};
    t.offset = off;
    off += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  s.header_bytes = 8 + text.size();
  for (auto& t : s.tensors) {
    t.offset += s.header_bytes;
  }
  s.total = s.header_bytes + off;
  return text;
}

// ------------------------------------------------------------------------------------------------
// Arguments and the config

/// The most worker threads --threads takes.
constexpr int max_threads = 4096;

struct quantize_args {
  std::string in;
  std::string out_dir;
  std::string format;
  int bits = 4;
  std::string group_size_text;
  bool sym = false;
  bool asym = false;
  std::string fp8_scheme = "channel";
  std::string config;
  int threads = 0;
  std::string device = "auto";
  bool allow_nonfinite = false;
  CLI::Option* bits_opt = nullptr;
  CLI::Option* group_opt = nullptr;
  CLI::Option* sym_opt = nullptr;
  CLI::Option* asym_opt = nullptr;
  CLI::Option* scheme_opt = nullptr;
};

/// `--group-size`: -1 or a positive integer that fits 64 bits. @throws usage_error
std::int64_t parse_group_size(std::string const& text) {
  std::int64_t v = 0;
  auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    throw usage_error("--group-size " + text + ": too large (a group size is -1 or a positive integer below 2^63)");
  }
  if (ec != std::errc() || end != text.data() + text.size() || (v != -1 && v <= 0)) {
    throw usage_error("--group-size " + text + ": expected -1 (one group per column) or a positive integer");
  }
  return v;
}

/// A float type for a dtype the quantizers take.
bool is_float(dtype t) { return t == dtype::F16 || t == dtype::BF16 || t == dtype::F32; }

/// Refuses a checkpoint that is quantized already: its tensors (GPTQ/AWQ `qweight`, FP8
/// weights with scales, NVFP4/MXFP4 blocks, any F8 tensor) or its config.json's
/// `quantization_config`. No format qtl writes takes quantized input: requantizing would copy the
/// quantized tensors under a config of another format.
/// @throws data_error naming the first tensors (and how many more).
void refuse_quantized_input(qtl::io::safetensors_checkpoint const& ckpt, ojson const& model_config,
                            fs::path const& config_path) {
  std::vector<tensor_info const*> all;
  all.reserve(ckpt.tensors().size());
  std::vector<std::string> found;
  for (auto const& e : ckpt.tensors()) {
    all.push_back(e.tensor);
  }
  for (auto const& m : recognize(all)) {
    for (auto const& t : m.tensors) {
      found.push_back(t + " (" + m.scheme + ")");
    }
  }
  if (found.empty()) {
    for (auto const* t : all) {
      if (t->type == dtype::F8_E4M3 || t->type == dtype::F8_E5M2 || t->type == dtype::F8_E8M0) {
        found.push_back(t->name + " (" + std::string(qtl::io::dtype_name(t->type)) + ")");
      }
    }
  }
  if (!found.empty()) {
    std::string list;
    for (std::size_t i = 0; i < found.size() && i < 4; ++i) {
      list += (i == 0 ? "" : ", ") + qtl::io::detail::printable(found[i]);
    }
    if (found.size() > 4) {
      list += " and " + std::to_string(found.size() - 4) + " more";
    }
    throw data_error("the input is quantized already: " + list +
                     "; qtl quantize takes a float (F32, F16, BF16) checkpoint");
  }
  if (model_config.is_object() && model_config.contains("quantization_config")) {
    auto const& q = model_config["quantization_config"];
    std::string const method = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()
                                   ? q["quant_method"].get<std::string>()
                                   : std::string("unknown");
    throw data_error(config_path.string() + ": the input is quantized already (its quantization_config says '" +
                     qtl::io::detail::printable(method) + "'); qtl quantize takes a float checkpoint");
  }
}

// ------------------------------------------------------------------------------------------------
// The workers

/// Lets the kernel drop the (clean, file-backed) pages of an input range this process touched.
void release(tensor_info const& t) {
  auto const page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto b = reinterpret_cast<std::uintptr_t>(t.bytes.data());
  auto e = b + t.bytes.size();
  b = (b + page - 1) / page * page;
  e = e / page * page;
  if (e > b) {
    ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  }
}

template <class T>
view2d<T const> weight_view(tensor_info const& t) {
  // The mapping is page-aligned and the writer keeps tensors aligned; a misaligned tensor of a
  // foreign file is copied by typed_tensor's caller instead (see run_gptq / run_fp8).
  return make_view(reinterpret_cast<T const*>(t.bytes.data()), t.shape[0], t.shape[1]);
}

/// The weight as T, aligned (a copy only when the file's bytes are not aligned for T).
template <class T>
struct aligned_weight {
  explicit aligned_weight(tensor_info const& t) {
    if (reinterpret_cast<std::uintptr_t>(t.bytes.data()) % alignof(T) == 0) {
      v = weight_view<T>(t);
    } else {
      copy.resize(t.bytes.size() / sizeof(T));
      std::memcpy(copy.data(), t.bytes.data(), t.bytes.size());
      v = make_view(static_cast<T const*>(copy.data()), t.shape[0], t.shape[1]);
    }
  }
  std::vector<T> copy;
  view2d<T const> v;
};

template <scalar_type Q, class T>
void gptq_slices(job& j, view2d<T const> w, shard_plan const& s) {
  index_t const n = w.extent[0];
  index_t const k = w.extent[1];
  index_t const gs = j.group_size;
  index_t const groups = k / gs;
  constexpr int bits = static_cast<int>(Q.size_bits());
  constexpr int pf = 32 / bits;
  std::vector<std::int32_t> qweight(static_cast<std::size_t>(k / pf * n));
  std::vector<half_t> scales(static_cast<std::size_t>(groups * n));
  j.zeros.assign(static_cast<std::size_t>(groups * n), 0);
  index_t const slice = 256;
  host_tensor<T, 2> wt({k, std::min(slice, n)});
  host_tensor<T, 2> w_ref({k, std::min(slice, n)});
  host_tensor<std::int32_t, 2> w_q({k, std::min(slice, n)});
  host_tensor<T, 2> w_s({groups, std::min(slice, n)});
  host_tensor<std::int32_t, 2> w_zp({groups, std::min(slice, n)});
  for (index_t n0 = 0; n0 < n; n0 += slice) {
    index_t const c = std::min(slice, n - n0);
    // transpose rows n0..n0+c of W [N, K] into (K, c)
    view2d<T> t = make_view(wt.view().data, k, c);
    view2d<T const> rows_nk = make_view(&w(n0, 0), c, k);
    rows_nk.stride[0] = w.stride[0];
    transpose(rows_nk, t);
    // the input rows just read are not needed again: let the kernel drop their pages
    if (j.in->bytes.data() == reinterpret_cast<std::byte const*>(w.data)) {
      tensor_info rows;
      rows.bytes = j.in->bytes.subspan(static_cast<std::size_t>(n0 * k) * sizeof(T),
                                       static_cast<std::size_t>(c * k) * sizeof(T));
      release(rows);
    }
    quantize_outputs<T> out{make_view(w_ref.view().data, k, c), make_view(w_q.view().data, k, c),
                            make_view(w_s.view().data, groups, c), make_view(w_zp.view().data, groups, c)};
    quantize_options opt;
    opt.zero_points = !j.sym;
    quantize_weights<Q>(view2d<T const>(t), std::optional<index_t>(j.config_group_size), out, opt);
    view2d<std::int32_t> qw = make_view(qweight.data() + n0, k / pf, c);
    qw.stride[0] = n;
    pack_rows<bits>(view2d<std::int32_t const>(out.w_q), qw);
    for (index_t g = 0; g < groups; ++g) {
      for (index_t r = 0; r < c; ++r) {
        auto const idx = static_cast<std::size_t>(g * n + n0 + r);
        if constexpr (std::is_same_v<T, half_t>) {
          scales[idx] = out.w_s(g, r);
        } else {
          scales[idx] = from_float<half_t>(to_float(out.w_s(g, r)));
        }
        std::int32_t const z = j.sym ? Q.bias : out.w_zp(g, r);
        j.zeros[idx] = z;
        j.zero_has_zero = j.zero_has_zero || z == 0;
      }
    }
  }
  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(k));
  for (index_t kk = 0; kk < k; ++kk) {
    g_idx[static_cast<std::size_t>(kk)] = static_cast<std::int32_t>(kk / gs);
  }
  // outs: qweight, qzeros (written at the end), scales, g_idx
  s.file->pwrite_all(qweight.data(), qweight.size() * 4, s.tensors[j.outs[0]].offset);
  s.file->pwrite_all(scales.data(), scales.size() * 2, s.tensors[j.outs[2]].offset);
  s.file->pwrite_all(g_idx.data(), g_idx.size() * 4, s.tensors[j.outs[3]].offset);
}

/// Refuses a weight with a NaN or an infinity (GPTQ scales would be NaN, FP8 scales infinite),
/// naming the tensor and the first bad element, unless --allow-nonfinite.
/// @throws data_error
template <class T>
void check_finite(view2d<T const> w, bool allow) {
  if (allow) {
    return;
  }
  index_t const n = w.extent[0];
  index_t const k = w.extent[1];
  for (index_t r = 0; r < n; ++r) {
    T const* row = &w(r, 0);
    for (index_t c = 0; c < k; ++c) {
      float const x = to_float(row[c]);
      if (!std::isfinite(x)) {
        throw data_error("element [" + std::to_string(r) + ", " + std::to_string(c) + "] is " +
                         (std::isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf") +
                         " (the scales would not be finite; --allow-nonfinite quantizes it anyway)");
      }
    }
  }
}

template <class T>
void run_gptq(job& j, shard_plan const& s) {
  aligned_weight<T> w(*j.in);
  check_finite(w.v, j.allow_nonfinite);
  if (j.bits == 4) {
    j.sym ? gptq_slices<qtl::uint4b8>(j, w.v, s) : gptq_slices<qtl::uint4>(j, w.v, s);
  } else {
    j.sym ? gptq_slices<qtl::uint8b128>(j, w.v, s) : gptq_slices<qtl::uint8>(j, w.v, s);
  }
}

template <class T>
void run_fp8(job& j, shard_plan const& s, fp8_scheme scheme) {
  aligned_weight<T> w(*j.in);
  check_finite(w.v, j.allow_nonfinite);
  index_t const n = w.v.extent[0];
  index_t const k = w.v.extent[1];
  std::vector<float8_e4m3fn_t> q(static_cast<std::size_t>(n * k));
  view2d<float8_e4m3fn_t> qv = make_view(q.data(), n, k);
  std::vector<float> scales;
  if (scheme == fp8_scheme::tensor) {
    scales.push_back(scaled_fp8_quant_dynamic<float8_e4m3fn_t>(w.v, qv));
  } else if (scheme == fp8_scheme::channel) {
    scales.resize(static_cast<std::size_t>(n));
    scaled_fp8_quant_per_token<float8_e4m3fn_t>(w.v, qv, make_view(scales.data(), n));
  } else {
    constexpr index_t b = 128;
    index_t const bn = (n + b - 1) / b;
    index_t const bk = (k + b - 1) / b;
    scales.resize(static_cast<std::size_t>(bn * bk));
    for (index_t i = 0; i < bn; ++i) {
      for (index_t jj = 0; jj < bk; ++jj) {
        index_t const rows = std::min(b, n - i * b);
        index_t const cols = std::min(b, k - jj * b);
        view2d<T const> in = make_view(&w.v(i * b, jj * b), rows, cols);
        in.stride[0] = k;
        view2d<float8_e4m3fn_t> out = make_view(&qv(i * b, jj * b), rows, cols);
        out.stride[0] = k;
        float const amax = std::max(fp8_amax(in), 1e-12f);
        float const scale = amax / 448.0f;
        scaled_fp8_quant_static<float8_e4m3fn_t>(in, scale, out);
        scales[static_cast<std::size_t>(i * bk + jj)] = scale;
      }
    }
  }
  s.file->pwrite_all(q.data(), q.size(), s.tensors[j.outs[0]].offset);
  s.file->pwrite_all(scales.data(), scales.size() * 4, s.tensors[j.outs[1]].offset);
}

void run_copy(job const& j, shard_plan const& s) {
  // In slices, releasing the input pages behind, so that a large tensor is never resident whole.
  std::size_t const slice = std::size_t{64} << 20;
  auto const& bytes = j.in->bytes;
  for (std::size_t off = 0; off < bytes.size(); off += slice) {
    std::size_t const len = std::min(slice, bytes.size() - off);
    s.file->pwrite_all(bytes.data() + off, len, s.tensors[j.outs[0]].offset + off);
    tensor_info part;
    part.bytes = bytes.subspan(off, len);
    release(part);
  }
}

// ------------------------------------------------------------------------------------------------

std::string human_bytes(std::uint64_t b) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(b >= (1u << 30) ? 2 : 1);
  if (b >= (std::uint64_t{1} << 30)) {
    o << static_cast<double>(b) / (1u << 30) << " GiB";
  } else if (b >= (1u << 20)) {
    o << static_cast<double>(b) / (1u << 20) << " MiB";
  } else if (b >= 1024) {
    o << static_cast<double>(b) / 1024 << " KiB";
  } else {
    o << b << " B";
  }
  return o.str();
}

int run_quantize(quantize_args const& a) {
  auto const t0 = std::chrono::steady_clock::now();
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
  if (gptq && a.scheme_opt->count() > 0) {
    throw usage_error("--fp8-scheme applies to --format fp8, not gptq");
  }
  if (!gptq) {
    for (auto const* o : {a.bits_opt, a.group_opt, a.sym_opt, a.asym_opt}) {
      if (o->count() > 0) {
        throw usage_error(o->get_name() + " applies to --format gptq, not fp8");
      }
    }
  }
  fp8_scheme const scheme = a.fp8_scheme == "tensor"    ? fp8_scheme::tensor
                            : a.fp8_scheme == "channel" ? fp8_scheme::channel
                                                        : fp8_scheme::block;
  // --- the config: read, or made from the flags ---------------------------------------------
  quant_config cfg;
  ojson qobj;
  if (!a.config.empty()) {
    cfg = load_config(a.config);
    qobj = read_quant_object(a.config);  // config_tools
    if (gptq && cfg.family != quant_family::gptq) {
      throw usage_error("--config " + a.config + " is a '" + cfg.quant_method + "' config, not GPTQ");
    }
    if (!gptq && cfg.family != quant_family::fp8 && cfg.family != quant_family::compressed_tensors) {
      throw usage_error("--config " + a.config + " is a '" + cfg.quant_method +
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
    if (!cfg.bits || a.bits_opt->count() > 0) {
      cfg.bits = a.bits;
    }
    if (a.group_opt->count() > 0) {
      cfg.group_size = parse_group_size(a.group_size_text);
    } else if (!cfg.group_size) {
      cfg.group_size = 128;
    }
    if (!cfg.sym || a.sym || a.asym) {
      cfg.sym = !a.asym;
    }
  }
  validate_config_values(cfg, qobj, a.config.empty() ? std::string("the command line") : "--config " + a.config,
                         value_rules::written);
  if (gptq) {
    cfg.desc_act = false;
  } else if (auto const it = qobj.find("weight_block_size");
             scheme == fp8_scheme::block && it != qobj.end() && !it->is_null() && *it != ojson::array({128, 128})) {
    throw config_error("--config " + a.config + ": weight_block_size " + it->dump() +
                       ": qtl quantize writes 128x128 blocks");
  }
  consumer const sg = engine_consumer(cfg, true);

  // --- input (after removing what killed runs left, so that a bad input cannot keep it) --------
  fs::path const in_path(a.in);
  fs::path const out_dir(a.out_dir);
  std::cerr << clean_stale_outputs(out_dir);
  guard_opening_inputs();
  auto const ckpt = qtl::io::safetensors_checkpoint::open(a.in);
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
    ojson doc = read_json_document(a.config, "--config");
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
            // The library's rule (qtl/group_size.hpp), and the engines' stricter one: they need
            // K % group_size == 0 for every size but -1 (vLLM/sglang create_weights), so a size
            // above K, which the rule reads as one group per column, is refused too.
            std::int64_t const gcfg = j.config_group_size;
            group_size_result const gr = normalize_group_size(gcfg, k);
            if (!gr.ok() || (gcfg != -1 && k % gcfg != 0)) {
              throw data_error(name + ": K = " + std::to_string(k) + " is not a multiple of group_size " +
                               std::to_string(gcfg) + " (the engines need K % group_size == 0, or -1)");
            }
            j.group_size = gr.rows;
            int const pf = 32 / j.bits;
            if (k % pf != 0 || n % pf != 0) {
              throw data_error(name + ": shape [" + std::to_string(n) + ", " + std::to_string(k) +
                               "]: N and K must be multiples of " + std::to_string(pf) + " for " +
                               std::to_string(j.bits) + "-bit packing");
            }
            std::int64_t const g = k / j.group_size;
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
  bool const progress = ::isatty(2) != 0;
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
          run_copy(j, s);
        } else if (j.kind == job_kind::gptq) {
          with_float_type(j.in->type, [&](auto tag) { run_gptq<typename decltype(tag)::type>(j, s); });
        } else {
          with_float_type(j.in->type, [&](auto tag) { run_fp8<typename decltype(tag)::type>(j, s, scheme); });
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
      if (progress) {
        std::lock_guard<std::mutex> lock(progress_mu);
        int const width = 40;
        int const fill = total_in == 0 ? width : static_cast<int>(width * d / total_in);
        std::fprintf(stderr, "\r[%s%s] %3d%% %s", std::string(static_cast<std::size_t>(fill), '#').c_str(),
                     std::string(static_cast<std::size_t>(width - fill), ' ').c_str(),
                     total_in == 0 ? 100 : static_cast<int>(100 * d / total_in), human_bytes(d).c_str());
        std::fflush(stderr);
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
      std::fprintf(stderr, "qtl quantize: warning: could start only %u of %u threads (%s); going on with %u\n",
                   used_threads, threads, problem.c_str(), used_threads);
    }
    worker();
    for (auto& t : pool) {
      t.join();
    }
  }
  if (progress) {
    std::fprintf(stderr, "\n");
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
  for (auto& j : jobs) {
    if (j.kind != job_kind::gptq) {
      continue;
    }
    auto const& t = shards[j.shard].tensors[j.outs[1]];
    index_t const g = t.shape[0];
    index_t const n = t.shape[1] * (32 / j.bits);
    if (!any_zero) {
      for (auto& z : j.zeros) {
        z -= 1;  // v1 stores z - 1 (z >= 1 here: no field borrows)
      }
    }
    host_tensor<std::int32_t, 2> packed({g, t.shape[1]});
    auto const zv = make_view(static_cast<std::int32_t const*>(j.zeros.data()), g, n);
    if (j.bits == 4) {
      pack_cols<4>(zv, packed.view());
    } else {
      pack_cols<8>(zv, packed.view());
    }
    shards[j.shard].file->pwrite_all(packed.view().data, static_cast<std::size_t>(g * t.shape[1]) * 4, t.offset);
    j.zeros.clear();
    j.zeros.shrink_to_fit();
  }

  // --- config files -------------------------------------------------------------------------
  ojson q = qobj.is_object() ? qobj : ojson::object();
  if (gptq) {
    q["quant_method"] = "gptq";
    q["bits"] = *cfg.bits;
    q["group_size"] = *cfg.group_size;
    q["desc_act"] = false;
    q["sym"] = *cfg.sym;
    if (!q.contains("lm_head")) {
      q["lm_head"] = false;
    }
    q["checkpoint_format"] = checkpoint_format;
  } else if (cfg.family == quant_family::fp8) {
    q["quant_method"] = "fp8";
    q["fmt"] = "e4m3";
    q["activation_scheme"] = "dynamic";
    if (scheme == fp8_scheme::block) {
      q["weight_block_size"] = {128, 128};
    } else {
      q.erase("weight_block_size");
    }
    if (!q.contains("modules_to_not_convert") && !q.contains("ignored_layers")) {
      q["modules_to_not_convert"] = cfg.skip_list;
    }
  } else {
    q["quant_method"] = "compressed-tensors";
    q["format"] = "float-quantized";
    q["quantization_status"] = "compressed";
    if (!q.contains("ignore")) {
      q["ignore"] = cfg.skip_list;
    }
    ojson w = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true},
               {"strategy", scheme == fp8_scheme::tensor ? "tensor" : scheme == fp8_scheme::channel ? "channel" : "block"},
               {"dynamic", false}};
    ojson act = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "token"}, {"dynamic", true}};
    if (scheme == fp8_scheme::block) {
      w["block_structure"] = {128, 128};
      act["strategy"] = "group";
      act["group_size"] = 128;
    }
    q["config_groups"] = {{"group_0", {{"targets", {"Linear"}}, {"weights", w}, {"input_activations", act}}}};
  }
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
  std::cerr << staged.commit();
  double const secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // --- summary ---------------------------------------------------------------------------------
  std::size_t quantized = 0;
  std::ostringstream out;
  out << "qtl quantize: " << a.in << " -> " << a.out_dir << " (" << a.format;
  if (gptq) {
    out << ", checkpoint_format " << checkpoint_format;
  } else {
    out << ", " << a.fp8_scheme << " scales";
  }
  out << ", " << used_threads << " thread" << (used_threads == 1 ? "" : "s") << ")\n";
  out << "  " << std::left << std::setw(48) << "layer" << "done\n";
  for (auto const& j : jobs) {
    if (j.kind == job_kind::copy) {
      continue;
    }
    ++quantized;
    out << "  " << std::setw(48) << j.module;
    if (j.kind == job_kind::gptq) {
      out << "gptq " << j.bits << "-bit group " << j.config_group_size << (j.sym ? " sym" : " asym") << "\n";
    } else {
      out << "fp8 e4m3 " << a.fp8_scheme << "\n";
    }
  }
  for (auto const& [m, why] : skipped) {
    out << "  " << std::setw(48) << m << "kept: " << why << "\n";
  }
  out << "  " << quantized << " layers quantized, " << skipped.size() << " kept, "
      << jobs.size() - quantized << " tensors copied\n";
  out << "  in " << human_bytes(total_in) << ", out " << human_bytes(total_out) << ", " << std::fixed
      << std::setprecision(2) << secs << " s, " << std::setprecision(3)
      << (secs > 0 ? static_cast<double>(total_in) / secs / 1e9 : 0.0) << " GB/s of input\n";
  std::cout << out.str();
  return exit_ok;
}

}  // namespace

command define_quantize(CLI::App& app) {
  auto a = std::make_shared<quantize_args>();
  auto* cmd = app.add_subcommand(
      "quantize", "round-to-nearest quantization of every linear weight of a checkpoint to GPTQ "
                  "(int4/int8) or FP8, in the layout sglang and vLLM load");
  cmd->add_option("IN", a->in, "a .safetensors file, a *.safetensors.index.json, or a folder")->required();
  cmd->add_option("OUT_DIR", a->out_dir, "output folder (created, or replaced whole by the finished output: see staged_output.hpp)")
      ->required();
  cmd->add_option("--format", a->format, "gptq or fp8")->required()->check(CLI::IsMember({"gptq", "fp8"}));
  a->bits_opt = cmd->add_option("--bits", a->bits, "GPTQ bits: 4 (default) or 8")->check(CLI::IsMember({4, 8}));
  a->group_opt = cmd->add_option("--group-size", a->group_size_text, "GPTQ group size (default 128; -1: one group per column)");
  a->sym_opt = cmd->add_flag("--sym", a->sym, "symmetric GPTQ (the default): z = 2^(bits-1)");
  a->asym_opt = cmd->add_flag("--asym", a->asym, "asymmetric GPTQ with per-group zero points");
  a->scheme_opt = cmd->add_option("--fp8-scheme", a->fp8_scheme, "FP8 weight scales: tensor, channel (default) or block (128x128)")
      ->check(CLI::IsMember({"tensor", "channel", "block"}));
  cmd->add_option("--config", a->config,
                  "quantization config whose skip lists and dynamic rules decide the layers "
                  "(as `qtl explain --consumer sglang` shows)");
  cmd->add_option("--threads", a->threads, "worker threads (default: every core)")->check(CLI::Range(0, max_threads));
  cmd->add_flag("--allow-nonfinite", a->allow_nonfinite,
                "quantize weights holding NaN or Inf (refused by default: their scales are not finite)");
  cmd->add_option("--device", a->device, "auto (default), cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  return {cmd, [a]() { return run_quantize(*a); }};
}

}  // namespace qtl::tool
