#pragma once
/// \file
/// compressed-tensors `mxfp8-quantized` weights, computed on the checkpoint's own row-major weight
/// W [N, K] (blocks of 32 along K, no transpose), bit for bit as compressed-tensors' release
/// 0.20.0 writes them for every weight dtype (its MXFP8 preset: FP8 E4M3 weights, group 32, uint8
/// scales; `compressors/mxfp8/base.py` over the naive float-quantized compressor; golden cases
/// recorded from it by test/data/golden/make_ct_mxfp8_cases.py):
///
///   W [N, K], row r, block b = columns [32·b, 32·b + 32)
///
///     weight       [N, K]     F8_E4M3  e4m3(x / s): round to nearest even, ±448 beyond (CT clamps
///                                      to ±448 before torch's cast), -0.0 kept as 0x80
///     weight_scale [N, K/32]  U8       c, the biased E8M0 exponent of s = 2^(c - 127):
///                                      `ct_mx_scale_code<T>(amax, 8)` of the block's max
///                                      magnitude (CT's `generate_mx_scales` with E4M3's offset
///                                      floor(log2(448)) = 8: amax rounded to a power of two, up
///                                      from a significand of 1.75, divided by 2^8)
///
/// s is a power of two, so CT's quotient x / s in T equals x · 2^(127 - c) in float unless it
/// falls below T's smallest normal, where both give E4M3 ±0 with x's sign. A block holding NaN or
/// Inf is refused (`ct_fp4_options::allow_nonfinite` quantizes it: scale byte 254 for NaN, Inf
/// beyond 1.75 · 2^emax; NaN elements the E4M3 NaN 0x7F, ±Inf ±448). Rows are independent: a caller
/// may run any slice of rows, `first_row` naming the slice's place in errors. bf16 rows go 16
/// blocks at a time through an AVX-512 executor where the CPU has one (`qtl/x86/fp4.hpp`, the same
/// bytes; test/unit/ct_fp4_test.cpp compares them).

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include <qtl/ct_fp4.hpp>
#include <qtl/ct_quantize.hpp>
#include <qtl/error.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// The elements per MXFP8 block of compressed-tensors' `mxfp8-quantized` (its group size).
inline constexpr index_t ct_mxfp8_block = 32;

/// compressed-tensors `mxfp8-quantized` of the rows of `w` [M, K] (T: float, half_t or
/// bfloat16_t; K a multiple of 32, unit stride along K): the E4M3 `values` [M, K] and the E8M0
/// `scales` [M, K/32], as described in the file comment.
/// @throws value_error for a NaN or infinite weight (naming row first_row + r and its column)
///   unless `opt.allow_nonfinite`; shape_error for K not a multiple of 32 or outputs of other
///   shapes. Rows before a refused one are written.
template <class T>
void ct_mxfp8_quantize(view2d<T const> w, view2d<float8_e4m3fn_t> values, view2d<float8_e8m0fnu_t> scales,
                       ct_fp4_options const& opt = {}) {
  constexpr char const* fn = "qtl::ct_mxfp8_quantize";
  constexpr index_t bs = ct_mxfp8_block;
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  if (k % bs != 0) {
    throw shape_error(std::string(fn) + ": K = " + std::to_string(k) + " is not a multiple of the block size 32");
  }
  if (m > 0 && k > 0 && (w.data == nullptr || w.stride[1] != 1)) {
    throw shape_error(std::string(fn) + ": w has no data or not a unit stride along K");
  }
  detail::ct::check_output(fn, "values", values, m, k);
  detail::ct::check_output(fn, "scales", scales, m, k / bs);
  for (index_t i = 0; i < m; ++i) {
    T const* row = &w(i, 0);
    index_t first = 0;  // the blocks an x86 executor did
    if constexpr (std::is_same_v<T, bfloat16_t>) {
      first = detail::fp4_x86::ct_mx_row(row, &values(i, 0), &scales(i, 0).bits, k / bs);
    }
    for (index_t b = first; b < k / bs; ++b) {
      T const* x = row + b * bs;
      auto const [mx, mn] = nan_max_min(x, bs);
      float const amax = detail::qnt::nan_max(mx, -mn);
      if (!opt.allow_nonfinite && !is_finite(amax)) {
        detail::ct::refuse_nonfinite(x, bs, opt.first_row + i, b * bs, "block");
      }
      std::uint8_t const sc = ct_mx_scale_code<T>(amax, 8);
      scales(i, b).bits = sc;
      float const os = e8m0_reciprocal(sc);  // 1 / 2^(sc - 127), exact
      float8_e4m3fn_t* out = &values(i, b * bs);
      for (index_t e = 0; e < bs; ++e) {
        out[e].bits = fp8_saturate_encode<float8_e4m3fn_t, fp8_nan::propagate>(detail::mul_rn(to_float(x[e]), os));
      }
    }
  }
}

}  // namespace qtl
