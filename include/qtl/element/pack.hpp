#pragma once
/// \file
/// The element layer of bit packing (`qtl/pack.hpp` runs it on the host, `qtl/cuda/pack.cuh` on
/// the device, and kernel authors build their own kernels from it): pack widths and `pack_traits`,
/// the `QTL_HOST_DEVICE constexpr` element functions that are the one definition of the bit layout
/// (`pack_field`, `pack_word`, `unpack_code`, `unpack_word`; `qtl/pack.hpp`'s file comment draws
/// it), and the shape predicate that host ops and CUDA launchers share.

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <qtl/macros.hpp>
#include <qtl/scalar_type.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// True when codes of `bits` bits tile an int32 word exactly: 1 <= bits <= 32 and 32 % bits == 0
/// (1, 2, 4, 8, 16, 32). sglang's `get_pack_factor` asserts the same.
QTL_HOST_DEVICE constexpr bool is_pack_width(int bits) {
  return bits >= 1 && bits <= 32 && 32 % bits == 0;
}

namespace detail {

// A width argument is either a plain integer (a bit width; the codes are unsigned) or a
// qtl::scalar_type (`scalar_constant<V>::value` is one too).
template <auto Width>
consteval bool width_is_bits() {
  return std::is_integral_v<std::remove_cvref_t<decltype(Width)>> &&
         !std::is_same_v<std::remove_cvref_t<decltype(Width)>, bool>;
}
template <auto Width>
consteval bool width_is_scalar_type() {
  return std::is_same_v<std::remove_cvref_t<decltype(Width)>, scalar_type>;
}
template <auto Width>
consteval int width_bits() {
  if constexpr (width_is_bits<Width>()) {
    auto const bits = static_cast<long long>(Width);  // (no unsigned-vs-0 comparison warning)
    return bits >= 0 && bits <= 64 ? static_cast<int>(bits) : 0;
  } else if constexpr (width_is_scalar_type<Width>()) {
    return static_cast<int>(Width.size_bits());
  } else {
    return 0;
  }
}
template <auto Width>
consteval bool width_is_floating_point() {
  if constexpr (width_is_scalar_type<Width>()) {
    return !Width.is_integer();
  } else {
    return false;
  }
}
template <auto Width>
consteval bool width_is_signed() {
  if constexpr (width_is_scalar_type<Width>()) {
    return Width.is_integer() && Width.is_signed;
  } else {
    return false;
  }
}

}  // namespace detail

/// The compile-time facts of a pack width `Width` (a bit width or an integer scalar type):
/// `bits`, `factor` (codes per int32 word), `is_signed`, `mask` (the low `bits` bits).
template <auto Width>
struct pack_traits {
  static_assert(detail::width_is_bits<Width>() || detail::width_is_scalar_type<Width>(),
                "qtl::pack: the width must be a bit width (an int) or an integer qtl::scalar_type");
  // Reported when a float type (float8_e4m3fn, float4_e2m1f, ...) is used as a width.
  static_assert(!detail::width_is_floating_point<Width>(),
                "qtl::pack: floating-point scalar types cannot be packed as integer codes; pack "
                "their raw bit codes with a bit width instead (e.g. qtl::pack_cols<8>)");
  // Reported for 3, 5, 6, 7, ... bits: 32 / b codes would not fill a word exactly.
  static_assert(is_pack_width(detail::width_bits<Width>()),
                "qtl::pack: the bit width must divide 32 (1, 2, 4, 8, 16 or 32)");

  static constexpr int bits = is_pack_width(detail::width_bits<Width>()) ? detail::width_bits<Width>() : 32;
  static constexpr int factor = 32 / bits;
  static constexpr bool is_signed = detail::width_is_signed<Width>();
  static constexpr std::uint32_t mask = static_cast<std::uint32_t>((std::uint64_t{1} << bits) - 1);
};

/// Codes per int32 word: `32 / b` (sglang's `get_pack_factor`), e.g. `pack_factor<4> == 8`.
template <auto Width>
inline constexpr int pack_factor = pack_traits<Width>::factor;

// ---------------------------------------------------------------------------------------------
// Element functions: the one definition of the bit layout, run by the host loops below and by the
// CUDA kernels of <qtl/cuda/pack.cuh>. `Bits` must satisfy is_pack_width; `Signed` selects
// two's-complement fields (signed scalar types).
// ---------------------------------------------------------------------------------------------

/// Non-zero iff `code` is outside the range of a `Bits`-bit field: `[0, 2^Bits)`, or
/// `[-2^(Bits-1), 2^(Bits-1))` when `Signed`. Meant to be OR-accumulated over many codes.
template <int Bits, bool Signed = false>
QTL_HOST_DEVICE constexpr std::uint32_t code_excess(std::int32_t code) {
  static_assert(is_pack_width(Bits), "qtl::code_excess: Bits must divide 32 (1, 2, 4, 8, 16 or 32)");
  constexpr std::uint32_t mask = static_cast<std::uint32_t>((std::uint64_t{1} << Bits) - 1);
  // Shifting the signed range [-2^(b-1), 2^(b-1)) up by 2^(b-1) maps it onto [0, 2^b).
  constexpr std::uint32_t offset = Signed ? (1u << (Bits - 1)) : 0u;
  return (static_cast<std::uint32_t>(code) + offset) & ~mask;
}

/// Code `code` masked to `Bits` bits and moved to element `j` of a word: bits `[j*Bits, (j+1)*Bits)`.
/// `Masked = false` skips the mask, as the reference does (an out-of-range code then spills into
/// the higher fields): only for callers that reject such codes themselves, like the host loops.
/// @pre 0 <= j < 32 / Bits
template <int Bits, bool Masked = true>
QTL_HOST_DEVICE constexpr std::uint32_t pack_field(std::int32_t code, int j) {
  static_assert(is_pack_width(Bits), "qtl::pack_field: Bits must divide 32 (1, 2, 4, 8, 16 or 32)");
  constexpr std::uint32_t mask = static_cast<std::uint32_t>((std::uint64_t{1} << Bits) - 1);
  return (Masked ? static_cast<std::uint32_t>(code) & mask : static_cast<std::uint32_t>(code)) << (Bits * j);
}

namespace detail {
// The j loop written as a fold, so that it is unrolled at any optimisation level: g++ -O2 does not
// peel small constant loops, and a loop left rolled stops the caller's loop from vectorising.
template <int Bits, bool Signed, bool Masked, int... J>
QTL_HOST_DEVICE constexpr std::uint32_t pack_word_unrolled(std::int32_t const* codes, index_t stride,
                                                           std::uint32_t& excess,
                                                           std::integer_sequence<int, J...>) {
  std::uint32_t word = 0;
  std::uint32_t bad = 0;
  ((bad |= code_excess<Bits, Signed>(codes[J * stride]),
    word |= pack_field<Bits, Masked>(codes[J * stride], J)),
   ...);
  excess |= bad;
  return word;
}
}  // namespace detail

/// One word from `32 / Bits` codes `codes[0], codes[stride], codes[2*stride], ...` (element j from
/// `codes[j*stride]`); ORs `code_excess` of every code into `excess` (zero iff all are in range).
/// The fields are masked (`Masked`, see pack_field) unless the caller rejects a non-zero `excess`;
/// signed codes always need the mask (their high bits are set).
template <int Bits, bool Signed = false, bool Masked = true>
QTL_HOST_DEVICE constexpr std::uint32_t pack_word(std::int32_t const* codes, index_t stride,
                                                  std::uint32_t& excess) {
  static_assert(is_pack_width(Bits), "qtl::pack_word: Bits must divide 32 (1, 2, 4, 8, 16 or 32)");
  return detail::pack_word_unrolled<Bits, Signed, Masked || Signed>(
      codes, stride, excess, std::make_integer_sequence<int, 32 / Bits>{});
}

/// Element `j` of `word`: bits `[j*Bits, (j+1)*Bits)`, zero-extended, or sign-extended when `Signed`.
/// @pre 0 <= j < 32 / Bits
template <int Bits, bool Signed = false>
QTL_HOST_DEVICE constexpr std::int32_t unpack_code(std::uint32_t word, int j) {
  static_assert(is_pack_width(Bits), "qtl::unpack_code: Bits must divide 32 (1, 2, 4, 8, 16 or 32)");
  constexpr std::uint32_t mask = static_cast<std::uint32_t>((std::uint64_t{1} << Bits) - 1);
  std::uint32_t field = (word >> (Bits * j)) & mask;
  if constexpr (Signed) {
    constexpr std::uint32_t sign = 1u << (Bits - 1);
    field = (field ^ sign) - sign;  // sign-extend: 0b1000 -> 0xFFFFFFF8 for 4 bits
  }
  return static_cast<std::int32_t>(field);  // modular conversion (C++20)
}

namespace detail {
template <int Bits, bool Signed, int... J>
QTL_HOST_DEVICE constexpr void unpack_word_unrolled(std::uint32_t word, std::int32_t* codes, index_t stride,
                                                    std::integer_sequence<int, J...>) {
  ((codes[J * stride] = unpack_code<Bits, Signed>(word, J)), ...);
}
}  // namespace detail

/// All `32 / Bits` elements of `word`: element j to `codes[j*stride]` (the inverse of `pack_word`).
template <int Bits, bool Signed = false>
QTL_HOST_DEVICE constexpr void unpack_word(std::uint32_t word, std::int32_t* codes, index_t stride) {
  static_assert(is_pack_width(Bits), "qtl::unpack_word: Bits must divide 32 (1, 2, 4, 8, 16 or 32)");
  detail::unpack_word_unrolled<Bits, Signed>(word, codes, stride,
                                             std::make_integer_sequence<int, 32 / Bits>{});
}

/// True when `codes` (K, N) and `packed` fit an op that packs along `dim` (0: rows, 1: cols) with
/// pack factor `pf`: extents non-negative, pf divides the packed dimension of `codes`, and `packed`
/// is (K/pf, N) for dim 0 or (K, N/pf) for dim 1. (The host ops throw shape_error when it is false;
/// the CUDA launchers return cudaErrorInvalidValue.)
QTL_HOST_DEVICE constexpr bool pack_shapes_fit(index_t pf, int dim, view2d<std::int32_t const> codes,
                                               view2d<std::int32_t const> packed) {
  int const other = 1 - dim;
  return pf > 0 && (dim == 0 || dim == 1) && codes.extent[0] >= 0 && codes.extent[1] >= 0 &&
         packed.extent[0] >= 0 && packed.extent[1] >= 0 && codes.extent[dim] % pf == 0 &&
         packed.extent[dim] == codes.extent[dim] / pf && packed.extent[other] == codes.extent[other];
}

/// vLLM's `convert_packed_uint4b8_to_signed_int4_inplace` on a packed word `W` (a byte, an int32
/// word): each nibble q (uint4b8, the value q - 8) becomes (q - 8) & 0xF, two's-complement int4,
/// which is q ^ 8. The map is its own inverse.
template <class W>
QTL_HOST_DEVICE constexpr W uint4b8_to_int4(W w) {
  static_assert(std::is_unsigned_v<W>, "qtl::uint4b8_to_int4: an unsigned word");
  return static_cast<W>(w ^ static_cast<W>(0x8888888888888888ull));
}

}  // namespace qtl
