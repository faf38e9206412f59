#pragma once
/// \file
/// The element layer of group quantization (`qtl/quantize.hpp` runs it on the host,
/// `qtl/cuda/quantize.cuh` on the device, and kernel authors build their own kernels from it):
/// the vocabulary (group-size arguments, options, outputs, `quant_range`), the `QTL_HOST_DEVICE
/// constexpr` element functions (scales, zero points, codes, reference values; the per-element
/// work of `per_tensor_dequantize` and `all_close_1d`), `quantize_group` for constant
/// evaluation, and the argument checks the host API shares. `docs/spec/semantics.md` §4 is the spec.
///
/// **Numerics** (the reference runs in the weight's dtype `T`: every torch operation computes in
/// float32 and rounds its result back to `T`, which is what `round_to<T>` does after each step
/// below; `rne` is torch.round, round half to even; qmax/qmin are the type's value range with the
/// bias removed, e.g. uint4b8: 7 and -8):
///
///   mx, mn = max, min of the group                              (NaN if the group holds a NaN)
///   symmetric:  s  = max(|T(mx / qmax)|, |T(mn / qmin)|)        (x / ∞ for a zero qmax or qmin)
///   zero point: s  = T(T(max(T(mx - mn), T(1e-5))) / qmax)
///               zp = int(clamp(rne(|T(mn / s)|), qmin, qmax))
///   code:       q  = clamp(int(rne(T(w / s))) + zp, qmin, qmax)   (zp = 0 when symmetric)
///   reference:  w_ref = T(T(q - zp) · s)
///               or, zero points applied after scales, T(T(q · s) - T(zp · s))
///   stored:     w_q = q + bias                                  (after w_ref, as the reference)
///   no groups:  q = clamp(int(rne(w)), qmin, qmax), w_ref = float(q) in float32 (the reference
///               divides by a float32 tensor [1.0], which promotes the result), no scales.
///
/// **Contraction.** `-ffp-contract=fast` (GCC's default in GNU modes) with FMA hardware would fuse
/// `q·s - zp·s` into one rounding. Products that feed a subtraction go through
/// `detail::mul_rn_unfused` (`qtl/exact.hpp`), whose result is xor-ed with a zero the compiler
/// cannot see, so no FMA can absorb it and loops still vectorise; on the device `__fmul_rn` and
/// friends are used. `-ffast-math` is not supported (it licenses re-association and flushes
/// subnormals).
///

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include <qtl/error.hpp>
#include <qtl/exact.hpp>
#include <qtl/group_size.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/scalar_type.hpp>
#include <qtl/view.hpp>

namespace qtl {

// ------------------------------------------------------------------------------------------------
// Vocabulary

/// Group-size template argument: one group per column (the reference's -1; same as G = K).
inline constexpr int group_channelwise = -1;
/// Group-size template argument: no groups and no scales (the reference's `group_size=None`).
inline constexpr int group_none = 0;
/// Group-size template argument: the size is a run-time value.
inline constexpr int group_dynamic = std::numeric_limits<int>::min();

/// The weight dtypes `quantize_weights` takes.
template <class T>
concept weight_float = std::is_same_v<T, float> || std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>;

/// True for a group-size template argument QTL accepts: channelwise, none, dynamic, or positive.
QTL_HOST_DEVICE constexpr bool is_valid_group_size_param(int g) {
  return g == group_channelwise || g == group_none || g == group_dynamic || g > 0;
}
/// True for the quantization types of the reference's `SUPPORTED_GPTQ_QUANT_TYPES`.
QTL_HOST_DEVICE constexpr bool is_gptq_quant_type(scalar_type q) { return q == uint4b8 || q == uint8b128; }

/// Options of `quantize_weights` (the reference's keyword arguments).
struct quantize_options {
  bool zero_points = false;                   ///< asymmetric, with per-group zero points
  bool ref_zero_points_after_scales = false;  ///< w_ref = q·s - zp·s (Machete's order)
};

/// Caller-owned outputs of `quantize_weights`. `R` is the weight dtype, float when ungrouped.
template <class R>
struct quantize_outputs {
  view2d<R> w_ref;            ///< (K, N) dequantized reference
  view2d<std::int32_t> w_q;   ///< (K, N) stored codes (bias added)
  view2d<R> w_s;              ///< (K/G, N) scales; unused when ungrouped
  view2d<std::int32_t> w_zp;  ///< (K/G, N) zero points; only with zero points
};

/// Allocated outputs of `quantize_weights` (`w_s`, `w_zp` empty where the reference returns None).
template <class R>
struct quantized_weights {
  host_tensor<R, 2> w_ref;
  host_tensor<std::int32_t, 2> w_q;
  host_tensor<R, 2> w_s;
  host_tensor<std::int32_t, 2> w_zp;
  /// Views of the buffers, as the view-taking overloads want them.
  quantize_outputs<R> views() { return {w_ref.view(), w_q.view(), w_s.view(), w_zp.view()}; }
};

/// The value range of an integer quantization type as floats (bias removed) and its bias.
struct quant_range {
  float qmin = 0;
  float qmax = 0;
  std::int32_t bias = 0;
};
/// `quant_range` of `q`. @pre q.is_integer(), q.size_bits() ≤ 24
QTL_HOST_DEVICE constexpr quant_range quant_range_of(scalar_type q) {
  return {static_cast<float>(q.min_int()), static_cast<float>(q.max_int()), q.bias};
}

/// Scale and zero point of one group (zp 0 when symmetric), as the element functions below take
/// and return them: weight w has code clamp(rne(w / s) + zp) and dequantizes to (q - zp) * s.
struct group_params {
  float s = 0;
  float zp = 0;
};

// ------------------------------------------------------------------------------------------------
// Element functions (host and device): each float operation rounds once, as IEEE and torch do.

namespace detail::qnt {

using qtl::detail::add_rn;
using qtl::detail::div_rn;
using qtl::detail::mul_rn_unfused;
using qtl::detail::opaque_zero;
using qtl::detail::select_bits;
using qtl::detail::sub_rn;

QTL_HOST_DEVICE constexpr float abs(float x) {
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) & 0x7FFFFFFFu);
}
QTL_HOST_DEVICE constexpr bool isnan(float x) { return x != x; }

// Selects with both arms already computed and conditions evaluated unconditionally. Loops built
// from them are if-converted and vectorised even under -ftrapping-math (GCC's default), which
// forbids speculating a float comparison or division that the source evaluates conditionally.
QTL_HOST_DEVICE constexpr std::uint32_t select(bool c, std::uint32_t a, std::uint32_t b) {
  return select_bits(c, a, b);
}
QTL_HOST_DEVICE constexpr float select(bool c, float a, float b) {
  return std::bit_cast<float>(select(c, std::bit_cast<std::uint32_t>(a), std::bit_cast<std::uint32_t>(b)));
}

/// `x` of storage type T as float (exact): numeric.hpp's branch-free conversions.
template <class T>
QTL_HOST_DEVICE constexpr float load(T x) {
  return qtl::to_float(x);
}
/// `x` rounded to T (nearest even; overflow to Inf), as `qtl::from_float<T>`.
template <class T>
QTL_HOST_DEVICE constexpr T store(float x) {
  return qtl::from_float<T>(x);
}
/// `x` rounded to T's precision and range, as a float: what torch does after each operation.
template <class T>
QTL_HOST_DEVICE constexpr float round_to(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return load<T>(store<T>(x));
  }
}

/// `x` rounded to T's precision (11 significant bits for fp16, 8 for bf16, nearest even) by bit
/// logic on the float, with no range handling: equal to `round_to<T>` wherever it is then fed to
/// `round_even` and clamped to a code range. (fp16 subnormal results are < 0.5 either way and
/// round to ±0; results ≥ 65520 become Inf in fp16 and ≥ 65536 here, and both clamp to qmax;
/// NaN and ±Inf pass through.)
template <class T>
QTL_HOST_DEVICE constexpr float round_precision_for_code(float x) {
  std::uint32_t const u = std::bit_cast<std::uint32_t>(x);
  if constexpr (std::is_same_v<T, half_t>) {
    return std::bit_cast<float>((u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu);
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return std::bit_cast<float>((u + 0x7FFFu + ((u >> 16) & 1u)) & ~0xFFFFu);
  } else {
    return x;
  }
}

/// torch.round (numeric.hpp's `round_half_even`, branch-free).
using qtl::round_half_even;

/// NaN-propagating max/min (torch.max/min and torch.maximum propagate NaN).
QTL_HOST_DEVICE constexpr float nan_max(float acc, float x) {
  bool const take = (x > acc) | isnan(x);
  return select(take, x, acc);
}
QTL_HOST_DEVICE constexpr float nan_min(float acc, float x) {
  bool const take = (x < acc) | isnan(x);
  return select(take, x, acc);
}
/// clamp(x, lo, hi) with NaN kept (torch.clamp).
QTL_HOST_DEVICE constexpr float clamp(float x, float lo, float hi) {
  bool const below = x < lo;
  bool const above = x > hi;
  return select(above, hi, select(below, lo, x));
}

using qtl::group_params;

/// Symmetric scale: max(|T(mx / qmax)|, |T(mn / qmin)|), dividing by +∞ where the bound is 0.
template <class T>
QTL_HOST_DEVICE constexpr group_params symmetric_scale(float mx, float mn, quant_range r) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  float const a = abs(round_to<T>(div_rn(mx, r.qmax != 0 ? r.qmax : inf)));
  float const b = abs(round_to<T>(div_rn(mn, r.qmin != 0 ? r.qmin : inf)));
  return {nan_max(a, b), 0.0f};  // torch.maximum: NaN if either is NaN
}

/// Asymmetric scale and zero point: s = T(clamp_min(T(mx - mn), T(1e-5)) / qmax),
/// zp = int(clamp(rne(|T(mn / s)|), qmin, qmax)) with int(NaN) = 0.
template <class T>
QTL_HOST_DEVICE constexpr group_params asymmetric_scale(float mx, float mn, quant_range r) {
  float const lo = round_to<T>(1e-5f);  // torch converts the Python scalar to T
  float d = round_to<T>(sub_rn(mx, mn));
  bool const below = d < lo;
  d = select(below, lo, d);  // clamp(min=): NaN stays NaN
  float const s = round_to<T>(div_rn(d, r.qmax));
  float const z = clamp(round_half_even(abs(round_to<T>(div_rn(mn, s)))), r.qmin, r.qmax);
  return {s, select(isnan(z), 0.0f, z)};
}

/// The clamped code (value domain, bias not added) of weight `w` in a group of scale `s`, zero
/// point `zp`: clamp(int(rne(T(w / s))) + zp, qmin, qmax), int(NaN) = 0, saturating.
template <class T>
QTL_HOST_DEVICE constexpr float quantize_code(float w, group_params p, quant_range r) {
  float q = round_half_even(round_precision_for_code<T>(div_rn(w, p.s)));
  q = std::bit_cast<float>(std::bit_cast<std::uint32_t>(q) & (0u - static_cast<std::uint32_t>(q == q)));  // NaN → +0
  // Saturating: |q| ≥ 2^24 (or ±Inf) stays beyond the code range after adding |zp| ≤ 2^23, so
  // the clamp below gives qmin or qmax as a saturating int conversion would.
  q = add_rn(q, p.zp);
  q = q < r.qmin ? r.qmin : q;  // not NaN here: plain selects (maxps/minps)
  return q > r.qmax ? r.qmax : q;
}

/// The dequantized reference of clamped code `q` (see the file comment) before its last rounding:
/// `store<T>` of the result is w_ref. `SmallCodes`: |q|, |zp|, |q - zp| ≤ 256, so converting them
/// to T is exact (every type of ≤ 8 bits) and skipped.
template <class T, bool SmallCodes = false>
QTL_HOST_DEVICE constexpr float dequantize_code(float q, group_params p, bool zp_after_scales, std::uint32_t opaque) {
  auto const to_t = [](float x) { return SmallCodes ? x : round_to<T>(x); };
  if (zp_after_scales) {
    float const a = round_to<T>(mul_rn_unfused(to_t(q), p.s, opaque));
    float const b = round_to<T>(mul_rn_unfused(to_t(p.zp), p.s, opaque));
    return sub_rn(a, b);
  }
  return mul_rn_unfused(to_t(sub_rn(q, p.zp)), p.s, opaque);
}

/// Ungrouped code: clamp(int(rne(w)), qmin, qmax) (w / 1.0f is w).
QTL_HOST_DEVICE constexpr float quantize_code_ungrouped(float w, quant_range r) {
  return quantize_code<float>(w, group_params{1.0f, 0.0f}, r);
}

}  // namespace detail::qnt

/// One group (one column of K weights) quantized in constant evaluation, as `quantize_weights`
/// does it with G = K: the element functions without the host executor, so `static_assert` can
/// check the numerics. `codes` are stored codes (bias added).
template <class T, std::size_t K>
struct quantized_group {
  T w_ref[K] = {};
  std::int32_t codes[K] = {};
  T scale = {};
  std::int32_t zero_point = 0;
};
/// See `quantized_group`. @pre Q is an integer type; zero points need an unsigned Q.
template <scalar_type Q, class T, std::size_t K>
QTL_HOST_DEVICE constexpr quantized_group<T, K> quantize_group(T const (&w)[K], quantize_options opt = {}) {
  static_assert(Q.is_integer(), "qtl::quantize_group: Q must be an integer scalar type");
  static_assert(K > 0, "qtl::quantize_group: a group has at least one weight");
  using namespace detail::qnt;
  constexpr quant_range r = quant_range_of(Q);
  float mx = load<T>(w[0]);
  float mn = mx;
  for (std::size_t i = 1; i < K; ++i) {
    mx = nan_max(mx, load<T>(w[i]));
    mn = nan_min(mn, load<T>(w[i]));
  }
  group_params const p = opt.zero_points ? asymmetric_scale<T>(mx, mn, r) : symmetric_scale<T>(mx, mn, r);
  quantized_group<T, K> g;
  g.scale = store<T>(p.s);
  g.zero_point = static_cast<std::int32_t>(p.zp);
  for (std::size_t i = 0; i < K; ++i) {
    float const q = quantize_code<T>(load<T>(w[i]), p, r);
    g.w_ref[i] = store<T>(dequantize_code<T>(q, p, opt.zero_points && opt.ref_zero_points_after_scales, 0));
    g.codes[i] = static_cast<std::int32_t>(q) + r.bias;
  }
  return g;
}

// ------------------------------------------------------------------------------------------------
// compressed-tensors' integer rule (what `qtl quantize --format w4a16|w8a16` writes)

/// compressed-tensors' scale, zero point and codes of one group of `bits`-bit integers, exactly as
/// its release 0.20.0 computes them on a weight of dtype T: `quantization/utils/helpers.py::
/// calculate_qparams` on the group's min and max (llm-compressor's observers take them in the
/// weight's own dtype, so every step rounds to T as torch does), then `lifecycle/forward_helpers.py::
/// _quantize` (what `PackedQuantizationCompressor.compress` runs). Signed domain: q and zp in
/// [qmin, qmax] = [-2^(b-1), 2^(b-1) - 1]; the file stores q + 2^(b-1) (and zp + 2^(b-1), packed
/// along N, when asymmetric).
///
///   mn, mx = min(group min, 0), max(group max, 0)            (0 is always representable)
///   symmetric:  s0 = T(max(|mn|, |mx|) / ((2^b - 1) / 2))   (amax/7.5 for 4 bits, amax/127.5 for 8)
///               zp = 0
///   asymmetric: s0 = T(T(mx - mn) / (2^b - 1))
///               zp = rne(clamp(T(qmin - T(mn / s0)), qmin, qmax))   (int8 zp_dtype: torch.round,
///               then the cast; when s0 is 0 it is computed with that 0: mn < 0 gives qmax, mn = 0
///               gives NaN, whose int8 cast torch leaves to the CPU, taken as 0 here)
///   s  = s0, or T's epsilon where s0 == 0 (fp16 2^-10, bf16 2^-7, float 2^-23: the all-zero
///        group, or a range that underflows T; replaced after zp, as CT does)
///   q  = rne(clamp(T(T(w / s) + zp), qmin, qmax))            (zp added in T before rounding; NaN: 0)
///   w' = T(T(q - zp) · s)                                    (`_dequantize`, in the scale's dtype T)
///
/// Versus the GPTQ reference rule (`detail::qnt::symmetric_scale`, `asymmetric_scale`, which
/// `--format gptq` keeps): the divisor (2^b - 1)/2 instead of qmax (amax/7.5 vs max(|max/7|, |min/-8|)),
/// the range widened to include 0, the zero point in the signed domain added before the rounding,
/// and T's epsilon for a zero scale instead of the 1e-5 floor on the range.
template <class T>
QTL_HOST_DEVICE constexpr group_params ct_int_group_params(float mx, float mn, int bits, bool symmetric) {
  using namespace detail::qnt;
  float const qmax = static_cast<float>((1 << (bits - 1)) - 1);
  float const qmin = -static_cast<float>(1 << (bits - 1));
  float const levels = static_cast<float>((1 << bits) - 1);  // bit_range = qmax - qmin, exact in T
  mn = nan_min(mn, 0.0f);                                     // torch.min / torch.max propagate NaN
  mx = nan_max(mx, 0.0f);
  float s0 = 0.0f;
  float zp = 0.0f;
  if (symmetric) {
    s0 = round_to<T>(div_rn(nan_max(abs(mn), abs(mx)), levels * 0.5f));
  } else {
    s0 = round_to<T>(div_rn(round_to<T>(sub_rn(mx, mn)), levels));
    float const z = clamp(round_to<T>(sub_rn(qmin, round_to<T>(div_rn(mn, s0)))), qmin, qmax);
    zp = isnan(z) ? 0.0f : round_half_even(z);
  }
  float eps = std::numeric_limits<float>::epsilon();
  if constexpr (std::is_same_v<T, half_t>) {
    eps = 0x1p-10f;
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    eps = 0x1p-7f;
  }
  return {s0 == 0.0f ? eps : s0, zp};
}

/// The signed code of weight `w` under `p` (see `ct_int_group_params`):
/// rne(clamp(T(T(w / s) + zp), qmin, qmax)), NaN to 0.
template <class T>
QTL_HOST_DEVICE constexpr float ct_int_code(float w, group_params p, int bits) {
  using namespace detail::qnt;
  float const qmax = static_cast<float>((1 << (bits - 1)) - 1);
  float const qmin = -static_cast<float>(1 << (bits - 1));
  float const x = round_to<T>(add_rn(round_to<T>(div_rn(w, p.s)), p.zp));
  float const q = round_half_even(clamp(x, qmin, qmax));
  return isnan(q) ? 0.0f : q;
}

/// The dequantized value of signed code `q` under `p`: T(T(q - zp) · s), as a float.
template <class T>
QTL_HOST_DEVICE constexpr float ct_int_dequantize(float q, group_params p) {
  using namespace detail::qnt;
  return round_to<T>(mul_rn_unfused(round_to<T>(sub_rn(q, p.zp)), p.s, 0));
}

// ------------------------------------------------------------------------------------------------
// Shape checks (host)

namespace detail::qnt {

template <class V>
void check_2d(char const* fn, char const* arg, V const& v, index_t rows, index_t cols) {
  if (v.extent[0] != rows || v.extent[1] != cols) {
    throw shape_error(std::string(fn) + ": " + arg + " has shape " + shape_string(v.extent[0], v.extent[1]) +
                      ", expected " + shape_string(rows, cols));
  }
  if (rows * cols > 0 && v.data == nullptr) {
    throw shape_error(std::string(fn) + ": " + arg + " has no data");
  }
  if (cols > 1 && v.stride[1] != 1) {
    throw shape_error(std::string(fn) + ": " + arg + " must have unit stride along its last dimension (stride " +
                      std::to_string(v.stride[1]) + ")");
  }
}
template <class V>
void check_1d(char const* fn, char const* arg, V const& v, index_t n) {
  if (v.extent[0] != n) {
    throw shape_error(std::string(fn) + ": " + arg + " has " + std::to_string(v.extent[0]) +
                      " elements, expected " + std::to_string(n));
  }
  if (n > 0 && v.data == nullptr) {
    throw shape_error(std::string(fn) + ": " + arg + " has no data");
  }
}

/// The effective group size (rows per group) for K rows: `normalize_group_size`, its verdict
/// thrown as the error naming `fn` and the value.
inline index_t effective_group_size(char const* fn, index_t g, index_t k) {
  group_size_result const r = normalize_group_size(g, k);
  switch (r.status) {
    case group_size_status::ok: return r.rows;
    case group_size_status::no_rows:
      throw shape_error(std::string(fn) + ": w has no rows (K = " + std::to_string(k) + ")");
    case group_size_status::not_positive:
      throw value_error(std::string(fn) + ": group_size " + std::to_string(g) +
                        " is not a positive size, -1 (channelwise) or none");
    case group_size_status::not_dividing: break;
  }
  throw shape_error(std::string(fn) + ": group_size " + std::to_string(g) + " does not divide K = " +
                    std::to_string(k) + " (a group size below K must divide it)");
}

}  // namespace detail::qnt

namespace detail::qnt {

template <class V>
auto as_const(V const& v) {
  using E = std::remove_const_t<typename V::element_type>;
  return static_cast<view<E const, 2>>(v);
}


template <scalar_type Q>
constexpr void check_quant_type() {
  static_assert(Q.is_integer(),
                "qtl::quantize_weights: Q must be an integer scalar type (int4, uint4b8, uint8, ...); "
                "floating-point quantization types are not supported, as in the reference");
  static_assert(Q.size_bits() <= 24, "qtl::quantize_weights: Q wider than 24 bits is not supported");
}


/// The high 64 bits of the 128-bit product a·b (portable; no __int128 under -Wpedantic).
QTL_HOST_DEVICE constexpr std::uint64_t mul_hi(std::uint64_t a, std::uint64_t b) {
  std::uint64_t const a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32, b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
  std::uint64_t const ll = a_lo * b_lo, lh = a_lo * b_hi, hl = a_hi * b_lo, hh = a_hi * b_hi;
  std::uint64_t const mid = (ll >> 32) + (lh & 0xFFFFFFFFu) + (hl & 0xFFFFFFFFu);
  return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

/// Python's floor division i // g (g ≠ 0), as the reference's g_idx.
QTL_HOST_DEVICE constexpr std::int64_t floor_div(std::int64_t i, std::int64_t g) {
  std::int64_t const q = i / g;
  return (i % g != 0 && ((i < 0) != (g < 0))) ? q - 1 : q;
}


}  // namespace detail::qnt

/// Element of `per_tensor_dequantize` with a scalar (0-dim) scale: fp16(fp16(x) · inv_scale),
/// the scale kept in float32 as torch ≥ 2.1 does for a CPU scalar operand.
template <class T>
QTL_HOST_DEVICE constexpr half_t per_tensor_dequantize_element(T x, float inv_scale) {
  float const h = detail::qnt::round_to<half_t>(detail::qnt::load<T>(x));
  return detail::qnt::store<half_t>(detail::qnt::mul_rn_unfused(h, inv_scale, 0));
}
/// Element with a 1-element scale tensor: float32(fp16(x)) · inv_scale in float32 (torch promotes).
template <class T>
QTL_HOST_DEVICE constexpr float per_tensor_dequantize_element_f32(T x, float inv_scale) {
  return detail::qnt::mul_rn_unfused(detail::qnt::round_to<half_t>(detail::qnt::load<T>(x)), inv_scale, 0);
}

/// torch.isclose(a, b) with rtol = 1e-5, atol = 1e-8, equal_nan = False, each step in T as torch:
/// a == b, or |T(a - b)| finite and ≤ T(atol + |T(rtol · b)|). The tolerance scales with `b`.
template <class T>
QTL_HOST_DEVICE constexpr bool torch_isclose(T a_, T b_, std::uint32_t opaque = 0) {
  using namespace detail::qnt;
  float const a = load<T>(a_);
  float const b = load<T>(b_);
  if (a == b) {
    return true;
  }
  float const allowed = round_to<T>(add_rn(1e-8f, abs(round_to<T>(mul_rn_unfused(1e-5f, b, opaque)))));
  float const actual = abs(round_to<T>(sub_rn(a, b)));
  return actual < std::numeric_limits<float>::infinity() && actual <= allowed;
}

// ------------------------------------------------------------------------------------------------
// Blocks of element functions and the tile geometry, shared by the host executors (the portable
// loops of qtl/quantize.hpp and the x86 executor of qtl/x86/quantize.hpp)

namespace detail::qnt {

/// Columns per tile. Small groups: 512 columns, so that a group of a tile (≤ 256 KiB) is still in
/// L2 when pass 2 reads it again. Large groups (channelwise): 4096 columns, streamed twice from
/// memory in long contiguous runs (narrow tiles of thousands of rows a power-of-two stride apart
/// would thrash a few cache sets).
inline constexpr index_t max_tile_cols = 4096;
inline index_t tile_cols(index_t group_rows, std::size_t elem_bytes) {
  return group_rows * 512 * static_cast<index_t>(elem_bytes) <= 256 * 1024 ? 512 : max_tile_cols;
}

/// W consecutive columns of pass 1 (max/min). Fixed-width blocks with local arrays vectorise
/// even under -O2's very-cheap cost model (no trip-count epilogue, no alias versioning).
template <class T, int W>
QTL_HOST_DEVICE void minmax_block(T const* row, float* mx, float* mn) {
  float x[W];
  for (int l = 0; l < W; ++l) {
    x[l] = load<T>(row[l]);
  }
  for (int l = 0; l < W; ++l) {
    mx[l] = nan_max(mx[l], x[l]);
    mn[l] = nan_min(mn[l], x[l]);
  }
}

/// W consecutive columns of pass 2 (codes and reference values) of one row.
template <class T, bool SmallCodes, bool After, int W>
QTL_HOST_DEVICE void quantize_block(T const* in, float const* sc, float const* zp, quant_range r, std::uint32_t opaque,
                                    std::int32_t* q_out, T* ref_out) {
  float x[W];
  float q[W];
  T ref[W];
  for (int l = 0; l < W; ++l) {
    x[l] = load<T>(in[l]);
  }
  for (int l = 0; l < W; ++l) {
    group_params const p{sc[l], zp[l]};
    q[l] = quantize_code<T>(x[l], p, r);
    ref[l] = store<T>(dequantize_code<T, SmallCodes>(q[l], p, After, opaque));
  }
  for (int l = 0; l < W; ++l) {
    ref_out[l] = ref[l];
    q_out[l] = static_cast<std::int32_t>(q[l]) + r.bias;
  }
}

template <class T, bool SmallCodes, bool After>
void quantize_row(T const* in, float const* sc, float const* zp, index_t cn, quant_range r, std::uint32_t opaque,
                  std::int32_t* q_out, T* ref_out) {
  constexpr int block = 16;
  index_t j = 0;
  for (; j + block <= cn; j += block) {
    quantize_block<T, SmallCodes, After, block>(in + j, sc + j, zp + j, r, opaque, q_out + j, ref_out + j);
  }
  for (; j < cn; ++j) {
    quantize_block<T, SmallCodes, After, 1>(in + j, sc + j, zp + j, r, opaque, q_out + j, ref_out + j);
  }
}

/// Asks for the `n` elements at `p` to be brought into L2 (a hint: no fault, no effect elsewhere).
template <class T>
inline void prefetch_row(T const* p, index_t n) {
#if defined(__GNUC__) || defined(__clang__)
  char const* const c = reinterpret_cast<char const*>(p);
  for (std::size_t b = 0; b < static_cast<std::size_t>(n) * sizeof(T); b += 64) {
    __builtin_prefetch(c + b, 0, 2);
  }
#else
  (void)p, (void)n;
#endif
}


/// Outputs of at least this many bytes are written with non-temporal stores by the x86 executor:
/// far beyond what the caches keep (32 MiB of L3 on the machines we measure), where write-allocate
/// would read every output line before overwriting it.
inline constexpr std::size_t stream_output_bytes = std::size_t{64} << 20;

}  // namespace detail::qnt

}  // namespace qtl
