#pragma once
/// \file
/// Block-scaled quantization: NVFP4 (E2M1 values, one E4M3 scale per 16 elements, a float32
/// global scale), MXFP4 (E2M1 values, one UE8M0 scale per 32) and MXFP8 (E4M3 values, one UE8M0
/// scale per 32), with their dequantization. `docs/spec/blockscale.md` §1 and §5 is the spec; the
/// block size, the value format and the scale format are template parameters (`block_format`).
///
/// Values of a row of K elements, E2M1 packed two per byte, element 2i in the low nibble:
///
///     byte i:   bit 7      4 3      0
///               | x[2i+1]  | x[2i]   |     each nibble s.ee.m: 0 0.5 1 1.5 2 3 4 6 (bit 3: sign)
///
/// Scales: one byte per (row m, K-block k) of the `[M, K / BlockSize]` scale matrix, written at
/// `blockscale_offset<Layout>(m, k, Layout::pad_cols(K / BlockSize))` (qtl/blockscale.hpp):
/// `layout_linear` (row-major) or `layout_128x4` (the swizzled layout Blackwell's block-scaled MMA
/// reads), directly, without a second pass. Every padding byte of the layout is written +0 (the
/// peers' `torch.empty` padding caused NaN incidents, docs/spec/blockscale.md §7).
///
/// The recipes (float32, each operation rounded; `vmax` = max |x| of the block):
///
///     NVFP4  gs   = 448 * 6 / amax(x)                (or given; ModelOpt's 1/weight_scale_2)
///            sf   = e4m3_rne(min(gs * (vmax / 6), 448))                  scale byte
///            os   = sf == 0 ? 0 : 1 / (float(sf) * (1 / gs))              (vLLM/sgl-kernel guard)
///            q_i  = e2m1_rne(clamp(x_i * os, -6, 6))
///            x_i ≈ e2m1(q_i) * (float(sf) / gs)
///     MX     sf   = e8m0_up(vmax / vmax_elem)        vmax_elem = 6 (E2M1) or 448 (E4M3)
///            os   = vmax == 0 ? 0 : 2^(127 - sf)
///            q_i  = rne(clamp(x_i * os, ±vmax_elem))
///            x_i ≈ value(q_i) * 2^(sf - 127)
///
/// This is the Python reference recipe of §5.4 with exact IEEE division (flashinfer's default
/// kernels use `rcp.approx` and can differ by one step near rounding boundaries; TE's "exact"
/// path is this one). Choices where the peers differ, documented and tested:
///   - an all-zero input has `amax = 0`; its global scale is taken as 1 (the reference's `inf`
///     makes every block scale NaN); a given global scale must be finite and > 0;
///   - NaN elements are ignored by `vmax` (CUDA `fmaxf`) and encode as +6 (E2M1, as CUDA's
///     `satfinite` conversion) or +448 (E4M3), docs/spec/blockscale.md §1.1 leaving NaN out of contract;
///   - a negative value that rounds to zero keeps its sign (code 0x8, as the hardware does).
///
/// Host execution (as qtl/fp8.hpp): 4 blocks at a time, their max, scale codes and output scales
/// in SSE2 lanes; the element codes in SSE2, or by an AVX2 executor chosen at run time on x86-64
/// (float and bf16 input); bf16 rows of 16- or 32-element blocks by an AVX-512 executor, 16 blocks
/// a step (scales of a chunk first, then its elements, E2M1 by a table). Every executor does the
/// element functions' integer and IEEE steps and is tested equal to them.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include <qtl/blockscale.hpp>
#include <qtl/element/fp4.hpp>
#include <qtl/error.hpp>
#include <qtl/fp8.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>
#include <qtl/x86/fp4.hpp>

namespace qtl {

namespace detail {

// The element codes of one block under output scale `os`, stored (E2M1: nibble pairs): the
// portable loop.
template <class F, class T>
void block_codes(T const* x, typename F::element* o, float os) {
  if constexpr (F::elements_per_value == 2) {
    std::uint8_t codes[F::block_size];
    for (int j = 0; j < F::block_size; ++j) {
      codes[j] = block_element_code<F>(to_float(x[j]), os);
    }
    for (int j = 0; j < F::block_size / 2; ++j) {
      o[j].bits = static_cast<std::uint8_t>(codes[2 * j] | (codes[2 * j + 1] << 4));
    }
  } else {
    for (int j = 0; j < F::block_size; ++j) {
      o[j].bits = block_element_code<F>(to_float(x[j]), os);
    }
  }
}

// `block_codes` by an x86 executor where one takes the block (`fp4_x86::block_codes`: AVX2 or
// SSE2, float and bf16; `avx2` is `avx2_quantizes<T>()`, hoisted by the caller), else the
// portable loop. E4M3 elements are the fp8 row quantizer's (`block_element_code` is its element
// function, fp8_saturate_encode(x * os) with NaN -> +max), which chooses its own executor.
template <class F, class T>
void block_codes_dispatch(bool avx2, T const* x, typename F::element* o, float os) {
  if constexpr (F::elements_per_value == 1) {
    quantize_row_dispatch<float8_e4m3fn_t, fp8_nan::to_max, fp8_scale_op::multiply_reciprocal>(x, o, F::block_size,
                                                                                              1.0f, os);
  } else if (!fp4_x86::block_codes<F>(avx2, x, o, os)) {
    block_codes<F>(x, o, os);
  }
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// host loops
// ---------------------------------------------------------------------------------------------

/// NVFP4 global scale of a tensor: `448 * 6 / amax(|x|)` (NaN ignored; 1 for an all-zero tensor).
template <fp8_quant_input T>
float nvfp4_global_scale(view2d<T const> in) {
  return nvfp4_global_scale_from_amax(fp8_amax(in));
}

/// Quantizes `in` [M, K] (K a multiple of the block size) to `values` [M, K / elements_per_value]
/// and `scales` (`block_scale_bytes<F, Layout>(M, K)` bytes, padding zeroed). `global_scale` is
/// the NVFP4 `gs` (ignored by MX formats); see `nvfp4_global_scale`.
template <block_format_type F, blockscale_layout_type Layout = layout_linear, fp8_quant_input T>
void block_quantize(view2d<T const> in, view2d<typename F::element> values, std::span<typename F::scale> scales,
                    float global_scale = 1.0f) {
  detail::check_block_shapes<F, Layout>("qtl::block_quantize", in, values, scales.size());
  if constexpr (F::has_global_scale) {
    detail::check_global_scale("qtl::block_quantize", global_scale);
  }
  index_t const m = in.extent[0];
  index_t const kb = in.extent[1] / F::block_size;
  index_t const padded_cols = Layout::pad_cols(kb);
  for (auto& s : scales) {
    s.bits = 0;
  }
  constexpr index_t values_per_block = F::block_size / F::elements_per_value;
  bool const avx2 = detail::avx2_quantizes<T>();
  float const inv_gs = detail::div_rn(1.0f, global_scale);
  for (index_t i = 0; i < m; ++i) {
    T const* row = &in(i, 0);
    typename F::element* out = &values(i, 0);
    // The leading blocks an x86 executor takes (AVX-512: 16 blocks a step; SSE2: 4 at a time,
    // their max, scale codes and output scales in lanes, then `block_codes_dispatch` each).
    index_t b = detail::fp4_x86::block_quantize_row<F, Layout>(
        row, out, kb, i, padded_cols, scales.data(), global_scale, inv_gs, i + 1 < m ? &in(i + 1, 0) : nullptr,
        [&](T const* x, typename F::element* o, float os) { detail::block_codes_dispatch<F>(avx2, x, o, os); });
    for (; b < kb; ++b) {
      T const* x = row + b * F::block_size;
      float const vmax = amax_value<T>(detail::row_amax_bits(x, F::block_size));
      std::uint8_t const sc = block_scale_code<F>(vmax, global_scale);
      float const os = block_output_scale<F>(sc, vmax, global_scale);
      scales[static_cast<std::size_t>(blockscale_offset<Layout>(i, b, padded_cols))].bits = sc;
      detail::block_codes_dispatch<F>(avx2, x, out + b * values_per_block, os);
    }
  }
}

/// The inverse: `out[i, j] = value(q) * dequant_scale(block)`, as float32, or rounded once to
/// `Out` (half_t, bfloat16_t) as the reference's `dequantize_to_dtype`.
template <block_format_type F, blockscale_layout_type Layout = layout_linear, class Out>
void block_dequantize(view2d<typename F::element const> values, std::span<typename F::scale const> scales,
                      float global_scale, view2d<Out> out) {
  index_t const m = out.extent[0];
  index_t const k = out.extent[1];
  if (k % F::block_size != 0 || values.extent[0] != m || values.extent[1] != k / F::elements_per_value) {
    throw shape_error("qtl::block_dequantize: values " + shape_string(values.extent[0], values.extent[1]) +
                      " do not match the output " + shape_string(m, k) + " (block size " +
                      std::to_string(F::block_size) + ")");
  }
  if (scales.size() != static_cast<std::size_t>(block_scale_bytes<F, Layout>(m, k))) {
    throw shape_error("qtl::block_dequantize: the scale buffer has " + std::to_string(scales.size()) +
                      " bytes, the layout needs " + std::to_string(block_scale_bytes<F, Layout>(m, k)));
  }
  if constexpr (F::has_global_scale) {
    detail::check_global_scale("qtl::block_dequantize", global_scale);
  }
  index_t const padded_cols = Layout::pad_cols(k / F::block_size);
  for (index_t i = 0; i < m; ++i) {
    for (index_t j = 0; j < k; ++j) {
      std::uint8_t const sc = scales[static_cast<std::size_t>(blockscale_offset<Layout>(i, j / F::block_size,
                                                                                         padded_cols))].bits;
      std::uint8_t c = values(i, j / F::elements_per_value).bits;
      if constexpr (F::elements_per_value == 2) {
        c = (j % 2 == 0) ? (c & 0xFu) : (c >> 4);
      }
      float const v = detail::mul_rn(block_element_value<F>(c), block_dequant_scale<F>(sc, global_scale));
      out(i, j) = from_float<Out>(v);
    }
  }
}

}  // namespace qtl
