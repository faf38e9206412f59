// Block-scaled quantization (qtl/fp4.hpp) and the TRT-LLM FP4 MoE preparation (qtl/moe.hpp):
//
//   nvfp4_quantize(input [M,K], global_scale=None, *, swizzle=True, threads=None)
//       -> (values uint8 [M, K/2], scales float8_e4m3fn, global_scale float32 0-dim)
//   mxfp4_quantize(input [M,K], *, swizzle=True, threads=None) -> (values uint8 [M, K/2], scales uint8)
//   mxfp8_quantize(input [M,K], *, swizzle=True, threads=None) -> (values float8_e4m3fn [M, K], scales uint8)
//   nvfp4_dequantize(values, scales, global_scale, *, swizzle=True, dtype="float32") -> [M, K]
//   mxfp4_dequantize(values, scales, *, swizzle=True, dtype="float32") -> [M, K]
//   mxfp8_dequantize(values, scales, *, swizzle=True, dtype="float32") -> [M, K]
//   prepare_static_weights_for_trtllm_fp4_moe(gemm1_weights, gemm2_weights, gemm1_scales_linear_fp4_bytes,
//       gemm2_scales_linear_fp4_bytes, hidden_size, intermediate_size, num_experts, is_gated=True)
//       -> (gemm1_weights uint8 [E, R1, H/2], gemm1_scales float8_e4m3fn [E, R1, H/16],
//           gemm2_weights uint8 [E, H, I/2], gemm2_scales float8_e4m3fn [E, H, I/16])
//
// Values: E2M1 two per byte (element 2i in the low nibble) or E4M3 bytes. Scales: E4M3 (NVFP4, one
// per 16 elements) or UE8M0 codes as uint8 (MX, one per 32), [M, K/B] row-major (swizzle=False) or
// in the 128x4 layout of swizzle_blockscale, [pad128(M), pad4(K/B)] (swizzle=True, the default, as
// flashinfer's fp4_quantize / mxfp8_quantize), padding +0. The global scale of NVFP4 is the
// quantization multiplier gs = 448 * 6 / amax (x ≈ e2m1 * scale / gs) unless given.
// The reference's inputs of the MoE preparation are viewed (`.view(float8_e4m3fn).reshape(...)`), so
// any contiguous byte array (uint8, int8 or float8_e4m3fn) of the right number of bytes is taken.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <qtl/fp4.hpp>
#include <qtl/moe.hpp>
#include <qtl/parallel.hpp>

#include "bindings.hpp"

namespace qtl::py {
namespace {

/// Rows per slice of a threaded quantization: whole 128-row tiles of the 128x4 layout, so that a
/// slice's scales are one contiguous piece of the buffer.
constexpr index_t tile_rows = 128;

/// The device table's name of a block format.
template <class F>
constexpr device::block_format format_of() {
  return std::is_same_v<F, qtl::nvfp4>   ? device::block_format::nvfp4
         : std::is_same_v<F, qtl::mxfp4> ? device::block_format::mxfp4
                                         : device::block_format::mxfp8;
}

template <class F, class Layout>
nb::object block_quantize_op(nb::handle in_obj, std::optional<float> given_gs, std::optional<int> threads) {
  array_in in = take(in_obj, "input", true);
  in.check_rank(2);
  int const nthreads = thread_count(threads);
  index_t const m = in.dim(0);
  index_t const k = in.dim(1);
  if (k % F::block_size != 0) {
    throw qtl::shape_error("input: K = " + std::to_string(k) + " (shape " + in.shape() +
                           ") is not a multiple of the block size " + std::to_string(F::block_size));
  }
  elem const value_type = F::elements_per_value == 2 ? elem::u8 : elem::fp8_e4m3;
  elem const scale_type = F::has_global_scale ? elem::fp8_e4m3 : elem::u8;
  index_t const kb = k / F::block_size;
  index_t const padded_cols = Layout::pad_cols(kb);
  std::vector<index_t> scale_shape = {std::is_same_v<Layout, layout_128x4> ? Layout::pad_rows(m) : m, padded_cols};
  array_out values(value_type, {m, k / F::elements_per_value}, in);
  array_out scales(scale_type, scale_shape, in);
  float gs = 1.0f;
  if (in.on_device()) {
    // the global scale on the device, given (checked here, as the host function does) or computed there
    array_out g(elem::f32, {}, in);
    if (F::has_global_scale && given_gs) {
      qtl::detail::check_global_scale("qtl::block_quantize", *given_gs);
      copy_to_device(in, g.data<void>(), &*given_gs, sizeof(float));
    }
    run_on(
        in, "qtl.block_quantize", [] {},
        [&](device::backend const& b, device::stream_t s) {
          return b.block_quantize(format_of<F>(), std::is_same_v<Layout, layout_128x4>, float_type_of(in.type),
                                  in.nd.data(), m, k, values.data<void>(), scales.data<void>(), g.data<float>(),
                                  F::has_global_scale && !given_gs, s);
        });
    if constexpr (F::has_global_scale) {
      return nb::make_tuple(values.release(in.from), scales.release(in.from), g.release(in.from));
    } else {
      return nb::make_tuple(values.release(in.from), scales.release(in.from));
    }
  }
  with_float(in, [&]<class T>(std::type_identity<T>) {
    auto const iv = in.v2<T const>();
    nb::gil_scoped_release nogil;
    if constexpr (F::has_global_scale) {
      gs = given_gs ? *given_gs : qtl::nvfp4_global_scale(iv);
    }
    using E = typename F::element;
    using S = typename F::scale;
    qtl::for_each_slice(m, tile_rows, 256, nthreads, [&](index_t lo, index_t hi) {
      view2d<T const> sub = iv;
      sub.data = m == 0 ? iv.data : &iv(lo, 0);
      sub.extent[0] = hi - lo;
      auto const vals =
          make_view(values.data<E>() + lo * (k / F::elements_per_value), hi - lo, k / F::elements_per_value);
      index_t const first = lo * padded_cols;  // lo is a multiple of 128: the tiles before it
      auto const bytes = static_cast<std::size_t>(qtl::block_scale_bytes<F, Layout>(hi - lo, k));
      qtl::block_quantize<F, Layout>(sub, vals, std::span<S>(scales.data<S>() + first, bytes), gs);
    });
  });
  if constexpr (F::has_global_scale) {
    array_out g(elem::f32, {});
    g.data<float>()[0] = gs;
    return nb::make_tuple(values.release(in.from), scales.release(in.from), g.release(in.from));
  } else {
    return nb::make_tuple(values.release(in.from), scales.release(in.from));
  }
}

template <class F>
nb::object quantize(nb::handle in, std::optional<float> gs, bool swizzle, std::optional<int> threads) {
  return swizzle ? block_quantize_op<F, layout_128x4>(in, gs, threads)
                 : block_quantize_op<F, layout_linear>(in, gs, threads);
}

template <class F, class Layout>
nb::object block_dequantize_op(nb::handle v_obj, nb::handle s_obj, float gs, nb::handle dt) {
  array_in v = take(v_obj, "values", true);
  array_in s = take(s_obj, "scales", true);
  check_same_place(std::string("qtl.") + std::string(qtl::name_of<F>) + "_dequantize", v, s);
  v.check_rank(2);
  if constexpr (F::elements_per_value == 2) {
    v.check_type({elem::u8});
  } else {
    v.check_type({elem::fp8_e4m3, elem::u8});
  }
  s.check_type(F::has_global_scale ? std::initializer_list<elem>{elem::fp8_e4m3, elem::u8}
                                   : std::initializer_list<elem>{elem::u8});
  s.check_contiguous();
  v.check_contiguous();
  index_t const m = v.dim(0);
  index_t const k = v.dim(1) * F::elements_per_value;
  using E = typename F::element;
  using S = typename F::scale;
  elem const ot = float_dtype_arg("dtype", dt, {elem::f32, elem::f16, elem::bf16}, elem::f32);
  array_out out(ot, {m, k}, v);
  auto const vv = make_view(static_cast<E const*>(v.nd.data()), m, v.dim(1));
  std::span<S const> const sv(static_cast<S const*>(s.nd.data()), s.nd.size());
  if (v.on_device()) {
    // the host function's checks, which the kernel leaves to its caller; the global scale on the device
    if (k % F::block_size != 0) {
      throw qtl::shape_error("qtl::block_dequantize: values " + shape_string(m, v.dim(1)) +
                             " do not match the output " + shape_string(m, k) + " (block size " +
                             std::to_string(F::block_size) + ")");
    }
    if (auto const need = qtl::block_scale_bytes<F, Layout>(m, k); sv.size() != static_cast<std::size_t>(need)) {
      throw qtl::shape_error("qtl::block_dequantize: the scale buffer has " + std::to_string(sv.size()) +
                             " bytes, the layout needs " + std::to_string(need));
    }
    array_out g(elem::f32, {}, v);
    if constexpr (F::has_global_scale) {
      qtl::detail::check_global_scale("qtl::block_dequantize", gs);
      copy_to_device(v, g.data<void>(), &gs, sizeof(float));
    }
    run_on(
        v, "qtl.block_dequantize", [] {},
        [&](device::backend const& b, device::stream_t st) {
          return b.block_dequantize(format_of<F>(), std::is_same_v<Layout, layout_128x4>, float_type_of(ot), vv.data, m,
                                    k, sv.data(), g.data<float>(), out.data<void>(), st);
        });
    return out.release(v.from);
  }
  {
    nb::gil_scoped_release nogil;
    switch (ot) {
      case elem::f16: qtl::block_dequantize<F, Layout>(vv, sv, gs, out.v2<half_t>()); break;
      case elem::bf16: qtl::block_dequantize<F, Layout>(vv, sv, gs, out.v2<bfloat16_t>()); break;
      default: qtl::block_dequantize<F, Layout>(vv, sv, gs, out.v2<float>()); break;
    }
  }
  return out.release(v.from);
}

template <class F>
nb::object dequantize(nb::handle v, nb::handle s, float gs, bool swizzle, nb::handle dt) {
  return swizzle ? block_dequantize_op<F, layout_128x4>(v, s, gs, dt)
                 : block_dequantize_op<F, layout_linear>(v, s, gs, dt);
}

/// A contiguous byte array of `want` bytes as the [E, rows, cols] view the reference reshapes it to.
view3d<std::uint8_t const> moe_input(array_in const& a, index_t e, index_t rows, index_t cols) {
  if (elem_size(a.type) != 1 || a.type == elem::other) {
    throw dtype_error(std::string(a.name) + ": dtype " + elem_name(a.type) +
                      " is not a byte type; expected uint8 or float8_e4m3fn (packed FP4 / E4M3 scales)");
  }
  a.check_contiguous();
  if (static_cast<index_t>(a.nd.size()) != e * rows * cols) {
    throw qtl::shape_error(std::string(a.name) + ": shape " + a.shape() + " cannot be viewed as " +
                           qtl::shape_string(std::vector<index_t>{e, rows, cols}.data(), 3));
  }
  return make_view(static_cast<std::uint8_t const*>(a.nd.data()), e, rows, cols);
}

nb::object prepare_trtllm(nb::handle g1w, nb::handle g2w, nb::handle g1s, nb::handle g2s, index_t hidden, index_t inter,
                          index_t experts, bool gated) {
  qtl::trtllm_fp4_moe_shape const shape{hidden, inter, experts, gated};
  qtl::trtllm_fp4_moe_plan<128> const plan(shape);  // checks the sizes first, naming the bad one
  array_in a1w = take(g1w, "gemm1_weights", true);
  array_in a2w = take(g2w, "gemm2_weights", true);
  array_in a1s = take(g1s, "gemm1_scales_linear_fp4_bytes", true);
  array_in a2s = take(g2s, "gemm2_scales_linear_fp4_bytes", true);
  for (array_in const* a : {&a2w, &a1s, &a2s}) {
    check_same_place("qtl.prepare_static_weights_for_trtllm_fp4_moe", a1w, *a);
  }
  index_t const r1 = shape.gemm1_rows();
  qtl::trtllm_fp4_moe_tensors<std::uint8_t const, std::uint8_t const> const in{
      moe_input(a1w, experts, r1, hidden / 2), moe_input(a1s, experts, r1, hidden / 16),
      moe_input(a2w, experts, hidden, inter / 2), moe_input(a2s, experts, hidden, inter / 16)};
  array_out o1w(elem::u8, {experts, r1, hidden / 2}, a1w);
  array_out o1s(elem::fp8_e4m3, {experts, r1, hidden / 16}, a1w);
  array_out o2w(elem::u8, {experts, hidden, inter / 2}, a1w);
  array_out o2s(elem::fp8_e4m3, {experts, hidden, inter / 16}, a1w);
  {
    qtl::trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t> const out{o1w.v3<std::uint8_t>(), o1s.v3<std::uint8_t>(),
                                                                      o2w.v3<std::uint8_t>(), o2s.v3<std::uint8_t>()};
    view3d<std::uint8_t const> const din[4] = {in.gemm1_weights, in.gemm1_scales, in.gemm2_weights, in.gemm2_scales};
    view3d<std::uint8_t> const dout[4] = {out.gemm1_weights, out.gemm1_scales, out.gemm2_weights, out.gemm2_scales};
    run_on(
        a1w, "qtl.prepare_static_weights_for_trtllm_fp4_moe", [&] { plan.apply(in, out); },
        [&](device::backend const& b, device::stream_t s) {
          return b.fp4_moe(device::moe_op::prepare_trtllm, hidden, inter, experts, gated, 0, din, dout, s);
        });
  }
  kind const k = a1w.from;
  return nb::make_tuple(o1w.release(k), o1s.release(k), o2w.release(k), o2s.release(k));
}

}  // namespace

void bind_fp4(nb::module_& m) {
  // <name>_quantize and <name>_dequantize for every block format; NVFP4's take its global scale
  qtl::for_each_type<qtl::block_formats>([&]<class F>() {
    std::string const name(qtl::name_of<F>);
    if constexpr (F::has_global_scale) {
      m.def((name + "_quantize").c_str(), &quantize<F>, nb::arg("input"), nb::arg("global_scale").none() = nb::none(),
            nb::kw_only(), nb::arg("swizzle") = true, nb::arg("threads").none() = nb::none());
      m.def((name + "_dequantize").c_str(),
            [](nb::handle v, nb::handle s, nb::handle gs, bool swizzle, nb::handle dt) {
              return dequantize<F>(v, s, scalar_float(gs, "global_scale"), swizzle, dt);
            },
            nb::arg("values"), nb::arg("scales"), nb::arg("global_scale"), nb::kw_only(), nb::arg("swizzle") = true,
            nb::arg("dtype").none() = nb::none());
    } else {
      m.def((name + "_quantize").c_str(),
            [](nb::handle in, bool swizzle, std::optional<int> threads) {
              return quantize<F>(in, std::nullopt, swizzle, threads);
            },
            nb::arg("input"), nb::kw_only(), nb::arg("swizzle") = true, nb::arg("threads").none() = nb::none());
      m.def((name + "_dequantize").c_str(),
            [](nb::handle v, nb::handle s, bool swizzle, nb::handle dt) {
              return dequantize<F>(v, s, 1.0f, swizzle, dt);
            },
            nb::arg("values"), nb::arg("scales"), nb::kw_only(), nb::arg("swizzle") = true,
            nb::arg("dtype").none() = nb::none());
    }
  });
  m.def("prepare_static_weights_for_trtllm_fp4_moe", &prepare_trtllm, nb::arg("gemm1_weights"),
        nb::arg("gemm2_weights"), nb::arg("gemm1_scales_linear_fp4_bytes"), nb::arg("gemm2_scales_linear_fp4_bytes"),
        nb::arg("hidden_size"), nb::arg("intermediate_size"), nb::arg("num_experts"), nb::arg("is_gated") = true);
}

}  // namespace qtl::py
