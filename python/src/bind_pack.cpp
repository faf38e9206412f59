// pack_cols, pack_rows, unpack_cols, unpack_rows, and vLLM's gptq_pack and awq_pack: the
// reference's (q_w, num_bits, size_k, size_n) signatures over qtl/pack.hpp and qtl/pack_nd.hpp;
// vLLM's pack_quantized_values_into_int32 / unpack_quantized_values_into_int32 (w_q, wtype,
// packed_dim) over qtl/pack_nd.hpp. int32 codes in, int32 words out (and back).

#include <stdexcept>

#include <qtl/dispatch.hpp>
#include <qtl/pack.hpp>
#include <qtl/pack_nd.hpp>

#include "bindings.hpp"

namespace qtl::py {
namespace {

using pack_kind = device::pack_op;

char const* op_name(pack_kind k) {
  switch (k) {
    case pack_kind::pack_cols: return "qtl.pack_cols";
    case pack_kind::pack_rows: return "qtl.pack_rows";
    case pack_kind::unpack_cols: return "qtl.unpack_cols";
    case pack_kind::awq_pack: return "qtl.awq_pack";
    default: return "qtl.unpack_rows";
  }
}

nb::object run(pack_kind k, nb::handle x, int num_bits, index_t size_k, index_t size_n) {
  bool const packing = k != pack_kind::unpack_cols && k != pack_kind::unpack_rows;
  bool const along_cols = k != pack_kind::pack_rows && k != pack_kind::unpack_rows;
  array_in in = take(x, packing ? "q_w" : "packed_q_w", true);
  in.check_type({elem::i32});
  in.check_rank(2);
  if (num_bits <= 0 || 32 % num_bits != 0) {
    throw qtl::unsupported_error(std::string(op_name(k)) + ": num_bits = " + std::to_string(num_bits) +
                                 " does not divide 32; supported: 1, 2, 4, 8, 16, 32");
  }
  if (k == pack_kind::awq_pack && num_bits != 4 && num_bits != 8) {  // vLLM raises so too
    throw qtl::unsupported_error("qtl.awq_pack: num_bits must be 4 or 8, got " + std::to_string(num_bits));
  }
  index_t const pf = 32 / num_bits;
  // The reference's asserts: the codes are [size_k, size_n], the words that shape packed.
  index_t want_r = size_k;
  index_t want_c = size_n;
  if (!packing) {
    (k == pack_kind::unpack_cols ? want_c : want_r) /= pf;
  }
  index_t const packed_dim = along_cols ? size_n : size_k;
  if (size_k < 0 || size_n < 0 || packed_dim % pf != 0 || in.dim(0) != want_r || in.dim(1) != want_c) {
    throw qtl::shape_error(std::string(op_name(k)) + ": " + in.name + " has shape " + in.shape() +
                           "; size_k = " + std::to_string(size_k) + ", size_n = " + std::to_string(size_n) +
                           " with pack factor " + std::to_string(pf) + " need " + qtl::shape_string(want_r, want_c) +
                           " and " + (along_cols ? "size_n" : "size_k") + " a multiple of the pack factor");
  }
  index_t out_r = size_k;
  index_t out_c = size_n;
  if (packing) {
    (along_cols ? out_c : out_r) /= pf;
  }
  array_out out(elem::i32, {out_r, out_c}, in);
  auto const iv = in.v2<std::int32_t const>();
  auto const ov = out.v2<std::int32_t>();
  auto const host = [&] {
    qtl::dispatch_bits<1, 2, 4, 8, 16, 32>(num_bits, [&]<int B>() {
      switch (k) {
        case pack_kind::pack_cols: qtl::pack_cols<B>(iv, ov); break;
        case pack_kind::pack_rows: qtl::pack_rows<B>(iv, ov); break;
        case pack_kind::unpack_cols: qtl::unpack_cols<B>(iv, ov); break;
        case pack_kind::unpack_rows: qtl::unpack_rows<B>(iv, ov); break;
        case pack_kind::awq_pack:
          if constexpr (B == 4 || B == 8) {
            qtl::awq_pack<B>(iv, ov);
          } else {
            throw std::logic_error("unreachable: num_bits is checked above");
          }
          break;
      }
    });
  };
  run_on(in, op_name(k), host,
         [&](device::backend const& t, device::stream_t s) { return t.pack(k, num_bits, iv, ov, s); });
  return out.release(in.from);
}

// pack_quantized_values_into_int32 (`packing`) or its inverse along `packed_dim` of a C-contiguous
// int32 array of any rank.
nb::object run_dim(bool packing, nb::handle x, nb::handle wtype, index_t packed_dim) {
  char const* const op = packing ? "qtl.pack_quantized_values_into_int32" : "qtl.unpack_quantized_values_into_int32";
  array_in in = take(x, "w_q", true);
  in.check_type({elem::i32});
  in.check_contiguous();
  scalar_type const t = scalar_type_of(wtype, "wtype");
  if (!qtl::is_pack_type(t)) {
    throw qtl::unsupported_error(std::string(op) + ": wtype " + std::string(t.name().view()) +
                                 " is not an integer type whose width divides 32");
  }
  std::vector<index_t> shape = in.extents();
  auto const e = qtl::split_at_dim(shape, packed_dim);
  index_t const pf = 32 / static_cast<index_t>(t.size_bits());
  shape[static_cast<std::size_t>(packed_dim)] = packing ? e[1] / pf : e[1] * pf;
  array_out out(elem::i32, shape, in);
  auto const iv = make_view(static_cast<std::int32_t const*>(in.nd.data()), e[0], e[1], e[2]);
  auto const ov = make_view(out.data<std::int32_t>(), e[0], shape[static_cast<std::size_t>(packed_dim)], e[2]);
  auto const host = [&] {
    qtl::dispatch_pack_type(t, [&]<scalar_type T>(scalar_constant<T>) {
      if (packing) {
        qtl::pack_quantized_values_into_int32<T>(iv, ov);
      } else {
        qtl::unpack_quantized_values_into_int32<T>(iv, ov);
      }
    });
  };
  run_on(in, op, host, [&](device::backend const& b, device::stream_t s) { return b.pack_dim(packing, t, iv, ov, s); });
  return out.release(in.from);
}

}  // namespace

void bind_pack(nb::module_& m) {
  m.def(
      "pack_cols", [](nb::handle q_w, int b, index_t k, index_t n) { return run(pack_kind::pack_cols, q_w, b, k, n); },
      nb::arg("q_w"), nb::arg("num_bits"), nb::arg("size_k"), nb::arg("size_n"));
  m.def(
      "pack_rows", [](nb::handle q_w, int b, index_t k, index_t n) { return run(pack_kind::pack_rows, q_w, b, k, n); },
      nb::arg("q_w"), nb::arg("num_bits"), nb::arg("size_k"), nb::arg("size_n"));
  m.def(
      "unpack_cols", [](nb::handle p, int b, index_t k, index_t n) { return run(pack_kind::unpack_cols, p, b, k, n); },
      nb::arg("packed_q_w"), nb::arg("num_bits"), nb::arg("size_k"), nb::arg("size_n"));
  m.def(
      "unpack_rows", [](nb::handle p, int b, index_t k, index_t n) { return run(pack_kind::unpack_rows, p, b, k, n); },
      nb::arg("packed_q_w"), nb::arg("num_bits"), nb::arg("size_k"), nb::arg("size_n"));
  m.def(
      "gptq_pack", [](nb::handle q_w, int b, index_t k, index_t n) { return run(pack_kind::pack_rows, q_w, b, k, n); },
      nb::arg("q_w"), nb::arg("num_bits"), nb::arg("size_k"), nb::arg("size_n"));
  m.def(
      "awq_pack", [](nb::handle q_w, int b, index_t k, index_t n) { return run(pack_kind::awq_pack, q_w, b, k, n); },
      nb::arg("q_w"), nb::arg("num_bits"), nb::arg("size_k"), nb::arg("size_n"));
  m.def(
      "pack_quantized_values_into_int32",
      [](nb::handle w_q, nb::handle wtype, index_t packed_dim) { return run_dim(true, w_q, wtype, packed_dim); },
      nb::arg("w_q"), nb::arg("wtype"), nb::arg("packed_dim") = 0);
  m.def(
      "unpack_quantized_values_into_int32",
      [](nb::handle w_q, nb::handle wtype, index_t packed_dim) { return run_dim(false, w_q, wtype, packed_dim); },
      nb::arg("w_q"), nb::arg("wtype"), nb::arg("packed_dim") = 0);
}

}  // namespace qtl::py
