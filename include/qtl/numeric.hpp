#pragma once
/// \file
/// Number formats: `constexpr` encoders and decoders between `float` and the narrow formats that
/// quantized checkpoints store, usable in `static_assert`, in host loops and in CUDA kernels.
///
/// Every encoder is integer logic on the bits of the `float` (the fp16 encoder adds one exactly
/// rounded float addition for fp16-subnormal results, `qtl/exact.hpp`), so its result does not
/// depend on `-ffp-contract`, `-march` nor on the rounding mode of the machine; every decoder
/// builds the `float` bits directly and is exact. The fp16 and bf16 conversions are branch-free,
/// so that host loops built from them vectorise.
///
/// | format (code bits)            | layout              | bias | max       | Inf | NaN codes             |
/// |-------------------------------|---------------------|------|-----------|-----|-----------------------|
/// | fp16 `half_t` (16)            | s eeeee mmmmmmmmmm  | 15   | 65504     | yes | e=31, m≠0             |
/// | bf16 `bfloat16_t` (16)        | s eeeeeeee mmmmmmm  | 127  | ≈3.39e38  | yes | e=255, m≠0            |
/// | float8_e4m3fn (8)             | s eeee mmm          | 7    | 448       | no  | s.1111.111 only       |
/// | float8_e4m3fnuz (8)           | s eeee mmm          | 8    | 240       | no  | 0x80 only (no -0)     |
/// | float8_e5m2 (8)               | s eeeee mm          | 15   | 57344     | yes | e=31, m≠0             |
/// | float6_e3m2f (6, low bits)    | s eee mm            | 3    | 28        | no  | none                  |
/// | float6_e2m3f (6, low bits)    | s ee mmm            | 1    | 7.5       | no  | none                  |
/// | float4_e2m1f (4, low nibble)  | s ee m              | 1    | 6         | no  | none                  |
/// | float8_e8m0fnu (8)            | eeeeeeee            | 127  | 2^127     | no  | 0xFF only             |
///
/// Subnormals (e = 0) are `m * 2^(1 - bias - M)` in every format with a mantissa; e8m0 code `c`
/// is `2^(c - 127)`, so code 0 is 2^-127 (it has no zero and no sign).
///
/// **Rounding.** Encoders round to nearest, ties to even (IEEE RNE, as torch and CUDA's `_rn`
/// conversions do); fp6/fp4 also offer round-toward-zero (as CUDA's `cudaRoundZero`); e8m0 offers
/// torch's nearest rule, round-toward-zero and round-up (CUDA's `cudaRoundZero` /
/// `cudaRoundPosInf`).
///
/// **Overflow** (`saturation`): with `saturation::none` a finite value that rounds past the largest
/// finite code becomes Inf where the format has Inf (fp16, bf16, e5m2) and NaN where it has only
/// NaN (e4m3fn, e4m3fnuz, e8m0) — torch's `.to(dtype)`; with `saturation::finite` it becomes ±max, as CUDA's
/// `__NV_SATFINITE` (Inf inputs included). fp6 and fp4 have neither, so they always saturate
/// (CUDA's `satfinite`).
///
/// **Canonical NaN** (what QTL's encoders produce for a NaN input; peers differ, so tests compare
/// NaNs as NaNs). QTL follows torch (c10), the reference of the library:
/// | format  | canonical NaN code           | torch (c10)  | CUDA host conversion of a float NaN |
/// |---------|------------------------------|--------------|-------------------------------------|
/// | fp16    | sign \| 0x7E00               | same         | 0x7FFF                              |
/// | bf16    | 0x7FC0 (sign dropped)        | same         | 0x7FFF                              |
/// | e4m3fn  | sign \| 0x7F                 | same         | 0x7F                                |
/// | e4m3fnuz | 0x80 (the only NaN)         | same         | (CUDA has no e4m3fnuz type)         |
/// | e5m2    | sign \| 0x7F                 | same         | 0x7F                                |
/// | e8m0    | 0xFF                         | same         | same                                |
/// | fp6/fp4 | no NaN: NaN encodes as +max (0x1F / 0x7), as CUDA; torch has no conversion         |
/// Decoders map every NaN code to a quiet `float` NaN with the code's sign.

#include <bit>
#include <cstdint>
#include <type_traits>

#include <qtl/exact.hpp>
#include <qtl/macros.hpp>

namespace qtl {

// ------------------------------------------------------------------------------------------------
// Bits of a float

/// The IEEE-754 bits of `x` (`std::bit_cast`, usable in constant evaluation and device code).
QTL_HOST_DEVICE constexpr std::uint32_t float_to_bits(float x) { return std::bit_cast<std::uint32_t>(x); }
/// The `float` whose IEEE-754 bits are `bits`.
QTL_HOST_DEVICE constexpr float bits_to_float(std::uint32_t bits) { return std::bit_cast<float>(bits); }
/// The IEEE-754 bits of `x`.
QTL_HOST_DEVICE constexpr std::uint64_t double_to_bits(double x) { return std::bit_cast<std::uint64_t>(x); }
/// The `double` whose IEEE-754 bits are `bits`.
QTL_HOST_DEVICE constexpr double bits_to_double(std::uint64_t bits) { return std::bit_cast<double>(bits); }

/// True when `x` is a NaN (bit test: unaffected by `-ffast-math`).
QTL_HOST_DEVICE constexpr bool is_nan(float x) { return (float_to_bits(x) & 0x7FFFFFFFu) > 0x7F800000u; }
/// True when `x` is +Inf or -Inf.
QTL_HOST_DEVICE constexpr bool is_inf(float x) { return (float_to_bits(x) & 0x7FFFFFFFu) == 0x7F800000u; }
/// True when `x` is neither NaN nor ±Inf.
QTL_HOST_DEVICE constexpr bool is_finite(float x) { return (float_to_bits(x) & 0x7FFFFFFFu) < 0x7F800000u; }

namespace detail {
/// `c ? a : b` with both arms computed: loops built from it are if-converted and vectorised even
/// under -ftrapping-math (GCC's default), which forbids speculating a conditional float operation.
QTL_HOST_DEVICE constexpr std::uint32_t select_bits(bool c, std::uint32_t a, std::uint32_t b) {
  std::uint32_t const m = 0u - static_cast<std::uint32_t>(c);
  return (a & m) | (b & ~m);
}
}  // namespace detail

// ------------------------------------------------------------------------------------------------
// Modes

/// What an encoder does with a value beyond the largest finite code (see the file comment).
enum class saturation : std::uint8_t {
  none,    ///< Inf where the format has Inf, else NaN (torch's `.to(dtype)`, CUDA `__NV_NOSAT`)
  finite,  ///< clamp to ±max, Inf inputs included (CUDA `__NV_SATFINITE`); NaN stays NaN
};

/// Rounding of the fp6/fp4 encoders (the two modes CUDA's `__nv_cvt_float_to_fp6/fp4` offer).
enum class round_mode : std::uint8_t {
  nearest_even,  ///< round to nearest, ties to even (`cudaRoundNearest`)
  toward_zero,   ///< truncate the magnitude (`cudaRoundZero`)
};

/// Rounding of a float to an e8m0 power of two. The sign of the input is ignored (e8m0 is
/// unsigned); results below 2^-127 become 2^-127 (code 0), as in torch and CUDA.
enum class e8m0_rounding : std::uint8_t {
  /// torch's `.to(torch.float8_e8m0fnu)` (c10 `fp8e8m0fnu_from_fp32_value`): keep the exponent
  /// field of the float and add one when its guard bit (mantissa bit 22) is set and either a lower
  /// bit is set or the float is normal. On values: for 2^e ≤ |x| < 2^(e+1) (e ≥ -126) the result
  /// is 2^(e+1) when |x| ≥ 1.5·2^e (so ties go up, not to an even code), else 2^e; below 2^-126 it
  /// is 2^-126 when |x| > 2^-127, else 2^-127.
  nearest,
  /// Largest power of two ≤ |x| (CUDA `cudaRoundZero`; the exponent field of x).
  toward_zero,
  /// Smallest power of two ≥ |x| (CUDA `cudaRoundPosInf`; the MX/DeepGEMM "ceil" scale).
  up,
};

// ------------------------------------------------------------------------------------------------
// Storage types: the bits of one value, trivially copyable and as large as the format.

/// IEEE binary16 bits (`torch.float16`, CUDA `__half`).
struct half_t {
  std::uint16_t bits;
  /// Bit equality (so +0 ≠ -0 and equal NaN codes compare equal).
  friend constexpr bool operator==(half_t, half_t) = default;
};
/// bfloat16 bits: the upper half of a float (`torch.bfloat16`, CUDA `__nv_bfloat16`).
struct bfloat16_t {
  std::uint16_t bits;
  friend constexpr bool operator==(bfloat16_t, bfloat16_t) = default;
};
/// float8_e4m3fn bits (`torch.float8_e4m3fn`, CUDA `__nv_fp8_e4m3`).
struct float8_e4m3fn_t {
  std::uint8_t bits;
  friend constexpr bool operator==(float8_e4m3fn_t, float8_e4m3fn_t) = default;
};
/// float8_e4m3fnuz bits (`torch.float8_e4m3fnuz`, ROCm's FP8 on MI300): the layout of e4m3fn with
/// exponent bias 8, no negative zero, and 0x80 (what would be -0) its only NaN.
struct float8_e4m3fnuz_t {
  std::uint8_t bits;
  friend constexpr bool operator==(float8_e4m3fnuz_t, float8_e4m3fnuz_t) = default;
};
/// float8_e5m2 bits (`torch.float8_e5m2`, CUDA `__nv_fp8_e5m2`).
struct float8_e5m2_t {
  std::uint8_t bits;
  friend constexpr bool operator==(float8_e5m2_t, float8_e5m2_t) = default;
};
/// float8_e8m0fnu bits: an unsigned power of two (`torch.float8_e8m0fnu`, CUDA `__nv_fp8_e8m0`).
struct float8_e8m0fnu_t {
  std::uint8_t bits;
  friend constexpr bool operator==(float8_e8m0fnu_t, float8_e8m0fnu_t) = default;
};

static_assert(sizeof(half_t) == 2 && sizeof(bfloat16_t) == 2 && sizeof(float8_e4m3fn_t) == 1 &&
              sizeof(float8_e4m3fnuz_t) == 1 && sizeof(float8_e5m2_t) == 1 && sizeof(float8_e8m0fnu_t) == 1);

// ------------------------------------------------------------------------------------------------
// The generic codec

namespace detail {

/// Which codes of a format are special (vLLM's `NanRepr` plus the IEEE default).
enum class special_codes : std::uint8_t {
  ieee,           ///< exponent all ones: Inf (m = 0) or NaN (m ≠ 0)
  extd_nan_only,  ///< only s.1...1.1...1 is NaN, the rest of the top binade is finite (e4m3fn)
  none,           ///< every code is finite (fp6, fp4)
  fnuz,           ///< exponent bias 2^(E-1), every code finite but 1.0...0 (-0), the only NaN
};

/// `sig / 2^shift` rounded to an integer, to nearest-even or toward zero. Exact for any shift.
QTL_HOST_DEVICE constexpr std::uint32_t shift_round(std::uint32_t sig, int shift, bool nearest) {
  if (shift <= 0) {
    return sig << -shift;
  }
  if (shift >= 32) {  // sig < 2^24, so sig / 2^shift < 2^-8: rounds to 0 either way
    return 0;
  }
  std::uint32_t const q = sig >> shift;
  if (!nearest) {
    return q;
  }
  std::uint32_t const rem = sig & ((1u << shift) - 1u);
  std::uint32_t const half = 1u << (shift - 1);
  return q + ((rem > half || (rem == half && (q & 1u) != 0)) ? 1u : 0u);
}

/// Encodes the float with bits `f` into a format of E exponent bits (bias 2^(E-1)-1), M mantissa
/// bits and a sign bit, code `s | e | m` in the low 1+E+M bits of the result. `NanMag` is the
/// magnitude code of the canonical NaN; `NanSigned` says whether it takes the input's sign.
///
///   float:  s | eeeeeeee | mmmmmmmmmmmmmmmmmmmmmmm      significand 1.m (0.m if e = 0)
///   target: s | E bits   | M bits                        round the significand at bit 23 - M
template <int E, int M, special_codes Special, std::uint32_t NanMag, bool NanSigned>
QTL_HOST_DEVICE constexpr std::uint32_t encode(std::uint32_t f, saturation sat, bool nearest) {
  static_assert(E >= 1 && E <= 8 && M >= 0 && M <= 10, "qtl::detail::encode: unsupported format");
  constexpr int bias = (1 << (E - 1)) - (Special == special_codes::fnuz ? 0 : 1);
  constexpr int emin = 1 - bias;  // exponent of the smallest normal
  constexpr std::uint32_t inf_mag = ((1u << E) - 1u) << M;
  constexpr std::uint32_t max_mag = Special == special_codes::ieee            ? inf_mag - 1u
                                    : Special == special_codes::extd_nan_only ? (1u << (E + M)) - 2u
                                                                              : (1u << (E + M)) - 1u;
  std::uint32_t sign = (f >> 31) << (E + M);
  std::uint32_t const abs = f & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) {  // NaN
    if constexpr (Special == special_codes::none) {
      return max_mag;  // as CUDA: NaN -> +max
    } else {
      return (NanSigned ? sign : 0u) | NanMag;
    }
  }
  std::uint32_t mag = 0;
  if (abs == 0x7F800000u) {
    mag = max_mag + 1u;  // past max: treated as an overflow below
  } else {
    int const fexp = static_cast<int>(abs >> 23);
    std::uint32_t const sig = fexp == 0 ? (abs & 0x7FFFFFu) : ((abs & 0x7FFFFFu) | 0x800000u);
    int const e = fexp == 0 ? -126 : fexp - 127;
    if (e >= emin) {
      // Normal in the target: the rounded significand q in [2^M, 2^(M+1)] carries into the exponent.
      mag = (static_cast<std::uint32_t>(e - emin) << M) + shift_round(sig, 23 - M, nearest);
    } else {
      // Subnormal in the target: q in [0, 2^M]; q = 2^M is the smallest normal code.
      mag = shift_round(sig, 23 - M + (emin - e), nearest);
    }
  }
  if (mag > max_mag) {
    if (sat == saturation::finite || Special == special_codes::none) {
      mag = max_mag;
    } else if constexpr (Special == special_codes::ieee) {
      mag = inf_mag;
    } else {
      return (NanSigned ? sign : 0u) | NanMag;
    }
  }
  if constexpr (Special == special_codes::fnuz) {
    sign = mag == 0 ? 0u : sign;  // no -0: its code is the NaN
  }
  return sign | mag;
}

/// Decodes the code `c` (low 1+E+M bits) of the format described as for `encode`. Exact.
template <int E, int M, special_codes Special>
QTL_HOST_DEVICE constexpr float decode(std::uint32_t c) {
  static_assert(E >= 1 && E <= 5 && M >= 0 && M <= 10, "qtl::detail::decode: unsupported format");
  constexpr int bias = (1 << (E - 1)) - (Special == special_codes::fnuz ? 0 : 1);
  constexpr std::uint32_t mmask = (1u << M) - 1u;
  std::uint32_t const sign = ((c >> (E + M)) & 1u) << 31;
  std::uint32_t const e = (c >> M) & ((1u << E) - 1u);
  std::uint32_t m = c & mmask;
  if constexpr (Special == special_codes::ieee) {
    if (e == (1u << E) - 1u) {
      return bits_to_float(sign | (m == 0 ? 0x7F800000u : 0x7FC00000u | (m << (23 - M))));
    }
  } else if constexpr (Special == special_codes::extd_nan_only) {
    if (e == (1u << E) - 1u && m == mmask) {
      return bits_to_float(sign | 0x7FC00000u);
    }
  } else if constexpr (Special == special_codes::fnuz) {
    if (c == (1u << (E + M))) {
      return bits_to_float(0x7FC00000u);
    }
  }
  if (e == 0) {
    if (m == 0) {
      return bits_to_float(sign);
    }
    // Subnormal m * 2^(1 - bias - M): normalise (a normal float for every E <= 5).
    int exp = 1 - bias;
    while ((m & (1u << M)) == 0) {
      m <<= 1;
      --exp;
    }
    return bits_to_float(sign | (static_cast<std::uint32_t>(exp + 127) << 23) | ((m & mmask) << (23 - M)));
  }
  return bits_to_float(sign | (static_cast<std::uint32_t>(static_cast<int>(e) - bias + 127) << 23) | (m << (23 - M)));
}

}  // namespace detail

// ------------------------------------------------------------------------------------------------
// Raw codes: float <-> code

/// float -> fp16 bits, RNE; overflow to ±Inf (`saturation::none`, as `__float2half_rn`) or ±65504;
/// NaN -> sign | 0x7E00 (torch's). Branch-free for `saturation::none`:
///
///   float  s eeeeeeee mmmmmmmmmmmmmmmmmmmmmmm
///   fp16   s    eeeee mmmmmmmmmm              normal (|x| ≥ 2^-14): round the mantissa at bit 13,
///                                             ties to even (a carry rolls into the exponent),
///                                             then rebias 127 -> 15 (- 112 << 23)
///   subnormal (|x| < 2^-14): |x| + 0.5 has ulp 2^-24, so the addition rounds |x| to a multiple
///   of 2^-24 (nearest even); the low bits of the sum are that multiple.
QTL_HOST_DEVICE constexpr std::uint16_t float_to_fp16(float x, saturation sat = saturation::none) {
  if (sat == saturation::finite) {
    return static_cast<std::uint16_t>(
        detail::encode<5, 10, detail::special_codes::ieee, 0x7E00u, true>(float_to_bits(x), sat, true));
  }
  std::uint32_t const f = float_to_bits(x);
  std::uint32_t const sign = (f >> 16) & 0x8000u;
  std::int32_t const a = static_cast<std::int32_t>(f & 0x7FFFFFFFu);  // signed compares (SSE2 has no unsigned)
  std::uint32_t const ua = static_cast<std::uint32_t>(a);
  std::uint32_t const normal = (ua + 0xFFFu + ((ua >> 13) & 1u) - (112u << 23)) >> 13;
  std::uint32_t const subnormal = float_to_bits(detail::add_rn(bits_to_float(ua), 0.5f)) - 0x3F000000u;
  std::uint32_t mag = detail::select_bits(a < 0x38800000, subnormal, normal);
  mag = detail::select_bits(a >= 0x477FF000, 0x7C00u, mag);  // ≥ 65520 rounds to Inf
  mag = detail::select_bits(a > 0x7F800000, 0x7E00u, mag);   // NaN
  return static_cast<std::uint16_t>(sign | mag);
}
/// fp16 bits -> float (exact; NaN -> quiet NaN with the code's sign and payload). Branch-free:
///
///   s eeeee mmmmmmmmmm  ->  s eeeeeeee mmmmmmmmmm0000000000000   (rebias 15 -> 127: + 112 << 23;
///   Inf/NaN, e = 31, take another 112 to reach 255, and NaN gets the quiet bit); subnormals go
///   through an exact int -> float conversion, so DAZ/FTZ modes cannot flush them.
QTL_HOST_DEVICE constexpr float fp16_to_float(std::uint16_t c) {
  std::int32_t const em = static_cast<std::int32_t>(c & 0x7FFFu);  // signed compares (SSE2)
  std::uint32_t const sign = (static_cast<std::uint32_t>(c) & 0x8000u) << 16;
  std::uint32_t const inf_nan = 0u - static_cast<std::uint32_t>(em >= 0x7C00);
  std::uint32_t const is_nan = 0u - static_cast<std::uint32_t>(em > 0x7C00);
  std::uint32_t const normal =
      ((static_cast<std::uint32_t>(em) << 13) + (112u << 23) + (inf_nan & (112u << 23))) | (is_nan & 0x00400000u);
  float const sub = static_cast<float>(em) * 0x1p-24f;  // subnormal m · 2^-24: exact, a normal float
  return bits_to_float(sign | detail::select_bits(em < 0x400, float_to_bits(sub), normal));
}

/// float -> bf16 bits, RNE; overflow to ±Inf (as `__float2bfloat16_rn`) or ±max; NaN -> 0x7FC0.
/// Branch-free for `saturation::none`: round the low 16 bits away, ties to even.
QTL_HOST_DEVICE constexpr std::uint16_t float_to_bf16(float x, saturation sat = saturation::none) {
  if (sat == saturation::finite) {
    return static_cast<std::uint16_t>(
        detail::encode<8, 7, detail::special_codes::ieee, 0x7FC0u, false>(float_to_bits(x), sat, true));
  }
  std::uint32_t const f = float_to_bits(x);
  std::uint32_t const r = (f + 0x7FFFu + ((f >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>(detail::select_bits((f & 0x7FFFFFFFu) > 0x7F800000u, 0x7FC0u, r));
}
/// bf16 bits -> float (exact: the upper half of the float).
QTL_HOST_DEVICE constexpr float bf16_to_float(std::uint16_t c) {
  return bits_to_float(static_cast<std::uint32_t>(c) << 16);
}

/// float -> float8_e4m3fn code, RNE. |x| > 464 (past the 448/480 tie) and ±Inf give NaN
/// (sign | 0x7F, torch) with `saturation::none`, ±448 (0x7E/0xFE) with `saturation::finite`.
QTL_HOST_DEVICE constexpr std::uint8_t float_to_e4m3fn(float x, saturation sat = saturation::none) {
  return static_cast<std::uint8_t>(
      detail::encode<4, 3, detail::special_codes::extd_nan_only, 0x7Fu, true>(float_to_bits(x), sat, true));
}
/// float8_e4m3fn code -> float (exact; 0x7F/0xFF -> NaN).
QTL_HOST_DEVICE constexpr float e4m3fn_to_float(std::uint8_t c) {
  return detail::decode<4, 3, detail::special_codes::extd_nan_only>(c);
}

/// float -> float8_e4m3fnuz code, RNE (torch's `fp8e4m3fnuz_from_fp32_value`): |x| ≥ 248 (past the
/// 240/256 tie), ±Inf and NaN give the NaN 0x80 with `saturation::none`; ±240 (0x7F/0xFF) with
/// `saturation::finite` (NaN stays 0x80). A result of magnitude 0 is +0 whatever the sign.
QTL_HOST_DEVICE constexpr std::uint8_t float_to_e4m3fnuz(float x, saturation sat = saturation::none) {
  return static_cast<std::uint8_t>(
      detail::encode<4, 3, detail::special_codes::fnuz, 0x80u, false>(float_to_bits(x), sat, true));
}
/// float8_e4m3fnuz code -> float (exact; 0x80 -> NaN).
QTL_HOST_DEVICE constexpr float e4m3fnuz_to_float(std::uint8_t c) {
  return detail::decode<4, 3, detail::special_codes::fnuz>(c);
}

/// float -> float8_e5m2 code, RNE; |x| ≥ 61440 gives ±Inf (none) or ±57344 (finite); NaN -> sign | 0x7F.
QTL_HOST_DEVICE constexpr std::uint8_t float_to_e5m2(float x, saturation sat = saturation::none) {
  return static_cast<std::uint8_t>(
      detail::encode<5, 2, detail::special_codes::ieee, 0x7Fu, true>(float_to_bits(x), sat, true));
}
/// float8_e5m2 code -> float (exact).
QTL_HOST_DEVICE constexpr float e5m2_to_float(std::uint8_t c) {
  return detail::decode<5, 2, detail::special_codes::ieee>(c);
}

/// float -> float6_e3m2f code (low 6 bits), saturating at ±28; NaN -> +28 (0x1F), as CUDA.
QTL_HOST_DEVICE constexpr std::uint8_t float_to_e3m2(float x, round_mode r = round_mode::nearest_even) {
  return static_cast<std::uint8_t>(detail::encode<3, 2, detail::special_codes::none, 0u, false>(
      float_to_bits(x), saturation::finite, r == round_mode::nearest_even));
}
/// float6_e3m2f code (low 6 bits; higher bits ignored) -> float (exact).
QTL_HOST_DEVICE constexpr float e3m2_to_float(std::uint8_t c) {
  return detail::decode<3, 2, detail::special_codes::none>(c & 0x3Fu);
}

/// float -> float6_e2m3f code (low 6 bits), saturating at ±7.5; NaN -> +7.5 (0x1F), as CUDA.
QTL_HOST_DEVICE constexpr std::uint8_t float_to_e2m3(float x, round_mode r = round_mode::nearest_even) {
  return static_cast<std::uint8_t>(detail::encode<2, 3, detail::special_codes::none, 0u, false>(
      float_to_bits(x), saturation::finite, r == round_mode::nearest_even));
}
/// float6_e2m3f code (low 6 bits; higher bits ignored) -> float (exact).
QTL_HOST_DEVICE constexpr float e2m3_to_float(std::uint8_t c) {
  return detail::decode<2, 3, detail::special_codes::none>(c & 0x3Fu);
}

/// float -> float4_e2m1f code in the low nibble, saturating at ±6; NaN -> +6 (0x7), as CUDA.
/// Magnitudes by code 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign (-0 is 0x8).
QTL_HOST_DEVICE constexpr std::uint8_t float_to_e2m1(float x, round_mode r = round_mode::nearest_even) {
  return static_cast<std::uint8_t>(detail::encode<2, 1, detail::special_codes::none, 0u, false>(
      float_to_bits(x), saturation::finite, r == round_mode::nearest_even));
}
/// float4_e2m1f code (low nibble; the high nibble is ignored) -> float (exact).
QTL_HOST_DEVICE constexpr float e2m1_to_float(std::uint8_t c) {
  return detail::decode<2, 1, detail::special_codes::none>(c & 0xFu);
}

/// float -> float8_e8m0fnu code (the biased exponent of a power of two; see `e8m0_rounding`).
/// NaN -> 0xFF. A result past 2^127 (Inf inputs included) is NaN with `saturation::none` and
/// 0xFE (2^127) with `saturation::finite`; a result below 2^-127 (zero included) is code 0.
QTL_HOST_DEVICE constexpr std::uint8_t float_to_e8m0(float x, e8m0_rounding r = e8m0_rounding::nearest,
                                                     saturation sat = saturation::none) {
  std::uint32_t const abs = float_to_bits(x) & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) {
    return 0xFF;
  }
  std::uint32_t code = abs >> 23;  // 255 for Inf: an overflow
  std::uint32_t const frac = abs & 0x7FFFFFu;
  if (code != 255) {
    switch (r) {
      case e8m0_rounding::nearest: {
        bool const guard = (frac & 0x400000u) != 0;
        bool const lower = (frac & 0x3FFFFFu) != 0;
        code += (guard && (lower || code > 0)) ? 1u : 0u;
        break;
      }
      case e8m0_rounding::toward_zero: break;
      case e8m0_rounding::up:
        // Any bit below the exponent's power of two; for subnormal floats (code 0, 2^-127) only
        // values above 2^-127 (frac > 2^22) go up.
        code += (code > 0 ? frac != 0 : frac > 0x400000u) ? 1u : 0u;
        break;
    }
  }
  if (code == 255 && sat == saturation::finite) {
    code = 254;
  }
  return static_cast<std::uint8_t>(code);
}
/// float8_e8m0fnu code -> float: 2^(c - 127) exactly (code 0 is the float subnormal 2^-127);
/// 0xFF -> NaN.
QTL_HOST_DEVICE constexpr float e8m0_to_float(std::uint8_t c) {
  if (c == 0xFF) {
    return bits_to_float(0x7FC00000u);
  }
  return bits_to_float(c == 0 ? 0x00400000u : static_cast<std::uint32_t>(c) << 23);
}

// ------------------------------------------------------------------------------------------------
// Typed conversions

/// `x` as a float (exact for every storage type; NaN codes give a NaN).
template <class T>
QTL_HOST_DEVICE constexpr float to_float(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, half_t>) {
    return fp16_to_float(x.bits);
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return bf16_to_float(x.bits);
  } else if constexpr (std::is_same_v<T, float8_e4m3fn_t>) {
    return e4m3fn_to_float(x.bits);
  } else if constexpr (std::is_same_v<T, float8_e4m3fnuz_t>) {
    return e4m3fnuz_to_float(x.bits);
  } else if constexpr (std::is_same_v<T, float8_e5m2_t>) {
    return e5m2_to_float(x.bits);
  } else if constexpr (std::is_same_v<T, float8_e8m0fnu_t>) {
    return e8m0_to_float(x.bits);
  } else {
    static_assert(sizeof(T) == 0,
                  "qtl::to_float: T must be float, half_t, bfloat16_t, float8_e4m3fn_t, float8_e4m3fnuz_t, "
                  "float8_e5m2_t or float8_e8m0fnu_t");
  }
}

/// `x` rounded to T: RNE (e8m0: torch's nearest rule); overflow as `sat` says. The default,
/// `saturation::none`, is torch's `.to(dtype)`: Inf for fp16/bf16/e5m2, NaN for e4m3fn/e4m3fnuz/e8m0.
template <class T>
QTL_HOST_DEVICE constexpr T from_float(float x, saturation sat = saturation::none) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, half_t>) {
    return half_t{float_to_fp16(x, sat)};
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return bfloat16_t{float_to_bf16(x, sat)};
  } else if constexpr (std::is_same_v<T, float8_e4m3fn_t>) {
    return float8_e4m3fn_t{float_to_e4m3fn(x, sat)};
  } else if constexpr (std::is_same_v<T, float8_e4m3fnuz_t>) {
    return float8_e4m3fnuz_t{float_to_e4m3fnuz(x, sat)};
  } else if constexpr (std::is_same_v<T, float8_e5m2_t>) {
    return float8_e5m2_t{float_to_e5m2(x, sat)};
  } else if constexpr (std::is_same_v<T, float8_e8m0fnu_t>) {
    return float8_e8m0fnu_t{float_to_e8m0(x, e8m0_rounding::nearest, sat)};
  } else {
    static_assert(sizeof(T) == 0,
                  "qtl::from_float: T must be float, half_t, bfloat16_t, float8_e4m3fn_t, "
                  "float8_e4m3fnuz_t, float8_e5m2_t or float8_e8m0fnu_t");
  }
}

// ------------------------------------------------------------------------------------------------
// Rounding to an integer

/// `x` rounded to the nearest integer, ties to even (`torch.round`, `std::nearbyint` in the
/// default mode), keeping the sign of zero; NaN and ±Inf are returned unchanged. Branch-free, so
/// that loops vectorise: |x| + 2^23 has ulp 1, so that exactly rounded addition does the rounding
/// (`qtl/exact.hpp`); |x| ≥ 2^23 is already an integer, and NaN fails `<` and is kept.
QTL_HOST_DEVICE constexpr float round_half_even(float x) {
  float const a = bits_to_float(float_to_bits(x) & 0x7FFFFFFFu);
  float const r = detail::sub_rn(detail::add_rn(a, 0x1p23f), 0x1p23f);
  std::uint32_t const m = detail::select_bits(a < 0x1p23f, float_to_bits(r), float_to_bits(a));
  return bits_to_float(m | (float_to_bits(x) & 0x80000000u));
}

}  // namespace qtl
