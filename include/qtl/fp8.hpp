#pragma once
/// \file
/// FP8 quantization as sglang's and vLLM's kernels compute it (`scaled_fp8_quant`,
/// `per_token_group_quant_fp8`), the requantization of fused FP8 checkpoints
/// (`requantize_with_max_scale`, `per_tensor_dequantize`) and the byte-distance comparison of the
/// sglang tests (`fp8_all_close`). `docs/spec/semantics.md` §2-§3 and §4.6-§4.11 is the spec.
///
/// Scales are *dequantization* scales, as in the reference: `x ≈ float(q) * scale`. Every variant
/// quantizes one element as
///
///     q = rne(clamp(x * (1/scale), -max, max))      in float32, max = 448 (e4m3fn) or 57344 (e5m2)
///
/// with `x` converted exactly to float32 first, `1/scale` an IEEE division and one rounding to the
/// fp8 grid (round to nearest, ties to even). The variants differ only in where the scale comes
/// from:
///
/// | function                      | scale                                         | zero scale  |
/// | ----------------------------- | --------------------------------------------- | ----------- |
/// | `scaled_fp8_quant_static`     | given, one per tensor                          | -> +max     |
/// | `scaled_fp8_quant_dynamic`    | `amax(|x|) / max`, one per tensor, no floor    | -> +max     |
/// | `scaled_fp8_quant_per_token`  | `min(amax_row, upper_bound) / max` per row     | -> 0        |
/// | `per_token_group_quant_fp8`   | `max(amax_group, eps) / max`, opt. 2^ceil(log2) | (eps > 0)   |
///
/// Where the peers disagree, QTL's defaults follow sglang's CUDA kernels (which the golden cases
/// reproduce), and the other behaviour is an option:
///   - **NaN input**: the kernels clamp with `fminf/fmaxf`, which drop a NaN operand, so a NaN
///     becomes `+max` (0x7E for e4m3fn) whatever its sign: `fp8_nan::to_max` (default). torch's
///     `clamp` keeps it and the cast gives the NaN code: `fp8_nan::propagate`, always the positive
///     code 0x7F (device arithmetic makes every NaN +NaN; x86 keeps signs: QTL defines one result).
///   - **zero scale** (static scale 0, or an all-zero tensor under dynamic per-tensor): sglang's
///     per-tensor kernels multiply by `1/0 = inf`, so 0 * inf = NaN -> +max and nonzero -> ±max:
///     `fp8_zero_scale::reciprocal` (default there). sglang's per-token kernels guard
///     `inv = scale == 0 ? 0 : 1/scale`, so the row quantizes to zeros: `fp8_zero_scale::guard`
///     (default for per-token).
///   - **vLLM's per-token recipe** floors the scale at `1/(max * 512)` and divides `x / scale`
///     instead of multiplying by the reciprocal: `vllm_per_token_options<Fp8>()`.
///   - **amax ignores NaN** (CUDA `fmaxf` reductions; torch's `amax` would give NaN). An infinite
///     input gives an infinite scale, `1/scale = 0`, and the Inf element itself becomes NaN -> see
///     the NaN policy.
///   - **padding**: an output with more rows than the input (sglang's `num_token_padding`) has its
///     extra rows written with +0 codes (the peers leave `torch.empty` garbage), and the extra
///     per-token / per-group scales with 0.
///
/// Shapes: inputs are row-major `[M, N]` views whose rows are contiguous (`stride[1] == 1`; any
/// row stride); outputs likewise. Errors (`qtl::shape_error`, `qtl::value_error`) name the argument
/// and value and are thrown before anything is written.
///
/// Host execution: the element functions are `QTL_HOST_DEVICE constexpr`, in `qtl/element/fp8.hpp`
/// (qtl/cuda/fp8.cuh runs them on the GPU). The host row loops (the x86 executors of
/// `qtl/x86/fp8.hpp`) run them four lanes at a time in SSE2 where the target has
/// it (same integer and IEEE steps, tested equal on every bf16 code), because g++ vectorizes the
/// scalar form only at -O3; on x86-64 with GCC/Clang, float and bf16 rows go through an AVX-512
/// executor (16 lanes; bf16 per-token-group 16 groups a step; amax, requantization and
/// `fp8_all_close` too) or an AVX2 one (8 lanes), chosen once at run time by CPUID, each doing the
/// same integer and IEEE steps (no FMA) and tested equal to the portable loops on hostile inputs
/// (test/unit/fp8_x86_test.cpp). Per-tensor quantization of large fp16 tensors (and bf16 without
/// AVX2) gathers from a 2^16-entry table of the element function instead (equal by construction);
/// with the UE8M0 recipe, `x / s` is computed as `x * (1/s)`, the same number for a normal power
/// of two. Per-tensor outputs of at least twice the last-level cache are written with
/// non-temporal stores. Results do not depend on `-ffp-contract` or `-march`; `-ffast-math` is not
/// supported (its reciprocal and NaN rewrites change the arithmetic the reference specifies).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__unix__)
#  include <unistd.h>  // sysconf: the last-level cache size
#endif  // ^^^ __unix__ ^^^

#include <qtl/element/fp8.hpp>
#include <qtl/error.hpp>
#include <qtl/exact.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>
#include <qtl/x86/fp8.hpp>

namespace qtl {

// ---------------------------------------------------------------------------------------------
// host loops (the reference executor; qtl/cuda/fp8.cuh runs the same element code on the GPU)
// ---------------------------------------------------------------------------------------------

namespace detail {

template <class Fp8>
void zero_padding_rows(view2d<Fp8> out, index_t from_row) {
  for (index_t i = from_row; i < out.extent[0]; ++i) {
    Fp8* o = &out(i, 0);
    for (index_t j = 0; j < out.extent[1]; ++j) {
      o[j].bits = 0;
    }
  }
}

// One row: `out[j] = fp8_quantize_element(in[j])`, the portable loop.
template <class Fp8, fp8_nan Nan, fp8_scale_op Op, class T>
void quantize_row(T const* in, Fp8* out, index_t n, float scale, float inv) {
  for (index_t j = 0; j < n; ++j) {
    out[j].bits = fp8_quantize_element<Fp8, Nan, Op>(to_float(in[j]), scale, inv);
  }
}

// `quantize_row` with the leading part an x86 executor takes (`fp8_x86::quantize_row`, the one
// place that chooses; none where `QTL_X86` is 0), the rest by the portable loop.
// `stream`: see `stream_output`; `prefetch`: see `row_ahead`.
template <class Fp8, fp8_nan Nan, fp8_scale_op Op, class T>
void quantize_row_dispatch(T const* in, Fp8* out, index_t n, float scale, float inv, T const* prefetch = nullptr,
                           bool stream = false) {
  fp8_x86::span const done = fp8_x86::quantize_row<Fp8, Nan, Op>(in, out, n, scale, inv, prefetch, stream);
  quantize_row<Fp8, Nan, Op>(in, out, done.begin, scale, inv);
  quantize_row<Fp8, Nan, Op>(in + done.end, out + done.end, n - done.end, scale, inv);
}

// True when an output of `bytes` is better written with non-temporal stores: at least twice the
// last-level cache (as the C library reports it; 32 MiB when it does not), which it could not
// keep anyway while the input streams through; skipping the read-for-ownership of each line
// saves a third of the memory traffic of an fp8 quantization.
// `stream_min_bytes()` is that threshold (a hook through which the unit tests stream small
// outputs).
inline std::size_t& stream_min_bytes() {
  static std::size_t min_bytes = [] {
    long size = 0;
#if defined(_SC_LEVEL3_CACHE_SIZE)
    size = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif  // ^^^ _SC_LEVEL3_CACHE_SIZE ^^^
    return 2 * (size > 0 ? static_cast<std::size_t>(size) : std::size_t{32} << 20);
  }();
  return min_bytes;
}
inline bool stream_output(std::size_t bytes) { return bytes >= stream_min_bytes(); }

// A normal power of two (`2^k`, -126 <= k <= 127): its reciprocal `2^-k` is exact (2^-127 as a
// subnormal), so `x / s` and `x * (1 / s)` are the same real number, rounded once: equal.
constexpr bool is_normal_power_of_two(float s) {
  std::uint32_t const b = float_to_bits(s) & 0x7fffffffu;
  return (b & 0x007fffffu) == 0 && b >= 0x00800000u && b < 0x7f800000u;
}

// `prefetch`: see `quantize_row_avx512`.
template <class Fp8, fp8_scale_op Op, class T>
void quantize_row(T const* in, Fp8* out, index_t n, float scale, float inv, fp8_nan nan,
                  T const* prefetch = nullptr, bool stream = false) {
  if constexpr (Op == fp8_scale_op::divide) {
    if (is_normal_power_of_two(scale)) {  // UE8M0 group scales: a multiply (see above), not a divide
      quantize_row<Fp8, fp8_scale_op::multiply_reciprocal>(in, out, n, scale, div_rn(1.0f, scale), nan, prefetch,
                                                           stream);
      return;
    }
  }
  if (nan == fp8_nan::to_max) {
    quantize_row_dispatch<Fp8, fp8_nan::to_max, Op>(in, out, n, scale, inv, prefetch, stream);
  } else {
    quantize_row_dispatch<Fp8, fp8_nan::propagate, Op>(in, out, n, scale, inv, prefetch, stream);
  }
}

// max of `amax_bits` over a row. The scalar reduction runs on signed integers (the bits of |x|
// never use the top bit), which g++ can vectorize at -O3; SSE2 does 16-bit words directly.
// `prefetch`: see `row_amax_bits_avx512`.
template <class T>
typename input_bits<T>::word row_amax_bits(T const* in, index_t n, T const* prefetch = nullptr) {
  using signed_word = std::make_signed_t<typename input_bits<T>::word>;
  signed_word m = 0;
  index_t j = 0;
  j = fp8_x86::row_amax_bits(in, n, prefetch, m);  // the leading part an x86 executor takes
  for (; j < n; ++j) {
    auto const a = static_cast<signed_word>(amax_bits(in[j]));
    m = a > m ? a : m;
  }
  return static_cast<typename input_bits<T>::word>(m);
}

// The row that the per-tensor loops ask for while they work on row i: the first at least 32 KiB
// further on (nullptr past the end). The hardware prefetcher alone left them waiting on memory
// (docs/performance.md, fp8).
template <class T>
T const* row_ahead(view2d<T const> in, index_t i) {
  auto const row_bytes = static_cast<index_t>(sizeof(T)) * (in.extent[1] > 0 ? in.extent[1] : 1);
  index_t const ahead = row_bytes >= (index_t{32} << 10) ? 1 : ((index_t{32} << 10) + row_bytes - 1) / row_bytes;
  return i + ahead < in.extent[0] ? &in(i + ahead, 0) : nullptr;
}

}  // namespace detail

/// max |x| over the whole input (NaN ignored), exact.
template <fp8_quant_input T>
float fp8_amax(view2d<T const> in) {
  typename detail::input_bits<T>::word m = 0;
  for (index_t i = 0; i < in.extent[0]; ++i) {
    auto const r = detail::row_amax_bits(&in(i, 0), in.extent[1], detail::row_ahead(in, i));
    m = r > m ? r : m;
  }
  return amax_value<T>(m);
}

/// What `scan_amax` finds: `fp8_amax` of the input, and whether every element is finite.
struct amax_scan {
  float amax = 0.0f;   ///< max |x|, NaN ignored (an infinity counts: +Inf)
  bool finite = true;  ///< no NaN and no ±Inf
};

/// `fp8_amax(in)` and whether `in` holds a NaN or an infinity, from one pass over the data: the
/// max of |x|'s raw bits, where a NaN or an infinity is the largest (a second pass, ignoring NaN,
/// only when one was found). For the checkpoint writers, whose refusal of non-finite weights
/// rides in the amax pass they need anyway.
template <fp8_quant_input T>
amax_scan scan_amax(view2d<T const> in) {
  using B = detail::input_bits<T>;
  using word = typename B::word;
  constexpr index_t lanes = 16;  // independent lanes: the loop vectorises
  word m[lanes] = {};
  index_t const k = in.extent[1];
  for (index_t r = 0; r < in.extent[0]; ++r) {
    T const* row = &in(r, 0);
    index_t c = 0;
    for (; c + lanes <= k; c += lanes) {
      for (index_t l = 0; l < lanes; ++l) {
        auto const a = static_cast<word>(B::get(row[c + l]) & B::abs_mask);
        m[l] = a > m[l] ? a : m[l];
      }
    }
    for (; c < k; ++c) {
      auto const a = static_cast<word>(B::get(row[c]) & B::abs_mask);
      m[0] = a > m[0] ? a : m[0];
    }
  }
  word mx = 0;
  for (index_t l = 0; l < lanes; ++l) {
    mx = m[l] > mx ? m[l] : mx;
  }
  if (mx < B::inf) {
    return {amax_value<T>(mx), true};
  }
  return {mx == B::inf ? amax_value<T>(mx) : fp8_amax(in), false};
}

/// Static per-tensor quantization: `out[i, j] = q(in[i, j] * (1/scale))`; rows of `out` past the
/// input's are zeroed (padding).
/// @pre `scale` is the dequantization scale (any float; 0, Inf and NaN follow `o`).
template <fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
void scaled_fp8_quant_static(view2d<T const> in, float scale, view2d<Fp8> out, fp8_tensor_options o = {}) {
  detail::check_fp8_shapes("qtl::scaled_fp8_quant_static", in, out);
  float const inv = fp8_inverse_scale(scale, o.zero_scale);
  if constexpr (sizeof(T) == 2) {
    // One scale for the whole tensor and 2^16 possible inputs: past 2^20 elements, the element
    // function is tabulated for every fp16/bf16 code and gathered from the table (64 KiB, cache
    // resident), equal by construction and faster than the SSE2 arithmetic; where the AVX2
    // executor runs (bf16), it is faster still (docs/performance.md, fp8).
    if (in.extent[0] * in.extent[1] >= (index_t{1} << 20) && !detail::avx2_quantizes<T>()) {
      std::vector<std::uint8_t> table(65536);
      for (std::uint32_t c = 0; c < 65536; ++c) {
        T const x{static_cast<std::uint16_t>(c)};
        table[c] = o.nan == fp8_nan::to_max
                       ? fp8_quantize_element<Fp8, fp8_nan::to_max>(to_float(x), scale, inv)
                       : fp8_quantize_element<Fp8, fp8_nan::propagate>(to_float(x), scale, inv);
      }
      for (index_t i = 0; i < in.extent[0]; ++i) {
        T const* x = &in(i, 0);
        Fp8* q = &out(i, 0);
        for (index_t j = 0; j < in.extent[1]; ++j) {
          q[j].bits = table[x[j].bits];
        }
      }
      detail::zero_padding_rows(out, in.extent[0]);
      return;
    }
  }
  bool const stream = detail::stream_output(static_cast<std::size_t>(in.extent[0] * in.extent[1]) * sizeof(Fp8));
  for (index_t i = 0; i < in.extent[0]; ++i) {
    detail::quantize_row<Fp8, fp8_scale_op::multiply_reciprocal>(&in(i, 0), &out(i, 0), in.extent[1], scale,
                                                                 inv, o.nan, detail::row_ahead(in, i), stream);
  }
  detail::zero_padding_rows(out, in.extent[0]);
}

/// Dynamic per-tensor quantization: `scale = amax(|in|) / max` (no floor), then as static.
/// Returns the scale (sglang returns it as a float32 tensor of shape [1]).
template <fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
float scaled_fp8_quant_dynamic(view2d<T const> in, view2d<Fp8> out, fp8_tensor_options o = {}) {
  detail::check_fp8_shapes("qtl::scaled_fp8_quant_dynamic", in, out);
  float const scale = fp8_scale_from_amax<Fp8>(fp8_amax(in));
  scaled_fp8_quant_static<Fp8>(in, scale, out, o);
  return scale;
}

/// Dynamic per-token quantization: one scale per row, `scales[i] = fp8_token_scale(amax_i)`;
/// `scales` holds at least `out.extent[0]` floats, those of padding rows are set to 0.
template <fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
void scaled_fp8_quant_per_token(view2d<T const> in, view2d<Fp8> out, view1d<float> scales,
                                fp8_token_options o = {}) {
  detail::check_fp8_shapes("qtl::scaled_fp8_quant_per_token", in, out);
  if (scales.extent[0] < out.extent[0]) {
    throw shape_error("qtl::scaled_fp8_quant_per_token: scales has " + std::to_string(scales.extent[0]) +
                      " entries, the output " + std::to_string(out.extent[0]) + " rows");
  }
  if (!(o.upper_bound > 0.0f) || !(o.min_scale >= 0.0f)) {
    throw value_error("qtl::scaled_fp8_quant_per_token: upper_bound must be > 0 and min_scale >= 0 (got " +
                      std::to_string(o.upper_bound) + ", " + std::to_string(o.min_scale) + ")");
  }
  index_t const n = in.extent[1];
  for (index_t i = 0; i < in.extent[0]; ++i) {
    T const* row = &in(i, 0);
    float const s = fp8_token_scale<Fp8>(amax_value<T>(detail::row_amax_bits(row, n)), o);
    float const inv = fp8_inverse_scale(s, o.zero_scale);
    scales(i) = s;
    T const* next = i + 1 < in.extent[0] ? &in(i + 1, 0) : nullptr;  // its max is taken next
    if (o.op == fp8_scale_op::divide) {
      detail::quantize_row<Fp8, fp8_scale_op::divide>(row, &out(i, 0), n, s, inv, o.nan, next);
    } else {
      detail::quantize_row<Fp8, fp8_scale_op::multiply_reciprocal>(row, &out(i, 0), n, s, inv, o.nan, next);
    }
  }
  for (index_t i = in.extent[0]; i < out.extent[0]; ++i) {
    scales(i) = 0.0f;
  }
  detail::zero_padding_rows(out, in.extent[0]);
}

/// Per-token-group quantization (`per_token_group_quant_fp8`): each row is cut into
/// `N / GroupSize` groups of consecutive elements, each with its own scale
/// `fp8_group_scale(amax_group)`, written at `group_scale_offset(o.layout, m, g, ...)` of
/// `scales` (`group_scale_storage_size(...)` floats over the output's rows; padding rows get 0).
///
///   in  [M, N]  ──►  out [M, N] fp8,   scales row-major [M, N/G]  or  column-major [N/G, Mp]
template <int GroupSize, fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
void per_token_group_quant_fp8(view2d<T const> in, view2d<Fp8> out, std::span<float> scales,
                               fp8_group_options o = {}) {
  static_assert(GroupSize > 0, "qtl::per_token_group_quant_fp8: GroupSize must be positive");
  detail::check_fp8_shapes("qtl::per_token_group_quant_fp8", in, out);
  index_t const n = in.extent[1];
  if (n % GroupSize != 0) {
    throw shape_error("qtl::per_token_group_quant_fp8: the input's " + std::to_string(n) +
                      " columns are not a multiple of the group size " + std::to_string(GroupSize));
  }
  if (o.row_align < 1) {
    throw value_error("qtl::per_token_group_quant_fp8: row_align must be >= 1, got " + std::to_string(o.row_align));
  }
  if (!(o.eps >= 0.0f)) {
    throw value_error("qtl::per_token_group_quant_fp8: eps must be >= 0, got " + std::to_string(o.eps));
  }
  index_t const groups = n / GroupSize;
  index_t const rows = out.extent[0];
  index_t const need = group_scale_storage_size(o.layout, rows, groups, o.row_align);
  if (static_cast<index_t>(scales.size()) < need) {
    throw shape_error("qtl::per_token_group_quant_fp8: scales has " + std::to_string(scales.size()) +
                      " floats, the layout needs " + std::to_string(need));
  }
  std::vector<float> row_scales;  // the x86 executor's scales of one row
  for (index_t i = 0; i < in.extent[0]; ++i) {
    index_t const g0 =
        detail::fp8_x86::group_quantize_row<GroupSize, Fp8>(in, out, i, groups, rows, o, scales, row_scales);
    for (index_t g = g0; g < groups; ++g) {
      T const* x = &in(i, g * GroupSize);
      float const s = fp8_group_scale<Fp8>(amax_value<T>(detail::row_amax_bits(x, GroupSize)), o.eps,
                                           o.power_of_two_scale);
      float const inv = fp8_inverse_scale(s);
      scales[static_cast<std::size_t>(group_scale_offset(o.layout, i, g, rows, groups, o.row_align))] = s;
      if (o.op == fp8_scale_op::divide) {
        detail::quantize_row<Fp8, fp8_scale_op::divide>(x, &out(i, g * GroupSize), GroupSize, s, inv, o.nan);
      } else {
        detail::quantize_row<Fp8, fp8_scale_op::multiply_reciprocal>(x, &out(i, g * GroupSize), GroupSize, s,
                                                                     inv, o.nan);
      }
    }
  }
  for (index_t i = in.extent[0]; i < rows; ++i) {
    for (index_t g = 0; g < groups; ++g) {
      scales[static_cast<std::size_t>(group_scale_offset(o.layout, i, g, rows, groups, o.row_align))] = 0.0f;
    }
  }
  detail::zero_padding_rows(out, in.extent[0]);
}

/// The result of the allocating `scaled_fp8_quant`.
template <fp8_storage Fp8>
struct fp8_quant_result {
  host_tensor<Fp8, 2> output;  ///< [max(M, num_token_padding), N]
  host_tensor<float, 2> scale;  ///< [1, 1] per tensor, [rows, 1] per token
};

/// sglang's `scaled_fp8_quant(input, scale=None, num_token_padding=None,
/// use_per_token_if_dynamic=False)`: static when `scale` is given (then `per_token` must be
/// false), else dynamic per tensor or per token. Padding rows are zero (codes and scales).
template <fp8_storage Fp8 = float8_e4m3fn_t, fp8_quant_input T>
fp8_quant_result<Fp8> scaled_fp8_quant(view2d<T const> in, float const* scale = nullptr,
                                       index_t num_token_padding = 0, bool per_token = false) {
  if (scale != nullptr && per_token) {
    throw value_error("qtl::scaled_fp8_quant: a static scale is per tensor; per_token needs scale == nullptr");
  }
  if (num_token_padding < 0) {
    throw shape_error("qtl::scaled_fp8_quant: num_token_padding is negative (" + std::to_string(num_token_padding) +
                      ")");
  }
  index_t const rows = in.extent[0] > num_token_padding ? in.extent[0] : num_token_padding;
  fp8_quant_result<Fp8> r{host_tensor<Fp8, 2>({rows, in.extent[1]}),
                          host_tensor<float, 2>({per_token ? rows : 1, 1})};
  if (scale != nullptr) {
    scaled_fp8_quant_static<Fp8>(in, *scale, r.output.view());
    r.scale.data()[0] = *scale;
  } else if (per_token) {
    scaled_fp8_quant_per_token<Fp8>(in, r.output.view(), make_view(r.scale.data(), rows));
  } else {
    r.scale.data()[0] = scaled_fp8_quant_dynamic<Fp8>(in, r.output.view());
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// per_tensor_dequantize, requantize_with_max_scale
// ---------------------------------------------------------------------------------------------

/// `per_tensor_dequantize(tensor, inv_scale)`: `out = Out(float(q) * scale)` elementwise.
/// `Out` = half_t (default; a 0-dim or Python-float scale) or float (a [1] tensor scale).
template <class Out = half_t, fp8_storage Fp8>
void per_tensor_dequantize(view2d<Fp8 const> q, float scale, view2d<Out> out) {
  static_assert(std::is_same_v<Out, half_t> || std::is_same_v<Out, float>,
                "qtl::per_tensor_dequantize: Out is half_t (0-dim scale) or float ([1] scale)");
  if (out.extent[0] != q.extent[0] || out.extent[1] != q.extent[1]) {
    throw shape_error("qtl::per_tensor_dequantize: output " + shape_string(out.extent[0], out.extent[1]) +
                      " differs from the input " + shape_string(q.extent[0], q.extent[1]));
  }
  Out table[256];  // the element function for each of the 256 codes
  for (int c = 0; c < 256; ++c) {
    table[c] = dequantize_fp8_element<Out>(Fp8{static_cast<std::uint8_t>(c)}, scale);
  }
  for (index_t i = 0; i < q.extent[0]; ++i) {
    for (index_t j = 0; j < q.extent[1]; ++j) {
      out(i, j) = table[q(i, j).bits];
    }
  }
}

/// The weight-scale argument of `requantize_with_max_scale`: a 1-D float32 tensor of one scale per
/// shard, or a 0-dim tensor (`is_scalar`, `values` of size 1).
struct weight_scales {
  std::span<float const> values;
  bool is_scalar = false;
};

/// The row ranges and decision of `requantize_with_max_scale`, validated (host only).
struct requantize_plan {
  float max_scale = 0.0f;
  bool requantize = false;  ///< the reference's `unfused_module_in_checkpoint`
};

/// Validates the arguments of `requantize_with_max_scale` and takes its decisions:
///   max_scale  = max(weight_scale)                        (NaN scales: value_error)
///   requantize = weight_scale is 1-D and weight_scale[-1] > finfo(e4m3fn).min (-448): shards
///                whose scales were never loaded keep the default float32-min value, which marks a
///                checkpoint that stored one fused scale (then nothing is requantized)
/// Differences from the reference, which crashes or is silent there: a 0-dim scale is one fused
/// scale (vLLM's guard; the reference raises IndexError); fewer scales than shards, negative
/// widths, or widths summing past the weight's rows throw `shape_error` (the reference raises, or
/// silently clips the slice); zero-width shards are skipped.
inline requantize_plan plan_requantize_with_max_scale(index_t weight_rows, weight_scales s,
                                                      std::span<index_t const> logical_widths) {
  if (s.values.empty()) {
    throw shape_error("qtl::requantize_with_max_scale: weight_scale is empty");
  }
  if (s.is_scalar && s.values.size() != 1) {
    throw shape_error("qtl::requantize_with_max_scale: a 0-dim weight_scale holds one value, got " +
                      std::to_string(s.values.size()));
  }
  requantize_plan p;
  p.max_scale = s.values[0];
  for (float v : s.values) {
    if (v != v) {
      throw value_error("qtl::requantize_with_max_scale: weight_scale holds NaN");
    }
    p.max_scale = v > p.max_scale ? v : p.max_scale;
  }
  p.requantize = !s.is_scalar && s.values.back() > -448.0f;
  if (!p.requantize) {
    return p;
  }
  index_t total = 0;
  for (std::size_t k = 0; k < logical_widths.size(); ++k) {
    index_t const w = logical_widths[k];
    if (w < 0) {
      throw shape_error("qtl::requantize_with_max_scale: logical_widths[" + std::to_string(k) + "] is negative (" +
                        std::to_string(w) + ")");
    }
    if (w > 0 && k >= s.values.size()) {
      throw shape_error("qtl::requantize_with_max_scale: shard " + std::to_string(k) + " has no scale (" +
                        std::to_string(s.values.size()) + " scales)");
    }
    total += w;
  }
  if (total > weight_rows) {
    throw shape_error("qtl::requantize_with_max_scale: logical_widths sum to " + std::to_string(total) +
                      " rows, the weight has " + std::to_string(weight_rows));
  }
  return p;
}

namespace detail {
/// `p[j] = table[p[j]]` for the whole 8-byte chunks of `[from, n)`; returns where it stopped. One
/// load and one store per chunk: a byte loop stores into the bytes it loads next, and its speed
/// then depends on where the buffer and the table lie (docs/performance.md, fp8).
inline index_t translate_bytes_by_8(unsigned char* p, index_t from, index_t n, std::uint8_t const* table) {
  index_t j = from;
  for (; j + 8 <= n; j += 8) {
    unsigned char c[8];
    std::memcpy(c, p + j, 8);
    for (unsigned char& b : c) {
      b = table[b];
    }
    std::memcpy(p + j, c, 8);
  }
  return j;
}
}  // namespace detail

/// `requantize_with_max_scale(weight, weight_scale, logical_widths)`: requantizes each shard of
/// rows `[start, start + w)` of the fused FP8 weight from its own scale to the maximum scale, in
/// place, and returns that maximum. Rows past `sum(widths)` are untouched.
///
///   weight [N, K] fp8, rows:  | shard 0 (w0 rows, scale s0) | shard 1 (w1, s1) | ... | rest |
///   each element:  q' = q(fp16(float(q) * s_idx) * (1/max_s))
template <fp8_storage Fp8 = float8_e4m3fn_t>
float requantize_with_max_scale(view2d<Fp8> weight, weight_scales s, std::span<index_t const> logical_widths) {
  requantize_plan const p = plan_requantize_with_max_scale(weight.extent[0], s, logical_widths);
  if (!p.requantize) {
    return p.max_scale;
  }
  float const inv = fp8_inverse_scale(p.max_scale);
  index_t start = 0;
  for (std::size_t k = 0; k < logical_widths.size(); ++k) {
    index_t const w = logical_widths[k];
    if (w == 0) {
      continue;
    }
    // A shard maps each of the 256 codes the same way: tabulate the element function once.
    std::uint8_t table[256];
    for (int c = 0; c < 256; ++c) {
      table[c] = requantize_fp8_element(Fp8{static_cast<std::uint8_t>(c)}, s.values[k], inv).bits;
    }
    for (index_t i = start; i < start + w; ++i) {
      index_t j = 0;
      if (weight.extent[1] <= 1 || weight.stride[1] == 1) {
        auto* const row = reinterpret_cast<unsigned char*>(&weight(i, 0));
        j = detail::fp8_x86::translate_bytes(row, weight.extent[1], table);
        j = detail::translate_bytes_by_8(row, j, weight.extent[1], table);
      }
      for (; j < weight.extent[1]; ++j) {
        weight(i, j).bits = table[weight(i, j).bits];
      }
    }
    start += w;
  }
  return p.max_scale;
}

// ---------------------------------------------------------------------------------------------
// fp8_all_close
// ---------------------------------------------------------------------------------------------

/// The counts of `assert_fp8_all_close` and its verdict.
struct fp8_compare_report {
  index_t numel = 0;
  index_t sign_flips = 0;     ///< both finite and nonzero, opposite signs (the reference's check
                              ///< `(a_u8 >= 0) & (b_u8 < 0)` on uint8 can never fire)
  index_t differ = 0;         ///< byte distance |a - b| >= 1 (the reference's `count_tiny_diff`)
  index_t differ_large = 0;   ///< byte distance >= 2 (`count_large_diff`)
  bool passed = true;         ///< no sign flip, differ/numel < 0.005, differ_large == 0

  /// The reference's failure message fields.
  std::string describe() const {
    return "count_diff_sign=" + std::to_string(sign_flips) + " count_tiny_diff=" + std::to_string(differ) +
           " count_large_diff=" + std::to_string(differ_large) + " numel=" + std::to_string(numel);
  }
};

/// Per-pair contribution to an `fp8_compare_report` (shared with the GPU counter).
struct fp8_compare_counts {
  bool sign_flip = false;
  bool differ = false;
  bool differ_large = false;
};
/// Compares two codes as `assert_fp8_all_close` does: distance of the raw bytes as integers (so
/// +0/-0, 0x00/0x80, are 128 apart and 448/NaN, 0x7E/0x7F, one apart); a sign flip is two
/// non-zero, non-NaN values of opposite sign.
template <fp8_storage Fp8>
QTL_HOST_DEVICE constexpr fp8_compare_counts fp8_compare_codes(std::uint8_t a, std::uint8_t b) {
  int const d = a > b ? a - b : b - a;
  auto const is_number = [](std::uint8_t c) {
    std::uint8_t const mag = c & 0x7fu;
    if constexpr (std::is_same_v<Fp8, float8_e4m3fn_t>) {
      return mag != 0 && mag != 0x7fu;
    } else {
      return mag != 0 && mag <= 0x7cu;  // e5m2: 0x7C is Inf, above are NaNs
    }
  };
  bool const flip = ((a ^ b) & 0x80u) != 0 && is_number(a) && is_number(b);
  return {flip, d >= 1, d >= 2};
}

/// The verdict of the reference's thresholds on the counts: no sign flip (the reference's dead
/// check, which every sign flip fails through the byte distance anyway), fewer than 0.5 % codes
/// apart, none two or more apart. An empty comparison passes (the reference divides by zero).
inline bool fp8_all_close_verdict(fp8_compare_report const& r) {
  if (r.numel == 0) {
    return true;
  }
  return r.sign_flips == 0 && static_cast<double>(r.differ) / static_cast<double>(r.numel) < 0.005 &&
         r.differ_large == 0;
}

/// `assert_fp8_all_close(a, b)` as a report instead of an assertion. Same shapes required.
template <fp8_storage Fp8 = float8_e4m3fn_t>
fp8_compare_report fp8_all_close(view2d<Fp8 const> a, view2d<Fp8 const> b) {
  if (a.extent[0] != b.extent[0] || a.extent[1] != b.extent[1]) {
    throw shape_error("qtl::fp8_all_close: shapes differ, " + shape_string(a.extent[0], a.extent[1]) +
                      " vs " + shape_string(b.extent[0], b.extent[1]));
  }
  fp8_compare_report r;
  r.numel = a.extent[0] * a.extent[1];
  bool const rows_contiguous = a.extent[1] <= 1 || (a.stride[1] == 1 && b.stride[1] == 1);
  for (index_t i = 0; i < a.extent[0]; ++i) {
    if (rows_contiguous) {  // per-row pointers: a loop g++ vectorizes
      // 32-bit counters (SSE2 cannot widen to 64 in a vector loop), in chunks they cannot overflow
      constexpr index_t chunk = index_t{1} << 30;
      for (index_t j0 = 0; j0 < a.extent[1]; j0 += chunk) {
        Fp8 const* pa = &a(i, j0);
        Fp8 const* pb = &b(i, j0);
        index_t const n = a.extent[1] - j0 < chunk ? a.extent[1] - j0 : chunk;
        std::int32_t flips = 0;
        std::int32_t differ = 0;
        std::int32_t large = 0;
        index_t j = 0;
        j = detail::fp8_x86::compare_bytes<Fp8>(pa, pb, n, r.sign_flips, r.differ, r.differ_large);
        for (; j < n; ++j) {
          fp8_compare_counts const c = fp8_compare_codes<Fp8>(pa[j].bits, pb[j].bits);
          flips += c.sign_flip;
          differ += c.differ;
          large += c.differ_large;
        }
        r.sign_flips += flips;
        r.differ += differ;
        r.differ_large += large;
      }
      continue;
    }
    for (index_t j = 0; j < a.extent[1]; ++j) {
      fp8_compare_counts const c = fp8_compare_codes<Fp8>(a(i, j).bits, b(i, j).bits);
      r.sign_flips += c.sign_flip;
      r.differ += c.differ;
      r.differ_large += c.differ_large;
    }
  }
  r.passed = fp8_all_close_verdict(r);
  return r;
}

}  // namespace qtl
