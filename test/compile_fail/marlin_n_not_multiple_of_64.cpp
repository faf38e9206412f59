// expected-error: N must be a positive multiple of 64
// The repack's tiles are 64 columns wide (also for the 8-bit-activation layout).
#include <qtl/marlin.hpp>

#ifndef QTL_COMPILE_FAIL_TWIN
using shape = qtl::marlin::fixed_shape<8, qtl::marlin::act_width::a8, 32, 96>;
#else
using shape = qtl::marlin::fixed_shape<8, qtl::marlin::act_width::a8, 32, 128>;
#endif  // ^^^ QTL_COMPILE_FAIL_TWIN ^^^

int main() { return shape::marlin_words == 0; }
