#pragma once
// An independent oracle for the number formats of qtl/numeric.hpp, for the tests only.
//
// It shares no code with the library: values come from the bit fields through std::ldexp in
// double, and encoding is a search for the nearest value in the sorted table of a format's finite
// magnitudes (ties to the even code), not bit manipulation. It deliberately includes nothing from
// QTL, so that a test can compile it under different floating-point flags than the header under
// test.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace qtl_test {

inline std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float float_of(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// Which codes of a format are special.
enum class specials { ieee, nan_only_all_ones, none };

/// A sign + E exponent bits (bias 2^(E-1)-1) + M mantissa bits format.
struct format {
  std::string name;
  int e;
  int m;
  specials sp;
  int width() const { return 1 + e + m; }
  std::uint32_t sign_bit() const { return 1u << (e + m); }
};

inline format const fp16{"fp16", 5, 10, specials::ieee};
inline format const bf16{"bf16", 8, 7, specials::ieee};
inline format const e4m3fn{"e4m3fn", 4, 3, specials::nan_only_all_ones};
inline format const e5m2{"e5m2", 5, 2, specials::ieee};
inline format const e3m2{"e3m2", 3, 2, specials::none};
inline format const e2m3{"e2m3", 2, 3, specials::none};
inline format const e2m1{"e2m1", 2, 1, specials::none};

/// What a code means.
struct decoded {
  bool is_nan = false;
  double value = 0;  // ±inf for infinities; signed zero kept
};

/// The value of `code` from its fields: (-1)^s 2^(e-bias) (1 + m/2^M), or 2^(1-bias) m/2^M if e = 0.
inline decoded decode(format const& f, std::uint32_t code) {
  int const bias = (1 << (f.e - 1)) - 1;
  bool const neg = (code >> (f.e + f.m)) & 1u;
  int const e = static_cast<int>((code >> f.m) & ((1u << f.e) - 1u));
  int const m = static_cast<int>(code & ((1u << f.m) - 1u));
  int const e_max = (1 << f.e) - 1;
  decoded d;
  if (f.sp == specials::ieee && e == e_max) {
    if (m != 0) {
      d.is_nan = true;
    } else {
      d.value = neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    }
    return d;
  }
  if (f.sp == specials::nan_only_all_ones && e == e_max && m == (1 << f.m) - 1) {
    d.is_nan = true;
    return d;
  }
  double const mag = e == 0 ? std::ldexp(static_cast<double>(m), 1 - bias - f.m)
                            : std::ldexp(static_cast<double>((1 << f.m) + m), e - bias - f.m);
  d.value = neg ? -mag : mag;
  return d;
}

/// The value of e8m0 code `c`: 2^(c-127), NaN for 0xFF.
inline decoded decode_e8m0(std::uint32_t c) {
  decoded d;
  if (c == 0xFF) {
    d.is_nan = true;
  } else {
    d.value = std::ldexp(1.0, static_cast<int>(c) - 127);
  }
  return d;
}

/// Nearest-value encoder over a table of a format's finite non-negative magnitudes (index = code).
class table_encoder {
 public:
  explicit table_encoder(format f) : f_(std::move(f)) {
    for (std::uint32_t c = 0; c < f_.sign_bit(); ++c) {
      decoded const d = decode(f_, c);
      if (d.is_nan || std::isinf(d.value)) {
        break;  // the finite codes come first, in increasing order
      }
      mags_.push_back(d.value);
    }
  }
  format const& fmt() const { return f_; }
  std::size_t finite_codes() const { return mags_.size(); }

  /// The code of `x`: `nearest` = RNE else toward zero; `saturate` = clamp overflow to ±max.
  /// NaN inputs give an unspecified NaN code (formats without NaN: +max, as CUDA does).
  std::uint32_t encode(float x, bool nearest, bool saturate) const {
    std::uint32_t const top = static_cast<std::uint32_t>(mags_.size() - 1);
    if (std::isnan(x)) {
      if (f_.sp == specials::none) {
        return top;
      }
      return f_.sp == specials::ieee ? (((1u << f_.e) - 1u) << f_.m) | (1u << (f_.m - 1)) : (1u << (f_.e + f_.m)) - 1u;
    }
    std::uint32_t const sign = std::signbit(x) ? f_.sign_bit() : 0u;
    double const a = std::fabs(static_cast<double>(x));
    std::uint32_t mag = 0;
    double const ulp_top = mags_[top] - mags_[top - 1];
    double const overflow_mid = mags_[top] + ulp_top / 2;
    bool overflow = false;
    if (a > mags_[top]) {
      if (!nearest) {
        overflow = std::isinf(a) && f_.sp == specials::ieee && !saturate;
        mag = top;
      } else if (a < overflow_mid || (a == overflow_mid && top % 2 == 0)) {
        mag = top;
      } else {
        overflow = true;
      }
    } else {
      auto const it = std::upper_bound(mags_.begin(), mags_.end(), a);  // first > a
      std::uint32_t const lo = static_cast<std::uint32_t>(it - mags_.begin()) - 1u;
      if (mags_[lo] == a || !nearest) {
        mag = lo;
      } else {
        double const mid = (mags_[lo] + mags_[lo + 1]) / 2;  // exact: adjacent values of a narrow format
        mag = a < mid ? lo : a > mid ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
      }
    }
    if (overflow) {
      if (saturate || f_.sp == specials::none) {
        mag = top;
      } else if (f_.sp == specials::ieee) {
        mag = ((1u << f_.e) - 1u) << f_.m;  // Inf
      } else {
        mag = (1u << (f_.e + f_.m)) - 1u;  // NaN
      }
    }
    return sign | mag;
  }

 private:
  format f_;
  std::vector<double> mags_;
};

/// e8m0 rounding rules, restated on values: toward zero = largest 2^k ≤ |x|; up = smallest 2^k ≥
/// |x|; nearest (torch) = 2^e or 2^(e+1) for 2^e ≤ |x| < 2^(e+1) with |x| ≥ 1.5·2^e going up, and
/// below 2^-126: 2^-126 if |x| > 2^-127 else 2^-127. Results are clamped below at 2^-127; above
/// 2^127 they overflow to NaN (0xFF) or, saturating, 2^127 (0xFE). NaN -> 0xFF.
enum class e8m0_rule { nearest, toward_zero, up };

inline std::uint32_t encode_e8m0(float x, e8m0_rule r, bool saturate) {
  if (std::isnan(x)) {
    return 0xFF;
  }
  double const a = std::fabs(static_cast<double>(x));
  long k = 0;  // the exponent of the result
  if (std::isinf(a)) {
    k = 128;
  } else if (a == 0) {
    k = -127;
  } else {
    int ex = 0;
    double const fr = std::frexp(a, &ex);  // a = fr * 2^ex, fr in [0.5, 1)
    long const floor_log2 = ex - 1;
    bool const power_of_two = fr == 0.5;
    switch (r) {
      case e8m0_rule::toward_zero:
        k = floor_log2;
        break;
      case e8m0_rule::up:
        k = power_of_two ? floor_log2 : floor_log2 + 1;
        break;
      case e8m0_rule::nearest:
        if (a >= std::ldexp(1.0, -126)) {
          k = a >= 1.5 * std::ldexp(1.0, static_cast<int>(floor_log2)) ? floor_log2 + 1 : floor_log2;
        } else {
          k = a > std::ldexp(1.0, -127) ? -126 : -127;
        }
        break;
    }
  }
  k = std::max(k, -127L);
  if (k > 127) {
    return saturate ? 0xFE : 0xFF;
  }
  return static_cast<std::uint32_t>(k + 127);
}

/// Float bit patterns for a dense sweep: every `stride`-th pattern (from an odd offset, so that low
/// mantissa bits vary), the special values, and ±`radius` ulps around every value of `points`
/// and around every midpoint between neighbours of `points` (the rounding boundaries).
inline std::vector<std::uint32_t> sweep_patterns(std::uint64_t stride, std::vector<double> points, int radius) {
  std::vector<std::uint32_t> out;
  for (std::uint64_t u = 12345 % stride; u < (std::uint64_t{1} << 32); u += stride) {
    out.push_back(static_cast<std::uint32_t>(u));
  }
  for (std::uint32_t u : {0x00000000u, 0x00000001u, 0x007FFFFFu, 0x00800000u, 0x00400000u, 0x3F800000u,
                          0x7F7FFFFFu, 0x7F800000u, 0x7F800001u, 0x7FC00000u, 0x7FFFFFFFu, 0x7FA00000u}) {
    out.push_back(u);
    out.push_back(u | 0x80000000u);
  }
  std::sort(points.begin(), points.end());
  std::vector<double> centres = points;
  for (std::size_t i = 0; i + 1 < points.size(); ++i) {
    centres.push_back((points[i] + points[i + 1]) / 2);
  }
  for (double const c : centres) {
    if (!(std::fabs(c) <= std::numeric_limits<float>::max())) {
      continue;
    }
    float const cf = static_cast<float>(c);
    std::uint32_t const b = bits_of(std::fabs(cf));
    for (int d = -radius; d <= radius; ++d) {
      std::int64_t const v = static_cast<std::int64_t>(b) + d;
      if (v < 0 || v > 0x7F800000) {
        continue;
      }
      out.push_back(static_cast<std::uint32_t>(v));
      out.push_back(static_cast<std::uint32_t>(v) | 0x80000000u);
    }
  }
  return out;
}

}  // namespace qtl_test
