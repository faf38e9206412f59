#pragma once
/// \file
/// CUDA kernels and stream-ordered launchers for `qtl/marlin.hpp`: `qtl::cuda::marlin::repack_gptq`
/// (dense and MoE: the expert dimension is the grid's y, one launch for all experts),
/// `repack_awq`, `unrepack_gptq` and `permute_scales`. Every thread computes one output word with
/// the host's element functions (`qtl::marlin::marlin_word`, `gptq_word_of_marlin`,
/// `scale_source`), so the words equal the host's bit for bit and any grid order gives the same
/// bytes. Views hold device pointers; Marlin-side buffers are contiguous.
///
/// Launchers return `cudaErrorInvalidValue`, before anything is enqueued, for shapes the layout
/// cannot take (K % 16, K % 32 with A8, N % 64, extents that do not match), null pointers with
/// non-empty views, act-order with the A8 layout, or more than 65535 experts; otherwise the status
/// of this launch (`qtl/cuda/launch.cuh`). They do not synchronise.
///
/// Unlike the host ops, the kernels cannot check that `sort_indices` is a permutation (it lives in
/// device memory): an index outside [0, K) is clamped into it, so that nothing is read out of
/// bounds, and the words it feeds are unspecified. Validate on the host where that matters.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#error "<qtl/cuda/marlin.cuh> needs nvcc; host code includes <qtl/marlin.hpp>"
#endif  // ^^^ !__CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>
#include <qtl/cuda/launch.cuh>
#include <qtl/macros.hpp>
#include <qtl/marlin.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda::marlin {
namespace detail {

using qtl::marlin::act_width;
using qtl::marlin::layout;

inline constexpr int block_threads = launch_policy::threads;
inline constexpr index_t max_experts = launch_limits::grid_yz;  // one grid row per expert

// One thread per Marlin word f of expert blockIdx.y: gathers its pf codes from the GPTQ qweight,
// through sort_indices (row sort_indices[k] for Marlin row k) when `Perm`.
template <int Bits, act_width A, bool Perm>
QTL_KERNEL void repack_gptq_kernel(view3d<std::int32_t const> qweight, std::int32_t const* sort_indices,
                                   std::int32_t* out, index_t K, index_t N) {
  using L = layout<Bits, A>;
  index_t const words = K * N / L::pack;
  index_t const f = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (f >= words) {
    return;
  }
  index_t const e = blockIdx.y;
  view2d<std::int32_t const> const q = batch_item(qweight, e);
  std::int32_t const* const s = Perm ? sort_indices + e * K : nullptr;
  auto const code = [&](index_t k, index_t n) {
    index_t src = k;
    if constexpr (Perm) {
      src = s[k];
      src = src < 0 ? 0 : src >= K ? K - 1 : src;
    }
    return qtl::marlin::gptq_code<Bits>(q, src, n);
  };
  out[e * words + f] = static_cast<std::int32_t>(qtl::marlin::marlin_word<L>(N, f, code));
}

template <int Bits, act_width A>
QTL_KERNEL void repack_awq_kernel(view2d<std::int32_t const> qweight, std::int32_t* out, index_t K, index_t N) {
  using L = layout<Bits, A>;
  index_t const f = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (f >= K * N / L::pack) {
    return;
  }
  auto const code = [&](index_t k, index_t n) { return qtl::marlin::awq_code<Bits>(qweight, k, n); };
  out[f] = static_cast<std::int32_t>(qtl::marlin::marlin_word<L>(N, f, code));
}

// One thread per GPTQ word (r, n); `inv` (device, K entries) maps checkpoint rows to Marlin rows.
template <int Bits, act_width A>
QTL_KERNEL void unrepack_gptq_kernel(std::int32_t const* m, std::int32_t const* inv, view2d<std::int32_t> qweight,
                                     index_t N) {
  using L = layout<Bits, A>;
  index_t const i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= qweight.size()) {
    return;
  }
  index_t const r = i / N, n = i % N;
  qweight(r, n) = static_cast<std::int32_t>(qtl::marlin::gptq_word_of_marlin<L>(m, inv, N, r, n));
}

template <class T>
QTL_KERNEL void permute_scales_kernel(view2d<T const> s, view2d<T> out, int grouped) {
  index_t const i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= s.size()) {
    return;
  }
  index_t const g = i / s.extent[1], n = i % s.extent[1];
  auto const kind = grouped != 0 ? qtl::marlin::scale_perm_kind::grouped : qtl::marlin::scale_perm_kind::single;
  out(g, n) = s(g, qtl::marlin::scale_source(kind, n));
}

inline dim3 grid_for(index_t items, index_t experts = 1) {
  return dim3(static_cast<unsigned>((items + block_threads - 1) / block_threads), static_cast<unsigned>(experts));
}

inline bool grid_fits(index_t items) { return (items + block_threads - 1) / block_threads < 0x7FFFFFFF; }

}  // namespace detail

/// GPU `qtl::marlin::repack_gptq` for E experts at once: qweight [E, K/pf, N], sort_indices (device,
/// E*K entries, expert e's at e*K) or null, out (device, contiguous [E, K/16, N*16/pf]).
template <int Bits, qtl::marlin::act_width A = qtl::marlin::act_width::a16>
cudaError_t repack_gptq(view3d<std::int32_t const> qweight, std::int32_t const* sort_indices, view3d<std::int32_t> out,
                        cudaStream_t stream = nullptr) {
  using L = qtl::marlin::layout<Bits, A>;
  index_t const E = qweight.extent[0], K = qweight.extent[1] * L::pack, N = qweight.extent[2];
  if (!L::shape_fits(K, N) || E < 0 || E > detail::max_experts || out.extent[0] != E ||
      out.extent[1] != L::marlin_rows(K) || out.extent[2] != L::marlin_cols(N) || !out.is_contiguous()) {
    return cudaErrorInvalidValue;
  }
  if (sort_indices != nullptr && L::a8) {
    return cudaErrorInvalidValue;  // the peers refuse act-order with the A8 layout
  }
  index_t const words = K * N / L::pack;
  if (words == 0 || E == 0) {
    return cudaSuccess;
  }
  if (qweight.data == nullptr || out.data == nullptr || !detail::grid_fits(words)) {
    return cudaErrorInvalidValue;
  }
  if (sort_indices != nullptr) {
    return qtl::cuda::launch(detail::repack_gptq_kernel<Bits, A, true>, detail::grid_for(words, E),
                             dim3(detail::block_threads), 0, stream, qweight, sort_indices, out.data, K, N);
  }
  return qtl::cuda::launch(detail::repack_gptq_kernel<Bits, A, false>, detail::grid_for(words, E),
                           dim3(detail::block_threads), 0, stream, qweight, static_cast<std::int32_t const*>(nullptr),
                           out.data, K, N);
}

/// Dense GPU `repack_gptq`: qweight [K/pf, N], sort_indices (K entries) or null, out [K/16, N*16/pf].
template <int Bits, qtl::marlin::act_width A = qtl::marlin::act_width::a16>
cudaError_t repack_gptq(view2d<std::int32_t const> qweight, std::int32_t const* sort_indices, view2d<std::int32_t> out,
                        cudaStream_t stream = nullptr) {
  view3d<std::int32_t const> q;
  q.data = qweight.data;
  q.extent[0] = 1;
  q.extent[1] = qweight.extent[0];
  q.extent[2] = qweight.extent[1];
  q.stride[0] = qweight.extent[0] * qweight.stride[0];
  q.stride[1] = qweight.stride[0];
  q.stride[2] = qweight.stride[1];
  view3d<std::int32_t> o = make_view(out.data, 1, out.extent[0], out.extent[1]);
  if (!out.is_contiguous()) {
    return cudaErrorInvalidValue;
  }
  return repack_gptq<Bits, A>(q, sort_indices, o, stream);
}

/// GPU `qtl::marlin::repack_awq`: AWQ qweight [K, N/pf] -> out [K/16, N*16/pf] (contiguous).
template <int Bits, qtl::marlin::act_width A = qtl::marlin::act_width::a16>
cudaError_t repack_awq(view2d<std::int32_t const> qweight, view2d<std::int32_t> out, cudaStream_t stream = nullptr) {
  using L = qtl::marlin::layout<Bits, A>;
  index_t const K = qweight.extent[0], N = qweight.extent[1] * L::pack;
  if (!L::shape_fits(K, N) || out.extent[0] != L::marlin_rows(K) || out.extent[1] != L::marlin_cols(N) ||
      !out.is_contiguous()) {
    return cudaErrorInvalidValue;
  }
  index_t const words = K * N / L::pack;
  if (words == 0) {
    return cudaSuccess;
  }
  if (qweight.data == nullptr || out.data == nullptr || !detail::grid_fits(words)) {
    return cudaErrorInvalidValue;
  }
  return qtl::cuda::launch(detail::repack_awq_kernel<Bits, A>, detail::grid_for(words), dim3(detail::block_threads), 0,
                           stream, qweight, out.data, K, N);
}

/// GPU `qtl::marlin::unrepack_gptq`: Marlin m [K/16, N*16/pf] (contiguous) -> qweight [K/pf, N].
/// `inverse_sort_indices` (device, K entries: checkpoint row -> Marlin row, the inverse of the
/// repack's sort_indices) or null.
template <int Bits, qtl::marlin::act_width A = qtl::marlin::act_width::a16>
cudaError_t unrepack_gptq(view2d<std::int32_t const> m, std::int32_t const* inverse_sort_indices,
                          view2d<std::int32_t> qweight, cudaStream_t stream = nullptr) {
  using L = qtl::marlin::layout<Bits, A>;
  if (m.extent[1] * L::pack % 16 != 0 || !m.is_contiguous()) {
    return cudaErrorInvalidValue;
  }
  index_t const K = m.extent[0] * 16, N = m.extent[1] * L::pack / 16;
  if (!L::shape_fits(K, N) || qweight.extent[0] != K / L::pack || qweight.extent[1] != N ||
      (inverse_sort_indices != nullptr && L::a8)) {
    return cudaErrorInvalidValue;
  }
  if (qweight.size() == 0) {
    return cudaSuccess;
  }
  if (m.data == nullptr || qweight.data == nullptr || !detail::grid_fits(qweight.size())) {
    return cudaErrorInvalidValue;
  }
  return qtl::cuda::launch(detail::unrepack_gptq_kernel<Bits, A>, detail::grid_for(qweight.size()),
                           dim3(detail::block_threads), 0, stream, m.data, inverse_sort_indices, qweight, N);
}

/// GPU `qtl::marlin::permute_scales` (any element type T of 1, 2 or 4 bytes).
template <class T>
cudaError_t permute_scales(view2d<T const> s, qtl::marlin::scale_perm_kind kind, view2d<T> out,
                           cudaStream_t stream = nullptr) {
  if (s.extent[1] % qtl::marlin::scale_chunk(kind) != 0 || out.extent[0] != s.extent[0] ||
      out.extent[1] != s.extent[1]) {
    return cudaErrorInvalidValue;
  }
  if (s.size() == 0) {
    return cudaSuccess;
  }
  if (s.data == nullptr || out.data == nullptr || !detail::grid_fits(s.size())) {
    return cudaErrorInvalidValue;
  }
  return qtl::cuda::launch(detail::permute_scales_kernel<T>, detail::grid_for(s.size()), dim3(detail::block_threads), 0,
                           stream, s, out, kind == qtl::marlin::scale_perm_kind::grouped ? 1 : 0);
}

}  // namespace qtl::cuda::marlin
