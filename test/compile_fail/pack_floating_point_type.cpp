// expected-error: floating-point scalar types cannot be packed as integer codes
// float8_e4m3fn has 8 bits, which divide 32, yet it is no integer code: pack its raw bits with a
// bit width instead.
#include <qtl/pack.hpp>

#include <cstdint>
#include <vector>

int main() {
  std::vector<std::int32_t> codes(4 * 8, 1);
  std::vector<std::int32_t> words(4 * 2);
#ifndef QTL_COMPILE_FAIL_TWIN
  qtl::pack_cols<qtl::float8_e4m3fn>(qtl::make_view(codes.data(), 4, 8), qtl::make_view(words.data(), 4, 2));
#else
  qtl::pack_cols<8>(qtl::make_view(codes.data(), 4, 8), qtl::make_view(words.data(), 4, 2));
#endif  // ^^^ QTL_COMPILE_FAIL_TWIN ^^^
  return words[0] == 0;
}
