#pragma once
/// \file
/// The W4A8 load-time transforms (int4 weights, FP8 activations; Hopper's CUTLASS mixed-input
/// GEMM) on the host, bit for bit as the engines prepare them (`docs/spec/w4a8.md`):
///
///   encode_and_reorder_int4b(in, n, k, out)             vLLM `cutlass_encode_and_reorder_int4b`
///   encode_and_reorder_int4b_grouped(in, e, n, k, out)  vLLM `cutlass_encode_and_reorder_int4b_grouped`
///   encode_and_reorder_int4b_inplace(data, e, n, k)     the same in place, one expert of scratch
///   decode_and_unreorder_int4b(in, e, n, k, out)        the inverse (the encode is an involution)
///   pack_scale_fp8(scales, packed)                      vLLM `cutlass_pack_scale_fp8` (8 codes each)
///   convert_bf16_scales_to_fp8(scales, op, fp8, chan)   vLLM `convert_bf16_scales_to_fp8`
///   convert_packed_uint4b8_to_signed_int4(_inplace)     vLLM's uint4b8 -> int4 of int32 words
///   interleave_scales(scales, scale_pack, out)          sglang `interleave_scales` (w4afp8.py)
///   deinterleave_scales(in, scale_pack, scales)         its inverse
///
/// The int4 matrices are [N, K] per expert, K contiguous, two codes a byte (low nibble first), as
/// the engines' int32 tensors hold them ([E, N, K/8] words, little-endian). The element code is
/// `qtl/element/w4a8.hpp`'s; `qtl/cuda/w4a8.cuh` runs it on the device, one launch per call.
/// Errors (`qtl::shape_error`, `qtl::value_error`) are thrown before anything is written. On x86
/// the reorder runs an AVX-512, AVX2 or SSE2 executor (`qtl/x86/w4a8.hpp`), tested equal to the
/// portable loop.
///
/// `convert_bf16_scales_to_fp8` takes the quantizer's rule as an argument, because vLLM hands it
/// `QuantFP8(static=False, group_shape=PER_TOKEN)`, whose CUDA path divides (`x / s`) and whose
/// native path multiplies by the reciprocal (`x * (1/s)`): both round differently. Upstream, its
/// last line `chan_scales.view(orig_shape[:-1], -1)` raises in torch (a `torch.Size` and an int);
/// QTL does what it means, `view(*orig_shape[:-1], -1)`: one channel scale per row.

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <qtl/element/fp8.hpp>
#include <qtl/element/w4a8.hpp>
#include <qtl/error.hpp>
#include <qtl/fp8.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>
#include <qtl/x86/w4a8.hpp>

namespace qtl {
namespace detail {

inline void check_int4b_reorder(char const* fn, index_t experts, index_t n, index_t k, index_t k_align,
                                std::size_t in_bytes, std::size_t out_bytes) {
  std::string const f = std::string(fn) + ": ";
  switch (int4b_reorder_shape_check(experts, n, k, k_align, static_cast<index_t>(in_bytes),
                                    static_cast<index_t>(out_bytes))) {
    case int4b_reorder_shape::ok: return;
    case int4b_reorder_shape::negative:
      throw shape_error(f + "negative extent (experts " + std::to_string(experts) + ", N " + std::to_string(n) +
                        ", K " + std::to_string(k) + ")");
    case int4b_reorder_shape::n_align:
      throw shape_error(f + "N = " + std::to_string(n) + " is not a multiple of 16 (the reorder atom's rows)");
    case int4b_reorder_shape::k_align:
      throw shape_error(f + "K = " + std::to_string(k) + " int4 codes is not a multiple of " + std::to_string(k_align) +
                        (k_align == w4a8_grouped_k_align ? " (vLLM's check before CUTLASS's reorder_tensor)"
                                                         : " (the reorder atom's columns)"));
    case int4b_reorder_shape::size_bytes: break;
  }
  throw shape_error(f + "the buffers hold " + std::to_string(in_bytes) + " and " + std::to_string(out_bytes) +
                    " bytes; experts x N x K / 2 is " + std::to_string(experts * n * (k / 2)));
}

// One atom (16 rows of 16 bytes at `rows`, `row_bytes` apart) <-> its 256 reordered bytes at `atom`,
// every byte through the encode (its own inverse). Rows r and r + 8 give the 32 bytes of threads
// 4r..4r+3: thread 4r + j holds the 16-bit units j, and j + 4 of both rows, interleaved
// (`w4a8_atom_source_of`).
template <bool Inverse>
void reorder_atom_portable(std::uint8_t const* rows_in, std::uint8_t* rows_out, index_t row_bytes,
                           std::uint8_t const* atom_in, std::uint8_t* atom_out) {
  for (index_t r = 0; r < w4a8_atom_rows / 2; ++r) {
    std::uint64_t a[2], b[2], o[4];
    if constexpr (Inverse) {
      std::memcpy(o, atom_in + 32 * r, 32);
      std::uint16_t t[16], u[8], v[8];
      std::memcpy(t, o, 32);
      for (int j = 0; j < 4; ++j) {
        u[j] = t[4 * j];
        v[j] = t[4 * j + 1];
        u[j + 4] = t[4 * j + 2];
        v[j + 4] = t[4 * j + 3];
      }
      std::memcpy(a, u, 16);
      std::memcpy(b, v, 16);
      for (int w = 0; w < 2; ++w) {
        a[w] = unified_encode_int4b_word(a[w]);
        b[w] = unified_encode_int4b_word(b[w]);
      }
      std::memcpy(rows_out + r * row_bytes, a, 16);
      std::memcpy(rows_out + (r + 8) * row_bytes, b, 16);
    } else {
      std::memcpy(a, rows_in + r * row_bytes, 16);
      std::memcpy(b, rows_in + (r + 8) * row_bytes, 16);
      for (int w = 0; w < 2; ++w) {
        a[w] = unified_encode_int4b_word(a[w]);
        b[w] = unified_encode_int4b_word(b[w]);
      }
      std::uint16_t u[8], v[8], t[16];
      std::memcpy(u, a, 16);
      std::memcpy(v, b, 16);
      for (int j = 0; j < 4; ++j) {
        t[4 * j] = u[j];
        t[4 * j + 1] = v[j];
        t[4 * j + 2] = u[j + 4];
        t[4 * j + 3] = v[j + 4];
      }
      std::memcpy(o, t, 32);
      std::memcpy(atom_out + 32 * r, o, 32);
    }
  }
}

// Outputs of at least this many bytes are written with streaming stores: they cannot stay in
// cache, and streaming stores skip reading each destination line before writing it (as memcpy
// does for buffers this size).
inline constexpr index_t w4a8_stream_bytes = index_t{8} << 20;

// One expert: row-major [n, k] bytes `src` <-> reordered `dst`, in source order: a block of 16
// rows (contiguous) is read front to back while its atoms go out, four column tiles at a time
// where the AVX-512 executor runs, two with AVX2 (each atom's lines written whole; the atoms of a
// column tile follow each other, atom (nt, kt) at nt + n_atoms * kt, so each of the K/32 runs
// moves on 256 bytes a block), and the next block's lines are asked for as this one's are read.
// With `stream` (forward only) the stores are streaming ones: the reorder then moves at memcpy's
// pace (docs/performance.md, the trtllm-gen MoE layouts and the W4A8 reorder).
template <bool Inverse>
void reorder_int4b_expert(std::uint8_t const* src, std::uint8_t* dst, index_t n, index_t k, bool stream = false) {
  index_t const row_bytes = k / 2;
  index_t const n_atoms = n / w4a8_atom_rows;
  index_t const k_tiles = k / w4a8_atom_cols;
  index_t const width = Inverse ? 1 : w4a8_block_tiles();  // column tiles an executor call
  for (index_t nt = 0; nt < n_atoms; ++nt) {
    for (index_t kt = 0; kt < k_tiles; ++kt) {
      index_t const rows = nt * w4a8_atom_rows * row_bytes + kt * (w4a8_atom_cols / 2);
      index_t const atom = (nt + n_atoms * kt) * w4a8_atom_bytes;
      if (!Inverse && kt % 4 == 0 && nt + 1 < n_atoms) {  // the next block's lines of these 4 column tiles
        prefetch_rows(src + rows + w4a8_atom_rows * row_bytes, row_bytes, 64);
      }
      if constexpr (Inverse) {
        reorder_atom_portable<true>(nullptr, dst + rows, row_bytes, src + atom, nullptr);
      } else if (width > 1 && kt + width <= k_tiles &&
                 w4a8_reorder_block_x86(static_cast<int>(width), src + rows, row_bytes, dst + atom,
                                        n_atoms * w4a8_atom_bytes, stream)) {
        kt += width - 1;
      } else if (!w4a8_reorder_atom_x86(src + rows, row_bytes, dst + atom, stream)) {
        reorder_atom_portable<false>(src + rows, nullptr, row_bytes, nullptr, dst + atom);
      }
    }
  }
}

// Whether the reorder of `experts` matrices into `out` streams its stores.
inline bool w4a8_streams(std::uint8_t const* out, index_t bytes) {
  return bytes >= w4a8_stream_bytes && reinterpret_cast<std::uintptr_t>(out) % 64 == 0;
}

template <bool Inverse>
void reorder_int4b(char const* fn, std::span<std::uint8_t const> in, index_t experts, index_t n, index_t k,
                   index_t k_align, std::span<std::uint8_t> out) {
  check_int4b_reorder(fn, experts, n, k, k_align, in.size(), out.size());
  if (!in.empty() && in.data() == out.data()) {
    throw value_error(std::string(fn) + ": in and out are the same buffer (use encode_and_reorder_int4b_inplace)");
  }
  index_t const bytes = n * (k / 2);
  bool const stream = !Inverse && w4a8_streams(out.data(), experts * bytes);
  for (index_t e = 0; e < experts; ++e) {
    reorder_int4b_expert<Inverse>(in.data() + e * bytes, out.data() + e * bytes, n, k, stream);
  }
  if (stream) {
    w4a8_stream_fence();
  }
}

}  // namespace detail

/// vLLM's `cutlass_encode_and_reorder_int4b(B)`: the [n, k] int4 matrix `in` (n * k / 2 bytes)
/// -> `out` (as many), every code through CUTLASS's `unified_encode_int4b` and moved to the
/// Hopper reorder layout (`qtl/element/w4a8.hpp`). n must be a multiple of 16 and k of 32 (vLLM
/// checks only (n k) % 32; CUTLASS's copy is out of bounds on the rest). @throws shape_error,
/// value_error (out is in's buffer)
inline void encode_and_reorder_int4b(std::span<std::uint8_t const> in, index_t n, index_t k,
                                     std::span<std::uint8_t> out) {
  detail::reorder_int4b<false>("qtl::encode_and_reorder_int4b", in, 1, n, k, w4a8_atom_cols, out);
}

/// vLLM's `cutlass_encode_and_reorder_int4b_grouped(b)` for `experts` matrices [n, k] one after
/// the other; k a multiple of 256 and n of 16, as vLLM checks. The packed weights only: the second
/// tensor vLLM returns is CuTe's layout object (its strides, no weight byte).
/// @throws shape_error, value_error
inline void encode_and_reorder_int4b_grouped(std::span<std::uint8_t const> in, index_t experts, index_t n, index_t k,
                                             std::span<std::uint8_t> out) {
  detail::reorder_int4b<false>("qtl::encode_and_reorder_int4b_grouped", in, experts, n, k, w4a8_grouped_k_align, out);
}

/// The inverse of `encode_and_reorder_int4b(_grouped)`: reordered bytes -> the row-major matrices
/// with the engines' codes. k a multiple of 32, n of 16. @throws shape_error, value_error
inline void decode_and_unreorder_int4b(std::span<std::uint8_t const> in, index_t experts, index_t n, index_t k,
                                       std::span<std::uint8_t> out) {
  detail::reorder_int4b<true>("qtl::decode_and_unreorder_int4b", in, experts, n, k, w4a8_atom_cols, out);
}

/// `encode_and_reorder_int4b_grouped` in place, with the scratch of one expert (n * k / 2 bytes)
/// as the peak beside the weights; `k_align` is 256 (vLLM's grouped check) or 32 (the plain op's).
/// @throws shape_error, value_error (another k_align)
inline void encode_and_reorder_int4b_inplace(std::span<std::uint8_t> data, index_t experts, index_t n, index_t k,
                                             index_t k_align = w4a8_grouped_k_align) {
  if (k_align != w4a8_atom_cols && k_align != w4a8_grouped_k_align) {
    throw value_error("qtl::encode_and_reorder_int4b_inplace: k_align is 32 or 256, got " + std::to_string(k_align));
  }
  detail::check_int4b_reorder("qtl::encode_and_reorder_int4b_inplace", experts, n, k, k_align, data.size(),
                              data.size());
  index_t const bytes = n * (k / 2);
  std::vector<std::uint8_t> scratch(static_cast<std::size_t>(bytes));
  bool const stream = detail::w4a8_streams(data.data(), experts * bytes);
  for (index_t e = 0; e < experts; ++e) {
    std::uint8_t* const expert = data.data() + e * bytes;
    std::memcpy(scratch.data(), expert, scratch.size());
    detail::reorder_int4b_expert<false>(scratch.data(), expert, n, k, stream);
  }
  if (stream) {
    detail::w4a8_stream_fence();
  }
}

/// vLLM's `cutlass_pack_scale_fp8(scales)`: each e4m3 scale becomes the 8 codes of CUTLASS's
/// `packed_scale_t` (`pack_scale_fp8_element`); `packed` holds 8 * scales.size() codes.
/// @throws shape_error
inline void pack_scale_fp8(std::span<float8_e4m3fn_t const> scales, std::span<float8_e4m3fn_t> packed) {
  if (packed.size() != 8 * scales.size()) {
    throw shape_error("qtl::pack_scale_fp8: packed holds " + std::to_string(packed.size()) + " codes, 8 x " +
                      std::to_string(scales.size()) + " scales is " + std::to_string(8 * scales.size()));
  }
  for (std::size_t i = 0; i < scales.size(); ++i) {
    std::uint8_t b[8];
    pack_scale_fp8_element(scales[i].bits, b);
    for (std::size_t j = 0; j < 8; ++j) {
      packed[8 * i + j].bits = b[j];
    }
  }
}

/// vLLM's `convert_packed_uint4b8_to_signed_int4_inplace(t)`: every nibble of the int32 words
/// `(v - 8) & 0xF` (uint4b8 codes -> two's complement int4). Its own inverse.
inline void convert_packed_uint4b8_to_signed_int4_inplace(std::span<std::int32_t> words) {
  for (std::int32_t& w : words) {
    w = static_cast<std::int32_t>(uint4b8_to_int4(static_cast<std::uint32_t>(w)));
  }
}

/// Out of place: `out[i] = convert(in[i])`. @throws shape_error
inline void convert_packed_uint4b8_to_signed_int4(std::span<std::int32_t const> in, std::span<std::int32_t> out) {
  if (in.size() != out.size()) {
    throw shape_error("qtl::convert_packed_uint4b8_to_signed_int4: " + std::to_string(in.size()) + " words in, " +
                      std::to_string(out.size()) + " out");
  }
  for (std::size_t i = 0; i < in.size(); ++i) {
    out[i] = static_cast<std::int32_t>(uint4b8_to_int4(static_cast<std::uint32_t>(in[i])));
  }
}

/// vLLM's `convert_bf16_scales_to_fp8(quant_fp8, scales)` on the [rows, k_groups] scales (the
/// leading dimensions of vLLM's tensor flattened): each row quantized per token by the rule `op`
/// (see `w4a8_scale_quantizer`), then `fp8_scales = e4m3(q / 8)` and `chan_scales[row] = 8 s`.
/// The scales must be finite (a NaN or Inf scale is refused: the two paths of vLLM's quantizer
/// disagree on it). @throws shape_error, value_error
template <fp8_quant_input T>
void convert_bf16_scales_to_fp8(view2d<T const> scales, fp8_scale_op op, view2d<float8_e4m3fn_t> fp8_scales,
                                view1d<float> chan_scales) {
  char const* const fn = "qtl::convert_bf16_scales_to_fp8: ";
  if (fp8_scales.extent[0] != scales.extent[0] || fp8_scales.extent[1] != scales.extent[1]) {
    throw shape_error(std::string(fn) + "fp8_scales is " + shape_string(fp8_scales.extent[0], fp8_scales.extent[1]) +
                      ", the scales " + shape_string(scales.extent[0], scales.extent[1]));
  }
  if (chan_scales.extent[0] != scales.extent[0]) {
    throw shape_error(std::string(fn) + "chan_scales has " + std::to_string(chan_scales.extent[0]) +
                      " entries, the scales " + std::to_string(scales.extent[0]) + " rows");
  }
  for (index_t i = 0; i < scales.extent[0]; ++i) {
    for (index_t j = 0; j < scales.extent[1]; ++j) {
      float const v = to_float(scales(i, j));
      if (!(v - v == 0.0f)) {
        throw value_error(std::string(fn) + "scale (" + std::to_string(i) + ", " + std::to_string(j) + ") is " +
                          std::to_string(v) + "; the scales must be finite");
      }
    }
  }
  scaled_fp8_quant_per_token<float8_e4m3fn_t>(scales, fp8_scales, chan_scales, w4a8_scale_quantizer(op));
  for (index_t i = 0; i < scales.extent[0]; ++i) {
    for (index_t j = 0; j < scales.extent[1]; ++j) {
      fp8_scales(i, j).bits = w4a8_group_scale_code(fp8_scales(i, j).bits);
    }
    chan_scales(i) *= 8.0f;
  }
}

namespace detail {
inline void check_interleave(char const* fn, index_t experts, index_t n, index_t groups, index_t scale_pack, index_t o0,
                             index_t o1, index_t o2) {
  std::string const f = std::string(fn) + ": ";
  if (scale_pack <= 0) {
    throw value_error(f + "scale_pack must be positive, got " + std::to_string(scale_pack));
  }
  if (groups % scale_pack != 0) {
    // sglang: "Scale K groups {G} must be divisible by scale_pack {p}."
    throw shape_error(f + "scale K groups " + std::to_string(groups) + " must be divisible by scale_pack " +
                      std::to_string(scale_pack));
  }
  if (o0 != experts || o1 != groups / scale_pack || o2 != n * scale_pack) {
    index_t const want[3] = {experts, groups / scale_pack, n * scale_pack};
    index_t const got[3] = {o0, o1, o2};
    throw shape_error(f + "the interleaved scales are " + shape_string(got, 3) + ", expected " + shape_string(want, 3));
  }
}
}  // namespace detail

namespace detail {
// Both directions over the interleaved side [E, G/p, N*p]: forward writes it, inverse reads it.
template <bool Inverse, class T>
void interleave_loop(char const* fn, view3d<T const> in, index_t scale_pack, view3d<T> out) {
  view3d<T const> const plain = Inverse ? view3d<T const>(out) : in;
  view3d<T const> const inter = Inverse ? in : view3d<T const>(out);
  check_interleave(fn, plain.extent[0], plain.extent[1], plain.extent[2], scale_pack, inter.extent[0], inter.extent[1],
                   inter.extent[2]);
  for (index_t e = 0; e < inter.extent[0]; ++e) {
    for (index_t g2 = 0; g2 < inter.extent[1]; ++g2) {
      for (index_t c = 0; c < inter.extent[2]; ++c) {
        interleave_source const s = interleave_scales_source(g2, c, scale_pack);
        if constexpr (Inverse) {
          out(e, s.n, s.g) = in(e, g2, c);
        } else {
          out(e, g2, c) = in(e, s.n, s.g);
        }
      }
    }
  }
}
}  // namespace detail

/// sglang's `interleave_scales(scales, scale_pack)`: [E, N, G] -> `out` [E, G / p, N * p],
/// `out(e, g2, n p + q) = scales(e, n, g2 p + q)`. @throws shape_error (G not a multiple of p,
/// as sglang raises), value_error
template <class T>
void interleave_scales(view3d<T const> scales, index_t scale_pack, view3d<T> out) {
  detail::interleave_loop<false>("qtl::interleave_scales", scales, scale_pack, out);
}

/// The inverse of `interleave_scales`: [E, G / p, N * p] -> `scales` [E, N, G].
/// @throws shape_error, value_error
template <class T>
void deinterleave_scales(view3d<T const> in, index_t scale_pack, view3d<T> scales) {
  detail::interleave_loop<true>("qtl::deinterleave_scales", in, scale_pack, scales);
}

}  // namespace qtl
