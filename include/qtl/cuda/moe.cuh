#pragma once
/// \file
/// CUDA kernels and launchers of qtl/moe.hpp: the trtllm-gen FP4 MoE static weight preparation,
/// vLLM's FP4 MoE zero padding (`align_fp4_moe_weights_for_fi`, `align_fp4_moe_hidden_dim_for_fi`,
/// `pad_nvfp4_weight_for_cutlass`) and its CuteDSL row orders (`interleave_linear_and_gate`,
/// `reorder_w13_to_w31_for_flashinfer_cutedsl`) and the trtllm-gen MXINT4 MoE preparation with its
/// inverse on device memory, one launch per tensor for all experts. Each destination row (weights) or 4-byte word
/// (scales) computes its source through the host header's closed forms (`w3w1_row_source`, `w2_row_source`,
/// `blockscale_position_of`, `moe_row_map`), so no index vector is uploaded and device bytes equal host bytes
/// (test/cuda/moe_test.cu):
///
///     weights: block per destination row (e, n):  out[e][n][:] = in[e][source(n)][:]   (16-byte copies)
///     scales:  thread per word o of expert e:     (n, k) = position_of(o);  4 bytes in[e][source(n)][k..k+3]
///     row maps: block per destination row (e, n): in[e][map.source(n)][c] for c < in's columns, else 0
///     trtllm-gen layouts (MXINT4 and kin): thread per 16 prepared weight bytes / per 4 prepared
///               scales, its source bytes through `trtllm_row_map`, `block_layout_offset`'s inverse and
///               `blockscale_position_of`
///
/// Launchers take a `cudaStream_t` and return `cudaError_t` (`cudaErrorInvalidValue` for what the
/// host would reject, before anything is enqueued); they never throw or synchronise.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/moe.cuh> needs nvcc; host code includes <qtl/moe.hpp>"
#endif  // ^^^ __CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include <qtl/blockscale.hpp>
#include <qtl/cuda/launch.cuh>
#include <qtl/macros.hpp>
#include <qtl/moe.hpp>
#include <qtl/moe_trtllm.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda {

namespace detail {

inline constexpr int moe_row_threads = 128;
inline constexpr int moe_word_threads = launch_policy::threads;

// Which row map a tensor takes: GEMM2's shuffle, or GEMM1's (gated or not).
enum class moe_rows : int { w2 = 0, w3w1_gated = 1, w3w1 = 2 };

template <int EpilogueTileM>
QTL_HOST_DEVICE constexpr index_t moe_row_source(moe_rows map, index_t n, index_t rows) {
  return map == moe_rows::w2 ? w2_row_source<EpilogueTileM>(n)
                             : w3w1_row_source<EpilogueTileM>(n, rows, map == moe_rows::w3w1_gated);
}

template <int EpilogueTileM, class T>
QTL_KERNEL void moe_gather_rows_kernel(view3d<T const> in, view3d<T> out, moe_rows map) {
  index_t const rows = in.extent[1];
  index_t const width = in.extent[2];  // bytes
  index_t const total = in.extent[0] * rows;
  for (index_t r = blockIdx.x; r < total; r += gridDim.x) {
    index_t const e = r / rows;
    index_t const n = r % rows;
    auto const* src = reinterpret_cast<unsigned char const*>(&in(e, moe_row_source<EpilogueTileM>(map, n, rows), 0));
    auto* dst = reinterpret_cast<unsigned char*>(&out(e, n, 0));
    if ((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) % 16 == 0 && width % 16 == 0) {
      for (index_t i = threadIdx.x; i < width / 16; i += blockDim.x) {
        reinterpret_cast<::uint4*>(dst)[i] = reinterpret_cast<::uint4 const*>(src)[i];
      }
    } else {
      for (index_t i = threadIdx.x; i < width; i += blockDim.x) {
        dst[i] = src[i];
      }
    }
  }
}

inline unsigned moe_grid(index_t items, int per_block) {
  return grid_stride_blocks(items, per_block, launch_policy::wide_grid_stride_cap);
}

template <class In, class Out>
bool moe_tensor_ok(view3d<In> const& in, view3d<Out> const& out, index_t e, index_t rows, index_t width,
                   bool is_scale) {
  index_t const want[3] = {e, rows, width};
  for (int d = 0; d < 3; ++d) {
    if (in.extent[d] != want[d] || out.extent[d] != want[d]) {
      return false;
    }
  }
  if (in.stride[2] != 1 || out.stride[2] != 1 || (is_scale && !out.is_contiguous())) {
    return false;
  }
  return !qtl::views_overlap(in, out);
}

// A row map (zero padding or a row order) of one tensor of every expert: a block per destination
// row (e, n), its threads over the row's bytes: the source row's (`moe_row_map::source`) where it
// has them, zeros elsewhere.
template <class T>
QTL_KERNEL void moe_pad_rows_kernel(view3d<T const> in, view3d<T> out, moe_row_map map) {
  index_t const out_rows = out.extent[1];
  index_t const total = out.extent[0] * out_rows;
  index_t const cols = in.extent[2];
  index_t const out_cols = out.extent[2];
  for (index_t r = blockIdx.x; r < total; r += gridDim.x) {
    index_t const e = r / out_rows;
    index_t const n = r % out_rows;
    index_t const src = map.source(n);
    auto const* s = src >= 0 ? reinterpret_cast<unsigned char const*>(&in(e, src, 0)) : nullptr;
    auto* d = reinterpret_cast<unsigned char*>(&out(e, n, 0));
    for (index_t c = threadIdx.x; c < out_cols; c += blockDim.x) {
      d[c] = s != nullptr && c < cols ? s[c] : static_cast<unsigned char>(0);
    }
  }
}

// The host checks of the padding ops without exceptions: shapes as the plan says, innermost
// strides 1, no overlap, data where there are elements.
template <class In, class Out>
bool pad_pair_ok(view3d<In> const& in, index_t const (&want_in)[3], view3d<Out> const& out,
                 index_t const (&want_out)[3]) {
  for (int d = 0; d < 3; ++d) {
    if (in.extent[d] != want_in[d] || out.extent[d] != want_out[d]) {
      return false;
    }
  }
  if ((in.stride[2] != 1 && want_in[2] > 1) || (out.stride[2] != 1 && want_out[2] > 1)) {
    return false;
  }
  return !null_with_data(in) && !null_with_data(out) && !qtl::views_overlap(in, out);
}

template <class In, class Out>
cudaError_t launch_pad(view3d<In> const& in, view3d<Out> const& out, moe_row_map map, cudaStream_t stream) {
  if (out.size() == 0) {
    return cudaSuccess;
  }
  return launch(moe_pad_rows_kernel<Out>, moe_grid(out.extent[0] * out.extent[1], 1), moe_row_threads, 0, stream,
                view3d<Out const>(in), out, map);
}

// The four launches of a checked FP4 MoE padding plan (qtl::detail::fp4_moe_pad_plan).
template <class WIn, class SIn, class WOut, class SOut>
cudaError_t run_fp4_moe_pad(qtl::detail::fp4_moe_pad_plan const& p, trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                            trtllm_fp4_moe_tensors<WOut, SOut> const& out, cudaStream_t stream) {
  auto const& xi = p.in.extents;
  auto const& xo = p.out.extents;
  if (!pad_pair_ok(in.gemm1_weights, xi[0], out.gemm1_weights, xo[0]) ||
      !pad_pair_ok(in.gemm1_scales, xi[1], out.gemm1_scales, xo[1]) ||
      !pad_pair_ok(in.gemm2_weights, xi[2], out.gemm2_weights, xo[2]) ||
      !pad_pair_ok(in.gemm2_scales, xi[3], out.gemm2_scales, xo[3])) {
    return cudaErrorInvalidValue;
  }
  moe_row_map const m13{moe_row_map::kind::padded, p.rows13, p.padded13};
  moe_row_map const m2{moe_row_map::kind::padded, p.rows2, p.padded2};
  if (cudaError_t const st = launch_pad(in.gemm1_weights, out.gemm1_weights, m13, stream); st != cudaSuccess) {
    return st;
  }
  if (cudaError_t const st = launch_pad(in.gemm1_scales, out.gemm1_scales, m13, stream); st != cudaSuccess) {
    return st;
  }
  if (cudaError_t const st = launch_pad(in.gemm2_weights, out.gemm2_weights, m2, stream); st != cudaSuccess) {
    return st;
  }
  return launch_pad(in.gemm2_scales, out.gemm2_scales, m2, stream);
}

// H and I as vLLM reads them (twice the last extents of w13 and w2); false when they or `a` cannot
// be padded (the host function throws there).
template <class W, class S>
bool fp4_moe_sizes(trtllm_fp4_moe_tensors<W, S> const& in, index_t a, index_t& h, index_t& i) {
  h = 2 * in.gemm1_weights.extent[2];
  i = 2 * in.gemm2_weights.extent[2];
  return a > 0 && h % 16 == 0 && i % 16 == 0;
}

// `piece` bytes (16 or 1), each XOR 0x88 (uint4b8 <-> int4) with `flip`; one uint4 where 16 bytes
// are 16-byte aligned.
QTL_DEVICE void copy_piece(unsigned char* dst, unsigned char const* src, index_t piece, bool flip) {
  unsigned char const x = flip ? 0x88 : 0;
  if (piece == 16 && (reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) % 16 == 0) {
    ::uint4 v = *reinterpret_cast<::uint4 const*>(src);
    std::uint32_t const x4 = x * 0x01010101u;
    v.x ^= x4;
    v.y ^= x4;
    v.z ^= x4;
    v.w ^= x4;
    *reinterpret_cast<::uint4*>(dst) = v;
    return;
  }
  for (index_t c = 0; c < piece; ++c) {
    dst[c] = static_cast<unsigned char>(src[c] ^ x);
  }
}

// Weights of every expert in trtllm-gen's layout (`qtl::detail::rows_to_blocks`): a thread per
// `piece` bytes (16 where `bk` allows, else 1) of the prepared buffer (expert-major, then
// `block_layout_offset`'s [K/bk, rows, bk]), with its checkpoint bytes; `Inverse` copies the
// other way. Bytes XOR 0x88 with `flip`.
template <bool Inverse, class L, class B>
QTL_KERNEL void rows_blocks_kernel(view3d<L> lin, B* blk, trtllm_row_map map, index_t bk, index_t piece, bool flip) {
  index_t const rows = lin.extent[1];
  index_t const per_expert = rows * lin.extent[2];
  index_t const pieces = lin.extent[0] * per_expert / piece;
  for (index_t t = index_t(blockIdx.x) * blockDim.x + threadIdx.x; t < pieces; t += index_t(gridDim.x) * blockDim.x) {
    index_t const o = piece * t;
    index_t const e = o / per_expert;
    index_t const r = o % per_expert;
    index_t const n = (r / bk) % rows;
    index_t const k = r / (rows * bk) * bk + r % bk;
    auto* const l = &lin(e, map.source(n), k);
    auto* const b = blk + o;
    if constexpr (Inverse) {
      copy_piece(reinterpret_cast<unsigned char*>(l), reinterpret_cast<unsigned char const*>(b), piece, flip);
    } else {
      copy_piece(reinterpret_cast<unsigned char*>(b), reinterpret_cast<unsigned char const*>(l), piece, flip);
    }
  }
}

// Four scales (one word of the 128x4 layout): one 4- or 8-byte load and store where aligned.
template <class T>
QTL_DEVICE void copy_word(T* dst, T const* src) {
  constexpr std::size_t bytes = 4 * sizeof(T);
  using W = std::conditional_t<bytes == 4, std::uint32_t, std::conditional_t<bytes == 8, std::uint64_t, void>>;
  if constexpr (!std::is_void_v<W>) {
    if ((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) % bytes == 0) {
      *reinterpret_cast<W*>(dst) = *reinterpret_cast<W const*>(src);
      return;
    }
  }
  QTL_UNROLL
  for (int c = 0; c < 4; ++c) {
    dst[c] = src[c];
  }
}

// Scales of every expert (`qtl::detail::scale_words`): a thread per word of the 128x4 layout (4
// scales of one row, consecutive K-blocks), its checkpoint row through `map`.
template <bool Inverse, class L, class B>
QTL_KERNEL void scale_words_kernel(view3d<L> lin, B* blk, trtllm_row_map map) {
  index_t const rows = lin.extent[1];
  index_t const cols = lin.extent[2];
  index_t const per_expert = rows * cols;
  index_t const words = lin.extent[0] * per_expert / 4;
  for (index_t w = index_t(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += index_t(gridDim.x) * blockDim.x) {
    index_t const o = 4 * w;
    index_t const e = o / per_expert;
    blockscale_position const p = blockscale_position_of<layout_128x4>(o % per_expert, cols);
    auto* const l = &lin(e, map.source(p.m), p.k);
    auto* const b = blk + o;
    if constexpr (Inverse) {
      copy_word(l, b);
    } else {
      copy_word(b, l);
    }
  }
}

// The host checks of one weight tensor of a layout op without exceptions: shapes equal, rows a
// multiple of the shuffle block (of 128 for scales), K of bk (scales: of 4), innermost strides 1,
// the prepared side contiguous, no overlap.
template <class L, class B>
bool layout_pair_ok(view3d<L> const& lin, view3d<B> const& blk, trtllm_row_map const& map, index_t bk, bool is_scale) {
  index_t const rows = lin.extent[1];
  index_t const cols = lin.extent[2];
  if (rows % (is_scale ? 128 : map.block_rows()) != 0 || map.rows != rows ||
      (is_scale ? cols % 4 != 0 : (bk <= 0 || cols % bk != 0))) {
    return false;
  }
  return moe_tensor_ok(lin, blk, lin.extent[0], rows, cols, true) && !null_with_data(lin) && !null_with_data(blk);
}

template <bool Inverse, class L, class B>
cudaError_t launch_rows_blocks(view3d<L> const& lin, B* blk, trtllm_row_map const& map, index_t bk, bool flip,
                               cudaStream_t stream) {
  index_t const piece = bk % 16 == 0 ? 16 : 1;
  index_t const n = lin.size() / piece;
  if (n == 0) {
    return cudaSuccess;
  }
  return launch(rows_blocks_kernel<Inverse, L, B>, moe_grid(n, moe_word_threads), moe_word_threads, 0, stream, lin, blk,
                map, bk, piece, flip);
}

template <bool Inverse, class L, class B>
cudaError_t launch_scale_words(view3d<L> const& lin, B* blk, trtllm_row_map const& map, cudaStream_t stream) {
  index_t const n = lin.size() / 4;
  if (n == 0) {
    return cudaSuccess;
  }
  return launch(scale_words_kernel<Inverse, L, B>, moe_grid(n, moe_word_threads), moe_word_threads, 0, stream, lin, blk,
                map);
}

// The four launches of one MXINT4 direction: `lin` the checkpoint-side tensors, `blk` the
// prepared ones.
template <bool Inverse, class WL, class SL, class WB, class SB>
cudaError_t run_mxint4(trtllm_mxint4_moe_shape const& shape, trtllm_fp4_moe_tensors<WL, SL> const& lin,
                       trtllm_fp4_moe_tensors<WB, SB> const& blk, cudaStream_t stream) {
  index_t const e = shape.num_experts;
  index_t const h = shape.hidden_size;
  index_t const i = shape.intermediate_size;
  constexpr index_t bk = qtl::detail::mxint4_block_k;
  auto const m1 = shape.gemm1_rows();
  auto const m2 = shape.gemm2_rows();
  index_t const want[4][3] = {{e, 2 * i, h / 2}, {e, 2 * i, h / 32}, {e, h, i / 2}, {e, h, i / 32}};
  view3d<WL> const* const lw[2] = {&lin.gemm1_weights, &lin.gemm2_weights};
  view3d<SL> const* const ls[2] = {&lin.gemm1_scales, &lin.gemm2_scales};
  for (int k = 0; k < 2; ++k) {
    for (int d = 0; d < 3; ++d) {
      if (lw[k]->extent[d] != want[2 * k][d] || ls[k]->extent[d] != want[2 * k + 1][d]) {
        return cudaErrorInvalidValue;
      }
    }
  }
  if (!shape.valid() || !layout_pair_ok(lin.gemm1_weights, blk.gemm1_weights, m1, bk, false) ||
      !layout_pair_ok(lin.gemm1_scales, blk.gemm1_scales, m1, 0, true) ||
      !layout_pair_ok(lin.gemm2_weights, blk.gemm2_weights, m2, bk, false) ||
      !layout_pair_ok(lin.gemm2_scales, blk.gemm2_scales, m2, 0, true)) {
    return cudaErrorInvalidValue;
  }
  bool const flip = shape.uint4b8;
  if (cudaError_t const st =
          launch_rows_blocks<Inverse>(lin.gemm1_weights, blk.gemm1_weights.data, m1, bk, flip, stream);
      st != cudaSuccess) {
    return st;
  }
  if (cudaError_t const st =
          launch_rows_blocks<Inverse>(lin.gemm2_weights, blk.gemm2_weights.data, m2, bk, flip, stream);
      st != cudaSuccess) {
    return st;
  }
  if (cudaError_t const st = launch_scale_words<Inverse>(lin.gemm1_scales, blk.gemm1_scales.data, m1, stream);
      st != cudaSuccess) {
    return st;
  }
  return launch_scale_words<Inverse>(lin.gemm2_scales, blk.gemm2_scales.data, m2, stream);
}

// `in` -> `out` forward with `map` (its rows set from `in`): checked and launched separately, so
// that an op of several tensors checks them all before it enqueues anything.
template <class In, class Out>
struct layout_job {
  view3d<In> in;
  view3d<Out> out;
  trtllm_row_map map;
  index_t bk;

  layout_job(view3d<In> i, view3d<Out> o, trtllm_row_map m, index_t b) : in(i), out(o), map(m), bk(b) {
    map.rows = in.extent[1];
  }
  bool ok(bool is_scale = false) const { return layout_pair_ok(in, out, map, bk, is_scale); }
  /// `Inverse`: `out` (the shuffled side) back into `in` (the checkpoint side).
  template <bool Inverse = false>
  cudaError_t weights(cudaStream_t stream) const {
    return launch_rows_blocks<Inverse>(in, out.data, map, bk, false, stream);
  }
  template <bool Inverse = false>
  cudaError_t scales(cudaStream_t stream) const {
    return launch_scale_words<Inverse>(in, out.data, map, stream);
  }
};

// Two weight tensors: both checked, then launched.
template <class In, class Out>
cudaError_t run_pair(layout_job<In, Out> const& a, layout_job<In, Out> const& b, cudaStream_t stream) {
  if (!a.ok() || !b.ok()) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t const st = a.weights(stream); st != cudaSuccess) {
    return st;
  }
  return b.weights(stream);
}

// One weight tensor of `trtllm_moe_shuffle_rows` (`Inverse`: unshuffle), checked.
template <bool Inverse, class In, class Out>
cudaError_t layout_rows(view3d<In> const& in, view3d<Out> const& out, trtllm_row_map map, index_t bk, bool flip,
                        cudaStream_t stream) {
  if constexpr (Inverse) {
    map.rows = out.extent[1];
    if (!layout_pair_ok(out, in, map, bk, false)) {
      return cudaErrorInvalidValue;
    }
    return launch_rows_blocks<true>(out, in.data, map, bk, flip, stream);
  } else {
    map.rows = in.extent[1];
    if (!layout_pair_ok(in, out, map, bk, false)) {
      return cudaErrorInvalidValue;
    }
    return launch_rows_blocks<false>(in, out.data, map, bk, flip, stream);
  }
}

}  // namespace detail

/// Device `qtl::prepare_static_weights_for_trtllm_fp4_moe` (with `EpilogueTileM`, 128 in the
/// reference): the four prepared tensors of `out` from `in`, shapes as `trtllm_fp4_moe_shape`
/// says, the same bytes as the host plan. Four launches (one per tensor), each over all experts.
/// @return cudaErrorInvalidValue if `shape.valid()` is false, a tensor's shape differs, an
///         innermost stride is not 1, the output scales are not contiguous or an output overlaps
///         its input; otherwise the status of the launches.
template <int EpilogueTileM = 128, blockscale_byte WOut, blockscale_byte SOut, readable_as<WOut> WIn,
          readable_as<SOut> SIn>
cudaError_t prepare_static_weights_for_trtllm_fp4_moe(trtllm_fp4_moe_shape const& shape,
                                                      trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                                      trtllm_fp4_moe_tensors<WOut, SOut> const& out,
                                                      cudaStream_t stream = 0) {
  if (!shape.valid()) {
    return cudaErrorInvalidValue;
  }
  index_t const e = shape.num_experts;
  index_t const h = shape.hidden_size;
  index_t const i = shape.intermediate_size;
  index_t const r1 = shape.gemm1_rows();
  if (!detail::moe_tensor_ok(in.gemm1_weights, out.gemm1_weights, e, r1, h / 2, false) ||
      !detail::moe_tensor_ok(in.gemm1_scales, out.gemm1_scales, e, r1, h / 16, true) ||
      !detail::moe_tensor_ok(in.gemm2_weights, out.gemm2_weights, e, h, i / 2, false) ||
      !detail::moe_tensor_ok(in.gemm2_scales, out.gemm2_scales, e, h, i / 16, true)) {
    return cudaErrorInvalidValue;
  }
  if (e == 0) {
    return cudaSuccess;
  }
  auto const g1 = shape.gated ? detail::moe_rows::w3w1_gated : detail::moe_rows::w3w1;
  auto const g2 = detail::moe_rows::w2;
  using w_t = WOut;
  using s_t = SOut;
  if (cudaError_t const st =
          launch(detail::moe_gather_rows_kernel<EpilogueTileM, w_t>, detail::moe_grid(e * r1, 1),
                 detail::moe_row_threads, 0, stream, view3d<w_t const>(in.gemm1_weights), out.gemm1_weights, g1);
      st != cudaSuccess) {
    return st;
  }
  trtllm_row_map const m1{shape.gated ? trtllm_row_map::kind::w3w1_gated : trtllm_row_map::kind::shuffle, r1,
                          EpilogueTileM};
  trtllm_row_map const m2{trtllm_row_map::kind::shuffle, h, EpilogueTileM};
  if (cudaError_t const st =
          detail::launch_scale_words<false>(view3d<s_t const>(in.gemm1_scales), out.gemm1_scales.data, m1, stream);
      st != cudaSuccess) {
    return st;
  }
  if (cudaError_t const st =
          launch(detail::moe_gather_rows_kernel<EpilogueTileM, w_t>, detail::moe_grid(e * h, 1),
                 detail::moe_row_threads, 0, stream, view3d<w_t const>(in.gemm2_weights), out.gemm2_weights, g2);
      st != cudaSuccess) {
    return st;
  }
  return detail::launch_scale_words<false>(view3d<s_t const>(in.gemm2_scales), out.gemm2_scales.data, m2, stream);
}

/// Device `qtl::align_fp4_moe_weights_for_fi`: the same bytes, four launches (one per tensor)
/// over all experts; the output extents and Ip are `qtl::align_fp4_moe_weights_for_fi_padding`'s.
/// @return cudaErrorInvalidValue for what the host function rejects (before anything is
///         enqueued); otherwise the status of the launches.
template <class WIn, class SIn, blockscale_byte WOut, blockscale_byte SOut>
cudaError_t align_fp4_moe_weights_for_fi(trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                         trtllm_fp4_moe_tensors<WOut, SOut> const& out, bool is_act_and_mul,
                                         index_t min_alignment = 16, cudaStream_t stream = 0) {
  index_t h = 0;
  index_t i = 0;
  if (!detail::fp4_moe_sizes(in, min_alignment, h, i)) {
    return cudaErrorInvalidValue;
  }
  return detail::run_fp4_moe_pad(
      qtl::detail::align_intermediate_plan(in.gemm1_weights.extent[0], h, i, is_act_and_mul ? 2 : 1, min_alignment), in,
      out, stream);
}

/// Device `qtl::align_fp4_moe_hidden_dim_for_fi`, as `align_fp4_moe_weights_for_fi` above; the
/// output extents and Hp are `qtl::align_fp4_moe_hidden_dim_for_fi_padding`'s.
template <class WIn, class SIn, blockscale_byte WOut, blockscale_byte SOut>
cudaError_t align_fp4_moe_hidden_dim_for_fi(trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                            trtllm_fp4_moe_tensors<WOut, SOut> const& out, index_t min_alignment = 256,
                                            cudaStream_t stream = 0) {
  index_t h = 0;
  index_t i = 0;
  if (!detail::fp4_moe_sizes(in, min_alignment, h, i)) {
    return cudaErrorInvalidValue;
  }
  return detail::run_fp4_moe_pad(
      qtl::detail::align_hidden_plan(in.gemm1_weights.extent[0], in.gemm1_weights.extent[1], h, i, min_alignment), in,
      out, stream);
}

/// Device `qtl::pad_nvfp4_weight_for_cutlass`: one launch; the output's shape is
/// `qtl::pad_nvfp4_weight_for_cutlass_shape`'s (whose `padding_bytes` is the engine's second result).
/// @return cudaErrorInvalidValue for what the host function rejects; else the launch's status.
template <blockscale_byte Out, readable_as<Out> In>
cudaError_t pad_nvfp4_weight_for_cutlass(view2d<In> weight, view2d<Out> out, index_t alignment = 32,
                                         cudaStream_t stream = 0) {
  if (alignment <= 0) {
    return cudaErrorInvalidValue;
  }
  nvfp4_cutlass_padding const p = pad_nvfp4_weight_for_cutlass_shape(weight.extent[0], weight.extent[1], alignment);
  view3d<In> const in3 = qtl::detail::as_rank3(weight);
  view3d<Out> const out3 = qtl::detail::as_rank3(out);
  if (!detail::pad_pair_ok(in3, {1, weight.extent[0], weight.extent[1]}, out3, {1, p.rows, p.col_bytes})) {
    return cudaErrorInvalidValue;
  }
  return detail::launch_pad(in3, out3, {moe_row_map::kind::padded, weight.extent[0], p.rows}, stream);
}

/// Device `qtl::interleave_linear_and_gate`: one launch. @return cudaErrorInvalidValue for what the
/// host function rejects; else the launch's status.
template <blockscale_byte Out, readable_as<Out> In>
cudaError_t interleave_linear_and_gate(view3d<In> x, view3d<Out> out, index_t group_size = 64,
                                       cudaStream_t stream = 0) {
  index_t const want[3] = {x.extent[0], x.extent[1], x.extent[2]};
  if (group_size <= 0 || x.extent[1] % (2 * group_size) != 0 || !detail::pad_pair_ok(x, want, out, want)) {
    return cudaErrorInvalidValue;
  }
  return detail::launch_pad(x, out, {moe_row_map::kind::interleave_linear_and_gate, x.extent[1], group_size}, stream);
}

/// Device `qtl::swap_w13_to_w31` and each tensor of `qtl::reorder_w1w3_to_w3w1`, on the byte view
/// `[outer, S, inner]` of a tensor split along one dimension (outer: the dimensions before it,
/// inner: the bytes after it): the halves of S swapped, one launch. @return
/// cudaErrorInvalidValue for an odd S, a shape mismatch or an overlap; else the launch's status.
template <blockscale_byte Out, readable_as<Out> In>
cudaError_t swap_halves(view3d<In> x, view3d<Out> out, cudaStream_t stream = 0) {
  index_t const want[3] = {x.extent[0], x.extent[1], x.extent[2]};
  if (x.extent[1] % 2 != 0 || !detail::pad_pair_ok(x, want, out, want)) {
    return cudaErrorInvalidValue;
  }
  return detail::launch_pad(x, out, {moe_row_map::kind::w13_to_w31, x.extent[1]}, stream);
}

/// Device `qtl::reorder_w13_to_w31_for_flashinfer_cutedsl`: two launches (weights, scales), each
/// over all experts. @return as `interleave_linear_and_gate` above.
template <blockscale_byte WOut, blockscale_byte SOut, readable_as<WOut> WIn, readable_as<SOut> SIn>
cudaError_t reorder_w13_to_w31_for_flashinfer_cutedsl(bool interleaved, view3d<WIn> w13, view3d<SIn> w13_scale,
                                                      view3d<WOut> w13_out, view3d<SOut> w13_scale_out,
                                                      cudaStream_t stream = 0) {
  index_t const rows = w13.extent[1];
  index_t const ww[3] = {w13.extent[0], rows, w13.extent[2]};
  index_t const ws[3] = {w13.extent[0], rows, w13_scale.extent[2]};
  if (rows % 2 != 0 || !detail::pad_pair_ok(w13, ww, w13_out, ww) ||
      !detail::pad_pair_ok(w13_scale, ws, w13_scale_out, ws)) {
    return cudaErrorInvalidValue;
  }
  moe_row_map const map{interleaved ? moe_row_map::kind::w13_to_w31_interleaved : moe_row_map::kind::w13_to_w31, rows};
  if (cudaError_t const st = detail::launch_pad(w13, w13_out, map, stream); st != cudaSuccess) {
    return st;
  }
  return detail::launch_pad(w13_scale, w13_scale_out, map, stream);
}

/// Device `qtl::trtllm_moe_shuffle_rows`: one launch over all experts. @return
/// cudaErrorInvalidValue for what the host function rejects; else the launch's status.
template <blockscale_byte Out, readable_as<Out> In>
cudaError_t trtllm_moe_shuffle_rows(view3d<In> in, view3d<Out> out, trtllm_row_map map, index_t block_k,
                                    bool flip = false, cudaStream_t stream = 0) {
  return detail::layout_rows<false>(in, out, map, block_k, flip, stream);
}

/// Device `qtl::trtllm_moe_unshuffle_rows`, as above.
template <blockscale_byte Out, readable_as<Out> In>
cudaError_t trtllm_moe_unshuffle_rows(view3d<In> in, view3d<Out> out, trtllm_row_map map, index_t block_k,
                                      bool flip = false, cudaStream_t stream = 0) {
  return detail::layout_rows<true>(in, out, map, block_k, flip, stream);
}

/// Device `qtl::prepare_static_weights_for_trtllm_mxint4_moe`: the same bytes, four launches (one
/// per tensor) over all experts. @return cudaErrorInvalidValue for what the host function rejects
/// (before anything is enqueued); otherwise the status of the launches.
template <blockscale_byte WOut, mxint4_scale_element SOut, readable_as<WOut> WIn, readable_as<SOut> SIn>
cudaError_t prepare_static_weights_for_trtllm_mxint4_moe(trtllm_mxint4_moe_shape const& shape,
                                                         trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                                         trtllm_fp4_moe_tensors<WOut, SOut> const& out,
                                                         cudaStream_t stream = 0) {
  return detail::run_mxint4<false>(shape, in, out, stream);
}

/// Device `qtl::unprepare_static_weights_for_trtllm_mxint4_moe` (the inverse), as above.
template <blockscale_byte WOut, mxint4_scale_element SOut, readable_as<WOut> WIn, readable_as<SOut> SIn>
cudaError_t unprepare_static_weights_for_trtllm_mxint4_moe(trtllm_mxint4_moe_shape const& shape,
                                                           trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                                           trtllm_fp4_moe_tensors<WOut, SOut> const& out,
                                                           cudaStream_t stream = 0) {
  return detail::run_mxint4<true>(shape, out, in, stream);
}

/// Device `qtl::shuffle_deepseek_fp8_moe_weights`: two launches over all experts. @return
/// cudaErrorInvalidValue for what the host function rejects (before anything is enqueued); else
/// the launches' status.
template <blockscale_byte Out, readable_as<Out> In>
cudaError_t shuffle_deepseek_fp8_moe_weights(view3d<In> w13, view3d<In> w2, view3d<Out> w13_out, view3d<Out> w2_out,
                                             cudaStream_t stream = 0) {
  trtllm_row_map const map{trtllm_row_map::kind::shuffle, 0, 64};
  detail::layout_job<In, Out> const a(w13, w13_out, map, 128), b(w2, w2_out, map, 128);
  return detail::run_pair(a, b, stream);
}

/// Device `qtl::rotate_weights_for_fi_trtllm_fp8_per_tensor_moe`, as above.
template <blockscale_byte Out, readable_as<Out> In>
cudaError_t rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(view3d<In> gemm1_weights, view3d<In> gemm2_weights,
                                                            bool is_gated_activation, view3d<Out> gemm1_out,
                                                            view3d<Out> gemm2_out, cudaStream_t stream = 0) {
  detail::layout_job<In, Out> const a(gemm1_weights, gemm1_out, qtl::detail::gemm1_row_map(is_gated_activation),
                                      gemm1_weights.extent[2]);
  detail::layout_job<In, Out> const b(gemm2_weights, gemm2_out, qtl::detail::gemm1_row_map(false),
                                      gemm2_weights.extent[2]);
  return detail::run_pair(a, b, stream);
}

/// Device `qtl::convert_moe_weights_to_flashinfer_trtllm_block_layout` (out of place), as above.
template <blockscale_byte Out, readable_as<Out> In>
cudaError_t convert_moe_weights_to_flashinfer_trtllm_block_layout(view3d<In> w13_weight, view3d<In> w2_weight,
                                                                  bool is_gated_act_gemm, view3d<Out> w13_out,
                                                                  view3d<Out> w2_out, cudaStream_t stream = 0) {
  detail::layout_job<In, Out> const a(
      w13_weight, w13_out, qtl::detail::gemm1_row_map(is_gated_act_gemm, trtllm_row_map::kind::w1w3_gated), 128);
  detail::layout_job<In, Out> const b(w2_weight, w2_out, qtl::detail::gemm1_row_map(false), 128);
  return detail::run_pair(a, b, stream);
}

namespace detail {
// One direction of the MXFP8 shuffle: `lin` the checkpoint-side tensors, `blk` the shuffled ones.
template <bool Inverse, class WL, class SL, class WB, class SB>
cudaError_t run_mxfp8(trtllm_fp4_moe_tensors<WL, SL> const& lin, trtllm_fp4_moe_tensors<WB, SB> const& blk,
                      bool is_gated, cudaStream_t stream) {
  auto const m1 = qtl::detail::gemm1_row_map(is_gated);
  auto const m2 = qtl::detail::gemm1_row_map(false);
  layout_job<WL, WB> const w1(lin.gemm1_weights, blk.gemm1_weights, m1, lin.gemm1_weights.extent[2]);
  layout_job<WL, WB> const w2(lin.gemm2_weights, blk.gemm2_weights, m2, lin.gemm2_weights.extent[2]);
  layout_job<SL, SB> const s1(lin.gemm1_scales, blk.gemm1_scales, m1, 0);
  layout_job<SL, SB> const s2(lin.gemm2_scales, blk.gemm2_scales, m2, 0);
  index_t const e = lin.gemm1_weights.extent[0];
  bool const same = lin.gemm2_weights.extent[0] == e && lin.gemm1_scales.extent[0] == e &&
                    lin.gemm2_scales.extent[0] == e && lin.gemm1_scales.extent[1] == lin.gemm1_weights.extent[1] &&
                    lin.gemm2_scales.extent[1] == lin.gemm2_weights.extent[1];
  if (!same || !w1.ok() || !w2.ok() || !s1.ok(true) || !s2.ok(true)) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t const st = w1.template weights<Inverse>(stream); st != cudaSuccess) {
    return st;
  }
  if (cudaError_t const st = w2.template weights<Inverse>(stream); st != cudaSuccess) {
    return st;
  }
  if (cudaError_t const st = s1.template scales<Inverse>(stream); st != cudaSuccess) {
    return st;
  }
  return s2.template scales<Inverse>(stream);
}
}  // namespace detail

/// Device `qtl::shuffle_mxfp8_moe_weights`: four launches over all experts, as above.
template <blockscale_byte WOut, blockscale_byte SOut, readable_as<WOut> WIn, readable_as<SOut> SIn>
cudaError_t shuffle_mxfp8_moe_weights(trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                      trtllm_fp4_moe_tensors<WOut, SOut> const& out, bool is_gated,
                                      cudaStream_t stream = 0) {
  return detail::run_mxfp8<false>(in, out, is_gated, stream);
}

/// Device `qtl::unshuffle_mxfp8_moe_weights`, as above.
template <blockscale_byte WOut, blockscale_byte SOut, readable_as<WOut> WIn, readable_as<SOut> SIn>
cudaError_t unshuffle_mxfp8_moe_weights(trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                        trtllm_fp4_moe_tensors<WOut, SOut> const& out, bool is_gated,
                                        cudaStream_t stream = 0) {
  return detail::run_mxfp8<true>(out, in, is_gated, stream);
}

}  // namespace qtl::cuda
