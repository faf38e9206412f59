// expected-error: fp8_storage|constraints not satisfied
// scaled_fp8_quant writes e4m3fn or e5m2 only: e8m0 (a scale format) is refused by the concept;
// the twin writes e4m3fn.
#include <qtl/fp8.hpp>

#include <vector>

void quantize() {
  std::vector<float> x(4, 1.0f);
#ifndef QTL_COMPILE_FAIL_TWIN
  std::vector<qtl::float8_e8m0fnu_t> q(4);
#else
  std::vector<qtl::float8_e4m3fn_t> q(4);
#endif  // ^^^ QTL_COMPILE_FAIL_TWIN ^^^
  qtl::scaled_fp8_quant_static(qtl::make_view<float const>(x.data(), 1, 4), 1.0f, qtl::make_view(q.data(), 1, 4));
}
