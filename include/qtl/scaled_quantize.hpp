#pragma once
/// \file
/// vLLM's `GroupShape` quantization (`quant_utils.py`; `docs/spec/engines.md` §5) on the host:
///
///   scaled_quantize<Q, C>(x, group, q, scale)   q = Q codes [M, N], scale = float32 [M/gm, N/gn]
///   scaled_dequantize<Out>(q, scale, out)       out = Out(float(q) * float(scale of its group))
///   group_broadcast(t, out)                     each element of t repeated over its group
///
/// `group` is vLLM's `GroupShape`: per tensor (-1, -1), per token (1, -1), per channel (-1, 1),
/// DeepSeek's 128×128 weight blocks, 1×128 activation groups, any (gm, gn) dividing [M, N]. The
/// arithmetic of each group and element is `qtl/element/scaled_quantize.hpp`'s, in the compute
/// type C (the input's by default). `qtl/cuda/scaled_quantize.cuh` runs the same element code on
/// the device.
///
/// Views take any strides. Errors (`qtl::shape_error`, `qtl::value_error`) are thrown before
/// anything is written.

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <qtl/element/fp8.hpp>
#include <qtl/element/scaled_quantize.hpp>
#include <qtl/error.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// Checks the arguments of `scaled_quantize` (vLLM's asserts, named) and returns the normalized
/// group shape. @throws shape_error, value_error
inline group_shape check_scaled_quantize(index_t rows, index_t cols, group_shape group, index_t q_rows, index_t q_cols,
                                         index_t s_rows, index_t s_cols, float fp8_max) {
  std::string const fn = "qtl::scaled_quantize: ";
  group_shape const g = normalize_group_shape(group, rows, cols);
  std::string const groups = g.row > 0 && g.col > 0 ? shape_string(rows / g.row, cols / g.col) : "";
  switch (scaled_quantize_shape_check(rows, cols, group, q_rows, q_cols, s_rows, s_cols, fp8_max)) {
    case scaled_quantize_shape::ok: return g;
    case scaled_quantize_shape::negative_extent:
      throw shape_error(fn + "the input has a negative extent " + shape_string(rows, cols));
    case scaled_quantize_shape::empty_group:
      throw shape_error(fn + "group shape " + shape_string(group.row, group.col) + " spans an empty dimension of " +
                        shape_string(rows, cols));
    case scaled_quantize_shape::not_divisible:
      throw shape_error(fn + "the input " + shape_string(rows, cols) + " is not a whole number of " +
                        shape_string(g.row, g.col) + " groups");
    case scaled_quantize_shape::q_extents:
      throw shape_error(fn + "q is " + shape_string(q_rows, q_cols) + ", the input " + shape_string(rows, cols));
    case scaled_quantize_shape::scale_extents:
      throw shape_error(fn + "scale is " + shape_string(s_rows, s_cols) + ", the groups " + groups);
    case scaled_quantize_shape::bad_fp8_max: break;
  }
  throw value_error(fn + "fp8_max must be finite and positive, got " + std::to_string(fp8_max));
}

/// vLLM's `scaled_quantize(x, group_shape, quant_dtype=Q, compute_dtype=C)`: one scale per group,
/// `fp8_max / amax` in C; `q` the codes, `scale` the float32 dequantization scales
/// `[M/gm, N/gn]`. `fp8_max` is `get_fp8_min_max()`'s on the platform (default: Q's, 224 for
/// e4m3fnuz, else 448). @throws shape_error, value_error
template <scaled_quant_storage Q, class C = void, fp8_quant_input T>
void scaled_quantize(view2d<T const> x, group_shape group, view2d<Q> q, view2d<float> scale,
                     float fp8_max = default_fp8_max<Q>) {
  using CT = scaled_quantize_compute_t<C, T>;
  static_assert(fp8_quant_input<CT>, "qtl::scaled_quantize: the compute type is float, half_t or bfloat16_t");
  group_shape const g = check_scaled_quantize(x.extent[0], x.extent[1], group, q.extent[0], q.extent[1],
                                              scale.extent[0], scale.extent[1], fp8_max);
  index_t const bm = scale.extent[0];
  index_t const bn = scale.extent[1];
  // pass 1: the amax bits of every group, row by row (a column group stays cache friendly)
  std::vector<std::uint32_t> amax(static_cast<std::size_t>(bm * bn), 0u);
  for (index_t i = 0; i < x.extent[0]; ++i) {
    std::uint32_t* a = &amax[static_cast<std::size_t>(i / g.row * bn)];
    for (index_t b = 0; b < bn; ++b) {
      std::uint32_t m = a[b];
      for (index_t j = b * g.col; j < (b + 1) * g.col; ++j) {
        std::uint32_t const v = scaled_quantize_amax_bits<CT>(x(i, j));
        m = v > m ? v : m;
      }
      a[b] = m;
    }
  }
  // pass 2: the scales in C, then every code
  std::vector<float> s(amax.size());
  for (std::size_t k = 0; k < s.size(); ++k) {
    s[k] = scaled_quantize_scale<CT>(amax[k], fp8_max);
  }
  for (index_t i = 0; i < x.extent[0]; ++i) {
    float const* si = &s[static_cast<std::size_t>(i / g.row * bn)];
    for (index_t b = 0; b < bn; ++b) {
      for (index_t j = b * g.col; j < (b + 1) * g.col; ++j) {
        q(i, j) = scaled_quantize_element<Q, CT>(x(i, j), si[b]);
      }
    }
  }
  for (index_t r = 0; r < bm; ++r) {
    for (index_t c = 0; c < bn; ++c) {
      scale(r, c) = scaled_quantize_inverse(s[static_cast<std::size_t>(r * bn + c)]);
    }
  }
}

/// The result of the allocating `scaled_quantize`.
template <class Q>
struct scaled_quantize_result {
  host_tensor<Q, 2> q;          ///< [M, N]
  host_tensor<float, 2> scale;  ///< [M/gm, N/gn]
};

/// `scaled_quantize` into new contiguous tensors. @throws shape_error, value_error
template <scaled_quant_storage Q, class C = void, fp8_quant_input T>
scaled_quantize_result<Q> scaled_quantize(view2d<T const> x, group_shape group, float fp8_max = default_fp8_max<Q>) {
  group_shape const g = normalize_group_shape(group, x.extent[0], x.extent[1]);
  bool const ok = g.row > 0 && g.col > 0 && x.extent[0] >= 0 && x.extent[1] >= 0;
  index_t const bm = ok ? x.extent[0] / g.row : 0;
  index_t const bn = ok ? x.extent[1] / g.col : 0;
  check_scaled_quantize(x.extent[0], x.extent[1], group, x.extent[0], x.extent[1], bm, bn, fp8_max);
  scaled_quantize_result<Q> r{host_tensor<Q, 2>({x.extent[0], x.extent[1]}), host_tensor<float, 2>({bm, bn})};
  scaled_quantize<Q, C>(x, group, r.q.view(), r.scale.view(), fp8_max);
  return r;
}

/// The [rows, cols] a scale tensor of shape `scale_shape` is read as against an [M, N] `x_q` in
/// vLLM's `scaled_dequantize` (`prep_scale_for_group_broadcast`, then its asserts):
///   - one element (any rank): [1, 1], one scale for the tensor;
///   - rank 1: needs `group`; [1, n] when the normalized group spans all M rows (per channel),
///     else [n, 1] when it spans all N columns (per token), else value_error;
///   - rank 2: itself.
/// With a `group`, the scale must then be [M / gm, N / gn] of the normalized group (vLLM asserts
/// with the group as given, so that a -1 extent always fails there; QTL implements what it
/// means), but for one scale with a per-tensor group. @throws shape_error, value_error
inline std::array<index_t, 2> dequantize_scale_extents(std::span<index_t const> scale_shape, index_t rows, index_t cols,
                                                       std::optional<group_shape> group) {
  std::string const fn = "qtl::scaled_dequantize: ";
  index_t numel = 1;
  for (index_t const e : scale_shape) {
    numel *= e;
  }
  std::array<index_t, 2> ext{};
  if (numel == 1) {
    ext = {1, 1};
  } else if (scale_shape.size() == 1) {
    if (!group) {
      throw value_error(fn + "a 1-D scale needs a group_shape to broadcast");
    }
    group_shape const g = normalize_group_shape(*group, rows, cols);
    if (g.row == rows) {
      ext = {1, scale_shape[0]};
    } else if (g.col == cols) {
      ext = {scale_shape[0], 1};
    } else {
      throw value_error(fn + "a 1-D scale of " + std::to_string(scale_shape[0]) + " cannot broadcast to " +
                        shape_string(rows, cols) + " with group_shape " + shape_string(g.row, g.col));
    }
  } else if (scale_shape.size() == 2) {
    ext = {scale_shape[0], scale_shape[1]};
  } else {
    throw shape_error(fn + "the scale has rank " + std::to_string(scale_shape.size()) + "; it must be 0, 1 or 2");
  }
  if (group && !(numel == 1 && group->is_per_tensor())) {
    group_shape const g = normalize_group_shape(*group, rows, cols);
    if (g.row <= 0 || g.col <= 0 || ext[0] != rows / g.row || ext[1] != cols / g.col) {
      throw shape_error(fn + "the scale " + shape_string(ext[0], ext[1]) + " is not the groups of " +
                        shape_string(rows, cols) + " with group_shape " + shape_string(group->row, group->col));
    }
  }
  return ext;
}

namespace detail {
// The factors of `group_broadcast_factor` for [rows, cols] from [t_rows, t_cols]. @throws shape_error
inline std::array<index_t, 2> broadcast_factors(char const* fn, index_t t_rows, index_t t_cols, index_t rows,
                                                index_t cols) {
  index_t const fr = group_broadcast_factor(t_rows, rows);
  index_t const fc = group_broadcast_factor(t_cols, cols);
  if (fr == 0 || fc == 0) {
    throw shape_error(std::string(fn) + ": " + shape_string(t_rows, t_cols) + " does not broadcast in groups to " +
                      shape_string(rows, cols) + " (each extent must be 1, equal, or divide the target's)");
  }
  return {fr, fc};
}
}  // namespace detail

/// vLLM's `group_broadcast(t, shape)` in two dimensions: `out(i, j) = t(i / fr, j / fc)`, each
/// factor that of `group_broadcast_factor` (an extent of 1 reads element 0; vLLM leaves such a
/// dimension at 1 for torch to broadcast, which `out` may do too). @throws shape_error
template <class T>
void group_broadcast(view2d<T const> t, view2d<T> out) {
  auto const f =
      detail::broadcast_factors("qtl::group_broadcast", t.extent[0], t.extent[1], out.extent[0], out.extent[1]);
  for (index_t i = 0; i < out.extent[0]; ++i) {
    for (index_t j = 0; j < out.extent[1]; ++j) {
      out(i, j) = t(i / f[0], j / f[1]);
    }
  }
}

/// vLLM's `scaled_dequantize` on a scale already read as 2-D (`dequantize_scale_extents`):
/// `out(i, j) = Out(float(q(i, j)) * float(scale(i / fr, j / fc)))`, the scale broadcast as
/// `group_broadcast`. `Out` is `out_dtype` (float, half_t or bfloat16_t). @throws shape_error
template <class Out = float, scaled_quant_storage Q, fp8_quant_input S>
void scaled_dequantize(view2d<Q const> q, view2d<S const> scale, view2d<Out> out) {
  static_assert(fp8_quant_input<Out>, "qtl::scaled_dequantize: Out is float, half_t or bfloat16_t");
  if (out.extent[0] != q.extent[0] || out.extent[1] != q.extent[1]) {
    throw shape_error("qtl::scaled_dequantize: out is " + shape_string(out.extent[0], out.extent[1]) + ", x_q " +
                      shape_string(q.extent[0], q.extent[1]));
  }
  auto const f =
      detail::broadcast_factors("qtl::scaled_dequantize", scale.extent[0], scale.extent[1], q.extent[0], q.extent[1]);
  for (index_t i = 0; i < q.extent[0]; ++i) {
    for (index_t j = 0; j < q.extent[1]; ++j) {
      out(i, j) = dequantize_fp8_element<Out>(q(i, j), to_float(scale(i / f[0], j / f[1])));
    }
  }
}

}  // namespace qtl
