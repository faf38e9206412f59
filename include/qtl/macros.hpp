#pragma once
/// \file
/// The only header that looks at `__CUDACC__` / `__CUDA_ARCH__`: execution-space annotations.
///
/// * `QTL_HOST_DEVICE` — callable from host and device code (and `inline` on the host).
/// * `QTL_DEVICE`      — device-only helper.
/// * `QTL_KERNEL`      — a `__global__` kernel with hidden visibility (CCCL's rule, so copies built for
///                       different architecture lists in different shared objects do not collide).
/// * `QTL_UNROLL`      — `#pragma unroll` in the device pass only.
/// * `QTL_DEVICE_ROUNDING` — 1 where element code runs as device code and must use CUDA's
///                       explicitly rounded intrinsics (`qtl/exact.hpp`), else 0: the one
///                       predicate by which element code tells the device from the host.

#if defined(__CUDACC__)
#  define QTL_HOST_DEVICE __host__ __device__ __forceinline__
#  define QTL_DEVICE __device__ __forceinline__
#  define QTL_KERNEL __global__ __attribute__((visibility("hidden")))
#else
#  define QTL_HOST_DEVICE inline
#  define QTL_DEVICE inline
#endif  // ^^^ __CUDACC__ ^^^

#if defined(__CUDA_ARCH__)
#  define QTL_UNROLL _Pragma("unroll")
#  define QTL_DEVICE_ROUNDING 1
#else
#  define QTL_UNROLL
#  define QTL_DEVICE_ROUNDING 0
#endif  // ^^^ __CUDA_ARCH__ ^^^

// Bit-exactness and floating-point contraction: element code that must be exact is written so that
// contraction cannot change it (integer bit logic, or an explicit rounding barrier where a product
// feeds a sum). g++ ignores `#pragma STDC FP_CONTRACT`, so no macro here pretends to turn it off; the
// tests compile the affected headers under FMA and -ffp-contract=fast to prove it.
