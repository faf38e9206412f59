// The W4A8 load-time transforms (qtl/w4a8.hpp), named as the engines name them:
//
//   cutlass_encode_and_reorder_int4b(b [N, K/8] int32)            -> b_packed, same shape
//   cutlass_encode_and_reorder_int4b_grouped(b [E, N, K/8] int32) -> b_packed (the weights only)
//   cutlass_decode_and_unreorder_int4b(b_packed [N|E,N, K/8])      -> b, the inverse
//   cutlass_pack_scale_fp8(scales float8_e4m3fn [...])             -> packed [8 * numel] (uint8 codes: uint8)
//   convert_bf16_scales_to_fp8(quant_fp8, scales [..., G])         -> (fp8_scales, chan_scales [..., 1])
//   convert_packed_uint4b8_to_signed_int4_inplace(t int32)         -> t, converted in place
//   interleave_scales(scales [E, N, G], scale_pack)                -> [E, G/p, N*p]
//   deinterleave_scales(x [E, G/p, N*p], scale_pack)               -> [E, N, G]
//
// The int4 arrays are the engines' int32 words, C-contiguous, an [N, K] matrix per expert with K
// along the last axis. `quant_fp8` is the rule of the quantizer vLLM hands the scale split:
// "divide" (x / s, its CUDA path) or "reciprocal" (x * (1/s), its native path). Device arrays run
// the kernels of qtl/cuda/w4a8.cuh, one launch per call; the host checks the shapes first (and, for
// the scale split, reads the scales back to refuse a non-finite one as the host does).

#include <cstring>
#include <span>
#include <string>
#include <tuple>

#include <qtl/w4a8.hpp>

#include "bindings.hpp"

namespace qtl::py {
namespace {

/// `v` with no experts: the host function's checks on device arrays, which it never reads then.
template <class T>
view3d<T> no_experts(view3d<T> v) {
  v.extent[0] = 0;
  return v;
}

std::span<std::uint8_t const> bytes_in(array_in const& a) {
  return {static_cast<std::uint8_t const*>(a.nd.data()), a.nd.nbytes()};
}

// The int4 words `b` as (experts, n, k); `ranks` says which ranks the op takes.
std::tuple<index_t, index_t, index_t> int4_extents(array_in const& b, int lo, int hi) {
  b.check_type({elem::i32});
  b.check_contiguous();
  if (b.ndim() < lo || b.ndim() > hi) {
    throw qtl::shape_error(std::string(b.name) + ": expected " +
                           (lo == hi ? std::to_string(lo) : std::to_string(lo) + " or " + std::to_string(hi)) +
                           " dimensions ([E,] N, K/8 int32 words), got shape " + b.shape());
  }
  bool const grouped = b.ndim() == 3;
  return {grouped ? b.dim(0) : 1, b.dim(grouped ? 1 : 0), b.dim(grouped ? 2 : 1) * 8};
}

nb::object reorder(nb::handle b_obj, int lo, int hi, bool inverse) {
  array_in b = take(b_obj, inverse ? "b_packed" : "b", true);
  auto const [e, n, k] = int4_extents(b, lo, hi);
  array_out out(elem::i32, b.extents(), b);
  std::span const o(out.data<std::uint8_t>(), out.bytes());
  auto const in = bytes_in(b);
  device::int4b_op const op = inverse   ? device::int4b_op::inverse
                              : lo == 3 ? device::int4b_op::grouped
                                        : device::int4b_op::plain;
  // the host function's name for its checks, the Python name for a failed launch
  char const* const names[3][2] = {
      {"qtl::encode_and_reorder_int4b", "qtl.cutlass_encode_and_reorder_int4b"},
      {"qtl::encode_and_reorder_int4b_grouped", "qtl.cutlass_encode_and_reorder_int4b_grouped"},
      {"qtl::decode_and_unreorder_int4b", "qtl.cutlass_decode_and_unreorder_int4b"}};
  auto const* const name = names[static_cast<int>(op)];
  if (b.on_device()) {  // the host function's shape checks
    qtl::detail::check_int4b_reorder(
        name[0], e, n, k, op == device::int4b_op::grouped ? w4a8_grouped_k_align : w4a8_atom_cols, in.size(), o.size());
  }
  run_on(
      b, name[1],
      [&] {
        if (inverse) {
          qtl::decode_and_unreorder_int4b(in, e, n, k, o);
        } else if (lo == 3) {
          qtl::encode_and_reorder_int4b_grouped(in, e, n, k, o);
        } else {
          qtl::encode_and_reorder_int4b(in, n, k, o);
        }
      },
      [&](device::backend const& t, device::stream_t st) {
        return t.int4b_reorder(op, in.data(), e, n, k, o.data(), st);
      });
  return out.release(b.from);
}

nb::object pack_scale_fp8(nb::handle s_obj) {
  array_in s = take(s_obj, "scales", true);
  s.check_type({elem::fp8_e4m3, elem::u8});  // uint8: the codes, as CuPy and the DLPack producers without FP8 pass them
  s.check_contiguous();
  index_t const count = static_cast<index_t>(s.nd.size());
  array_out out(s.type, {8 * count}, s);
  run_on(
      s, "qtl.cutlass_pack_scale_fp8",
      [&] {
        qtl::pack_scale_fp8(
            std::span(static_cast<float8_e4m3fn_t const*>(s.nd.data()), static_cast<std::size_t>(count)),
            std::span(out.data<float8_e4m3fn_t>(), static_cast<std::size_t>(8 * count)));
      },
      [&](device::backend const& t, device::stream_t st) {
        return t.pack_scale_fp8(static_cast<std::uint8_t const*>(s.nd.data()), count, out.data<std::uint8_t>(), st);
      });
  return out.release(s.from);
}

/// The host op's refusal of a NaN or infinite scale, on a host copy of device scales (rows, cols).
template <class T>
void check_finite_scales(array_in const& s, index_t cols) {
  std::vector<T> const h = host_copy<T>(s);
  for (std::size_t x = 0; x < h.size(); ++x) {
    float const v = to_float(h[x]);
    if (!(v - v == 0.0f)) {
      auto const i = static_cast<index_t>(x) / cols;
      auto const j = static_cast<index_t>(x) % cols;
      throw qtl::value_error("qtl::convert_bf16_scales_to_fp8: scale (" + std::to_string(i) + ", " + std::to_string(j) +
                             ") is " + std::to_string(v) + "; the scales must be finite");
    }
  }
}

nb::object scale_split(std::string const& quant_fp8, nb::handle s_obj) {
  if (quant_fp8 != "divide" && quant_fp8 != "reciprocal") {
    throw qtl::value_error(
        "qtl.convert_bf16_scales_to_fp8: quant_fp8 is 'divide' (x / s, the CUDA path of vLLM's "
        "QuantFP8) or 'reciprocal' (x * (1/s), its native path), got '" +
        quant_fp8 + "'");
  }
  array_in s = take(s_obj, "scales", true);
  s.check_contiguous();
  if (s.ndim() < 1) {
    throw qtl::shape_error("qtl.convert_bf16_scales_to_fp8: scales must have at least one dimension");
  }
  auto shape = s.extents();
  index_t const cols = shape.back();
  index_t const rows = cols == 0 ? 0 : static_cast<index_t>(s.nd.size()) / cols;
  array_out q(elem::fp8_e4m3, shape, s);
  shape.back() = 1;
  array_out chan(elem::f32, shape, s);
  auto const op = quant_fp8 == "divide" ? fp8_scale_op::divide : fp8_scale_op::multiply_reciprocal;
  with_float(s, [&]<class T>(std::type_identity<T>) {
    if (s.on_device()) {
      check_finite_scales<T>(s, cols);
    }
    run_on(
        s, "qtl.convert_bf16_scales_to_fp8",
        [&] {
          qtl::convert_bf16_scales_to_fp8<T>(make_view(static_cast<T const*>(s.nd.data()), rows, cols), op,
                                             make_view(q.data<float8_e4m3fn_t>(), rows, cols),
                                             make_view(chan.data<float>(), rows));
        },
        [&](device::backend const& t, device::stream_t st) {
          return t.w4a8_scale_split(float_type_of(s.type), op == fp8_scale_op::divide, s.nd.data(), rows, cols,
                                    q.data<std::uint8_t>(), chan.data<float>(), st);
        });
  });
  return nb::make_tuple(q.release(s.from), chan.release(s.from));
}

nb::object uint4b8_inplace(nb::handle t_obj) {
  array_in t = take(t_obj, "t", true);
  t.check_type({elem::i32});
  t.check_contiguous();
  t.check_writable();
  auto* const words = static_cast<std::int32_t*>(const_cast<void*>(t.nd.data()));
  index_t const count = static_cast<index_t>(t.nd.size());
  run_on(
      t, "qtl.convert_packed_uint4b8_to_signed_int4_inplace",
      [&] { qtl::convert_packed_uint4b8_to_signed_int4_inplace(std::span(words, t.nd.size())); },
      [&](device::backend const& b, device::stream_t st) { return b.uint4b8_to_int4(words, count, words, st); });
  return nb::borrow(t_obj);
}

nb::object interleave(nb::handle s_obj, index_t scale_pack, bool inverse) {
  array_in s = take(s_obj, inverse ? "x" : "scales", true);
  s.check_rank(3);
  auto const in_shape = s.extents();
  // [E, N, G] -> [E, G/p, N*p], and back by the same rule: [E, G/p, N*p] -> [E, N, G]
  std::vector<index_t> shape = in_shape;
  if (scale_pack > 0) {
    shape = {in_shape[0], in_shape[2] % scale_pack == 0 ? in_shape[2] / scale_pack : 0, in_shape[1] * scale_pack};
  }
  array_out out(s.type, shape, s);
  with_float(s, [&]<class T>(std::type_identity<T>) {
    auto const iv = s.as_view<T const, 3>();
    auto const ov = out.v3<T>();
    auto const host = [&](view3d<T const> i, view3d<T> o) {
      if (inverse) {
        qtl::deinterleave_scales<T>(i, scale_pack, o);
      } else {
        qtl::interleave_scales<T>(i, scale_pack, o);
      }
    };
    if (s.on_device()) {  // the host function's checks, on no experts
      host(no_experts(iv), no_experts(ov));
    }
    run_on(
        s, inverse ? "qtl.deinterleave_scales" : "qtl.interleave_scales", [&] { host(iv, ov); },
        [&](device::backend const& b, device::stream_t st) {
          return b.interleave_scales(inverse, float_type_of(s.type), iv.data, iv.extent[0], iv.extent[1], iv.extent[2],
                                     ov.data, scale_pack, st);
        });
  });
  return out.release(s.from);
}

}  // namespace

void bind_w4a8(nb::module_& m) {
  m.def(
      "cutlass_encode_and_reorder_int4b", [](nb::handle b) { return reorder(b, 2, 2, false); }, nb::arg("b"));
  m.def(
      "cutlass_encode_and_reorder_int4b_grouped", [](nb::handle b) { return reorder(b, 3, 3, false); }, nb::arg("b"));
  m.def(
      "cutlass_decode_and_unreorder_int4b", [](nb::handle b) { return reorder(b, 2, 3, true); }, nb::arg("b_packed"));
  m.def("cutlass_pack_scale_fp8", &pack_scale_fp8, nb::arg("scales"));
  m.def("convert_bf16_scales_to_fp8", &scale_split, nb::arg("quant_fp8"), nb::arg("scales"));
  m.def("convert_packed_uint4b8_to_signed_int4_inplace", &uint4b8_inplace, nb::arg("t"));
  m.def(
      "interleave_scales", [](nb::handle s, index_t p) { return interleave(s, p, false); }, nb::arg("scales"),
      nb::arg("scale_pack"));
  m.def(
      "deinterleave_scales", [](nb::handle s, index_t p) { return interleave(s, p, true); }, nb::arg("x"),
      nb::arg("scale_pack"));
}

}  // namespace qtl::py
