// Byte-moving layout ops (qtl/blockscale.hpp, qtl/moe.hpp), for any element type of their size:
//
//   swizzle_blockscale(scale [M,K] or [B,M,K], uint8 or float8_e4m3fn) -> [.., pad128(M), pad4(K)]
//   unswizzle_blockscale(scale [.., Mp, Kp], rows, cols)              -> [.., rows, cols]
//   swap_w13_to_w31(x [.., 2R, C])                                    -> x with the halves swapped
//   reorder_w1w3_to_w3w1(weight, scale, dim=-2)                       -> (weight, scale) halves swapped
//   _cutedsl_mma_view(groups, padded_rows, padded_cols)               -> (shape, strides) of the 6-D view
//
// The swizzles and the half swaps take CUDA arrays too (C-contiguous, 2-D and up): one launch per
// tensor, outputs on the same device.

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

/// An output's bytes in the shape of `like` (split_bytes of its input).
view3d<std::uint8_t> as_bytes(array_out const& o, view3d<std::uint8_t const> like) {
  return make_view(o.data<std::uint8_t>(), like.extent[0], like.extent[1], like.extent[2]);
}

/// `v` with a dimension other than `d` emptied: the host function's checks on a device array run
/// on it and read no element. A 1-D array has no other dimension: refused on the device.
template <class T, int R>
view<T, R> checks_only(view<T, R> v, int d, char const* op) {
  if constexpr (R == 1) {
    throw unsupported_error(std::string(op) + ": 1-D CUDA arrays are not supported (host arrays are)");
  } else {
    v.extent[d == 0 ? 1 : 0] = 0;
    return v;
  }
}

nb::object swap_w13_to_w31(nb::handle x_obj) {
  array_in x = take(x_obj, "x", true);
  return with_rank<2>(x, [&]<int R>() -> nb::object {
    auto const shape = x.extents();
    array_out out(x.type, shape, x);
    with_storage(x, [&]<class U>(std::type_identity<U>) {
      auto const iv = x.as_view<U const, R>();
      auto const ov = out_view<U, R>(out, shape);
      if (x.on_device()) {  // the host function's checks, on views of no elements
        x.check_contiguous();
        qtl::swap_w13_to_w31(checks_only(iv, R - 2, "qtl.swap_w13_to_w31"), checks_only(ov, R - 2, ""));
      }
      auto const bytes = split_bytes(x, R - 2);
      run_on(
          x, "qtl.swap_w13_to_w31", [&] { qtl::swap_w13_to_w31(iv, ov); },
          [&](device::backend const& b, device::stream_t st) {
            return b.moe_rows(device::rows_op::swap_halves, bytes, as_bytes(out, bytes), 0, st);
          });
    });
    return out.release(x.from);
  });
}

nb::object reorder_w1w3_to_w3w1(nb::handle w_obj, nb::handle s_obj, int dim) {
  array_in w = take(w_obj, "weight", true);
  array_in s = take(s_obj, "scale", true);
  check_same_place("qtl.reorder_w1w3_to_w3w1", w, s);
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
    array_out w_out(w.type, ws, w);
    array_out s_out(s.type, ss, w);
    with_storage(w, [&]<class WU>(std::type_identity<WU>) {
      with_storage(s, [&]<class SU>(std::type_identity<SU>) {
        auto const wv = w.as_view<WU const, R>();
        auto const sv = s.as_view<SU const, R>();
        auto const wo = out_view<WU, R>(w_out, ws);
        auto const so = out_view<SU, R>(s_out, ss);
        auto const reorder = [&](auto wi, auto si, auto wr, auto sr) {
          // The dimension is a template argument of the library; the normalised one is run.
          if (d == R - 1) {
            qtl::reorder_w1w3_to_w3w1<R - 1>(wi, si, wr, sr);
          } else if constexpr (R >= 2) {
            if (d == R - 2) {
              qtl::reorder_w1w3_to_w3w1<R - 2>(wi, si, wr, sr);
            } else if constexpr (R >= 3) {
              qtl::reorder_w1w3_to_w3w1<0>(wi, si, wr, sr);
            }
          }
        };
        char const* const op = "qtl.reorder_w1w3_to_w3w1";
        if (w.on_device()) {
          w.check_contiguous();
          s.check_contiguous();
          reorder(checks_only(wv, d, op), checks_only(sv, d, op), checks_only(wo, d, op), checks_only(so, d, op));
        }
        auto const wb = split_bytes(w, d);
        auto const sb = split_bytes(s, d);
        run_on(
            w, op, [&] { reorder(wv, sv, wo, so); },
            [&](device::backend const& b, device::stream_t st) {
              int const err = b.moe_rows(device::rows_op::swap_halves, wb, as_bytes(w_out, wb), 0, st);
              return err != 0 ? err : b.moe_rows(device::rows_op::swap_halves, sb, as_bytes(s_out, sb), 0, st);
            });
      });
    });
    return nb::make_tuple(w_out.release(w.from), s_out.release(w.from));
  });
}

/// `qtl::cutedsl_mma_view_of`'s shape and element strides, for the Python view functions.
nb::tuple cutedsl_mma_view(index_t groups, index_t padded_rows, index_t padded_cols) {
  if (groups < 0 || padded_rows < 0 || padded_cols < 0 || padded_rows % layout_128x4::tile_rows != 0 ||
      padded_cols % layout_128x4::tile_cols != 0) {
    throw qtl::shape_error("qtl.nvfp4_swizzled_scale_to_cutedsl_mma_view: scale [" + std::to_string(groups) + ", " +
                           std::to_string(padded_rows) + ", " + std::to_string(padded_cols) +
                           "] is not whole 128x4 tiles (rows a multiple of 128, columns of 4)");
  }
  qtl::cutedsl_mma_view const v = qtl::cutedsl_mma_view_of(groups, padded_rows, padded_cols);
  auto const tuple6 = [](std::array<index_t, 6> const& a) {
    return nb::make_tuple(a[0], a[1], a[2], a[3], a[4], a[5]);
  };
  return nb::make_tuple(tuple6(v.shape), tuple6(v.strides));
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
  m.def("_cutedsl_mma_view", &cutedsl_mma_view, nb::arg("groups"), nb::arg("padded_rows"), nb::arg("padded_cols"));
}

}  // namespace qtl::py
