// Compile-time checks of <qtl/pack.hpp>: pack factors, widths, the bit layout of hand-worked words,
// and whole pack/unpack operations evaluated in constant expressions on small arrays.

#include <qtl/pack.hpp>

#include <array>
#include <cstdint>

namespace {

using qtl::make_view;

// Widths: exactly the divisors of 32 (sglang's get_pack_factor asserts 32 % b == 0).
static_assert(qtl::is_pack_width(1) && qtl::is_pack_width(2) && qtl::is_pack_width(4) &&
              qtl::is_pack_width(8) && qtl::is_pack_width(16) && qtl::is_pack_width(32));
static_assert(!qtl::is_pack_width(0) && !qtl::is_pack_width(3) && !qtl::is_pack_width(5) &&
              !qtl::is_pack_width(6) && !qtl::is_pack_width(7) && !qtl::is_pack_width(12) &&
              !qtl::is_pack_width(64) && !qtl::is_pack_width(-4));

static_assert(qtl::pack_factor<1> == 32 && qtl::pack_factor<2> == 16 && qtl::pack_factor<4> == 8 &&
              qtl::pack_factor<8> == 4 && qtl::pack_factor<16> == 2 && qtl::pack_factor<32> == 1);
static_assert(qtl::pack_traits<4>::mask == 0xFu && qtl::pack_traits<32>::mask == 0xFFFFFFFFu);
static_assert(!qtl::pack_traits<4>::is_signed);

// Integer scalar types as widths: their size in bits; signed types (int4, int8) get
// two's-complement fields. A scalar_constant's value works the same.
static_assert(qtl::pack_factor<qtl::uint4b8> == 8 && qtl::pack_factor<qtl::uint8b128> == 4 &&
              qtl::pack_factor<qtl::uint2b2> == 16 && qtl::pack_factor<qtl::int4> == 8 &&
              qtl::pack_factor<qtl::int8> == 4 && qtl::pack_factor<qtl::uint4> == 8);
static_assert(qtl::pack_factor<qtl::scalar_constant<qtl::uint4b8>::value> == 8);
static_assert(qtl::pack_traits<qtl::int4>::is_signed && !qtl::pack_traits<qtl::uint4b8>::is_signed);
static_assert(qtl::pack<qtl::uint4b8>({1, 2, 3, 4, 5, 6, 7, 8}) == qtl::pack<4>({1, 2, 3, 4, 5, 6, 7, 8}));
static_assert(static_cast<std::uint32_t>(qtl::pack<qtl::int4>({-8, -1, 0, 7, 1, 2, 3, -2})) == 0xE32170F8u);
static_assert(qtl::unpack<qtl::int4>(static_cast<std::int32_t>(0xE32170F8u)) ==
              std::array<std::int32_t, 8>{-8, -1, 0, 7, 1, 2, 3, -2});
static_assert(qtl::unpack<qtl::int8>(qtl::pack<qtl::int8>({-128, 127, -1, 0})) ==
              std::array<std::int32_t, 4>{-128, 127, -1, 0});

// docs/spec/semantics.md §8.3: [1..8] at 4 bits -> 0x87654321 = -2023406815 as int32.
static_assert(qtl::pack<4>({1, 2, 3, 4, 5, 6, 7, 8}) == -2023406815);
static_assert(static_cast<std::uint32_t>(qtl::pack<4>({1, 2, 3, 4, 5, 6, 7, 8})) == 0x87654321u);
static_assert(qtl::unpack<4>(-2023406815) == std::array<std::int32_t, 8>{1, 2, 3, 4, 5, 6, 7, 8});
// 8 bits: [0x11, 0x22, 0x33, 0x44] -> 0x44332211; 16 bits: two halves; 32 bits: the identity.
static_assert(qtl::pack<8>({0x11, 0x22, 0x33, 0x44}) == 0x44332211);
static_assert(qtl::pack<16>({0xBEEF, 0xDEAD}) == static_cast<std::int32_t>(0xDEADBEEFu));
static_assert(qtl::pack<32>({-5}) == -5 && qtl::unpack<32>(-5)[0] == -5);
// 2 bits: 16 fields, element j in bits [2j, 2j+2): 3 in element 15 sets the two top bits.
static_assert(qtl::pack<2>({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3}) ==
              static_cast<std::int32_t>(0xC0000000u));
static_assert(qtl::pack<2>({1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) == 0b111001);
// 1 bit: element j is bit j.
static_assert(qtl::unpack<1>(0x80000001)[0] == 1 && qtl::unpack<1>(0x80000001)[31] == 1 &&
              qtl::unpack<1>(0x80000001)[1] == 0);

// The element functions.
static_assert(qtl::pack_field<4>(0xA, 3) == 0xA000u);
static_assert(qtl::pack_field<4>(0x1A, 3) == 0xA000u);          // masked: stays in its field
static_assert(qtl::pack_field<4, false>(0x1A, 3) == 0x1A000u);  // unmasked: spills, as the reference
static_assert(qtl::pack_field<4, false>(-1, 0) == 0xFFFFFFFFu);
static_assert(qtl::unpack_code<4>(0x87654321u, 7) == 8 && qtl::unpack_code<4>(0x87654321u, 0) == 1);
static_assert(qtl::code_excess<4>(15) == 0 && qtl::code_excess<4>(16) != 0 && qtl::code_excess<4>(-1) != 0);
static_assert(qtl::code_excess<4, true>(-8) == 0 && qtl::code_excess<4, true>(7) == 0 &&
              qtl::code_excess<4, true>(8) != 0 && qtl::code_excess<4, true>(-9) != 0);
static_assert(qtl::code_excess<32>(-1) == 0 && qtl::code_excess<32, true>(-2147483647 - 1) == 0);
static_assert(qtl::unpack_code<4, true>(0x8u, 0) == -8 && qtl::unpack_code<4, true>(0x7u, 0) == 7);
static_assert(qtl::unpack_code<8, true>(0xFF00u, 1) == -1);

// Whole operations in constant evaluation. A (8, 2) matrix of 4-bit codes:
constexpr std::array<std::int32_t, 16> codes_8x2 = {1, 9,    //
                                                    2, 10,   //
                                                    3, 11,   //
                                                    4, 12,   //
                                                    5, 13,   //
                                                    6, 14,   //
                                                    7, 15,   //
                                                    8, 0};
// pack_rows: column n of 8 rows -> one word (GPTQ layout): out (1, 2)
constexpr auto rows_packed = [] {
  std::array<std::int32_t, 16> in = codes_8x2;
  std::array<std::int32_t, 2> out{};
  qtl::pack_rows<4>(make_view(in.data(), 8, 2), make_view(out.data(), 1, 2));
  return out;
}();
static_assert(static_cast<std::uint32_t>(rows_packed[0]) == 0x87654321u);
static_assert(static_cast<std::uint32_t>(rows_packed[1]) == 0x0FEDCBA9u);
constexpr auto rows_unpacked = [] {
  std::array<std::int32_t, 2> in = rows_packed;
  std::array<std::int32_t, 16> out{};
  qtl::unpack_rows<4>(make_view(in.data(), 1, 2), make_view(out.data(), 8, 2));
  return out;
}();
static_assert(rows_unpacked == codes_8x2);

// pack_cols: the same 16 codes seen as (2, 8): each row -> one word: out (2, 1)
constexpr auto cols_packed = [] {
  std::array<std::int32_t, 16> in = codes_8x2;
  std::array<std::int32_t, 2> out{};
  qtl::pack_cols<4>(make_view(in.data(), 2, 8), make_view(out.data(), 2, 1));
  return out;
}();
// row 0 = 1, 9, 2, 10, 3, 11, 4, 12 -> element j in nibble j
static_assert(static_cast<std::uint32_t>(cols_packed[0]) == 0xC4B3A291u);
static_assert(static_cast<std::uint32_t>(cols_packed[1]) == 0x08F7E6D5u);
constexpr auto cols_unpacked = [] {
  std::array<std::int32_t, 2> in = cols_packed;
  std::array<std::int32_t, 16> out{};
  qtl::unpack_cols<4>(make_view(in.data(), 2, 1), make_view(out.data(), 2, 8));
  return out;
}();
static_assert(cols_unpacked == codes_8x2);

// Strided views (a transposed view of the same memory) take the general path, same layout:
// the (2, 8) transpose of codes_8x2 packed by columns equals codes_8x2 packed by rows.
constexpr auto transposed_cols_packed = [] {
  std::array<std::int32_t, 16> in = codes_8x2;
  qtl::view2d<std::int32_t> t;
  t.data = in.data();
  t.extent[0] = 2;
  t.extent[1] = 8;
  t.stride[0] = 1;
  t.stride[1] = 2;
  std::array<std::int32_t, 2> out{};
  qtl::pack_cols<4>(t, make_view(out.data(), 2, 1));
  return out;
}();
static_assert(transposed_cols_packed == rows_packed);

}  // namespace
