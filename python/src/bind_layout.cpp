// Byte-moving layout ops (qtl/blockscale.hpp, qtl/moe.hpp), for any element type of their size:
//
//   swizzle_blockscale(scale [M,K] or [B,M,K], uint8 or float8_e4m3fn) -> [.., pad128(M), pad4(K)]
//   unswizzle_blockscale(scale [.., Mp, Kp], rows, cols)              -> [.., rows, cols]
//   swap_w13_to_w31(x [.., 2R, C])                                    -> x with the halves swapped
//   reorder_w1w3_to_w3w1(weight, scale, dim=-2)                       -> (weight, scale) halves swapped

#include <qtl/blockscale.hpp>
#include <qtl/moe.hpp>

#include "bindings.hpp"

namespace qtl::py {
namespace {

/// Calls `f(std::type_identity<U>{})` with U the unsigned integer of the element's size: these ops
/// only move elements.
template <class F>
decltype(auto) with_storage(array_in const& a, F&& f) {
  switch (elem_size(a.type)) {
    case 1: return f(std::type_identity<std::uint8_t>{});
    case 2: return f(std::type_identity<std::uint16_t>{});
    case 4: return f(std::type_identity<std::uint32_t>{});
    default: return f(std::type_identity<std::uint64_t>{});
  }
}

/// Calls `f.template operator()<R>()` for the array's rank R in [lo, 3].
template <int Lo, class F>
decltype(auto) with_rank(array_in const& a, F&& f) {
  if (a.ndim() < Lo || a.ndim() > 3) {
    throw qtl::shape_error(std::string(a.name) + ": expected " + std::to_string(Lo) + " to 3 dimensions, got shape " +
                           a.shape());
  }
  if constexpr (Lo <= 1) {
    if (a.ndim() == 1) {
      return f.template operator()<1>();
    }
  }
  if (a.ndim() == 2) {
    return f.template operator()<2>();
  }
  return f.template operator()<3>();
}

template <class T, int R>
view<T, R> out_view(array_out const& o, std::vector<index_t> const& shape) {
  view<T, R> v;
  v.data = o.data<T>();
  index_t s = 1;
  for (int d = R - 1; d >= 0; --d) {
    v.extent[d] = shape[static_cast<std::size_t>(d)];
    v.stride[d] = s;
    s *= v.extent[d];
  }
  return v;
}

/// A [M, K] view as [1, M, K] (a [B, M, K] one as it is): the device table's blockscale shape.
template <class T, int R>
view<T, 3> batched(view<T, R> v) {
  if constexpr (R == 3) {
    return v;
  } else {
    return view<T, 3>{v.data, {1, v.extent[0], v.extent[1]}, {v.extent[0] * v.stride[0], v.stride[0], v.stride[1]}};
  }
}

/// swizzle_blockscale (`swizzle`: to the padded 128x4 layout) or unswizzle_blockscale (back to
/// [.., rows, cols]) of byte scales.
nb::object blockscale(bool swizzle, nb::handle s_obj, index_t rows = 0, index_t cols = 0) {
  array_in s = take(s_obj, "scale", true);
  s.check_type({elem::u8, elem::fp8_e4m3});
  return with_rank<2>(s, [&]<int R>() -> nb::object {
    auto shape = s.extents();
    shape[R - 2] = swizzle ? qtl::layout_128x4::pad_rows(shape[R - 2]) : rows;
    shape[R - 1] = swizzle ? qtl::layout_128x4::pad_cols(shape[R - 1]) : cols;
    array_out out(s.type, shape, s);
    auto const iv = s.as_view<std::uint8_t const, R>();
    auto const ov = out_view<std::uint8_t, R>(out, shape);
    auto const host = [&] {
      if (swizzle) {
        qtl::swizzle_blockscale(iv, ov);
      } else {
        qtl::unswizzle_blockscale(iv, ov);
      }
    };
    run_on(s, swizzle ? "qtl.swizzle_blockscale" : "qtl.unswizzle_blockscale", host,
           [&](device::backend const& t, device::stream_t st) {
             return t.blockscale(swizzle, batched(iv), batched(ov), st);
           });
    return out.release(s.from);
  });
}

nb::object swap_w13_to_w31(nb::handle x_obj) {
  array_in x = take(x_obj, "x");
  return with_rank<2>(x, [&]<int R>() -> nb::object {
    auto const shape = x.extents();
    array_out out(x.type, shape);
    with_storage(x, [&]<class U>(std::type_identity<U>) {
      auto const iv = x.as_view<U const, R>();
      nb::gil_scoped_release nogil;
      qtl::swap_w13_to_w31(iv, out_view<U, R>(out, shape));
    });
    return out.release(x.from);
  });
}

nb::object reorder_w1w3_to_w3w1(nb::handle w_obj, nb::handle s_obj, int dim) {
  array_in w = take(w_obj, "weight");
  array_in s = take(s_obj, "scale");
  if (w.ndim() != s.ndim()) {
    throw qtl::shape_error("qtl.reorder_w1w3_to_w3w1: weight " + w.shape() + " and scale " + s.shape() +
                           " differ in rank");
  }
  return with_rank<1>(w, [&]<int R>() -> nb::object {
    int const d = dim < 0 ? dim + R : dim;
    if (d < 0 || d >= R) {
      throw qtl::shape_error("qtl.reorder_w1w3_to_w3w1: dim " + std::to_string(dim) + " is out of range for rank " +
                             std::to_string(R));
    }
    auto const ws = w.extents();
    auto const ss = s.extents();
    array_out w_out(w.type, ws);
    array_out s_out(s.type, ss);
    with_storage(w, [&]<class WU>(std::type_identity<WU>) {
      with_storage(s, [&]<class SU>(std::type_identity<SU>) {
        auto const wv = w.as_view<WU const, R>();
        auto const sv = s.as_view<SU const, R>();
        auto const wo = out_view<WU, R>(w_out, ws);
        auto const so = out_view<SU, R>(s_out, ss);
        nb::gil_scoped_release nogil;
        // The dimension is a template argument of the library; the normalised one is run.
        if (d == R - 1) {
          qtl::reorder_w1w3_to_w3w1<R - 1>(wv, sv, wo, so);
        } else if constexpr (R >= 2) {
          if (d == R - 2) {
            qtl::reorder_w1w3_to_w3w1<R - 2>(wv, sv, wo, so);
          } else if constexpr (R >= 3) {
            qtl::reorder_w1w3_to_w3w1<0>(wv, sv, wo, so);
          }
        }
      });
    });
    return nb::make_tuple(w_out.release(w.from), s_out.release(w.from));
  });
}

}  // namespace

void bind_layout(nb::module_& m) {
  m.def(
      "swizzle_blockscale", [](nb::handle s) { return blockscale(true, s); }, nb::arg("scale"));
  m.def(
      "unswizzle_blockscale", [](nb::handle s, index_t rows, index_t cols) { return blockscale(false, s, rows, cols); },
      nb::arg("scale"), nb::arg("rows"), nb::arg("cols"));
  m.def("swap_w13_to_w31", &swap_w13_to_w31, nb::arg("x"));
  m.def("reorder_w1w3_to_w3w1", &reorder_w1w3_to_w3w1, nb::arg("weight"), nb::arg("scale"), nb::arg("dim") = -2);
}

}  // namespace qtl::py
