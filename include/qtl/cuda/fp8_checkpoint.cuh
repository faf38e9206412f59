#pragma once
/// \file
/// The stream-ordered launcher `qtl::cuda::fp8_checkpoint_quantize`, the device form of
/// qtl/fp8_checkpoint.hpp: FP8 (E4M3) checkpoint codes and F32 scales of row-major W [N, K] by the
/// same schemes, rules and element functions, so the outputs equal the host's bit for bit:
///
///   tensor   `fp8_amax` then `scaled_fp8_quant_static` with `fp8_scale_from_amax` of it (the
///            dynamic per-tensor launches of qtl/cuda/fp8.cuh), or of `opt.tensor_amax` when given
///   channel  `scaled_fp8_quant_per_token` (qtl/cuda/fp8.cuh)
///   block    one launch, a thread per block: its amax (|x|'s bits, NaN ignored), `fp8_block_scale`,
///            then its codes `fp8_quantize_element` under fl(1/s)
///
/// A kernel cannot throw: NaN and Inf weights are quantized as the host op does with
/// `allow_nonfinite`. The host op refuses them otherwise, naming the first in its order (row-major;
/// for blocks, the first block's first): with `first_nonfinite` (a device word the caller set to
/// ~0) one more launch, a thread per weight, stores there by `atomicMin` the key of each NaN or
/// infinity in that order, and a one-thread launch turns the least into the row-major index
/// r*K + c of the weight the host op names (~0 stays: none); the caller reads it back and refuses
/// as the host does. Returns `cudaErrorInvalidValue` for the shapes the host op rejects (or a null
/// pointer with a non-empty view), otherwise the launches' status; it does not synchronise.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/fp8_checkpoint.cuh> needs nvcc; host code includes <qtl/fp8_checkpoint.hpp>"
#endif  // ^^^ !__CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>

#include <qtl/cuda/fp8.cuh>
#include <qtl/cuda/launch.cuh>
#include <qtl/element/fp8.hpp>
#include <qtl/element/fp8_checkpoint.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda {
namespace detail {

template <class T>
QTL_KERNEL void fp8_block_kernel(view2d<T const> w, index_t bn, index_t bk, fp8_block_rule rule,
                                 view2d<float8_e4m3fn_t> codes, view2d<float> scales) {
  grid_stride_cells(scales.extent[0], scales.extent[1], [&](index_t bi, index_t bj) {
    index_t const r1 = (bi + 1) * bn < w.extent[0] ? (bi + 1) * bn : w.extent[0];
    index_t const c1 = (bj + 1) * bk < w.extent[1] ? (bj + 1) * bk : w.extent[1];
    std::uint32_t m = 0;
    for (index_t r = bi * bn; r < r1; ++r) {
      for (index_t c = bj * bk; c < c1; ++c) {
        std::uint32_t const a = amax_bits(w(r, c));
        m = a > m ? a : m;
      }
    }
    float const s = fp8_block_scale(rule, amax_value<T>(static_cast<typename qtl::detail::input_bits<T>::word>(m)));
    float const inv = fp8_inverse_scale(s);
    for (index_t r = bi * bn; r < r1; ++r) {
      for (index_t c = bj * bk; c < c1; ++c) {
        codes(r, c).bits = fp8_quantize_element<float8_e4m3fn_t>(to_float(w(r, c)), s, inv);
      }
    }
    scales(bi, bj) = s;
  });
}

/// The key of weight (r, c) in the order the host op refuses in: row-major, or for blocks (`bn` x
/// `bk`) the block (row-major), then the weight's row and column inside it.
QTL_DEVICE unsigned long long fp8_refusal_key(index_t r, index_t c, index_t k, bool block, index_t bn, index_t bk) {
  if (!block) {
    return static_cast<unsigned long long>(r * k + c);
  }
  index_t const kb = (k + bk - 1) / bk;
  return static_cast<unsigned long long>((((r / bn) * kb + c / bk) * bn + r % bn) * bk + c % bk);
}

template <class T>
QTL_KERNEL void fp8_nonfinite_kernel(view2d<T const> w, bool block, index_t bn, index_t bk, unsigned long long* first) {
  grid_stride_cells(w.extent[0], w.extent[1], [&](index_t r, index_t c) {
    if (!is_finite(to_float(w(r, c)))) {
      atomicMin(first, fp8_refusal_key(r, c, w.extent[1], block, bn, bk));
    }
  });
}

/// The least block key of `fp8_nonfinite_kernel` back to the row-major index r*K + c.
template <class = void>
QTL_KERNEL void fp8_block_key_to_index_kernel(index_t k, index_t bn, index_t bk, unsigned long long* first) {
  unsigned long long const key = *first;
  if (key == ~0ull) {
    return;
  }
  auto const lc = static_cast<index_t>(key % static_cast<unsigned long long>(bk));
  auto const lr = static_cast<index_t>(key / static_cast<unsigned long long>(bk) % static_cast<unsigned long long>(bn));
  auto const b = static_cast<index_t>(key / static_cast<unsigned long long>(bk * bn));
  index_t const kb = (k + bk - 1) / bk;
  *first = static_cast<unsigned long long>(((b / kb) * bn + lr) * k + (b % kb) * bk + lc);
}

}  // namespace detail

/// GPU `qtl::fp8_checkpoint_quantize` of W [M, K] (device views, unit stride along K): `codes`
/// [M, K] and `scales`, a device array of `fp8_checkpoint_scale_count(M, K, opt)` floats (row-major
/// for blocks), on `stream`. `opt.allow_nonfinite` and `opt.first_row` are the host op's concern;
/// `first_nonfinite`, when not null, gets the weight the host op would refuse (the file comment).
template <class T>
cudaError_t fp8_checkpoint_quantize(view2d<T const> w, view2d<float8_e4m3fn_t> codes, float* scales,
                                    fp8_checkpoint_options const& opt = {},
                                    unsigned long long* first_nonfinite = nullptr, cudaStream_t stream = nullptr) {
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  bool const block = opt.scheme == fp8_checkpoint_scheme::block;
  if ((block && (opt.block_n <= 0 || opt.block_k <= 0)) || codes.extent[0] != m || codes.extent[1] != k ||
      (k > 1 && m > 0 && (w.stride[1] != 1 || codes.stride[1] != 1)) || detail::null_with_data(w) ||
      detail::null_with_data(codes) || (m * k > 0 && scales == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (m * k == 0) {
    return cudaSuccess;
  }
  if (first_nonfinite != nullptr) {
    unsigned const cells =
        detail::grid_stride_blocks(m * k, launch_policy::threads, launch_policy::wide_grid_stride_cap);
    if (cudaError_t const e = launch(detail::fp8_nonfinite_kernel<T>, dim3(cells), launch_policy::threads, 0, stream, w,
                                     block, opt.block_n, opt.block_k, first_nonfinite);
        e != cudaSuccess) {
      return e;
    }
    if (block) {
      if (cudaError_t const e = launch(detail::fp8_block_key_to_index_kernel<>, dim3(1), 1, 0, stream, k, opt.block_n,
                                       opt.block_k, first_nonfinite);
          e != cudaSuccess) {
        return e;
      }
    }
  }
  switch (opt.scheme) {
    case fp8_checkpoint_scheme::tensor:
      if (opt.tensor_amax) {
        float const s = fp8_scale_from_amax<float8_e4m3fn_t>(*opt.tensor_amax);
        if (cudaError_t const e = cudaMemcpyAsync(scales, &s, sizeof s, cudaMemcpyHostToDevice, stream);
            e != cudaSuccess) {
          return e;
        }
        return scaled_fp8_quant_static(w, scales, codes, {}, stream);
      }
      return scaled_fp8_quant_dynamic(w, codes, scales, {}, stream);
    case fp8_checkpoint_scheme::channel: return scaled_fp8_quant_per_token(w, codes, scales, {}, stream);
    case fp8_checkpoint_scheme::block: break;
  }
  index_t const nb = (m + opt.block_n - 1) / opt.block_n;
  index_t const kb = (k + opt.block_k - 1) / opt.block_k;
  unsigned const blocks =
      detail::grid_stride_blocks(nb * kb, launch_policy::threads, launch_policy::wide_grid_stride_cap);
  return launch(detail::fp8_block_kernel<T>, dim3(blocks), launch_policy::threads, 0, stream, w, opt.block_n,
                opt.block_k, opt.rule, codes, make_view(scales, nb, kb));
}

}  // namespace qtl::cuda
