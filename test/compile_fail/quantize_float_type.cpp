// expected-error: floating-point quantization types are not supported
// quantize_weights takes integer quantization types only (the reference asserts is_integer()).
#include <qtl/quantize.hpp>

float w[4] = {1, 2, 3, 4};

void f() {
#ifndef QTL_COMPILE_FAIL_TWIN
  (void)qtl::quantize_weights<qtl::float8_e4m3fn, qtl::group_channelwise>(qtl::make_view(w, 4, 1));
#else
  (void)qtl::quantize_weights<qtl::uint8, qtl::group_channelwise>(qtl::make_view(w, 4, 1));
#endif  // ^^^ QTL_COMPILE_FAIL_TWIN ^^^
}
