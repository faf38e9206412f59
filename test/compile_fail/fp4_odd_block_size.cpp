// expected-error: BlockSize must be even
// A block-scaled format packs E2M1 values two per byte, so a block must hold an even number of
// elements; the twin uses NVFP4's 16.
#include <qtl/fp4.hpp>

#ifndef QTL_COMPILE_FAIL_TWIN
using odd = qtl::block_format<qtl::float4_e2m1x2_t, qtl::float8_e4m3fn_t, 15>;
#else
using odd = qtl::block_format<qtl::float4_e2m1x2_t, qtl::float8_e4m3fn_t, 16>;
#endif  // ^^^ QTL_COMPILE_FAIL_TWIN ^^^
static_assert(odd::block_size > 0);
