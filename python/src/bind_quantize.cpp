// quantize_weights, gptq_quantize_weights, permute_rows, sort_weights, convert_to_channelwise,
// all_close_1d (qtl/quantize.hpp), in the reference's signatures and return tuples:
//
//   quantize_weights(w [K,N], quant_type, group_size, zero_points=False,
//                    ref_zero_points_after_scales=False, *, threads=None) -> (w_ref, w_q, w_s | None, w_zp | None)
//       threads: column slices on that many threads (None: one per core); the bytes do not depend on it
//   gptq_quantize_weights(w, quant_type, group_size, act_order, test_perm=None)
//                    -> (w_ref, w_q, w_s, g_idx int32 [K] or [0], rand_perm int64 [K] or int32 [0])
//   permute_rows(q_w, w_ref, group_size, test_perm=None) -> (w_ref, q_w, g_idx, rand_perm)
//   sort_weights(q_w, g_idx) -> (q_w, g_idx, sort_indices)
//   convert_to_channelwise(weight_scale [S] or 0-dim, logical_widths) -> float32 [sum, 1]
//   all_close_1d(x [n]) -> bool
//   ct_pack_quantize(weight [N,K], num_bits, group_size, symmetric=True, *, allow_nonfinite=False,
//                    threads=None) -> (weight_packed int32 [N,K/pf], weight_scale [N,G] in the weight's
//                    dtype, zero_point int32 [N,G] (zp + 2^(bits-1), unpacked) | None)   (qtl/ct_quantize.hpp)
//       threads: row slices on that many threads (None: one per core); the bytes do not depend on it
//   gptq_checkpoint_quantize(weight [N,K], num_bits, group_size, symmetric=True, *, allow_nonfinite=False,
//                    threads=None) -> (qweight int32 [K/pf,N], scales float16 [K/gs,N], zeros int32 [K/gs,N])
//       (qtl/gptq_checkpoint.hpp; symmetric: the reference's rule, else GPTQ's own quantizer)
// Without test_perm, a permutation comes from qtl::random_permutation(seed), seed= keyword (None:
// drawn from std::random_device), where the reference calls torch.randperm.

#include <nanobind/stl/optional.h>

#include <array>
#include <random>

#include <qtl/ct_fp4.hpp>
#include <qtl/ct_mxfp8.hpp>
#include <qtl/ct_quantize.hpp>
#include <qtl/dispatch.hpp>
#include <qtl/fp8.hpp>
#include <qtl/fp8_checkpoint.hpp>
#include <qtl/gptq_checkpoint.hpp>
#include <qtl/group_size.hpp>
#include <qtl/parallel.hpp>
#include <qtl/quantize.hpp>

#include "bindings.hpp"

namespace qtl::py {
namespace {

template <class F>
void with_int_type(scalar_type t, F&& f) {
  qtl::dispatch_scalar_type<qtl::int4, qtl::uint4, qtl::int8, qtl::uint8, qtl::uint2b2, qtl::uint3b4, qtl::uint4b8,
                            qtl::uint8b128>(t, f);
}

/// Rows of the scale tensors: K / effective group size (-1 or >= K: one group; K = 0: none).
index_t group_rows(index_t k, index_t g) {
  if (k == 0) {
    return 0;
  }
  return qtl::is_channelwise_group_size(g, k) || g <= 0 ? 1 : k / g;
}

std::uint64_t seed_of(std::optional<std::uint64_t> seed) {
  if (seed) {
    return *seed;
  }
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
}

/// Columns per slice of a threaded quantize_weights: whole cache lines of every output, and enough
/// work per thread that starting it pays (64 Ki elements at least).
constexpr index_t column_align = 64;
constexpr index_t min_slice_elements = index_t{1} << 16;
index_t min_columns(index_t rows) { return rows > 0 ? (min_slice_elements + rows - 1) / rows : min_slice_elements; }

nb::object quantize_weights(nb::handle w_obj, nb::handle quant_type, std::optional<index_t> group_size,
                            bool zero_points, bool zp_after, std::optional<int> threads) {
  int const nthreads = thread_count(threads);
  array_in w = take(w_obj, "w", true);
  w.check_rank(2);
  scalar_type const q = scalar_type_of(quant_type, "quant_type");
  if (!q.is_integer()) {
    throw qtl::unsupported_error("qtl.quantize_weights: quant_type " + std::string(q.name().view()) +
                                 " is a floating-point type; integer types only (as the reference)");
  }
  qtl::quantize_options const opt{zero_points, zp_after};
  index_t const k = w.dim(0);
  index_t const n = w.dim(1);
  return with_float(w, [&]<class T>(std::type_identity<T>) -> nb::object {
    auto const wv = w.v2<T const>();
    array_out w_q(elem::i32, {k, n}, w);
    // the device kernels' arguments: the same outputs, whole
    auto const call = [&](array_out const& w_ref, array_out const* w_s, array_out const* w_zp, index_t g) {
      return device::quantize_call{q,
                                   device::float_type_of<T>(),
                                   w.nd.data(),
                                   k,
                                   n,
                                   group_size,
                                   g,
                                   w_ref.data<void>(),
                                   w_q.data<std::int32_t>(),
                                   w_s != nullptr ? w_s->data<void>() : nullptr,
                                   w_zp != nullptr ? w_zp->data<std::int32_t>() : nullptr,
                                   opt};
    };
    if (!group_size) {
      array_out w_ref(elem::f32, {k, n}, w);
      auto const host = [&] {
        with_int_type(q, [&]<scalar_type Q>(scalar_constant<Q>) {
          qtl::for_each_slice(n, column_align, min_columns(k), nthreads, [&](index_t lo, index_t hi) {
            qtl::quantize_weights<Q>(
                column_slice(wv, lo, hi), std::nullopt,
                qtl::quantize_outputs<float>{
                    column_slice(w_ref.v2<float>(), lo, hi), column_slice(w_q.v2<std::int32_t>(), lo, hi), {}, {}},
                opt);
          });
        });
      };
      run_on(w, "qtl.quantize_weights", host, [&](device::backend const& b, device::stream_t s) {
        return b.quantize_weights(call(w_ref, nullptr, nullptr, 0), s);
      });
      return nb::make_tuple(w_ref.release(w.from), w_q.release(w.from), nb::none(), nb::none());
    }
    index_t const g = group_rows(k, *group_size);
    array_out w_ref(elem_of<T>(), {k, n}, w);
    array_out w_s(elem_of<T>(), {g, n}, w);
    array_out w_zp(elem::i32, {zero_points ? g : 0, n}, w);
    auto const host = [&] {
      with_int_type(q, [&]<scalar_type Q>(scalar_constant<Q>) {
        qtl::for_each_slice(n, column_align, min_columns(k), nthreads, [&](index_t lo, index_t hi) {
          qtl::quantize_weights<Q>(
              column_slice(wv, lo, hi), *group_size,
              qtl::quantize_outputs<T>{column_slice(w_ref.v2<T>(), lo, hi),
                                       column_slice(w_q.v2<std::int32_t>(), lo, hi), column_slice(w_s.v2<T>(), lo, hi),
                                       column_slice(w_zp.v2<std::int32_t>(), lo, hi)},
              opt);
        });
      });
    };
    run_on(w, "qtl.quantize_weights", host, [&](device::backend const& b, device::stream_t s) {
      return b.quantize_weights(call(w_ref, &w_s, &w_zp, g), s);
    });
    nb::object zp = zero_points ? w_zp.release(w.from) : nb::none();
    return nb::make_tuple(w_ref.release(w.from), w_q.release(w.from), w_s.release(w.from), zp);
  });
}

/// The permutation argument: an int64 [K] array (the reference's test_perm), where `w` is.
array_in take_perm(nb::handle perm, char const* op, array_in const& w) {
  array_in p = take(perm, "test_perm", true);
  check_same_place(op, w, p);
  p.check_type({elem::i64});
  p.check_rank(1);
  return p;
}

/// `v` with no columns: the host function's checks on device arrays, which it never reads then.
template <class T>
view2d<T> no_columns(view2d<T> v) {
  v.extent[1] = 0;
  return v;
}

nb::object gptq_quantize_weights(nb::handle w_obj, nb::handle quant_type, index_t group_size, bool act_order,
                                 nb::handle test_perm, std::optional<std::uint64_t> seed) {
  char const* const op = "qtl.gptq_quantize_weights";
  array_in w = take(w_obj, "w", true);
  w.check_rank(2);
  scalar_type const q = scalar_type_of(quant_type, "quant_type");
  std::optional<array_in> perm;
  if (!test_perm.is_none()) {
    perm = take_perm(test_perm, op, w);
  }
  index_t const k = w.dim(0);
  index_t const n = w.dim(1);
  bool const dev = w.on_device();
  std::vector<std::int64_t> perm_copy;  // a device perm's host copy, checked by the host function
  qtl::gptq_options opt;
  opt.act_order = act_order;
  opt.seed = act_order && !perm ? seed_of(seed) : 0;
  if (perm && act_order) {
    if (dev) {
      perm_copy = host_copy<std::int64_t>(*perm);
      opt.perm = make_view(static_cast<std::int64_t const*>(perm_copy.data()), perm->dim(0));
    } else {
      opt.perm = perm->v1<std::int64_t const>();
    }
  }
  return with_float(w, [&]<class T>(std::type_identity<T>) -> nb::object {
    index_t const g = group_rows(k, group_size);
    index_t const kp = act_order ? k : 0;
    array_out w_ref(elem_of<T>(), {k, n}, w);
    array_out w_q(elem::i32, {k, n}, w);
    array_out w_s(elem_of<T>(), {g, n}, w);
    array_out g_idx(elem::i32, {kp}, w);
    // The reference's empty rand_perm is torch.int (int32); a permutation is int64.
    array_out rand_perm(act_order ? elem::i64 : elem::i32, {kp}, w);
    auto const host = [&](view2d<T const> wv, gptq_outputs<T> out) {
      qtl::dispatch_scalar_type<qtl::uint4b8, qtl::uint8b128>(
          q, [&]<scalar_type Q>(scalar_constant<Q>) { qtl::gptq_quantize_weights<Q>(wv, group_size, out, opt); });
    };
    std::int64_t none = 0;
    if (!dev) {
      nb::gil_scoped_release nogil;
      host(w.v2<T const>(), {w_ref.v2<T>(), w_q.v2<std::int32_t>(), w_s.v2<T>(), g_idx.v1<std::int32_t>(),
                             act_order ? rand_perm.v1<std::int64_t>() : make_view(&none, 0)});
    } else {
      // The host function's checks with no columns; its permutation (drawn or checked) is the kernel's.
      std::vector<std::int32_t> h_g_idx(static_cast<std::size_t>(kp));
      std::vector<std::int64_t> h_perm(static_cast<std::size_t>(kp));
      host(no_columns(w.v2<T const>()),
           {no_columns(w_ref.v2<T>()), no_columns(w_q.v2<std::int32_t>()), no_columns(w_s.v2<T>()),
            make_view(h_g_idx.data(), kp), act_order ? make_view(h_perm.data(), kp) : make_view(&none, 0)});
      if (act_order) {
        copy_to_device(w, rand_perm.data<void>(), h_perm.data(), h_perm.size() * sizeof(std::int64_t));
      }
      array_out scratch(elem::i32, {kp}, w);
      device::gptq_call const c{q,
                                device::float_type_of<T>(),
                                w.nd.data(),
                                k,
                                n,
                                group_size,
                                g,
                                w_ref.data<void>(),
                                w_q.data<std::int32_t>(),
                                w_s.data<void>(),
                                act_order ? rand_perm.data<std::int64_t>() : nullptr,
                                g_idx.data<std::int32_t>(),
                                rand_perm.data<std::int64_t>(),
                                scratch.data<std::int32_t>()};
      run_on(
          w, op, [] {}, [&](device::backend const& b, device::stream_t s) { return b.gptq_quantize_weights(c, s); });
    }
    return nb::make_tuple(w_ref.release(w.from), w_q.release(w.from), w_s.release(w.from), g_idx.release(w.from),
                          rand_perm.release(w.from));
  });
}

nb::object permute_rows(nb::handle q_obj, nb::handle r_obj, index_t group_size, nb::handle test_perm,
                        std::optional<std::uint64_t> seed) {
  char const* const op = "qtl.permute_rows";
  array_in q_w = take(q_obj, "q_w", true);
  array_in w_ref = take(r_obj, "w_ref", true);
  check_same_place(op, q_w, w_ref);
  q_w.check_type({elem::i32});
  q_w.check_rank(2);
  w_ref.check_rank(2);
  index_t const k = q_w.dim(0);
  index_t const n = q_w.dim(1);
  bool const dev = q_w.on_device();
  std::optional<array_in> perm;
  array_out rand_perm(elem::i64, {k}, q_w);
  std::vector<std::int64_t> h_perm;  // the device path's permutation on the host, for the host's checks
  if (!test_perm.is_none()) {
    perm = take_perm(test_perm, op, q_w);
    if (dev) {
      h_perm = host_copy<std::int64_t>(*perm);
    }
  } else if (dev) {
    h_perm.resize(static_cast<std::size_t>(k));
    qtl::random_permutation(seed_of(seed), make_view(h_perm.data(), k));
    copy_to_device(q_w, rand_perm.data<void>(), h_perm.data(), h_perm.size() * sizeof(std::int64_t));
  } else {
    qtl::random_permutation(seed_of(seed), rand_perm.v1<std::int64_t>());
  }
  return with_float(w_ref, [&]<class T>(std::type_identity<T>) -> nb::object {
    array_out r_out(elem_of<T>(), {k, n}, q_w);
    array_out q_out(elem::i32, {k, n}, q_w);
    array_out g_idx(elem::i32, {k}, q_w);
    if (!dev) {
      auto const pv = perm ? perm->v1<std::int64_t const>() : view1d<std::int64_t const>(rand_perm.v1<std::int64_t>());
      nb::gil_scoped_release nogil;
      qtl::permute_rows(q_w.v2<std::int32_t const>(), w_ref.v2<T const>(), group_size, pv,
                        qtl::permute_rows_outputs<T>{r_out.v2<T>(), q_out.v2<std::int32_t>(), g_idx.v1<std::int32_t>(),
                                                     rand_perm.v1<std::int64_t>()});
    } else {
      // The host function's checks with no columns (it writes only the host vectors).
      std::vector<std::int32_t> h_g(static_cast<std::size_t>(k));
      std::vector<std::int64_t> h_r(static_cast<std::size_t>(k));
      qtl::permute_rows(no_columns(q_w.v2<std::int32_t const>()), no_columns(w_ref.v2<T const>()), group_size,
                        make_view(static_cast<std::int64_t const*>(h_perm.data()), static_cast<index_t>(h_perm.size())),
                        qtl::permute_rows_outputs<T>{no_columns(r_out.v2<T>()), no_columns(q_out.v2<std::int32_t>()),
                                                     make_view(h_g.data(), k), make_view(h_r.data(), k)});
      std::int64_t const* pd =
          perm ? static_cast<std::int64_t const*>(perm->nd.data()) : rand_perm.data<std::int64_t>();
      run_on(
          q_w, op, [] {},
          [&](device::backend const& b, device::stream_t s) {
            return b.permute_rows(device::float_type_of<T>(), q_w.v2<std::int32_t const>(), w_ref.nd.data(), group_size,
                                  pd, q_out.v2<std::int32_t>(), r_out.data<void>(), g_idx.data<std::int32_t>(),
                                  rand_perm.data<std::int64_t>(), s);
          });
    }
    return nb::make_tuple(r_out.release(w_ref.from), q_out.release(w_ref.from), g_idx.release(w_ref.from),
                          rand_perm.release(w_ref.from));
  });
}

/// sort_weights' kernels: CUB's workspace size, the workspace, the sort.
void sort_weights_on_device(array_in const& q_w, array_in const& g_idx, array_out const& q_out, array_out const& g_out,
                            array_out const& order);

nb::object sort_weights(nb::handle q_obj, nb::handle g_obj) {
  char const* const op = "qtl.sort_weights";
  array_in q_w = take(q_obj, "q_w", true);
  array_in g_idx = take(g_obj, "g_idx", true);
  check_same_place(op, q_w, g_idx);
  q_w.check_type({elem::i32});
  g_idx.check_type({elem::i32});
  q_w.check_rank(2);
  g_idx.check_rank(1);
  index_t const k = q_w.dim(0);
  index_t const n = q_w.dim(1);
  array_out q_out(elem::i32, {k, n}, q_w);
  array_out g_out(elem::i32, {k}, q_w);
  array_out order(elem::i32, {k}, q_w);
  auto const host = [&] {
    qtl::sort_weights(
        q_w.v2<std::int32_t const>(), g_idx.v1<std::int32_t const>(),
        qtl::sort_weights_outputs{q_out.v2<std::int32_t>(), g_out.v1<std::int32_t>(), order.v1<std::int32_t>()});
  };
  if (!q_w.on_device()) {
    nb::gil_scoped_release nogil;
    host();
  } else {
    // the host function's shape check (the kernel reads K entries)
    qtl::detail::qnt::check_1d("qtl::sort_weights", "g_idx", g_idx.v1<std::int32_t const>(), k);
    sort_weights_on_device(q_w, g_idx, q_out, g_out, order);
  }
  return nb::make_tuple(q_out.release(q_w.from), g_out.release(q_w.from), order.release(q_w.from));
}

void sort_weights_on_device(array_in const& q_w, array_in const& g_idx, array_out const& q_out, array_out const& g_out,
                            array_out const& order) {
  char const* const op = "qtl.sort_weights";
  device::backend const& table = *device::get();
  std::size_t bytes = 0;
  auto const qv = q_w.v2<std::int32_t const>();
  auto const launch = [&](void* workspace, device::stream_t s) {
    return table.sort_weights(workspace, bytes, qv, g_idx.v1<std::int32_t const>().data, q_out.v2<std::int32_t>(),
                              g_out.data<std::int32_t>(), order.data<std::int32_t>(), s);
  };
  run_on(
      q_w, op, [] {}, [&](device::backend const&, device::stream_t s) { return launch(nullptr, s); });
  array_out workspace(elem::u8, {static_cast<index_t>(bytes)}, q_w);
  run_on(
      q_w, op, [] {}, [&](device::backend const&, device::stream_t s) { return launch(workspace.data<void>(), s); });
}

nb::object convert_to_channelwise(nb::handle s_obj, nb::handle widths_obj) {
  array_in s = take(s_obj, "weight_scale");
  s.check_type({elem::f32});
  auto const widths = int_list(widths_obj, "logical_widths");
  index_t total = 0;
  for (index_t w : widths) {
    total += w;
  }
  array_out out(elem::f32, {total < 0 ? 0 : total, 1});
  if (s.ndim() == 0) {
    float v = *static_cast<float const*>(s.nd.data());
    qtl::convert_to_channelwise(v, widths, out.v2<float>());
  } else {
    qtl::convert_to_channelwise(s.v1<float const>(), widths, out.v2<float>());
  }
  return out.release(s.from);
}

bool all_close_1d(nb::handle x_obj) {
  array_in x = take(x_obj, "x");
  x.check_rank(1);
  return with_float(x, [&]<class T>(std::type_identity<T>) { return qtl::all_close_1d(x.v1<T const>()); });
}

/// Rows [lo, hi) of a [rows, cols] view.
template <class T>
view2d<T> row_slice(view2d<T> v, index_t lo, index_t hi) {
  if (hi > lo) {
    v.data = &v(lo, 0);
  }
  v.extent[0] = hi - lo;
  return v;
}

/// Runs `launch(table, stream, flags)` on `w`'s device with N device ints zeroed first, and returns
/// them read back: the kernels' reports of what the host op refuses (a kernel cannot throw).
template <int N, class Launch>
std::array<int, N> run_with_flags(array_in const& w, char const* op, Launch&& launch) {
  array_out flags(elem::i32, {N}, w);
  std::array<int, N> h{};
  copy_to_device(w, flags.data<void>(), h.data(), sizeof h);
  run_on(
      w, op, [] {}, [&](device::backend const& b, device::stream_t s) { return launch(b, s, flags.data<int>()); });
  device::backend const& table = *device::get();
  if (int const err = table.copy_to_host(h.data(), flags.data<void>(), sizeof h, w.stream); err != 0) {
    throw qtl::error(std::string(op) + ": reading the kernel's checks failed: " + table.error_string(err));
  }
  return h;
}

/// The device path's refusal of a NaN or infinite weight, which the kernel reported in `flag` (the
/// host path names the first one), unless `allow_nonfinite`.
void refuse_nonfinite(int flag, bool allow_nonfinite, char const* op) {
  if (flag != 0 && !allow_nonfinite) {
    throw qtl::value_error(std::string(op) +
                           ": weight holds a NaN or infinite value (the host path names the first); "
                           "allow_nonfinite=True quantizes it as the host path does");
  }
}

nb::object ct_pack_quantize(nb::handle w_obj, int num_bits, index_t group_size, bool symmetric, bool allow_nonfinite,
                            std::optional<int> threads) {
  int const nthreads = thread_count(threads);
  array_in w = take(w_obj, "weight", true);
  w.check_rank(2);
  qtl::ct_pack_options opt;
  opt.bits = num_bits;
  opt.group_size = group_size;
  opt.symmetric = symmetric;
  opt.allow_nonfinite = allow_nonfinite;
  index_t const n = w.dim(0);
  index_t const k = w.dim(1);
  index_t const g = k / qtl::ct_pack_group_size(k, opt);  // checks the arguments first
  index_t const words = k / (32 / num_bits);
  return with_float(w, [&]<class T>(std::type_identity<T>) -> nb::object {
    array_out packed(elem::i32, {n, words}, w);
    array_out scales(elem_of<T>(), {n, g}, w);
    array_out zp(elem::i32, {symmetric ? 0 : n, g}, w);
    if (w.on_device()) {
      char const* const op = "qtl.ct_pack_quantize";
      auto const flags = run_with_flags<1>(w, op, [&](device::backend const& b, device::stream_t s, int* f) {
        return b.ct_pack_quantize(device::float_type_of<T>(), w.nd.data(), n, k, num_bits, group_size, symmetric,
                                  packed.data<std::int32_t>(), scales.data<void>(), zp.data<std::int32_t>(), f, s);
      });
      refuse_nonfinite(flags[0], allow_nonfinite, op);
    } else {
      auto const wv = w.v2<T const>();
      nb::gil_scoped_release nogil;
      qtl::for_each_slice(n, 1, min_columns(k), nthreads, [&](index_t lo, index_t hi) {
        qtl::ct_pack_options o = opt;
        o.first_row = lo;
        qtl::ct_pack_quantize(
            row_slice(wv, lo, hi),
            qtl::ct_pack_outputs<T>{row_slice(packed.v2<std::int32_t>(), lo, hi), row_slice(scales.v2<T>(), lo, hi),
                                    symmetric ? zp.v2<std::int32_t>() : row_slice(zp.v2<std::int32_t>(), lo, hi)},
            o);
      });
    }
    nb::object z = symmetric ? nb::none() : zp.release(w.from);
    return nb::make_tuple(packed.release(w.from), scales.release(w.from), z);
  });
}

/// GPTQ checkpoint tensors (qtl/gptq_checkpoint.hpp) of weight [N, K], rows split over the threads
/// (each writes its columns of the outputs): (qweight int32 [K/pf, N], scales float16 [K/gs, N],
/// zeros int32 [K/gs, N]).
nb::object gptq_checkpoint_quantize(nb::handle w_obj, int num_bits, index_t group_size, bool symmetric,
                                    bool allow_nonfinite, std::optional<int> threads) {
  int const nthreads = thread_count(threads);
  array_in w = take(w_obj, "weight", true);
  w.check_rank(2);
  qtl::gptq_checkpoint_options opt;
  opt.bits = num_bits;
  opt.group_size = group_size;
  opt.rule = symmetric ? qtl::gptq_rule::symmetric : qtl::gptq_rule::asymmetric;
  opt.allow_nonfinite = allow_nonfinite;
  index_t const n = w.dim(0);
  index_t const k = w.dim(1);
  index_t const words = num_bits == 4 || num_bits == 8 ? k / (32 / num_bits) : 0;
  index_t const g = group_size > 0 ? k / group_size : 0;
  return with_float(w, [&]<class T>(std::type_identity<T>) -> nb::object {
    array_out qweight(elem::i32, {words, n}, w);
    array_out scales(elem::f16, {g, n}, w);
    array_out zeros(elem::i32, {g, n}, w);
    if (w.on_device()) {
      // the host function's argument checks on no rows, then the kernel's reports
      auto const none = [](auto v) {
        v.extent[1] = 0;
        return v;
      };
      auto wv = w.v2<T const>();
      wv.extent[0] = 0;
      qtl::gptq_checkpoint_quantize(
          wv, {none(qweight.v2<std::int32_t>()), none(scales.v2<qtl::half_t>()), none(zeros.v2<std::int32_t>())}, opt);
      char const* const op = "qtl.gptq_checkpoint_quantize";
      auto const flags = run_with_flags<2>(w, op, [&](device::backend const& b, device::stream_t s, int* f) {
        return b.gptq_checkpoint_quantize(device::float_type_of<T>(), w.nd.data(), n, k, num_bits, group_size,
                                          symmetric, qweight.data<std::int32_t>(), scales.data<void>(),
                                          zeros.data<std::int32_t>(), f, s);
      });
      refuse_nonfinite(flags[0], allow_nonfinite, op);
      if (flags[1] != 0) {
        throw qtl::value_error(std::string(op) +
                               ": a group's GPTQ scale does not fit float16 (the host path names the row and columns)");
      }
    } else {
      auto const wv = w.v2<T const>();
      nb::gil_scoped_release nogil;
      qtl::for_each_slice(n, 1, min_columns(k), nthreads, [&](index_t lo, index_t hi) {
        qtl::gptq_checkpoint_options o = opt;
        o.first_row = lo;
        qtl::gptq_checkpoint_quantize(
            row_slice(wv, lo, hi),
            {qtl::column_slice(qweight.v2<std::int32_t>(), lo, hi), qtl::column_slice(scales.v2<qtl::half_t>(), lo, hi),
             qtl::column_slice(zeros.v2<std::int32_t>(), lo, hi)},
            o);
      });
    }
    return nb::make_tuple(qweight.release(w.from), scales.release(w.from), zeros.release(w.from));
  });
}

/// FP8 checkpoint codes and F32 scales (qtl/fp8_checkpoint.hpp) of weight [N, K] by scheme ("tensor",
/// "channel", "block") and block rule ("hf", "ct"); block rows split over the threads (the tensor
/// scheme's amax taken once first): (codes float8_e4m3fn [N, K], scales float32 [count]).
nb::object fp8_checkpoint_quantize(nb::handle w_obj, std::string const& scheme, std::string const& rule,
                                   bool allow_nonfinite, std::optional<int> threads) {
  int const nthreads = thread_count(threads);
  array_in w = take(w_obj, "weight", true);
  w.check_rank(2);
  qtl::fp8_checkpoint_options opt;
  if (scheme != "tensor" && scheme != "channel" && scheme != "block") {
    throw qtl::value_error("scheme '" + scheme + "' is not 'tensor', 'channel' or 'block'");
  }
  if (rule != "hf" && rule != "ct") {
    throw qtl::value_error("rule '" + rule + "' is not 'hf' (Hugging Face fp8) or 'ct' (compressed-tensors)");
  }
  opt.scheme = scheme == "tensor"    ? qtl::fp8_checkpoint_scheme::tensor
               : scheme == "channel" ? qtl::fp8_checkpoint_scheme::channel
                                     : qtl::fp8_checkpoint_scheme::block;
  opt.rule = rule == "ct" ? qtl::fp8_block_rule::compressed_tensors : qtl::fp8_block_rule::hf;
  opt.allow_nonfinite = allow_nonfinite;
  index_t const n = w.dim(0);
  index_t const k = w.dim(1);
  index_t const count = qtl::fp8_checkpoint_scale_count(n, k, opt);
  return with_float(w, [&]<class T>(std::type_identity<T>) -> nb::object {
    array_out codes(elem::fp8_e4m3, {n, k}, w);
    array_out scales(elem::f32, {count}, w);
    if (w.on_device()) {
      char const* const op = "qtl.fp8_checkpoint_quantize";
      auto const first = run_with_first(w, op, 1, [&](auto const& b, auto st, auto* f) {
        return b.fp8_checkpoint_quantize(device::float_type_of<T>(), w.nd.data(), n, k, opt, codes.data<std::uint8_t>(),
                                         scales.data<float>(), allow_nonfinite ? nullptr : f, st);
      });
      if (first[0] != ~0ull) {  // the host op's refusal of that weight, in its words
        auto const at = static_cast<index_t>(first[0]);
        T v{};
        read_back(w, static_cast<std::size_t>(at) * sizeof v, &v, sizeof v);
        qtl::detail::ct::refuse_nonfinite(&v, 1, at / k, at % k,
                                          opt.scheme == qtl::fp8_checkpoint_scheme::tensor    ? "tensor"
                                          : opt.scheme == qtl::fp8_checkpoint_scheme::channel ? "row"
                                                                                              : "block");
      }
    } else {
      auto const wv = w.v2<T const>();
      nb::gil_scoped_release nogil;
      if (opt.scheme == qtl::fp8_checkpoint_scheme::tensor) {
        opt.tensor_amax = qtl::fp8_checkpoint_amax(wv, allow_nonfinite);  // once, for every slice
      }
      bool const block = opt.scheme == qtl::fp8_checkpoint_scheme::block;
      index_t const align = block ? opt.block_n : 1;
      index_t const per_band = block ? (k + opt.block_k - 1) / opt.block_k : 1;
      std::span<float> const all(scales.data<float>(), static_cast<std::size_t>(count));
      qtl::for_each_slice(n, align, std::max(align, min_columns(k)), nthreads, [&](index_t r0, index_t r1) {
        qtl::fp8_checkpoint_options o = opt;
        o.first_row = r0;
        float tensor_scale = 0.0f;  // every slice computes the tensor scheme's one scale; the first keeps it
        std::span<float> s = all;
        if (opt.scheme == qtl::fp8_checkpoint_scheme::tensor && r0 != 0) {
          s = std::span<float>(&tensor_scale, 1);
        } else if (opt.scheme == qtl::fp8_checkpoint_scheme::channel) {
          s = all.subspan(static_cast<std::size_t>(r0), static_cast<std::size_t>(r1 - r0));
        } else if (block) {
          s = all.subspan(static_cast<std::size_t>(r0 / align * per_band),
                          static_cast<std::size_t>((r1 - r0 + align - 1) / align * per_band));
        }
        qtl::fp8_checkpoint_quantize(row_slice(wv, r0, r1), row_slice(codes.v2<qtl::float8_e4m3fn_t>(), r0, r1), s, o);
      });
    }
    return nb::make_tuple(codes.release(w.from), scales.release(w.from));
  });
}

/// The 2-D weight of a block op, its K a multiple of `block`. @throws shape_error
array_in block_weight(nb::handle w_obj, index_t block, bool device_ok = false) {
  array_in w = take(w_obj, "weight", device_ok);
  w.check_rank(2);
  if (w.dim(1) % block != 0) {
    throw qtl::shape_error("weight: K = " + std::to_string(w.dim(1)) + " (shape " + w.shape() +
                           ") is not a multiple of the block size " + std::to_string(block));
  }
  return w;
}

/// compressed-tensors nvfp4-/mxfp4-pack-quantized (qtl/ct_fp4.hpp) of weight [N, K], rows split
/// over the threads: (packed, scales[, global_scale [1]]).
template <class F>
nb::object ct_fp4_quantize(nb::handle w_obj, std::optional<float> given_gs, bool allow_nonfinite,
                           std::optional<int> threads) {
  int const nthreads = thread_count(threads);
  array_in w = block_weight(w_obj, F::block_size, true);
  index_t const n = w.dim(0);
  index_t const k = w.dim(1);
  index_t const kb = k / F::block_size;
  using S = typename F::scale;
  return with_float(w, [&]<class T>(std::type_identity<T>) -> nb::object {
    array_out packed(elem::u8, {n, k / 2}, w);
    array_out scales(F::has_global_scale ? elem::fp8_e4m3 : elem::u8, {n, kb}, w);
    float gs = 1.0f;
    if (w.on_device()) {
      char const* const op = F::has_global_scale ? "qtl.ct_nvfp4_quantize" : "qtl.ct_mxfp4_quantize";
      device::backend const& table = *device::get();
      if constexpr (F::has_global_scale) {
        if (given_gs) {
          gs = *given_gs;
        } else {  // the amax on the device, the global scale from it on the host (the kernel takes a value)
          array_out amax(elem::f32, {}, w);
          run_on(
              w, op, [] {},
              [&](device::backend const& b, device::stream_t s) {
                return b.amax(device::float_type_of<T>(), w.nd.data(), n, k, amax.data<float>(), s);
              });
          float a = 0.0f;
          if (int const err = table.copy_to_host(&a, amax.data<void>(), sizeof a, w.stream); err != 0) {
            throw qtl::error(std::string(op) + ": reading the amax failed: " + table.error_string(err));
          }
          gs = qtl::ct_nvfp4_global_scale(a);
        }
        qtl::detail::check_global_scale("qtl::block_quantize", gs);
      }
      auto const flags = run_with_flags<1>(w, op, [&](device::backend const& b, device::stream_t s, int* f) {
        return b.ct_block_quantize(F::has_global_scale ? device::block_format::nvfp4 : device::block_format::mxfp4,
                                   device::float_type_of<T>(), w.nd.data(), n, k, gs, packed.data<std::uint8_t>(),
                                   scales.data<std::uint8_t>(), f, s);
      });
      refuse_nonfinite(flags[0], allow_nonfinite, op);
    } else {
      auto const wv = w.v2<T const>();
      nb::gil_scoped_release nogil;
      if constexpr (F::has_global_scale) {
        gs = given_gs ? *given_gs : qtl::ct_nvfp4_global_scale(qtl::fp8_amax(wv));
      }
      qtl::for_each_slice(n, 1, min_columns(k), nthreads, [&](index_t lo, index_t hi) {
        auto const values = make_view(packed.data<float4_e2m1x2_t>() + lo * (k / 2), hi - lo, k / 2);
        auto const block_scales = make_view(scales.data<S>() + lo * kb, hi - lo, kb);
        if constexpr (F::has_global_scale) {
          qtl::ct_nvfp4_quantize(row_slice(wv, lo, hi), gs, values, block_scales);
        } else {
          qtl::ct_mxfp4_quantize(row_slice(wv, lo, hi), values, block_scales, {allow_nonfinite, lo});
        }
      });
    }
    if constexpr (F::has_global_scale) {
      array_out g(elem::f32, {1}, w);
      if (w.on_device()) {
        copy_to_device(w, g.data<void>(), &gs, sizeof gs);
      } else {
        g.data<float>()[0] = gs;
      }
      return nb::make_tuple(packed.release(w.from), scales.release(w.from), g.release(w.from));
    } else {
      return nb::make_tuple(packed.release(w.from), scales.release(w.from));
    }
  });
}

nb::object ct_nvfp4_quantize(nb::handle w, std::optional<float> global_scale, std::optional<int> threads) {
  return ct_fp4_quantize<qtl::nvfp4>(w, global_scale, false, threads);
}
nb::object ct_mxfp4_quantize(nb::handle w, bool allow_nonfinite, std::optional<int> threads) {
  return ct_fp4_quantize<qtl::mxfp4>(w, std::nullopt, allow_nonfinite, threads);
}

/// qtl::ct_mxfp8_quantize: (weight E4M3 [N, K], weight_scale U8 [N, K/32]), rows in slices.
nb::object ct_mxfp8_quantize(nb::handle w_obj, bool allow_nonfinite, std::optional<int> threads) {
  int const nthreads = thread_count(threads);
  array_in w = block_weight(w_obj, qtl::ct_mxfp8_block, true);
  index_t const n = w.dim(0);
  index_t const k = w.dim(1);
  index_t const kb = k / qtl::ct_mxfp8_block;
  return with_float(w, [&]<class T>(std::type_identity<T>) -> nb::object {
    array_out codes(elem::fp8_e4m3, {n, k}, w);
    array_out scales(elem::u8, {n, kb}, w);
    if (w.on_device()) {
      char const* const op = "qtl.ct_mxfp8_quantize";
      auto const flags = run_with_flags<1>(w, op, [&](device::backend const& b, device::stream_t s, int* f) {
        return b.ct_block_quantize(device::block_format::mxfp8, device::float_type_of<T>(), w.nd.data(), n, k, 1.0f,
                                   codes.data<std::uint8_t>(), scales.data<std::uint8_t>(), f, s);
      });
      refuse_nonfinite(flags[0], allow_nonfinite, op);
    } else {
      auto const wv = w.v2<T const>();
      nb::gil_scoped_release nogil;
      qtl::for_each_slice(n, 1, min_columns(k), nthreads, [&](index_t lo, index_t hi) {
        qtl::ct_mxfp8_quantize(row_slice(wv, lo, hi), make_view(codes.data<float8_e4m3fn_t>() + lo * k, hi - lo, k),
                               make_view(scales.data<float8_e8m0fnu_t>() + lo * kb, hi - lo, kb),
                               {allow_nonfinite, lo});
      });
    }
    return nb::make_tuple(codes.release(w.from), scales.release(w.from));
  });
}

}  // namespace

void bind_quantize(nb::module_& m) {
  m.def("quantize_weights", &quantize_weights, nb::arg("w"), nb::arg("quant_type"), nb::arg("group_size").none(),
        nb::arg("zero_points") = false, nb::arg("ref_zero_points_after_scales") = false, nb::kw_only(),
        nb::arg("threads").none() = nb::none());
  m.def("gptq_quantize_weights", &gptq_quantize_weights, nb::arg("w"), nb::arg("quant_type"), nb::arg("group_size"),
        nb::arg("act_order"), nb::arg("test_perm").none() = nb::none(), nb::kw_only(),
        nb::arg("seed").none() = nb::none());
  m.def("permute_rows", &permute_rows, nb::arg("q_w"), nb::arg("w_ref"), nb::arg("group_size"),
        nb::arg("test_perm").none() = nb::none(), nb::kw_only(), nb::arg("seed").none() = nb::none());
  m.def("sort_weights", &sort_weights, nb::arg("q_w"), nb::arg("g_idx"));
  m.def("convert_to_channelwise", &convert_to_channelwise, nb::arg("weight_scale"), nb::arg("logical_widths"));
  m.def("all_close_1d", &all_close_1d, nb::arg("x"));
  m.def("ct_pack_quantize", &ct_pack_quantize, nb::arg("weight"), nb::arg("num_bits"), nb::arg("group_size"),
        nb::arg("symmetric") = true, nb::kw_only(), nb::arg("allow_nonfinite") = false,
        nb::arg("threads").none() = nb::none());
  m.def("fp8_checkpoint_quantize", &fp8_checkpoint_quantize, nb::arg("weight"), nb::arg("scheme") = "block",
        nb::arg("rule") = "hf", nb::kw_only(), nb::arg("allow_nonfinite") = false,
        nb::arg("threads").none() = nb::none());
  m.def("gptq_checkpoint_quantize", &gptq_checkpoint_quantize, nb::arg("weight"), nb::arg("num_bits"),
        nb::arg("group_size"), nb::arg("symmetric") = true, nb::kw_only(), nb::arg("allow_nonfinite") = false,
        nb::arg("threads").none() = nb::none());
  m.def("ct_nvfp4_quantize", &ct_nvfp4_quantize, nb::arg("weight"), nb::arg("global_scale").none() = nb::none(),
        nb::kw_only(), nb::arg("threads").none() = nb::none());
  m.def("ct_mxfp4_quantize", &ct_mxfp4_quantize, nb::arg("weight"), nb::kw_only(), nb::arg("allow_nonfinite") = false,
        nb::arg("threads").none() = nb::none());
  m.def("ct_mxfp8_quantize", &ct_mxfp8_quantize, nb::arg("weight"), nb::kw_only(), nb::arg("allow_nonfinite") = false,
        nb::arg("threads").none() = nb::none());
}

}  // namespace qtl::py
