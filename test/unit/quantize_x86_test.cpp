// The run-time dispatched x86 executor of qtl/quantize.hpp (AVX2 + F16C) against the portable
// loops, bit for bit, on adversarial inputs: every kind of fp16/bf16 code as weight (NaN with
// payloads, ±Inf, subnormals, ±0), scales that are 0, subnormal, Inf or NaN, zero points across
// the code range, codes of ≤ 8 bits and wider ones, zero points applied before or after scales,
// and row lengths that leave a scalar tail. Skipped (with a warning) on CPUs without AVX2/F16C.
#include <qtl/quantize.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <utility>
#include <cstring>
#include <random>
#include <vector>

namespace {

using qtl::index_t;
namespace qnt = qtl::detail::qnt;

template <class T>
std::uint16_t bits_of(T x) {
  return x.bits;
}

/// A random 16-bit code; one in four is drawn from the special values.
template <class T>
T random_code(std::mt19937& rng) {
  static constexpr std::uint16_t special_fp16[] = {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01,
                                                   0x7FFF, 0x0001, 0x83FF, 0x3800, 0xB800, 0x7BFF, 0x0400};
  static constexpr std::uint16_t special_bf16[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81,
                                                   0x7FFF, 0x0001, 0x807F, 0x3F00, 0xBF00, 0x7F7F, 0x0080};
  std::uint32_t const u = rng();
  if ((u & 3u) == 0) {
    auto const& sp = std::is_same_v<T, qtl::half_t> ? special_fp16 : special_bf16;
    return T{sp[(u >> 2) % 14]};
  }
  return T{static_cast<std::uint16_t>(u >> 16)};
}

/// A scale as pass 1 leaves it in the float buffer: a T value (round_to<T> of something), so a
/// NaN is canonical; mostly small positive values that make codes spread over the range.
template <class T>
float random_scale(std::mt19937& rng) {
  std::uint32_t const u = rng() % 16;
  if (u == 0) {
    return qnt::round_to<T>(std::numeric_limits<float>::quiet_NaN());
  }
  if (u == 1) {
    return qnt::load<T>(random_code<T>(rng));
  }
  if (u == 2) {
    return 0.0f;
  }
  if (u == 3) {
    return std::numeric_limits<float>::infinity();
  }
  float const e = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 30);
  return qnt::round_to<T>(e * (1.0f + static_cast<float>(rng() % 1024) / 1024.0f));
}

template <class T, bool SmallCodes, bool After>
void compare_rows(qtl::quant_range r, bool zero_points, std::mt19937& rng) {
  for (index_t cn : {1, 7, 8, 9, 31, 64, 203}) {
    std::vector<T> in(static_cast<std::size_t>(cn));
    std::vector<float> sc(in.size()), zp(in.size());
    for (std::size_t j = 0; j < in.size(); ++j) {
      in[j] = random_code<T>(rng);
      sc[j] = random_scale<T>(rng);
      zp[j] = zero_points ? static_cast<float>(rng() % static_cast<std::uint32_t>(r.qmax + 1)) : 0.0f;
    }
    std::vector<std::int32_t> q_ref(in.size()), q_fast(in.size());
    std::vector<T> w_ref(in.size()), w_fast(in.size());
    qnt::quantize_row<T, SmallCodes, After>(in.data(), sc.data(), zp.data(), cn, r, 0, q_ref.data(), w_ref.data());
    qnt::quantize_row_dispatch<T, SmallCodes, After>(true, in.data(), sc.data(), zp.data(), cn, r, 0, q_fast.data(),
                                                     w_fast.data());
    for (std::size_t j = 0; j < in.size(); ++j) {
      INFO("column " << j << " of " << cn << ": w bits " << bits_of(in[j]) << ", s " << sc[j] << ", zp " << zp[j]);
      REQUIRE(q_fast[j] == q_ref[j]);
      REQUIRE(bits_of(w_fast[j]) == bits_of(w_ref[j]));
    }
  }
}

template <class T>
void compare_all(std::mt19937& rng) {
  qtl::quant_range const u4 = qtl::quant_range_of(qtl::uint4);
  qtl::quant_range const u4b8 = qtl::quant_range_of(qtl::uint4b8);
  qtl::quant_range const u8 = qtl::quant_range_of(qtl::uint8);
  qtl::quant_range const wide{0.0f, 65535.0f, 0};  // 16-bit codes: q - zp is not exact in T
  for (int rep = 0; rep < 300; ++rep) {
    compare_rows<T, true, false>(u4b8, false, rng);
    compare_rows<T, true, false>(u4, true, rng);
    compare_rows<T, true, true>(u4, true, rng);
    compare_rows<T, true, true>(u8, true, rng);
    compare_rows<T, false, false>(wide, true, rng);
    compare_rows<T, false, true>(wide, true, rng);
  }
}

/// Pass 1 of a tile: the AVX2 fold on 16-bit keys against the portable float fold. Equal bits,
/// except that a zero result may differ in sign; the scales and zero points, which is what pass 1
/// is for, are equal bit for bit.
template <class T>
void compare_minmax(std::mt19937& rng) {
  qtl::quant_range const u4 = qtl::quant_range_of(qtl::uint4);
  qtl::quant_range const u4b8 = qtl::quant_range_of(qtl::uint4b8);
  for (int rep = 0; rep < 200; ++rep) {
    index_t const rows = 1 + static_cast<index_t>(rng() % 40);
    index_t const cn = 1 + static_cast<index_t>(rng() % 70);
    index_t const stride = cn + static_cast<index_t>(rng() % 3);
    bool const sparse_specials = rng() % 2 == 0;  // else most columns hold a NaN
    std::vector<T> w(static_cast<std::size_t>(rows * stride));
    for (auto& x : w) {
      x = random_code<T>(rng);
      if (sparse_specials && (x.bits & 0x7FFF) >= (std::is_same_v<T, qtl::half_t> ? 0x7C00 : 0x7F80) && rng() % 8 != 0) {
        x.bits &= 0x83FF;  // keep a few Inf/NaN, make the rest finite
      }
      if (rng() % 5 == 0) {
        x.bits &= 0x8000;  // many ±0
      }
    }
    std::vector<float> mx_fast(static_cast<std::size_t>(cn)), mn_fast(mx_fast.size());
    REQUIRE(qnt::minmax_tile_dispatch(true, w.data(), stride, rows, cn, mx_fast.data(), mn_fast.data()));
    for (index_t j = 0; j < cn; ++j) {
      float mx = 0, mn = 0;
      qnt::x86::column_minmax(w.data() + j, stride, rows, mx, mn);
      float hi = qnt::load<T>(w[static_cast<std::size_t>(j)]);
      float lo = hi;
      for (index_t i = 1; i < rows; ++i) {  // the portable fold, written out
        float const x = qnt::load<T>(w[static_cast<std::size_t>(i * stride + j)]);
        hi = qnt::nan_max(hi, x);
        lo = qnt::nan_min(lo, x);
      }
      REQUIRE(std::bit_cast<std::uint32_t>(mx) == std::bit_cast<std::uint32_t>(hi));
      REQUIRE(std::bit_cast<std::uint32_t>(mn) == std::bit_cast<std::uint32_t>(lo));
      auto const same = [](float a, float b) {
        return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) || (a == 0 && b == 0);
      };
      INFO("column " << j << " of " << cn << ", " << rows << " rows");
      REQUIRE(same(mx_fast[static_cast<std::size_t>(j)], hi));
      REQUIRE(same(mn_fast[static_cast<std::size_t>(j)], lo));
      auto const bits = [](qnt::group_params p) {
        return std::pair{std::bit_cast<std::uint32_t>(p.s), std::bit_cast<std::uint32_t>(p.zp)};
      };
      float const fx = mx_fast[static_cast<std::size_t>(j)], fn = mn_fast[static_cast<std::size_t>(j)];
      REQUIRE(bits(qnt::symmetric_scale<T>(fx, fn, u4b8)) == bits(qnt::symmetric_scale<T>(hi, lo, u4b8)));
      REQUIRE(bits(qnt::asymmetric_scale<T>(fx, fn, u4)) == bits(qnt::asymmetric_scale<T>(hi, lo, u4)));
    }
  }
}

}  // namespace

TEST_CASE("x86 AVX2 pass 1 (max/min on 16-bit keys) gives the portable scales", "[quantize][x86]") {
#if defined(QTL_QUANTIZE_X86_DISPATCH)
  if (!qnt::x86::has_avx2_f16c()) {
    WARN("this CPU has no AVX2/F16C: the dispatched executor is not used here");
    return;
  }
  std::mt19937 rng(4);
  SECTION("fp16") { compare_minmax<qtl::half_t>(rng); }
  SECTION("bf16") { compare_minmax<qtl::bfloat16_t>(rng); }
#else
  WARN("no x86 dispatch in this build");
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^
}

TEST_CASE("x86 AVX2/F16C pass 2 equals the portable loops bit for bit", "[quantize][x86]") {
#if defined(QTL_QUANTIZE_X86_DISPATCH)
  if (!qnt::x86::has_avx2_f16c()) {
    WARN("this CPU has no AVX2/F16C: the dispatched executor is not used here");
    return;
  }
  std::mt19937 rng(3);
  SECTION("fp16") { compare_all<qtl::half_t>(rng); }
  SECTION("bf16") { compare_all<qtl::bfloat16_t>(rng); }
#else
  WARN("no x86 dispatch in this build");
#endif  // ^^^ QTL_QUANTIZE_X86_DISPATCH ^^^
}
