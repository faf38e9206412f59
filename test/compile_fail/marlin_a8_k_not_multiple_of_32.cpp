// expected-error: K must be a positive multiple of 16 \(of 32 with the 8-bit-activation layout\)
// The 8-bit-activation layout has 32-row tiles: K = 16 fits the 16-bit-activation layout only
// (the peers' CUDA host code accepts it and leaves the last 16 rows of the output unwritten).
#include <qtl/marlin.hpp>

#ifndef QTL_COMPILE_FAIL_TWIN
using shape = qtl::marlin::fixed_shape<4, qtl::marlin::act_width::a8, 16, 64>;
#else
using shape = qtl::marlin::fixed_shape<4, qtl::marlin::act_width::a16, 16, 64>;
#endif  // ^^^ QTL_COMPILE_FAIL_TWIN ^^^

int main() { return shape::marlin_words == 0; }
