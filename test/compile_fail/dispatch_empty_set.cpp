// expected-error: qtl::dispatch_bits: the supported set is empty; list at least one bit width
// Dispatching over an empty set can never succeed: it is rejected at compile time, not left to
// throw on every call.
#include <qtl/dispatch.hpp>

int run(int bits) {
#ifndef QTL_COMPILE_FAIL_TWIN
  return qtl::dispatch_bits<>(bits, []<int B>() { return B; });
#else
  return qtl::dispatch_bits<4>(bits, []<int B>() { return B; });
#endif
}
