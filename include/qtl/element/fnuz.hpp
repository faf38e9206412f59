#pragma once
/// \file
/// The element layer of sglang's `normalize_e4m3fn_to_e4m3fnuz` (`qtl/fnuz.hpp` runs it on the
/// host, `qtl/cuda/fnuz.cuh` on the device): an e4m3fn weight byte as the e4m3fnuz byte that the
/// engine keeps, and the doubling of a scale.
///
/// The two formats share the layout s.eeee.mmm; e4m3fnuz's exponent bias is 8, e4m3fn's 7, so the
/// same byte is worth half as much in fnuz, and doubling the scale keeps `code × scale`:
///
///     e4m3fn byte    fnuz byte   value (fn)      value (fnuz) × 2
///     0x00 .. 0x7E   same        ±v              ±v                (exact)
///     0x80 (-0)      0x00        -0              +0                (0x80 is fnuz's NaN)
///     0x7F, 0xFF     same        NaN             ±480 (±240 × 2)   (fn's NaNs become finite)
///
/// The engine rewrites only 0x80; its NaNs reach the fnuz tensor as ±240, which QTL keeps.

#include <cstdint>
#include <type_traits>

#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>

namespace qtl {

/// The float8_e4m3fnuz byte of an e4m3fn weight byte `c`: `c`, except 0x80 (e4m3fn's -0, fnuz's
/// NaN) becomes 0.
QTL_HOST_DEVICE constexpr std::uint8_t e4m3fn_to_e4m3fnuz_code(std::uint8_t c) {
  return static_cast<std::uint8_t>(c == 0x80u ? 0u : c);
}

/// The scale types `normalize_e4m3fn_to_e4m3fnuz` doubles.
template <class T>
concept fnuz_scale = std::is_same_v<T, float> || std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>;

/// `s * 2.0` in the scale's own type, as torch computes it: exact but at the top of the range,
/// where it overflows to ±Inf (float beyond 2^128, bf16 beyond its max, fp16 at 65536 and past);
/// NaN stays NaN.
template <fnuz_scale T>
QTL_HOST_DEVICE constexpr T double_scale(T s) {
  if constexpr (std::is_same_v<T, float>) {
    return s * 2.0f;  // exact or ±Inf: no rounding mode can differ
  } else {
    return from_float<T>(to_float(s) * 2.0f);
  }
}

}  // namespace qtl
