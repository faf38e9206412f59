#pragma once
/// \file
/// `qtl::convert::deepgemm_post_process_e8m0` (<qtl/deepgemm_e8m0.hpp>) on the device: the kernel
/// of `qtl::cuda::convert::deepgemm_pack_ue8m0` (one thread per int32 word, `dg_pack_word` of its
/// block row, pad rows 0) on E8M0 codes, so its words equal the host's bit for bit. The layout
/// comes from the host's `deepgemm_post_process_layout` (which names a shape vLLM's bmm view
/// cannot take). `first_unpackable`, when not null (a device word the caller set to ~0), gets the
/// index of the first code 0 or 255 by `atomicMin`, the one the host op names (its words are
/// written anyway); null: the caller vouches that there is none. Returns `cudaErrorInvalidValue`
/// for a bad layout or null pointers with words to write, before anything is enqueued; otherwise
/// the launch status. It does not synchronise.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/deepgemm_e8m0.cuh> needs nvcc; host code includes <qtl/deepgemm_e8m0.hpp>"
#endif  // ^^^ !__CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>

#include <qtl/cuda/convert.cuh>
#include <qtl/deepgemm_e8m0.hpp>

namespace qtl::cuda::convert {

/// scale [G, ceil(N/128), kb] E8M0 codes (device) -> out [G, P, A] (device), as the host op.
inline cudaError_t deepgemm_post_process_e8m0(std::uint8_t const* scale, cv::dg_packed_layout const& l,
                                              std::int32_t* out, unsigned long long* first_unpackable = nullptr,
                                              cudaStream_t stream = nullptr) {
  return detail::deepgemm_pack(scale, l, out, first_unpackable, stream);
}

}  // namespace qtl::cuda::convert
