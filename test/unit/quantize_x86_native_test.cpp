// The x86 executor tests of quantize_x86_test.cpp again, with qtl/quantize.hpp compiled for
// x86-64-v3 (AVX2, FMA, F16C) and -ffp-contract=fast, as a consumer building with -march=native
// in a GNU mode would (the pragmas of quantize_native_test.cpp): FMA is then enabled inside the
// AVX2 functions too, and they must still equal the portable loops bit for bit. The region is
// first shown to contract.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#  define QTL_TEST_NATIVE 1
#  pragma GCC push_options
#  pragma GCC target("arch=x86-64-v3")
#  pragma GCC optimize("fp-contract=fast")
#endif  // ^^^ GCC on x86-64 ^^^

#include <qtl/quantize.hpp>

namespace native {
/// a·b - c as the region compiles it (fused when contraction is on).
inline float mul_sub(float a, float b, float c) { return a * b - c; }
}  // namespace native

#if defined(QTL_TEST_NATIVE)
#  pragma GCC pop_options
#endif  // ^^^ QTL_TEST_NATIVE ^^^

#include "quantize_x86_test.cpp"

TEST_CASE("the region that compiles qtl/quantize.hpp here contracts a·b - c", "[quantize][x86][native]") {
#if defined(QTL_TEST_NATIVE)
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))) {
    return qtl_test::skip("not an x86-64-v3 CPU: no contracted code to check");
  }
  // (1 + 2^-12)^2 - 1 is 2^-11 rounded, 2^-11 + 2^-24 fused.
  volatile float a = 1.0f + 0x1p-12f;
  volatile float c = 1.0f;
#if defined(__SANITIZE_ADDRESS__)
  // Sanitizer builds (-O1 with instrumentation) may not contract at all; the checks below still run.
  if (native::mul_sub(a, a, c) != 0x1p-11f + 0x1p-24f) {
    WARN("this sanitizer build does not contract here: the comparisons run without a fused a*b - c");
  }
#else
  REQUIRE(native::mul_sub(a, a, c) == 0x1p-11f + 0x1p-24f);
#endif
#else
  qtl_test::skip("not GCC on x86-64: no contracted code to check");
#endif  // ^^^ QTL_TEST_NATIVE ^^^
}
