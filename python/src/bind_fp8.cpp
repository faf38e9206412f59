// scaled_fp8_quant, per_tensor_dequantize, requantize_with_max_scale (qtl/fp8.hpp):
//
//   scaled_fp8_quant(input [M,N], scale=None, num_token_padding=None, use_per_token_if_dynamic=False)
//       -> (output float8_e4m3fn [max(M, padding), N], scale float32 [1] or [rows, 1])
//   per_tensor_dequantize(tensor fp8, inv_scale) -> float16 (inv_scale a float or 0-dim tensor) or
//       float32 (a [1] tensor: torch promotes), the tensor's shape
//   requantize_with_max_scale(weight fp8 [N,K], weight_scale float32 [S] or 0-dim, logical_widths)
//       -> (max_w_scale float32 0-dim, weight): weight is requantized in place and returned itself
//   assert_fp8_all_close(a, b) -> None, or AssertionError with the reference's message (its shape
//       and dtype asserts too). QTL counts real sign flips (the reference's uint8 test of them can
//       never fire); a flip is always also a byte distance >= 2, so the verdict is the reference's.
//   normalize_e4m3fn_to_e4m3fnuz(weight fp8 any rank, weight_scale, input_scale=None)
//       -> (weight float8_e4m3fnuz, weight_scale * 2, input_scale * 2 or None), sglang's
//       (qtl/fnuz.hpp). The weight comes back as a new array (sglang rewrites its argument's bytes
//       and returns a view of them): torch.float8_e4m3fnuz for torch, ml_dtypes.float8_e4m3fnuz for
//       numpy where ml_dtypes is installed, else its uint8 codes. Scales: float32, float16 or
//       bfloat16 of any rank, doubled in their dtype.
//   scaled_quantize(x [M,N], group_shape (rows, cols), quant_dtype, compute_dtype=None, *,
//       is_fp8_fnuz=None) -> (x_q [M,N], x_s float32 [M/rows, N/cols]), vLLM's
//       (qtl/scaled_quantize.hpp): quant_dtype float8_e4m3fn or float8_e4m3fnuz; is_fp8_fnuz is
//       vLLM's platform question (fp8_max 224, else 448; None: whether quant_dtype is e4m3fnuz).
//   scaled_dequantize(x_q [M,N], x_s, group_shape=None, out_dtype=float32) -> [M,N]: x_s 0-dim,
//       1-D (with group_shape) or 2-D; a group shape with -1 extents is taken (vLLM's asserts refuse it).
//   group_broadcast(t [a,b], shape (M,N)) -> t's elements repeated over their groups; an extent of
//       1 stays 1, as vLLM's.

#include <nanobind/stl/optional.h>

#include <cstring>

#include <qtl/fnuz.hpp>
#include <qtl/fp8.hpp>
#include <qtl/scaled_quantize.hpp>

#include "bindings.hpp"

namespace qtl::py {
namespace {

nb::object scaled_fp8_quant(nb::handle in_obj, nb::handle scale_obj, std::optional<index_t> num_token_padding,
                            bool per_token) {
  array_in in = take(in_obj, "input", true);
  in.check_rank(2);
  index_t const m = in.dim(0);
  index_t const n = in.dim(1);
  index_t const pad = num_token_padding.value_or(0);
  if (pad < 0) {
    throw qtl::shape_error("qtl.scaled_fp8_quant: num_token_padding is negative (" + std::to_string(pad) + ")");
  }
  bool const is_static = !scale_obj.is_none();
  if (is_static && per_token) {
    // The reference ignores use_per_token_if_dynamic when a scale is given: so does qtl.
    per_token = false;
  }
  if (is_static && !PyFloat_Check(scale_obj.ptr()) && !PyLong_Check(scale_obj.ptr())) {
    check_scalar_place("qtl.scaled_fp8_quant", in, take(scale_obj, "scale", true));
  }
  float const static_scale = is_static ? scalar_float(scale_obj, "scale") : 0.0f;
  index_t const rows = std::max(m, pad);
  array_out out(elem::fp8_e4m3, {rows, n}, in);
  array_out scale(elem::f32, per_token ? std::vector<index_t>{rows, 1} : std::vector<index_t>{1}, in);
  with_float(in, [&]<class T>(std::type_identity<T>) {
    auto const iv = in.v2<T const>();
    auto const ov = out.v2<float8_e4m3fn_t>();
    auto const host = [&] {
      if (is_static) {
        qtl::scaled_fp8_quant_static(iv, static_scale, ov);
        scale.data<float>()[0] = static_scale;
      } else if (per_token) {
        qtl::scaled_fp8_quant_per_token(iv, ov, scale.v1<float>());
      } else {
        scale.data<float>()[0] = qtl::scaled_fp8_quant_dynamic(iv, ov);
      }
    };
    run_on(in, "qtl.scaled_fp8_quant", host, [&](device::backend const& b, device::stream_t s) {
      if (is_static) {  // the scale returned is the one given, on the device as the output
        if (int const err = b.copy_to_device(scale.data<void>(), &static_scale, sizeof(float), s); err != 0) {
          return err;
        }
      }
      auto const mode = is_static   ? device::fp8_mode::static_scale
                        : per_token ? device::fp8_mode::per_token
                                    : device::fp8_mode::dynamic;
      return b.scaled_fp8_quant(mode, device::float_type_of<T>(), in.nd.data(), m, n, ov.data, rows,
                                scale.data<float>(), s);
    });
  });
  return nb::make_tuple(out.release(in.from), scale.release(in.from));
}

/// [rows, cols] of an elementwise op's contiguous operand of any rank (rank 0 and 1: one row).
view2d<float8_e4m3fn_t const> flat_fp8(array_in const& a) {
  if (a.ndim() == 2) {
    return a.v2<float8_e4m3fn_t const>();
  }
  a.check_contiguous();
  index_t cols = a.ndim() == 0 ? 1 : a.dim(a.ndim() - 1);
  index_t rows = cols == 0 ? 0 : static_cast<index_t>(a.nd.size()) / cols;
  return make_view(static_cast<float8_e4m3fn_t const*>(a.nd.data()), rows, cols);
}

nb::object per_tensor_dequantize(nb::handle t_obj, nb::handle inv_obj) {
  array_in t = take(t_obj, "tensor", true);
  t.check_type({elem::fp8_e4m3, elem::u8});  // uint8: the fp8 codes (numpy without ml_dtypes)
  // torch: float16 * (Python float or 0-dim tensor) stays float16; * a [1] tensor promotes to float32.
  bool promote = false;
  if (!PyFloat_Check(inv_obj.ptr()) && !PyLong_Check(inv_obj.ptr())) {
    array_in const inv_a = take(inv_obj, "inv_scale", true);
    promote = inv_a.ndim() > 0;
    check_scalar_place("qtl.per_tensor_dequantize", t, inv_a);
  }
  float const inv = scalar_float(inv_obj, "inv_scale");
  std::vector<index_t> shape;
  for (index_t d = 0; d < t.ndim(); ++d) {
    shape.push_back(t.dim(d));
  }
  auto const tv = flat_fp8(t);
  array_out out(promote ? elem::f32 : elem::f16, shape, t);
  auto const host = [&] {
    if (promote) {
      qtl::per_tensor_dequantize<float>(tv, inv, make_view(out.data<float>(), tv.extent[0], tv.extent[1]));
    } else {
      qtl::per_tensor_dequantize<half_t>(tv, inv, make_view(out.data<half_t>(), tv.extent[0], tv.extent[1]));
    }
  };
  run_on(t, "qtl.per_tensor_dequantize", host, [&](device::backend const& b, device::stream_t s) {
    return b.per_tensor_dequantize(tv, inv, out.data<void>(), promote, s);
  });
  return out.release(t.from);
}

nb::object requantize_with_max_scale(nb::handle w_obj, nb::handle s_obj, nb::handle widths_obj) {
  array_in w = take(w_obj, "weight", true);
  w.check_type({elem::fp8_e4m3, elem::u8});
  w.check_rank(2);
  w.check_writable();
  array_in s = take(s_obj, "weight_scale", true);
  check_same_place("qtl.requantize_with_max_scale", w, s);
  s.check_type({elem::f32});
  if (s.ndim() > 1) {
    throw qtl::shape_error("qtl.requantize_with_max_scale: weight_scale must be 0-dim or 1-D, got shape " + s.shape());
  }
  s.check_contiguous();
  auto const widths = int_list(widths_obj, "logical_widths");
  if (w.on_device()) {
    // the host plans from a host copy of the scales (they are few); the kernel requantizes in place
    std::vector<float> const hs = host_copy<float>(s);
    qtl::weight_scales const scales{hs, s.ndim() == 0};
    qtl::requantize_plan const plan = qtl::plan_requantize_with_max_scale(w.dim(0), scales, widths);
    if (plan.requantize) {
      run_on(
          w, "qtl.requantize_with_max_scale", [] {},
          [&](device::backend const& b, device::stream_t st) {
            return b.requantize_with_max_scale(w.v2<float8_e4m3fn_t>(), plan.max_scale, scales.values, widths, st);
          });
    }
    array_out out(elem::f32, {}, w);
    copy_to_device(w, out.data<void>(), &plan.max_scale, sizeof(float));
    return nb::make_tuple(out.release(s.from), nb::borrow(w_obj));
  }
  qtl::weight_scales const scales{std::span<float const>(static_cast<float const*>(s.nd.data()), s.nd.size()),
                                  s.ndim() == 0};
  float max_scale = 0.0f;
  {
    nb::gil_scoped_release nogil;
    max_scale = qtl::requantize_with_max_scale(w.v2<float8_e4m3fn_t>(), scales, widths);
  }
  array_out out(elem::f32, {});
  out.data<float>()[0] = max_scale;
  return nb::make_tuple(out.release(s.from), nb::borrow(w_obj));
}

[[noreturn]] void assertion(std::string const& msg) {
  PyErr_SetString(PyExc_AssertionError, msg.c_str());
  throw nb::python_error();
}

/// An fp8 operand of any rank as [rows, last dim] (contiguous unless it is 2-D).
view2d<float8_e4m3fn_t const> compare_view(array_in const& a) {
  // uint8: the codes, where numpy has no float8 dtype (no ml_dtypes); torch has one.
  if (a.type != elem::fp8_e4m3 && !(a.type == elem::u8 && a.from == kind::numpy)) {
    assertion(std::string("qtl.assert_fp8_all_close: ") + a.name + " has dtype " + elem_name(a.type) +
              ", not float8_e4m3fn");
  }
  return flat_fp8(a);
}

void assert_fp8_all_close(nb::handle a_obj, nb::handle b_obj) {
  array_in a = take(a_obj, "a", true);
  array_in b = take(b_obj, "b", true);
  check_same_place("qtl.assert_fp8_all_close", a, b);
  if (a.shape() != b.shape()) {
    assertion("qtl.assert_fp8_all_close: shapes differ, " + a.shape() + " vs " + b.shape());
  }
  auto const av = compare_view(a);
  auto const bv = compare_view(b);
  qtl::fp8_compare_report r;
  if (a.on_device()) {
    // the kernel's three counts, read back; the verdict is the host's
    array_out counts(elem::i64, {3}, a);
    run_on(
        a, "qtl.assert_fp8_all_close", [] {},
        [&](device::backend const& t, device::stream_t st) {
          return t.fp8_compare(av, bv, counts.data<unsigned long long>(), st);
        });
    unsigned long long c[3];
    device::backend const& table = *device::get();
    if (int const err = table.copy_to_host(c, counts.data<void>(), sizeof c, a.stream); err != 0) {
      throw qtl::error(std::string("qtl.assert_fp8_all_close: reading the counts failed: ") + table.error_string(err));
    }
    r.numel = av.extent[0] * av.extent[1];
    r.sign_flips = static_cast<index_t>(c[0]);
    r.differ = static_cast<index_t>(c[1]);
    r.differ_large = static_cast<index_t>(c[2]);
    r.passed = qtl::fp8_all_close_verdict(r);
  } else {
    nb::gil_scoped_release nogil;
    r = qtl::fp8_all_close(av, bv);
  }
  if (!r.passed) {
    assertion(r.describe());
  }
}

/// A contiguous operand of any rank as one row of its elements.
template <class T>
view1d<T const> flat(array_in const& a) {
  a.check_contiguous();
  return make_view(static_cast<T const*>(a.nd.data()), static_cast<index_t>(a.nd.size()));
}

/// A scale doubled, where `weight` is.
nb::object doubled_scale(nb::handle obj, char const* name, array_in const& weight) {
  array_in s = take(obj, name, true);
  check_same_place("qtl.normalize_e4m3fn_to_e4m3fnuz", weight, s);
  array_out out(s.type, s.extents(), s);
  with_float(s, [&]<class T>(std::type_identity<T>) {
    auto const in = flat<T>(s);
    auto const ov = make_view(out.data<T>(), in.extent[0]);
    run_on(
        s, "qtl.normalize_e4m3fn_to_e4m3fnuz", [&] { qtl::double_scales(in, ov); },
        [&](device::backend const& b, device::stream_t st) {
          return b.fnuz(false, float_type_of(s.type), in.data, ov.data, in.extent[0], st);
        });
  });
  return out.release(s.from);
}

/// uint8 codes `a` of kind `k` re-viewed as float8_e4m3fnuz: torch's, or ml_dtypes' for numpy
/// where ml_dtypes is installed (else the codes stay uint8).
nb::object as_fnuz(nb::object a, kind k) {
  if (k == kind::torch) {
    return a.attr("view")(nb::module_::import_("torch").attr("float8_e4m3fnuz"));
  }
  try {
    return a.attr("view")(nb::module_::import_("ml_dtypes").attr("float8_e4m3fnuz"));
  } catch (nb::python_error const&) {
    return a;
  }
}

nb::object normalize_e4m3fn_to_e4m3fnuz(nb::handle w_obj, nb::handle ws_obj, nb::handle is_obj) {
  array_in w = take(w_obj, "weight", true);
  // sglang asserts float8_e4m3fn; numpy without ml_dtypes: the uint8 codes
  if (w.type != elem::fp8_e4m3 && !(w.type == elem::u8 && w.from == kind::numpy)) {
    throw dtype_error(std::string("qtl.normalize_e4m3fn_to_e4m3fnuz: weight has dtype ") + elem_name(w.type) +
                      ", not float8_e4m3fn");
  }
  auto const n = static_cast<index_t>(w.nd.size());
  auto const in = flat<float8_e4m3fn_t>(w);
  array_out out(elem::u8, w.extents(), w);
  auto const ov = make_view(reinterpret_cast<float8_e4m3fnuz_t*>(out.data<std::uint8_t>()), n);
  run_on(
      w, "qtl.normalize_e4m3fn_to_e4m3fnuz", [&] { qtl::normalize_e4m3fn_to_e4m3fnuz(in, ov); },
      [&](device::backend const& b, device::stream_t st) {
        return b.fnuz(true, device::float_type::f32, in.data, ov.data, n, st);
      });
  nb::object ws = doubled_scale(ws_obj, "weight_scale", w);
  nb::object is = is_obj.is_none() ? nb::none() : doubled_scale(is_obj, "input_scale", w);
  nb::object weight = as_fnuz(out.release(w.from), w.from);
  return nb::make_tuple(weight, ws, is);
}

/// `quant_dtype`: true for float8_e4m3fnuz, false for float8_e4m3fn. @throws dtype_error
bool fnuz_quant_dtype(nb::handle obj) {
  std::string const s = dtype_arg_name(obj);
  if (s != "float8_e4m3fn" && s != "float8_e4m3fnuz") {
    throw dtype_error("qtl.scaled_quantize: quant_dtype '" + s + "' is not float8_e4m3fn or float8_e4m3fnuz");
  }
  return s == "float8_e4m3fnuz";
}

/// vLLM's GroupShape (any sequence of two ints).
qtl::group_shape group_arg(nb::handle obj, char const* fn) {
  auto const v = int_list(obj, "group_shape");
  if (v.size() != 2) {
    throw qtl::shape_error(std::string(fn) + ": group_shape must hold two ints, got " + std::to_string(v.size()));
  }
  return {v[0], v[1]};
}

nb::object scaled_quantize(nb::handle x_obj, nb::handle group_obj, nb::handle quant_obj, nb::handle compute_obj,
                           std::optional<bool> is_fp8_fnuz) {
  array_in x = take(x_obj, "x", true);
  x.check_rank(2);
  qtl::group_shape const group = group_arg(group_obj, "qtl.scaled_quantize");
  bool const fnuz = fnuz_quant_dtype(quant_obj);
  float const fp8_max = qtl::get_fp8_min_max(is_fp8_fnuz.value_or(fnuz)).max;
  index_t const m = x.dim(0);
  index_t const n = x.dim(1);
  qtl::group_shape const g = qtl::normalize_group_shape(group, m, n);
  bool const ok = g.row > 0 && g.col > 0;
  index_t const bm = ok ? m / g.row : 0;
  index_t const bn = ok ? n / g.col : 0;
  qtl::check_scaled_quantize(m, n, group, m, n, bm, bn, fp8_max);
  array_out q(fnuz ? elem::u8 : elem::fp8_e4m3, {m, n}, x);
  array_out scale(elem::f32, {bm, bn}, x);
  if (x.on_device()) {
    elem const compute = compute_obj.is_none() ? x.type
                                               : float_dtype_arg("qtl.scaled_quantize: compute_dtype", compute_obj,
                                                                 {elem::f32, elem::bf16, elem::f16});
    x.check_type({elem::f32, elem::f16, elem::bf16});
    run_on(
        x, "qtl.scaled_quantize", [] {},
        [&](device::backend const& b, device::stream_t s) {
          return b.scaled_quantize(fnuz, float_type_of(x.type), float_type_of(compute), x.nd.data(), m, n, group.row,
                                   group.col, q.data<void>(), scale.data<float>(), bm, bn, fp8_max, s);
        });
    nb::object codes = q.release(x.from);
    return nb::make_tuple(fnuz ? as_fnuz(codes, x.from) : codes, scale.release(x.from));
  }
  with_float(x, [&]<class T>(std::type_identity<T>) {
    auto const run = [&]<class C>(std::type_identity<C>) {
      auto const xv = x.v2<T const>();
      nb::gil_scoped_release nogil;
      if (fnuz) {
        qtl::scaled_quantize<float8_e4m3fnuz_t, C>(xv, group, make_view(q.data<float8_e4m3fnuz_t>(), m, n),
                                                   scale.v2<float>(), fp8_max);
      } else {
        qtl::scaled_quantize<float8_e4m3fn_t, C>(xv, group, q.v2<float8_e4m3fn_t>(), scale.v2<float>(), fp8_max);
      }
    };
    if (compute_obj.is_none()) {
      run(std::type_identity<T>{});
      return;
    }
    switch (float_dtype_arg("qtl.scaled_quantize: compute_dtype", compute_obj, {elem::f32, elem::bf16, elem::f16})) {
      case elem::bf16: run(std::type_identity<bfloat16_t>{}); break;
      case elem::f16: run(std::type_identity<half_t>{}); break;
      default: run(std::type_identity<float>{}); break;
    }
  });
  nb::object codes = q.release(x.from);
  return nb::make_tuple(fnuz ? as_fnuz(codes, x.from) : codes, scale.release(x.from));
}

nb::object scaled_dequantize(nb::handle q_obj, nb::handle s_obj, nb::handle group_obj, nb::handle out_obj) {
  nb::object qo = nb::borrow(q_obj);
  std::string dn = nb::hasattr(qo, "dtype") ? dtype_arg_name(qo.attr("dtype")) : "";
  bool const fnuz = dn == "float8_e4m3fnuz";
  if (fnuz) {  // no DLPack code and no elem of its own: its bytes
    bool const torch = std::string_view(nb::type_name(qo.type()).c_str()).starts_with("torch");
    qo = qo.attr("view")(torch ? nb::module_::import_("torch").attr("uint8")
                               : nb::module_::import_("numpy").attr("uint8"));
  }
  array_in q = take(qo, "x_q", true);
  q.check_rank(2);
  if (!fnuz) {
    q.check_type({elem::fp8_e4m3, elem::u8});  // uint8: e4m3fn codes (numpy without ml_dtypes)
  }
  array_in s = take(s_obj, "x_s", true);
  check_same_place("qtl.scaled_dequantize", q, s);
  s.check_contiguous();
  std::optional<qtl::group_shape> group;
  if (!group_obj.is_none()) {
    group = group_arg(group_obj, "qtl.scaled_dequantize");
  }
  auto const ext = qtl::dequantize_scale_extents(s.extents(), q.dim(0), q.dim(1), group);
  elem const out_type =
      float_dtype_arg("qtl.scaled_dequantize: out_dtype", out_obj, {elem::f32, elem::bf16, elem::f16}, elem::f32);
  array_out out(out_type, {q.dim(0), q.dim(1)}, q);
  if (q.on_device()) {
    s.check_type({elem::f32, elem::f16, elem::bf16});
    qtl::detail::broadcast_factors("qtl::scaled_dequantize", ext[0], ext[1], q.dim(0), q.dim(1));  // the host's check
    run_on(
        q, "qtl.scaled_dequantize", [] {},
        [&](device::backend const& b, device::stream_t st) {
          return b.scaled_dequantize(fnuz, float_type_of(s.type), float_type_of(out_type), q.nd.data(), q.dim(0),
                                     q.dim(1), s.nd.data(), ext[0], ext[1], out.data<void>(), st);
        });
    return out.release(q.from);
  }
  with_float(s, [&]<class S>(std::type_identity<S>) {
    auto const sv = make_view(static_cast<S const*>(s.nd.data()), ext[0], ext[1]);
    auto const run = [&]<class Out>(std::type_identity<Out>) {
      nb::gil_scoped_release nogil;
      if (fnuz) {
        qtl::scaled_dequantize<Out>(q.v2<float8_e4m3fnuz_t const>(), sv, out.v2<Out>());
      } else {
        qtl::scaled_dequantize<Out>(q.v2<float8_e4m3fn_t const>(), sv, out.v2<Out>());
      }
    };
    switch (out_type) {
      case elem::bf16: run(std::type_identity<bfloat16_t>{}); break;
      case elem::f16: run(std::type_identity<half_t>{}); break;
      default: run(std::type_identity<float>{}); break;
    }
  });
  return out.release(q.from);
}

nb::object group_broadcast(nb::handle t_obj, nb::handle shape_obj) {
  array_in t = take(t_obj, "t", true);
  t.check_rank(2);
  auto const shape = int_list(shape_obj, "shape");
  if (shape.size() != 2) {
    throw qtl::shape_error("qtl.group_broadcast: shape must hold two ints, got " + std::to_string(shape.size()));
  }
  // vLLM leaves an extent of 1 to torch's broadcasting
  index_t const rows = t.dim(0) == 1 ? 1 : shape[0];
  index_t const cols = t.dim(1) == 1 ? 1 : shape[1];
  array_out out(t.type, {rows, cols}, t);
  with_float(t, [&]<class T>(std::type_identity<T>) {
    auto const tv = t.v2<T const>();
    if (t.on_device()) {  // the host's check first
      qtl::detail::broadcast_factors("qtl::group_broadcast", tv.extent[0], tv.extent[1], rows, cols);
    }
    run_on(
        t, "qtl.group_broadcast", [&] { qtl::group_broadcast(tv, out.v2<T>()); },
        [&](device::backend const& b, device::stream_t s) {
          return b.group_broadcast(float_type_of(t.type), tv.data, tv.extent[0], tv.extent[1], out.data<void>(), rows,
                                   cols, s);
        });
  });
  return out.release(t.from);
}

}  // namespace

void bind_fp8(nb::module_& m) {
  m.def("scaled_quantize", &scaled_quantize, nb::arg("x"), nb::arg("group_shape"), nb::arg("quant_dtype"),
        nb::arg("compute_dtype").none() = nb::none(), nb::kw_only(), nb::arg("is_fp8_fnuz").none() = nb::none());
  m.def("scaled_dequantize", &scaled_dequantize, nb::arg("x_q"), nb::arg("x_s"),
        nb::arg("group_shape").none() = nb::none(), nb::arg("out_dtype").none() = nb::none());
  m.def("group_broadcast", &group_broadcast, nb::arg("t"), nb::arg("shape"));
  m.def("normalize_e4m3fn_to_e4m3fnuz", &normalize_e4m3fn_to_e4m3fnuz, nb::arg("weight"), nb::arg("weight_scale"),
        nb::arg("input_scale").none() = nb::none());
  m.def("assert_fp8_all_close", &assert_fp8_all_close, nb::arg("a"), nb::arg("b"));
  m.def("scaled_fp8_quant", &scaled_fp8_quant, nb::arg("input"), nb::arg("scale").none() = nb::none(),
        nb::arg("num_token_padding").none() = nb::none(), nb::arg("use_per_token_if_dynamic") = false);
  m.def("per_tensor_dequantize", &per_tensor_dequantize, nb::arg("tensor"), nb::arg("inv_scale"));
  m.def("requantize_with_max_scale", &requantize_with_max_scale, nb::arg("weight"), nb::arg("weight_scale"),
        nb::arg("logical_widths"));
}

}  // namespace qtl::py
