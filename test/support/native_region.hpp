#pragma once
// qtl/quantize.hpp compiled for x86-64-v3 (AVX2, FMA, F16C) with -ffp-contract=fast, as a consumer
// building with `-march=native` in a GNU mode would, for the tests that require the bits not to
// change there (quantize_native_test.cpp, quantize_x86_native_test.cpp). Include it before any other
// QTL header that includes qtl/quantize.hpp: the header is then compiled once, inside the region.
// `native::mul_sub` is a·b - c compiled in the same region (fused when contraction is on), with which
// each test first proves that contraction really happens; `native::have_cpu()` says whether this
// CPU runs the region's code.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#  define QTL_TEST_NATIVE 1
#  pragma GCC push_options
#  pragma GCC target("arch=x86-64-v3")
#  pragma GCC optimize("fp-contract=fast")
#endif  // ^^^ GCC on x86-64 ^^^

#include <qtl/quantize.hpp>

namespace native {
template <class F>
F mul_sub(F a, F b, F c) {
  return a * b - c;
}
}  // namespace native

#if defined(QTL_TEST_NATIVE)
#  pragma GCC pop_options
#endif  // ^^^ QTL_TEST_NATIVE ^^^

namespace native {
inline bool have_cpu() {
#if defined(QTL_TEST_NATIVE)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif  // ^^^ QTL_TEST_NATIVE ^^^
}
}  // namespace native
