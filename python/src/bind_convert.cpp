// The load-time converters (qtl/convert.hpp) in sglang's / vLLM's Python signatures. Weights are
// [N, K] or [E, N, K] (converted one matrix at a time), block scales [ceil(N/BN), ceil(K/BK)] or
// [E, ...]; e4m3 weights as float8_e4m3fn (torch, ml_dtypes) or their uint8 codes.
//
//   block_quant_dequant(x_q_block, x_s, block_size, dtype)       -> float32 | bfloat16 (sglang)
//   per_block_cast_to_fp8(x, block_size=(128,128), use_ue8m0=False, *, ue8m0_rule="log2")
//                                                                -> (q e4m3, sf float32) (vLLM's
//       signature; ue8m0_rule="bits" is DeepGEMM's / sglang's power-of-two rule)
//   requant_weight_ue8m0(weight, weight_scale_inv, weight_block_size=(128,128), *, recipe="sglang",
//                        canonical=False)                         -> (weight e4m3, scale float32)
//       NOT sglang's return: the scales stay float32 powers of two (vLLM's in-place result);
//       deepgemm_pack_ue8m0 is sglang's transform_scale_ue8m0 packing of them
//   deepgemm_pack_ue8m0(sf [nb, kb] | [E, nb, kb], mn)           -> int32 storage [P, A] | [E, P, A]
//   deepgemm_unpack_ue8m0(packed [P, A] | [E, P, A], k_blocks)   -> float32 [ceil(A/128), kb] (| [E, ..])
//   fp8_block_to_mxfp4(weight, weight_scale_inv, block_size=(128,128))
//                                                                -> (uint8 [.., K/2], E8M0 uint8 [.., K/32])
//   fp8_block_to_nvfp4(weight, weight_scale_inv, block_size=(128,128), global_scale=None)
//                                                                -> (uint8 [.., K/2], e4m3 [.., K/16], float32 0-dim)
//   cast_e2m1fn_to_e4m3fn(x, scale)                              -> (e4m3 [.., N, K], E8M0 [.., ceil(N/128),
//   ceil(K/128)])
//       DeepSeek-V4's lossless MXFP4 cast (qtl/e2m1_to_e4m3.hpp): x int8 or uint8 [.., N, K/2], scale
//       float8_e8m0fnu or uint8 [.., N, K/32]; the scales come back as float8_e8m0fnu (torch, ml_dtypes;
//       device arrays of other producers: their uint8 codes)
//
// Device arrays: what the host ops refuse on the data (a scale DeepGEMM cannot take, a non-finite
// dequant, a block that does not cast losslessly) the kernels report through device words
// (run_with_first); the binding then raises the host op's error, naming the same element, and
// returns none of the outputs.
//
// `threads` (None: one per core) cuts the whole-tensor converters into slices of block rows; the
// bytes do not depend on it.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <qtl/convert.hpp>
#include <qtl/dispatch.hpp>
#include <qtl/e2m1_to_e4m3.hpp>

#include "bindings.hpp"

namespace qtl::py {

std::vector<unsigned long long> run_with_first(
    array_in const& lead, char const* op, std::size_t n,
    std::function<int(device::backend const&, device::stream_t, unsigned long long*)> const& launch) {
  array_out words(elem::i64, {static_cast<index_t>(n)}, lead);
  std::vector<unsigned long long> h(n, ~0ull);
  copy_to_device(lead, words.data<void>(), h.data(), n * sizeof(h[0]));
  run_on(
      lead, op, [] {},
      [&](device::backend const& b, device::stream_t s) { return launch(b, s, words.data<unsigned long long>()); });
  device::backend const& table = *device::get();
  if (int const err = table.copy_to_host(h.data(), words.data<void>(), n * sizeof(h[0]), lead.stream); err != 0) {
    throw qtl::error(std::string(op) + ": reading the kernel's checks failed: " + table.error_string(err));
  }
  return h;
}

void read_back(array_in const& a, std::size_t offset, void* dst, std::size_t bytes) {
  device::backend const& table = *device::get();
  if (int const err = table.copy_to_host(dst, static_cast<std::uint8_t const*>(a.nd.data()) + offset, bytes, a.stream);
      err != 0) {
    throw qtl::error(std::string(a.name) + ": reading it from the device failed: " + table.error_string(err));
  }
}

void refuse_unpackable(char const* op, array_in const& s, unsigned long long index) {
  std::string const why = [&] {
    if (s.type == elem::u8) {
      std::uint8_t code = 0;
      read_back(s, index, &code, 1);
      return qtl::convert::detail::unpackable_scale(code);
    }
    float v = 0.0f;
    read_back(s, index * sizeof v, &v, sizeof v);
    return qtl::convert::detail::unpackable_scale(v);
  }();
  throw qtl::value_error(std::string("qtl::convert::") + op + ": scale " + std::to_string(index) + " " + why);
}

nb::object byte_view(nb::handle obj) {
  if (!nb::hasattr(obj, "dtype") || !nb::hasattr(obj, "view")) {
    return nb::borrow(obj);
  }
  auto const dn = nb::cast<std::string>(obj.attr("dtype").attr("__str__")());
  if (dn != "int8" && dn != "torch.int8" && dn != "float8_e8m0fnu" && dn != "torch.float8_e8m0fnu") {
    return nb::borrow(obj);
  }
  bool const torch = dn.starts_with("torch.");
  return obj.attr("view")(nb::module_::import_(torch ? "torch" : "numpy").attr("uint8"));
}

namespace {

namespace cv = qtl::convert;
using block_pair = std::tuple<index_t, index_t>;

cv::block_size block_of(char const* op, block_pair b) {
  auto const [n, k] = b;
  if (n <= 0 || k <= 0 || n > (1 << 20) || k > (1 << 20)) {
    throw qtl::value_error(std::string("qtl.") + op + ": block size (" + std::to_string(n) + ", " + std::to_string(k) +
                           ") must be two positive sizes");
  }
  return {static_cast<int>(n), static_cast<int>(k)};
}

/// A weight [N, K] or [E, N, K] (contiguous) of one of `types`, and its grid in blocks of `b`.
cv::block_grid grid_of(array_in const& w, cv::block_size b) {
  if (w.ndim() != 2 && w.ndim() != 3) {
    throw qtl::shape_error(std::string(w.name) + ": expected [N, K] or [E, N, K], got shape " + w.shape());
  }
  w.check_contiguous();
  bool const experts = w.ndim() == 3;
  return {experts ? w.dim(0) : 1, w.dim(experts ? 1 : 0), w.dim(experts ? 2 : 1), b};
}

std::vector<index_t> scale_shape(cv::block_grid const& g, bool experts) {
  return experts ? std::vector<index_t>{g.groups, g.n_blocks(), g.k_blocks()}
                 : std::vector<index_t>{g.n_blocks(), g.k_blocks()};
}

/// An FP8 block weight and its float32 block scales, checked against each other.
struct fp8_block {
  array_in q;
  array_in s;
  cv::block_grid grid;

  std::span<std::uint8_t const> codes() const { return {static_cast<std::uint8_t const*>(q.nd.data()), q.nd.size()}; }
  std::span<float const> scales() const { return {static_cast<float const*>(s.nd.data()), s.nd.size()}; }
};

/// The device table's view of a block grid.
device::backend::block_grid device_grid(cv::block_grid const& g) { return {g.groups, g.n, g.k, g.block.n, g.block.k}; }

/// The host converters' refusal (`op`) of element i = (g*N + n)*K + k whose dequant is not finite.
[[noreturn]] void refuse_element(char const* op, cv::block_grid const& g, unsigned long long i) {
  auto const e = static_cast<std::int64_t>(i);
  cv::detail::refuse_nonfinite_element(op, g, {}, 0, e / g.k, e % g.k);
}

/// fp8_block_bf16_amax's refusal of block b = (g*nb + bi)*kb + bj.
[[noreturn]] void refuse_amax_block(cv::block_grid const& g, unsigned long long b) {
  auto const i = static_cast<std::int64_t>(b);
  std::int64_t const nb = g.n_blocks();
  std::int64_t const kb = g.k_blocks();
  cv::detail::refuse_nonfinite_block(i / (nb * kb), i / kb % nb, i % kb);
}

fp8_block take_fp8_block(char const* op, nb::handle q_obj, char const* q_name, nb::handle s_obj, char const* s_name,
                         cv::block_size b, bool device_ok = false) {
  fp8_block in{take(q_obj, q_name, device_ok), take(s_obj, s_name, device_ok), {}};
  check_same_place(std::string("qtl.") + op, in.q, in.s);
  in.q.check_type({elem::fp8_e4m3, elem::u8});
  in.s.check_type({elem::f32});
  in.grid = grid_of(in.q, b);
  in.s.check_contiguous();
  auto const want = scale_shape(in.grid, in.q.ndim() == 3);
  if (in.s.extents() != want) {
    throw qtl::shape_error(std::string("qtl.") + op + ": " + s_name + " has shape " + in.s.shape() + "; " + q_name +
                           " " + in.q.shape() + " in " + std::to_string(b.n) + "x" + std::to_string(b.k) +
                           " blocks needs " + qtl::shape_string(want.data(), static_cast<int>(want.size())));
  }
  return in;
}

nb::object block_quant_dequant(nb::handle q_obj, nb::handle s_obj, block_pair block, nb::handle dtype,
                               std::optional<int> threads) {
  char const* op = "block_quant_dequant";
  fp8_block const in = take_fp8_block(op, q_obj, "x_q_block", s_obj, "x_s", block_of(op, block), true);
  bool const bf16 = float_dtype_arg("qtl.block_quant_dequant", dtype, {elem::f32, elem::bf16}) == elem::bf16;
  int const t = thread_count(threads);
  array_out out(bf16 ? elem::bf16 : elem::f32, in.q.extents(), in.q);
  if (in.q.on_device()) {
    run_on(
        in.q, "qtl.block_quant_dequant", [] {},
        [&](device::backend const& b, device::stream_t s) {
          return b.block_quant_dequant(bf16, in.codes().data(), in.scales().data(), device_grid(in.grid),
                                       out.data<void>(), s);
        });
    return out.release(in.q.from);
  }
  {
    nb::gil_scoped_release nogil;
    auto const n = static_cast<std::size_t>(out.size());
    if (bf16) {
      cv::block_quant_dequant<bfloat16_t>(in.codes(), in.scales(), in.grid, std::span(out.data<bfloat16_t>(), n), t);
    } else {
      cv::block_quant_dequant<float>(in.codes(), in.scales(), in.grid, std::span(out.data<float>(), n), t);
    }
  }
  return out.release(in.q.from);
}

cv::pow2_rule rule_of(bool use_ue8m0, std::string const& rule) {
  if (rule != "log2" && rule != "bits") {
    throw qtl::value_error("qtl.per_block_cast_to_fp8: ue8m0_rule = '" + rule +
                           "': 'log2' (vLLM, sglang <= 6082c49) or 'bits' (DeepGEMM, sglang >= 002ed7e)");
  }
  if (!use_ue8m0) {
    return cv::pow2_rule::none;
  }
  return rule == "bits" ? cv::pow2_rule::bits : cv::pow2_rule::log2;
}

nb::object per_block_cast_to_fp8(nb::handle x_obj, block_pair block, bool use_ue8m0, std::string const& rule,
                                 std::optional<int> threads) {
  char const* op = "per_block_cast_to_fp8";
  array_in x = take(x_obj, "x", true);
  cv::block_grid const g = grid_of(x, block_of(op, block));
  cv::pow2_rule const r = rule_of(use_ue8m0, rule);
  int const t = thread_count(threads);
  array_out q(elem::fp8_e4m3, x.extents(), x);
  array_out sf(elem::f32, scale_shape(g, x.ndim() == 3), x);
  if (x.on_device()) {
    x.check_type({elem::f32});  // the kernel's input (the host widens float16/bfloat16 first)
    run_on(
        x, "qtl.per_block_cast_to_fp8", [] {},
        [&](device::backend const& b, device::stream_t s) {
          return b.per_block_cast_to_fp8(static_cast<int>(r), static_cast<float const*>(x.nd.data()), device_grid(g),
                                         q.data<std::uint8_t>(), sf.data<float>(), s);
        });
    return nb::make_tuple(q.release(x.from), sf.release(x.from));
  }
  with_float(x, [&]<class T>(std::type_identity<T>) {
    auto const n = static_cast<std::size_t>(x.nd.size());
    T const* src = static_cast<T const*>(x.nd.data());
    nb::gil_scoped_release nogil;
    std::vector<float> widened;  // the library's input is float32: fp16/bf16 are widened (exactly)
    std::span<float const> xs;
    if constexpr (std::is_same_v<T, float>) {
      xs = {src, n};
    } else {
      widened.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        widened[i] = qtl::to_float(src[i]);
      }
      xs = widened;
    }
    cv::per_block_cast_to_fp8(r, xs, g, std::span(q.data<std::uint8_t>(), n),
                              std::span(sf.data<float>(), static_cast<std::size_t>(sf.size())), t);
  });
  return nb::make_tuple(q.release(x.from), sf.release(x.from));
}

nb::object requant_weight_ue8m0(nb::handle w_obj, nb::handle s_obj, block_pair block, std::string const& recipe,
                                bool canonical, std::optional<int> threads) {
  char const* op = "requant_weight_ue8m0";
  if (block != block_pair{128, 128}) {
    throw qtl::unsupported_error("qtl.requant_weight_ue8m0: weight_block_size (" + std::to_string(std::get<0>(block)) +
                                 ", " + std::to_string(std::get<1>(block)) +
                                 ") is not supported; the engines requant 128x128 blocks only");
  }
  fp8_block const in = take_fp8_block(op, w_obj, "weight", s_obj, "weight_scale_inv", {128, 128}, true);
  int const t = thread_count(threads);
  array_out q(elem::fp8_e4m3, in.q.extents(), in.q);
  array_out sf(elem::f32, in.s.extents(), in.q);
  if (in.q.on_device()) {
    qtl::dispatch_name<cv::recipes>("qtl.requant_weight_ue8m0: recipe", recipe, []<class R>() {});  // names it first
    run_on(
        in.q, "qtl.requant_weight_ue8m0", [] {},
        [&](device::backend const& b, device::stream_t s) {
          return b.requant_weight_ue8m0(recipe.c_str(), canonical, in.codes().data(), in.scales().data(),
                                        in.grid.groups, in.grid.n, in.grid.k, q.data<std::uint8_t>(), sf.data<float>(),
                                        s);
        });
    return nb::make_tuple(q.release(in.q.from), sf.release(in.q.from));
  }
  // the recipes of qtl::convert::recipes: sglang (bf16 dequant, bits rule), sglang-legacy (bf16, log2
  // rule: sglang up to 6082c49), vllm (f32 dequant, log2 rule)
  qtl::dispatch_name<cv::recipes>("qtl.requant_weight_ue8m0: recipe", recipe, [&]<class R>() {
    std::span<std::uint8_t> const qo(q.data<std::uint8_t>(), static_cast<std::size_t>(q.size()));
    std::span<float> const so(sf.data<float>(), static_cast<std::size_t>(sf.size()));
    nb::gil_scoped_release nogil;
    if (canonical) {
      cv::requant_weight_ue8m0_canonical<R>(in.codes(), in.scales(), in.grid.groups, in.grid.n, in.grid.k, qo, so, t);
    } else {
      cv::requant_weight_ue8m0<R>(in.codes(), in.scales(), in.grid.groups, in.grid.n, in.grid.k, qo, so, t);
    }
  });
  return nb::make_tuple(q.release(in.q.from), sf.release(in.q.from));
}

nb::object deepgemm_pack_ue8m0(nb::handle s_obj, index_t mn) {
  array_in s = take(s_obj, "sf", true);
  s.check_type({elem::f32});
  if (s.ndim() != 2 && s.ndim() != 3) {
    throw qtl::shape_error("sf: expected [ceil(N/128), kb] or [E, ceil(N/128), kb], got shape " + s.shape());
  }
  s.check_contiguous();
  bool const experts = s.ndim() == 3;
  index_t const groups = experts ? s.dim(0) : 1;
  index_t const rows = s.dim(experts ? 1 : 0);
  index_t const kb = s.dim(experts ? 2 : 1);
  if (mn < 1) {
    throw qtl::value_error("qtl.deepgemm_pack_ue8m0: mn = " + std::to_string(mn) + " must be a positive row count");
  }
  auto const l = cv::deepgemm_layout(groups, mn, kb);
  if (rows != l.scale_rows()) {
    throw qtl::shape_error("qtl.deepgemm_pack_ue8m0: sf has shape " + s.shape() + ": " + std::to_string(rows) +
                           " block rows; mn = " + std::to_string(mn) +
                           " needs ceil(mn/128) = " + std::to_string(l.scale_rows()));
  }
  array_out out(elem::i32,
                experts ? std::vector<index_t>{groups, l.packed_k(), l.aligned_mn()}
                        : std::vector<index_t>{l.packed_k(), l.aligned_mn()},
                s);
  if (s.on_device()) {
    auto const first = run_with_first(s, "qtl.deepgemm_pack_ue8m0", 1, [&](auto const& b, auto st, auto* f) {
      return b.deepgemm_pack(false, s.nd.data(), groups, mn, kb, out.data<std::int32_t>(), f, st);
    });
    if (first[0] != ~0ull) {
      refuse_unpackable("deepgemm_pack_ue8m0", s, first[0]);
    }
    return out.release(s.from);
  }
  {
    std::span<float const> const sv(static_cast<float const*>(s.nd.data()), s.nd.size());
    nb::gil_scoped_release nogil;
    cv::deepgemm_pack_ue8m0(sv, l, std::span(out.data<std::int32_t>(), static_cast<std::size_t>(out.size())));
  }
  return out.release(s.from);
}

nb::object deepgemm_unpack_ue8m0(nb::handle p_obj, index_t k_blocks) {
  array_in p = take(p_obj, "sf_packed", true);
  p.check_type({elem::i32});
  if (p.ndim() != 2 && p.ndim() != 3) {
    throw qtl::shape_error("sf_packed: expected [P, A] or [E, P, A], got shape " + p.shape());
  }
  p.check_contiguous();
  bool const experts = p.ndim() == 3;
  index_t const groups = experts ? p.dim(0) : 1;
  index_t const P = p.dim(experts ? 1 : 0);
  index_t const A = p.dim(experts ? 2 : 1);
  index_t const rows = (A + 127) / 128;
  if (k_blocks < 1) {
    throw qtl::value_error("qtl.deepgemm_unpack_ue8m0: k_blocks = " + std::to_string(k_blocks) + " must be positive");
  }
  array_out out(elem::f32,
                experts ? std::vector<index_t>{groups, rows, k_blocks} : std::vector<index_t>{rows, k_blocks}, p);
  if (p.on_device()) {
    cv::deepgemm_unpack_ue8m0({}, 0, P, A, k_blocks, {});  // the host function's checks of P, A and kb
    run_on(
        p, "qtl.deepgemm_unpack_ue8m0", [] {},
        [&](device::backend const& b, device::stream_t s) {
          return b.deepgemm_unpack_ue8m0(static_cast<std::int32_t const*>(p.nd.data()), groups, P, A, k_blocks,
                                         out.data<float>(), s);
        });
    return out.release(p.from);
  }
  {
    std::span<std::int32_t const> const pv(static_cast<std::int32_t const*>(p.nd.data()), p.nd.size());
    nb::gil_scoped_release nogil;
    cv::deepgemm_unpack_ue8m0(pv, groups, P, A, k_blocks,
                              std::span(out.data<float>(), static_cast<std::size_t>(out.size())));
  }
  return out.release(p.from);
}

std::vector<index_t> last_dim(array_in const& a, index_t last) {
  auto s = a.extents();
  s.back() = last;
  return s;
}

nb::object fp8_block_to_mxfp4(nb::handle q_obj, nb::handle s_obj, block_pair block, std::optional<int> threads) {
  char const* op = "fp8_block_to_mxfp4";
  fp8_block const in = take_fp8_block(op, q_obj, "weight", s_obj, "weight_scale_inv", block_of(op, block), true);
  int const t = thread_count(threads);
  if (in.grid.k % cv::mxfp4_block != 0) {
    throw qtl::shape_error("qtl.fp8_block_to_mxfp4: weight has shape " + in.q.shape() +
                           ": K = " + std::to_string(in.grid.k) + " is not a multiple of the MXFP4 block of 32");
  }
  array_out packed(elem::u8, last_dim(in.q, in.grid.k / 2), in.q);
  array_out scales(elem::u8, last_dim(in.q, in.grid.k / cv::mxfp4_block), in.q);
  if (in.q.on_device()) {
    auto const first = run_with_first(in.q, "qtl.fp8_block_to_mxfp4", 1, [&](auto const& b, auto st, auto* f) {
      return b.fp8_block_to_mxfp4(in.codes().data(), in.scales().data(), device_grid(in.grid),
                                  packed.data<std::uint8_t>(), scales.data<std::uint8_t>(), f, st);
    });
    if (first[0] != ~0ull) {
      refuse_element(op, in.grid, first[0]);
    }
  } else {
    nb::gil_scoped_release nogil;
    cv::fp8_block_to_mxfp4(in.codes(), in.scales(), in.grid,
                           std::span(packed.data<std::uint8_t>(), static_cast<std::size_t>(packed.size())),
                           std::span(scales.data<std::uint8_t>(), static_cast<std::size_t>(scales.size())), t);
  }
  return nb::make_tuple(packed.release(in.q.from), scales.release(in.q.from));
}

nb::object fp8_block_to_nvfp4(nb::handle q_obj, nb::handle s_obj, block_pair block, nb::handle gs_obj,
                              std::optional<int> threads) {
  char const* op = "fp8_block_to_nvfp4";
  fp8_block const in = take_fp8_block(op, q_obj, "weight", s_obj, "weight_scale_inv", block_of(op, block), true);
  int const t = thread_count(threads);
  if (in.grid.k % 16 != 0) {
    throw qtl::shape_error("qtl.fp8_block_to_nvfp4: weight has shape " + in.q.shape() +
                           ": K = " + std::to_string(in.grid.k) + " is not a multiple of the NVFP4 block of 16");
  }
  bool const given = !gs_obj.is_none();
  float const given_gs = given ? scalar_float(gs_obj, "global_scale") : 0.0f;
  array_out packed(elem::u8, last_dim(in.q, in.grid.k / 2), in.q);
  array_out scales(elem::fp8_e4m3, last_dim(in.q, in.grid.k / 16), in.q);
  array_out global(elem::f32, {}, in.q);
  if (in.q.on_device()) {
    if (given) {  // the host op's check of the global scale (on no rows), then the value for the kernel
      cv::fp8_block_to_nvfp4({}, {}, {0, in.grid.n, in.grid.k, in.grid.block}, given_gs, {}, {});
      copy_to_device(in.q, global.data<void>(), &given_gs, sizeof given_gs);
    }
    array_out workspace(elem::bf16, {in.grid.elements()}, in.q);
    auto const first = run_with_first(in.q, "qtl.fp8_block_to_nvfp4", 2, [&](auto const& b, auto st, auto* f) {
      return b.fp8_block_to_nvfp4(in.codes().data(), in.scales().data(), device_grid(in.grid), !given,
                                  global.data<float>(), packed.data<std::uint8_t>(), scales.data<std::uint8_t>(),
                                  workspace.data<void>(), f, st);
    });
    // the host path's refusal: the conversion's with a given global scale, else the amax pass's
    if (given && first[0] != ~0ull) {
      refuse_element(op, in.grid, first[0]);
    }
    if (!given && first[1] != ~0ull) {
      refuse_amax_block(in.grid, first[1]);
    }
  } else {
    nb::gil_scoped_release nogil;
    float const gs =
        given ? given_gs : cv::nvfp4_shared_global_scale(cv::fp8_block_bf16_amax(in.codes(), in.scales(), in.grid));
    cv::fp8_block_to_nvfp4(in.codes(), in.scales(), in.grid, gs,
                           std::span(packed.data<float4_e2m1x2_t>(), static_cast<std::size_t>(packed.size())),
                           std::span(scales.data<float8_e4m3fn_t>(), static_cast<std::size_t>(scales.size())), t);
    global.data<float>()[0] = gs;
  }
  return nb::make_tuple(packed.release(in.q.from), scales.release(in.q.from), global.release(in.q.from));
}

/// The host op's refusal of block b = (g*nb + bi)*kb + bj of the device cast, which the kernel
/// reported: the rows of its block row read back (into a host copy of the matrix's rows up to
/// them), then the host op's check of the block names the element.
[[noreturn]] void refuse_cast_block(array_in const& x, array_in const& s, cv::block_grid const& g,
                                    unsigned long long b) {
  auto const i = static_cast<std::int64_t>(b);
  std::int64_t const nb = g.n_blocks();
  std::int64_t const kb = g.k_blocks();
  std::int64_t const gi = i / (nb * kb);
  std::int64_t const n0 = i / kb % nb * g.block.n;
  std::int64_t const k0 = i % kb * g.block.k;
  std::int64_t const n1 = std::min(n0 + g.block.n, g.n);
  std::int64_t const row_bytes = g.k / 2;
  std::int64_t const row_groups = g.k / cv::e2m1_scale_group;
  std::vector<std::uint8_t> xm(static_cast<std::size_t>(n1 * row_bytes));
  std::vector<std::uint8_t> sm(static_cast<std::size_t>(n1 * row_groups));
  read_back(x, static_cast<std::size_t>((gi * g.n + n0) * row_bytes), xm.data() + n0 * row_bytes,
            static_cast<std::size_t>((n1 - n0) * row_bytes));
  read_back(s, static_cast<std::size_t>((gi * g.n + n0) * row_groups), sm.data() + n0 * row_groups,
            static_cast<std::size_t>((n1 - n0) * row_groups));
  std::uint8_t emax = 0;  // the block's largest scale code, as the host op's block_row_scales
  for (std::int64_t r = n0; r < n1; ++r) {
    for (std::int64_t j = k0 / cv::e2m1_scale_group; j < std::min(k0 + g.block.k, g.k) / cv::e2m1_scale_group; ++j) {
      emax = std::max(emax, sm[static_cast<std::size_t>(r * row_groups + j)]);
    }
  }
  if (emax == 0xFF) {
    cv::detail::refuse_block(g, gi, n0, k0, "a scale is NaN (E8M0 0xFF)");
  }
  cv::detail::check_block(xm.data(), sm.data(), g, gi, n0, k0, emax);
  throw qtl::error("qtl.cast_e2m1fn_to_e4m3fn: the device flagged block " + std::to_string(b) +
                   ", which the host check takes");
}

nb::object cast_e2m1fn_to_e4m3fn(nb::handle x_obj, nb::handle s_obj, std::optional<int> threads) {
  array_in x = take(byte_view(x_obj), "x", true);
  array_in s = take(byte_view(s_obj), "scale", true);
  check_same_place("qtl.cast_e2m1fn_to_e4m3fn", x, s);
  x.check_type({elem::u8});
  s.check_type({elem::u8});
  cv::block_grid g = grid_of(x, {128, 128});
  g.k *= 2;
  auto const want = last_dim(x, g.k / cv::e2m1_scale_group);
  if (g.k % cv::e2m1_scale_group != 0 || s.extents() != want) {
    throw qtl::shape_error("qtl.cast_e2m1fn_to_e4m3fn: x has shape " + x.shape() + " and scale " + s.shape() +
                           ": K = " + std::to_string(g.k) + " must be a multiple of 32, one scale per 32 of a row");
  }
  s.check_contiguous();
  int const t = thread_count(threads);
  array_out q(elem::fp8_e4m3, last_dim(x, g.k), x);
  array_out sf(elem::u8, scale_shape(g, x.ndim() == 3), x);
  if (x.on_device()) {
    auto const first = run_with_first(x, "qtl.cast_e2m1fn_to_e4m3fn", 1, [&](auto const& b, auto st, auto* f) {
      return b.cast_e2m1fn_to_e4m3fn(static_cast<std::uint8_t const*>(x.nd.data()),
                                     static_cast<std::uint8_t const*>(s.nd.data()), device_grid(g),
                                     q.data<std::uint8_t>(), sf.data<std::uint8_t>(), f, st);
    });
    if (first[0] != ~0ull) {
      refuse_cast_block(x, s, g, first[0]);
    }
    if (x.from != kind::torch) {  // a DLPack array has no view: the E8M0 codes as uint8
      return nb::make_tuple(q.release(x.from), sf.release(x.from));
    }
  } else {
    std::span<std::uint8_t const> const xv(static_cast<std::uint8_t const*>(x.nd.data()), x.nd.size());
    std::span<std::uint8_t const> const sv(static_cast<std::uint8_t const*>(s.nd.data()), s.nd.size());
    nb::gil_scoped_release nogil;
    cv::cast_e2m1fn_to_e4m3fn(xv, sv, g, std::span(q.data<std::uint8_t>(), static_cast<std::size_t>(q.size())),
                              std::span(sf.data<std::uint8_t>(), static_cast<std::size_t>(sf.size())), t);
  }
  nb::object scales = sf.release(x.from);
  nb::object const e8m0 = x.from == kind::torch ? nb::module_::import_("torch").attr("float8_e8m0fnu")
                                                : nb::module_::import_("ml_dtypes").attr("float8_e8m0fnu");
  return nb::make_tuple(q.release(x.from), scales.attr("view")(e8m0));
}

}  // namespace

void bind_convert(nb::module_& m) {
  auto const threads = nb::arg("threads").none() = nb::none();
  block_pair const b128{128, 128};
  m.def("block_quant_dequant", &block_quant_dequant, nb::arg("x_q_block"), nb::arg("x_s"), nb::arg("block_size"),
        nb::arg("dtype"), nb::kw_only(), threads,
        "sglang block_quant_dequant: e4m3 [N, K] or [E, N, K] times its block scales, fl(e4m3(q)*s) in float32, "
        "then one rounding to `dtype` (float32 or bfloat16).");
  m.def("per_block_cast_to_fp8", &per_block_cast_to_fp8, nb::arg("x"), nb::arg("block_size") = b128,
        nb::arg("use_ue8m0") = false, nb::kw_only(), nb::arg("ue8m0_rule") = "log2", threads,
        "vLLM/DeepGEMM per_block_cast_to_fp8: (e4m3 q, float32 sf [ceil(N/BN), ceil(K/BK)]); use_ue8m0 rounds sf "
        "up to a power of two by ue8m0_rule: 'log2' (vLLM) or 'bits' (DeepGEMM, sglang).");
  m.def("requant_weight_ue8m0", &requant_weight_ue8m0, nb::arg("weight"), nb::arg("weight_scale_inv"),
        nb::arg("weight_block_size") = b128, nb::kw_only(), nb::arg("recipe") = "sglang", nb::arg("canonical") = false,
        threads,
        "FP8 128x128-block weight -> (e4m3 weight, float32 power-of-two block scales) as an engine requants at "
        "load: recipe 'sglang' (bf16 dequant, bits rule), 'sglang-legacy' (bf16, log2) or 'vllm' (f32, log2); "
        "canonical=True: the fixed point (the requant applied twice). The scales are not packed "
        "(deepgemm_pack_ue8m0 does sglang's transform_scale_ue8m0).");
  m.def("deepgemm_pack_ue8m0", &deepgemm_pack_ue8m0, nb::arg("sf"), nb::arg("mn"),
        "DeepGEMM transform_sf_into_required_layout (SM100 UE8M0): power-of-two scales [ceil(mn/128), kb] "
        "([E, ...]) -> the packed int32 storage [ceil(kb/4), mn rounded up to 4] ([E, ...]), MN-major.");
  m.def("deepgemm_unpack_ue8m0", &deepgemm_unpack_ue8m0, nb::arg("sf_packed"), nb::arg("k_blocks"),
        "The inverse of deepgemm_pack_ue8m0 (sglang _unpack_ue8m0_scale_for_triton): int32 [P, A] ([E, P, A]) -> "
        "float32 [ceil(A/128), k_blocks] (byte 0 -> 0.0, 255 -> inf).");
  m.def("fp8_block_to_mxfp4", &fp8_block_to_mxfp4, nb::arg("weight"), nb::arg("weight_scale_inv"),
        nb::arg("block_size") = b128, nb::kw_only(), threads,
        "sglang quantize_block_fp8_weight_to_mxfp4: FP8 block weight -> (E2M1 codes uint8 [.., K/2], E8M0 scale "
        "bytes uint8 [.., K/32]).");
  m.def("fp8_block_to_nvfp4", &fp8_block_to_nvfp4, nb::arg("weight"), nb::arg("weight_scale_inv"),
        nb::arg("block_size") = b128, nb::arg("global_scale").none() = nb::none(), nb::kw_only(), threads,
        "FP8 block weight -> NVFP4, QTL's definition (not verified against flashinfer): (E2M1 codes uint8 "
        "[.., K/2], e4m3 scales [.., K/16], float32 0-dim global scale: the given one, or fl(1/fl(amax/2688)) of "
        "the whole tensor's bf16 dequant).");
  m.def("cast_e2m1fn_to_e4m3fn", &cast_e2m1fn_to_e4m3fn, nb::arg("x"), nb::arg("scale"), nb::kw_only(), threads,
        "sglang cast_e2m1fn_to_e4m3fn (DeepSeek-V4): MXFP4 codes int8/uint8 [.., N, K/2] with E8M0 scales [.., N, "
        "K/32] -> (e4m3 [.., N, K], float8_e8m0fnu [.., ceil(N/128), ceil(K/128)]), losslessly: a 128x128 block "
        "e4m3 cannot hold exactly raises ValueError naming it.");
}

}  // namespace qtl::py
