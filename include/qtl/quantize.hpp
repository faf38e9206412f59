#pragma once
/// \file
/// Group quantization of float weights to integer codes, bit for bit as the reference Python
/// (`quantize_weights`, `gptq_quantize_weights`, `permute_rows`, `sort_weights`,
/// `per_tensor_dequantize`, `convert_to_channelwise`, `all_close_1d` of sglang's
/// `quantization/utils.py`; `docs/spec/semantics.md` §4 is the spec).
///
/// Shapes (torch's, row-major): the weight `w` is (K, N), K the reduction dimension. A group is
/// `G` consecutive rows of one column; group `g` of column `n` is rows [g·G, g·G + G):
///
///        n →                         w_s, w_zp: (K/G, N)
///   k  ┌───────────┐  group 0        ┌───────────┐
///   ↓  │ G rows    │ ───────────────▶│ s[0][n]   │
///      ├───────────┤  group 1        │ s[1][n]   │
///      │ G rows    │ ───────────────▶│ ...       │
///      └───────────┘                 └───────────┘
///
/// **Numerics**: the element functions of `qtl/element/quantize.hpp` (the formulas are in its
/// file comment); this header runs them over (K, N) weights and checks the arguments.
///
/// **Where the reference is undefined or device-dependent, QTL defines** (and tests):
///  - `int(x)` of NaN is 0 and out-of-range values saturate, as CUDA's conversion (CPU torch gives
///    INT_MIN for NaN), and `+ zp` saturates instead of wrapping. Consequences: an all-zero
///    symmetric group (s = 0, 0/0 = NaN) quantizes to code 0 + bias with w_ref = +0 and s = 0;
///    a NaN in a group makes that group's s and w_ref NaN and its codes 0 + bias (zp 0);
///    ±Inf makes s = Inf, the codes of the finite weights 0 + bias and w_ref NaN (0 · Inf).
///  - A group size that is ≥ K (or -1) means one group per column (the reference does the same);
///    a positive group size below K that does not divide K throws `qtl::shape_error` (the
///    reference crashes in a reshape). K = 0 throws `qtl::shape_error` (torch cannot reduce it).
///  - `gptq_quantize_weights` with act-order and channelwise groups throws (the reference returns
///    nonsense for -1); `sort_weights` is stable (torch's argsort is not).
///
/// **Host executors.** Grouped quantization runs two passes per group and column tile: max/min
/// down the rows, then codes and reference values; the next tile is prefetched into L2 during
/// pass 2 (on the x86 executor its pass 1 is folded there too, a row at a time). The portable
/// loops vectorise with SSE2; on x86-64 CPUs with AVX2 and F16C (checked once at run time) fp16
/// and bf16 weights take the x86 executor of `qtl/x86/quantize.hpp` (`grouped_x86`, chosen in
/// `quantize_grouped_host`), which folds max/min on the
/// raw 16-bit codes, computes scales 8 columns at a time, and runs pass 2 with one vector
/// instruction per float operation and hardware fp16 conversions, or, on tiles free of NaN,
/// zero and infinite scales (almost all of a real checkpoint), with a kernel that needs no NaN
/// handling (16 columns per instruction where the CPU has AVX-512 F/BW/VL) and writes outputs
/// beyond `stream_output_bytes` with non-temporal stores. All give the same bits
/// (test/unit/quantize_x86_test.cpp compares them, also compiled with FMA and contraction).

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <qtl/element/quantize.hpp>
#include <qtl/error.hpp>
#include <qtl/exact.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/scalar_type.hpp>
#include <qtl/view.hpp>
#include <qtl/x86/quantize.hpp>

namespace qtl {

namespace detail::qnt {

/// The portable steps of the tile loop: each returns "not done" (or 0 columns), so the loop runs
/// its own portable code. An executor (`grouped_x86` of qtl/x86/quantize.hpp) has the same
/// members and does the steps it can.
struct grouped_portable {
  static constexpr bool pipeline = false;  // no folding of the next tile's pass 1
  template <class T>
  bool pass1(T const*, index_t, index_t, index_t, float*, float*) {
    return false;
  }
  template <class T>
  index_t scales(float const*, float const*, index_t, quant_range, bool, float*, float*, T*, std::int32_t*) {
    return 0;
  }
  void prepare(index_t, quant_range, float const*, float const*, float const*, std::uint32_t) {}
  template <class T>
  void fold(T const*, index_t, index_t, index_t, index_t) {}
  template <bool After, class T>
  bool row(T const*, float const*, float const*, index_t, quant_range, std::uint32_t, std::int32_t*, T*) {
    return false;
  }
  void end_tile(bool) {}
  void finish() {}
};

/// The tile loop of grouped quantization: one group (gs rows) × one column tile at a time, so the
/// tile is still in L2 when pass 2 reads it again; while pass 2 runs, the next tile's rows are
/// prefetched into L2 (or, by an executor with `pipeline`, folded into its pass 1 there), so that
/// pass 1 of that tile does not wait for memory. Tiles too tall for L2 (channelwise) are read
/// twice from memory, each pass asking for the rows a few ahead. `exec` does the steps it can
/// (see `grouped_portable`); `row_out[r]` (optional) is the output row of input row r (act-order
/// writes permuted rows).
template <class T, int G, bool SmallCodes, class Exec>
void quantize_grouped_loop(Exec& exec, view2d<T const> w, index_t gs, quant_range r, quantize_options opt,
                           quantize_outputs<T> out, std::int32_t const* row_out) {
  constexpr int block = 16;
  index_t const k = w.extent[0];
  index_t const n = w.extent[1];
  if constexpr (G > 0) {
    gs = G <= k ? G : k;  // a fixed size lets the compiler see the row loop bounds
  }
  std::uint32_t const opaque = opaque_zero();
  index_t const tc = tile_cols(gs, sizeof(T));
  bool const prefetch = tc < max_tile_cols;  // see tile_cols
  alignas(64) float mx[max_tile_cols];
  alignas(64) float mn[max_tile_cols];
  alignas(64) float sc[max_tile_cols];
  alignas(64) float zp[max_tile_cols];
  bool const after = opt.zero_points && opt.ref_zero_points_after_scales;
  for (index_t g = 0; g < k / gs; ++g) {
    index_t const r0 = g * gs;
    for (index_t c0 = 0; c0 < n; c0 += tc) {
      index_t const cn = std::min(tc, n - c0);
      // The next tile, when tiles fit in L2: the next columns of this group, or the first of the
      // next group.
      T const* const next = !prefetch   ? nullptr
                            : c0 + cn < n ? w.data + r0 * w.stride[0] + c0 + cn
                            : r0 + gs < k ? w.data + (r0 + gs) * w.stride[0]
                                          : nullptr;
      // Pass 1: NaN-propagating max/min down the group's rows.
      if (!exec.pass1(w.data + r0 * w.stride[0] + c0, w.stride[0], gs, cn, mx, mn)) {
        T const* row = w.data + r0 * w.stride[0] + c0;
        for (index_t j = 0; j < cn; ++j) {
          mx[j] = load<T>(row[j]);
          mn[j] = mx[j];
        }
        for (index_t i = 1; i < gs; ++i) {
          row = w.data + (r0 + i) * w.stride[0] + c0;
          index_t j = 0;
          for (; j + block <= cn; j += block) {
            minmax_block<T, block>(row + j, mx + j, mn + j);
          }
          for (; j < cn; ++j) {
            minmax_block<T, 1>(row + j, mx + j, mn + j);
          }
        }
      }
      // Scales (and zero points) of this group's columns; the executor does the first j0.
      T* s_out = out.w_s.data + g * out.w_s.stride[0] + c0;
      std::int32_t* zp_out = opt.zero_points ? out.w_zp.data + g * out.w_zp.stride[0] + c0 : nullptr;
      index_t const j0 = exec.scales(mx, mn, cn, r, opt.zero_points, sc, zp, s_out, zp_out);
      if (opt.zero_points) {
        for (index_t j = j0; j < cn; ++j) {
          group_params const p = asymmetric_scale<T>(mx[j], mn[j], r);
          sc[j] = p.s;
          zp[j] = p.zp;
          s_out[j] = store<T>(p.s);
          zp_out[j] = static_cast<std::int32_t>(p.zp);
        }
      } else {
        for (index_t j = j0; j < cn; ++j) {
          group_params const p = symmetric_scale<T>(mx[j], mn[j], r);
          sc[j] = p.s;
          zp[j] = 0.0f;
          s_out[j] = store<T>(p.s);
        }
      }
      exec.prepare(cn, r, sc, zp, mx, opaque);
      index_t const next_cn = c0 + cn < n ? std::min(tc, n - c0 - cn) : std::min(tc, n);
      bool const fold = exec.pipeline && next != nullptr;
      // Pass 2: codes and reference values.
      for (index_t i = 0; i < gs; ++i) {
        index_t const ri = r0 + i;
        index_t const ro = row_out ? row_out[ri] : ri;
        T const* in = w.data + ri * w.stride[0] + c0;
        std::int32_t* q_out = out.w_q.data + ro * out.w_q.stride[0] + c0;
        T* ref_out = out.w_ref.data + ro * out.w_ref.stride[0] + c0;
        if (fold) {
          exec.fold(next, w.stride[0], i, gs, next_cn);
        } else if (next != nullptr) {
          prefetch_row(next + i * w.stride[0], cn);  // the next tile is about as wide as this one
        } else if (i + 4 < gs) {
          prefetch_row(in + 4 * w.stride[0], cn);  // a tall tile, read again from memory: 4 rows ahead
        }
        if (after) {
          if (!exec.template row<true>(in, sc, zp, cn, r, opaque, q_out, ref_out)) {
            quantize_row<T, SmallCodes, true>(in, sc, zp, cn, r, opaque, q_out, ref_out);
          }
        } else if (!exec.template row<false>(in, sc, zp, cn, r, opaque, q_out, ref_out)) {
          quantize_row<T, SmallCodes, false>(in, sc, zp, cn, r, opaque, q_out, ref_out);
        }
      }
      if (fold) {
        exec.fold(next, w.stride[0], gs, gs, next_cn);
      }
      exec.end_tile(fold);
    }
  }
  exec.finish();
}

/// Host executor of grouped quantization: the tile loop with the executor chosen here, the one
/// place that chooses (fp16/bf16 weights take the x86 executor where the CPU has AVX2 and F16C
/// and `qtl::x86::level_cap()` allows it; everything else the portable steps; the same bits).
template <class T, int G, bool SmallCodes>
void quantize_grouped_host(view2d<T const> w, index_t gs, quant_range r, quantize_options opt,
                           quantize_outputs<T> out, std::int32_t const* row_out) {
#if QTL_X86
  if constexpr (grouped_x86<T, SmallCodes>::takes) {
    if (grouped_x86<T, SmallCodes>::available()) {
      index_t const rows = G > 0 ? std::min<index_t>(G, w.extent[0]) : gs;  // as the loop's gs
      grouped_x86<T, SmallCodes> exec(w.extent[0], w.extent[1], tile_cols(rows, sizeof(T)) < max_tile_cols);
      quantize_grouped_loop<T, G, SmallCodes>(exec, w, gs, r, opt, out, row_out);
      return;
    }
  }
#endif  // ^^^ QTL_X86 ^^^
  grouped_portable exec;
  quantize_grouped_loop<T, G, SmallCodes>(exec, w, gs, r, opt, out, row_out);
}

/// Host executor of ungrouped quantization (`group_size=None`).
template <class T>
void quantize_ungrouped_host(view2d<T const> w, quant_range r, view2d<float> w_ref, view2d<std::int32_t> w_q) {
  float const bias = static_cast<float>(r.bias);
  for (index_t i = 0; i < w.extent[0]; ++i) {
    T const* in = w.data + i * w.stride[0];
    float* ref_out = w_ref.data + i * w_ref.stride[0];
    std::int32_t* q_out = w_q.data + i * w_q.stride[0];
    for (index_t j = 0; j < w.extent[1]; ++j) {
      float const q = quantize_code_ungrouped(load<T>(in[j]), r);
      ref_out[j] = round_to<T>(q);  // (w_q - 0).to(T) * float32 [1.0]
      q_out[j] = static_cast<std::int32_t>(q + bias);
    }
  }
}

/// Runs the grouped or ungrouped executor after every argument check.
template <scalar_type Q, int G, class T, class R>
void quantize_weights_impl(view2d<T const> w, index_t group_size, bool ungrouped, quantize_outputs<R> out,
                           quantize_options opt, std::int32_t const* row_out) {
  constexpr char const* fn = "qtl::quantize_weights";
  constexpr quant_range r = quant_range_of(Q);
  index_t const k = w.extent[0];
  index_t const n = w.extent[1];
  check_2d(fn, "w", w, k, n);
  if (k <= 0) {
    throw shape_error(std::string(fn) + ": w has no rows (K = " + std::to_string(k) + ")");
  }
  if (opt.zero_points && (Q.is_signed || Q.max_int() <= 0)) {
    throw value_error(std::string(fn) + ": zero points need an unsigned type with a positive max; " +
                      std::string(Q.name().c_str()) + " is not");
  }
  if (ungrouped) {
    if (opt.zero_points) {
      throw value_error(std::string(fn) + ": zero points need a group size (-1 is channelwise)");
    }
    if constexpr (std::is_same_v<R, float>) {
      check_2d(fn, "w_ref", out.w_ref, k, n);
      check_2d(fn, "w_q", out.w_q, k, n);
      quantize_ungrouped_host<T>(w, r, out.w_ref, out.w_q);
    } else {
      throw value_error(std::string(fn) + ": without groups w_ref is float32 (torch promotes); pass float outputs");
    }
    return;
  }
  if constexpr (!std::is_same_v<R, T>) {
    throw value_error(std::string(fn) + ": with groups w_ref and w_s have the weight's dtype");
  } else {
    index_t const gs = effective_group_size(fn, group_size, k);
    check_2d(fn, "w_ref", out.w_ref, k, n);
    check_2d(fn, "w_q", out.w_q, k, n);
    check_2d(fn, "w_s", out.w_s, k / gs, n);
    if (opt.zero_points) {
      check_2d(fn, "w_zp", out.w_zp, k / gs, n);
    }
    quantize_grouped_host<T, G, (Q.size_bits() <= 8)>(w, gs, r, opt, out, row_out);
  }
}

}  // namespace detail::qnt

// ------------------------------------------------------------------------------------------------
// quantize_weights

/// Quantizes `w` (K, N) to `Q` with a compile-time group size `G` (32, 64, 128, any positive
/// size, `group_channelwise`, `group_none`) into caller-owned outputs, bit for bit as the
/// reference (see the file comment for the numerics and the defined edge cases).
/// `R` is T, or float when G is `group_none`.
/// @throws shape_error for output shapes, a G < K that does not divide K, K = 0;
///         value_error for zero points with a signed type or without groups.
template <scalar_type Q, int G, class W, class R>
void quantize_weights(view2d<W> w, quantize_outputs<R> out, quantize_options opt = {}) {
  using T = std::remove_const_t<W>;
  detail::qnt::check_quant_type<Q>();
  static_assert(weight_float<T>, "qtl::quantize_weights: w must be float, half_t or bfloat16_t");
  static_assert(is_valid_group_size_param(G) && G != group_dynamic,
                "qtl::quantize_weights: G must be positive, group_channelwise or group_none; "
                "pass a run-time group size to the overload that takes one");
  static_assert(std::is_same_v<R, std::conditional_t<G == group_none, float, T>>,
                "qtl::quantize_weights: outputs are of the weight's dtype, float32 when G is group_none");
  detail::qnt::quantize_weights_impl<Q, G>(detail::qnt::as_const(w), G, G == group_none, out, opt, nullptr);
}

/// As above with a run-time group size, the reference's `Optional[int]`: nullopt is None, -1 is
/// channelwise. 32, 64 and 128 run their compile-time instantiations, any other size (channelwise
/// included: K is a run-time value anyway) the run-time one.
template <scalar_type Q, class W, class R>
void quantize_weights(view2d<W> w, std::optional<index_t> group_size, quantize_outputs<R> out,
                      quantize_options opt = {}) {
  using T = std::remove_const_t<W>;
  detail::qnt::check_quant_type<Q>();
  static_assert(weight_float<T>, "qtl::quantize_weights: w must be float, half_t or bfloat16_t");
  auto const v = detail::qnt::as_const(w);
  if (!group_size) {
    detail::qnt::quantize_weights_impl<Q, group_none>(v, 0, true, out, opt, nullptr);
    return;
  }
  index_t const k = v.extent[0];
  index_t const g = *group_size;
  switch (is_channelwise_group_size(g, k) ? -1 : g) {
    case 32: detail::qnt::quantize_weights_impl<Q, 32>(v, g, false, out, opt, nullptr); break;
    case 64: detail::qnt::quantize_weights_impl<Q, 64>(v, g, false, out, opt, nullptr); break;
    case 128: detail::qnt::quantize_weights_impl<Q, 128>(v, g, false, out, opt, nullptr); break;
    default: detail::qnt::quantize_weights_impl<Q, group_dynamic>(v, g, false, out, opt, nullptr); break;
  }
}

/// Allocating form: returns w_ref, w_q, w_s (empty when G is group_none), w_zp (empty without
/// zero points), shaped as the reference returns them.
template <scalar_type Q, int G, class W>
auto quantize_weights(view2d<W> w, quantize_options opt = {}) {
  using T = std::remove_const_t<W>;
  using R = std::conditional_t<G == group_none, float, T>;
  index_t const k = w.extent[0];
  index_t const n = w.extent[1];
  index_t const gs = G == group_none ? k : detail::qnt::effective_group_size("qtl::quantize_weights", G, k);
  quantized_weights<R> res{host_tensor<R, 2>({k, n}), host_tensor<std::int32_t, 2>({k, n}),
                           host_tensor<R, 2>({G == group_none ? 0 : k / gs, n}),
                           host_tensor<std::int32_t, 2>({opt.zero_points ? k / gs : 0, n})};
  quantize_weights<Q, G>(w, res.views(), opt);
  return res;
}

// ------------------------------------------------------------------------------------------------
// Act-order: permute_rows, sort_weights, gptq_quantize_weights

/// A uniformly shuffled permutation of [0, K) from `seed`, written to `perm`: Fisher–Yates from
/// the last element down, j = ⌊u · (i + 1) / 2^64⌋ with u the next output of SplitMix64
/// (state += 0x9E3779B97F4A7C15, then the usual mix). Deterministic across platforms; it is not
/// torch.randperm's sequence, so golden cases pass their permutation explicitly.
inline void random_permutation(std::uint64_t seed, view1d<std::int64_t> perm) {
  index_t const k = perm.extent[0];
  for (index_t i = 0; i < k; ++i) {
    perm(i) = i;
  }
  std::uint64_t state = seed;
  for (index_t i = k - 1; i > 0; --i) {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    auto const j = static_cast<index_t>(detail::qnt::mul_hi(z, static_cast<std::uint64_t>(i + 1)));
    std::swap(perm(i), perm(j));
  }
}

namespace detail::qnt {

/// Throws unless `perm` is a permutation of [0, K) (the reference does not check; we must, to
/// stay in bounds).
template <class I>
void check_permutation(char const* fn, view1d<I> perm, index_t k, std::vector<bool>* seen_buf = nullptr) {
  check_1d(fn, "perm", perm, k);
  std::vector<bool> local;
  std::vector<bool>& seen = seen_buf ? *seen_buf : local;
  seen.assign(static_cast<std::size_t>(k), false);
  for (index_t i = 0; i < k; ++i) {
    auto const p = static_cast<index_t>(perm(i));
    if (p < 0 || p >= k || seen[static_cast<std::size_t>(p)]) {
      throw value_error(std::string(fn) + ": perm is not a permutation of [0, " + std::to_string(k) + "): entry " +
                        std::to_string(i) + " is " + std::to_string(p) + (p >= 0 && p < k ? " (repeated)" : ""));
    }
    seen[static_cast<std::size_t>(p)] = true;
  }
}

/// dst[i, :] = src[idx[i], :].
template <class S, class D, class I>
void gather_rows(view2d<S> src, view1d<I> idx, view2d<D> dst) {
  for (index_t i = 0; i < dst.extent[0]; ++i) {
    auto const* in = src.data + static_cast<index_t>(idx(i)) * src.stride[0];
    auto* out = dst.data + i * dst.stride[0];
    std::copy(in, in + dst.extent[1], out);
  }
}

}  // namespace detail::qnt

/// Caller-owned outputs of `permute_rows` (the reference's return order: w_ref first).
template <class T>
struct permute_rows_outputs {
  view2d<T> w_ref;                 ///< (K, N) w_ref[perm]
  view2d<std::int32_t> q_w;        ///< (K, N) q_w[perm]
  view1d<std::int32_t> g_idx;      ///< (K) (i // group_size)[perm], Python floor division
  view1d<std::int64_t> rand_perm;  ///< (K) perm
};

/// `permute_rows(q_w, w_ref, group_size, perm)`: the rows of q_w and w_ref in the order `perm`,
/// and g_idx[i] = perm[i] // group_size (floor division, so -1 gives -perm[i] as the
/// reference). Scales are not permuted. @throws value_error when perm is not a permutation of
/// [0, K) or group_size is 0; shape_error for shapes.
template <class QW, class WR, class P, class T>
void permute_rows(view2d<QW> q_w, view2d<WR> w_ref, index_t group_size, view1d<P> perm, permute_rows_outputs<T> out) {
  constexpr char const* fn = "qtl::permute_rows";
  index_t const k = q_w.extent[0];
  index_t const n = q_w.extent[1];
  detail::qnt::check_2d(fn, "w_ref", w_ref, k, n);
  detail::qnt::check_2d(fn, "out.w_ref", out.w_ref, k, n);
  detail::qnt::check_2d(fn, "out.q_w", out.q_w, k, n);
  detail::qnt::check_1d(fn, "out.g_idx", out.g_idx, k);
  detail::qnt::check_1d(fn, "out.rand_perm", out.rand_perm, k);
  if (group_size == 0) {
    throw value_error(std::string(fn) + ": group_size is 0");
  }
  detail::qnt::check_permutation(fn, perm, k);
  detail::qnt::gather_rows(w_ref, perm, out.w_ref);
  detail::qnt::gather_rows(q_w, perm, out.q_w);
  for (index_t i = 0; i < k; ++i) {
    auto const p = static_cast<std::int64_t>(perm(i));
    out.g_idx(i) = static_cast<std::int32_t>(detail::qnt::floor_div(p, group_size));
    out.rand_perm(i) = p;
  }
}

/// Caller-owned outputs of `sort_weights`.
struct sort_weights_outputs {
  view2d<std::int32_t> q_w;           ///< (K, N) q_w[sort_indices]
  view1d<std::int32_t> g_idx;         ///< (K) g_idx[sort_indices], non-decreasing
  view1d<std::int32_t> sort_indices;  ///< (K) the stable argsort of g_idx
};

/// `sort_weights(q_w, g_idx)`: rows ordered by g_idx with a **stable** sort (ties keep their
/// input order; torch's argsort is unstable, so the reference's order within a group is
/// unspecified). @throws shape_error for shapes.
template <class QW, class GI>
void sort_weights(view2d<QW> q_w, view1d<GI> g_idx, sort_weights_outputs out) {
  constexpr char const* fn = "qtl::sort_weights";
  index_t const k = q_w.extent[0];
  index_t const n = q_w.extent[1];
  detail::qnt::check_1d(fn, "g_idx", g_idx, k);
  detail::qnt::check_2d(fn, "out.q_w", out.q_w, k, n);
  detail::qnt::check_1d(fn, "out.g_idx", out.g_idx, k);
  detail::qnt::check_1d(fn, "out.sort_indices", out.sort_indices, k);
  std::int32_t* si = out.sort_indices.data;
  index_t const ss = out.sort_indices.stride[0];
  for (index_t i = 0; i < k; ++i) {
    si[i * ss] = static_cast<std::int32_t>(i);
  }
  if (ss == 1) {
    std::stable_sort(si, si + k, [&](std::int32_t a, std::int32_t b) { return g_idx(a) < g_idx(b); });
  } else {
    std::vector<std::int32_t> tmp(si == nullptr ? 0 : static_cast<std::size_t>(k));
    for (index_t i = 0; i < k; ++i) {
      tmp[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
    }
    std::stable_sort(tmp.begin(), tmp.end(), [&](std::int32_t a, std::int32_t b) { return g_idx(a) < g_idx(b); });
    for (index_t i = 0; i < k; ++i) {
      si[i * ss] = tmp[static_cast<std::size_t>(i)];
    }
  }
  detail::qnt::gather_rows(q_w, out.sort_indices, out.q_w);
  for (index_t i = 0; i < k; ++i) {
    out.g_idx(i) = static_cast<std::int32_t>(g_idx(out.sort_indices(i)));
  }
}

/// Options of `gptq_quantize_weights`.
struct gptq_options {
  bool act_order = false;                      ///< permute rows (GPTQ's desc_act)
  std::optional<view1d<std::int64_t const>> perm;  ///< the permutation (the reference's test_perm)
  std::uint64_t seed = 0;                      ///< without perm: `random_permutation(seed, ...)`
};

/// Caller-owned outputs of `gptq_quantize_weights`.
template <class T>
struct gptq_outputs {
  view2d<T> w_ref;                 ///< (K, N), rows permuted with act-order
  view2d<std::int32_t> w_q;        ///< (K, N), rows permuted with act-order
  view2d<T> w_s;                   ///< (K/G, N), never permuted
  view1d<std::int32_t> g_idx;      ///< (K) with act-order, else (0)
  view1d<std::int64_t> rand_perm;  ///< (K) with act-order, else (0)
};

namespace detail::qnt {

template <scalar_type Q, int G, class T>
void gptq_impl(view2d<T const> w, index_t group_size, gptq_options const& opt, gptq_outputs<T> out) {
  constexpr char const* fn = "qtl::gptq_quantize_weights";
  index_t const k = w.extent[0];
  if (group_size > std::numeric_limits<int>::max() ||
      !(is_gptq_group_size(static_cast<int>(group_size)) || group_size == k)) {
    throw unsupported_error(std::string(fn) + ": group_size " + std::to_string(group_size) +
                            " is not supported (-1, 32, 64, 128 or K = " + std::to_string(k) + ")");
  }
  quantize_outputs<T> qo{out.w_ref, out.w_q, out.w_s, {}};
  if (!opt.act_order) {
    check_1d(fn, "g_idx", out.g_idx, 0);
    check_1d(fn, "rand_perm", out.rand_perm, 0);
    quantize_weights_impl<Q, G>(w, group_size, false, qo, {}, nullptr);
    return;
  }
  if (is_channelwise_group_size(group_size, k)) {
    throw value_error(std::string(fn) + ": act_order needs group_size < K (got " + std::to_string(group_size) +
                      ", K = " + std::to_string(k) + "); with one group per column it has no effect");
  }
  check_1d(fn, "g_idx", out.g_idx, k);
  check_1d(fn, "rand_perm", out.rand_perm, k);
  if (opt.perm) {
    check_permutation(fn, *opt.perm, k);
    for (index_t i = 0; i < k; ++i) {
      out.rand_perm(i) = (*opt.perm)(i);
    }
  } else {
    random_permutation(opt.seed, out.rand_perm);
  }
  // g_idx first holds the inverse permutation, so that quantization writes row r straight to
  // its permuted place (no scratch buffer); then its final values.
  for (index_t i = 0; i < k; ++i) {
    out.g_idx(out.rand_perm(i)) = static_cast<std::int32_t>(i);
  }
  std::vector<std::int32_t> inv;
  std::int32_t const* row_out = out.g_idx.data;
  if (out.g_idx.stride[0] != 1) {
    inv.resize(static_cast<std::size_t>(k));
    for (index_t i = 0; i < k; ++i) {
      inv[static_cast<std::size_t>(i)] = out.g_idx(i);
    }
    row_out = inv.data();
  }
  quantize_weights_impl<Q, G>(w, group_size, false, qo, {}, row_out);
  for (index_t i = 0; i < k; ++i) {
    out.g_idx(i) = static_cast<std::int32_t>(floor_div(out.rand_perm(i), group_size));
  }
}

}  // namespace detail::qnt

/// `gptq_quantize_weights` with compile-time Q (uint4b8 or uint8b128) and G (-1, 32, 64, 128):
/// symmetric quantization, then with act-order the rows of w_ref and w_q permuted by
/// `opt.perm` (validated) or by `random_permutation(opt.seed)`, g_idx = perm // G.
/// @throws value_error for act-order with channelwise groups or a bad perm; shape_error for shapes.
template <scalar_type Q, int G, class W>
void gptq_quantize_weights(view2d<W> w, gptq_outputs<std::remove_const_t<W>> out, gptq_options const& opt = {}) {
  static_assert(is_gptq_quant_type(Q), "qtl::gptq_quantize_weights: Q must be uint4b8 or uint8b128");
  static_assert(is_gptq_group_size(G),
                "qtl::gptq_quantize_weights: G must be -1, 32, 64 or 128 (use the run-time overload for G = K)");
  detail::qnt::gptq_impl<Q, G>(detail::qnt::as_const(w), G, opt, out);
}

/// As above with a run-time group size (-1, 32, 64, 128 or K).
/// @throws unsupported_error for any other group size.
template <scalar_type Q, class W>
void gptq_quantize_weights(view2d<W> w, index_t group_size, gptq_outputs<std::remove_const_t<W>> out,
                           gptq_options const& opt = {}) {
  static_assert(is_gptq_quant_type(Q), "qtl::gptq_quantize_weights: Q must be uint4b8 or uint8b128");
  auto const v = detail::qnt::as_const(w);
  index_t const k = v.extent[0];
  switch (is_channelwise_group_size(group_size, k) ? -1 : group_size) {
    case 32: detail::qnt::gptq_impl<Q, 32>(v, group_size, opt, out); break;
    case 64: detail::qnt::gptq_impl<Q, 64>(v, group_size, opt, out); break;
    case 128: detail::qnt::gptq_impl<Q, 128>(v, group_size, opt, out); break;
    default: detail::qnt::gptq_impl<Q, group_dynamic>(v, group_size, opt, out); break;
  }
}

// ------------------------------------------------------------------------------------------------
// per_tensor_dequantize, convert_to_channelwise, all_close_1d

/// `per_tensor_dequantize(tensor, inv_scale)`: `tensor.to(float16) * inv_scale`. With a half_t
/// output: the scale is a Python float or 0-dim tensor, the product is rounded to fp16 (overflow
/// to Inf). With a float output: the scale is a 1-element tensor, and torch promotes to float32.
template <class T, class O>
void per_tensor_dequantize(view2d<T> tensor, float inv_scale, view2d<O> out) {
  static_assert(std::is_same_v<O, half_t> || std::is_same_v<O, float>,
                "qtl::per_tensor_dequantize: the output is half_t (scalar scale) or float (1-element scale)");
  detail::qnt::check_2d("qtl::per_tensor_dequantize", "out", out, tensor.extent[0], tensor.extent[1]);
  for (index_t i = 0; i < tensor.extent[0]; ++i) {
    for (index_t j = 0; j < tensor.extent[1]; ++j) {
      if constexpr (std::is_same_v<O, half_t>) {
        out(i, j) = per_tensor_dequantize_element(tensor(i, j), inv_scale);
      } else {
        out(i, j) = per_tensor_dequantize_element_f32(tensor(i, j), inv_scale);
      }
    }
  }
}

namespace detail::qnt {
/// Σ logical_widths, the rows of `convert_to_channelwise`. @throws value_error for a negative width
inline index_t channelwise_rows(std::span<index_t const> logical_widths) {
  index_t total = 0;
  for (index_t w : logical_widths) {
    if (w < 0) {
      throw value_error("qtl::convert_to_channelwise: negative logical width " + std::to_string(w));
    }
    total += w;
  }
  return total;
}
}  // namespace detail::qnt

/// `convert_to_channelwise(weight_scale, logical_widths)` for a 1-D scale: out (Σ widths, 1)
/// float32 with rows [start, start + w) = weight_scale[idx]. Extra scales are ignored, as in the
/// reference. @throws shape_error when there are fewer scales than widths or out is mis-shaped;
/// value_error for a negative width.
template <class S>
void convert_to_channelwise(view1d<S> weight_scale, std::span<index_t const> logical_widths, view2d<float> out) {
  constexpr char const* fn = "qtl::convert_to_channelwise";
  index_t const total = detail::qnt::channelwise_rows(logical_widths);
  if (static_cast<index_t>(logical_widths.size()) > weight_scale.extent[0]) {
    throw shape_error(std::string(fn) + ": " + std::to_string(logical_widths.size()) + " logical widths but only " +
                      std::to_string(weight_scale.extent[0]) + " scales");
  }
  detail::qnt::check_2d(fn, "out", out, total, 1);
  index_t start = 0;
  for (std::size_t idx = 0; idx < logical_widths.size(); ++idx) {
    float const s = detail::qnt::load<std::remove_const_t<S>>(weight_scale(static_cast<index_t>(idx)));
    for (index_t r = 0; r < logical_widths[idx]; ++r) {
      out(start + r, 0) = s;
    }
    start += logical_widths[idx];
  }
}
/// `convert_to_channelwise` for a 0-dim scale: every row is `weight_scale`.
inline void convert_to_channelwise(float weight_scale, std::span<index_t const> logical_widths, view2d<float> out) {
  float const one[1] = {weight_scale};
  index_t const single[1] = {detail::qnt::channelwise_rows(logical_widths)};
  convert_to_channelwise(make_view(one, 1), std::span<index_t const>(single), out);
}
/// Allocating forms of `convert_to_channelwise`.
template <class S>
host_tensor<float, 2> convert_to_channelwise(view1d<S> weight_scale, std::span<index_t const> logical_widths) {
  host_tensor<float, 2> out({detail::qnt::channelwise_rows(logical_widths), 1});
  convert_to_channelwise(weight_scale, logical_widths, out.view());
  return out;
}
inline host_tensor<float, 2> convert_to_channelwise(float weight_scale, std::span<index_t const> logical_widths) {
  host_tensor<float, 2> out({detail::qnt::channelwise_rows(logical_widths), 1});
  convert_to_channelwise(weight_scale, logical_widths, out.view());
  return out;
}

/// `all_close_1d(x)`: every element is torch.allclose to x[0] (tolerance relative to the other
/// element). Empty is true; any NaN is false; Inf equals Inf.
template <class X>
bool all_close_1d(view1d<X> x) {
  using T = std::remove_const_t<X>;
  std::uint32_t const opaque = detail::qnt::opaque_zero();
  for (index_t i = 0; i < x.extent[0]; ++i) {
    if (!torch_isclose<T>(x(0), x(i), opaque)) {
      return false;
    }
  }
  return true;
}

}  // namespace qtl
