#pragma once
/// \file
/// Exactly rounded float32 arithmetic for element code that must give the same bits on the host,
/// on the device and in constant evaluation, whatever the consumer's compiler flags.
///
/// `qtl::detail::` (building blocks of element functions, not an API of their own):
/// * `add_rn`, `sub_rn`, `mul_rn`, `div_rn` — one IEEE operation, rounded to nearest even.
///   In nvcc's device pass they are CUDA's `__fadd_rn` / `__fsub_rn` / `__fmul_rn` / `__fdiv_rn`,
///   which nvcc never contracts into an FMA; on the host (and in constant evaluation) the plain
///   operator, which is IEEE for a lone operation.
/// * `mul_rn_unfused(a, b, opaque)` — a product that a later addition must not absorb: host
///   compilers contract `a * b - c` into an FMA under `-ffp-contract=fast` (GCC's default in GNU
///   modes) with FMA hardware, so the product is xor-ed with `opaque`, a zero the optimiser cannot
///   see (`opaque_zero()`, read from a `volatile` once per call of a host loop); loops built from
///   it still vectorise. On the device it is `__fmul_rn`.
///
/// Where these are used (element functions of `qtl/element/*.hpp`), the results do not depend on
/// `-ffp-contract` or `-march`; `-ffast-math` (re-association, flushed subnormals) is not supported.

#include <bit>
#include <cstdint>
#include <type_traits>

#include <qtl/macros.hpp>  // QTL_HOST_DEVICE, QTL_DEVICE_ROUNDING, QTL_ON_DEVICE

namespace qtl::detail {

/// a + b, rounded once to nearest even.
QTL_HOST_DEVICE constexpr float add_rn(float a, float b) {
#if QTL_DEVICE_ROUNDING
  if (!std::is_constant_evaluated() && QTL_ON_DEVICE()) {
    return __fadd_rn(a, b);
  }
#endif  // ^^^ QTL_DEVICE_ROUNDING ^^^
  return a + b;
}
/// a - b, rounded once to nearest even.
QTL_HOST_DEVICE constexpr float sub_rn(float a, float b) {
#if QTL_DEVICE_ROUNDING
  if (!std::is_constant_evaluated() && QTL_ON_DEVICE()) {
    return __fsub_rn(a, b);
  }
#endif  // ^^^ QTL_DEVICE_ROUNDING ^^^
  return a - b;
}
/// a · b, rounded once to nearest even (see `mul_rn_unfused` where a sum consumes it on the host).
QTL_HOST_DEVICE constexpr float mul_rn(float a, float b) {
#if QTL_DEVICE_ROUNDING
  if (!std::is_constant_evaluated() && QTL_ON_DEVICE()) {
    return __fmul_rn(a, b);
  }
#endif  // ^^^ QTL_DEVICE_ROUNDING ^^^
  return a * b;
}
/// a / b, rounded once to nearest even (IEEE division, never a reciprocal).
QTL_HOST_DEVICE constexpr float div_rn(float a, float b) {
#if QTL_DEVICE_ROUNDING
  if (!std::is_constant_evaluated() && QTL_ON_DEVICE()) {
    return __fdiv_rn(a, b);
  }
#endif  // ^^^ QTL_DEVICE_ROUNDING ^^^
  return a / b;
}

/// Never written: its value, 0, is unknown to the optimiser.
inline volatile std::uint32_t opaque_zero_source = 0;

/// A zero the optimiser cannot see (host only): read it once per host loop and pass it to
/// `mul_rn_unfused`. Constant evaluation and device code pass a literal 0.
inline std::uint32_t opaque_zero() { return opaque_zero_source; }

/// a · b rounded once and never fused into a later addition: `opaque` is 0 but unknown to the
/// compiler (`opaque_zero()` on the host; any value is ignored on the device).
QTL_HOST_DEVICE constexpr float mul_rn_unfused(float a, float b, std::uint32_t opaque) {
#if QTL_DEVICE_ROUNDING
  if (!std::is_constant_evaluated() && QTL_ON_DEVICE()) {
    (void)opaque;
    return __fmul_rn(a, b);
  }
#endif  // ^^^ QTL_DEVICE_ROUNDING ^^^
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(a * b) ^ opaque);
}

}  // namespace qtl::detail
