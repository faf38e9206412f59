#pragma once
/// \file
/// CUDA kernels and stream-ordered launchers for `qtl/pack.hpp`: `qtl::cuda::pack_rows`,
/// `pack_cols`, `unpack_rows`, `unpack_cols`. They run the host header's element functions
/// (`qtl::pack_word`, `qtl::unpack_code`, `qtl::unpack_word`), so the words equal the host's bit
/// for bit. Views hold device pointers; any strides work, and contiguous, 16-byte aligned rows take
/// vectorised loads and stores.
///
/// Unlike the host ops, the kernels do not validate codes (device code never throws): a code
/// outside its width is masked to it, so it changes only its own field. Validate on the host, or
/// keep the producer's codes in range, where that matters.
///
/// Launchers return `cudaErrorInvalidValue` for shapes that `qtl::pack_shapes_fit` rejects (or a
/// null pointer with a non-empty view), otherwise the launch status (`cudaGetLastError`); they do
/// not synchronise.

#if !defined(__CUDACC__) && !defined(QTL_CUDA_SIM)
#  error "<qtl/cuda/pack.cuh> needs nvcc; host code includes <qtl/pack.hpp>"
#endif  // ^^^ !__CUDACC__ ^^^

#include <cuda_runtime.h>

#include <cstdint>
#include <qtl/cuda/launch.cuh>
#include <qtl/macros.hpp>
#include <qtl/pack.hpp>
#include <qtl/view.hpp>

namespace qtl::cuda {
namespace detail {

inline constexpr int pack_block_threads = launch_policy::threads;

// Loads / stores of N consecutive int32 with the widest access that keeps alignment when the
// first element is (4*N)-byte aligned (at most 16 bytes per access).
template <int N>
QTL_DEVICE void load_codes(std::int32_t const* p, std::int32_t (&codes)[N]) {
  if constexpr (N % 4 == 0) {
    QTL_UNROLL
    for (int i = 0; i < N; i += 4) {
      ::int4 const v = *reinterpret_cast<::int4 const*>(p + i);
      codes[i] = v.x;
      codes[i + 1] = v.y;
      codes[i + 2] = v.z;
      codes[i + 3] = v.w;
    }
  } else if constexpr (N == 2) {
    ::int2 const v = *reinterpret_cast<::int2 const*>(p);
    codes[0] = v.x;
    codes[1] = v.y;
  } else {
    codes[0] = p[0];
  }
}
template <int N>
QTL_DEVICE void store_codes(std::int32_t* p, std::int32_t const (&codes)[N]) {
  if constexpr (N % 4 == 0) {
    QTL_UNROLL
    for (int i = 0; i < N; i += 4) {
      *reinterpret_cast<::int4*>(p + i) = make_int4(codes[i], codes[i + 1], codes[i + 2], codes[i + 3]);
    }
  } else if constexpr (N == 2) {
    *reinterpret_cast<::int2*>(p) = make_int2(codes[0], codes[1]);
  } else {
    p[0] = codes[0];
  }
}

// Thread (x, y) of the grid: column x, rows y, y + gridDim.y, ... (grid y is capped at 65535).
QTL_DEVICE index_t thread_col() {
  return static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

// pack_rows: one thread per output word out[r, c], reading in[r*pf + j, c] for j < pf. A warp
// takes 32 consecutive c, so each of the pf loads and the store is coalesced.
template <int Bits, bool Signed>
QTL_KERNEL void pack_rows_kernel(view2d<std::int32_t const> in, view2d<std::int32_t> out) {
  constexpr index_t pf = 32 / Bits;
  index_t const c = thread_col();
  if (c >= out.extent[1]) {
    return;
  }
  for (index_t r = blockIdx.y; r < out.extent[0]; r += gridDim.y) {
    std::uint32_t excess = 0;  // unused on the device: codes are masked, not checked
    out(r, c) = static_cast<std::int32_t>(pack_word<Bits, Signed>(&in(r * pf, c), in.stride[0], excess));
  }
}

// pack_cols: one thread per output word out[k, c], reading the pf codes in[k, c*pf + j]; with
// `Vector`, as 16-byte loads (rows contiguous and aligned).
template <int Bits, bool Signed, bool Vector>
QTL_KERNEL void pack_cols_kernel(view2d<std::int32_t const> in, view2d<std::int32_t> out) {
  constexpr int pf = 32 / Bits;
  index_t const c = thread_col();
  if (c >= out.extent[1]) {
    return;
  }
  for (index_t k = blockIdx.y; k < out.extent[0]; k += gridDim.y) {
    std::uint32_t excess = 0;
    std::uint32_t word;
    if constexpr (Vector) {
      std::int32_t codes[pf];
      load_codes<pf>(&in(k, c * pf), codes);
      word = pack_word<Bits, Signed>(codes, 1, excess);
    } else {
      word = pack_word<Bits, Signed>(&in(k, c * pf), in.stride[1], excess);
    }
    out(k, c) = static_cast<std::int32_t>(word);
  }
}

// unpack_rows: one thread per input word in[r, c], writing out[r*pf + j, c] (coalesced per j).
template <int Bits, bool Signed>
QTL_KERNEL void unpack_rows_kernel(view2d<std::int32_t const> in, view2d<std::int32_t> out) {
  constexpr index_t pf = 32 / Bits;
  index_t const c = thread_col();
  if (c >= in.extent[1]) {
    return;
  }
  for (index_t r = blockIdx.y; r < in.extent[0]; r += gridDim.y) {
    unpack_word<Bits, Signed>(static_cast<std::uint32_t>(in(r, c)), &out(r * pf, c), out.stride[0]);
  }
}

// unpack_cols: one thread per input word in[k, c], writing the pf codes out[k, c*pf + j]; with
// `Vector`, as 16-byte stores.
template <int Bits, bool Signed, bool Vector>
QTL_KERNEL void unpack_cols_kernel(view2d<std::int32_t const> in, view2d<std::int32_t> out) {
  constexpr int pf = 32 / Bits;
  index_t const c = thread_col();
  if (c >= in.extent[1]) {
    return;
  }
  for (index_t k = blockIdx.y; k < in.extent[0]; k += gridDim.y) {
    std::uint32_t const word = static_cast<std::uint32_t>(in(k, c));
    if constexpr (Vector) {
      std::int32_t codes[pf];
      unpack_word<Bits, Signed>(word, codes, 1);
      store_codes<pf>(&out(k, c * pf), codes);
    } else {
      unpack_word<Bits, Signed>(word, &out(k, c * pf), out.stride[1]);
    }
  }
}

// Rows of `v` may be read or written pf codes at a time with aligned vector accesses.
template <int Pf, class T>
bool rows_vectorisable(view2d<T> v) {
  if constexpr (Pf == 1) {
    return false;
  } else {
    constexpr index_t align = Pf >= 4 ? 4 : Pf;  // elements per access, at most 16 bytes
    return v.stride[1] == 1 && v.stride[0] % align == 0 &&
           reinterpret_cast<std::uintptr_t>(v.data) % (align * sizeof(std::int32_t)) == 0;
  }
}

// (columns handled by one thread each, rows) -> grid, one 256-thread block row per 256 columns.
inline dim3 pack_grid(index_t cols, index_t rows) {
  index_t const bx = (cols + pack_block_threads - 1) / pack_block_threads;
  return dim3(static_cast<unsigned>(bx), grid_stride_blocks(rows, 1, launch_policy::row_cap));
}

template <auto Width>
cudaError_t validate(int dim, view2d<std::int32_t const> codes, view2d<std::int32_t const> packed) {
  if (!pack_shapes_fit(pack_factor<Width>, dim, codes, packed)) {
    return cudaErrorInvalidValue;
  }
  if ((codes.size() != 0 && codes.data == nullptr) || (packed.size() != 0 && packed.data == nullptr)) {
    return cudaErrorInvalidValue;
  }
  // Grid x is limited to 2^31 - 1 blocks.
  if (codes.extent[1] / pack_block_threads >= 0x7FFFFFFF) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

// The kernel of packing (`Pack`) or unpacking along `Dim` (0: rows, 1: columns; `Vector`: the
// columns' codes moved by vector accesses).
template <int Bits, bool Signed, bool Pack, int Dim, bool Vector>
auto packing_kernel() {
  if constexpr (Dim == 0) {
    if constexpr (Pack) {
      return pack_rows_kernel<Bits, Signed>;
    } else {
      return unpack_rows_kernel<Bits, Signed>;
    }
  } else if constexpr (Pack) {
    return pack_cols_kernel<Bits, Signed, Vector>;
  } else {
    return unpack_cols_kernel<Bits, Signed, Vector>;
  }
}

// The four public launchers: `in` -> `out`, one thread per word of the packed side (`out` when
// packing, `in` when unpacking); the column kernels with vector accesses where the rows of the
// codes allow them.
template <auto Width, int Dim, bool Pack>
cudaError_t launch_packing(view2d<std::int32_t const> in, view2d<std::int32_t> out, cudaStream_t stream) {
  using traits = pack_traits<Width>;
  view2d<std::int32_t const> const o = out;
  view2d<std::int32_t const> const codes = Pack ? in : o;
  view2d<std::int32_t const> const words = Pack ? o : in;
  if (cudaError_t const e = validate<Width>(Dim, codes, words); e != cudaSuccess) {
    return e;
  }
  if (words.size() == 0) {
    return cudaSuccess;
  }
  auto kernel = packing_kernel<traits::bits, traits::is_signed, Pack, Dim, false>();
  if constexpr (Dim == 1) {
    if (rows_vectorisable<traits::factor>(codes)) {
      kernel = packing_kernel<traits::bits, traits::is_signed, Pack, Dim, true>();
    }
  }
  return launch(kernel, pack_grid(words.extent[1], words.extent[0]), pack_block_threads, 0, stream, in, out);
}

}  // namespace detail

/// GPU `qtl::pack_rows`: `in` (K, N) codes -> `out` (K/pf, N) words, on `stream`.
template <auto Width>
cudaError_t pack_rows(view2d<std::int32_t const> in, view2d<std::int32_t> out, cudaStream_t stream = nullptr) {
  return detail::launch_packing<Width, 0, true>(in, out, stream);
}

/// GPU `qtl::pack_cols`: `in` (K, N) codes -> `out` (K, N/pf) words, on `stream`.
template <auto Width>
cudaError_t pack_cols(view2d<std::int32_t const> in, view2d<std::int32_t> out, cudaStream_t stream = nullptr) {
  return detail::launch_packing<Width, 1, true>(in, out, stream);
}

/// GPU `qtl::unpack_rows`: `in` (K/pf, N) words -> `out` (K, N) codes, on `stream`.
template <auto Width>
cudaError_t unpack_rows(view2d<std::int32_t const> in, view2d<std::int32_t> out, cudaStream_t stream = nullptr) {
  return detail::launch_packing<Width, 0, false>(in, out, stream);
}

/// GPU `qtl::unpack_cols`: `in` (K, N/pf) words -> `out` (K, N) codes, on `stream`.
template <auto Width>
cudaError_t unpack_cols(view2d<std::int32_t const> in, view2d<std::int32_t> out, cudaStream_t stream = nullptr) {
  return detail::launch_packing<Width, 1, false>(in, out, stream);
}

}  // namespace qtl::cuda
