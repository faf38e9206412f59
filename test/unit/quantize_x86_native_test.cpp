// The x86 executor tests of quantize_x86_test.cpp again, with qtl/quantize.hpp compiled for
// x86-64-v3 (AVX2, FMA, F16C) and -ffp-contract=fast, as a consumer building with -march=native
// in a GNU mode would (test/support/native_region.hpp): FMA is then enabled inside the
// AVX2 functions too, and they must still equal the portable loops bit for bit. The region is
// first shown to contract.
#include "native_region.hpp"

#include "quantize_x86_test.cpp"

TEST_CASE("the region that compiles qtl/quantize.hpp here contracts a·b - c", "[quantize][x86][native]") {
#if defined(QTL_TEST_NATIVE)
  if (!native::have_cpu()) {
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
