// Layout ops: byte permutations of scales and MoE weights (qtl/blockscale.hpp, qtl/moe.hpp).
//
//   swizzle-blockscale                  scale U8|F8_E4M3 [M,K] or [B,M,K]
//                                       -> scale, same dtype, [pad128(M), pad4(K)] (or [B,..])
//   unswizzle-blockscale --rows --cols  scale [Mp,Kp] or [B,Mp,Kp] -> scale [M,K] or [B,M,K]
//   swap-w13-to-w31                     x [..., 2R, C] any dtype -> x, halves of dim -2 swapped
//   reorder-w1w3-to-w3w1 --dim d        weight, scale (any dtypes, same size along d)
//                                       -> both with the halves along d swapped
//   prepare-trtllm-fp4-moe --hidden-size H --intermediate-size I --num-experts E [--no-gated]
//       gemm1_weights U8 [E,R1,H/2], gemm1_scales F8_E4M3 [E,R1,H/16], gemm2_weights U8 [E,H,I/2],
//       gemm2_scales F8_E4M3 [E,H,I/16]  (R1 = 2I gated, I otherwise)
//       -> gemm{1,2}_{weights,scales}_fp4_shuffled, same dtypes and shapes
//   align-fp4-moe-weights-for-fi --min-alignment a [--is-act-and-mul]
//   align-fp4-moe-hidden-dim-for-fi --min-alignment a
//       w13 U8 [E,R1,H/2], w13_scale F8_E4M3 [E,R1,H/16], w2 U8 [E,H,I/2], w2_scale F8_E4M3 [E,H,I/16]
//       -> the four zero-padded (I, or H, to a multiple of a), and padded_intermediate /
//          padded_hidden_size I64 0-dim
//   interleave-linear-and-gate --group-size g --dim d   x (any dtype and rank) -> x, the halves of d
//       interleaved in groups of g (vLLM's CuteDSL order)
//   reorder-w13-to-w31-for-flashinfer-cutedsl [--swigluoai]   w13, w13_scale [E,R,C] (any dtypes)
//       -> both with rows [up; gate]: from gpt-oss's [g0,u0,g1,u1..] with --swigluoai, else from [gate; up]
//   pad-nvfp4-weight-for-cutlass --alignment a   weight U8 [N,K/2]
//       -> weight U8 (N and K padded to multiples of a), weights_padding_bytes I64 0-dim
//   prepare-trtllm-mxint4-moe   gemm1_weights I32 [E,2I,H/8] (uint4b8 words) or U8 [E,2I,H/2] (signed
//       int4), gemm1_scales BF16 [E,2I,H/32], gemm2_weights I32 [E,H,I/8] or U8 [E,H,I/2] (as gemm1's),
//       gemm2_scales BF16 [E,H,I/32]
//       -> gemm1_weights U8 [E,H/256,2I,128], gemm1_scales BF16 [E,2I*H/32], gemm2_weights U8
//          [E,I/256,H,128], gemm2_scales BF16 [E,H*I/32] (vLLM's prepare_static_weights_for_trtllm_mxint4_moe)
//   shuffle-deepseek-fp8-moe-weights   w13 F8_E4M3|U8 [E,M,K], w2 (the same) -> both [E,K/128,M,128]
//       (vLLM's _shuffle_deepseek_fp8_moe_weights: tile-64 row shuffle, BlockMajorK)
//   rotate-weights-for-fi-trtllm-fp8-per-tensor-moe [--is-gated-activation]   gemm1_weights, gemm2_weights
//       F8_E4M3|U8 [E,R,K] -> both, rows shuffled (GEMM1 gate/up interleaved first when gated)
//   convert-moe-weights-to-flashinfer-trtllm-block-layout [--no-gated]   w13_weight, w2_weight BF16 [E,R,K]
//       -> both BF16 [E,2K/128,R,64] (vLLM's BF16 TRT-LLM block layout)
//   shuffle-mxfp8-moe-weights [--is-gated]   w13 F8_E4M3|U8 [E,R1,H], w2 [E,H,I], w13_scale U8|F8_E8M0
//       [E,R1,H/32], w2_scale [E,H,I/32] -> the four, rows shuffled, scales 128x4 (vLLM's _shuffle_mxfp8_moe_weights)
//
// The halves swaps move whole elements, so they run on bytes: a tensor split along dimension d
// is seen as [outer, size(d), inner * element bytes], and its halves are swapped along the middle.

#include <limits>

#include <qtl/blockscale.hpp>
#include <qtl/moe.hpp>
#include <qtl/moe_trtllm.hpp>

#include "ops.hpp"

namespace qtl::tool {
namespace {

/// `t` as bytes [prod(shape[:d]), shape[d], prod(shape[d+1:]) * element size].
view3d<std::uint8_t const> split_view(tensor_info const& t, int d) {
  index_t outer = 1;
  index_t inner = static_cast<index_t>(qtl::io::dtype_size(t.type));
  for (int i = 0; i < static_cast<int>(t.shape.size()); ++i) {
    if (i < d) {
      outer *= t.shape[static_cast<std::size_t>(i)];
    } else if (i > d) {
      inner *= t.shape[static_cast<std::size_t>(i)];
    }
  }
  auto const* p = reinterpret_cast<std::uint8_t const*>(t.bytes.data());
  return make_view(p, outer, t.shape[static_cast<std::size_t>(d)], inner);
}

view3d<std::uint8_t> same_shape(std::vector<std::uint8_t>& buf, view3d<std::uint8_t const> v) {
  buf.resize(static_cast<std::size_t>(v.size()));
  return make_view(buf.data(), v.extent[0], v.extent[1], v.extent[2]);
}

/// `--dim dim` of the input `name` of rank `rank`, counted from the front.
/// @throws data_error if it is outside [-rank, rank).
int resolve_dim(op_io const& io, char const* name, int dim, int rank) {
  if (dim < -rank || dim >= rank) {
    throw data_error("--dim " + std::to_string(dim) + " is outside the " + std::to_string(rank) + " dimensions of " +
                     io.where(name));
  }
  return dim < 0 ? dim + rank : dim;
}

op_spec swizzle_op() {
  return {"swizzle-blockscale",
          "lay out block scales [M,K] (or [B,M,K]) in the 128x4 tcgen05 layout, padded with zeros "
          "to [pad128(M), pad4(K)]",
          [](CLI::App&) -> op_runner {
            return [](op_io& io) {
              auto const& t = io.tensor("scale", {dtype::U8, dtype::F8_E4M3}, {2, 3});
              typed_tensor<std::uint8_t> const in(t);
              if (t.shape.size() == 2) {
                emit(io, "scale", t.type, qtl::swizzle_blockscale(in.view2()));
              } else {
                emit(io, "scale", t.type, qtl::swizzle_blockscale(in.view3()));
              }
            };
          }};
}

op_spec unswizzle_op() {
  return {"unswizzle-blockscale",
          "read 128x4-layout scales [Mp,Kp] (or [B,Mp,Kp]) back into [M,K] (inverse of "
          "swizzle-blockscale)",
          [](CLI::App& cmd) -> op_runner {
            auto rows = std::make_shared<index_t>(0);
            auto cols = std::make_shared<index_t>(0);
            cmd.add_option("--rows", *rows, "M, the rows of the unswizzled scales")->required()->check(integer_in(0));
            cmd.add_option("--cols", *cols, "K, the columns (K-blocks) of the unswizzled scales")
                ->required()
                ->check(integer_in(0));
            return [rows, cols](op_io& io) {
              auto const& t = io.tensor("scale", {dtype::U8, dtype::F8_E4M3}, {2, 3});
              typed_tensor<std::uint8_t> const in(t);
              if (t.shape.size() == 2) {
                emit(io, "scale", t.type, qtl::unswizzle_blockscale(in.view2(), *rows, *cols));
              } else {
                emit(io, "scale", t.type, qtl::unswizzle_blockscale(in.view3(), *rows, *cols));
              }
            };
          }};
}

op_spec swap_op() {
  return {"swap-w13-to-w31",
          "x [..., 2R, C] (any dtype): exchange the halves of dimension -2 ([w1; w3] -> [w3; w1])",
          [](CLI::App&) -> op_runner {
            return [](op_io& io) {
              auto const& t = io.any_tensor("x", 2);
              auto const in = split_view(t, static_cast<int>(t.shape.size()) - 2);
              std::vector<std::uint8_t> out;
              qtl::swap_w13_to_w31(in, same_shape(out, in));
              io.emit("x", t.type, t.shape, std::move(out));
            };
          }};
}

op_spec reorder_op() {
  return {"reorder-w1w3-to-w3w1",
          "weight and scale (any dtypes): exchange the halves along --dim ([w1, w3] -> [w3, w1])",
          [](CLI::App& cmd) -> op_runner {
            auto dim = std::make_shared<int>(-2);
            cmd.add_option("--dim", *dim, "the dimension split in halves (negative: from the end)")
                ->capture_default_str();
            return [dim](op_io& io) {
              auto const& w = io.any_tensor("weight", 1);
              auto const& s = io.any_tensor("scale", 1);
              int const rank = static_cast<int>(w.shape.size());
              if (static_cast<int>(s.shape.size()) != rank) {
                throw data_error(io.where("scale") + " has shape " + qtl::io::shape_string(s.shape) +
                                 ", not of the rank of weight " + qtl::io::shape_string(w.shape));
              }
              int const d = resolve_dim(io, "weight", *dim, rank);
              auto const win = split_view(w, d);
              auto const sin = split_view(s, d);
              std::vector<std::uint8_t> wout, sout;
              qtl::reorder_w1w3_to_w3w1<1>(win, sin, same_shape(wout, win), same_shape(sout, sin));
              io.emit("weight", w.type, w.shape, std::move(wout));
              io.emit("scale", s.type, s.shape, std::move(sout));
            };
          }};
}

op_spec prepare_trtllm_op() {
  return {"prepare-trtllm-fp4-moe",
          "shuffle NVFP4 MoE weights and scales for trtllm-gen (epilogue tile 128; scales laid "
          "out 128x4 per expert)",
          [](CLI::App& cmd) -> op_runner {
            auto shape = std::make_shared<qtl::trtllm_fp4_moe_shape>();
            auto no_gated = std::make_shared<bool>(false);
            cmd.add_option("--hidden-size", shape->hidden_size, "H")->required()->check(integer_in(1));
            cmd.add_option("--intermediate-size", shape->intermediate_size, "I")->required()->check(integer_in(1));
            cmd.add_option("--num-experts", shape->num_experts, "E")->required()->check(integer_in(1));
            cmd.add_flag("--no-gated", *no_gated, "GEMM1 is one projection of I rows, not [up; gate]");
            return [shape, no_gated](op_io& io) {
              shape->gated = !*no_gated;
              index_t const e = shape->num_experts;
              index_t const h = shape->hidden_size;
              index_t const i = shape->intermediate_size;
              if (shape->gated && i > std::numeric_limits<index_t>::max() / 2) {
                throw usage_error("--intermediate-size " + std::to_string(i) +
                                  ": too large (GEMM1's 2 x I rows do not fit in 64 bits)");
              }
              index_t const r1 = shape->gemm1_rows();
              struct want {
                char const* name;
                dtype type;
                index_t rows, cols;
              };
              want const wants[] = {{"gemm1_weights", dtype::U8, r1, h / 2},
                                    {"gemm1_scales", dtype::F8_E4M3, r1, h / 16},
                                    {"gemm2_weights", dtype::U8, h, i / 2},
                                    {"gemm2_scales", dtype::F8_E4M3, h, i / 16}};
              view3d<std::uint8_t const> in[4];
              std::vector<std::uint8_t> out[4];
              view3d<std::uint8_t> outv[4];
              for (int k = 0; k < 4; ++k) {
                auto const& t = io.tensor(wants[k].name, {wants[k].type}, {3});
                if (t.shape != shape_of(e, wants[k].rows, wants[k].cols)) {
                  throw data_error(io.where(wants[k].name) + " has shape " +
                                   qtl::io::shape_string(t.shape) + "; the flags need " +
                                   qtl::io::shape_string(shape_of(e, wants[k].rows, wants[k].cols)));
                }
                in[k] = split_view(t, 1);
                outv[k] = same_shape(out[k], in[k]);
              }
              qtl::prepare_static_weights_for_trtllm_fp4_moe(
                  *shape, qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const>{in[0], in[1], in[2], in[3]},
                  qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t>{outv[0], outv[1], outv[2], outv[3]});
              for (int k = 0; k < 4; ++k) {
                io.emit(std::string(wants[k].name) + "_fp4_shuffled", wants[k].type,
                        shape_of(e, wants[k].rows, wants[k].cols), std::move(out[k]));
              }
            };
          }};
}

/// The four tensors of vLLM's FP4 MoE alignment helpers, as byte views.
qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const> fp4_moe_inputs(op_io const& io) {
  auto const& w13 = io.tensor("w13", {dtype::U8}, {3});
  auto const& w13s = io.tensor("w13_scale", {dtype::F8_E4M3}, {3});
  auto const& w2 = io.tensor("w2", {dtype::U8}, {3});
  auto const& w2s = io.tensor("w2_scale", {dtype::F8_E4M3}, {3});
  return {split_view(w13, 1), split_view(w13s, 1), split_view(w2, 1), split_view(w2s, 1)};
}

/// Runs `pad(in, out)` into buffers of `padding`'s extents and emits them with `size_name`.
template <class Pad>
void emit_fp4_moe_padding(op_io& io, qtl::fp4_moe_padding const& padding, char const* size_name, Pad&& pad) {
  char const* const names[4] = {"w13", "w13_scale", "w2", "w2_scale"};
  std::vector<std::uint8_t> out[4];
  view3d<std::uint8_t> v[4];
  for (int k = 0; k < 4; ++k) {
    auto const& x = padding.extents[k];
    out[k].resize(static_cast<std::size_t>(x[0] * x[1] * x[2]));
    v[k] = make_view(out[k].data(), x[0], x[1], x[2]);
  }
  pad(qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t>{v[0], v[1], v[2], v[3]});
  for (int k = 0; k < 4; ++k) {
    auto const& x = padding.extents[k];
    io.emit(names[k], k % 2 == 0 ? dtype::U8 : dtype::F8_E4M3, shape_of(x[0], x[1], x[2]), std::move(out[k]));
  }
  io.emit(size_name, dtype::I64, {}, std::vector<std::int64_t>{padding.padded});
}

/// `align-fp4-moe-hidden-dim-for-fi` (`hidden`) or `align-fp4-moe-weights-for-fi`.
op_spec align_op(bool hidden) {
  std::string const what = hidden ? "hidden" : "intermediate";
  return {hidden ? "align-fp4-moe-hidden-dim-for-fi" : "align-fp4-moe-weights-for-fi",
          "zero-pad an NVFP4 MoE layer's " + what + " size to a multiple of --min-alignment (vLLM's " +
              (hidden ? "align_fp4_moe_hidden_dim_for_fi)"
                      : "align_fp4_moe_weights_for_fi; each of gate and up padded on its own with --is-act-and-mul)"),
          [hidden, what](CLI::App& cmd) -> op_runner {
            auto a = std::make_shared<std::int64_t>(hidden ? 256 : 16);
            auto gated = std::make_shared<bool>(false);
            cmd.add_option("--min-alignment", *a,
                           "pad the " + what + " size to a multiple of this (default " + std::to_string(*a) + ")")
                ->check(integer_in(1, std::int64_t{1} << 30));
            if (!hidden) {
              cmd.add_flag("--is-act-and-mul", *gated, "w13 holds two projections of I rows each");
            }
            return [hidden, a, gated](op_io& io) {
              auto const in = fp4_moe_inputs(io);
              auto const padding = hidden ? qtl::align_fp4_moe_hidden_dim_for_fi_padding(in, *a)
                                          : qtl::align_fp4_moe_weights_for_fi_padding(in, *gated, *a);
              emit_fp4_moe_padding(io, padding, hidden ? "padded_hidden_size" : "padded_intermediate",
                                   [&](auto const& out) {
                                     if (hidden) {
                                       qtl::align_fp4_moe_hidden_dim_for_fi(in, out, *a);
                                     } else {
                                       qtl::align_fp4_moe_weights_for_fi(in, out, *gated, *a);
                                     }
                                   });
            };
          }};
}

op_spec interleave_op() {
  return {"interleave-linear-and-gate",
          "x (any dtype): interleave the two halves of --dim in groups of --group-size (vLLM's "
          "interleave_linear_and_gate, the CuteDSL MoE row order)",
          [](CLI::App& cmd) -> op_runner {
            auto group = std::make_shared<std::int64_t>(64);
            auto dim = std::make_shared<int>(-1);
            cmd.add_option("--group-size", *group, "rows per group (default 64)")
                ->check(integer_in(1, std::int64_t{1} << 30));
            cmd.add_option("--dim", *dim, "the dimension (negative: from the end; default -1)");
            return [group, dim](op_io& io) {
              auto const& x = io.any_tensor("x", 1);
              int const rank = static_cast<int>(x.shape.size());
              auto const in = split_view(x, resolve_dim(io, "x", *dim, rank));
              std::vector<std::uint8_t> out;
              qtl::interleave_linear_and_gate(in, same_shape(out, in), *group);
              io.emit("x", x.type, x.shape, std::move(out));
            };
          }};
}

op_spec reorder_cutedsl_op() {
  return {"reorder-w13-to-w31-for-flashinfer-cutedsl",
          "w13 and w13_scale [E,R,C] (any dtypes): rows to [up; gate], from gpt-oss's interleaved "
          "[g0, u0, g1, u1, ..] with --swigluoai, else from [gate; up] (vLLM's CuteDSL preparation)",
          [](CLI::App& cmd) -> op_runner {
            auto oai = std::make_shared<bool>(false);
            cmd.add_flag("--swigluoai", *oai, "the activation is SWIGLUOAI: w13's rows are interleaved");
            return [oai](op_io& io) {
              auto const& w = io.any_tensor("w13", 3);
              auto const& s = io.any_tensor("w13_scale", 3);
              if (w.shape.size() != 3 || s.shape.size() != 3) {
                throw data_error(io.where(w.shape.size() != 3 ? "w13" : "w13_scale") + " must have 3 dimensions");
              }
              auto const win = split_view(w, 1);
              auto const sin = split_view(s, 1);
              std::vector<std::uint8_t> wout, sout;
              qtl::reorder_w13_to_w31_for_flashinfer_cutedsl(*oai, win, sin, same_shape(wout, win),
                                                             same_shape(sout, sin));
              io.emit("w13", w.type, w.shape, std::move(wout));
              io.emit("w13_scale", s.type, s.shape, std::move(sout));
            };
          }};
}

op_spec pad_cutlass_op() {
  return {"pad-nvfp4-weight-for-cutlass",
          "zero-pad a packed NVFP4 weight [N,K/2] so that N and K are multiples of --alignment (vLLM's "
          "pad_nvfp4_weight_for_cutlass)",
          [](CLI::App& cmd) -> op_runner {
            auto a = std::make_shared<std::int64_t>(32);
            cmd.add_option("--alignment", *a, "pad N and K to multiples of this (default 32)")
                ->check(integer_in(1, std::int64_t{1} << 30));
            return [a](op_io& io) {
              auto const& w = io.tensor("weight", {dtype::U8}, {2});
              typed_tensor<std::uint8_t> const in(w);
              auto const p = qtl::pad_nvfp4_weight_for_cutlass_shape(w.shape[0], w.shape[1], *a);
              std::vector<std::uint8_t> out(static_cast<std::size_t>(p.rows * p.col_bytes));
              qtl::pad_nvfp4_weight_for_cutlass(in.view2(), make_view(out.data(), p.rows, p.col_bytes), *a);
              io.emit("weight", dtype::U8, shape_of(p.rows, p.col_bytes), std::move(out));
              io.emit("weights_padding_bytes", dtype::I64, {}, std::vector<std::int64_t>{p.padding_bytes});
            };
          }};
}

op_spec prepare_mxint4_op() {
  return {"prepare-trtllm-mxint4-moe",
          "shuffle MXINT4 MoE weights (int4, BF16 scales per 32) for trtllm-gen: I32 weights are the "
          "checkpoint's uint4b8 words and become signed int4; [w1; w3] rows to [w3; w1], the row "
          "shuffle, block_k 128 layout, scales 128x4 (vLLM's prepare_static_weights_for_trtllm_mxint4_moe)",
          [](CLI::App&) -> op_runner {
            return [](op_io& io) {
              char const* const names[4] = {"gemm1_weights", "gemm1_scales", "gemm2_weights", "gemm2_scales"};
              tensor_info const* t[4];
              for (int k = 0; k < 4; ++k) {
                t[k] = k % 2 == 0 ? &io.tensor(names[k], {dtype::I32, dtype::U8}, {3})
                                  : &io.tensor(names[k], {dtype::BF16}, {3});
              }
              if (t[0]->type != t[2]->type) {
                throw data_error(io.where("gemm2_weights") + " is " + std::string(qtl::io::dtype_name(t[2]->type)) +
                                 " but gemm1_weights is " + std::string(qtl::io::dtype_name(t[0]->type)) +
                                 "; both are uint4b8 words (I32) or both signed int4 bytes (U8)");
              }
              index_t const per_elem = t[0]->type == dtype::I32 ? 8 : 2;  // int4 values per element
              qtl::trtllm_mxint4_moe_shape const shape{.hidden_size = t[2]->shape[1],
                                                       .intermediate_size = t[0]->shape[1] / 2,
                                                       .num_experts = t[0]->shape[0],
                                                       .uint4b8 = t[0]->type == dtype::I32};
              index_t const e = shape.num_experts;
              index_t const h = shape.hidden_size;
              index_t const i = shape.intermediate_size;
              if (!shape.valid() || t[0]->shape[1] % 2 != 0) {
                throw data_error(io.where("gemm1_weights") + " and gemm2_weights give hidden size " +
                                 std::to_string(h) + " (gemm2's rows) and intermediate size " + std::to_string(i) +
                                 " (half gemm1's rows); both must be positive multiples of 256");
              }
              std::vector<std::int64_t> const want[4] = {shape_of(e, 2 * i, h / per_elem), shape_of(e, 2 * i, h / 32),
                                                         shape_of(e, h, i / per_elem), shape_of(e, h, i / 32)};
              for (int k = 0; k < 4; ++k) {
                if (t[k]->shape != want[k]) {
                  throw data_error(io.where(names[k]) + " has shape " + qtl::io::shape_string(t[k]->shape) +
                                   "; gemm1_weights and gemm2_weights give " + qtl::io::shape_string(want[k]));
                }
              }
              auto const bytes = [](tensor_info const& x, index_t rows, index_t cols) {
                return make_view(reinterpret_cast<std::uint8_t const*>(x.bytes.data()), x.shape[0], rows, cols);
              };
              typed_tensor<std::uint16_t> const s1(*t[1]);
              typed_tensor<std::uint16_t> const s2(*t[3]);
              std::vector<std::uint8_t> w1(static_cast<std::size_t>(e * 2 * i * h / 2));
              std::vector<std::uint8_t> w2(static_cast<std::size_t>(e * h * i / 2));
              std::vector<std::uint16_t> o1(static_cast<std::size_t>(s1.size()));
              std::vector<std::uint16_t> o2(static_cast<std::size_t>(s2.size()));
              qtl::prepare_static_weights_for_trtllm_mxint4_moe(
                  shape,
                  qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint16_t const>{
                      bytes(*t[0], 2 * i, h / 2), s1.view3(), bytes(*t[2], h, i / 2), s2.view3()},
                  qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint16_t>{
                      make_view(w1.data(), e, 2 * i, h / 2), make_view(o1.data(), e, 2 * i, h / 32),
                      make_view(w2.data(), e, h, i / 2), make_view(o2.data(), e, h, i / 32)});
              io.emit("gemm1_weights", dtype::U8, {e, h / 256, 2 * i, 128}, std::move(w1));
              io.emit("gemm1_scales", dtype::BF16, {e, 2 * i * (h / 32)}, std::move(o1));
              io.emit("gemm2_weights", dtype::U8, {e, i / 256, h, 128}, std::move(w2));
              io.emit("gemm2_scales", dtype::BF16, {e, h * (i / 32)}, std::move(o2));
            };
          }};
}

/// Emits `out` (bytes of `in`'s dtype) under `name` with the block layout's shape [E, K/128, R, 128]
/// (in elements of the dtype).
void emit_blocks(op_io& io, char const* name, tensor_info const& in, std::vector<std::uint8_t> out) {
  auto const size = static_cast<std::int64_t>(qtl::io::dtype_size(in.type));
  io.emit(name, in.type, {in.shape[0], in.shape[2] * size / 128, in.shape[1], 128 / size}, std::move(out));
}

// The two-tensor layouts of FlashInfer's TRT-LLM MoE kernels: 0 DeepSeek FP8, 1 FP8 per tensor, 2 BF16.
op_spec pair_layout_op(int which) {
  struct kind {
    char const* op;
    char const* help;
    char const* names[2];
    char const* flag;  // the op's boolean flag, or null
    char const* flag_help;
  };
  static kind const kinds[3] = {
      {"shuffle-deepseek-fp8-moe-weights",
       "DeepSeek FP8 block-scale MoE weights w13, w2 [E,M,K] to FlashInfer TRT-LLM's BlockMajorK [E,K/128,M,128] "
       "(epilogue tile 64 row shuffle; vLLM's _shuffle_deepseek_fp8_moe_weights)",
       {"w13", "w2"},
       nullptr,
       nullptr},
      {"rotate-weights-for-fi-trtllm-fp8-per-tensor-moe",
       "FP8 per-tensor MoE weights gemm1_weights, gemm2_weights [E,R,K]: rows shuffled for FlashInfer TRT-LLM, "
       "GEMM1's gate/up rows interleaved first with --is-gated-activation (vLLM's "
       "rotate_weights_for_fi_trtllm_fp8_per_tensor_moe)",
       {"gemm1_weights", "gemm2_weights"},
       "--is-gated-activation",
       "GEMM1 holds [up; gate] rows of a gated activation"},
      {"convert-moe-weights-to-flashinfer-trtllm-block-layout",
       "BF16 MoE weights w13_weight, w2_weight [E,R,K] to FlashInfer TRT-LLM's block layout [E,2K/128,R,64] (rows "
       "shuffled; W13's [gate; up] interleaved unless --no-gated; vLLM's "
       "convert_moe_weights_to_flashinfer_trtllm_block_layout)",
       {"w13_weight", "w2_weight"},
       "--no-gated",
       "W13 is one projection (is_gated_act_gemm=False)"},
  };
  kind const& k = kinds[which];
  return {k.op, k.help, [which, &k](CLI::App& cmd) -> op_runner {
            auto flag = std::make_shared<bool>(false);
            if (k.flag != nullptr) {
              cmd.add_flag(k.flag, *flag, k.flag_help);
            }
            return [which, &k, flag](op_io& io) {
              tensor_info const* t[2];
              view3d<std::uint8_t const> in[2];
              std::vector<std::uint8_t> out[2];
              view3d<std::uint8_t> ov[2];
              for (int j = 0; j < 2; ++j) {
                t[j] = which == 2 ? &io.tensor(k.names[j], {dtype::BF16}, {3})
                                  : &io.tensor(k.names[j], {dtype::F8_E4M3, dtype::U8}, {3});
                in[j] = split_view(*t[j], 1);
                ov[j] = same_shape(out[j], in[j]);
              }
              if (which == 0) {
                qtl::shuffle_deepseek_fp8_moe_weights(in[0], in[1], ov[0], ov[1]);
              } else if (which == 1) {
                qtl::rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(in[0], in[1], *flag, ov[0], ov[1]);
              } else {
                qtl::convert_moe_weights_to_flashinfer_trtllm_block_layout(in[0], in[1], !*flag, ov[0], ov[1]);
              }
              for (int j = 0; j < 2; ++j) {
                if (which == 1) {
                  io.emit(k.names[j], t[j]->type, t[j]->shape, std::move(out[j]));
                } else {
                  emit_blocks(io, k.names[j], *t[j], std::move(out[j]));
                }
              }
            };
          }};
}

op_spec shuffle_mxfp8_op() {
  return {"shuffle-mxfp8-moe-weights",
          "MXFP8 MoE weights w13, w2 and their E8M0 scales for FlashInfer TRT-LLM: rows shuffled (gate/up "
          "interleaved first with --is-gated), scales laid out 128x4 (vLLM's _shuffle_mxfp8_moe_weights)",
          [](CLI::App& cmd) -> op_runner {
            auto gated = std::make_shared<bool>(false);
            cmd.add_flag("--is-gated", *gated, "w13 holds [up; gate] rows of a gated activation");
            return [gated](op_io& io) {
              char const* const names[4] = {"w13", "w13_scale", "w2", "w2_scale"};
              tensor_info const* t[4];
              view3d<std::uint8_t const> in[4];
              std::vector<std::uint8_t> out[4];
              view3d<std::uint8_t> ov[4];
              for (int k = 0; k < 4; ++k) {
                t[k] = k % 2 == 0 ? &io.tensor(names[k], {dtype::F8_E4M3, dtype::U8}, {3})
                                  : &io.tensor(names[k], {dtype::U8, dtype::F8_E8M0}, {3});
                in[k] = split_view(*t[k], 1);
                ov[k] = same_shape(out[k], in[k]);
              }
              qtl::shuffle_mxfp8_moe_weights(
                  qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const>{in[0], in[1], in[2], in[3]},
                  qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t>{ov[0], ov[1], ov[2], ov[3]}, *gated);
              for (int k = 0; k < 4; ++k) {
                io.emit(names[k], t[k]->type, t[k]->shape, std::move(out[k]));
              }
            };
          }};
}

}  // namespace

std::vector<op_spec> layout_ops() {
  return {swizzle_op(),        unswizzle_op(),    swap_op(),         reorder_op(),      prepare_trtllm_op(),
          align_op(false),     align_op(true),    pad_cutlass_op(),  interleave_op(),   reorder_cutedsl_op(),
          prepare_mxint4_op(), pair_layout_op(0), pair_layout_op(1), pair_layout_op(2), shuffle_mxfp8_op()};
}

}  // namespace qtl::tool
