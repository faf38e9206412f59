#pragma once
/// \file
/// CUDA kernels and stream-ordered launchers for `qtl/pack_nd.hpp`: `qtl::cuda::gptq_pack`,
/// `awq_pack`, `pack_quantized_values_into_int32` and `unpack_quantized_values_into_int32`. They run
/// the element functions of `qtl/element/pack_nd.hpp` (`awq_pack_word`, `pack_dim_word`,
/// `unpack_dim_word`), so the words equal the host's bit for bit. Views hold device pointers; any
/// strides work. One launch covers the whole tensor (every outer index, e.g. every expert).
///
/// As `qtl/cuda/pack.cuh`: the kernels do not validate codes (a code outside its width is masked to
/// it); launchers return `cudaErrorInvalidValue` for shapes the host ops reject (or a null pointer
/// with a non-empty view), otherwise the launch status; they do not synchronise.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/pack_nd.cuh> needs nvcc; host code includes <qtl/pack_nd.hpp>"
#endif  // ^^^ !__CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>

#include <qtl/cuda/launch.cuh>
#include <qtl/cuda/pack.cuh>
#include <qtl/element/pack_nd.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda {
namespace detail {

// awq_pack: one thread per output word out[k, c], reading the pf codes in[k, c*pf + j].
template <int Bits, bool Signed>
QTL_KERNEL void awq_pack_kernel(view2d<std::int32_t const> in, view2d<std::int32_t> out) {
  constexpr index_t pf = 32 / Bits;
  index_t const c = thread_col();
  if (c >= out.extent[1]) {
    return;
  }
  for (index_t k = blockIdx.y; k < out.extent[0]; k += gridDim.y) {
    std::uint32_t excess = 0;  // unused on the device: codes are masked, not checked
    out(k, c) = static_cast<std::int32_t>(awq_pack_word<Bits, Signed>(&in(k, c * pf), in.stride[1], excess));
  }
}

// Packing (`Pack`) or unpacking along P of (outer, P, inner): one thread per word (o, r, i) of
// `words` (outer, R, inner), a grid-stride loop over the words in row-major order, so that a warp
// takes consecutive i (coalesced when inner > 1) or consecutive r (inner = 1).
template <int Bits, bool Signed, bool Pack>
QTL_KERNEL void pack_dim_kernel(view3d<std::int32_t const> in, view3d<std::int32_t> out) {
  index_t const rows = Pack ? out.extent[1] : in.extent[1];
  index_t const inner = Pack ? out.extent[2] : in.extent[2];
  index_t const words = (Pack ? out.extent[0] : in.extent[0]) * rows * inner;
  index_t const step = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t w = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += step) {
    index_t const i = w % inner;
    index_t const r = w / inner % rows;
    index_t const o = w / inner / rows;
    if constexpr (Pack) {
      std::uint32_t excess = 0;
      out(o, r, i) = static_cast<std::int32_t>(pack_dim_word<Bits, Signed>(in, o, r, i, excess));
    } else {
      unpack_dim_word<Bits>(static_cast<std::uint32_t>(in(o, r, i)), out, o, r, i);
    }
  }
}

}  // namespace detail

/// GPU `qtl::gptq_pack` (vLLM's `gptq_pack`, that is `pack_rows`), on `stream`.
template <auto Width>
cudaError_t gptq_pack(view2d<std::int32_t const> in, view2d<std::int32_t> out, cudaStream_t stream = nullptr) {
  return pack_rows<Width>(in, out, stream);
}

/// GPU `qtl::awq_pack`: `in` (K, N) codes -> `out` (K, N/pf) words in AWQ's in-word order.
template <auto Width>
cudaError_t awq_pack(view2d<std::int32_t const> in, view2d<std::int32_t> out, cudaStream_t stream = nullptr) {
  using traits = pack_traits<Width>;
  static_assert(traits::bits == 4 || traits::bits == 8, "qtl::cuda::awq_pack: AWQ packs 4- or 8-bit codes");
  if (cudaError_t const e = detail::validate<Width>(1, in, out); e != cudaSuccess) {
    return e;
  }
  if (out.size() == 0) {
    return cudaSuccess;
  }
  return launch(detail::awq_pack_kernel<traits::bits, traits::is_signed>,
                detail::pack_grid(out.extent[1], out.extent[0]), detail::pack_block_threads, 0, stream, in, out);
}

namespace detail {
template <auto Width, bool Pack>
cudaError_t launch_pack_dim(view3d<std::int32_t const> in, view3d<std::int32_t> out, cudaStream_t stream) {
  using traits = pack_traits<Width>;
  view3d<std::int32_t const> const o = out;
  view3d<std::int32_t const> const codes = Pack ? in : o;
  view3d<std::int32_t const> const words = Pack ? o : in;
  if (!pack_dim_shapes_fit(traits::factor, codes, words) || null_with_data(in) || null_with_data(out)) {
    return cudaErrorInvalidValue;
  }
  if (words.size() == 0) {
    return cudaSuccess;
  }
  auto const blocks = grid_stride_blocks(words.size(), pack_block_threads, launch_policy::grid_stride_cap);
  return launch(pack_dim_kernel<traits::bits, traits::is_signed, Pack>, dim3(blocks), pack_block_threads, 0, stream, in,
                out);
}
}  // namespace detail

/// GPU `qtl::pack_quantized_values_into_int32`: `in` (outer, P, inner) codes -> `out`
/// (outer, P/pf, inner) words, on `stream`.
template <auto Width>
cudaError_t pack_quantized_values_into_int32(view3d<std::int32_t const> in, view3d<std::int32_t> out,
                                             cudaStream_t stream = nullptr) {
  return detail::launch_pack_dim<Width, true>(in, out, stream);
}

/// GPU `qtl::unpack_quantized_values_into_int32`: `in` (outer, R, inner) words -> `out`
/// (outer, R*pf, inner) zero-extended codes, on `stream`.
template <auto Width>
cudaError_t unpack_quantized_values_into_int32(view3d<std::int32_t const> in, view3d<std::int32_t> out,
                                               cudaStream_t stream = nullptr) {
  return detail::launch_pack_dim<Width, false>(in, out, stream);
}

}  // namespace qtl::cuda
