#pragma once
/// \file
/// The only header that looks at `__CUDACC__` / `__CUDA_ARCH__`: execution-space annotations.
///
/// * `QTL_HOST_DEVICE` — callable from host and device code (and `inline` on the host).
/// * `QTL_DEVICE`      — device-only helper.
/// * `QTL_KERNEL`      — a `__global__` kernel with hidden visibility (CCCL's rule, so copies built for
///                       different architecture lists in different shared objects do not collide).
///                       Every kernel defined in a header is a template (a defaulted `class = void`
///                       parameter where it has none of its own): a non-template `__global__`
///                       function is defined again by each translation unit that includes it, and
///                       two of them do not link (test/cuda/link). nvcc ignores `inline` on a
///                       `__global__` function (warning 20050), and an anonymous namespace would
///                       give each unit its own kernel under one inline launcher (an ODR violation).
/// * `QTL_UNROLL`      — `#pragma unroll` in the device pass only.
/// * `QTL_DEVICE_ROUNDING` — 1 where element code may run as device code and must use CUDA's
///                       explicitly rounded intrinsics (`qtl/exact.hpp`): nvcc's device pass and the
///                       simulated device; else 0.
/// * `QTL_ON_DEVICE()` — whether device code runs now: always in nvcc's device pass, never on the
///                       host, and while a simulated device thread runs under `QTL_CUDA_SIM`. With
///                       `QTL_DEVICE_ROUNDING`, the one predicate by which element code tells the
///                       device from the host, so that in one simulator binary the kernels take the
///                       device branch and the host references the host branch.
///
/// `QTL_CUDA_SIM` (test-only) compiles the kernels with g++ against the simulated device of
/// test/support/cuda_sim, whose <cuda_sim/device.hpp> declares the built-ins and intrinsics.

#if defined(__CUDACC__)
#  define QTL_HOST_DEVICE __host__ __device__ __forceinline__
#  define QTL_DEVICE __device__ __forceinline__
#  define QTL_KERNEL __global__ __attribute__((visibility("hidden")))
#elif defined(QTL_CUDA_SIM)
#  include <cuda_sim/device.hpp>
#  define QTL_HOST_DEVICE inline
#  define QTL_DEVICE inline
#  define QTL_KERNEL inline
#else
#  define QTL_HOST_DEVICE inline
#  define QTL_DEVICE inline
#endif  // ^^^ __CUDACC__ ^^^

#if defined(__CUDA_ARCH__)
#  define QTL_UNROLL _Pragma("unroll")
#  define QTL_DEVICE_ROUNDING 1
#  define QTL_ON_DEVICE() true
#elif defined(QTL_CUDA_SIM) && !defined(__CUDACC__)
#  define QTL_UNROLL
#  define QTL_DEVICE_ROUNDING 1
#  define QTL_ON_DEVICE() (::cuda_sim::on_device())
#else
#  define QTL_UNROLL
#  define QTL_DEVICE_ROUNDING 0
#  define QTL_ON_DEVICE() false
#endif  // ^^^ __CUDA_ARCH__ ^^^

// Bit-exactness and floating-point contraction: element code that must be exact is written so that
// contraction cannot change it (integer bit logic, or an explicit rounding barrier where a product
// feeds a sum). g++ ignores `#pragma STDC FP_CONTRACT`, so no macro here pretends to turn it off; the
// tests compile the affected headers under FMA and -ffp-contract=fast to prove it.
