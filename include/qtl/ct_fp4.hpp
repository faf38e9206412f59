#pragma once
/// \file
/// compressed-tensors `nvfp4-pack-quantized` and `mxfp4-pack-quantized` weights, computed on the
/// checkpoint's own row-major weight W [N, K] (blocks along K, no transpose), in the layout and
/// with the conventions of compressed-tensors' compressors (release 0.20.0; golden cases recorded
/// from them by test/data/golden/make_ct_fp4_cases.py): MXFP4 bit for bit as compressed-tensors
/// writes it for every weight dtype; NVFP4 bit for bit for float32 weights, while for bf16 and
/// f16 weights compressed-tensors rounds its intermediates (the block's amax / 6, x / (s / g)) to
/// the weight's dtype and this op keeps the engines' float32 arithmetic
/// (docs/spec/checkpoint_formats.md, "llm-compressor's bytes"):
///
///   W [N, K], row r, block b = columns [bs·b, bs·b + bs)          (bs: 16 NVFP4, 32 MXFP4)
///
///     values [N, K/2]  U8      e2m1 code of element 2j in the low nibble of byte j, 2j+1 high
///     scales [N, K/bs]         NVFP4: E4M3 block scales; MXFP4: E8M0 exponents (linear layout)
///
/// Where they differ from the library's block formats (`qtl::block_quantize`, qtl/fp4.hpp):
/// - NVFP4 (`ct_nvfp4_quantize`): the same codes and scale bytes given the same global scale,
///   except that a block scale that rounds to 0 (an all-zero block) is written as E4M3 0.125,
///   compressed-tensors' epsilon for FP8 scales, and a -0.0 weight is code 0, not -0 (0x8):
///   CT's `cast_to_fp4` takes the sign from `torch.sign`. Its global scale is
///   `ct_nvfp4_global_scale` of the weight's amax (or, for a fused layer, of the group's), which
///   the caller computes (`scan_amax` also refuses NaN/Inf in that pass).
/// - MXFP4 (`ct_mxfp4_quantize`): the block's scale is `ct_mx_scale_code<T>` of its max (CT's
///   own rounding of amax to a power of two, not the OCP rule), the codes e2m1(x · 2^(127 - c))
///   by the library's block executor, and an element whose product underflows T to 0 is code 0:
///   CT divides in T, where that quotient is +0 whatever x's sign.
///
/// Rows are independent: a caller may run any slice of rows (views of those rows of W and of the
/// outputs), `first_row` naming the slice's place in errors.

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>

#include <qtl/ct_quantize.hpp>
#include <qtl/error.hpp>
#include <qtl/fp4.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// How the compressed-tensors FP4 recipes treat non-finite weights, and where the rows are.
struct ct_fp4_options {
  bool allow_nonfinite = false;  ///< MXFP4: quantize a block holding NaN/Inf (scale byte 254, as CT's)
  index_t first_row = 0;         ///< the row of W that w's row 0 is (only names rows in errors)
};

namespace detail::ct {

template <block_format_type F, class T>
void check_fp4_shapes(char const* fn, view2d<T const> w, view2d<float4_e2m1x2_t> values,
                      view2d<typename F::scale> scales) {
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  if (k % F::block_size != 0) {
    throw shape_error(std::string(fn) + ": K = " + std::to_string(k) + " is not a multiple of the block size " +
                      std::to_string(F::block_size));
  }
  if (m > 0 && k > 0 && (w.data == nullptr || w.stride[1] != 1)) {
    throw shape_error(std::string(fn) + ": w has no data or not a unit stride along K");
  }
  check_output(fn, "values", values, m, k / 2);
  check_output(fn, "scales", scales, m, k / F::block_size);
}

/// Makes +0 (code 0) each -0 code (0x8) among the `n` (a multiple of 16) codes at `out` whose
/// element x[e] satisfies `zero` (compressed-tensors' sign of a zero); only code 0x8 can be a
/// signed zero, so the codes are scanned eight bytes at a time for that nibble and `zero` is asked
/// only there.
template <class T, class Zero>
void clear_zero_codes(T const* x, index_t n, float4_e2m1x2_t* out, Zero&& zero) {
  for (index_t w = 0; w < n / 16; ++w) {
    std::uint64_t v = 0;
    std::memcpy(&v, out + w * 8, 8);
    std::uint64_t const t = v ^ 0x8888888888888888ull;  // nibble 0 where the code is 0x8
    std::uint64_t found = ~(((t & 0x7777777777777777ull) + 0x7777777777777777ull) | t) & 0x8888888888888888ull;
    if (found == 0) {
      continue;
    }
    while (found != 0) {
      int const nib = std::countr_zero(found) / 4;  // element w * 16 + nib, byte nib / 2
      found &= found - 1;
      if (zero(x[w * 16 + nib])) {
        v &= ~(std::uint64_t{0xF} << (4 * nib));
      }
    }
    std::memcpy(out + w * 8, &v, 8);
  }
}

}  // namespace detail::ct

/// compressed-tensors `nvfp4-pack-quantized` of the rows of `w` [M, K] (T: float, half_t or
/// bfloat16_t; K a multiple of 16, unit stride along K) given the tensor's (or fused group's)
/// `global_scale` (`ct_nvfp4_global_scale` of its amax): `values` [M, K/2] and `scales`
/// [M, K/16] (linear), as described in the file comment.
/// @throws shape_error for K not a multiple of 16 or outputs of other shapes; value_error for a
///   global scale that is not finite and positive.
template <class T>
void ct_nvfp4_quantize(view2d<T const> w, float global_scale, view2d<float4_e2m1x2_t> values,
                       view2d<float8_e4m3fn_t> scales) {
  detail::ct::check_fp4_shapes<nvfp4>("qtl::ct_nvfp4_quantize", w, values, scales);
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  if (m == 0 || k == 0) {
    return;
  }
  constexpr std::uint8_t ct_eps = 0x20;  // E4M3 0.125 = 2^(4 - 7)
  for (index_t i = 0; i < m; ++i) {
    view2d<T const> const row = make_view(&w(i, 0), 1, k);
    std::span<float8_e4m3fn_t> const row_scales(&scales(i, 0), static_cast<std::size_t>(k / nvfp4::block_size));
    block_quantize<nvfp4>(row, make_view(&values(i, 0), 1, k / 2), row_scales, global_scale);
    for (auto& sc : row_scales) {
      sc.bits = sc.bits == 0 ? ct_eps : sc.bits;
    }
    detail::ct::clear_zero_codes(&w(i, 0), k, &values(i, 0), [](T v) { return to_float(v) == 0.0f; });
  }
}

/// compressed-tensors `mxfp4-pack-quantized` of the rows of `w` [M, K] (T: float, half_t or
/// bfloat16_t; K a multiple of 32, unit stride along K): `values` [M, K/2] and the E8M0 `scales`
/// [M, K/32] (linear), as described in the file comment. Each block's max pass (NaN
/// propagating, as torch's) also finds a NaN or an infinity.
/// @throws value_error for a NaN or infinite weight (naming row first_row + r and its column)
///   unless `opt.allow_nonfinite`; shape_error for K not a multiple of 32 or outputs of other
///   shapes. Rows before a refused one are written.
template <class T>
void ct_mxfp4_quantize(view2d<T const> w, view2d<float4_e2m1x2_t> values, view2d<float8_e8m0fnu_t> scales,
                       ct_fp4_options const& opt = {}) {
  detail::ct::check_fp4_shapes<mxfp4>("qtl::ct_mxfp4_quantize", w, values, scales);
  constexpr index_t bs = mxfp4::block_size;
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  bool const avx2 = detail::avx2_quantizes<T>();
#if QTL_X86
  bool const x86 = detail::ct::has_avx2_f16c();
#endif  // ^^^ QTL_X86 ^^^
  for (index_t i = 0; i < m; ++i) {
    T const* row = &w(i, 0);
    index_t first = 0;  // the blocks an x86 executor did
    if constexpr (std::is_same_v<T, bfloat16_t>) {
      first = detail::fp4_x86::ct_mx_row(row, &values(i, 0), &scales(i, 0).bits, k / bs);
      for (index_t b = 0; b < first; ++b) {
        float const os = e8m0_reciprocal(scales(i, b).bits);
        detail::ct::clear_zero_codes(row + b * bs, bs, &values(i, b * (bs / 2)),
                                     [os](T v) { return rounds_to_zero_in<T>(to_float(v) * os); });
      }
    }
    for (index_t b = first; b < k / bs; ++b) {
      T const* x = row + b * bs;
      float mx = 0.0f;
      float mn = 0.0f;
      bool clean = false;  // max and min finite
#if QTL_X86
      clean = x86 && detail::ct::ct_max_min_x86(x, bs, mx, mn);
#endif  // ^^^ QTL_X86 ^^^
      if (!clean) {
        std::tie(mx, mn) = nan_max_min(x, bs);
      }
      float const amax = detail::qnt::nan_max(mx, -mn);
      if (!opt.allow_nonfinite && !is_finite(amax)) {
        detail::ct::refuse_nonfinite(x, bs, opt.first_row + i, b * bs, "block");
      }
      std::uint8_t const sc = ct_mx_scale_code<T>(amax);
      scales(i, b).bits = sc;
      float const os = e8m0_reciprocal(sc);  // 1 / 2^(sc - 127), exact
      float4_e2m1x2_t* out = &values(i, b * (bs / 2));
      detail::block_codes_dispatch<mxfp4>(avx2, x, out, os);
      detail::ct::clear_zero_codes(x, bs, out, [os](T v) { return rounds_to_zero_in<T>(to_float(v) * os); });
    }
  }
}

}  // namespace qtl
