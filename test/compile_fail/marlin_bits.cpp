// expected-error: qtl::marlin::layout: Bits must be 4 or 8
// Marlin has no 2-bit weight layout (nor 3- or 16-bit).
#include <qtl/marlin.hpp>

#ifndef QTL_COMPILE_FAIL_TWIN
int const words = qtl::marlin::layout<2>::tile_words;
#else
int const words = qtl::marlin::layout<4>::tile_words;
#endif  // ^^^ QTL_COMPILE_FAIL_TWIN ^^^

int main() { return words == 0; }
