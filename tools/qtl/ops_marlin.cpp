// qtl op marlin-* (qtl/marlin.hpp): Marlin weight, scale and zero-point layouts, and back.
//
//   marlin-repack-gptq   --bits 4|8 [--a8]  qweight I32 [K/pf,N], sort_indices I32 [K] optional
//                                           -> qweight I32 [K/16,N*16/pf]
//   unmarlin-gptq        --bits [--a8]      qweight (Marlin), sort_indices optional -> qweight [K/pf,N]
//   marlin-repack-awq    --bits [--a8]      qweight I32 [K,N/pf] (AWQ order) -> qweight (Marlin)
//   unmarlin-awq         --bits [--a8]      qweight (Marlin) -> qweight I32 [K,N/pf]
//   marlin-permute-scales / unmarlin-permute-scales  --group-size G|-1 [--a8]
//                                           scales F32|F16|BF16 [G',N] -> scales, columns moved
//   marlin-zero-points   --bits [--a8]      zp I32 [G,N] codes -> zp I32 [G,N/pf]
//   unmarlin-zero-points --bits [--a8]      zp I32 [G,N/pf] -> zp I32 [G,N]
//   awq-to-marlin-zero-points --bits [--a8] qzeros I32 [G,N/pf] (AWQ) -> zp I32 [G,N/pf]
//   marlin-sort-g-idx                       g_idx I32 [K] -> g_idx I32 [K] (sorted), sort_indices I32 [K]
//                                           (a STABLE sort: rows of a group in increasing order)
//   marlin-fp8-prepare   --dtype f16|bf16 [--size-k-first] [--block-size BN,BK]
//                        [--fold none|vllm|sglang-fp16] [--a8]
//       weight F8_E4M3 [N,K] ([K,N]), weight_scale F32 (finite) 0-dim/[1] (tensor), [N] (channel) or
//       [ceil(N/BN),K/BK] ([K/BK,ceil(N/BN)]) -> weight I32 (8-bit Marlin), weight_scale F16|BF16 [G,N]
//   marlin-nvfp4-prepare --dtype f16|bf16 [--no-rescale]
//       weight U8 [N,K/2], weight_scale F8_E4M3 [N,K/16], weight_global_scale F32 0-dim/[1] (> 0, finite)
//       -> weight I32 (4-bit Marlin of N padded to 64), weight_scale F8_E4M3 [K/16,Np] (S0E5M3
//          bytes), weight_global_scale F32, scale_factor F32 0-dim
//   marlin-mxfp4-prepare --dtype f16|bf16 [--a8]
//       weight U8 [N,K/2], weight_scale U8 [N,K/32] (E8M0) -> weight I32, weight_scale U8 [K/32,Np]
//
// W4A8, int4 weights with FP8 activations (qtl/w4a8.hpp; vLLM's CUTLASS ops, sglang's w4afp8.py):
//   encode-and-reorder-int4b          b I32 [N,K/8] (N % 16, K % 32 == 0) -> b_packed I32 [N,K/8]
//   encode-and-reorder-int4b-grouped  b I32 [E,N,K/8] (N % 16, K % 256 == 0) -> b_packed I32 [E,N,K/8]
//   pack-scale-fp8                    scales F8_E4M3 [...] -> packed F8_E4M3 [8 * numel]
//   convert-bf16-scales-to-fp8 --rule divide|reciprocal
//                                     scales F32|F16|BF16 [...,G] (finite) -> fp8_scales F8_E4M3 [...,G],
//                                     chan_scales F32 [...,1]
//   convert-packed-uint4b8-to-signed-int4   t I32 [...] -> t I32 [...]
//   interleave-scales --scale-pack p  scales F32|F16|BF16 [E,N,G] (G % p == 0) -> scales_interleaved [E,G/p,N*p]
//
// The contract is test/data/golden/README.md; shapes the layout cannot take are the library's
// shape_error (exit 2).

#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <qtl/dispatch.hpp>
#include <qtl/marlin.hpp>
#include <qtl/marlin_fp.hpp>
#include <qtl/w4a8.hpp>

#include "ops.hpp"

namespace qtl::tool {
namespace {

using qtl::marlin::act_dtype;
using qtl::marlin::act_width;

struct layout_flags {
  int bits = 0;
  bool a8 = false;
};

std::shared_ptr<layout_flags> add_layout_flags(CLI::App& cmd) {
  auto f = std::make_shared<layout_flags>();
  cmd.add_option("--bits", f->bits, "bits per code: 4 or 8")->required()->check(CLI::IsMember({4, 8}));
  cmd.add_flag("--a8", f->a8, "the 8-bit-activation layout (vLLM's is_a_8bit: 32x32 tiles)");
  return f;
}

/// Calls `f.template operator()<Bits, A>()` for the run-time bits and --a8.
template <class F>
decltype(auto) with_layout(layout_flags const& l, F&& f) {
  return qtl::dispatch_bits<4, 8>(l.bits, [&]<int Bits>() -> decltype(auto) {
    return l.a8 ? f.template operator()<Bits, act_width::a8>() : f.template operator()<Bits, act_width::a16>();
  });
}

view1d<std::int32_t const> optional_indices(op_io& io, std::optional<typed_tensor<std::int32_t>>& keep) {
  if (auto const* t = io.optional_tensor("sort_indices", {dtype::I32}, {1})) {
    keep.emplace(*t);
    return keep->view1();
  }
  return {};
}

enum class weight_op { repack_gptq, unrepack_gptq, repack_awq, unrepack_awq };

op_spec weight_spec(char const* name, char const* help, weight_op kind) {
  return {name, help, [kind](CLI::App& cmd) -> op_runner {
            auto l = add_layout_flags(cmd);
            return [kind, l](op_io& io) {
              typed_tensor<std::int32_t> const q(io.tensor("qweight", {dtype::I32}, {2}));
              std::optional<typed_tensor<std::int32_t>> keep;
              bool const gptq = kind == weight_op::repack_gptq || kind == weight_op::unrepack_gptq;
              view1d<std::int32_t const> const s = gptq ? optional_indices(io, keep) : view1d<std::int32_t const>{};
              with_layout(*l, [&]<int Bits, act_width A>() {
                switch (kind) {
                  case weight_op::repack_gptq: emit(io, "qweight", dtype::I32, qtl::marlin::repack_gptq<Bits, A>(q.view2(), s)); break;
                  case weight_op::unrepack_gptq: emit(io, "qweight", dtype::I32, qtl::marlin::unrepack_gptq<Bits, A>(q.view2(), s)); break;
                  case weight_op::repack_awq: emit(io, "qweight", dtype::I32, qtl::marlin::repack_awq<Bits, A>(q.view2())); break;
                  case weight_op::unrepack_awq: emit(io, "qweight", dtype::I32, qtl::marlin::unrepack_awq<Bits, A>(q.view2())); break;
                }
              });
            };
          }};
}

op_spec scales_spec(char const* name, char const* help, bool inverse) {
  return {name, help, [inverse](CLI::App& cmd) -> op_runner {
            auto group = std::make_shared<index_t>(0);
            auto a8 = std::make_shared<bool>(false);
            cmd.add_option("--group-size", *group, "G, or -1 (channelwise)")->required();
            cmd.add_flag("--a8", *a8, "8-bit activations: always the 32-wide scale_perm_single");
            return [inverse, group, a8](op_io& io) {
              auto const& t = io.tensor("scales", float_types, {2});
              if (*group != -1 && *group <= 0) {
                throw usage_error("--group-size " + std::to_string(*group) + ": a positive group size or -1");
              }
              // size_k = rows * G: grouped iff G != -1, more than one row and 16-bit activations.
              index_t const rows = t.shape[0];
              auto const kind = qtl::marlin::scale_kind(*group == -1 ? rows : rows * *group, *group,
                                                        *a8 ? act_width::a8 : act_width::a16);
              with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const in(t);
                host_tensor<T, 2> out({t.shape[0], t.shape[1]});
                if (inverse) {
                  qtl::marlin::unpermute_scales<T>(in.view2(), kind, out.view());
                } else {
                  qtl::marlin::permute_scales<T>(in.view2(), kind, out.view());
                }
                emit(io, "scales", t.type, std::move(out));
              });
            };
          }};
}

enum class zp_op { codes, awq, inverse };

op_spec zero_points_spec(char const* name, char const* help, zp_op kind) {
  return {name, help, [kind](CLI::App& cmd) -> op_runner {
            auto l = add_layout_flags(cmd);
            return [kind, l](op_io& io) {
              typed_tensor<std::int32_t> const in(io.tensor(kind == zp_op::awq ? "qzeros" : "zp", {dtype::I32}, {2}));
              with_layout(*l, [&]<int Bits, act_width A>() {
                switch (kind) {
                  case zp_op::codes: emit(io, "zp", dtype::I32, qtl::marlin::zero_points<Bits, A>(in.view2())); break;
                  case zp_op::awq: emit(io, "zp", dtype::I32, qtl::marlin::awq_zero_points<Bits, A>(in.view2())); break;
                  case zp_op::inverse: emit(io, "zp", dtype::I32, qtl::marlin::unzero_points<Bits, A>(in.view2())); break;
                }
              });
            };
          }};
}

op_spec sort_g_idx_spec() {
  return {"marlin-sort-g-idx",
          "g_idx [K] -> the sorted g_idx and sort_indices for marlin-repack-gptq (a stable sort: the peers' "
          "torch.argsort is not)",
          [](CLI::App&) -> op_runner {
            return [](op_io& io) {
              typed_tensor<std::int32_t> const g(io.tensor("g_idx", {dtype::I32}, {1}));
              index_t const K = g.size();
              std::vector<std::int32_t> sorted(static_cast<std::size_t>(K)), indices(static_cast<std::size_t>(K));
              qtl::marlin::sort_g_idx(g.view1(), make_view(sorted.data(), K), make_view(indices.data(), K));
              io.emit("g_idx", dtype::I32, shape_of(K), std::move(sorted));
              io.emit("sort_indices", dtype::I32, shape_of(K), std::move(indices));
            };
          }};
}

struct fp_flags {
  std::string dtype_name = "f16";
  bool a8 = false;
  act_dtype dt() const { return dtype_name == "bf16" ? act_dtype::bf16 : act_dtype::f16; }
};

std::shared_ptr<fp_flags> add_fp_flags(CLI::App& cmd, char const* a8_help) {
  auto f = std::make_shared<fp_flags>();
  cmd.add_option("--dtype", f->dtype_name, "the activation (and scale) dtype")
      ->required()
      ->check(CLI::IsMember({"f16", "bf16"}));
  cmd.add_flag("--a8", f->a8, a8_help);
  return f;
}

template <act_width A>
host_tensor<std::int32_t, 2> fp4_weight(op_io& io, index_t& N, index_t& K, index_t& n_pad) {
  auto const& w = io.tensor("weight", {dtype::U8}, {2});
  typed_tensor<std::uint8_t> const wt(w);
  N = w.shape[0];
  K = 2 * w.shape[1];
  n_pad = qtl::marlin::fp4_padded_n(N);
  return qtl::marlin::repack_gptq<4, A>(qtl::marlin::pack_fp4_k(wt.view2(), n_pad).view());
}

void check_scale_shape(op_io& io, char const* name, tensor_info const& t, std::vector<std::int64_t> const& want) {
  if (t.shape != want) {
    throw data_error(io.where(name) + " has shape " + qtl::io::shape_string(t.shape) + ", the weight needs " +
                     qtl::io::shape_string(want));
  }
}

op_spec fp8_prepare_spec() {
  return {"marlin-fp8-prepare",
          "FP8 weight-only Marlin: e4m3 weight -> 8-bit Marlin, F32 scales -> [G,N] in --dtype, permuted, "
          "exponent bias folded (--fold)",
          [](CLI::App& cmd) -> op_runner {
            auto f = add_fp_flags(cmd, "8-bit activations: the A8 weight layout, scale_perm_single, no fold");
            auto k_first = std::make_shared<bool>(false);
            auto block = std::make_shared<std::string>();
            auto fold = std::make_shared<std::string>("vllm");
            cmd.add_flag("--size-k-first", *k_first, "weight is [K,N] (and block scales [K/BK,ceil(N/BN)])");
            cmd.add_option("--block-size", *block, "BN,BK: block scales");
            cmd.add_option("--fold", *fold, "the exponent-bias fold of the scales")
                ->capture_default_str()
                ->check(CLI::IsMember({"none", "vllm", "sglang-fp16"}));
            return [f, k_first, block, fold](op_io& io) {
              index_t group = -1, bn = 0;
              if (!block->empty()) {
                std::tie(bn, group) = parse_block_size(*block);
              }
              auto const& w = io.tensor("weight", {dtype::F8_E4M3}, {2});
              auto const& st = io.tensor("weight_scale", {dtype::F32}, {0, 1, 2});
              typed_tensor<std::uint8_t> const wt(w);
              typed_tensor<float> const sv(st);
              for (index_t j = 0; j < sv.size(); ++j) {
                if (!std::isfinite(sv.data()[j])) {
                  throw data_error(io.where("weight_scale") + " element " + std::to_string(j) + " is " +
                                   float_text(sv.data()[j]) + ": a weight scale is finite (the GEMM's scales would be " +
                                   float_text(sv.data()[j]) + ")");
                }
              }
              index_t const K = *k_first ? w.shape[0] : w.shape[1];
              index_t const N = *k_first ? w.shape[1] : w.shape[0];
              auto const packed = qtl::marlin::pack_fp8_k(wt.view2(), *k_first);
              auto marlin = f->a8 ? qtl::marlin::repack_gptq<8, act_width::a8>(packed.view())
                                  : qtl::marlin::repack_gptq<8, act_width::a16>(packed.view());
              // The scales as [G, N] floats.
              if (!block->empty()) {
                if (K % group != 0) throw data_error("K = " + std::to_string(K) + " is not a multiple of BK = " + std::to_string(group));
                index_t const G = K / group, nb = N / bn + (N % bn != 0 ? 1 : 0);
                check_scale_shape(io, "weight_scale", st, *k_first ? shape_of(G, nb) : shape_of(nb, G));
              } else if (sv.size() != 1) {
                check_scale_shape(io, "weight_scale", st, shape_of(N));
              }
              auto const groups = qtl::marlin::fp8_scale_groups(
                  std::span<float const>(sv.data(), static_cast<std::size_t>(sv.size())), N, K, *k_first, bn,
                  group == -1 ? 0 : group);
              auto const fold_kind = *fold == "none" ? qtl::marlin::fp8_scale_fold::none
                                     : *fold == "vllm" ? qtl::marlin::fp8_scale_fold::vllm
                                                       : qtl::marlin::fp8_scale_fold::sglang_fp16;
              auto run = [&]<class T>(std::type_identity<T>, dtype out_type) {
                auto out = qtl::marlin::fp8_marlin_scales<T>(groups.view(), K, group,
                                                             f->a8 ? act_width::a8 : act_width::a16, fold_kind);
                emit(io, "weight", dtype::I32, std::move(marlin));
                emit(io, "weight_scale", out_type, std::move(out));
              };
              if (f->dt() == act_dtype::bf16) {
                run(std::type_identity<bfloat16_t>{}, dtype::BF16);
              } else {
                run(std::type_identity<half_t>{}, dtype::F16);
              }
            };
          }};
}

op_spec nvfp4_prepare_spec() {
  return {"marlin-nvfp4-prepare",
          "NVFP4 weight-only Marlin: weight -> 4-bit Marlin (N padded to 64), e4m3 scales -> S0E5M3 bytes "
          "[K/16,Np], global scale and scale factor",
          [](CLI::App& cmd) -> op_runner {
            auto dtype_name = std::make_shared<std::string>();
            auto no_rescale = std::make_shared<bool>(false);
            cmd.add_option("--dtype", *dtype_name, "the activation dtype")->required()->check(CLI::IsMember({"f16", "bf16"}));
            cmd.add_flag("--no-rescale", *no_rescale, "older vLLM: no scale factor (1)");
            return [dtype_name, no_rescale](op_io& io) {
              act_dtype const a = *dtype_name == "bf16" ? act_dtype::bf16 : act_dtype::f16;
              index_t N = 0, K = 0, n_pad = 0;
              auto marlin = fp4_weight<act_width::a16>(io, N, K, n_pad);
              auto const& st = io.tensor("weight_scale", {dtype::F8_E4M3}, {2});
              check_scale_shape(io, "weight_scale", st, shape_of(N, K / 16));
              auto const& gt = io.tensor("weight_global_scale", {dtype::F32}, {0, 1});
              if (typed_tensor<float>(gt).size() != 1) throw data_error(io.where("weight_global_scale") + " must hold one value");
              float const global = scalar_value(gt);
              if (!(global > 0) || !std::isfinite(global)) {
                throw data_error(io.where("weight_global_scale") + " is " + float_text(global) +
                                 ": a global scale is finite and positive (with 0 every weight dequantizes to 0)");
              }
              typed_tensor<std::uint8_t> const sv(st);
              auto const permuted = qtl::marlin::fp4_scale_groups(sv.view2(), n_pad, qtl::marlin::scale_kind(K, 16, act_width::a16));
              float const sf = *no_rescale ? 1.0f : qtl::marlin::nvfp4_scale_factor(permuted.view(), a);
              host_tensor<std::uint8_t, 2> out({K / 16, n_pad});
              qtl::marlin::nvfp4_process_scales(permuted.view(), sf, out.view());
              std::vector<float> gs{qtl::marlin::nvfp4_process_global_scale(global, a, sf)};
              emit(io, "weight", dtype::I32, std::move(marlin));
              emit(io, "weight_scale", dtype::F8_E4M3, std::move(out));
              io.emit("weight_global_scale", dtype::F32, gt.shape, std::move(gs));
              io.emit("scale_factor", dtype::F32, {}, std::vector<float>{sf});
            };
          }};
}

op_spec mxfp4_prepare_spec() {
  return {"marlin-mxfp4-prepare",
          "MXFP4 weight-only Marlin: weight -> 4-bit Marlin (N padded to 64), E8M0 scales -> [K/32,Np] bytes",
          [](CLI::App& cmd) -> op_runner {
            auto f = add_fp_flags(cmd, "FP8 activations: the A8 weight layout, no regroup, scale bytes + 6");
            return [f](op_io& io) {
              index_t N = 0, K = 0, n_pad = 0;
              auto marlin = f->a8 ? fp4_weight<act_width::a8>(io, N, K, n_pad) : fp4_weight<act_width::a16>(io, N, K, n_pad);
              if (K % 32 != 0) throw data_error("K = " + std::to_string(K) + " is not a multiple of 32 (MXFP4 groups)");
              auto const& st = io.tensor("weight_scale", {dtype::U8}, {2});
              check_scale_shape(io, "weight_scale", st, shape_of(N, K / 32));
              typed_tensor<std::uint8_t> const sv(st);
              auto const permuted = qtl::marlin::fp4_scale_groups(
                  sv.view2(), n_pad, qtl::marlin::scale_kind(K, 32, f->a8 ? act_width::a8 : act_width::a16));
              host_tensor<std::uint8_t, 2> out({K / 32, n_pad});
              qtl::marlin::mxfp4_process_scales(permuted.view(), f->dt(), f->a8, out.view());
              emit(io, "weight", dtype::I32, std::move(marlin));
              emit(io, "weight_scale", dtype::U8, std::move(out));
            };
          }};
}

// The int4 matrices travel as the engines' int32 words; the reorder works on their bytes.
op_spec int4b_reorder_spec(bool grouped) {
  return {grouped ? "encode-and-reorder-int4b-grouped" : "encode-and-reorder-int4b",
          grouped ? "int4 b [E,N,K/8] (int32 words) -> CUTLASS's encoded, Hopper-reordered b_packed (vLLM "
                    "cutlass_encode_and_reorder_int4b_grouped)"
                  : "int4 b [N,K/8] (int32 words) -> CUTLASS's encoded, Hopper-reordered b_packed (vLLM "
                    "cutlass_encode_and_reorder_int4b)",
          [grouped](CLI::App&) -> op_runner {
            return [grouped](op_io& io) {
              auto const& t = io.tensor("b", {dtype::I32}, {grouped ? 3 : 2});
              index_t const e = grouped ? t.shape[0] : 1;
              index_t const n = t.shape[grouped ? 1 : 0];
              index_t const k = t.shape[grouped ? 2 : 1] * 8;
              std::span const in(reinterpret_cast<std::uint8_t const*>(t.bytes.data()), t.bytes.size());
              std::vector<std::uint8_t> out(in.size());
              if (grouped) {
                qtl::encode_and_reorder_int4b_grouped(in, e, n, k, out);
              } else {
                qtl::encode_and_reorder_int4b(in, n, k, out);
              }
              std::vector<std::int32_t> words(out.size() / 4);
              std::memcpy(words.data(), out.data(), out.size());
              io.emit("b_packed", dtype::I32, std::vector<std::int64_t>(t.shape.begin(), t.shape.end()),
                      std::move(words));
            };
          }};
}

op_spec pack_scale_fp8_spec() {
  return {"pack-scale-fp8",
          "e4m3 scales [...] -> packed [8*numel]: CUTLASS's packed_scale_t (vLLM cutlass_pack_scale_fp8)",
          [](CLI::App&) -> op_runner {
            return [](op_io& io) {
              typed_tensor<float8_e4m3fn_t> const in(io.tensor("scales", {dtype::F8_E4M3}, {1, 2, 3, 4}));
              std::vector<float8_e4m3fn_t> out(static_cast<std::size_t>(8 * in.size()));
              qtl::pack_scale_fp8(std::span(in.data(), static_cast<std::size_t>(in.size())), out);
              io.emit("packed", dtype::F8_E4M3, {8 * in.size()}, std::move(out));
            };
          }};
}

op_spec scale_split_spec() {
  return {"convert-bf16-scales-to-fp8",
          "group scales [...,G] -> e4m3 fp8_scales (/8) and F32 chan_scales [...,1] (x8) (vLLM "
          "convert_bf16_scales_to_fp8)",
          [](CLI::App& cmd) -> op_runner {
            auto rule = std::make_shared<std::string>();
            cmd.add_option("--rule", *rule,
                           "the per-token quantizer's rule: divide (x / s, its CUDA path) or reciprocal (x * (1/s), "
                           "its native path)")
                ->required()
                ->check(CLI::IsMember({"divide", "reciprocal"}));
            return [rule](op_io& io) {
              auto const& t = io.tensor("scales", float_types, {1, 2, 3, 4});
              index_t const cols = t.shape.back();
              index_t rows = 1;
              for (std::size_t d = 0; d + 1 < t.shape.size(); ++d) {
                rows *= t.shape[d];
              }
              auto const op = *rule == "divide" ? fp8_scale_op::divide : fp8_scale_op::multiply_reciprocal;
              std::vector<float8_e4m3fn_t> q(static_cast<std::size_t>(rows * cols));
              std::vector<float> chan(static_cast<std::size_t>(rows));
              with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const in(t);
                qtl::convert_bf16_scales_to_fp8<T>(make_view(in.data(), rows, cols), op,
                                                   make_view(q.data(), rows, cols), make_view(chan.data(), rows));
              });
              std::vector<std::int64_t> shape(t.shape.begin(), t.shape.end());
              io.emit("fp8_scales", dtype::F8_E4M3, shape, std::move(q));
              shape.back() = 1;
              io.emit("chan_scales", dtype::F32, std::move(shape), std::move(chan));
            };
          }};
}

op_spec uint4b8_spec() {
  return {
      "convert-packed-uint4b8-to-signed-int4",
      "int32 words t of uint4b8 codes -> t of two's-complement int4 (vLLM "
      "convert_packed_uint4b8_to_signed_int4_inplace)",
      [](CLI::App&) -> op_runner {
        return [](op_io& io) {
          auto const& t = io.any_tensor("t", 1);
          if (t.type != dtype::I32) {
            throw data_error(io.where("t") + " is " + std::string(qtl::io::dtype_name(t.type)) + "; the op needs I32");
          }
          typed_tensor<std::int32_t> const in(t);
          std::vector<std::int32_t> out(static_cast<std::size_t>(in.size()));
          qtl::convert_packed_uint4b8_to_signed_int4(std::span(in.data(), out.size()), out);
          io.emit("t", dtype::I32, std::vector<std::int64_t>(t.shape.begin(), t.shape.end()), std::move(out));
        };
      }};
}

op_spec interleave_scales_spec() {
  return {"interleave-scales",
          "scales [E,N,G] -> scales_interleaved [E,G/p,N*p] (sglang w4afp8 interleave_scales(scales, scale_pack))",
          [](CLI::App& cmd) -> op_runner {
            auto pack = std::make_shared<std::int64_t>(0);
            cmd.add_option("--scale-pack", *pack, "scales packed together along K (sglang's scale_pack)")->required();
            return [pack](op_io& io) {
              auto const& t = io.tensor("scales", float_types, {3});
              if (*pack <= 0) {
                throw usage_error("--scale-pack " + std::to_string(*pack) + ": a positive integer");
              }
              with_float_type(t.type, [&]<class T>(std::type_identity<T>) {
                typed_tensor<T> const in(t);
                index_t const g = t.shape[2];
                host_tensor<T, 3> out({t.shape[0], g % *pack == 0 ? g / *pack : 0, t.shape[1] * *pack});
                qtl::interleave_scales<T>(in.view3(), *pack, out.view());
                emit(io, "scales_interleaved", t.type, std::move(out));
              });
            };
          }};
}

}  // namespace

std::vector<op_spec> marlin_ops() {
  return {
      weight_spec("marlin-repack-gptq",
                  "GPTQ qweight [K/pf,N] (+ sort_indices [K] for act-order) -> Marlin qweight [K/16,N*16/pf]",
                  weight_op::repack_gptq),
      weight_spec("unmarlin-gptq", "Marlin qweight (+ sort_indices) -> GPTQ qweight [K/pf,N] (exact inverse)",
                  weight_op::unrepack_gptq),
      weight_spec("marlin-repack-awq", "AWQ qweight [K,N/pf] -> Marlin qweight [K/16,N*16/pf]", weight_op::repack_awq),
      weight_spec("unmarlin-awq", "Marlin qweight -> AWQ qweight [K,N/pf] (exact inverse)", weight_op::unrepack_awq),
      scales_spec("marlin-permute-scales", "scales [G,N]: columns moved as marlin_permute_scales", false),
      scales_spec("unmarlin-permute-scales", "scales [G,N]: the inverse of marlin-permute-scales", true),
      zero_points_spec("marlin-zero-points", "zero-point codes zp [G,N] -> Marlin zp [G,N/pf]", zp_op::codes),
      zero_points_spec("unmarlin-zero-points", "Marlin zp [G,N/pf] -> codes [G,N] (exact inverse)", zp_op::inverse),
      zero_points_spec("awq-to-marlin-zero-points", "AWQ qzeros [G,N/pf] -> Marlin zp [G,N/pf]", zp_op::awq),
      sort_g_idx_spec(),
      fp8_prepare_spec(),
      nvfp4_prepare_spec(),
      mxfp4_prepare_spec(),
      int4b_reorder_spec(false),
      int4b_reorder_spec(true),
      pack_scale_fp8_spec(),
      scale_split_spec(),
      uint4b8_spec(),
      interleave_scales_spec(),
  };
}

}  // namespace qtl::tool
