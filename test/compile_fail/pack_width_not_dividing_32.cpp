// expected-error: the bit width must divide 32 \(1, 2, 4, 8, 16 or 32\)
// 3-bit codes do not tile an int32 word (sglang's get_pack_factor asserts 32 % bits == 0).
#include <qtl/pack.hpp>

#ifndef QTL_COMPILE_FAIL_TWIN
int const factor = qtl::pack_factor<3>;
#else
int const factor = qtl::pack_factor<4>;
#endif  // ^^^ QTL_COMPILE_FAIL_TWIN ^^^

int main() { return factor == 0; }
