// The FlashInfer / TRT-LLM MoE weight preparations of vLLM (qtl/moe.hpp), under vLLM's names and
// arguments:
//
//   align_fp4_moe_weights_for_fi(w13, w13_scale, w2, w2_scale, is_act_and_mul, min_alignment=16)
//       -> (w13, w13_scale, w2, w2_scale, padded_intermediate)
//   align_fp4_moe_hidden_dim_for_fi(w13, w13_scale, w2, w2_scale, min_alignment=256)
//       -> (w13, w13_scale, w2, w2_scale, padded_hidden_size)
//   pad_nvfp4_weight_for_cutlass(weight, alignment=32) -> (weight, weights_padding_bytes)
//   interleave_linear_and_gate(x, group_size=64, dim=-1) -> x interleaved (CuteDSL order)
//   reorder_w13_to_w31_for_flashinfer_cutedsl(activation, w13, w13_scale) -> (w13, w13_scale)
//       rows to [up; gate]; activation SWIGLUOAI (vLLM's MoEActivation, or its name) means gpt-oss's
//       interleaved rows
//   prepare_static_weights_for_trtllm_fp4_moe(..., is_gated_activation)   (vLLM's keyword; bind_fp4
//       has sglang's `is_gated`)
//   prepare_static_weights_for_trtllm_mxint4_moe(gemm1_weights, gemm1_scales, gemm2_weights, gemm2_scales)
//       -> {"gemm1_weights", "gemm1_scales", "gemm2_weights", "gemm2_scales"}: int32 weights (uint4b8
//       words) or uint8 (signed int4), bfloat16 scales, C-contiguous; the engine's output shapes
//   shuffle_deepseek_fp8_moe_weights(w13, w2) -> (w13, w2) [E, K/128, M, 128]   (vLLM's
//       _shuffle_deepseek_fp8_moe_weights)
//   rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(gemm1_weights, gemm2_weights, is_gated_activation)
//       -> (gemm1_weights, gemm2_weights): new arrays (vLLM replaces its tensors' .data)
//   convert_moe_weights_to_flashinfer_trtllm_block_layout(cache_permute_indices, w13_weight, w2_weight,
//       is_gated_act_gemm=True) -> (w13, w2) bfloat16 [E, 2K/128, R, 64]: new arrays (the cache is unused)
//   shuffle_mxfp8_moe_weights(w13, w2, w13_scale, w2_scale, is_gated) -> the four   (vLLM's
//       _shuffle_mxfp8_moe_weights); unshuffle_mxfp8_moe_weights, the same arguments: its inverse
//
// and the inverses of the trtllm-gen layouts (qtl/moe_trtllm.hpp), each the prepared arrays back to
// its forward's inputs:
//
//   unprepare_static_weights_for_trtllm_mxint4_moe(gemm1_weights, gemm1_scales, gemm2_weights,
//       gemm2_scales, uint4b8=True) -> the dict of the checkpoint layout: int32 uint4b8 words, or
//       uint8 signed int4 bytes (uint4b8=False)
//   unshuffle_deepseek_fp8_moe_weights(w13, w2), unrotate_weights_for_fi_trtllm_fp8_per_tensor_moe(
//       gemm1_weights, gemm2_weights, is_gated_activation),
//   convert_moe_weights_from_flashinfer_trtllm_block_layout(w13_weight, w2_weight, is_gated_act_gemm=True)
//       -> (w13, w2) [E, R, K]
//
// Tensors of the paddings: byte arrays (uint8, or float8_e4m3fn for the scales) of the shapes
// qtl/moe.hpp names, any strides with a contiguous innermost dimension; of the row orders:
// C-contiguous arrays of any element type the bindings know (moved as bytes). Each output keeps its
// input's dtype and shape and is a new array (where vLLM needs no padding it returns its inputs;
// QTL returns copies). Every function takes device arrays too (C-contiguous, all on one device):
// the host function's checks first, then qtl/cuda/moe.cuh's kernels, one launch per tensor for all
// experts, on the arrays' stream.

#include <cctype>
#include <string>

#include <qtl/moe.hpp>
#include <qtl/moe_trtllm.hpp>

#include "bindings.hpp"

namespace qtl::py {
namespace {

/// A 2-D view as [1, rows, cols].
template <class T>
view3d<T> rank3(view2d<T> v) {
  return {v.data, {1, v.extent[0], v.extent[1]}, {v.extent[0] * v.stride[0], v.stride[0], v.stride[1]}};
}

array_in take_bytes(nb::handle obj, char const* name, index_t rank) {
  array_in a = take(obj, name, true);
  a.check_type({elem::u8, elem::fp8_e4m3});
  a.check_rank(rank);
  return a;
}

nb::object align_fp4_moe(nb::handle w13, nb::handle w13s, nb::handle w2, nb::handle w2s, bool hidden, bool gated,
                         index_t min_alignment) {
  array_in const a[4] = {take_bytes(w13, "w13", 3), take_bytes(w13s, "w13_scale", 3), take_bytes(w2, "w2", 3),
                         take_bytes(w2s, "w2_scale", 3)};
  char const* const op = hidden ? "qtl.align_fp4_moe_hidden_dim_for_fi" : "qtl.align_fp4_moe_weights_for_fi";
  for (int k = 1; k < 4; ++k) {
    check_same_place(op, a[0], a[k]);
  }
  qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const> const in{
      a[0].as_view<std::uint8_t const, 3>(), a[1].as_view<std::uint8_t const, 3>(),
      a[2].as_view<std::uint8_t const, 3>(), a[3].as_view<std::uint8_t const, 3>()};
  qtl::fp4_moe_padding const p = hidden ? qtl::align_fp4_moe_hidden_dim_for_fi_padding(in, min_alignment)
                                        : qtl::align_fp4_moe_weights_for_fi_padding(in, gated, min_alignment);
  auto out_of = [&](int k) {
    auto const& x = p.extents[k];
    return array_out(a[k].type, {x[0], x[1], x[2]}, a[k]);
  };
  array_out o[4] = {out_of(0), out_of(1), out_of(2), out_of(3)};
  {
    qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t> const out{o[0].v3<std::uint8_t>(), o[1].v3<std::uint8_t>(),
                                                                      o[2].v3<std::uint8_t>(), o[3].v3<std::uint8_t>()};
    view3d<std::uint8_t const> const din[4] = {in.gemm1_weights, in.gemm1_scales, in.gemm2_weights, in.gemm2_scales};
    view3d<std::uint8_t> const dout[4] = {out.gemm1_weights, out.gemm1_scales, out.gemm2_weights, out.gemm2_scales};
    run_on(
        a[0], op,
        [&] {
          if (hidden) {
            qtl::align_fp4_moe_hidden_dim_for_fi(in, out, min_alignment);
          } else {
            qtl::align_fp4_moe_weights_for_fi(in, out, gated, min_alignment);
          }
        },
        [&](device::backend const& b, device::stream_t s) {
          return b.fp4_moe(hidden ? device::moe_op::align_hidden : device::moe_op::align_intermediate, 0, 0, 0, gated,
                           min_alignment, din, dout, s);
        });
  }
  kind const k = a[0].from;
  return nb::make_tuple(o[0].release(k), o[1].release(k), o[2].release(k), o[3].release(k), p.padded);
}

nb::object pad_nvfp4_weight_for_cutlass(nb::handle weight, index_t alignment) {
  array_in const w = take_bytes(weight, "weight", 2);
  qtl::nvfp4_cutlass_padding const p = qtl::pad_nvfp4_weight_for_cutlass_shape(w.dim(0), w.dim(1), alignment);
  array_out o(w.type, {p.rows, p.col_bytes}, w);
  run_on(
      w, "qtl.pad_nvfp4_weight_for_cutlass",
      [&] { qtl::pad_nvfp4_weight_for_cutlass(w.v2<std::uint8_t const>(), o.v2<std::uint8_t>(), alignment); },
      [&](device::backend const& b, device::stream_t s) {
        return b.moe_rows(device::rows_op::pad_cutlass, rank3(w.as_view<std::uint8_t const, 2>()),
                          rank3(o.v2<std::uint8_t>()), alignment, s);
      });
  return nb::make_tuple(o.release(w.from), p.padding_bytes);
}

/// `v` with no outer rows: the host function's checks on device arrays, which it never reads then.
template <class T>
view3d<T> no_outer(view3d<T> v) {
  v.extent[0] = 0;
  return v;
}

array_in take_any(nb::handle obj, char const* name, index_t min_rank) {
  array_in a = take(obj, name, true);
  if (a.type == elem::other) {
    throw dtype_error(std::string(name) + ": unsupported dtype");
  }
  if (a.ndim() < min_rank) {
    throw qtl::shape_error(std::string(name) + ": expected at least " + std::to_string(min_rank) +
                           " dimensions, got shape " + a.shape());
  }
  a.check_contiguous();
  return a;
}

nb::object interleave_linear_and_gate(nb::handle x_obj, index_t group_size, index_t dim) {
  array_in const x = take_any(x_obj, "x", 1);
  if (dim < -x.ndim() || dim >= x.ndim()) {
    throw qtl::shape_error("interleave_linear_and_gate: dim " + std::to_string(dim) + " is outside the " +
                           std::to_string(x.ndim()) + " dimensions of x");
  }
  auto const in = split_bytes(x, dim < 0 ? dim + x.ndim() : dim);
  array_out o(x.type, x.extents(), x);
  auto const ov = make_view(o.data<std::uint8_t>(), in.extent[0], in.extent[1], in.extent[2]);
  if (x.on_device()) {  // the host function's checks, on no rows (the kernel's are a bare cudaErrorInvalidValue)
    qtl::interleave_linear_and_gate(no_outer(in), no_outer(ov), group_size);
  }
  run_on(
      x, "qtl.interleave_linear_and_gate", [&] { qtl::interleave_linear_and_gate(in, ov, group_size); },
      [&](device::backend const& b, device::stream_t s) {
        return b.moe_rows(device::rows_op::interleave, in, ov, group_size, s);
      });
  return o.release(x.from);
}

/// vLLM's `activation == MoEActivation.SWIGLUOAI`: the enum member (by its name) or a string.
bool is_swigluoai(nb::handle activation) {
  nb::handle const named = nb::hasattr(activation, "name") ? activation.attr("name") : activation;
  if (!nb::isinstance<nb::str>(named)) {
    throw dtype_error("activation: expected vLLM's MoEActivation or its name");
  }
  std::string n = nb::cast<std::string>(named);
  for (auto& ch : n) {
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return n == "swigluoai";
}

nb::object reorder_w13_to_w31(nb::handle activation, nb::handle w13, nb::handle w13_scale) {
  bool const oai = is_swigluoai(activation);
  array_in const w = take_any(w13, "w13", 3);
  array_in const s = take_any(w13_scale, "w13_scale", 3);
  w.check_rank(3);
  s.check_rank(3);
  check_same_place("qtl.reorder_w13_to_w31_for_flashinfer_cutedsl", w, s);
  auto const wi = split_bytes(w, 1);
  auto const si = split_bytes(s, 1);
  array_out wo(w.type, w.extents(), w);
  array_out so(s.type, s.extents(), w);
  auto const wov = make_view(wo.data<std::uint8_t>(), wi.extent[0], wi.extent[1], wi.extent[2]);
  auto const sov = make_view(so.data<std::uint8_t>(), si.extent[0], si.extent[1], si.extent[2]);
  if (w.on_device()) {  // the host function's checks, on no experts
    qtl::reorder_w13_to_w31_for_flashinfer_cutedsl(oai, no_outer(wi), no_outer(si), no_outer(wov), no_outer(sov));
  }
  run_on(
      w, "qtl.reorder_w13_to_w31_for_flashinfer_cutedsl",
      [&] { qtl::reorder_w13_to_w31_for_flashinfer_cutedsl(oai, wi, si, wov, sov); },
      [&](device::backend const& b, device::stream_t st) { return b.reorder_w13_to_w31(oai, wi, si, wov, sov, st); });
  return nb::make_tuple(wo.release(w.from), so.release(s.from));
}

/// The bytes of a C-contiguous int32 or uint8 weight [E, R, C] as [E, R, C * element size].
view3d<std::uint8_t const> int4_weight_bytes(array_in const& a) {
  return make_view(static_cast<std::uint8_t const*>(a.nd.data()), a.dim(0), a.dim(1),
                   a.dim(2) * static_cast<index_t>(elem_size(a.type)));
}

/// vLLM's asserts on the MXINT4 sizes (qtl::trtllm_mxint4_moe_shape::valid), raised by `fn`.
void check_mxint4_shape(char const* fn, qtl::trtllm_mxint4_moe_shape const& shape) {
  if (!shape.valid()) {
    throw qtl::shape_error(std::string(fn) + ": hidden size " + std::to_string(shape.hidden_size) +
                           " (gemm2_weights' rows) and intermediate size " + std::to_string(shape.intermediate_size) +
                           " (half gemm1_weights' rows) must be positive multiples of 256");
  }
}

/// The four MXINT4 tensors by the engine's keys (gemm1 weights, gemm1 scales, gemm2 weights,
/// gemm2 scales).
nb::dict mxint4_dict(array_out (&o)[4], kind k) {
  nb::dict d;
  d["gemm1_weights"] = o[0].release(k);
  d["gemm1_scales"] = o[1].release(k);
  d["gemm2_weights"] = o[2].release(k);
  d["gemm2_scales"] = o[3].release(k);
  return d;
}

/// Runs the MXINT4 preparation (`inverse`: its inverse) of `lin` (the checkpoint side) and `blk`
/// (the prepared side) where `lead` lives; on the device after the host's checks on no experts.
template <class WI, class SI, class WO, class SO>
void run_mxint4(bool inverse, array_in const& lead, qtl::trtllm_mxint4_moe_shape const& shape,
                qtl::trtllm_fp4_moe_tensors<WI, SI> const& in, qtl::trtllm_fp4_moe_tensors<WO, SO> const& out) {
  auto const host = [&](qtl::trtllm_mxint4_moe_shape const& sh, qtl::trtllm_fp4_moe_tensors<WI, SI> const& i,
                        qtl::trtllm_fp4_moe_tensors<WO, SO> const& o) {
    if (inverse) {
      qtl::unprepare_static_weights_for_trtllm_mxint4_moe(sh, i, o);
    } else {
      qtl::prepare_static_weights_for_trtllm_mxint4_moe(sh, i, o);
    }
  };
  if (lead.on_device()) {
    auto none = shape;
    none.num_experts = 0;
    host(none,
         {no_outer(in.gemm1_weights), no_outer(in.gemm1_scales), no_outer(in.gemm2_weights), no_outer(in.gemm2_scales)},
         {no_outer(out.gemm1_weights), no_outer(out.gemm1_scales), no_outer(out.gemm2_weights),
          no_outer(out.gemm2_scales)});
  }
  run_on(
      lead,
      inverse ? "qtl.unprepare_static_weights_for_trtllm_mxint4_moe"
              : "qtl.prepare_static_weights_for_trtllm_mxint4_moe",
      [&] { host(shape, in, out); },
      [&](device::backend const& b, device::stream_t st) {
        view3d<std::uint8_t const> const wi[2] = {in.gemm1_weights, in.gemm2_weights};
        view3d<std::uint16_t const> const si[2] = {in.gemm1_scales, in.gemm2_scales};
        view3d<std::uint8_t> const wo[2] = {out.gemm1_weights, out.gemm2_weights};
        view3d<std::uint16_t> const so[2] = {out.gemm1_scales, out.gemm2_scales};
        return b.mxint4_moe(inverse, shape.hidden_size, shape.intermediate_size, shape.num_experts, shape.uint4b8, wi,
                            si, wo, so, st);
      });
}

nb::object prepare_mxint4_moe(nb::handle g1w, nb::handle g1s, nb::handle g2w, nb::handle g2s) {
  char const* const fn = "prepare_static_weights_for_trtllm_mxint4_moe";
  array_in w[2] = {take(g1w, "gemm1_weights", true), take(g2w, "gemm2_weights", true)};
  array_in s[2] = {take(g1s, "gemm1_scales", true), take(g2s, "gemm2_scales", true)};
  for (int k = 0; k < 2; ++k) {
    w[k].check_type({elem::i32, elem::u8});
    w[k].check_rank(3);
    w[k].check_contiguous();
    s[k].check_type({elem::bf16});
    s[k].check_rank(3);
  }
  check_same_place("qtl.prepare_static_weights_for_trtllm_mxint4_moe", w[0], w[1]);
  check_same_place("qtl.prepare_static_weights_for_trtllm_mxint4_moe", w[0], s[0]);
  check_same_place("qtl.prepare_static_weights_for_trtllm_mxint4_moe", w[0], s[1]);
  if (w[0].type != w[1].type) {
    throw dtype_error(std::string(fn) + ": gemm1_weights is " + elem_name(w[0].type) + " but gemm2_weights is " +
                      elem_name(w[1].type) + "; both are uint4b8 words (int32) or both signed int4 bytes (uint8)");
  }
  qtl::trtllm_mxint4_moe_shape const shape{.hidden_size = w[1].dim(1),
                                           .intermediate_size = w[0].dim(1) / 2,
                                           .num_experts = w[0].dim(0),
                                           .uint4b8 = w[0].type == elem::i32};
  check_mxint4_shape(fn, shape);
  index_t const e = shape.num_experts;
  index_t const h = shape.hidden_size;
  index_t const i = shape.intermediate_size;
  array_out o[4] = {array_out(elem::u8, {e, h / 256, 2 * i, 128}, w[0]),
                    array_out(elem::bf16, {e, 2 * i * (h / 32)}, w[0]), array_out(elem::u8, {e, i / 256, h, 128}, w[0]),
                    array_out(elem::bf16, {e, h * (i / 32)}, w[0])};
  run_mxint4(
      false, w[0], shape,
      qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint16_t const>{
          int4_weight_bytes(w[0]), s[0].as_view<std::uint16_t const, 3>(), int4_weight_bytes(w[1]),
          s[1].as_view<std::uint16_t const, 3>()},
      qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint16_t>{make_view(o[0].data<std::uint8_t>(), e, 2 * i, h / 2),
                                                               make_view(o[1].data<std::uint16_t>(), e, 2 * i, h / 32),
                                                               make_view(o[2].data<std::uint8_t>(), e, h, i / 2),
                                                               make_view(o[3].data<std::uint16_t>(), e, h, i / 32)});
  return mxint4_dict(o, w[0].from);
}

/// Throws unless `a` has the extents `want` (a prepared tensor, whose shape says the layer's).
void check_extents(char const* fn, array_in const& a, std::vector<index_t> const& want) {
  if (a.extents() != want) {
    throw qtl::shape_error(std::string(fn) + ": " + a.name + " has shape " + a.shape() + ", expected " +
                           qtl::shape_string(want.data(), static_cast<int>(want.size())));
  }
}

nb::object unprepare_mxint4_moe(nb::handle g1w, nb::handle g1s, nb::handle g2w, nb::handle g2s, bool uint4b8) {
  char const* const fn = "unprepare_static_weights_for_trtllm_mxint4_moe";
  array_in const w[2] = {take(g1w, "gemm1_weights", true), take(g2w, "gemm2_weights", true)};
  array_in const s[2] = {take(g1s, "gemm1_scales", true), take(g2s, "gemm2_scales", true)};
  for (int k = 0; k < 2; ++k) {
    w[k].check_type({elem::u8});
    w[k].check_rank(4);
    w[k].check_contiguous();
    s[k].check_type({elem::bf16});
    s[k].check_rank(2);
    s[k].check_contiguous();
  }
  check_same_place("qtl.unprepare_static_weights_for_trtllm_mxint4_moe", w[0], w[1]);
  check_same_place("qtl.unprepare_static_weights_for_trtllm_mxint4_moe", w[0], s[0]);
  check_same_place("qtl.unprepare_static_weights_for_trtllm_mxint4_moe", w[0], s[1]);
  // the prepared shapes: weights [E, K/256, R, 128] bytes, scales [E, R * K/32]
  qtl::trtllm_mxint4_moe_shape const shape{
      .hidden_size = w[1].dim(2), .intermediate_size = w[0].dim(2) / 2, .num_experts = w[0].dim(0), .uint4b8 = uint4b8};
  check_mxint4_shape(fn, shape);
  index_t const e = shape.num_experts;
  index_t const h = shape.hidden_size;
  index_t const i = shape.intermediate_size;
  check_extents(fn, w[0], {e, h / 256, 2 * i, 128});
  check_extents(fn, s[0], {e, 2 * i * (h / 32)});
  check_extents(fn, w[1], {e, i / 256, h, 128});
  check_extents(fn, s[1], {e, h * (i / 32)});
  elem const wt = uint4b8 ? elem::i32 : elem::u8;
  index_t const per_word = uint4b8 ? 4 : 1;  // bytes of a weight element
  array_out o[4] = {array_out(wt, {e, 2 * i, h / 2 / per_word}, w[0]), array_out(elem::bf16, {e, 2 * i, h / 32}, w[0]),
                    array_out(wt, {e, h, i / 2 / per_word}, w[0]), array_out(elem::bf16, {e, h, i / 32}, w[0])};
  auto const bytes = [](array_in const& a, index_t rows, index_t cols) {
    return make_view(static_cast<std::uint8_t const*>(a.nd.data()), a.dim(0), rows, cols);
  };
  auto const bits = [](array_in const& a, index_t rows, index_t cols) {
    return make_view(static_cast<std::uint16_t const*>(a.nd.data()), a.dim(0), rows, cols);
  };
  run_mxint4(
      true, w[0], shape,
      qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint16_t const>{
          bytes(w[0], 2 * i, h / 2), bits(s[0], 2 * i, h / 32), bytes(w[1], h, i / 2), bits(s[1], h, i / 32)},
      qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint16_t>{make_view(o[0].data<std::uint8_t>(), e, 2 * i, h / 2),
                                                               make_view(o[1].data<std::uint16_t>(), e, 2 * i, h / 32),
                                                               make_view(o[2].data<std::uint8_t>(), e, h, i / 2),
                                                               make_view(o[3].data<std::uint16_t>(), e, h, i / 32)});
  return mxint4_dict(o, w[0].from);
}

array_in take_layout(nb::handle obj, char const* name, std::initializer_list<elem> types, index_t rank = 3) {
  array_in a = take(obj, name, true);
  a.check_type(types);
  a.check_rank(rank);
  a.check_contiguous();
  return a;
}

/// A new array of `a`'s dtype where `a` lives: `a`'s shape, or the block layout's [E, K/128, R, 128]
/// (in elements).
array_out layout_out(array_in const& a, bool blocks) {
  if (!blocks) {
    return array_out(a.type, a.extents(), a);
  }
  auto const size = static_cast<index_t>(elem_size(a.type));
  return array_out(a.type, {a.dim(0), a.dim(2) * size / 128, a.dim(1), 128 / size}, a);
}

view3d<std::uint8_t> out_bytes(array_out& o, view3d<std::uint8_t const> const& like) {
  return make_view(o.data<std::uint8_t>(), like.extent[0], like.extent[1], like.extent[2]);
}

/// The three two-tensor layouts, by device::trtllm_pair_op: the Python names, the arrays' names,
/// whether the output is in blocks of 128 bytes, and the row maps and block width (0: a whole row)
/// that qtl/moe_trtllm.hpp's functions use, for their inverses.
struct pair_layout {
  char const* forward;
  char const* inverse;
  char const* names[2];
  bool blocks;
  trtllm_row_map maps[2];
  index_t block_k;
};

pair_layout pair_layout_of(device::trtllm_pair_op op, bool gated) {
  using k = trtllm_row_map::kind;
  switch (op) {
    case device::trtllm_pair_op::deepseek_fp8:
      return {"qtl.shuffle_deepseek_fp8_moe_weights",
              "qtl.unshuffle_deepseek_fp8_moe_weights",
              {"w13", "w2"},
              true,
              {{k::shuffle, 0, 64}, {k::shuffle, 0, 64}},
              128};
    case device::trtllm_pair_op::fp8_per_tensor:
      return {"qtl.rotate_weights_for_fi_trtllm_fp8_per_tensor_moe",
              "qtl.unrotate_weights_for_fi_trtllm_fp8_per_tensor_moe",
              {"gemm1_weights", "gemm2_weights"},
              false,
              {qtl::detail::gemm1_row_map(gated), qtl::detail::gemm1_row_map(false)},
              0};
    default:
      return {"qtl.convert_moe_weights_to_flashinfer_trtllm_block_layout",
              "qtl.convert_moe_weights_from_flashinfer_trtllm_block_layout",
              {"w13_weight", "w2_weight"},
              true,
              {qtl::detail::gemm1_row_map(gated, k::w1w3_gated), qtl::detail::gemm1_row_map(false)},
              128};
  }
}

/// A tensor of a two-tensor layout: E4M3 bytes (float8_e4m3fn or uint8), or bfloat16 for the BF16 one.
array_in take_pair(nb::handle obj, char const* name, device::trtllm_pair_op op, index_t rank = 3) {
  return op == device::trtllm_pair_op::bf16_block ? take_layout(obj, name, {elem::bf16}, rank)
                                                  : take_layout(obj, name, {elem::fp8_e4m3, elem::u8}, rank);
}

nb::object fp8_bf16_layout(device::trtllm_pair_op op, nb::handle a_obj, nb::handle b_obj, bool gated) {
  pair_layout const l = pair_layout_of(op, gated);
  array_in const a = take_pair(a_obj, l.names[0], op);
  array_in const b = take_pair(b_obj, l.names[1], op);
  check_same_place(l.forward, a, b);
  auto const va = split_bytes(a, 1);
  auto const vb = split_bytes(b, 1);
  array_out oa = layout_out(a, l.blocks);
  array_out ob = layout_out(b, l.blocks);
  auto const oav = out_bytes(oa, va);
  auto const obv = out_bytes(ob, vb);
  auto const host = [&](view3d<std::uint8_t const> x, view3d<std::uint8_t const> y, view3d<std::uint8_t> ox,
                        view3d<std::uint8_t> oy) {
    if (op == device::trtllm_pair_op::deepseek_fp8) {
      qtl::shuffle_deepseek_fp8_moe_weights(x, y, ox, oy);
    } else if (op == device::trtllm_pair_op::fp8_per_tensor) {
      qtl::rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(x, y, gated, ox, oy);
    } else {
      qtl::convert_moe_weights_to_flashinfer_trtllm_block_layout(x, y, gated, ox, oy);
    }
  };
  if (a.on_device()) {  // the host function's checks, on no experts
    host(no_outer(va), no_outer(vb), no_outer(oav), no_outer(obv));
  }
  run_on(
      a, l.forward, [&] { host(va, vb, oav, obv); },
      [&](device::backend const& t, device::stream_t s) { return t.trtllm_pair(op, gated, va, vb, oav, obv, s); });
  return nb::make_tuple(oa.release(a.from), ob.release(b.from));
}

/// A prepared tensor of a two-tensor layout as the bytes [E, R, K] of the tensor it came from:
/// [E, K/128, R, 128 bytes] in blocks, else [E, R, K] itself.
view3d<std::uint8_t const> prepared_bytes(array_in const& a, bool blocks, char const* fn) {
  auto const size = static_cast<index_t>(elem_size(a.type));
  if (!blocks) {
    return split_bytes(a, 1);
  }
  if (a.dim(3) * size != 128) {
    throw qtl::shape_error(std::string(fn) + ": " + a.name + " has shape " + a.shape() +
                           "; the block layout is [E, K/128, R, " + std::to_string(128 / size) +
                           "] (blocks of 128 bytes)");
  }
  return make_view(static_cast<std::uint8_t const*>(a.nd.data()), a.dim(0), a.dim(2), a.dim(1) * 128);
}

nb::object fp8_bf16_unlayout(device::trtllm_pair_op op, nb::handle a_obj, nb::handle b_obj, bool gated) {
  pair_layout const l = pair_layout_of(op, gated);
  index_t const rank = l.blocks ? 4 : 3;
  array_in const x[2] = {take_pair(a_obj, l.names[0], op, rank), take_pair(b_obj, l.names[1], op, rank)};
  check_same_place(l.inverse, x[0], x[1]);
  view3d<std::uint8_t const> const in[2] = {prepared_bytes(x[0], l.blocks, l.inverse),
                                            prepared_bytes(x[1], l.blocks, l.inverse)};
  auto const out_of = [&](int k) {
    auto const size = static_cast<index_t>(elem_size(x[k].type));
    return array_out(x[k].type, {in[k].extent[0], in[k].extent[1], in[k].extent[2] / size}, x[k]);
  };
  array_out o[2] = {out_of(0), out_of(1)};
  view3d<std::uint8_t> const out[2] = {out_bytes(o[0], in[0]), out_bytes(o[1], in[1])};
  auto const bk = [&](int k) { return l.block_k > 0 ? l.block_k : in[k].extent[2]; };
  if (x[0].on_device()) {  // the host function's checks, on no experts
    for (int k = 0; k < 2; ++k) {
      qtl::trtllm_moe_unshuffle_rows(no_outer(in[k]), no_outer(out[k]), l.maps[k], bk(k));
    }
  }
  run_on(
      x[0], l.inverse,
      [&] {
        for (int k = 0; k < 2; ++k) {
          qtl::trtllm_moe_unshuffle_rows(in[k], out[k], l.maps[k], bk(k));
        }
      },
      [&](device::backend const& t, device::stream_t s) {
        int const err = t.trtllm_unshuffle_rows(in[0], out[0], l.maps[0], bk(0), s);
        return err != 0 ? err : t.trtllm_unshuffle_rows(in[1], out[1], l.maps[1], bk(1), s);
      });
  return nb::make_tuple(o[0].release(x[0].from), o[1].release(x[1].from));
}

/// vLLM's `_shuffle_mxfp8_moe_weights` or (`inverse`) QTL's unshuffle: (w13, w2, w13_scale,
/// w2_scale) in, the same four out.
nb::object mxfp8_layout(bool inverse, nb::handle w13, nb::handle w2, nb::handle w13_scale, nb::handle w2_scale,
                        bool is_gated) {
  char const* const op = inverse ? "qtl.unshuffle_mxfp8_moe_weights" : "qtl.shuffle_mxfp8_moe_weights";
  array_in const a[4] = {
      take_layout(w13, "w13", {elem::fp8_e4m3, elem::u8}), take_layout(w13_scale, "w13_scale", {elem::u8}),
      take_layout(w2, "w2", {elem::fp8_e4m3, elem::u8}), take_layout(w2_scale, "w2_scale", {elem::u8})};
  for (int k = 1; k < 4; ++k) {
    check_same_place(op, a[0], a[k]);
  }
  view3d<std::uint8_t const> in[4];
  array_out o[4] = {layout_out(a[0], false), layout_out(a[1], false), layout_out(a[2], false), layout_out(a[3], false)};
  view3d<std::uint8_t> ov[4];
  for (int k = 0; k < 4; ++k) {
    in[k] = split_bytes(a[k], 1);
    ov[k] = out_bytes(o[k], in[k]);
  }
  using tensors_in = qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const>;
  using tensors_out = qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t>;
  auto const host = [&](tensors_in const& i, tensors_out const& out) {
    if (inverse) {
      qtl::unshuffle_mxfp8_moe_weights(i, out, is_gated);
    } else {
      qtl::shuffle_mxfp8_moe_weights(i, out, is_gated);
    }
  };
  if (a[0].on_device()) {  // the host function's checks, on no experts
    host(tensors_in{no_outer(in[0]), no_outer(in[1]), no_outer(in[2]), no_outer(in[3])},
         tensors_out{no_outer(ov[0]), no_outer(ov[1]), no_outer(ov[2]), no_outer(ov[3])});
  }
  run_on(
      a[0], op,
      [&] {
        host(tensors_in{in[0], in[1], in[2], in[3]}, tensors_out{ov[0], ov[1], ov[2], ov[3]});
      },
      [&](device::backend const& t, device::stream_t s) { return t.mxfp8_moe(inverse, is_gated, in, ov, s); });
  kind const k = a[0].from;
  return nb::make_tuple(o[0].release(k), o[2].release(k), o[1].release(k), o[3].release(k));
}

}  // namespace

void bind_moe_prep(nb::module_& m) {
  m.def(
      "align_fp4_moe_weights_for_fi",
      [](nb::handle w13, nb::handle w13s, nb::handle w2, nb::handle w2s, bool is_act_and_mul, index_t a) {
        return align_fp4_moe(w13, w13s, w2, w2s, false, is_act_and_mul, a);
      },
      nb::arg("w13"), nb::arg("w13_scale"), nb::arg("w2"), nb::arg("w2_scale"), nb::arg("is_act_and_mul"),
      nb::arg("min_alignment") = 16);
  m.def(
      "align_fp4_moe_hidden_dim_for_fi",
      [](nb::handle w13, nb::handle w13s, nb::handle w2, nb::handle w2s, index_t a) {
        return align_fp4_moe(w13, w13s, w2, w2s, true, false, a);
      },
      nb::arg("w13"), nb::arg("w13_scale"), nb::arg("w2"), nb::arg("w2_scale"), nb::arg("min_alignment") = 256);
  m.def("pad_nvfp4_weight_for_cutlass", &pad_nvfp4_weight_for_cutlass, nb::arg("weight"), nb::arg("alignment") = 32);
  m.def("interleave_linear_and_gate", &interleave_linear_and_gate, nb::arg("x"), nb::arg("group_size") = 64,
        nb::arg("dim") = -1);
  m.def("reorder_w13_to_w31_for_flashinfer_cutedsl", &reorder_w13_to_w31, nb::arg("activation"), nb::arg("w13"),
        nb::arg("w13_scale"));
  // vLLM's keyword for bind_fp4's function: an overload that calls it positionally (a call with
  // sglang's `is_gated`, or positional, resolves to bind_fp4's overload, which comes first). The
  // function is looked up per call, not captured, so that no Python object outlives the module.
  m.def(
      "prepare_static_weights_for_trtllm_fp4_moe",
      [](nb::handle g1w, nb::handle g2w, nb::handle g1s, nb::handle g2s, index_t h, index_t i, index_t e,
         bool is_gated_activation) {
        nb::object const f = nb::module_::import_("qtl._qtl").attr("prepare_static_weights_for_trtllm_fp4_moe");
        return f(g1w, g2w, g1s, g2s, h, i, e, is_gated_activation);
      },
      nb::arg("gemm1_weights"), nb::arg("gemm2_weights"), nb::arg("gemm1_scales_linear_fp4_bytes"),
      nb::arg("gemm2_scales_linear_fp4_bytes"), nb::arg("hidden_size"), nb::arg("intermediate_size"),
      nb::arg("num_experts"), nb::arg("is_gated_activation"));
  using pair = device::trtllm_pair_op;
  m.def(
      "shuffle_deepseek_fp8_moe_weights",
      [](nb::handle w13, nb::handle w2) { return fp8_bf16_layout(pair::deepseek_fp8, w13, w2, false); }, nb::arg("w13"),
      nb::arg("w2"));
  m.def(
      "unshuffle_deepseek_fp8_moe_weights",
      [](nb::handle w13, nb::handle w2) { return fp8_bf16_unlayout(pair::deepseek_fp8, w13, w2, false); },
      nb::arg("w13"), nb::arg("w2"));
  m.def(
      "rotate_weights_for_fi_trtllm_fp8_per_tensor_moe",
      [](nb::handle g1, nb::handle g2, bool gated) { return fp8_bf16_layout(pair::fp8_per_tensor, g1, g2, gated); },
      nb::arg("gemm1_weights"), nb::arg("gemm2_weights"), nb::arg("is_gated_activation"));
  m.def(
      "unrotate_weights_for_fi_trtllm_fp8_per_tensor_moe",
      [](nb::handle g1, nb::handle g2, bool gated) { return fp8_bf16_unlayout(pair::fp8_per_tensor, g1, g2, gated); },
      nb::arg("gemm1_weights"), nb::arg("gemm2_weights"), nb::arg("is_gated_activation"));
  m.def(
      "convert_moe_weights_to_flashinfer_trtllm_block_layout",
      [](nb::handle, nb::handle w13, nb::handle w2, bool gated) {
        return fp8_bf16_layout(pair::bf16_block, w13, w2, gated);
      },
      nb::arg("cache_permute_indices").none(), nb::arg("w13_weight"), nb::arg("w2_weight"),
      nb::arg("is_gated_act_gemm") = true);
  m.def(
      "convert_moe_weights_from_flashinfer_trtllm_block_layout",
      [](nb::handle w13, nb::handle w2, bool gated) { return fp8_bf16_unlayout(pair::bf16_block, w13, w2, gated); },
      nb::arg("w13_weight"), nb::arg("w2_weight"), nb::arg("is_gated_act_gemm") = true);
  m.def(
      "shuffle_mxfp8_moe_weights",
      [](nb::handle w13, nb::handle w2, nb::handle w13s, nb::handle w2s, bool gated) {
        return mxfp8_layout(false, w13, w2, w13s, w2s, gated);
      },
      nb::arg("w13"), nb::arg("w2"), nb::arg("w13_scale"), nb::arg("w2_scale"), nb::arg("is_gated"));
  m.def(
      "unshuffle_mxfp8_moe_weights",
      [](nb::handle w13, nb::handle w2, nb::handle w13s, nb::handle w2s, bool gated) {
        return mxfp8_layout(true, w13, w2, w13s, w2s, gated);
      },
      nb::arg("w13"), nb::arg("w2"), nb::arg("w13_scale"), nb::arg("w2_scale"), nb::arg("is_gated"));
  m.def("prepare_static_weights_for_trtllm_mxint4_moe", &prepare_mxint4_moe, nb::arg("gemm1_weights"),
        nb::arg("gemm1_scales"), nb::arg("gemm2_weights"), nb::arg("gemm2_scales"));
  m.def("unprepare_static_weights_for_trtllm_mxint4_moe", &unprepare_mxint4_moe, nb::arg("gemm1_weights"),
        nb::arg("gemm1_scales"), nb::arg("gemm2_weights"), nb::arg("gemm2_scales"), nb::arg("uint4b8") = true);
}

}  // namespace qtl::py
