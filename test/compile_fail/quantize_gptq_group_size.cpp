// expected-error: G must be -1, 32, 64 or 128
// GPTQ supports the reference's SUPPORTED_GROUP_SIZES only; 16 is not one of them.
#include <qtl/quantize.hpp>

void f(qtl::view2d<float const> w, qtl::gptq_outputs<float> out) {
#ifndef QTL_COMPILE_FAIL_TWIN
  qtl::gptq_quantize_weights<qtl::uint4b8, 16>(w, out);
#else
  qtl::gptq_quantize_weights<qtl::uint4b8, 32>(w, out);
#endif  // ^^^ QTL_COMPILE_FAIL_TWIN ^^^
}
