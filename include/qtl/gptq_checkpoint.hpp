#pragma once
/// \file
/// A GPTQ checkpoint's tensors (the layout AutoGPTQ and GPTQModel write and vLLM's `gptq` /
/// `gptq_marlin` and sglang load), computed on the checkpoint's own row-major weight W [N, K]
/// (groups of gs columns along K), without transposing W:
///
///   W [N, K], row n, group g = columns [g·gs, g·gs + gs)           pf = 32 / b codes a word
///
///     qweight [K/pf, N] I32   word (i, n) holds the code of W(n, pf·i + j) in bits [b·j, b·j + b)
///     scales  [K/gs, N] F16   the group's scale (g, n)
///     zeros   [K/gs, N] I32   its stored zero point, unpacked (the checkpoint's `qzeros` packs
///                             them along N: `qtl::pack_cols`, minus 1 for GPTQ v1)
///
/// The rules (`gptq_rule`; element functions in qtl/element/gptq_quantizer.hpp):
/// - symmetric: the reference's `quantize_weights` without zero points (uint4b8 / uint8b128), its
///   scale in the weight's dtype and its codes under that scale; the zero point is the bias.
///   These are the bytes `quantize_weights` on Wᵀ, `pack_rows` and an F16 cast of its scales give,
///   with its documented difference from the CPU reference: an all-zero group (scale 0, 0/0 = NaN)
///   has codes `bias` (int(NaN) = 0, as CUDA), where the CPU reference's are `qmin + bias`; both
///   dequantize to 0.
/// - asymmetric: GPTQ's own quantizer, the codes taken under the scale as stored (F16).
///
/// A finite scale that F16 cannot hold is refused: one that overflows to Inf, or one that rounds to
/// 0 in a group holding a nonzero weight (the group would dequantize to 0).
///
/// Rows are independent: a caller may run any slice of rows with views of the outputs' matching
/// columns (any row stride), `first_row` naming the slice's place in errors.
///
/// **Host loop.** As `qtl::ct_pack_quantize`'s: one pass over each group finds its max and min
/// (also a NaN or an infinity, refused there unless `allow_nonfinite`), the next computes its codes
/// into a row of bytes (on x86 with AVX2 and F16C by `qtl/x86/gptq_checkpoint.hpp`, the same
/// bits), and the row's packed words go to its column of qweight.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <qtl/ct_quantize.hpp>
#include <qtl/element/gptq_quantizer.hpp>
#include <qtl/error.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>
#include <qtl/x86/gptq_checkpoint.hpp>

namespace qtl {

/// What `gptq_checkpoint_quantize` computes, and how it treats non-finite weights.
struct gptq_checkpoint_options {
  int bits = 4;                           ///< 4 or 8
  index_t group_size = 128;               ///< columns per group: divides K, a multiple of 32 / bits
  gptq_rule rule = gptq_rule::symmetric;  ///< see the file comment
  bool allow_nonfinite = false;           ///< quantize NaN/Inf weights (their group's scale is NaN or Inf)
  index_t first_row = 0;                  ///< the row of W that w's row 0 is (only names rows in errors)
};

/// The outputs of `gptq_checkpoint_quantize` for the M rows of w: the matching M columns of the
/// checkpoint's tensors (unit stride along the last dimension, any row stride).
struct gptq_checkpoint_outputs {
  view2d<std::int32_t> qweight;  ///< [K/pf, M]
  view2d<half_t> scales;         ///< [K/gs, M]
  view2d<std::int32_t> zeros;    ///< [K/gs, M]
};

namespace detail::gptq {

/// The F16 scale a GPTQ checkpoint stores for scale `s` of the group at x (gs weights; row r,
/// columns from c0). @throws value_error when F16 cannot hold a finite `s` (the file comment)
template <class T>
half_t f16_scale(float s, T const* x, index_t gs, index_t r, index_t c0) {
  half_t const h = from_float<half_t>(s);
  float const back = to_float(h);
  bool bad = is_finite(s) && !is_finite(back);
  if (is_finite(s) && back == 0.0f) {
    for (index_t i = 0; i < gs; ++i) {
      bad = bad || to_float(x[i]) != 0.0f;
    }
  }
  if (bad) {
    char value[32];
    std::snprintf(value, sizeof value, "%.3g", static_cast<double>(s));
    throw value_error("the GPTQ scale of row " + std::to_string(r) + ", columns " + std::to_string(c0) + ".." +
                      std::to_string(c0 + gs - 1) + " is " + value +
                      ", which F16 (the type of GPTQ scales) cannot hold: " +
                      (!is_finite(back) ? "it overflows to Inf" : "it rounds to 0 and the group dequantizes to 0"));
  }
  return h;
}

}  // namespace detail::gptq

/// GPTQ checkpoint tensors of the rows of `w` [M, K] (T: float, half_t or bfloat16_t; unit stride
/// along K) by `opt.rule` into `out` (layouts in the file comment).
/// @throws value_error for a NaN or infinite weight (naming row first_row + r and its column) unless
///   `opt.allow_nonfinite`, for a scale F16 cannot hold (naming the row and columns), for bits
///   other than 4 or 8; shape_error for a group size that does not divide K or is not a multiple of
///   32 / bits, or outputs of other shapes. After a refusal the outputs hold part of the rows
///   before the refused one (qweight is stored 16 rows at a time).
template <class T>
void gptq_checkpoint_quantize(view2d<T const> w, gptq_checkpoint_outputs const& out,
                              gptq_checkpoint_options const& opt = {}) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>,
                "qtl::gptq_checkpoint_quantize: T must be float, half_t or bfloat16_t");
  char const* const fn = "qtl::gptq_checkpoint_quantize";
  if (opt.bits != 4 && opt.bits != 8) {
    throw value_error(std::string(fn) + ": bits is " + std::to_string(opt.bits) + "; GPTQ checkpoints pack 4 or 8");
  }
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  index_t const gs = opt.group_size;
  int const bits = opt.bits;
  index_t const pf = 32 / bits;
  if (gs <= 0 || k % gs != 0 || gs % pf != 0) {
    throw shape_error(std::string(fn) + ": group size " + std::to_string(gs) + " must divide K = " + std::to_string(k) +
                      " and be a multiple of " + std::to_string(pf) + ", the codes in a word");
  }
  if (m > 0 && k > 0 && (w.data == nullptr || w.stride[1] != 1)) {
    throw shape_error(std::string(fn) + ": w has no data or not a unit stride along K");
  }
  index_t const groups = k / gs;
  detail::ct::check_output(fn, "qweight", out.qweight, k / pf, m);
  detail::ct::check_output(fn, "scales", out.scales, groups, m);
  detail::ct::check_output(fn, "zeros", out.zeros, groups, m);
  // The packed words of `tile` rows at a time, then stored a qweight row (`tile` consecutive
  // words: one cache line) at a time: storing each row's words down its column of qweight instead
  // touches K/pf lines per row, more than the L1 cache holds for a wide K.
  constexpr index_t tile = 16;
  std::vector<std::uint8_t> u(static_cast<std::size_t>(k));
  std::vector<std::int32_t> words(static_cast<std::size_t>(tile * (k / pf)));
  bool const x86 = detail::ct::x86_executor();
  for (index_t r = 0; r < m; ++r) {
    T const* row = &w(r, 0);
    std::int32_t* const row_words = words.data() + r % tile * (k / pf);
    for (index_t g = 0; g < groups; ++g) {
      T const* x = row + g * gs;
      float mx = 0.0f;
      float mn = 0.0f;
      bool const clean = detail::ct::group_max_min(x86, x, gs, opt.allow_nonfinite, opt.first_row + r, g * gs, mx, mn);
      group_params const p = gptq_group_params<T>(opt.rule, mx, mn, bits);
      half_t const h = detail::gptq::f16_scale(p.s, x, gs, opt.first_row + r, g * gs);
      float const stored = to_float(h);
      out.scales(g, r) = h;
      out.zeros(g, r) = opt.rule == gptq_rule::symmetric || p.zp == p.zp ? static_cast<std::int32_t>(p.zp) : 0;
      index_t done = 0;  // codes of the x86 executor
#if QTL_X86
      float const s = opt.rule == gptq_rule::symmetric ? p.s : stored;
      if (x86 && clean && s > 0.0f && is_finite(s)) {
        done = detail::gptq::x86::codes(x, gs, opt.rule, p, stored, bits, u.data() + g * gs);
      }
#endif  // ^^^ QTL_X86 ^^^
      detail::ct::group_codes(x + done, gs - done, u.data() + g * gs + done, [&opt, p, stored, bits](T v) {
        return static_cast<std::uint8_t>(gptq_code<T>(opt.rule, to_float(v), p, stored, bits));
      });
    }
    if (bits == 4) {
      detail::ct::pack_row4(u.data(), k, row_words);
    } else {
      std::memcpy(row_words, u.data(), static_cast<std::size_t>(k));  // word c: codes 4c .. 4c+3, low byte first
    }
    if (r % tile == tile - 1 || r == m - 1) {
      index_t const r0 = r - r % tile;
      for (index_t i = 0; i < k / pf; ++i) {
        for (index_t t = 0; t <= r - r0; ++t) {
          out.qweight(i, r0 + t) = words[static_cast<std::size_t>(t * (k / pf) + i)];
        }
      }
    }
  }
}

}  // namespace qtl
