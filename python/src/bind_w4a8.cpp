// The W4A8 load-time transforms (qtl/w4a8.hpp), named as the engines name them:
//
//   cutlass_encode_and_reorder_int4b(b [N, K/8] int32)            -> b_packed, same shape
//   cutlass_encode_and_reorder_int4b_grouped(b [E, N, K/8] int32) -> b_packed (the weights only)
//   cutlass_decode_and_unreorder_int4b(b_packed [N|E,N, K/8])      -> b, the inverse
//   cutlass_pack_scale_fp8(scales float8_e4m3fn [...])             -> packed [8 * numel]
//   convert_bf16_scales_to_fp8(quant_fp8, scales [..., G])         -> (fp8_scales, chan_scales [..., 1])
//   convert_packed_uint4b8_to_signed_int4_inplace(t int32)         -> t, converted in place
//   interleave_scales(scales [E, N, G], scale_pack)                -> [E, G/p, N*p]
//   deinterleave_scales(x [E, G/p, N*p], scale_pack)               -> [E, N, G]
//
// The int4 arrays are the engines' int32 words, C-contiguous, an [N, K] matrix per expert with K
// along the last axis. `quant_fp8` is the rule of the quantizer vLLM hands the scale split:
// "divide" (x / s, its CUDA path) or "reciprocal" (x * (1/s), its native path). Host arrays only.

#include <cstring>
#include <span>
#include <string>
#include <tuple>

#include <qtl/w4a8.hpp>

#include "bindings.hpp"

namespace qtl::py {
namespace {

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
  array_in b = take(b_obj, inverse ? "b_packed" : "b");
  auto const [e, n, k] = int4_extents(b, lo, hi);
  array_out out(elem::i32, b.extents());
  std::span const o(out.data<std::uint8_t>(), out.bytes());
  auto const in = bytes_in(b);
  {
    nb::gil_scoped_release nogil;
    if (inverse) {
      qtl::decode_and_unreorder_int4b(in, e, n, k, o);
    } else if (lo == 3) {
      qtl::encode_and_reorder_int4b_grouped(in, e, n, k, o);
    } else {
      qtl::encode_and_reorder_int4b(in, n, k, o);
    }
  }
  return out.release(b.from);
}

nb::object pack_scale_fp8(nb::handle s_obj) {
  array_in s = take(s_obj, "scales");
  s.check_type({elem::fp8_e4m3});
  s.check_contiguous();
  index_t const count = static_cast<index_t>(s.nd.size());
  array_out out(elem::fp8_e4m3, {8 * count});
  qtl::pack_scale_fp8(std::span(static_cast<float8_e4m3fn_t const*>(s.nd.data()), static_cast<std::size_t>(count)),
                      std::span(out.data<float8_e4m3fn_t>(), static_cast<std::size_t>(8 * count)));
  return out.release(s.from);
}

nb::object scale_split(std::string const& quant_fp8, nb::handle s_obj) {
  if (quant_fp8 != "divide" && quant_fp8 != "reciprocal") {
    throw qtl::value_error(
        "qtl.convert_bf16_scales_to_fp8: quant_fp8 is 'divide' (x / s, the CUDA path of vLLM's "
        "QuantFP8) or 'reciprocal' (x * (1/s), its native path), got '" +
        quant_fp8 + "'");
  }
  array_in s = take(s_obj, "scales");
  s.check_contiguous();
  if (s.ndim() < 1) {
    throw qtl::shape_error("qtl.convert_bf16_scales_to_fp8: scales must have at least one dimension");
  }
  auto shape = s.extents();
  index_t const cols = shape.back();
  index_t const rows = cols == 0 ? 0 : static_cast<index_t>(s.nd.size()) / cols;
  array_out q(elem::fp8_e4m3, shape);
  shape.back() = 1;
  array_out chan(elem::f32, shape);
  auto const op = quant_fp8 == "divide" ? fp8_scale_op::divide : fp8_scale_op::multiply_reciprocal;
  with_float(s, [&]<class T>(std::type_identity<T>) {
    qtl::convert_bf16_scales_to_fp8<T>(make_view(static_cast<T const*>(s.nd.data()), rows, cols), op,
                                       make_view(q.data<float8_e4m3fn_t>(), rows, cols),
                                       make_view(chan.data<float>(), rows));
  });
  return nb::make_tuple(q.release(s.from), chan.release(s.from));
}

nb::object uint4b8_inplace(nb::handle t_obj) {
  array_in t = take(t_obj, "t");
  t.check_type({elem::i32});
  t.check_contiguous();
  t.check_writable();
  qtl::convert_packed_uint4b8_to_signed_int4_inplace(
      std::span(static_cast<std::int32_t*>(const_cast<void*>(t.nd.data())), t.nd.size()));
  return nb::borrow(t_obj);
}

nb::object interleave(nb::handle s_obj, index_t scale_pack, bool inverse) {
  array_in s = take(s_obj, inverse ? "x" : "scales");
  s.check_rank(3);
  auto const in_shape = s.extents();
  // [E, N, G] -> [E, G/p, N*p], and back by the same rule: [E, G/p, N*p] -> [E, N, G]
  std::vector<index_t> shape = in_shape;
  if (scale_pack > 0) {
    shape = {in_shape[0], in_shape[2] % scale_pack == 0 ? in_shape[2] / scale_pack : 0, in_shape[1] * scale_pack};
  }
  array_out out(s.type, shape);
  with_float(s, [&]<class T>(std::type_identity<T>) {
    auto const iv = s.as_view<T const, 3>();
    if (inverse) {
      qtl::deinterleave_scales<T>(iv, scale_pack, out.v3<T>());
    } else {
      qtl::interleave_scales<T>(iv, scale_pack, out.v3<T>());
    }
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
