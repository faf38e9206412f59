// expected-error: the bit width must divide 32
// uint3b4 is an integer type, but 3 bits do not tile an int32 word.
#include <qtl/pack.hpp>

#include <cstdint>
#include <vector>

int main() {
  std::vector<std::int32_t> codes(32 * 2, 1);
  auto const in = qtl::make_view(codes.data(), 32, 2);
#ifndef QTL_COMPILE_FAIL_TWIN
  auto const packed = qtl::pack_rows<qtl::uint3b4>(in);
#else
  auto const packed = qtl::pack_rows<qtl::uint4b8>(in);
#endif  // ^^^ QTL_COMPILE_FAIL_TWIN ^^^
  return packed.size() == 0;
}
