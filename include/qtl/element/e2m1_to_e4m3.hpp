#pragma once
/// \file
/// The element layer of DeepSeek-V4's lossless MXFP4 -> FP8-block cast (sglang
/// `cast_e2m1fn_to_e4m3fn`, DeepSeek's `inference/convert.py`, TileKernels
/// `per_block_cast_lossless`; `docs/spec/deepseek_v4.md`). `qtl/e2m1_to_e4m3.hpp` runs it on the
/// host; everything is `QTL_HOST_DEVICE constexpr`, so a kernel can too.
///
/// An MXFP4 weight holds e2m1 codes c (two per byte, element 2j in the low nibble) and one E8M0
/// scale code e per 1x32 group: w = e2m1(c) * 2^(e - 127). The cast gives each BN x BK block
/// (128 x 128) the E8M0 scale s = emax - 6, emax the largest e of the block, and each element the
/// e4m3fn code of e2m1(c) * 2^(e - s): a shift of at most 6, so |value| <= 6 * 2^6 = 384 < 448.
/// The element is exact while e4m3fn holds e2m1(c) * 2^shift: down to shift -8 for every code
/// (0.5 * 2^-8 = 2^-9, e4m3fn's least subnormal), i.e. while no group's scale lies more than 2^14
/// below the block's largest; codes with fewer trailing zeros reach lower (1.0 to -9, 4.0 to -11);
/// the zeros at any shift. The engines assert nothing of this (TileKernels asserts 2^11, keeping
/// clear of e4m3's subnormals); the host API refuses a block that is not exact.

#include <cstdint>

#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>

namespace qtl::convert {

/// Elements of a row one E8M0 scale of the MXFP4 input covers.
inline constexpr int e2m1_scale_group = 32;
/// The block scale is the largest group scale over 2^6: 6 * 2^6 = 384 fits e4m3fn (448), 6 * 2^7
/// does not.
inline constexpr int lossless_max_shift = 6;
/// Below this shift no nonzero e2m1 code is exact in e4m3fn (4.0 * 2^-11 = 2^-9).
inline constexpr int lossless_min_shift = -11;

/// The E8M0 code of a block's e4m3 scale from its largest group scale code `emax` (< 0xFF):
/// emax - 6; 0 below emax = 6, where the engines' float 2^(emax - 133) is below E8M0's range and
/// torch's cast gives code 0 (only an all-zero block is exact there).
QTL_HOST_DEVICE constexpr std::uint8_t lossless_block_scale(std::uint8_t emax) {
  return static_cast<std::uint8_t>(emax >= lossless_max_shift ? emax - lossless_max_shift : 0);
}

/// The least shift at which e2m1 code `code` (low nibble) times 2^shift is an e4m3fn value: with
/// the magnitude m * 2^k, m odd (1 or 3), e4m3fn holds it while k + shift >= -9. A zero is exact at
/// any shift: INT32_MIN / 2 stands for that.
QTL_HOST_DEVICE constexpr int e2m1_min_exact_shift(std::uint8_t code) {
  //                    0     0.5  1   1.5  2    3   4    6
  int const least[8] = {-(1 << 30), -8, -9, -8, -10, -9, -11, -10};
  return least[code & 7u];
}

/// Whether the cast keeps element code `code` of a group with scale code `e` exactly, in a block
/// whose largest group scale code is `emax` (e <= emax < 0xFF).
QTL_HOST_DEVICE constexpr bool e2m1_to_e4m3_exact(std::uint8_t code, std::uint8_t e, std::uint8_t emax) {
  return (code & 7u) == 0 ||
         (emax >= lossless_max_shift && int(e) - int(lossless_block_scale(emax)) >= e2m1_min_exact_shift(code));
}

/// The e4m3fn code the engines write for e2m1 code `code` shifted by `shift` (-126 <= shift <= 6):
/// torch's cast (RNE) of fl(table[code] * 2^shift), where the engines' table maps the negative zero
/// (code 8) to +0.0, so both zeros give 0x00. Exact where `e2m1_min_exact_shift` allows.
QTL_HOST_DEVICE constexpr std::uint8_t e2m1_to_e4m3(std::uint8_t code, int shift) {
  float const v = (code & 7u) == 0 ? 0.0f : e2m1_to_float(code);
  return float_to_e4m3fn(v * bits_to_float(static_cast<std::uint32_t>(127 + shift) << 23));
}

}  // namespace qtl::convert
