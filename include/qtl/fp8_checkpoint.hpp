#pragma once
/// \file
/// FP8 (E4M3) checkpoint weights and their F32 scales, computed on the checkpoint's row-major
/// weight W [N, K] by the scale schemes checkpoints use, built from qtl/fp8.hpp's quantizers:
///
///   scheme   scales                      scale of its elements                     codes
///   tensor   [1]                         fp8_scale_from_amax(amax of W, or the      scaled_fp8_quant_static
///                                        given amax of a fused group: amax / 448)
///   channel  [N] (the checkpoint [N, 1]) scaled_fp8_quant_per_token's (amax / 448)  scaled_fp8_quant_per_token
///   block    [⌈N/bn⌉, ⌈K/bk⌉]            by `fp8_block_rule` of the block's amax:   scaled_fp8_quant_static
///                                        hf: max(amax, 1e-12) / 448 (HF `fp8`,        of the block
///                                        DeepSeek-V3, Qwen3-FP8); compressed_tensors:
///                                        amax / 448, 0 (an all-zero block) -> 2^-23
///                                        (its `calculate_qparams` epsilon)
///
/// Every amax pass also finds a NaN or an infinity, refused unless `allow_nonfinite` (then
/// quantized as the quantizers do). With a given tensor amax the caller's pass did that.
///
/// The codes are x · fl(1/s) (the static and per-token quantizers' default), for every scheme and rule. Against
/// compressed-tensors' compressor (x / s plus a zero point of 0): a -0.0 weight is code 0x80 here
/// and +0 there (both decode to 0), and the two roundings can differ by one code where they
/// straddle a code boundary (none in the golden cases 2480-2482).
///
/// Rows are independent but for the tensor scheme's amax: a caller may run any slice of rows
/// starting at a multiple of bn (views of those rows of W and codes, the slice's scales), giving a
/// tensor scheme the whole tensor's amax; `first_row` names the slice's place in errors.

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

#include <qtl/ct_quantize.hpp>
#include <qtl/element/fp8_checkpoint.hpp>
#include <qtl/error.hpp>
#include <qtl/fp8.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// The number of scales `fp8_checkpoint_quantize` writes for a weight of `rows` x `cols`.
/// @throws shape_error for block sizes that are not positive (block scheme)
inline index_t fp8_checkpoint_scale_count(index_t rows, index_t cols, fp8_checkpoint_options const& opt) {
  if (opt.scheme == fp8_checkpoint_scheme::block && (opt.block_n <= 0 || opt.block_k <= 0)) {
    throw shape_error("qtl::fp8_checkpoint_quantize: blocks " + std::to_string(opt.block_n) + "x" +
                      std::to_string(opt.block_k) + " must be positive");
  }
  switch (opt.scheme) {
    case fp8_checkpoint_scheme::tensor: return 1;
    case fp8_checkpoint_scheme::channel: return rows;
    case fp8_checkpoint_scheme::block: break;
  }
  return (rows + opt.block_n - 1) / opt.block_n * ((cols + opt.block_k - 1) / opt.block_k);
}

namespace detail::fp8ck {

/// `scan_amax` of `v` (rows r0.., columns c0.. of W; the `unit` one scale covers); a NaN or an
/// infinity refused naming the first in row-major order unless `allow`. @throws value_error
template <class T>
float checked_amax(view2d<T const> v, bool allow, index_t r0, index_t c0, char const* unit) {
  amax_scan const a = scan_amax(v);
  if (!a.finite && !allow) {
    for (index_t r = 0; r < v.extent[0]; ++r) {
      for (index_t c = 0; c < v.extent[1]; ++c) {
        if (!is_finite(to_float(v(r, c)))) {
          detail::ct::refuse_nonfinite(&v(r, c), 1, r0 + r, c0 + c, unit);
        }
      }
    }
  }
  return a.amax;
}

}  // namespace detail::fp8ck

/// The tensor scheme's amax of `w` (`scan_amax`: max |x|, NaN ignored), computed once by a caller
/// that runs the op on slices of rows (as `fp8_checkpoint_options::tensor_amax`).
/// @throws value_error naming the first NaN or infinity in row-major order unless `allow_nonfinite`
template <class T>
float fp8_checkpoint_amax(view2d<T const> w, bool allow_nonfinite) {
  return detail::fp8ck::checked_amax(w, allow_nonfinite, 0, 0, "tensor");
}

/// FP8 checkpoint codes [M, K] and scales of the rows of `w` [M, K] (T: float, half_t or
/// bfloat16_t; unit stride along K) by `opt` (the file comment): `scales` holds
/// `fp8_checkpoint_scale_count(M, K, opt)` floats, row-major for blocks.
/// @throws value_error for a NaN or infinite weight (naming row first_row + r and its column)
///   unless `opt.allow_nonfinite`; shape_error for codes of another shape, a scale count that
///   differs, block sizes that are not positive, a slice not starting at a block row.
template <class T>
void fp8_checkpoint_quantize(view2d<T const> w, view2d<float8_e4m3fn_t> codes, std::span<float> scales,
                             fp8_checkpoint_options const& opt = {}) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>,
                "qtl::fp8_checkpoint_quantize: T must be float, half_t or bfloat16_t");
  char const* const fn = "qtl::fp8_checkpoint_quantize";
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  bool const block = opt.scheme == fp8_checkpoint_scheme::block;
  index_t const count = fp8_checkpoint_scale_count(m, k, opt);  // checks the block sizes
  if (block && opt.first_row % opt.block_n != 0) {
    throw shape_error(std::string(fn) + ": a slice must start at a block row (row " + std::to_string(opt.first_row) +
                      ", blocks of " + std::to_string(opt.block_n) + " rows)");
  }
  if (m * k > 0 && (w.data == nullptr || (k > 1 && w.stride[1] != 1))) {
    throw shape_error(std::string(fn) + ": w has no data or not a unit stride along K");
  }
  detail::ct::check_output(fn, "codes", codes, m, k);
  if (static_cast<index_t>(scales.size()) != count) {
    throw shape_error(std::string(fn) + ": scales has " + std::to_string(scales.size()) + " elements, " +
                      std::to_string(count) + " expected");
  }
  if (m * k == 0) {
    return;
  }
  switch (opt.scheme) {
    case fp8_checkpoint_scheme::tensor: {
      float const amax = opt.tensor_amax
                             ? *opt.tensor_amax
                             : detail::fp8ck::checked_amax(w, opt.allow_nonfinite, opt.first_row, 0, "tensor");
      scales[0] = fp8_scale_from_amax<float8_e4m3fn_t>(amax);
      scaled_fp8_quant_static<float8_e4m3fn_t>(w, scales[0], codes);
      return;
    }
    case fp8_checkpoint_scheme::channel:
      for (index_t r = 0; r < m; ++r) {
        view2d<T const> const row = make_view(&w(r, 0), 1, k);
        (void)detail::fp8ck::checked_amax(row, opt.allow_nonfinite, opt.first_row + r, 0, "row");
        scaled_fp8_quant_per_token<float8_e4m3fn_t>(row, make_view(&codes(r, 0), 1, k), make_view(&scales[r], 1));
      }
      return;
    case fp8_checkpoint_scheme::block: break;
  }
  index_t const bk = (k + opt.block_k - 1) / opt.block_k;
  for (index_t n0 = 0; n0 < m; n0 += opt.block_n) {
    index_t const rows = std::min(opt.block_n, m - n0);
    for (index_t j = 0; j < bk; ++j) {
      index_t const c0 = j * opt.block_k;
      index_t const cols = std::min(opt.block_k, k - c0);
      view2d<T const> in = make_view(&w(n0, c0), rows, cols);
      in.stride[0] = w.stride[0];
      view2d<float8_e4m3fn_t> out = make_view(&codes(n0, c0), rows, cols);
      out.stride[0] = codes.stride[0];
      float const amax = detail::fp8ck::checked_amax(in, opt.allow_nonfinite, opt.first_row + n0, c0, "block");
      float const scale = fp8_block_scale(opt.rule, amax);
      scaled_fp8_quant_static<float8_e4m3fn_t>(in, scale, out);
      scales[static_cast<std::size_t>(n0 / opt.block_n * bk + j)] = scale;
    }
  }
}

}  // namespace qtl
