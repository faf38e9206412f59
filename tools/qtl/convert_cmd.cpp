// qtl convert: the engines' load-time converters (qtl/convert.hpp) run once, offline, on a whole
// FP8-block checkpoint (docs/spec/converters.md §8).
//
//   qtl convert IN OUT_DIR --to fp8-ue8m0|bf16|mxfp4|nvfp4 [--recipe sglang|sglang-legacy|vllm]
//               [--canonical] [--threads N] [--allow-nonfinite]
//
// Input: an FP8 block checkpoint (DeepSeek-V3 style): every quantized layer L has L.weight F8_E4M3
// [N,K] (or stacked [E,N,K]) and L.weight_scale_inv F32 [ceil(N/BN),ceil(K/BK)] ([E,..]); the
// block BN x BK is config.json's `weight_block_size` (128x128 without a config). Which layers are
// quantized is the checkpoint's own: an FP8 weight that its quantization_config's skip rules skip
// (as sglang reads them) is an inconsistent checkpoint and refused; float layers are copied.
//
// What is written per FP8 layer L, by --to:
//   fp8-ue8m0  L.weight F8_E4M3, L.weight_scale_inv F32 powers of two (requant_weight_ue8m0 with
//              --recipe; --canonical: its fixed point, what that engine holds after its own
//              load-time requant of this output); config: `scale_fmt: "ue8m0"` added
//   bf16       L.weight BF16 (block_quant_dequant: fl(q * s) rounded once); config: the
//              quantization_config dropped
//   mxfp4      L.weight_packed U8 [..,K/2], L.weight_scale U8 [..,K/32] (E8M0 bytes; sglang's
//              quantize_block_fp8_weight_to_mxfp4); config: compressed-tensors mxfp4-pack-quantized
//   nvfp4      L.weight_packed U8 [N,K/2], L.weight_scale F8_E4M3 [N,K/16], L.weight_global_scale
//              F32 [1] (fp8_block_to_nvfp4: QTL's definition, not verified against flashinfer);
//              the shards of a fused layer (scale_group_name: q/k/v, gate/up, w1/w3) share the
//              global scale; config: compressed-tensors nvfp4-pack-quantized
//   For the compressed-tensors targets, `ignore` lists every linear layer left in float.
// A layer with a NaN code, or a block that dequantizes to NaN or Inf (a non-finite or huge scale),
// is refused by every target: mxfp4 and nvfp4 cannot encode it, and bf16 and fp8-ue8m0 refuse it
// as `qtl quantize` refuses NaN/Inf weights, unless --allow-nonfinite (which passes them through).
// L.input_scale (static activation scales) is kept by fp8-ue8m0 and dropped by the others (their
// activations are not quantized). The DeepGEMM packed scale layout is not a target: it depends on
// each tensor-parallel rank's N (`qtl op deepgemm-pack-ue8m0` makes it for kernel fixtures).
//
// DeepSeek-V4's own form (config.json with a top-level `expert_dtype`: docs/spec/deepseek_v4.md):
// routed experts L.weight I8 [N, K/2] (MXFP4) with L.scale F8_E8M0 [N, K/32], the other linear
// weights F8_E4M3 with L.scale F8_E8M0 128x128 block scales, DeepSeek's names. Only `expert_dtype:
// "fp4"` with quantization_config {fp8, e4m3, ue8m0, [128, 128], dynamic} is taken; another release
// (V4-Flash-Base's "fp8" experts, V4.1's 32x32 blocks) is refused naming what differs. The names
// are kept:
//   fp8-ue8m0  each expert cast losslessly (cast_e2m1fn_to_e4m3fn: L.weight F8_E4M3 [N, K], L.scale
//              F8_E8M0 [ceil(N/128), ceil(K/128)]; a block it cannot cast refused, naming it),
//              everything else copied byte for byte; config: `expert_dtype: "fp8"`
//   bf16       every quantized weight BF16 [N, K], exact (a value bf16 cannot hold is refused),
//              its L.scale dropped; config: quantization_config and expert_dtype dropped
//   mxfp4      each FP8 weight as sglang's quantize_block_fp8_weight_to_mxfp4 on its E8M0 scales
//              (L.weight I8 [N, K/2], L.scale F8_E8M0 [N, K/32]: the experts' form), the experts
//              copied; config unchanged
//   nvfp4      each FP8 weight by fp8_block_to_nvfp4 (L.weight U8 [N, K/2], L.scale F8_E4M3
//              [N, K/16], L.global_scale F32 [1], shared by a fused layer's shards), the experts
//              copied; config unchanged
// Everything else is copied unchanged; the shards keep their names (a shard left empty is dropped;
// a single-file input becomes model.safetensors), each shard's tensors ordered by element size (4-,
// 2-, then 1-byte) so that every tensor stays aligned; two output tensors of one name are refused;
// the index is rewritten; the input folder's side files are copied (`side_file_skip_reason`).
//
// Streaming, bounded memory: the output shards are created in a staging folder beside OUT_DIR with
// their headers first; worker threads take one layer at a time and convert it in slices of block
// rows (a few MiB), writing each slice at its offset and releasing the input pages behind it. The
// folder is swapped in whole when every file is complete (staged_output.hpp): OUT_DIR holds at every
// instant one complete checkpoint, and a failure or a signal leaves the old one.

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include <qtl/convert.hpp>
#include <qtl/dispatch.hpp>
#include <qtl/e2m1_to_bf16.hpp>
#include <qtl/e2m1_to_e4m3.hpp>
#include <qtl/fp4.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "config_tools.hpp"
#include "int_flags.hpp"
#include "lib/checkpoint_job.hpp"
#include "lib/quantize_plan.hpp"
#include "lib/scratch.hpp"
#include "lib/worker_pool.hpp"

namespace qtl::tool {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
namespace cv = qtl::convert;

namespace {

enum class target { fp8_ue8m0, bf16, mxfp4, nvfp4 };

constexpr int max_threads = 4096;

struct convert_args {
  std::string in;
  std::string out_dir;
  std::string to;
  std::string recipe = "sglang";
  bool canonical = false;
  bool force = false;
  bool allow_nonfinite = false;
  int threads = 0;
  CLI::Option* recipe_opt = nullptr;
};

// ------------------------------------------------------------------------------------------------
// The plan

/// Where an output tensor is: shard and index in its tensor list.
struct out_ref {
  std::size_t shard = 0;
  std::size_t index = 0;
};

/// One FP8 block weight and its scales, and where its outputs go (by target: fp8-ue8m0 weight,
/// scale; bf16 weight; mxfp4 packed, scale; nvfp4 packed, scale, global scale). In DeepSeek-V4's
/// form the scales are F8_E8M0 codes, and a routed expert is MXFP4 (`mxfp4`: I8 codes [N, K/2],
/// F8_E8M0 scales [N, K/32]; `grid` its output's 128x128 blocks).
struct fp8_layer {
  std::string module;
  tensor_info const* weight = nullptr;
  tensor_info const* scale = nullptr;
  cv::block_grid grid;
  std::vector<out_ref> outs;
  bool mxfp4 = false;
};

/// A unit of work: a copied tensor, or one FP8 layer (two for NVFP4 gate/up pairs, which share
/// the global scale).
struct convert_job {
  tensor_info const* copy = nullptr;
  out_ref copy_out;
  std::vector<fp8_layer> layers;
  float global_scale = 0.0f;  // nvfp4, filled by the worker (for the summary)
  std::uint64_t in_bytes = 0;
};

/// The module of `name` without `suffix`, or empty.
std::string strip(std::string const& name, std::string_view suffix) {
  return name.ends_with(suffix) && name.size() > suffix.size() ? name.substr(0, name.size() - suffix.size())
                                                                : std::string();
}

// ------------------------------------------------------------------------------------------------
// The workers: one layer in slices of block rows

/// Block rows per slice: about 4 Mi elements (at least one block row).
std::int64_t rows_per_slice(cv::block_grid const& g) {
  std::int64_t const per_block_row = std::max<std::int64_t>(1, g.block.n * g.k);
  return std::max<std::int64_t>(1, (std::int64_t{4} << 20) / per_block_row);
}

/// Calls f(gi, bi0, bi1, n0, n1) for each slice of block rows [bi0, bi1) of matrix gi (rows [n0, n1)).
template <class F>
void for_each_slice(cv::block_grid const& g, F&& f) {
  std::int64_t const step = rows_per_slice(g);
  std::int64_t const nb = g.n_blocks();
  for (std::int64_t gi = 0; gi < g.groups; ++gi) {
    for (std::int64_t b0 = 0; b0 < nb; b0 += step) {
      std::int64_t const b1 = std::min(nb, b0 + step);
      f(gi, b0, b1, b0 * g.block.n, std::min(g.n, b1 * g.block.n));
    }
  }
}

std::span<std::uint8_t const> codes_of(tensor_info const& t) {
  return {reinterpret_cast<std::uint8_t const*>(t.bytes.data()), t.bytes.size()};
}

/// A layer's block scales as float: F32 as stored, F8_E8M0 codes b decoded as 2^(b - 127) (exact;
/// 0xFF is NaN), as vLLM's `_upcast_e8m0_to_fp32`.
class float_scales {
 public:
  explicit float_scales(tensor_info const& s) {
    if (s.type == dtype::F8_E8M0) {
      decoded_.resize(s.bytes.size());
      auto const* b = reinterpret_cast<std::uint8_t const*>(s.bytes.data());
      for (std::size_t i = 0; i < decoded_.size(); ++i) {
        decoded_[i] = e8m0_to_float(b[i]);
      }
      span_ = decoded_;
    } else {
      f32_.emplace(s);
      span_ = {f32_->data(), static_cast<std::size_t>(f32_->size())};
    }
  }
  std::span<float const> span() const { return span_; }

 private:
  std::optional<typed_tensor<float>> f32_;
  std::vector<float> decoded_;
  std::span<float const> span_;
};

struct worker_context {
  std::vector<shard_plan>& shards;
  target to;
  std::string_view recipe;  // a name of cv::recipes
  bool canonical;
  bool allow_nonfinite;
};

void write_out(worker_context const& c, out_ref r, void const* data, std::size_t bytes, std::uint64_t at) {
  shard_plan const& s = c.shards[r.shard];
  s.file->pwrite_all(data, bytes, s.tensors[r.index].offset + at);
}

template <class Recipe>
void requant_slice(bool canonical, std::span<std::uint8_t const> q, std::span<float const> s, std::int64_t n,
                   std::int64_t k, std::span<std::uint8_t> q_out, std::span<float> s_out) {
  if (canonical) {
    cv::requant_weight_ue8m0_canonical<Recipe>(q, s, 1, n, k, q_out, s_out);
  } else {
    cv::requant_weight_ue8m0<Recipe>(q, s, 1, n, k, q_out, s_out);
  }
}

/// Throws unless every bf16 `out[i]` (element (row0 + i / k, i % k) of the weight) is `want(i)`
/// exactly, or both are NaN and `allow_nan`: DeepSeek-V4's power-of-two scales make the dequant
/// exact wherever bf16 holds the value. @throws data_error naming the element (the worker pool
/// names the weight) and its value
template <class Want>
void check_bf16_exact(std::span<bfloat16_t const> out, std::int64_t row0, std::int64_t k, bool allow_nan, Want&& want) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    double const w = want(i);
    double const got = bf16_to_float(out[i].bits);
    if (got == w || (allow_nan && std::isnan(w) && std::isnan(got))) {
      continue;
    }
    std::ostringstream m;
    m << "element (" << row0 + static_cast<std::int64_t>(i) / k << ", " << static_cast<std::int64_t>(i) % k << ") ";
    if (std::isnan(w)) {
      m << "is NaN (a NaN code or scale; --allow-nonfinite converts it)";
    } else {
      m << "= " << std::setprecision(17) << w << " is not a bf16 value (" << (std::abs(w) > 1.0 ? "beyond" : "below")
        << " bf16's range): --to bf16 is exact or refused";
    }
    throw data_error(m.str());
  }
}

/// Whether an FP8 block whose scale is `s` dequantizes exactly to bf16 without a check: an E8M0
/// scale 2^(b - 127) with 3 <= b <= 246 (e4m3fn values are multiples of 2^-9 with four
/// significant bits, at most 448: times 2^(b - 127) they are multiples of bf16's least subnormal
/// 2^-133 and below its largest).
bool bf16_exact_block(float s) { return s >= 0x1p-124f && s <= 0x1p119f; }

/// DeepSeek-V4's routed expert `l` (MXFP4: I8 codes [N, K/2], F8_E8M0 scales [N, K/32]), one
/// matrix at a time: fp8-ue8m0 the lossless cast (`cast_e2m1fn_to_e4m3fn`, which names a block it
/// cannot cast), bf16 the exact dequant (`mxfp4_to_bf16`, each element checked where a scale
/// code is not exact for every code).
void convert_mxfp4_layer(worker_context const& c, fp8_layer const& l) {
  cv::block_grid const& g = l.grid;
  auto const x_all = codes_of(*l.weight);
  auto const s_all = codes_of(*l.scale);
  std::size_t const count = static_cast<std::size_t>(g.n * g.k);
  std::size_t const scount = static_cast<std::size_t>(g.n_blocks() * g.k_blocks());
  for (std::int64_t gi = 0; gi < g.groups; ++gi) {
    auto const x = x_all.subspan(gi * count / 2, count / 2);
    auto const s = s_all.subspan(gi * count / cv::e2m1_scale_group, count / cv::e2m1_scale_group);
    if (c.to == target::fp8_ue8m0) {
      auto const q = thread_scratch<std::uint8_t>(count);
      auto const sf = thread_scratch<std::uint8_t, 1>(scount);
      try {
        cv::cast_e2m1fn_to_e4m3fn(x, s, {1, g.n, g.k, g.block}, q, sf);
      } catch (qtl::value_error const& e) {
        throw data_error((g.groups > 1 ? "matrix " + std::to_string(gi) + ": " : std::string()) + e.what());
      }
      write_out(c, l.outs[0], q.data(), count, gi * count);
      write_out(c, l.outs[1], sf.data(), scount, gi * scount);
    } else {
      auto const bf = thread_scratch<bfloat16_t>(count);
      bool const exact = cv::mxfp4_to_bf16(x, s, bf);
      if (!exact) {
        check_bf16_exact(bf, gi * g.n, g.k, c.allow_nonfinite, [&](std::size_t i) {
          std::uint8_t const e = s[i / cv::e2m1_scale_group];
          auto const code = static_cast<std::uint8_t>(x[i / 2] >> (i % 2 * 4) & 15u);
          return e == 0xFF ? std::nan("") : std::ldexp(static_cast<double>(e2m1_to_float(code)), int(e) - 127);
        });
      }
      write_out(c, l.outs[0], bf.data(), count * 2, gi * count * 2);
    }
  }
  release(l.weight->bytes);
  release(l.scale->bytes);
}

void convert_layer(worker_context const& c, fp8_layer const& l, float global_scale) {
  if (l.mxfp4) {
    convert_mxfp4_layer(c, l);
    return;
  }
  cv::block_grid const& g = l.grid;
  float_scales const scales(*l.scale);
  auto const q_all = codes_of(*l.weight);
  std::span<float const> const s_all = scales.span();
  bool const e8m0_scales = l.scale->type == dtype::F8_E8M0;
  std::int64_t const nb = g.n_blocks();
  std::int64_t const kb = g.k_blocks();
  for_each_slice(g, [&](std::int64_t gi, std::int64_t b0, std::int64_t b1, std::int64_t n0, std::int64_t n1) {
    std::int64_t const rows = n1 - n0;
    std::size_t const e0 = static_cast<std::size_t>((gi * g.n + n0) * g.k);
    std::size_t const count = static_cast<std::size_t>(rows * g.k);
    std::size_t const s0 = static_cast<std::size_t>((gi * nb + b0) * kb);
    std::size_t const scount = static_cast<std::size_t>((b1 - b0) * kb);
    auto const q = q_all.subspan(e0, count);
    auto const s = s_all.subspan(s0, scount);
    cv::block_grid const slice{1, rows, g.k, g.block};
    switch (c.to) {
      case target::fp8_ue8m0: {
        auto const q8 = thread_scratch<std::uint8_t>(count);
        auto const s32 = thread_scratch<float>(scount);
        qtl::dispatch_name<cv::recipes>("--recipe", c.recipe, [&]<class R>() {
          requant_slice<R>(c.canonical, q, s, rows, g.k, q8, s32);
        });
        write_out(c, l.outs[0], q8.data(), count, e0);
        write_out(c, l.outs[1], s32.data(), scount * 4, s0 * 4);
        break;
      }
      case target::bf16: {
        auto const bf = thread_scratch<bfloat16_t>(count);
        cv::block_quant_dequant<bfloat16_t>(q, s, slice, bf);
        if (e8m0_scales && !std::all_of(s.begin(), s.end(), bf16_exact_block)) {
          check_bf16_exact(bf, n0, g.k, c.allow_nonfinite, [&](std::size_t i) {
            std::int64_t const r = static_cast<std::int64_t>(i) / g.k;
            std::int64_t const col = static_cast<std::int64_t>(i) % g.k;
            return static_cast<double>(e4m3fn_to_float(q[i])) *
                   static_cast<double>(s[static_cast<std::size_t>(r / g.block.n * kb + col / g.block.k)]);
          });
        }
        write_out(c, l.outs[0], bf.data(), count * 2, e0 * 2);
        break;
      }
      case target::mxfp4: {
        auto const packed = thread_scratch<std::uint8_t>(count / 2);
        auto const e8m0 = thread_scratch<std::uint8_t, 1>(count / cv::mxfp4_block);
        cv::fp8_block_to_mxfp4(q, s, slice, packed, e8m0);
        write_out(c, l.outs[0], packed.data(), packed.size(), e0 / 2);
        write_out(c, l.outs[1], e8m0.data(), e8m0.size(), e0 / cv::mxfp4_block);
        break;
      }
      case target::nvfp4: {
        auto const fp4 = thread_scratch<float4_e2m1x2_t>(count / 2);
        auto const sf8 = thread_scratch<float8_e4m3fn_t>(count / 16);
        // checked: run_job's global-scale pass (fp8_block_bf16_amax) refused NaN/Inf in this layer
        cv::fp8_block_to_nvfp4(q, s, slice, global_scale, fp4, sf8, 1, true);
        write_out(c, l.outs[0], fp4.data(), fp4.size(), e0 / 2);
        write_out(c, l.outs[1], sf8.data(), sf8.size(), e0 / 16);
        break;
      }
    }
    release(l.weight->bytes.subspan(e0, count));
  });
  if (c.to == target::nvfp4) {
    write_out(c, l.outs[2], &global_scale, 4, 0);
  }
  release(l.scale->bytes);
}

void run_job(worker_context const& c, convert_job& j) {
  if (j.copy != nullptr) {
    shard_plan const& s = c.shards[j.copy_out.shard];
    copy_released(j.copy->bytes, *s.file, s.tensors[j.copy_out.index].offset);
    return;
  }
  if ((c.to == target::bf16 || c.to == target::fp8_ue8m0) && !c.allow_nonfinite) {
    // NaN codes and blocks whose dequant is not finite, refused as mxfp4 and nvfp4 refuse them
    for (auto const& l : j.layers) {
      if (l.mxfp4) {
        continue;  // no NaN code; the cast and the bf16 check refuse a NaN scale
      }
      float_scales const scales(*l.scale);
      try {
        (void)cv::fp8_block_bf16_amax(codes_of(*l.weight), scales.span(), l.grid);
      } catch (qtl::value_error const& e) {
        // the worker pool names the weight
        throw data_error(std::string(e.what()) + " (a NaN code or a non-finite scale; --allow-nonfinite converts it)");
      }
    }
  }
  float gs = 0.0f;
  if (c.to == target::nvfp4) {
    float amax = 0.0f;
    for (auto const& l : j.layers) {
      float_scales const scales(*l.scale);
      amax = std::max(amax, cv::fp8_block_bf16_amax(codes_of(*l.weight), scales.span(), l.grid));
    }
    gs = cv::nvfp4_shared_global_scale(amax);
    j.global_scale = gs;
  }
  for (auto const& l : j.layers) {
    convert_layer(c, l, gs);
  }
}

// ------------------------------------------------------------------------------------------------
// The command

target parse_target(std::string const& s) {
  if (s == "fp8-ue8m0") return target::fp8_ue8m0;
  if (s == "bf16") return target::bf16;
  if (s == "mxfp4") return target::mxfp4;
  if (s == "nvfp4") return target::nvfp4;
  throw usage_error("--to " + s + ": expected fp8-ue8m0, bf16, mxfp4 or nvfp4");
}


/// The compressed-tensors quantization_config of an FP4 target (docs/spec/interop.md §3.2).
ojson ct_fp4_config(target to, std::vector<std::string> const& ignore) {
  bool const nv = to == target::nvfp4;
  std::string const format = nv ? "nvfp4-pack-quantized" : "mxfp4-pack-quantized";
  ojson w = {{"num_bits", 4},
             {"type", "float"},
             {"symmetric", true},
             {"strategy", nv ? "tensor_group" : "group"},
             {"group_size", nv ? 16 : 32},
             {"dynamic", false}};
  if (!nv) {
    w["scale_dtype"] = "torch.uint8";
  }
  ojson group = {{"targets", {"Linear"}},
                 {"format", format},
                 {"weights", w},
                 {"input_activations", nullptr},
                 {"output_activations", nullptr}};
  return {{"quant_method", "compressed-tensors"},
          {"format", format},
          {"quantization_status", "compressed"},
          {"ignore", ignore},
          {"kv_cache_scheme", nullptr},
          {"config_groups", {{"group_0", group}}}};
}

/// The FP8 block config of --to fp8-ue8m0 for an input without one.
ojson default_ue8m0_config() {
  return {{"quant_method", "fp8"},
          {"fmt", "e4m3"},
          {"activation_scheme", "dynamic"},
          {"weight_block_size", {128, 128}},
          {"scale_fmt", "ue8m0"}};
}

/// Refuses the flags that do not apply to --to. @throws usage_error
void check_flags(convert_args const& a, target to) {
  if (to != target::fp8_ue8m0 && a.recipe_opt->count() > 0) {
    throw usage_error("--recipe applies to --to fp8-ue8m0 (the other targets have one recipe each)");
  }
  if (to != target::fp8_ue8m0 && a.canonical) {
    throw usage_error("--canonical applies to --to fp8-ue8m0 (the requant that is not idempotent)");
  }
  if ((to == target::mxfp4 || to == target::nvfp4) && a.allow_nonfinite) {
    throw usage_error(
        "--allow-nonfinite applies to --to bf16 and fp8-ue8m0 (MXFP4 and NVFP4 cannot encode NaN or Inf)");
  }
}

/// The input's quantization config: config.json's `quantization_config`, which must be an FP8
/// block one; without it, 128x128 blocks and no skip rules.
struct block_config {
  ojson qobj;                      ///< the quantization_config (null: none)
  cv::block_size block{128, 128};  ///< its weight_block_size
  std::optional<quant_config> cfg; ///< its skip rules (sglang's reading), when there is one
};

/// The block config of the job's input (see `block_config`). @throws data_error for a config of
/// another method, a weight_block_size that is missing or not two positive integers, or (--to
/// fp8-ue8m0) one other than 128x128
block_config read_block_config(checkpoint_job const& task, target to) {
  block_config bc;
  std::string const in_config = task.in_config.string();
  if (task.has_config && task.model_config.contains("quantization_config")) {
    bc.qobj = task.model_config["quantization_config"];
  }
  ojson const& qobj = bc.qobj;
  if (!qobj.is_null()) {
    std::string const method = qobj.is_object() && qobj.contains("quant_method") && qobj["quant_method"].is_string()
                                   ? qobj["quant_method"].get<std::string>()
                                   : std::string("(none)");
    if (method != "fp8") {
      throw data_error(in_config + ": quantization_config.quant_method is '" + qtl::io::printable(method) +
                       "'; qtl convert takes an FP8 block checkpoint ('fp8' with weight_block_size)");
    }
    auto const it = qobj.find("weight_block_size");
    if (it == qobj.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_number_integer() ||
        !(*it)[1].is_number_integer() || (*it)[0].get<std::int64_t>() <= 0 || (*it)[1].get<std::int64_t>() <= 0 ||
        (*it)[0].get<std::int64_t>() > (1 << 20) || (*it)[1].get<std::int64_t>() > (1 << 20)) {
      throw data_error(in_config + ": quantization_config.weight_block_size " +
                       (it == qobj.end() ? std::string("is missing") : it->dump()) +
                       ": qtl convert takes FP8 block checkpoints ([BN, BK], two positive integers)");
    }
    bc.block = {static_cast<int>((*it)[0].get<std::int64_t>()), static_cast<int>((*it)[1].get<std::int64_t>())};
    bc.cfg = read_config_file(task.in_config).config;
  }
  if (to == target::fp8_ue8m0 && (bc.block.n != 128 || bc.block.k != 128)) {
    throw data_error(in_config + ": weight_block_size [" + std::to_string(bc.block.n) + ", " +
                     std::to_string(bc.block.k) + "]: both engines requantize 128x128 blocks only (--to fp8-ue8m0)");
  }
  return bc;
}

/// The FP8 block layer of the F8_E4M3 weight `t` of `module`, checked: its scales exist with the
/// grid's shape, the target can write its shape, and the config's skip rules (as sglang reads
/// them) quantize it. @throws data_error naming the tensor and the problem
fp8_layer fp8_layer_of(tensor_info const& t, std::string const& module, qtl::io::safetensors_checkpoint const& ckpt,
                       block_config const& bc, std::optional<consumer> const& sg, target to) {
  using qtl::io::printable;
  using qtl::io::shape_string;
  std::string const& name = t.name;
  tensor_info const* s = ckpt.find(module + ".weight_scale_inv");
  if (s == nullptr) {
    throw data_error(printable(name) + ": an F8_E4M3 weight without '" + printable(module) +
                     ".weight_scale_inv' (qtl convert takes FP8 block checkpoints; per-tensor or "
                     "per-channel FP8 is not converted)");
  }
  if (t.shape.size() != 2 && t.shape.size() != 3) {
    throw data_error(printable(name) + ": shape " + shape_string(t.shape) + ": an FP8 block weight is [N, K] or [E, N, K]");
  }
  bool const experts = t.shape.size() == 3;
  cv::block_grid const g{experts ? t.shape[0] : 1, t.shape[experts ? 1 : 0], t.shape[experts ? 2 : 1], bc.block};
  std::vector<std::int64_t> const want = experts ? std::vector<std::int64_t>{g.groups, g.n_blocks(), g.k_blocks()}
                                                 : std::vector<std::int64_t>{g.n_blocks(), g.k_blocks()};
  if (s->type != dtype::F32 || s->shape != want) {
    throw data_error(printable(module) + ".weight_scale_inv: " + std::string(qtl::io::dtype_name(s->type)) + " " +
                     shape_string(s->shape) + "; weight " + shape_string(t.shape) + " in " +
                     std::to_string(bc.block.n) + "x" + std::to_string(bc.block.k) + " blocks needs F32 " +
                     shape_string(want));
  }
  if (g.n == 0 || g.k == 0 || g.groups == 0) {
    throw data_error(printable(name) + ": shape " + shape_string(t.shape) + " is empty");
  }
  if (to == target::mxfp4 && g.k % cv::mxfp4_block != 0) {
    throw data_error(printable(name) + ": K = " + std::to_string(g.k) + " is not a multiple of 32 (MXFP4 blocks)");
  }
  if (to == target::nvfp4 && (g.k % 16 != 0 || experts)) {
    throw data_error(printable(name) + ": shape " + shape_string(t.shape) +
                     (experts ? ": NVFP4 is written per matrix [N, K] (one global scale each), not stacked"
                              : ": K is not a multiple of 16 (NVFP4 blocks)"));
  }
  if (bc.cfg) {
    layer_kind const kind = infer_layer_kind(module);
    std::string const engine_name = fused_name(*bc.cfg, module).value_or(module);
    decision const d = decide(*bc.cfg, *sg, engine_name, kind == layer_kind::other ? layer_kind::linear : kind);
    if (d.skipped) {
      throw data_error(printable(module) + ": the config's skip rules" +
                       (d.rule ? " ('" + printable(*d.rule) + "')" : std::string()) +
                       " leave it unquantized, but its weight is F8_E4M3 (an inconsistent checkpoint)");
    }
  }
  fp8_layer l;
  l.module = module;
  l.weight = &t;
  l.scale = s;
  l.grid = g;
  return l;
}

/// Adds the output tensor (name, type, shape), written for the input tensor `source`, to shard
/// `shard`.
out_ref add_output(std::vector<shard_plan>& shards, std::size_t shard, std::string const& source, std::string name,
                   dtype type, std::vector<std::int64_t> shape) {
  shards[shard].tensors.push_back({std::move(name), type, std::move(shape), 0, 0, source});
  return out_ref{shard, shards[shard].tensors.size() - 1};
}

/// The outputs of layer `l` by target (see the file's comment): in the weight's shard `ws`, and
/// fp8-ue8m0's scales in the input scales' shard `ss`.
void add_layer_outputs(std::vector<shard_plan>& shards, fp8_layer& l, std::size_t ws, std::size_t ss, target to) {
  tensor_info const& t = *l.weight;
  cv::block_grid const& g = l.grid;
  bool const experts = t.shape.size() == 3;
  auto rows_k = [&](std::int64_t div) { return experts ? shape_of(g.groups, g.n, g.k / div) : shape_of(g.n, g.k / div); };
  auto out = [&](std::size_t shard, std::string name, dtype type, std::vector<std::int64_t> shape) {
    return add_output(shards, shard, t.name, std::move(name), type, std::move(shape));
  };
  switch (to) {
    case target::fp8_ue8m0:
      l.outs = {out(ws, t.name, dtype::F8_E4M3, t.shape), out(ss, l.scale->name, dtype::F32, l.scale->shape)};
      break;
    case target::bf16:
      l.outs = {out(ws, t.name, dtype::BF16, t.shape)};
      break;
    case target::mxfp4:
      l.outs = {out(ws, l.module + ".weight_packed", dtype::U8, rows_k(2)),
                out(ws, l.module + ".weight_scale", dtype::U8, rows_k(cv::mxfp4_block))};
      break;
    case target::nvfp4:
      l.outs = {out(ws, l.module + ".weight_packed", dtype::U8, rows_k(2)),
                out(ws, l.module + ".weight_scale", dtype::F8_E4M3, rows_k(16)),
                out(ws, l.module + ".weight_global_scale", dtype::F32, {1})};
      break;
  }
}

/// The plan: one job per copied tensor and per FP8 layer (per fused layer for NVFP4), with the
/// float linear layers (compressed-tensors `ignore`) and the static input scales dropped.
struct convert_plan {
  std::vector<convert_job> jobs;
  std::vector<std::string> kept_linear;
  std::size_t dropped = 0;
  std::size_t layers = 0;  ///< FP8 layers converted
};

/// The config of the fused layers of --to nvfp4: `cfg`'s packed_modules_mapping, else the
/// engines' default.
quant_config fused_layers(std::optional<quant_config> const& cfg) {
  quant_config fused_cfg = cfg.value_or(quant_config{});
  if (fused_cfg.packed_modules_mapping.empty()) {
    fused_cfg.packed_modules_mapping = default_packed_modules_mapping();
  }
  return fused_cfg;
}

/// Adds the job of layer `l` to `p`: its own, or with --to nvfp4 the job of its fused layer
/// (`layer_job`: fused layer -> job), whose shards share one global scale as qtl quantize writes
/// them (scale_group_name: q/k/v, gate/up, each expert's gate/up, w1/w3, q_a/kv_a).
void add_layer_job(convert_plan& p, std::map<std::string, std::size_t>& layer_job, compiled_config const& fused_cc,
                   fp8_layer l, target to) {
  std::uint64_t const bytes = l.weight->bytes.size() + l.scale->bytes.size();
  ++p.layers;
  if (to == target::nvfp4) {
    std::string const group = scale_group_name(fused_cc, l.module);
    auto const it = group.empty() ? layer_job.end() : layer_job.find(group);
    if (it != layer_job.end()) {
      p.jobs[it->second].layers.push_back(std::move(l));
      p.jobs[it->second].in_bytes += bytes;
      return;
    }
    if (!group.empty()) {
      layer_job[group] = p.jobs.size();
    }
  }
  convert_job j;
  j.layers.push_back(std::move(l));
  j.in_bytes = bytes;
  p.jobs.push_back(std::move(j));
}

/// Every input tensor's job and outputs, added to `task.shards`. @throws data_error for a
/// tensor that is not part of an FP8 block checkpoint, and when there is no FP8 layer in `in`
convert_plan plan_convert(checkpoint_job& task, block_config const& bc, target to, std::string const& in) {
  using qtl::io::printable;
  quant_config const fused_cfg = fused_layers(bc.cfg);
  compiled_config const fused_cc(fused_cfg);
  std::map<std::string, std::size_t> shard_of;  // tensor name -> input shard
  for (auto const& e : task.ckpt.tensors()) {
    shard_of[e.tensor->name] = e.shard;
  }
  std::optional<consumer> sg;
  if (bc.cfg) {
    sg = engine_consumer(*bc.cfg, true);
  }
  convert_plan p;
  std::map<std::string, std::size_t> layer_job;  // fused layer -> job (nvfp4: one global scale per fused layer)
  for (auto const& e : task.ckpt.tensors()) {
    tensor_info const& t = *e.tensor;
    std::string const& name = t.name;
    if (std::string const scale_module = strip(name, ".weight_scale_inv"); !scale_module.empty()) {
      tensor_info const* w = task.ckpt.find(scale_module + ".weight");
      if (w == nullptr || w->type != dtype::F8_E4M3) {
        throw data_error(printable(name) + ": block scales without an F8_E4M3 weight '" + printable(scale_module) +
                         ".weight'");
      }
      continue;  // converted with its weight
    }
    std::string const module = strip(name, ".weight");
    if (!module.empty() && t.type == dtype::F8_E4M3) {
      fp8_layer l = fp8_layer_of(t, module, task.ckpt, bc, sg, to);
      add_layer_outputs(task.shards, l, e.shard, shard_of[l.scale->name], to);
      add_layer_job(p, layer_job, fused_cc, std::move(l), to);
      continue;
    }
    if (t.type == dtype::F8_E4M3 || t.type == dtype::F8_E5M2) {
      throw data_error(printable(name) + ": an " + std::string(qtl::io::dtype_name(t.type)) +
                       " tensor that is not an FP8 block weight (L.weight with L.weight_scale_inv)");
    }
    if (to != target::fp8_ue8m0 && !strip(name, ".input_scale").empty()) {
      ++p.dropped;  // static activation scales: the converted layers' activations are not quantized
      continue;
    }
    if (!module.empty() && t.shape.size() == 2) {
      layer_kind const kind = infer_layer_kind(module);
      if (kind == layer_kind::linear || kind == layer_kind::lm_head) {
        p.kept_linear.push_back(module);
      }
    }
    convert_job j;
    j.copy = &t;
    j.copy_out = add_output(task.shards, e.shard, name, name, t.type, t.shape);
    j.in_bytes = t.bytes.size();
    p.jobs.push_back(std::move(j));
  }
  if (p.layers == 0) {
    throw data_error(in + ": no FP8 block weights (L.weight F8_E4M3 with L.weight_scale_inv F32): "
                     "qtl convert takes an FP8 block checkpoint");
  }
  return p;
}

// ------------------------------------------------------------------------------------------------
// DeepSeek-V4's own form (docs/spec/deepseek_v4.md)

/// Whether `task`'s config is DeepSeek-V4's own form: it has a top-level `expert_dtype`, which only
/// DeepSeek-V4's configs have (vLLM keys the routed experts' kernels off it).
bool is_dsv4(checkpoint_job const& task) { return task.has_config && task.model_config.contains("expert_dtype"); }

/// Refuses a DeepSeek-V4 config other than the form understood (V4-Flash and V4-Pro: MXFP4
/// experts, FP8 128x128 blocks with E8M0 scales), naming what differs, and the flags that do not
/// apply to it. @throws data_error, usage_error
void check_dsv4(checkpoint_job const& task, convert_args const& a, target to) {
  using qtl::io::printable;
  std::string const cfg = task.in_config.string();
  ojson const& m = task.model_config;
  if (ojson const& ed = m["expert_dtype"]; ed != "fp4") {
    throw data_error(cfg + ": expert_dtype is " + printable(ed.dump()) +
                     (ed == "fp8" ? " (DeepSeek-V4-Flash-Base's form: FP8 experts with F32 block scales)" : "") +
                     "; qtl convert takes DeepSeek-V4's form with MXFP4 experts (\"fp4\")");
  }
  ojson const q = m.contains("quantization_config") ? m["quantization_config"] : ojson();
  ojson const want = {{"quant_method", "fp8"},
                      {"fmt", "e4m3"},
                      {"scale_fmt", "ue8m0"},
                      {"weight_block_size", {128, 128}},
                      {"activation_scheme", "dynamic"}};
  for (auto it = want.begin(); it != want.end(); ++it) {
    std::string const& key = it.key();
    ojson const& value = it.value();
    if (!q.is_object() || !q.contains(key) || q[key] != value) {
      bool const v41 = key == "weight_block_size" && q.is_object() && q.contains(key) && q[key] == ojson{32, 32};
      throw data_error(cfg + ": quantization_config." + key + " is " +
                       (q.is_object() && q.contains(key) ? printable(q[key].dump()) : std::string("missing")) +
                       (v41 ? " (DeepSeek-V4.1's form)" : "") + "; DeepSeek-V4's form (expert_dtype \"fp4\") has " +
                       value.dump());
    }
  }
  if (to == target::fp8_ue8m0 && (a.recipe_opt->count() > 0 || a.canonical || a.allow_nonfinite)) {
    throw usage_error(
        "--recipe, --canonical and --allow-nonfinite do not apply to DeepSeek-V4's form --to fp8-ue8m0: "
        "its FP8 weights already have E8M0 scales and are copied, and its experts are cast "
        "losslessly or refused");
  }
}

/// The quantized weight `t` of `module` in DeepSeek-V4's form, checked: an MXFP4 routed expert (I8
/// [N, K/2] with F8_E8M0 `module.scale` [N, K/32]) or an FP8 block weight (F8_E4M3 [N, K] with
/// F8_E8M0 [ceil(N/128), ceil(K/128)]); `grid` is the FP8 blocks of either. @throws data_error
fp8_layer dsv4_layer_of(tensor_info const& t, std::string const& module, qtl::io::safetensors_checkpoint const& ckpt) {
  using qtl::io::printable;
  using qtl::io::shape_string;
  std::string const kind = t.type == dtype::I8 ? "an MXFP4 (I8) weight" : "an F8_E4M3 weight";
  tensor_info const* s = ckpt.find(module + ".scale");
  if (s == nullptr) {
    throw data_error(printable(t.name) + ": " + kind + " without '" + printable(module) +
                     ".scale' (DeepSeek-V4's form names each weight's scales L.scale)");
  }
  if (t.shape.size() != 2 || t.shape[0] == 0 || t.shape[1] == 0) {
    throw data_error(printable(t.name) + ": shape " + shape_string(t.shape) + ": " + kind +
                     " of DeepSeek-V4's form is [out, in" + (t.type == dtype::I8 ? "/2" : "") + "], not empty");
  }
  fp8_layer l;
  l.module = module;
  l.weight = &t;
  l.scale = s;
  l.mxfp4 = t.type == dtype::I8;
  l.grid = {1, t.shape[0], t.shape[1] * (l.mxfp4 ? 2 : 1), {128, 128}};
  std::vector<std::int64_t> const want =
      l.mxfp4 ? shape_of(l.grid.n, l.grid.k / cv::e2m1_scale_group) : shape_of(l.grid.n_blocks(), l.grid.k_blocks());
  if (s->type != dtype::F8_E8M0 || s->shape != want || (l.mxfp4 && l.grid.k % cv::e2m1_scale_group != 0)) {
    throw data_error(printable(s->name) + ": " + std::string(qtl::io::dtype_name(s->type)) + " " +
                     shape_string(s->shape) + "; " + kind + " " + shape_string(t.shape) + " needs F8_E8M0 " +
                     shape_string(want) +
                     (l.mxfp4 ? " (one scale per 1x32 group, in a multiple of 32)" : " (one per 128x128 block)"));
  }
  return l;
}

/// The plan of DeepSeek-V4's form (the names kept). By target, the MXFP4 experts (I8 L.weight):
/// fp8-ue8m0 casts each to FP8 blocks (L.weight F8_E4M3 [N, K], L.scale F8_E8M0 [ceil(N/128),
/// ceil(K/128)]), bf16 dequantizes it (BF16 L.weight, L.scale dropped), mxfp4 and nvfp4 copy them;
/// the FP8 weights (F8_E4M3 L.weight): fp8-ue8m0 copies them, bf16 dequantizes them, mxfp4 writes
/// L.weight I8 [N, K/2] and L.scale F8_E8M0 [N, K/32] (the experts' form), nvfp4 L.weight U8
/// [N, K/2], L.scale F8_E4M3 [N, K/16] and L.global_scale F32 [1] (one per fused layer).
/// @throws data_error for a tensor that is not part of the form, and when there is nothing to convert
convert_plan plan_dsv4(checkpoint_job& task, target to, std::string const& in) {
  using qtl::io::printable;
  using qtl::io::shape_string;
  std::map<std::string, std::size_t> shard_of;  // tensor name -> input shard
  for (auto const& e : task.ckpt.tensors()) {
    shard_of[e.tensor->name] = e.shard;
  }
  bool const to_fp4 = to == target::mxfp4 || to == target::nvfp4;
  // Which weights are converted: the experts (fp8-ue8m0, bf16), the FP8 weights (bf16, mxfp4, nvfp4).
  auto const converted = [&](dtype weight) { return weight == dtype::I8 ? !to_fp4 : to != target::fp8_ue8m0; };
  quant_config const fused_cfg = fused_layers(std::nullopt);
  compiled_config const fused_cc(fused_cfg);
  std::map<std::string, std::size_t> layer_job;
  convert_plan p;
  for (auto const& e : task.ckpt.tensors()) {
    tensor_info const& t = *e.tensor;
    std::string const& name = t.name;
    bool const quantized = t.type == dtype::I8 || t.type == dtype::F8_E4M3;
    if (std::string const module = strip(name, ".scale"); !module.empty()) {
      tensor_info const* w = task.ckpt.find(module + ".weight");
      if (w == nullptr || (w->type != dtype::I8 && w->type != dtype::F8_E4M3)) {
        throw data_error(printable(name) + ": scales without an I8 or F8_E4M3 weight '" + printable(module) +
                         ".weight'");
      }
      if (converted(w->type)) {
        continue;  // converted with its weight
      }
    } else if (quantized) {
      std::string const module = strip(name, ".weight");
      if (module.empty()) {
        throw data_error(printable(name) + ": an " + std::string(qtl::io::dtype_name(t.type)) +
                         " tensor that is not a quantized weight of DeepSeek-V4's form (L.weight with L.scale)");
      }
      fp8_layer l = dsv4_layer_of(t, module, task.ckpt);
      if (converted(t.type)) {
        cv::block_grid const& g = l.grid;
        std::size_t const ss = shard_of[l.scale->name];
        auto out = [&](std::size_t shard, std::string out_name, dtype type, std::vector<std::int64_t> shape) {
          return add_output(task.shards, shard, name, std::move(out_name), type, std::move(shape));
        };
        std::int64_t const group = to == target::mxfp4 ? cv::mxfp4_block : 16;
        if (to_fp4 && g.k % group != 0) {
          throw data_error(printable(name) + ": K = " + std::to_string(g.k) + " is not a multiple of " +
                           std::to_string(group) + " (" + (to == target::mxfp4 ? "MXFP4" : "NVFP4") + " blocks)");
        }
        switch (to) {
          case target::fp8_ue8m0:
            l.outs = {out(e.shard, name, dtype::F8_E4M3, shape_of(g.n, g.k)),
                      out(ss, l.scale->name, dtype::F8_E8M0, shape_of(g.n_blocks(), g.k_blocks()))};
            break;
          case target::bf16:
            l.outs = {out(e.shard, name, dtype::BF16, shape_of(g.n, g.k))};
            break;
          case target::mxfp4:
            l.outs = {out(e.shard, name, dtype::I8, shape_of(g.n, g.k / 2)),
                      out(ss, l.scale->name, dtype::F8_E8M0, shape_of(g.n, g.k / cv::mxfp4_block))};
            break;
          case target::nvfp4:
            l.outs = {out(e.shard, name, dtype::U8, shape_of(g.n, g.k / 2)),
                      out(ss, l.scale->name, dtype::F8_E4M3, shape_of(g.n, g.k / 16)),
                      out(ss, module + ".global_scale", dtype::F32, {1})};
            break;
        }
        add_layer_job(p, layer_job, fused_cc, std::move(l), to);
        continue;
      }
    } else if (t.type == dtype::F8_E5M2 || t.type == dtype::F8_E8M0) {
      throw data_error(printable(name) + ": an " + std::string(qtl::io::dtype_name(t.type)) +
                       " tensor that is not part of DeepSeek-V4's form (FP8 weights are F8_E4M3, scales L.scale)");
    }
    convert_job j;  // copied byte for byte: everything else, and the quantized weights --to leaves
    j.copy = &t;
    j.copy_out = add_output(task.shards, e.shard, name, name, t.type, t.shape);
    j.in_bytes = t.bytes.size();
    p.jobs.push_back(std::move(j));
  }
  if (p.layers == 0) {
    throw data_error(in + (to == target::bf16    ? ": no quantized weights"
                           : to_fp4              ? ": no FP8 weights (F8_E4M3 L.weight)"
                                                 : ": no MXFP4 experts (I8 L.weight)") +
                     " in DeepSeek-V4's form: nothing to convert");
  }
  return p;
}

/// The output config of DeepSeek-V4's form: fp8-ue8m0 keeps the quantization_config (every weight
/// is now FP8 128x128 blocks with E8M0 scales) and sets `expert_dtype: "fp8"` (the routed experts'
/// dtype, which vLLM reads); bf16 drops both; mxfp4 and nvfp4 keep both as they are (no engine
/// config names FP4 attention weights: docs/spec/deepseek_v4.md §3).
void set_dsv4_config(ojson& model_config, target to) {
  if (to == target::bf16) {
    model_config.erase("quantization_config");
    model_config.erase("expert_dtype");
  } else if (to == target::fp8_ue8m0) {
    model_config["expert_dtype"] = "fp8";
  }
}

/// The pool's jobs: each plan job run by `run_job`.
worker_pool_jobs converter_jobs(std::vector<convert_job>& jobs, worker_context const& ctx) {
  worker_pool_jobs pool;
  pool.count = jobs.size();
  pool.run = [&jobs, &ctx](std::size_t i) { run_job(ctx, jobs[i]); };
  pool.bytes = [&jobs](std::size_t i) { return jobs[i].in_bytes; };
  pool.describe = [&jobs](std::size_t i) {
    convert_job const& j = jobs[i];
    return qtl::io::printable(j.copy != nullptr ? j.copy->name : j.layers.front().weight->name);
  };
  pool.file = [&jobs](std::size_t i) {
    return jobs[i].copy != nullptr ? jobs[i].copy_out.shard : jobs[i].layers.front().outs.front().shard;
  };
  return pool;
}

/// The output's quantization_config, set in `model_config`: fp8-ue8m0 the input's (else the
/// default block config) with `scale_fmt: "ue8m0"`, bf16 none, mxfp4 and nvfp4 compressed-tensors
/// with `kept_linear` ignored.
void set_output_config(ojson& model_config, ojson qobj, target to, std::vector<std::string> const& kept_linear) {
  switch (to) {
    case target::fp8_ue8m0:
      if (qobj.is_object()) {
        qobj["scale_fmt"] = "ue8m0";
        model_config["quantization_config"] = qobj;
      } else {
        model_config["quantization_config"] = default_ue8m0_config();  // a bare file's config still goes beside it
      }
      break;
    case target::bf16:
      model_config.erase("quantization_config");
      break;
    case target::mxfp4:
    case target::nvfp4:
      model_config["quantization_config"] = ct_fp4_config(to, kept_linear);
      break;
  }
}

/// The summary on standard output: each layer converted, the counts, sizes and speed.
void print_summary(convert_args const& a, target to, convert_plan const& p, unsigned threads, std::uint64_t total_in,
                   std::uint64_t total_out, double secs) {
  std::ostringstream out;
  out << "qtl convert: " << a.in << " -> " << a.out_dir << " (--to " << a.to;
  if (to == target::fp8_ue8m0) {
    out << ", recipe " << a.recipe << (a.canonical ? ", canonical" : "");
  }
  out << ", " << threads << " thread" << (threads == 1 ? "" : "s") << ")\n";
  out << "  " << std::left << std::setw(48) << "layer" << "done\n";
  std::size_t copied = 0;
  for (auto const& j : p.jobs) {
    if (j.copy != nullptr) {
      ++copied;
      continue;
    }
    for (auto const& l : j.layers) {
      out << "  " << std::setw(48) << shown(l.module)
          << (l.mxfp4 ? std::string("mxfp4 1x32")
                      : "fp8 block " + std::to_string(l.grid.block.n) + "x" + std::to_string(l.grid.block.k))
          << " -> " << a.to;
      if (to == target::nvfp4) {
        out << " (global scale " << std::setprecision(9) << j.global_scale << (j.layers.size() > 1 ? ", shared" : "")
            << ")";
      }
      out << "\n";
    }
  }
  out << "  " << p.layers << " layers converted, " << copied << " tensors copied";
  if (p.dropped > 0) {
    out << ", " << p.dropped << " input scales dropped";
  }
  out << "\n  in " << human_bytes(total_in) << ", out " << human_bytes(total_out) << ", " << std::fixed
      << std::setprecision(2) << secs << " s, " << std::setprecision(3)
      << (secs > 0 ? static_cast<double>(total_in) / secs / 1e9 : 0.0) << " GB/s of input\n";
  std::cout << out.str();
}

int run_convert(convert_args const& a) {
  auto const t0 = std::chrono::steady_clock::now();
  target const to = parse_target(a.to);
  check_flags(a, to);

  // --- input and plan ---------------------------------------------------------------------------
  terminal_progress bar;
  checkpoint_job task("convert", a.in, a.out_dir, &bar, [&bar](std::string const& line) { bar.note(line); });
  bool const dsv4 = is_dsv4(task);
  block_config bc;
  convert_plan p;
  if (dsv4) {
    check_dsv4(task, a, to);
    p = plan_dsv4(task, to, a.in);
  } else {
    bc = read_block_config(task, to);
    p = plan_convert(task, bc, to, a.in);
  }

  // --- output files (headers now, data by the workers), workers --------------------------------
  task.open_outputs(a.force);
  std::uint64_t total_in = 0;
  for (auto const& j : p.jobs) {
    total_in += j.in_bytes;
  }
  worker_context const ctx{task.shards, to, a.recipe, a.canonical, a.allow_nonfinite};
  unsigned const threads = task.run_workers(a.threads, converter_jobs(p.jobs, ctx));

  // --- config files, commit ---------------------------------------------------------------------
  if (dsv4) {
    set_dsv4_config(task.model_config, to);
  } else {
    set_output_config(task.model_config, bc.qobj, to, p.kept_linear);
  }
  if (!task.model_config.empty()) {
    task.write_json("config.json", task.model_config);
  }
  task.commit();
  double const secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_summary(a, to, p, threads, total_in, task.bytes_out(), secs);
  return exit_ok;
}

}  // namespace

command define_convert(CLI::App& app) {
  auto a = std::make_shared<convert_args>();
  auto* cmd = app.add_subcommand(
      "convert", "the engines' load-time converters run offline on a whole FP8-block checkpoint: power-of-two "
                 "(UE8M0) scales, BF16, MXFP4 or NVFP4; DeepSeek-V4's own form (MXFP4 experts) to FP8 "
                 "blocks, BF16, or its FP8 weights to MXFP4 or NVFP4");
  add_checkpoint_paths(cmd, a->in, a->out_dir);
  cmd->add_option("--to", a->to, "fp8-ue8m0, bf16, mxfp4 or nvfp4")
      ->required()
      ->check(CLI::IsMember({"fp8-ue8m0", "bf16", "mxfp4", "nvfp4"}));
  a->recipe_opt = cmd->add_option("--recipe", a->recipe,
                                  "--to fp8-ue8m0: whose requant: sglang (default: bf16 dequant, bits rule), "
                                  "sglang-legacy (bf16, log2 rule) or vllm (f32, log2 rule)")
                      ->check(one_of_names<cv::recipes>());
  cmd->add_flag("--canonical", a->canonical,
                "--to fp8-ue8m0: the requant's fixed point (applied twice), what the engine of --recipe holds "
                "after its own load-time requant of the output");
  cmd->add_option("--threads", a->threads, "worker threads (default: every core)")->check(integer_in(0, max_threads));
  cmd->add_flag("--force", a->force, "replace OUT_DIR even when it holds files that are not a checkpoint's");
  cmd->add_flag("--allow-nonfinite", a->allow_nonfinite,
                "--to bf16 and fp8-ue8m0: convert weights holding NaN codes or blocks that dequantize to NaN or Inf "
                "(refused by default)");
  return {cmd, [a]() { return run_convert(*a); }};
}

}  // namespace qtl::tool
