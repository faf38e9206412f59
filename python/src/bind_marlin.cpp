// Marlin layouts (qtl/marlin.hpp) in vLLM's / sglang's Python signatures, and their inverses:
//
//   gptq_marlin_repack(b_q_weight int32 [K/pf, N], perm int32 [K] | [0] | None, size_k, size_n, num_bits,
//                      is_a_8bit=False)                             -> int32 [K/16, N*16/pf]
//   awq_marlin_repack(b_q_weight int32 [K, N/pf], size_k, size_n, num_bits, is_a_8bit=False) -> the same
//   unmarlin_gptq / unmarlin_awq(marlin_q_w, [perm,] size_k, size_n, num_bits, is_a_8bit=False)
//                                                                     -> the checkpoint qweight back
//   marlin_permute_scales(s [G', N] any float, size_k, size_n, group_size, is_a_8bit=False) -> [G', N]
//   unmarlin_permute_scales(...)                                      -> its inverse
//   marlin_zero_points(zp int32 codes [G, N], size_k = G, size_n, num_bits, is_a_8bit=False) -> [G, N/pf]
//   awq_to_marlin_zero_points(q_zp_packed int32 [G, N/pf], size_k, size_n, num_bits, is_a_8bit=False)
//   unmarlin_zero_points(zp int32 [G, N/pf], size_k, size_n, num_bits, is_a_8bit=False) -> codes [G, N]
//   marlin_sort_g_idx(g_idx int32 [K]) -> (sorted g_idx, sort_indices), a STABLE sort (the peers'
//                                         torch.argsort is not: equal groups keep their row order)
//   marlin_fp8_prepare / marlin_nvfp4_prepare / marlin_mxfp4_prepare: the tensor half of vLLM's
//       prepare_fp8_layer_for_marlin / prepare_fp4_layer_for_marlin (see their docstrings below).
//
// The peers' size arguments are checked against the arrays (their TORCH_CHECKs); the library checks
// the layout's own rules (K % 16, N % 64, ...) and its messages reach Python as qtl.ShapeError /
// qtl.InvalidValueError / qtl.UnsupportedError.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <qtl/dispatch.hpp>
#include <qtl/marlin.hpp>
#include <qtl/marlin_fp.hpp>

#include "bindings.hpp"

namespace qtl::py {
namespace {

using qtl::marlin::act_width;

/// Calls `f.template operator()<Bits, A>()` for num_bits in {4, 8} and is_a_8bit.
template <class F>
decltype(auto) with_layout(char const* op, int num_bits, bool a8, F&& f) {
  return qtl::dispatch_int<4, 8>(std::string("qtl.") + op + ": num_bits", num_bits, [&]<int Bits>() -> decltype(auto) {
    return a8 ? f.template operator()<Bits, act_width::a8>() : f.template operator()<Bits, act_width::a16>();
  });
}

[[noreturn]] void fail_shape(char const* op, array_in const& a, std::string const& need) {
  throw qtl::shape_error(std::string("qtl.") + op + ": " + a.name + " has shape " + a.shape() + "; " + need);
}

/// `a` must be [rows, cols] (the peers' size checks).
void check_shape(char const* op, array_in const& a, index_t rows, index_t cols, std::string const& why) {
  a.check_rank(2);
  if (a.dim(0) != rows || a.dim(1) != cols) {
    fail_shape(op, a, why + " need " + qtl::shape_string(rows, cols));
  }
}

std::string sizes(index_t size_k, index_t size_n) {
  return "size_k = " + std::to_string(size_k) + ", size_n = " + std::to_string(size_n);
}

/// The int32 words of a host_tensor as a new array of the caller's kind.
template <class T>
nb::object to_array(host_tensor<T, 2> const& t, kind k) {
  array_out out(elem_of<T>(), {t.extent(0), t.extent(1)});
  std::memcpy(out.data<T>(), t.data(), out.bytes());
  return out.release(k);
}

/// perm / sort_indices: None or an empty array (no act-order), else int32 [size_k] (a CUDA array
/// only with `device_ok`).
struct perm_in {
  std::optional<array_in> a;
  view1d<std::int32_t const> v{};
};

perm_in take_perm(char const* op, nb::handle obj, index_t size_k, bool device_ok = false) {
  perm_in p;
  if (obj.is_none()) {
    return p;
  }
  p.a = take(obj, "perm", device_ok);
  p.a->check_type({elem::i32});
  p.a->check_rank(1);
  if (p.a->dim(0) == 0) {
    return p;
  }
  if (p.a->dim(0) != size_k) {
    fail_shape(op, *p.a,
               "size_k = " + std::to_string(size_k) + " needs [0] (no act-order) or [" + std::to_string(size_k) + "]");
  }
  p.v = p.a->v1<std::int32_t const>();
  return p;
}

nb::object gptq_marlin_repack(nb::handle w_obj, nb::handle perm_obj, index_t size_k, index_t size_n, int num_bits,
                              bool a8) {
  char const* op = "gptq_marlin_repack";
  array_in w = take(w_obj, "b_q_weight", true);
  w.check_type({elem::i32});
  return with_layout(op, num_bits, a8, [&]<int Bits, act_width A>() {
    using L = qtl::marlin::layout<Bits, A>;
    if (size_k % L::pack != 0) {
      fail_shape(op, w,
                 sizes(size_k, size_n) + ": size_k is not a multiple of the pack factor " + std::to_string(L::pack));
    }
    check_shape(op, w, size_k / L::pack, size_n, sizes(size_k, size_n));
    perm_in const perm = take_perm(op, perm_obj, size_k, true);
    if (perm.a) {
      check_same_place("qtl.gptq_marlin_repack", w, *perm.a);
    }
    std::string const fn = qtl::marlin::op_name("repack_gptq", Bits, A);
    qtl::marlin::check_kn<L>(fn, size_k, size_n);
    if (w.on_device() && perm.v.extent[0] != 0) {
      // the host's permutation check on a copy: the kernel would read out of bounds
      std::vector<std::int32_t> const h = host_copy<std::int32_t>(*perm.a);
      qtl::marlin::detail::check_sort_indices<L>(fn, make_view(h.data(), size_k), size_k);
    }
    array_out out(elem::i32, {L::marlin_rows(size_k), L::marlin_cols(size_n)}, w);
    auto const wv = w.v2<std::int32_t const>();
    auto const ov = out.v2<std::int32_t>();
    run_on(
        w, "qtl.gptq_marlin_repack", [&] { qtl::marlin::repack_gptq<Bits, A>(wv, perm.v, ov); },
        [&](device::backend const& t, device::stream_t s) {
          return t.marlin_repack(false, Bits, L::a8, wv, perm.v.extent[0] != 0 ? perm.v.data : nullptr, ov, s);
        });
    return out.release(w.from);
  });
}

nb::object unmarlin_gptq(nb::handle m_obj, nb::handle perm_obj, index_t size_k, index_t size_n, int num_bits, bool a8) {
  char const* op = "unmarlin_gptq";
  array_in m = take(m_obj, "marlin_q_w", true);
  m.check_type({elem::i32});
  return with_layout(op, num_bits, a8, [&]<int Bits, act_width A>() {
    using L = qtl::marlin::layout<Bits, A>;
    std::string const fn = qtl::marlin::op_name("unrepack_gptq", Bits, A);
    qtl::marlin::check_kn<L>(fn, size_k, size_n);
    check_shape(op, m, L::marlin_rows(size_k), L::marlin_cols(size_n), sizes(size_k, size_n));
    m.check_contiguous();
    perm_in const perm = take_perm(op, perm_obj, size_k, true);
    if (perm.a) {
      check_same_place("qtl.unmarlin_gptq", m, *perm.a);
    }
    array_out out(elem::i32, {size_k / L::pack, size_n}, m);
    auto const mv = m.v2<std::int32_t const>();
    auto const ov = out.v2<std::int32_t>();
    if (!m.on_device()) {
      nb::gil_scoped_release nogil;
      qtl::marlin::unrepack_gptq<Bits, A>(mv, perm.v, ov);
      return out.release(m.from);
    }
    // the kernel takes the inverse permutation: checked and inverted on the host, then copied over
    array_out inverse(elem::i32, {perm.v.extent[0]}, m);
    if (perm.v.extent[0] != 0) {
      std::vector<std::int32_t> const h = host_copy<std::int32_t>(*perm.a);
      std::vector<std::int32_t> const inv =
          qtl::marlin::detail::check_sort_indices<L>(fn, make_view(h.data(), size_k), size_k);
      copy_to_device(m, inverse.data<void>(), inv.data(), inv.size() * sizeof(std::int32_t));
    }
    run_on(
        m, "qtl.unmarlin_gptq", [] {},
        [&](device::backend const& t, device::stream_t s) {
          return t.marlin_unrepack(Bits, L::a8, mv, perm.v.extent[0] != 0 ? inverse.data<std::int32_t>() : nullptr, ov,
                                   s);
        });
    return out.release(m.from);
  });
}

nb::object awq_marlin_repack(nb::handle w_obj, index_t size_k, index_t size_n, int num_bits, bool a8) {
  char const* op = "awq_marlin_repack";
  array_in w = take(w_obj, "b_q_weight", true);
  w.check_type({elem::i32});
  return with_layout(op, num_bits, a8, [&]<int Bits, act_width A>() {
    using L = qtl::marlin::layout<Bits, A>;
    if (size_n % L::pack != 0) {
      fail_shape(op, w,
                 sizes(size_k, size_n) + ": size_n is not a multiple of the pack factor " + std::to_string(L::pack));
    }
    check_shape(op, w, size_k, size_n / L::pack, sizes(size_k, size_n));
    qtl::marlin::check_kn<L>(qtl::marlin::op_name("repack_awq", Bits, A), size_k, size_n);
    array_out out(elem::i32, {L::marlin_rows(size_k), L::marlin_cols(size_n)}, w);
    auto const wv = w.v2<std::int32_t const>();
    auto const ov = out.v2<std::int32_t>();
    run_on(
        w, "qtl.awq_marlin_repack", [&] { qtl::marlin::repack_awq<Bits, A>(wv, ov); },
        [&](device::backend const& t, device::stream_t s) {
          return t.marlin_repack(true, Bits, L::a8, wv, nullptr, ov, s);
        });
    return out.release(w.from);
  });
}

nb::object unmarlin_awq(nb::handle m_obj, index_t size_k, index_t size_n, int num_bits, bool a8) {
  char const* op = "unmarlin_awq";
  array_in m = take(m_obj, "marlin_q_w");
  m.check_type({elem::i32});
  return with_layout(op, num_bits, a8, [&]<int Bits, act_width A>() {
    using L = qtl::marlin::layout<Bits, A>;
    qtl::marlin::check_kn<L>(qtl::marlin::op_name("unrepack_awq", Bits, A), size_k, size_n);
    check_shape(op, m, L::marlin_rows(size_k), L::marlin_cols(size_n), sizes(size_k, size_n));
    m.check_contiguous();
    auto const mv = m.v2<std::int32_t const>();
    host_tensor<std::int32_t, 2> q;
    {
      nb::gil_scoped_release nogil;
      q = qtl::marlin::unrepack_awq<Bits, A>(mv);
    }
    return to_array(q, m.from);
  });
}

/// marlin_permute_scales and its inverse: s [G', N] with G' = size_k / group_size (grouped) or any
/// row count (channelwise, group_size -1 or >= size_k), of any float dtype.
nb::object permute_scales(bool inverse, nb::handle s_obj, index_t size_k, index_t size_n, index_t group_size, bool a8) {
  char const* op = inverse ? "unmarlin_permute_scales" : "marlin_permute_scales";
  array_in s = take(s_obj, "s", !inverse);  // the device has the forward permutation only
  s.check_rank(2);
  if (group_size != -1 && group_size <= 0) {
    throw qtl::value_error(std::string("qtl.") + op + ": group_size = " + std::to_string(group_size) +
                           " must be positive or -1 (channelwise)");
  }
  if (size_k <= 0) {
    throw qtl::shape_error(std::string("qtl.") + op + ": size_k = " + std::to_string(size_k) + " must be positive");
  }
  if (s.dim(1) != size_n) {
    fail_shape(op, s, sizes(size_k, size_n) + " needs " + std::to_string(size_n) + " columns");
  }
  auto const kind =
      qtl::marlin::scale_kind(size_k, static_cast<index_t>(group_size), a8 ? act_width::a8 : act_width::a16);
  if (kind == qtl::marlin::scale_perm_kind::grouped && (size_k % group_size != 0 || s.dim(0) != size_k / group_size)) {
    fail_shape(op, s,
               sizes(size_k, size_n) + " in groups of " + std::to_string(group_size) + " need " +
                   (size_k % group_size != 0 ? std::string("size_k a multiple of group_size")
                                             : std::to_string(size_k / group_size) + " rows"));
  }
  return with_float(s, [&]<class T>(std::type_identity<T>) {
    array_out out(s.type, {s.dim(0), s.dim(1)}, s);
    auto const sv = s.v2<T const>();
    auto const ov = out.v2<T>();
    if (s.on_device()) {  // the host function's checks (the kernel's are a bare cudaErrorInvalidValue)
      qtl::marlin::detail::check_scales("qtl::marlin::permute_scales", sv, ov, kind);
    }
    run_on(
        s, "qtl.marlin_permute_scales",
        [&] {
          if (inverse) {
            qtl::marlin::unpermute_scales<T>(sv, kind, ov);
          } else {
            qtl::marlin::permute_scales<T>(sv, kind, ov);
          }
        },
        [&](device::backend const& b, device::stream_t st) {
          return b.marlin_permute_scales(static_cast<int>(sizeof(T)), static_cast<int>(kind), sv.data, sv.extent[0],
                                         sv.extent[1], ov.data, st);
        });
    return out.release(s.from);
  });
}

enum class zp_kind { codes, awq, inverse };

nb::object zero_points(zp_kind k, nb::handle z_obj, index_t size_k, index_t size_n, int num_bits, bool a8) {
  char const* op = k == zp_kind::codes ? "marlin_zero_points"
                   : k == zp_kind::awq ? "awq_to_marlin_zero_points"
                                       : "unmarlin_zero_points";
  array_in z = take(z_obj, k == zp_kind::awq ? "q_zp_packed" : "zp");
  z.check_type({elem::i32});
  return with_layout(op, num_bits, a8, [&]<int Bits, act_width A>() {
    constexpr index_t pf = 32 / Bits;
    if (k != zp_kind::codes && size_n % pf != 0) {
      fail_shape(op, z, sizes(size_k, size_n) + ": size_n is not a multiple of the pack factor " + std::to_string(pf));
    }
    check_shape(op, z, size_k, k == zp_kind::codes ? size_n : size_n / pf,
                sizes(size_k, size_n) + " (size_k: the number of groups)");
    auto const zv = z.v2<std::int32_t const>();
    host_tensor<std::int32_t, 2> r;
    {
      nb::gil_scoped_release nogil;
      switch (k) {
        case zp_kind::codes: r = qtl::marlin::zero_points<Bits, A>(zv); break;
        case zp_kind::awq: r = qtl::marlin::awq_zero_points<Bits, A>(zv); break;
        case zp_kind::inverse: r = qtl::marlin::unzero_points<Bits, A>(zv); break;
      }
    }
    return to_array(r, z.from);
  });
}

nb::object marlin_sort_g_idx(nb::handle g_obj) {
  array_in g = take(g_obj, "g_idx");
  g.check_type({elem::i32});
  g.check_rank(1);
  index_t const K = g.dim(0);
  array_out sorted(elem::i32, {K});
  array_out indices(elem::i32, {K});
  auto const gv = g.v1<std::int32_t const>();
  {
    nb::gil_scoped_release nogil;
    qtl::marlin::sort_g_idx(gv, sorted.v1<std::int32_t>(), indices.v1<std::int32_t>());
  }
  return nb::make_tuple(sorted.release(g.from), indices.release(g.from));
}

// ---- FP8 / FP4 weight-only Marlin: the tensor half of prepare_fp8/fp4_layer_for_marlin ----------

/// The activation dtype: float16 or bfloat16.
qtl::marlin::act_dtype act_dtype_of(char const* op, nb::handle obj) {
  elem const e = float_dtype_arg(std::string("qtl.") + op, obj, {elem::f16, elem::bf16});
  return e == elem::bf16 ? qtl::marlin::act_dtype::bf16 : qtl::marlin::act_dtype::f16;
}

qtl::marlin::fp8_scale_fold fold_of(std::string const& f) {
  if (f == "none") return qtl::marlin::fp8_scale_fold::none;
  if (f == "vllm") return qtl::marlin::fp8_scale_fold::vllm;
  if (f == "sglang-fp16" || f == "sglang_fp16") return qtl::marlin::fp8_scale_fold::sglang_fp16;
  throw qtl::value_error("qtl.marlin_fp8_prepare: fold = '" + f +
                         "': one of 'vllm' (newer vLLM, the default), "
                         "'none' (older vLLM), 'sglang-fp16' (an sglang copy: through fp16)");
}

nb::object marlin_fp8_prepare(nb::handle w_obj, nb::handle s_obj, nb::handle dtype, bool size_k_first,
                              std::optional<std::tuple<index_t, index_t>> block_size, std::string const& fold,
                              bool a8) {
  char const* op = "marlin_fp8_prepare";
  array_in w = take(w_obj, "weight");
  w.check_type({elem::fp8_e4m3, elem::u8});
  w.check_rank(2);
  array_in s = take(s_obj, "weight_scale");
  s.check_type({elem::f32});
  s.check_contiguous();
  auto const a = act_dtype_of(op, dtype);
  auto const fold_kind = fold_of(fold);
  index_t const K = size_k_first ? w.dim(0) : w.dim(1);
  index_t const N = size_k_first ? w.dim(1) : w.dim(0);
  index_t bn = 0, bk = 0;
  if (block_size) {
    std::tie(bn, bk) = *block_size;
    if (bn <= 0 || bk <= 0 || K % bk != 0) {
      throw qtl::shape_error("qtl.marlin_fp8_prepare: block_size (" + std::to_string(bn) + ", " + std::to_string(bk) +
                             "): two positive sizes, K = " + std::to_string(K) + " a multiple of the second");
    }
    index_t const G = K / bk, nb = (N + bn - 1) / bn;
    if (s.ndim() != 2 || s.dim(0) != (size_k_first ? G : nb) || s.dim(1) != (size_k_first ? nb : G)) {
      fail_shape(op, s,
                 "weight " + w.shape() + " in blocks of (" + std::to_string(bn) + ", " + std::to_string(bk) +
                     ") needs " + (size_k_first ? qtl::shape_string(G, nb) : qtl::shape_string(nb, G)));
    }
  } else if (s.nd.size() != 1 && !(s.ndim() == 1 && s.dim(0) == N)) {
    fail_shape(op, s,
               "weight " + w.shape() + " needs one scale (per tensor) or [" + std::to_string(N) + "] (per channel)");
  }
  auto const wv = w.as_view<std::uint8_t const, 2>();
  std::span<float const> const sv(static_cast<float const*>(s.nd.data()), s.nd.size());
  act_width const width = a8 ? act_width::a8 : act_width::a16;
  using L8 = qtl::marlin::layout<8>;
  qtl::marlin::check_kn<L8>("qtl.marlin_fp8_prepare", K, N);
  if (a8) {
    qtl::marlin::check_kn<qtl::marlin::layout<8, act_width::a8>>("qtl.marlin_fp8_prepare", K, N);
  }
  array_out weight(elem::i32, {L8::marlin_rows(K), L8::marlin_cols(N)});
  auto const ov = weight.v2<std::int32_t>();
  nb::object scales;
  auto const run = [&]<class T>(std::type_identity<T>) {
    host_tensor<T, 2> out;
    {
      nb::gil_scoped_release nogil;
      auto const packed = qtl::marlin::pack_fp8_k(wv, size_k_first);
      if (a8) {
        qtl::marlin::repack_gptq<8, act_width::a8>(packed.view(), {}, ov);
      } else {
        qtl::marlin::repack_gptq<8, act_width::a16>(packed.view(), {}, ov);
      }
      auto const groups = qtl::marlin::fp8_scale_groups(sv, N, K, size_k_first, bn, bk);
      out = qtl::marlin::fp8_marlin_scales<T>(groups.view(), K, block_size ? bk : -1, width, fold_kind);
    }
    scales = to_array(out, w.from);
  };
  if (a == qtl::marlin::act_dtype::bf16) {
    run(std::type_identity<bfloat16_t>{});
  } else {
    run(std::type_identity<half_t>{});
  }
  return nb::make_tuple(weight.release(w.from), scales);
}

/// NVFP4/MXFP4 weight bytes [N, K/2] -> 4-bit Marlin of N padded to 64 (written into `out`).
template <act_width A>
void fp4_marlin_weight(view2d<std::uint8_t const> w, index_t n_pad, view2d<std::int32_t> out) {
  qtl::marlin::repack_gptq<4, A>(qtl::marlin::pack_fp4_k(w, n_pad).view(), {}, out);
}

/// weight u8 [N, K/2] and its scales u8/e4m3 [N, K/group] checked; returns (N, K, n_pad).
std::tuple<index_t, index_t, index_t> fp4_shapes(char const* op, array_in const& w, array_in const& s, index_t group) {
  w.check_type({elem::u8});
  w.check_rank(2);
  index_t const N = w.dim(0), K = 2 * w.dim(1);
  if (K % group != 0) {
    fail_shape(op, w, "K = " + std::to_string(K) + " is not a multiple of the group of " + std::to_string(group));
  }
  check_shape(op, s, N, K / group, "weight " + w.shape());
  return {N, K, qtl::marlin::fp4_padded_n(N)};
}

nb::object marlin_nvfp4_prepare(nb::handle w_obj, nb::handle s_obj, nb::handle g_obj, nb::handle dtype, bool rescale) {
  char const* op = "marlin_nvfp4_prepare";
  array_in w = take(w_obj, "weight");
  array_in s = take(s_obj, "weight_scale");
  s.check_type({elem::fp8_e4m3, elem::u8});
  auto const [N, K, n_pad] = fp4_shapes(op, w, s, 16);
  auto const a = act_dtype_of(op, dtype);
  std::vector<index_t> g_shape;  // the global scale keeps its shape (0-dim or [1]; a Python float: 0-dim)
  if (!PyFloat_Check(g_obj.ptr()) && !PyLong_Check(g_obj.ptr())) {
    array_in g = take(g_obj, "weight_global_scale");
    for (index_t d = 0; d < g.ndim(); ++d) g_shape.push_back(g.dim(d));
  }
  float const gs = scalar_float(g_obj, "weight_global_scale");
  array_out weight(elem::i32, {K / 16, n_pad * 2});  // 4-bit Marlin [K/16, N*16/8]
  array_out scales(elem::fp8_e4m3, {K / 16, n_pad});
  array_out global(elem::f32, g_shape);
  array_out factor(elem::f32, {});
  {
    auto const wv = w.as_view<std::uint8_t const, 2>();
    auto const sv = s.as_view<std::uint8_t const, 2>();
    nb::gil_scoped_release nogil;
    fp4_marlin_weight<act_width::a16>(wv, n_pad, weight.v2<std::int32_t>());
    auto const permuted = qtl::marlin::fp4_scale_groups(sv, n_pad, qtl::marlin::scale_kind(K, 16, act_width::a16));
    float const sf = rescale ? qtl::marlin::nvfp4_scale_factor(permuted.view(), a) : 1.0f;
    qtl::marlin::nvfp4_process_scales(permuted.view(), sf, scales.v2<std::uint8_t>());
    global.data<float>()[0] = qtl::marlin::nvfp4_process_global_scale(gs, a, sf);
    factor.data<float>()[0] = sf;
  }
  return nb::make_tuple(weight.release(w.from), scales.release(w.from), global.release(w.from), factor.release(w.from));
}

nb::object marlin_mxfp4_prepare(nb::handle w_obj, nb::handle s_obj, nb::handle dtype, bool a8) {
  char const* op = "marlin_mxfp4_prepare";
  array_in w = take(w_obj, "weight");
  array_in s = take(s_obj, "weight_scale");
  s.check_type({elem::u8});
  auto const [N, K, n_pad] = fp4_shapes(op, w, s, 32);
  auto const a = act_dtype_of(op, dtype);
  array_out weight(elem::i32, {K / 16, n_pad * 2});
  array_out scales(elem::u8, {K / 32, n_pad});
  {
    auto const wv = w.as_view<std::uint8_t const, 2>();
    auto const sv = s.as_view<std::uint8_t const, 2>();
    nb::gil_scoped_release nogil;
    if (a8) {
      fp4_marlin_weight<act_width::a8>(wv, n_pad, weight.v2<std::int32_t>());
    } else {
      fp4_marlin_weight<act_width::a16>(wv, n_pad, weight.v2<std::int32_t>());
    }
    auto const permuted =
        qtl::marlin::fp4_scale_groups(sv, n_pad, qtl::marlin::scale_kind(K, 32, a8 ? act_width::a8 : act_width::a16));
    qtl::marlin::mxfp4_process_scales(permuted.view(), a, a8, scales.v2<std::uint8_t>());
  }
  return nb::make_tuple(weight.release(w.from), scales.release(w.from));
}

}  // namespace

void bind_marlin(nb::module_& m) {
  auto const bits = nb::arg("num_bits");
  m.def("gptq_marlin_repack", &gptq_marlin_repack, nb::arg("b_q_weight"), nb::arg("perm").none(), nb::arg("size_k"),
        nb::arg("size_n"), bits, nb::arg("is_a_8bit") = false,
        "GPTQ qweight int32 [K/pf, N] -> Marlin int32 [K/16, N*16/pf]; `perm` (sort_indices, int32 [K]) for "
        "act-order, or an empty array / None.");
  m.def("unmarlin_gptq", &unmarlin_gptq, nb::arg("marlin_q_w"), nb::arg("perm").none(), nb::arg("size_k"),
        nb::arg("size_n"), bits, nb::arg("is_a_8bit") = false,
        "The exact inverse of gptq_marlin_repack with the same perm: GPTQ qweight [K/pf, N] in checkpoint row order.");
  m.def("awq_marlin_repack", &awq_marlin_repack, nb::arg("b_q_weight"), nb::arg("size_k"), nb::arg("size_n"), bits,
        nb::arg("is_a_8bit") = false, "AWQ qweight int32 [K, N/pf] -> Marlin int32 [K/16, N*16/pf].");
  m.def("unmarlin_awq", &unmarlin_awq, nb::arg("marlin_q_w"), nb::arg("size_k"), nb::arg("size_n"), bits,
        nb::arg("is_a_8bit") = false, "The exact inverse of awq_marlin_repack: AWQ qweight int32 [K, N/pf].");
  m.def(
      "marlin_permute_scales",
      [](nb::handle s, index_t k, index_t n, index_t g, bool a8) { return permute_scales(false, s, k, n, g, a8); },
      nb::arg("s"), nb::arg("size_k"), nb::arg("size_n"), nb::arg("group_size"), nb::arg("is_a_8bit") = false,
      "Scales [G, N] (float32/float16/bfloat16) with their columns in Marlin's order.");
  m.def(
      "unmarlin_permute_scales",
      [](nb::handle s, index_t k, index_t n, index_t g, bool a8) { return permute_scales(true, s, k, n, g, a8); },
      nb::arg("s"), nb::arg("size_k"), nb::arg("size_n"), nb::arg("group_size"), nb::arg("is_a_8bit") = false,
      "The exact inverse of marlin_permute_scales.");
  m.def(
      "marlin_zero_points",
      [](nb::handle z, index_t k, index_t n, int b, bool a8) { return zero_points(zp_kind::codes, z, k, n, b, a8); },
      nb::arg("zp"), nb::arg("size_k"), nb::arg("size_n"), bits, nb::arg("is_a_8bit") = false,
      "Zero-point codes int32 [G, N] (size_k = G) -> Marlin zero points int32 [G, N/pf].");
  m.def(
      "awq_to_marlin_zero_points",
      [](nb::handle z, index_t k, index_t n, int b, bool a8) { return zero_points(zp_kind::awq, z, k, n, b, a8); },
      nb::arg("q_zp_packed"), nb::arg("size_k"), nb::arg("size_n"), bits, nb::arg("is_a_8bit") = false,
      "AWQ qzeros int32 [G, N/pf] -> Marlin zero points int32 [G, N/pf].");
  m.def(
      "unmarlin_zero_points",
      [](nb::handle z, index_t k, index_t n, int b, bool a8) { return zero_points(zp_kind::inverse, z, k, n, b, a8); },
      nb::arg("zp"), nb::arg("size_k"), nb::arg("size_n"), bits, nb::arg("is_a_8bit") = false,
      "The exact inverse of marlin_zero_points: codes int32 [G, N].");
  m.def("marlin_sort_g_idx", &marlin_sort_g_idx, nb::arg("g_idx"),
        "(sorted g_idx, sort_indices) with a STABLE sort (rows of a group in increasing order; the peers' "
        "torch.argsort is unstable).");
  m.def("marlin_fp8_prepare", &marlin_fp8_prepare, nb::arg("weight"), nb::arg("weight_scale"), nb::arg("dtype"),
        nb::kw_only(), nb::arg("size_k_first") = false, nb::arg("block_size").none() = nb::none(),
        nb::arg("fold") = "vllm", nb::arg("is_a_8bit") = false,
        "FP8 weight-only Marlin (vLLM prepare_fp8_layer_for_marlin on tensors): e4m3 weight [N, K] ([K, N] with "
        "size_k_first) -> (int32 8-bit Marlin weight, scales [G, N] in `dtype`, permuted, exponent bias folded by "
        "`fold`: 'vllm' (newer vLLM), 'none' (older vLLM), 'sglang-fp16'; no fold with is_a_8bit). weight_scale: "
        "one value, [N], or block scales [ceil(N/BN), K/BK] with block_size=(BN, BK).");
  m.def("marlin_nvfp4_prepare", &marlin_nvfp4_prepare, nb::arg("weight"), nb::arg("weight_scale"),
        nb::arg("weight_global_scale"), nb::arg("dtype"), nb::kw_only(), nb::arg("rescale") = true,
        "NVFP4 weight-only Marlin (vLLM prepare_fp4_layer_for_marlin on tensors): weight uint8 [N, K/2], e4m3 "
        "scales [N, K/16], global scale -> (int32 4-bit Marlin of N padded to 64, S0E5M3 scale bytes [K/16, Np] as "
        "float8_e4m3fn, processed global scale, scale factor); rescale=False: older vLLM (factor 1).");
  m.def("marlin_mxfp4_prepare", &marlin_mxfp4_prepare, nb::arg("weight"), nb::arg("weight_scale"), nb::arg("dtype"),
        nb::kw_only(), nb::arg("is_a_8bit") = false,
        "MXFP4 weight-only Marlin: weight uint8 [N, K/2], E8M0 scale bytes [N, K/32] -> (int32 4-bit Marlin of N "
        "padded to 64, scale bytes [K/32, Np]); is_a_8bit: FP8 activations (no regroup, bytes + 6).");
}

}  // namespace qtl::py
