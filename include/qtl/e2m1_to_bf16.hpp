#pragma once
/// \file
/// DeepSeek-V4's MXFP4 weights (its routed experts) -> BF16: `block_dequantize<mxfp4>` to bf16
/// (each element e2m1(c) * 2^(e - 127), rounded once), tabulated per scale code, with an x86
/// executor (<qtl/x86/e2m1_to_bf16.hpp>):
///
///   x      [rows, K/2]   e2m1 codes, element 2j in the low nibble of byte j
///   scale  [rows, K/32]  E8M0 codes, one per 1x32 group of a row
///   out    [rows, K]     bf16
///
/// The table is made by `block_dequantize<mxfp4>` itself, so the bytes are its bytes. Every value
/// is exact in bf16 under scale codes 0..252 (two significant bits; 0.5 * 2^-127 is a bf16
/// subnormal and 6 * 2^125 is below bf16's largest); under 253 and 254 the largest codes round to
/// Inf, and 255 is NaN: `mxfp4_to_bf16` says whether any group has such a scale, so that a caller
/// that must be exact checks those elements.

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include <qtl/error.hpp>
#include <qtl/fp4.hpp>
#include <qtl/numeric.hpp>
#include <qtl/x86/e2m1_to_bf16.hpp>

namespace qtl::convert {

/// The bf16 values of the 16 e2m1 codes under each E8M0 scale code, as their low and high bytes
/// (the x86 executor's `pshufb` tables), and whether all 16 are exact.
struct e2m1_bf16_table {
  std::uint8_t lo[256][16] = {};
  std::uint8_t hi[256][16] = {};
  std::array<bool, 256> exact{};

  e2m1_bf16_table() {
    std::array<float4_e2m1x2_t, 16> codes{};  // one group: codes 0..15, twice
    for (int c = 0; c < 16; ++c) {
      codes[static_cast<std::size_t>(c)].bits = static_cast<std::uint8_t>(2 * c % 16 | (2 * c + 1) % 16 << 4);
    }
    std::array<bfloat16_t, 32> out{};
    for (int e = 0; e < 256; ++e) {
      float8_e8m0fnu_t const sc{static_cast<std::uint8_t>(e)};
      block_dequantize<mxfp4>(make_view(static_cast<float4_e2m1x2_t const*>(codes.data()), 1, 16), std::span(&sc, 1),
                              1.0f, make_view(out.data(), 1, 32));
      bool all = e != 0xFF;
      for (int c = 0; c < 16; ++c) {
        std::uint16_t const b = out[static_cast<std::size_t>(c)].bits;
        lo[e][c] = static_cast<std::uint8_t>(b & 0xFFu);
        hi[e][c] = static_cast<std::uint8_t>(b >> 8);
        all = all && static_cast<double>(bf16_to_float(b)) ==
                         static_cast<double>(e2m1_to_float(static_cast<std::uint8_t>(c))) * exp2_int(e - 127);
      }
      exact[static_cast<std::size_t>(e)] = all;
    }
  }
  static e2m1_bf16_table const& get() {
    static e2m1_bf16_table const t;
    return t;
  }

 private:
  static double exp2_int(int n) {
    double v = 1.0;
    for (; n > 0; --n) v *= 2.0;
    for (; n < 0; ++n) v *= 0.5;
    return v;
  }
};

/// Dequantizes the MXFP4 codes `x` with E8M0 scales `scale` into `out` (the layouts of the file
/// comment; rows are contiguous, so any row count). Returns true when every group's scale code is
/// exact for every code (0..252), false when some element may not be its exact value.
/// @throws shape_error unless x has out.size()/2 bytes and scale out.size()/32
inline bool mxfp4_to_bf16(std::span<std::uint8_t const> x, std::span<std::uint8_t const> scale,
                          std::span<bfloat16_t> out) {
  if (out.size() % 32 != 0 || x.size() * 2 != out.size() || scale.size() * 32 != out.size()) {
    throw shape_error("qtl::convert::mxfp4_to_bf16: " + std::to_string(x.size()) + " code bytes and " +
                      std::to_string(scale.size()) + " scales for " + std::to_string(out.size()) +
                      " outputs (2 codes a byte, one scale per 32)");
  }
  auto const& t = e2m1_bf16_table::get();
  auto const groups = static_cast<std::int64_t>(scale.size());
  auto* o = reinterpret_cast<std::uint16_t*>(out.data());
  for (std::int64_t j = qtl::detail::e2m1_bf16_x86::dequant_row(x.data(), scale.data(), t.lo, t.hi, groups, o);
       j < groups; ++j) {
    std::uint8_t const e = scale[static_cast<std::size_t>(j)];
    for (int i = 0; i < 16; ++i) {
      std::uint8_t const b = x[static_cast<std::size_t>(j * 16 + i)];
      o[j * 32 + 2 * i] = static_cast<std::uint16_t>(t.lo[e][b & 15u] | t.hi[e][b & 15u] << 8);
      o[j * 32 + 2 * i + 1] = static_cast<std::uint16_t>(t.lo[e][b >> 4] | t.hi[e][b >> 4] << 8);
    }
  }
  bool exact = true;
  for (std::uint8_t const e : scale) {
    exact = exact && t.exact[e];
  }
  return exact;
}

}  // namespace qtl::convert
