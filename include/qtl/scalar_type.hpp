#pragma once
/// \file
/// `qtl::scalar_type`: the description of a (possibly sub-byte) quantized scalar — vLLM's
/// `ScalarType` (`csrc/core/scalar_type.hpp`) as a C++20 literal class, usable as a template
/// argument — and the 16 named types of vLLM/sglang plus ROCm's float8_e4m3fnuz.
///
/// A value of a type is `stored_code - bias`. Integers have `exponent == 0` and `mantissa`
/// magnitude bits (sign excluded); floats have the standard exponent bias 2^(exponent-1)-1 and the
/// special codes that `finite_values_only` and `nan` describe.
///
/// `id()` is bit-equal to vLLM's, so ids cross the Python/C++ boundary unchanged:
///
///   bit  57      50 49 48                              17 16 15      8 7       0
///        [ nan     ][f ][ bias (int32, two's complement) ][s ][mantissa][exponent]
///
/// `name()` follows vLLM/ml_dtypes: `float<bits>_e<E>m<M>` plus, for non-IEEE floats, `f` (finite
/// only), `n` (NaN not IEEE), then `u` (unsigned; vLLM omits it, torch names the type
/// `float8_e8m0fnu`) or `uz` (no negative zero: `nan_repr::neg_zero`); integers
/// `[u]int<bits>[b<bias>]`. `float8_e4m3fnuz` is QTL's addition: vLLM has no such `ScalarType`, so
/// its id (with `nan_repr::neg_zero`) has no vLLM counterpart.
///
/// Kernels never take a `scalar_type` template parameter directly (nvcc 13 rejects class-type
/// values on `__global__` templates): they take the type `scalar_constant<V>`.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <qtl/fixed_string.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>

namespace qtl {

/// vLLM's `NanRepr`: which codes of a float type are NaN. The values are part of `id()`.
enum class nan_repr : std::uint8_t {
  none = 0,                ///< no NaN (fp4, fp6)
  ieee_754 = 1,            ///< exponent all ones and mantissa ≠ 0 (the default, integers included)
  extd_range_max_min = 2,  ///< only exponent and mantissa all ones (e4m3fn, e8m0fnu)
  /// QTL's, not vLLM's: only the code of -0 (sign set, the rest 0) is NaN, and the exponent bias
  /// is 2^(exponent-1), one more than the standard one (ROCm's float8_e4m3fnuz; name suffix `fnuz`)
  neg_zero = 3,
};

/// The name of a scalar type: at most 32 characters, built in constant evaluation.
using scalar_type_name = static_string<32>;

/// Describes a quantized scalar type; a structural type, so usable as a template argument.
/// Field order and widths are vLLM's (they define `id()`).
struct scalar_type {
  std::uint8_t exponent = 0;          ///< exponent bits; 0 for integer types
  std::uint8_t mantissa = 0;          ///< mantissa bits (floats) / magnitude bits without the sign (ints)
  bool is_signed = false;             ///< has a sign bit
  std::int32_t bias = 0;              ///< stored code = value + bias
  bool finite_values_only = false;    ///< no infinities
  nan_repr nan = nan_repr::ieee_754;  ///< vLLM's default for every type, integers included

  friend constexpr bool operator==(scalar_type, scalar_type) = default;

  /// exponent + mantissa + sign bit.
  QTL_HOST_DEVICE constexpr int size_bits() const { return exponent + mantissa + (is_signed ? 1 : 0); }
  QTL_HOST_DEVICE constexpr bool is_integer() const { return exponent == 0; }
  QTL_HOST_DEVICE constexpr bool is_floating_point() const { return exponent != 0; }
  QTL_HOST_DEVICE constexpr bool has_bias() const { return bias != 0; }
  /// A float type with some NaN code (vLLM C++ semantics: false for integers).
  QTL_HOST_DEVICE constexpr bool has_nans() const { return is_floating_point() && nan != nan_repr::none; }
  /// A float type with ±Inf (false for integers).
  QTL_HOST_DEVICE constexpr bool has_infs() const { return is_floating_point() && !finite_values_only; }
  /// A float type with IEEE-754 special codes (Inf and exponent-all-ones NaNs).
  QTL_HOST_DEVICE constexpr bool is_ieee_754() const {
    return is_floating_point() && !finite_values_only && nan == nan_repr::ieee_754;
  }

  /// Largest value of an integer type (`2^mantissa - 1 - bias`). @pre is_integer(), size_bits() < 64
  QTL_HOST_DEVICE constexpr std::int64_t max_int() const {
    return static_cast<std::int64_t>((std::uint64_t{1} << mantissa) - 1u) - bias;
  }
  /// Smallest value of an integer type (`-2^(size_bits-1) - bias` signed, `-bias` unsigned).
  /// @pre is_integer(), size_bits() < 64
  QTL_HOST_DEVICE constexpr std::int64_t min_int() const {
    return (is_signed ? -static_cast<std::int64_t>(std::uint64_t{1} << (size_bits() - 1)) : 0) - bias;
  }

  /// Largest finite value, exact. Floats follow vLLM's formula (standard exponent bias; the top
  /// binade is finite when `nan` is not IEEE, less the NaN code for `extd_range_max_min`);
  /// float8_e8m0fnu, where vLLM's formula breaks (m = 0), is 2^127.
  /// @pre floats: exponent ≤ 11, mantissa ≤ 52; integers: size_bits() < 64
  QTL_HOST_DEVICE constexpr double max() const {
    if (is_integer()) {
      return static_cast<double>(max_int());
    }
    if (is_e8m0()) {
      return bits_to_double(std::uint64_t{127 + 1023} << 52);
    }
    return bits_to_double(max_float_bits()) - bias;
  }
  /// Smallest value, exact: `-max()` for signed floats, 2^-127 for float8_e8m0fnu (no zero), the
  /// integer minimum for integers. @pre as max(); unsigned floats other than e8m0 are unsupported.
  QTL_HOST_DEVICE constexpr double min() const {
    if (is_integer()) {
      return static_cast<double>(min_int());
    }
    if (is_e8m0()) {
      return bits_to_double(std::uint64_t{1023 - 127} << 52);
    }
    return bits_to_double(max_float_bits() | (std::uint64_t{1} << 63)) - bias;
  }

  /// vLLM's id: the fields packed little end first (see the file comment).
  QTL_HOST_DEVICE constexpr std::uint64_t id() const {
    return std::uint64_t{exponent} | (std::uint64_t{mantissa} << 8) | (std::uint64_t{is_signed} << 16) |
           (std::uint64_t{static_cast<std::uint32_t>(bias)} << 17) | (std::uint64_t{finite_values_only} << 49) |
           (std::uint64_t{static_cast<std::uint8_t>(nan)} << 50);
  }

  /// The name (see the file comment), e.g. "uint4b8", "float8_e4m3fn", "float8_e8m0fnu".
  constexpr scalar_type_name name() const {
    scalar_type_name s;
    if (is_floating_point()) {
      s.append("float").append_int(size_bits()).append("_e").append_int(exponent).append("m").append_int(mantissa);
      if (!is_ieee_754()) {
        if (finite_values_only) {
          s.append("f");
        }
        if (nan != nan_repr::none) {
          s.append("n");
        }
        if (!is_signed) {
          s.append("u");
        }
        if (nan == nan_repr::neg_zero) {
          s.append("uz");
        }
      }
    } else {
      s.append(is_signed ? "int" : "uint").append_int(size_bits());
      if (has_bias()) {
        s.append("b").append_int(bias);
      }
    }
    return s;
  }

  /// The named type (one of `named_scalar_types`) with this id, or nullopt.
  static constexpr std::optional<scalar_type> from_id(std::uint64_t id);
  /// The named type with this name, or nullopt; also accepts the aliases "bfloat16", "float16"
  /// and "float8_e8m0fn" (vLLM's spelling of float8_e8m0fnu).
  static constexpr std::optional<scalar_type> from_name(std::string_view name);

 private:
  QTL_HOST_DEVICE constexpr bool is_e8m0() const {
    return exponent == 8 && mantissa == 0 && !is_signed && nan == nan_repr::extd_range_max_min;
  }
  // vLLM's max() bits (docs/spec/semantics.md §1.5), for mantissa ≥ 1; `neg_zero` (fnuz): the
  // top binade is finite and the exponent bias one more.
  QTL_HOST_DEVICE constexpr std::uint64_t max_float_bits() const {
    std::uint64_t max_mant = (std::uint64_t{1} << mantissa) - 1u;
    if (nan == nan_repr::extd_range_max_min) {
      max_mant -= 1u;
    }
    std::uint64_t max_exp = (std::uint64_t{1} << exponent) - 2u;
    if (nan != nan_repr::ieee_754) {
      max_exp += 1u;
    }
    std::uint64_t const exp_bias = (std::uint64_t{1} << (exponent - 1)) - (nan == nan_repr::neg_zero ? 0u : 1u);
    return (max_mant << (52 - mantissa)) | ((max_exp - exp_bias + 1023u) << 52);
  }
};

// ------------------------------------------------------------------------------------------------
// The named types (docs/spec/semantics.md §1.7; ids and names pinned in test/static/)

inline constexpr scalar_type int4 = {.exponent = 0, .mantissa = 3, .is_signed = true};
inline constexpr scalar_type uint4 = {.exponent = 0, .mantissa = 4};
inline constexpr scalar_type int8 = {.exponent = 0, .mantissa = 7, .is_signed = true};
inline constexpr scalar_type uint8 = {.exponent = 0, .mantissa = 8};
inline constexpr scalar_type uint2b2 = {.exponent = 0, .mantissa = 2, .bias = 2};
inline constexpr scalar_type uint3b4 = {.exponent = 0, .mantissa = 3, .bias = 4};
inline constexpr scalar_type uint4b8 = {.exponent = 0, .mantissa = 4, .bias = 8};      ///< GPTQ 4-bit
inline constexpr scalar_type uint8b128 = {.exponent = 0, .mantissa = 8, .bias = 128};  ///< GPTQ 8-bit
inline constexpr scalar_type float4_e2m1f = {
    .exponent = 2, .mantissa = 1, .is_signed = true, .finite_values_only = true, .nan = nan_repr::none};
inline constexpr scalar_type float6_e3m2f = {
    .exponent = 3, .mantissa = 2, .is_signed = true, .finite_values_only = true, .nan = nan_repr::none};
inline constexpr scalar_type float6_e2m3f = {
    .exponent = 2, .mantissa = 3, .is_signed = true, .finite_values_only = true, .nan = nan_repr::none};
inline constexpr scalar_type float8_e4m3fn = {
    .exponent = 4, .mantissa = 3, .is_signed = true, .finite_values_only = true, .nan = nan_repr::extd_range_max_min};
/// ROCm's FP8 (MI300): e4m3 with exponent bias 8, max 240, 0x80 its only NaN (QTL's; not vLLM's).
inline constexpr scalar_type float8_e4m3fnuz = {
    .exponent = 4, .mantissa = 3, .is_signed = true, .finite_values_only = true, .nan = nan_repr::neg_zero};
inline constexpr scalar_type float8_e5m2 = {.exponent = 5, .mantissa = 2, .is_signed = true};
inline constexpr scalar_type float8_e8m0fnu = {
    .exponent = 8, .mantissa = 0, .finite_values_only = true, .nan = nan_repr::extd_range_max_min};
inline constexpr scalar_type float16_e8m7 = {.exponent = 8, .mantissa = 7, .is_signed = true};
inline constexpr scalar_type float16_e5m10 = {.exponent = 5, .mantissa = 10, .is_signed = true};
inline constexpr scalar_type bfloat16 = float16_e8m7;  ///< alias, as vLLM's `scalar_types.bfloat16`
inline constexpr scalar_type float16 = float16_e5m10;  ///< alias, as vLLM's `scalar_types.float16`

/// The 17 named types, in the order of docs/spec/semantics.md §1.7 (float8_e4m3fnuz, QTL's, after
/// float8_e4m3fn).
inline constexpr scalar_type named_scalar_types[] = {
    int4,           uint4,        int8,         uint8,        uint2b2,       uint3b4,         uint4b8,
    uint8b128,      float4_e2m1f, float6_e3m2f, float6_e2m3f, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2,
    float8_e8m0fnu, float16_e8m7, float16_e5m10};

constexpr std::optional<scalar_type> scalar_type::from_id(std::uint64_t id) {
  for (scalar_type const& t : named_scalar_types) {
    if (t.id() == id) {
      return t;
    }
  }
  return std::nullopt;
}

constexpr std::optional<scalar_type> scalar_type::from_name(std::string_view name) {
  if (name == "bfloat16") {
    return bfloat16;
  }
  if (name == "float16") {
    return float16;
  }
  if (name == "float8_e8m0fn") {
    return float8_e8m0fnu;
  }
  for (scalar_type const& t : named_scalar_types) {
    if (t.name().view() == name) {
      return t;
    }
  }
  return std::nullopt;
}

/// A scalar type as a type: what kernels and type lists take (`TypeConstant::value`).
template <scalar_type V>
struct scalar_constant {
  static constexpr scalar_type value = V;
};

/// True for the specialisations of `scalar_constant`.
template <class T>
inline constexpr bool is_scalar_constant_v = false;
template <scalar_type V>
inline constexpr bool is_scalar_constant_v<scalar_constant<V>> = true;

}  // namespace qtl
