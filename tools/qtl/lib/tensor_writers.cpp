// The per-format tensor writers of `qtl quantize` (see tensor_writers.hpp). Every number comes
// from the library's checkpoint ops (qtl/gptq_checkpoint.hpp, qtl/ct_quantize.hpp, qtl/ct_fp4.hpp,
// qtl/ct_mxfp8.hpp, qtl/fp8_checkpoint.hpp) and qtl/pack.hpp; this file slices, lays out and writes.

#include "tensor_writers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include <qtl/ct_fp4.hpp>
#include <qtl/ct_mxfp8.hpp>
#include <qtl/ct_quantize.hpp>
#include <qtl/dispatch.hpp>
#include <qtl/gptq_checkpoint.hpp>
#include <qtl/fp4.hpp>
#include <qtl/fp8.hpp>
#include <qtl/fp8_checkpoint.hpp>
#include <qtl/pack.hpp>
#include <qtl/quantize.hpp>

#include "../common.hpp"
#include "scratch.hpp"
#include "worker_pool.hpp"

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

/// Lets the kernel drop the pages of rows [n0, n0 + c) of W once read (when `w` is the job's input
/// mapping itself, not a copy).
template <class T>
void release_rows(job const& j, view2d<T const> w, index_t n0, index_t c) {
  if (!j.cut && j.in->bytes.data() == reinterpret_cast<std::byte const*>(w.data)) {  // not a gathered buffer
    auto const row = static_cast<std::size_t>(w.extent[1]) * sizeof(T);
    release(j.in->bytes.subspan(static_cast<std::size_t>(n0) * row, static_cast<std::size_t>(c) * row));
  }
}

/// Refuses a weight with a NaN or an infinity (GPTQ scales would be NaN, FP8 scales infinite),
/// naming the tensor and the first bad element (w's row 0 being row `first_row` of the tensor),
/// unless --allow-nonfinite.
/// @throws data_error
template <class T>
void check_finite(view2d<T const> w, bool allow, index_t first_row = 0) {
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
        throw data_error("element [" + std::to_string(first_row + r) + ", " + std::to_string(c) + "] is " +
                         (std::isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf") +
                         " (the scales would not be finite; --allow-nonfinite quantizes it anyway)");
      }
    }
  }
}

/// max |x| over w (NaN ignored: qtl::scan_amax) in the same pass that looks for NaN and ±Inf; one
/// is refused in check_finite's words (naming the first, w's row 0 being row `first_row` of the
/// tensor) unless `allow`.
/// @throws data_error
template <class T>
float finite_amax(view2d<T const> w, bool allow, index_t first_row = 0) {
  amax_scan const r = scan_amax(w);
  if (!r.finite) {
    check_finite(w, allow, first_row);  // finds and names the first
  }
  return r.amax;
}

/// Writes a GPTQ job's qweight, scales and g_idx = k / group_size (outs: qweight, qzeros, which
/// `write_gptq_zero_points` writes at the end, scales, g_idx).
void write_gptq_tensors(job const& j, shard_plan const& s, std::vector<std::int32_t> const& qweight,
                        std::vector<half_t> const& scales) {
  auto const k = static_cast<std::size_t>(j.in->shape[1]);
  std::vector<std::int32_t> g_idx(k);
  for (std::size_t kk = 0; kk < k; ++kk) {
    g_idx[kk] = static_cast<std::int32_t>(kk / static_cast<std::size_t>(j.group_rows));
  }
  s.file->pwrite_all(qweight.data(), qweight.size() * 4, s.tensors[j.outs[0]].offset);
  s.file->pwrite_all(scales.data(), scales.size() * 2, s.tensors[j.outs[2]].offset);
  s.file->pwrite_all(g_idx.data(), g_idx.size() * 4, s.tensors[j.outs[3]].offset);
}

/// GPTQ by qtl::gptq_checkpoint_quantize on W [N, K] as stored (no transpose), 256 rows at a time
/// into their columns of the whole qweight and scales (written at the end, as the zero points are
/// packed after every job: `write_gptq_zero_points`); the input rows released behind. Its pass
/// over each group refuses NaN/Inf weights (in the tool's words) and scales F16 cannot hold
/// (naming the format that can).
template <class T>
void gptq_rows(job& j, view2d<T const> w, shard_plan const& s) {
  index_t const n = w.extent[0];
  index_t const k = w.extent[1];
  index_t const groups = k / j.group_rows;
  index_t const pf = 32 / j.bits;
  std::vector<std::int32_t> qweight(static_cast<std::size_t>(k / pf * n));
  std::vector<half_t> scales(static_cast<std::size_t>(groups * n));
  j.zeros.assign(static_cast<std::size_t>(groups * n), 0);
  gptq_checkpoint_options opt;
  opt.bits = j.bits;
  opt.group_size = j.group_rows;
  opt.rule = j.sym ? gptq_rule::symmetric : gptq_rule::asymmetric;
  opt.allow_nonfinite = j.allow_nonfinite;
  index_t const slice = 256;
  for (index_t n0 = 0; n0 < n; n0 += slice) {
    index_t const c = std::min(slice, n - n0);
    view2d<T const> rows = make_view(&w(n0, 0), c, k);
    rows.stride[0] = w.stride[0];
    auto const columns = [&]<class U>(U* whole, index_t extent0) {  // columns n0 .. n0 + c of [extent0, N]
      return column_slice(make_view(whole, extent0, n), n0, n0 + c);
    };
    opt.first_row = n0;
    try {
      gptq_checkpoint_quantize(rows, {columns(qweight.data(), k / pf), columns(scales.data(), groups),
                                      columns(j.zeros.data(), groups)},
                               opt);
    } catch (qtl::value_error const& e) {
      if (!j.allow_nonfinite) {
        check_finite(rows, false, n0);  // the tool's own words for a NaN/Inf weight
      }
      // a scale F16 cannot hold (the worker pool names the weight)
      throw data_error(std::string(e.what()) +
                       (j.in->type == dtype::F16 ? "; --format fp8 keeps F32 scales"
                                                 : "; --format w4a16 or w8a16 keep the scales in the weight's dtype (" +
                                                       std::string(qtl::io::dtype_name(j.in->type)) + ")"));
    }
    release_rows(j, w, n0, c);
  }
  if (!j.sym) {
    j.zero_has_zero = std::find(j.zeros.begin(), j.zeros.end(), 0) != j.zeros.end();
  }
  write_gptq_tensors(j, s, qweight, scales);
}

/// compressed-tensors pack-quantized by qtl::ct_pack_quantize (compressed-tensors' own rule: the
/// scale and codes its compressor writes for the same weights), 256 rows at a time at the rows'
/// offsets (no whole-tensor buffer); its pass over each group also refuses NaN/Inf weights:
///
///   W [N, K] row r, group g = columns [g*gs, (g+1)*gs):
///     weight_scale      [N, G]     s(r, g) in the weight's dtype
///     weight_packed     [N, K/pf]  u = q + 2^(b-1) of row r packed along K
///     weight_zero_point [N/pf, G]  zp + 2^(b-1) packed along N (pack_rows; asymmetric only)
///     weight_shape      I64 [2]    [N, K]
template <class T>
void ct_pack_rows(job& j, view2d<T const> w, shard_plan const& s) {
  index_t const n = w.extent[0];
  index_t const k = w.extent[1];
  int const pf = 32 / j.bits;
  index_t const groups = k / j.group_rows;
  index_t const slice = std::min<index_t>(256, n);  // a multiple of pf whenever N is (asymmetric)
  bool const sym = j.sym;
  host_tensor<std::int32_t, 2> packed({slice, k / pf});
  host_tensor<T, 2> scales({slice, groups});
  host_tensor<std::int32_t, 2> zeros({sym ? 0 : slice, groups});
  host_tensor<std::int32_t, 2> zeros_packed({std::max<index_t>(1, slice / pf), groups});
  ct_pack_options opt;
  opt.bits = j.bits;
  opt.group_size = j.group_rows;
  opt.symmetric = sym;
  opt.allow_nonfinite = j.allow_nonfinite;
  // outs: weight_packed, weight_scale, weight_shape, [weight_zero_point]
  for (index_t n0 = 0; n0 < n; n0 += slice) {
    index_t const c = std::min(slice, n - n0);
    view2d<T const> rows = make_view(&w(n0, 0), c, k);
    rows.stride[0] = w.stride[0];
    opt.first_row = n0;
    ct_pack_outputs<T> const out{make_view(packed.view().data, c, k / pf), make_view(scales.view().data, c, groups),
                                 make_view(zeros.view().data, sym ? 0 : c, groups)};
    try {
      ct_pack_quantize(rows, out, opt);
    } catch (qtl::value_error const&) {
      check_finite(rows, false, n0);  // the tool's own words for a NaN/Inf weight
      throw;
    }
    release_rows(j, w, n0, c);
    s.file->pwrite_all(out.packed.data, static_cast<std::size_t>(c * (k / pf)) * 4,
                       s.tensors[j.outs[0]].offset + static_cast<std::uint64_t>(n0 * (k / pf)) * 4);
    s.file->pwrite_all(out.scales.data, static_cast<std::size_t>(c * groups) * sizeof(T),
                       s.tensors[j.outs[1]].offset + static_cast<std::uint64_t>(n0 * groups) * sizeof(T));
    if (!sym) {
      view2d<std::int32_t> zp = make_view(zeros_packed.view().data, c / pf, groups);
      dispatch_bits<4, 8>(j.bits, [&]<int B>() { pack_rows<B>(view2d<std::int32_t const>(out.zero_points), zp); });
      s.file->pwrite_all(zp.data, static_cast<std::size_t>((c / pf) * groups) * 4,
                         s.tensors[j.outs[3]].offset + static_cast<std::uint64_t>((n0 / pf) * groups) * 4);
    }
  }
  std::int64_t const shape[2] = {n, k};
  s.file->pwrite_all(shape, sizeof shape, s.tensors[j.outs[2]].offset);
}

template <class T>
void gptq_weight(job& j, shard_plan const& s) {
  aligned_weight<T> w(*j.in);
  gptq_rows<T>(j, w.v, s);
}

template <class T>
void ct_pack_weight(job& j, shard_plan const& s) {
  aligned_weight<T> w(*j.in);
  ct_pack_rows<T>(j, w.v, s);  // refuses NaN/Inf in its own first pass
}

/// NVFP4 or MXFP4 (compressed-tensors nvfp4-/mxfp4-pack-quantized) by qtl::ct_nvfp4_quantize /
/// qtl::ct_mxfp4_quantize: weight_packed U8 [N, K/2] (element 2i in the low nibble) and
/// weight_scale [N, K/bs] (linear layout); NVFP4 also weight_global_scale F32 [1] =
/// qtl::ct_nvfp4_global_scale of the weight's amax, or of the fused layer's when it has other
/// shards (share_group_amax). The amax pass (NVFP4) or the blocks' max pass (MXFP4) refuses NaN/Inf.
template <block_format_type F, class T>
void fp4_weight(job& j, shard_plan const& s) {
  aligned_weight<T> w(*j.in);
  index_t const n = w.v.extent[0];
  index_t const k = w.v.extent[1];
  auto const values = thread_scratch<float4_e2m1x2_t>(static_cast<std::size_t>(n * (k / 2)));
  auto const scales = thread_scratch<typename F::scale>(static_cast<std::size_t>(block_scale_bytes<F>(n, k)));
  view2d<float4_e2m1x2_t> const vv = make_view(values.data(), n, k / 2);
  view2d<typename F::scale> const sv = make_view(scales.data(), n, k / F::block_size);
  float gs = 1.0f;
  if constexpr (F::has_global_scale) {
    gs = ct_nvfp4_global_scale(j.group_amax ? *j.group_amax : finite_amax(w.v, j.allow_nonfinite));
    ct_nvfp4_quantize(w.v, gs, vv, sv);
  } else {
    ct_fp4_options opt;
    opt.allow_nonfinite = j.allow_nonfinite;
    try {
      ct_mxfp4_quantize(w.v, vv, sv, opt);
    } catch (qtl::value_error const&) {
      check_finite(w.v, false);  // the tool's own words for a NaN/Inf weight
      throw;
    }
  }
  // outs: weight_packed, weight_scale, [weight_global_scale]; ModelOpt: weight, weight_scale,
  // weight_scale_2 = 1 / weight_global_scale (ModelOpt's per-tensor scale multiplies)
  s.file->pwrite_all(values.data(), values.size(), s.tensors[j.outs[0]].offset);
  s.file->pwrite_all(scales.data(), scales.size(), s.tensors[j.outs[1]].offset);
  if constexpr (F::has_global_scale) {
    float const per_tensor = j.modelopt ? 1.0f / gs : gs;
    s.file->pwrite_all(&per_tensor, sizeof per_tensor, s.tensors[j.outs[2]].offset);
  }
}

/// compressed-tensors MXFP8 by qtl::ct_mxfp8_quantize: weight F8_E4M3 [N, K] and weight_scale U8
/// [N, K/32] (E8M0 exponents); the blocks' max pass refuses NaN/Inf.
template <class T>
void mxfp8_weight(job& j, shard_plan const& s) {
  aligned_weight<T> w(*j.in);
  index_t const n = w.v.extent[0];
  index_t const k = w.v.extent[1];
  auto const values = thread_scratch<float8_e4m3fn_t>(static_cast<std::size_t>(n * k));
  auto const scales = thread_scratch<float8_e8m0fnu_t>(static_cast<std::size_t>(n * (k / ct_mxfp8_block)));
  ct_fp4_options opt;
  opt.allow_nonfinite = j.allow_nonfinite;
  try {
    ct_mxfp8_quantize(w.v, make_view(values.data(), n, k), make_view(scales.data(), n, k / ct_mxfp8_block), opt);
  } catch (qtl::value_error const&) {
    check_finite(w.v, false);  // the tool's own words for a NaN/Inf weight
    throw;
  }
  s.file->pwrite_all(values.data(), values.size(), s.tensors[j.outs[0]].offset);
  s.file->pwrite_all(scales.data(), scales.size(), s.tensors[j.outs[1]].offset);
}

/// FP8 E4M3 weights [N, K] and their F32 scales by qtl::fp8_checkpoint_quantize, 128 rows (one band
/// of blocks) at a time, each band written at its offset once quantized (no whole-tensor buffer).
/// The NaN/Inf refusal rides in the op's amax passes (the tensor scheme's: the whole weight's, here,
/// unless a fused group's was taken by share_group_amax, whose pass refused them), in the tool's
/// words.
template <class T>
void fp8_weight(job& j, shard_plan const& s, fp8_scheme scheme) {
  aligned_weight<T> w(*j.in);
  index_t const n = w.v.extent[0];
  index_t const k = w.v.extent[1];
  constexpr index_t b = 128;
  fp8_checkpoint_options opt;
  opt.scheme = scheme == fp8_scheme::tensor    ? fp8_checkpoint_scheme::tensor
               : scheme == fp8_scheme::channel ? fp8_checkpoint_scheme::channel
                                               : fp8_checkpoint_scheme::block;
  opt.rule = j.ct_rules ? fp8_block_rule::compressed_tensors : fp8_block_rule::hf;
  opt.block_n = opt.block_k = b;
  opt.allow_nonfinite = j.allow_nonfinite;
  if (scheme == fp8_scheme::tensor) {
    // of the fused layer's amax when it has other shards (share_group_amax): the engines'
    // requantization with the max scale then changes nothing
    opt.tensor_amax = j.group_amax ? *j.group_amax : finite_amax(w.v, j.allow_nonfinite);
  }
  auto const q = thread_scratch<float8_e4m3fn_t>(static_cast<std::size_t>(std::min(b, n) * k));
  std::vector<float> scales(static_cast<std::size_t>(fp8_checkpoint_scale_count(n, k, opt)));
  for (index_t n0 = 0; n0 < n; n0 += b) {
    index_t const c = std::min(b, n - n0);
    view2d<T const> rows = make_view(&w.v(n0, 0), c, k);
    rows.stride[0] = w.v.stride[0];
    std::span<float> band(scales);  // tensor: its one scale
    if (scheme == fp8_scheme::channel) {
      band = band.subspan(static_cast<std::size_t>(n0), static_cast<std::size_t>(c));
    } else if (scheme == fp8_scheme::block) {
      index_t const bk = (k + b - 1) / b;
      band = band.subspan(static_cast<std::size_t>(n0 / b * bk), static_cast<std::size_t>(bk));
    }
    opt.first_row = n0;
    try {
      fp8_checkpoint_quantize(rows, make_view(q.data(), c, k), band, opt);
    } catch (qtl::value_error const&) {
      check_finite(rows, false, n0);  // the band's first NaN/Inf in row-major order, in the tool's words
      throw;
    }
    release_rows(j, w.v, n0, c);
    s.file->pwrite_all(q.data(), static_cast<std::size_t>(c * k), s.tensors[j.outs[0]].offset + static_cast<std::uint64_t>(n0 * k));
  }
  s.file->pwrite_all(scales.data(), scales.size() * 4, s.tensors[j.outs[1]].offset);
}

/// Runs `fn()` with `j.in` the job's input as a row-major tensor of its shape: the input itself,
/// or, for a strided cut of an expert stack, its elements gathered into a buffer for the call
/// (`release_rows` leaves that buffer alone: it is no file mapping).
template <class Fn>
void with_input(job& j, Fn&& fn) {
  if (!j.cut) {
    fn();
    return;
  }
  tensor_info const* const view = j.in;
  std::size_t const elem = qtl::io::dtype_size(view->type);
  std::vector<std::byte> buf(view->numel() * elem);
  gather_part(*j.cut, j.stack->bytes, elem, buf.data());
  tensor_info gathered = *view;
  gathered.bytes = buf;
  j.in = &gathered;
  struct restore {
    job& j;
    tensor_info const* view;
    ~restore() { j.in = view; }
  } const back{j, view};
  fn();
}

}  // namespace

void share_group_amax(std::vector<job>& jobs, unsigned threads) {
  std::map<std::string_view, std::size_t> shards_of;
  for (auto const& j : jobs) {
    if (!j.scale_group.empty()) {
      ++shards_of[j.scale_group];
    }
  }
  std::vector<std::size_t> todo;  // the jobs of groups of two or more, in the input's order
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i].scale_group.empty() && shards_of[jobs[i].scale_group] > 1) {
      todo.push_back(i);
    }
  }
  if (todo.empty()) {
    return;
  }
  std::vector<float> amax(todo.size());
  worker_pool_jobs pool;
  pool.count = todo.size();
  pool.run = [&](std::size_t i) {
    job& j = jobs[todo[i]];
    with_input(j, [&] {
      with_float_type(j.in->type, [&](auto tag) {
        using T = typename decltype(tag)::type;
        aligned_weight<T> const w(*j.in);
        amax[i] = finite_amax(w.v, j.allow_nonfinite);  // the writer takes this pass's refusal
      });
    });
    release(j.in->bytes);
  };
  pool.bytes = [&](std::size_t i) { return static_cast<std::uint64_t>(jobs[todo[i]].in->bytes.size()); };
  pool.describe = [&](std::size_t i) { return jobs[todo[i]].in->name; };
  worker_pool_result const r = run_worker_pool(threads, pool);
  if (r.failed) {
    throw data_error(r.first_error);
  }
  std::map<std::string_view, float> group_amax;
  for (std::size_t i = 0; i < todo.size(); ++i) {
    float& m = group_amax[jobs[todo[i]].scale_group];
    m = std::max(m, amax[i]);  // amax >= 0, never NaN
  }
  for (std::size_t i : todo) {
    jobs[i].group_amax = group_amax[jobs[i].scale_group];
  }
}

void write_job(job& j, shard_plan const& s, fp8_scheme scheme) {
  with_input(j, [&] {
    if (j.kind == job_kind::copy) {
      write_copy(j, s);
    } else if (j.kind == job_kind::gptq) {
      write_gptq(j, s);
    } else if (j.kind == job_kind::ct_pack) {
      write_ct_pack(j, s);
    } else if (j.kind == job_kind::nvfp4 || j.kind == job_kind::mxfp4) {
      write_fp4(j, s);
    } else if (j.kind == job_kind::mxfp8) {
      with_float_type(j.in->type, [&](auto tag) { mxfp8_weight<typename decltype(tag)::type>(j, s); });
    } else {
      write_fp8(j, s, scheme);
    }
  });
}

void write_copy(job const& j, shard_plan const& s) {
  if (j.cut) {  // a gathered buffer: written whole, no file pages to release
    s.file->pwrite_all(j.in->bytes.data(), j.in->bytes.size(), s.tensors[j.outs[0]].offset);
    return;
  }
  copy_released(j.in->bytes, *s.file, s.tensors[j.outs[0]].offset);
}

void write_gptq(job& j, shard_plan const& s) {
  with_float_type(j.in->type, [&](auto tag) { gptq_weight<typename decltype(tag)::type>(j, s); });
}

void write_ct_pack(job& j, shard_plan const& s) {
  with_float_type(j.in->type, [&](auto tag) { ct_pack_weight<typename decltype(tag)::type>(j, s); });
}

void write_fp4(job& j, shard_plan const& s) {
  with_float_type(j.in->type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    j.kind == job_kind::nvfp4 ? fp4_weight<nvfp4, T>(j, s) : fp4_weight<mxfp4, T>(j, s);
  });
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
