// The per-format tensor writers of `qtl quantize` (see tensor_writers.hpp). Every number comes
// from the library's ops (qtl/quantize.hpp, qtl/pack.hpp, qtl/fp8.hpp); this file slices, lays
// out and writes.

#include "tensor_writers.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include <qtl/dispatch.hpp>
#include <qtl/fp8.hpp>
#include <qtl/pack.hpp>
#include <qtl/quantize.hpp>
#include <qtl/transpose.hpp>

#include "../common.hpp"

namespace qtl::tool {

namespace {

template <class T>
view2d<T const> weight_view(tensor_info const& t) {
  // The mapping is page-aligned and the writer keeps tensors aligned; a misaligned tensor of a
  // foreign file is copied by typed_tensor's caller instead (see run_gptq / run_fp8).
  return make_view(reinterpret_cast<T const*>(t.bytes.data()), t.shape[0], t.shape[1]);
}

/// The weight as T, aligned (a copy only when the file's bytes are not aligned for T).
template <class T>
struct aligned_weight {
  explicit aligned_weight(tensor_info const& t) {
    if (reinterpret_cast<std::uintptr_t>(t.bytes.data()) % alignof(T) == 0) {
      v = weight_view<T>(t);
    } else {
      copy.resize(t.bytes.size() / sizeof(T));
      std::memcpy(copy.data(), t.bytes.data(), t.bytes.size());
      v = make_view(static_cast<T const*>(copy.data()), t.shape[0], t.shape[1]);
    }
  }
  std::vector<T> copy;
  view2d<T const> v;
};

template <scalar_type Q, class T>
void gptq_slices(job& j, view2d<T const> w, shard_plan const& s) {
  index_t const n = w.extent[0];
  index_t const k = w.extent[1];
  index_t const gs = j.group_rows;
  index_t const groups = k / gs;
  constexpr int bits = static_cast<int>(Q.size_bits());
  constexpr int pf = 32 / bits;
  std::vector<std::int32_t> qweight(static_cast<std::size_t>(k / pf * n));
  std::vector<half_t> scales(static_cast<std::size_t>(groups * n));
  j.zeros.assign(static_cast<std::size_t>(groups * n), 0);
  index_t const slice = 256;
  host_tensor<T, 2> wt({k, std::min(slice, n)});
  host_tensor<T, 2> w_ref({k, std::min(slice, n)});
  host_tensor<std::int32_t, 2> w_q({k, std::min(slice, n)});
  host_tensor<T, 2> w_s({groups, std::min(slice, n)});
  host_tensor<std::int32_t, 2> w_zp({groups, std::min(slice, n)});
  for (index_t n0 = 0; n0 < n; n0 += slice) {
    index_t const c = std::min(slice, n - n0);
    // transpose rows n0..n0+c of W [N, K] into (K, c)
    view2d<T> t = make_view(wt.view().data, k, c);
    view2d<T const> rows_nk = make_view(&w(n0, 0), c, k);
    rows_nk.stride[0] = w.stride[0];
    transpose(rows_nk, t);
    // the input rows just read are not needed again: let the kernel drop their pages
    if (j.in->bytes.data() == reinterpret_cast<std::byte const*>(w.data)) {
      tensor_info rows;
      rows.bytes = j.in->bytes.subspan(static_cast<std::size_t>(n0 * k) * sizeof(T),
                                       static_cast<std::size_t>(c * k) * sizeof(T));
      release(rows);
    }
    quantize_outputs<T> out{make_view(w_ref.view().data, k, c), make_view(w_q.view().data, k, c),
                            make_view(w_s.view().data, groups, c), make_view(w_zp.view().data, groups, c)};
    qtl::quantize_options opt;
    opt.zero_points = Q.bias == 0;
    quantize_weights<Q>(view2d<T const>(t), std::optional<index_t>(j.config_group_size), out, opt);
    view2d<std::int32_t> qw = make_view(qweight.data() + n0, k / pf, c);
    qw.stride[0] = n;
    pack_rows<bits>(view2d<std::int32_t const>(out.w_q), qw);
    for (index_t g = 0; g < groups; ++g) {
      for (index_t r = 0; r < c; ++r) {
        auto const idx = static_cast<std::size_t>(g * n + n0 + r);
        if constexpr (std::is_same_v<T, half_t>) {
          scales[idx] = out.w_s(g, r);
        } else {
          scales[idx] = from_float<half_t>(to_float(out.w_s(g, r)));
        }
        std::int32_t const z = Q.bias != 0 ? Q.bias : out.w_zp(g, r);
        j.zeros[idx] = z;
        j.zero_has_zero = j.zero_has_zero || z == 0;
      }
    }
  }
  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(k));
  for (index_t kk = 0; kk < k; ++kk) {
    g_idx[static_cast<std::size_t>(kk)] = static_cast<std::int32_t>(kk / gs);
  }
  // outs: qweight, qzeros (written at the end), scales, g_idx
  s.file->pwrite_all(qweight.data(), qweight.size() * 4, s.tensors[j.outs[0]].offset);
  s.file->pwrite_all(scales.data(), scales.size() * 2, s.tensors[j.outs[2]].offset);
  s.file->pwrite_all(g_idx.data(), g_idx.size() * 4, s.tensors[j.outs[3]].offset);
}

/// Refuses a weight with a NaN or an infinity (GPTQ scales would be NaN, FP8 scales infinite),
/// naming the tensor and the first bad element, unless --allow-nonfinite.
/// @throws data_error
template <class T>
void check_finite(view2d<T const> w, bool allow) {
  if (allow) {
    return;
  }
  index_t const n = w.extent[0];
  index_t const k = w.extent[1];
  for (index_t r = 0; r < n; ++r) {
    T const* row = &w(r, 0);
    for (index_t c = 0; c < k; ++c) {
      float const x = to_float(row[c]);
      if (!std::isfinite(x)) {
        throw data_error("element [" + std::to_string(r) + ", " + std::to_string(c) + "] is " +
                         (std::isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf") +
                         " (the scales would not be finite; --allow-nonfinite quantizes it anyway)");
      }
    }
  }
}

template <class T>
void gptq_weight(job& j, shard_plan const& s) {
  aligned_weight<T> w(*j.in);
  check_finite(w.v, j.allow_nonfinite);
  dispatch_scalar_type<qtl::uint4b8, qtl::uint4, qtl::uint8b128, qtl::uint8>(
      j.weight_type, [&](auto q) { gptq_slices<decltype(q)::value>(j, w.v, s); });
}

template <class T>
void fp8_weight(job& j, shard_plan const& s, fp8_scheme scheme) {
  aligned_weight<T> w(*j.in);
  check_finite(w.v, j.allow_nonfinite);
  index_t const n = w.v.extent[0];
  index_t const k = w.v.extent[1];
  std::vector<float8_e4m3fn_t> q(static_cast<std::size_t>(n * k));
  view2d<float8_e4m3fn_t> qv = make_view(q.data(), n, k);
  std::vector<float> scales;
  if (scheme == fp8_scheme::tensor) {
    scales.push_back(scaled_fp8_quant_dynamic<float8_e4m3fn_t>(w.v, qv));
  } else if (scheme == fp8_scheme::channel) {
    scales.resize(static_cast<std::size_t>(n));
    scaled_fp8_quant_per_token<float8_e4m3fn_t>(w.v, qv, make_view(scales.data(), n));
  } else {
    constexpr index_t b = 128;
    index_t const bn = (n + b - 1) / b;
    index_t const bk = (k + b - 1) / b;
    scales.resize(static_cast<std::size_t>(bn * bk));
    for (index_t i = 0; i < bn; ++i) {
      for (index_t jj = 0; jj < bk; ++jj) {
        index_t const rows = std::min(b, n - i * b);
        index_t const cols = std::min(b, k - jj * b);
        view2d<T const> in = make_view(&w.v(i * b, jj * b), rows, cols);
        in.stride[0] = k;
        view2d<float8_e4m3fn_t> out = make_view(&qv(i * b, jj * b), rows, cols);
        out.stride[0] = k;
        float const amax = std::max(fp8_amax(in), 1e-12f);
        float const scale = amax / 448.0f;
        scaled_fp8_quant_static<float8_e4m3fn_t>(in, scale, out);
        scales[static_cast<std::size_t>(i * bk + jj)] = scale;
      }
    }
  }
  s.file->pwrite_all(q.data(), q.size(), s.tensors[j.outs[0]].offset);
  s.file->pwrite_all(scales.data(), scales.size() * 4, s.tensors[j.outs[1]].offset);
}

}  // namespace

void write_copy(job const& j, shard_plan const& s) {
  // In slices, releasing the input pages behind, so that a large tensor is never resident whole.
  std::size_t const slice = std::size_t{64} << 20;
  auto const& bytes = j.in->bytes;
  for (std::size_t off = 0; off < bytes.size(); off += slice) {
    std::size_t const len = std::min(slice, bytes.size() - off);
    s.file->pwrite_all(bytes.data() + off, len, s.tensors[j.outs[0]].offset + off);
    tensor_info part;
    part.bytes = bytes.subspan(off, len);
    release(part);
  }
}

void write_gptq(job& j, shard_plan const& s) {
  with_float_type(j.in->type, [&](auto tag) { gptq_weight<typename decltype(tag)::type>(j, s); });
}

void write_fp8(job& j, shard_plan const& s, fp8_scheme scheme) {
  with_float_type(j.in->type, [&](auto tag) { fp8_weight<typename decltype(tag)::type>(j, s, scheme); });
}

void write_gptq_zero_points(std::vector<job>& jobs, std::vector<shard_plan>& shards, bool v1) {
  for (auto& j : jobs) {
    if (j.kind != job_kind::gptq) {
      continue;
    }
    auto const& t = shards[j.shard].tensors[j.outs[1]];
    index_t const g = t.shape[0];
    index_t const n = t.shape[1] * (32 / j.bits);
    if (v1) {
      for (auto& z : j.zeros) {
        z -= 1;  // v1 stores z - 1 (z >= 1 here: no field borrows)
      }
    }
    host_tensor<std::int32_t, 2> packed({g, t.shape[1]});
    auto const zv = make_view(static_cast<std::int32_t const*>(j.zeros.data()), g, n);
    dispatch_bits<4, 8>(j.bits, [&]<int B>() { pack_cols<B>(zv, packed.view()); });
    shards[j.shard].file->pwrite_all(packed.view().data, static_cast<std::size_t>(g * t.shape[1]) * 4, t.offset);
    j.zeros.clear();
    j.zeros.shrink_to_fit();
  }
}

}  // namespace qtl::tool
