#pragma once
/// \file
/// compressed-tensors `pack-quantized` integer weights (W4A16, W8A16: 4- or 8-bit integers,
/// symmetric or asymmetric, per group along K or per channel), computed on the checkpoint's own
/// row-major weight W [N, K] (no transpose), bit for bit as compressed-tensors' compressor writes
/// them. The element rules are `ct_int_group_params` and `ct_int_code` of
/// `qtl/element/quantize.hpp` (their comment has the formulas); this header runs them over rows.
///
///   W [N, K], row r, group g = columns [g·gs, g·gs + gs)     (gs = K for channel, G = K / gs)
///
///          K →                        packed [N, K/pf] I32      scales [N, G] T
///   N  ┌────┬────┬────┐              ┌───────────────┐         ┌──┬──┬──┐
///   ↓  │ g0 │ g1 │ g2 │ row r  ───▶  │ w0 w1 ...     │         │s0│s1│s2│  zero_points [N, G] I32
///      └────┴────┴────┘              └───────────────┘         └──┴──┴──┘  (asymmetric only)
///
///   word c of row r holds u(r, c·pf + j) in bits [b·j, b·j + b), j = 0 .. pf-1 (pf = 32 / b):
///   compressed-tensors' `pack_to_int32` along K; u = q + 2^(b-1), q the signed code in
///   [-2^(b-1), 2^(b-1) - 1]. zero_points hold zp + 2^(b-1), unpacked: the checkpoint's
///   `weight_zero_point` is them packed along N ([N/pf, G], `qtl::pack_rows` of qtl/pack.hpp).
///
/// Rows are independent: a caller may run any slice of rows (views of those rows of W and of the
/// outputs, `first_row` naming the slice's place in errors), e.g. to write a slice and release
/// its pages before the next.
///
/// **Host loop.** One pass over each group finds its max and min (NaN-propagating, as torch.max;
/// it also finds a NaN or an infinity, refused there unless `allow_nonfinite`), the next computes
/// the codes into a row of bytes (for 8 bits, the packed row itself), and for 4 bits a third packs
/// the row eight codes a step. The portable loops are written in fixed-size lane blocks of the
/// element functions, which the compiler vectorises (SSE2 at -O2); on x86-64 CPUs with AVX2 and
/// F16C the codes of every group with a finite max and min come from the executor of
/// `qtl/x86/ct_quantize.hpp` (`detail::ct::ct_codes_x86`), 8 at a time with one instruction per
/// step, the same bits (test/unit/ct_quantize_test.cpp compares it at each level). Nothing needs
/// FMA, and contraction cannot change the results (no product feeds a sum).

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <qtl/element/quantize.hpp>
#include <qtl/error.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>
#include <qtl/x86/ct_quantize.hpp>

namespace qtl {

/// The largest and smallest of the `n` (> 0) values at `x` as floats, NaN if one is NaN
/// (torch.max / torch.min), ±Inf if one is infinite. Eight independent lanes, so that the
/// compiler keeps them in one vector register.
template <class T>
std::pair<float, float> nan_max_min(T const* x, index_t n) {
  using detail::qnt::nan_max;
  using detail::qnt::nan_min;
  constexpr index_t lanes = 8;
  float mx[lanes];
  float mn[lanes];
  for (index_t l = 0; l < lanes; ++l) {
    mx[l] = mn[l] = to_float(x[0]);
  }
  index_t const whole = n - n % lanes;  // the tail loop's own bounds: g++ -O3 misreads a shared i
  for (index_t i = 0; i < whole; i += lanes) {
    for (index_t l = 0; l < lanes; ++l) {
      float const v = to_float(x[i + l]);
      mx[l] = nan_max(mx[l], v);
      mn[l] = nan_min(mn[l], v);
    }
  }
  for (index_t i = whole; i < n; ++i) {
    mx[0] = nan_max(mx[0], to_float(x[i]));
    mn[0] = nan_min(mn[0], to_float(x[i]));
  }
  for (index_t l = 1; l < lanes; ++l) {
    mx[0] = nan_max(mx[0], mx[l]);
    mn[0] = nan_min(mn[0], mn[l]);
  }
  return {mx[0], mn[0]};
}

/// What `ct_pack_quantize` computes, and how it treats non-finite weights.
struct ct_pack_options {
  int bits = 4;                  ///< 4 or 8
  index_t group_size = 128;      ///< columns per group, dividing K; -1: one group per row (channel)
  bool symmetric = true;         ///< false: asymmetric, with zero points
  bool allow_nonfinite = false;  ///< quantize NaN/Inf weights (their group's scale and codes as CT's)
  index_t first_row = 0;         ///< the row of W that w's row 0 is (only names rows in errors)
};

/// The outputs of `ct_pack_quantize` for the M rows of w (row-major, unit stride along the last
/// dimension): packed [M, K/pf], scales [M, G], zero_points [M, G] (asymmetric; ignored, and may
/// be empty, when symmetric).
template <class T>
struct ct_pack_outputs {
  view2d<std::int32_t> packed;
  view2d<T> scales;
  view2d<std::int32_t> zero_points;
};

/// The columns per group of `ct_pack_quantize` on a weight of K columns: `opt.group_size` when it
/// divides K, K for -1 (so the outputs have K / this many groups a row).
/// @throws value_error for bits other than 4 and 8, or a group size neither positive nor -1;
///   shape_error for K = 0, a group size that does not divide K, or K not a multiple of 32 / bits.
inline index_t ct_pack_group_size(index_t k, ct_pack_options const& opt) {
  std::string const fn = "qtl::ct_pack_quantize: ";
  if (opt.bits != 4 && opt.bits != 8) {
    throw value_error(fn + "bits is " + std::to_string(opt.bits) + "; compressed-tensors packs 4 or 8");
  }
  if (opt.group_size != -1 && opt.group_size <= 0) {
    throw value_error(fn + "group_size " + std::to_string(opt.group_size) +
                      " is not a positive size or -1 (one group per row)");
  }
  if (k == 0) {
    throw shape_error(fn + "w has no columns (K = 0)");
  }
  index_t const gs = opt.group_size == -1 ? k : opt.group_size;
  if (k % gs != 0) {
    throw shape_error(fn + "group_size " + std::to_string(gs) + " does not divide K = " + std::to_string(k));
  }
  index_t const pf = 32 / opt.bits;
  if (k % pf != 0) {
    throw shape_error(fn + "K = " + std::to_string(k) + " is not a multiple of " + std::to_string(pf) + ", the " +
                      std::to_string(opt.bits) + "-bit codes in a 32-bit word");
  }
  return gs;
}

namespace detail::ct {

/// Output `arg` of op `fn` must be [rows, cols] with data and a unit stride along its last dimension.
/// @throws shape_error
template <class V>
void check_output(char const* fn, char const* arg, V const& v, index_t rows, index_t cols) {
  if (v.extent[0] != rows || v.extent[1] != cols) {
    throw shape_error(std::string(fn) + ": " + arg + " has shape " + shape_string(v.extent[0], v.extent[1]) +
                      ", expected " + shape_string(rows, cols));
  }
  if (rows * cols > 0 && (v.data == nullptr || (cols > 1 && v.stride[1] != 1))) {
    throw shape_error(std::string(fn) + ": " + arg + " has no data or not a unit stride along its last dimension");
  }
}

/// Throws the error naming the first NaN or infinity of the `gs` weights at `x` (row r, columns
/// from c0), the group (or the `unit` named) whose max or min was not finite.
template <class T>
[[noreturn]] void refuse_nonfinite(T const* x, index_t gs, index_t r, index_t c0, char const* unit = "group") {
  index_t i = 0;
  while (i + 1 < gs && is_finite(to_float(x[i]))) {
    ++i;
  }
  float const v = to_float(x[i]);
  throw value_error("element [" + std::to_string(r) + ", " + std::to_string(c0 + i) + "] is " +
                    (v != v  ? "NaN"
                     : v > 0 ? "+Inf"
                             : "-Inf") +
                    " (its " + unit + "'s scale would not be finite; allow_nonfinite quantizes it anyway)");
}

/// Whether the x86 executor of `qtl/x86/ct_quantize.hpp` runs (AVX2 and F16C, `QTL_X86`).
inline bool x86_executor() {
#if QTL_X86
  return has_avx2_f16c();
#else
  return false;
#endif  // ^^^ QTL_X86 ^^^
}

/// The largest and smallest of a group's `gs` weights at `x` (row r, columns from c0), by the x86
/// executor where `x86` and it takes them, else `nan_max_min`; returns whether both are finite.
/// @throws value_error naming the first NaN or infinity, unless `allow_nonfinite`
template <class T>
bool group_max_min([[maybe_unused]] bool x86, T const* x, index_t gs, bool allow_nonfinite, index_t r, index_t c0,
                   float& mx, float& mn) {
  bool clean = false;
#if QTL_X86
  clean = x86 && gs % 8 == 0 && ct_max_min_x86(x, gs, mx, mn);
#endif  // ^^^ QTL_X86 ^^^
  if (!clean) {
    std::tie(mx, mn) = nan_max_min(x, gs);
    clean = is_finite(mx) && is_finite(mn);
  }
  if (!clean && !allow_nonfinite) {
    refuse_nonfinite(x, gs, r, c0);
  }
  return clean;
}

/// u[i] = code(x[i]) for the `gs` weights at `x`, 16 at a time (into a local block first: a store
/// through `u`, a byte pointer, could alias anything, which keeps the compiler from vectorising
/// the loop).
template <class T, class Code>
void group_codes(T const* x, index_t gs, std::uint8_t* u, Code const& code) {
  constexpr index_t lanes = 16;
  index_t i = 0;
  for (; i + lanes <= gs; i += lanes) {
    std::uint8_t block[lanes];
    for (index_t l = 0; l < lanes; ++l) {
      block[l] = code(x[i + l]);
    }
    std::memcpy(u + i, block, lanes);
  }
  for (; i < gs; ++i) {
    u[i] = code(x[i]);
  }
}

/// Packs the K 4-bit codes `u` of a row into K / 8 words (element j of a word in bits [4j, 4j + 4)):
/// eight bytes at a time as one 64-bit value, whose byte pairs, then 16-bit and 32-bit halves, are
/// folded together (byte i holds code i: little-endian, as x86-64 and every CUDA host).
inline void pack_row4(std::uint8_t const* u, index_t k, std::int32_t* out) {
  for (index_t c = 0; c < k / 8; ++c) {
    std::uint64_t x = 0;
    std::memcpy(&x, u + c * 8, 8);
    x = (x | (x >> 4)) & 0x00FF00FF00FF00FFull;   // byte 2i: codes 2i, 2i+1
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFFull;   // 16 bits at 32i: codes 4i .. 4i+3
    x = (x | (x >> 16)) & 0x00000000FFFFFFFFull;  // codes 0 .. 7
    out[c] = static_cast<std::int32_t>(static_cast<std::uint32_t>(x));
  }
}

}  // namespace detail::ct

/// compressed-tensors `pack-quantized` of the rows of `w` [M, K] (T: float, half_t or bfloat16_t;
/// unit stride along K): for each row r and group g, the scale and zero point of
/// `ct_int_group_params<T>` on the group's max and min, the codes of `ct_int_code<T>` offset by
/// 2^(b-1) and packed along K into `out.packed`, the scale (a T value) into `out.scales` and, when
/// asymmetric, zp + 2^(b-1) into `out.zero_points` (layouts in the file comment).
/// @throws value_error for a NaN or infinite weight (naming its row first_row + r and column)
///   unless `opt.allow_nonfinite`, for bits other than 4 or 8 or a group size neither positive nor
///   -1; shape_error for K = 0, a group size that does not divide K, K not a multiple of 32 / bits,
///   or outputs of other shapes. Rows before a refused one are written.
template <class T>
void ct_pack_quantize(view2d<T const> w, ct_pack_outputs<T> const& out, ct_pack_options const& opt) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>,
                "qtl::ct_pack_quantize: T must be float, half_t or bfloat16_t");
  index_t const m = w.extent[0];
  index_t const k = w.extent[1];
  index_t const gs = ct_pack_group_size(k, opt);
  index_t const groups = k / gs;
  int const bits = opt.bits;
  index_t const pf = 32 / bits;
  if (m > 0 && (w.data == nullptr || (k > 1 && w.stride[1] != 1))) {
    throw shape_error("qtl::ct_pack_quantize: w has no data or not a unit stride along K");
  }
  detail::ct::check_output("qtl::ct_pack_quantize", "packed", out.packed, m, k / pf);
  detail::ct::check_output("qtl::ct_pack_quantize", "scales", out.scales, m, groups);
  if (!opt.symmetric) {
    detail::ct::check_output("qtl::ct_pack_quantize", "zero_points", out.zero_points, m, groups);
  }
  static_assert(std::endian::native == std::endian::little, "the packing below assumes a little-endian host");
  std::int32_t const offset = 1 << (bits - 1);
  std::vector<std::uint8_t> row_codes(bits == 4 ? static_cast<std::size_t>(k) : 0);
  bool const x86 = detail::ct::x86_executor();
  for (index_t r = 0; r < m; ++r) {
    T const* row = &w(r, 0);
    // 8 bits: the codes are the packed row's bytes (word c holds codes 4c .. 4c+3, low byte first)
    std::uint8_t* u = bits == 4 ? row_codes.data() : reinterpret_cast<std::uint8_t*>(&out.packed(r, 0));
    for (index_t g = 0; g < groups; ++g) {
      T const* x = row + g * gs;
      float mx = 0.0f;
      float mn = 0.0f;
      bool const clean = detail::ct::group_max_min(x86, x, gs, opt.allow_nonfinite, opt.first_row + r, g * gs, mx, mn);
      group_params const p = ct_int_group_params<T>(mx, mn, bits, opt.symmetric);
      out.scales(r, g) = from_float<T>(p.s);  // exact: s is a T value
      if (!opt.symmetric) {
        out.zero_points(r, g) = static_cast<std::int32_t>(p.zp) + offset;
      }
      index_t done = 0;  // codes of the x86 executor
#if QTL_X86
      if (x86 && clean) {
        done = detail::ct::ct_codes_x86(x, gs, p, bits, u + g * gs);
      }
#endif  // ^^^ QTL_X86 ^^^
      detail::ct::group_codes(x + done, gs - done, u + g * gs + done, [p, bits, offset](T v) {
        return static_cast<std::uint8_t>(static_cast<std::int32_t>(ct_int_code<T>(to_float(v), p, bits)) + offset);
      });
    }
    if (bits == 4) {
      detail::ct::pack_row4(u, k, &out.packed(r, 0));
    }
  }
}

}  // namespace qtl
