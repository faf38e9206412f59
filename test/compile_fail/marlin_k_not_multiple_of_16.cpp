// expected-error: K must be a positive multiple of 16 \(of 32 with the 8-bit-activation layout\)
// A 24-row weight does not fill Marlin's 16-row tiles.
#include <qtl/marlin.hpp>

#ifndef QTL_COMPILE_FAIL_TWIN
using shape = qtl::marlin::fixed_shape<4, qtl::marlin::act_width::a16, 24, 64>;
#else
using shape = qtl::marlin::fixed_shape<4, qtl::marlin::act_width::a16, 32, 64>;
#endif  // ^^^ QTL_COMPILE_FAIL_TWIN ^^^

int main() { return shape::marlin_words == 0; }
