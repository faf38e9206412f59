// The run-time dispatched x86 executor of qtl/quantize.hpp (AVX2 + F16C) against the portable
// loops, bit for bit, on adversarial inputs: every kind of fp16/bf16 code as weight (NaN with
// payloads, ±Inf, subnormals, ±0), scales that are 0, subnormal, Inf or NaN, zero points across
// the code range, codes of ≤ 8 bits and wider ones, zero points applied before or after scales,
// and row lengths that leave a scalar tail. Skipped (with a warning) on CPUs without AVX2/F16C.
#include <qtl/quantize.hpp>

#include <catch2/catch.hpp>

#include "skip.hpp"

#include <bit>
#include <cstdint>
#include <utility>
#include <cstring>
#include <memory>
#include <random>
#include <vector>
#include "thin.hpp"

#if QTL_X86

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
                                                   0x7FFF, 0x0001, 0x83FF, 0x3800, 0xB800, 0x7BFF, 0x0400,
                                                   0xFC01, 0x8001};
  static constexpr std::uint16_t special_bf16[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81,
                                                   0x7FFF, 0x0001, 0x807F, 0x3F00, 0xBF00, 0x7F7F, 0x0080,
                                                   0xFF81, 0x8001};
  std::uint32_t const u = rng();
  if ((u & 3u) == 0) {
    auto const& sp = std::is_same_v<T, qtl::half_t> ? special_fp16 : special_bf16;
    return T{sp[(u >> 2) % 16]};
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
    qnt::x86::quantize_row_avx2<T, SmallCodes, After>(in.data(), sc.data(), zp.data(), cn, r, 0, q_fast.data(),
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
  for (int rep = 0; rep < qtl_test::rounds(300); ++rep) {
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
  for (int rep = 0; rep < qtl_test::rounds(200); ++rep) {
    // Mostly short tiles (64-column register blocks, then 16-column steps, then single columns);
    // some taller than 512 rows (the row walk).
    index_t const rows = rep % 20 == 0 ? 513 + static_cast<index_t>(rng() % 40) : 1 + static_cast<index_t>(rng() % 40);
    index_t const cn = 1 + static_cast<index_t>(rng() % 200);
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

/// Scales of a tile from hostile max/min pairs: the vector executor against `symmetric_scale` /
/// `asymmetric_scale`, bit for bit (floats kept and values stored), for signed and unsigned code
/// ranges and a range whose qmax is 0 (division by +Inf).
template <class T>
void compare_scales(std::mt19937& rng) {
  qtl::quant_range const ranges[] = {qtl::quant_range_of(qtl::uint4b8), qtl::quant_range_of(qtl::uint4),
                                     qtl::quant_range_of(qtl::uint8),   qtl::quant_range_of(qtl::int4),
                                     qtl::quant_range_of(qtl::int8),    qtl::quant_range{-1.0f, 0.0f, 1}};
  for (int rep = 0; rep < qtl_test::rounds(400); ++rep) {
    index_t const cn = 1 + static_cast<index_t>(rng() % 40);
    std::vector<float> mx(static_cast<std::size_t>(cn)), mn(mx.size());
    for (std::size_t j = 0; j < mx.size(); ++j) {
      float const a = qnt::load<T>(random_code<T>(rng));
      float const b = qnt::load<T>(random_code<T>(rng));
      bool const ordered = rng() % 4 != 0;  // mostly mx ≥ mn, as pass 1 leaves them
      mx[j] = ordered && b > a ? b : a;
      mn[j] = ordered && b > a ? a : b;
    }
    for (qtl::quant_range const& r : ranges) {
      for (bool const zero_points : {false, true}) {
        if (zero_points && (r.qmin < 0 || r.qmax <= 0)) {
          continue;  // zero points need an unsigned type with a positive max
        }
        std::vector<float> sc(mx.size(), -1.0f), zp(mx.size(), -1.0f);
        std::vector<T> s_out(mx.size(), T{0x1234});
        std::vector<std::int32_t> zp_out(mx.size(), -7);
        index_t const done = qnt::x86::scales_avx2<T>(mx.data(), mn.data(), cn, r, zero_points, sc.data(), zp.data(),
                                                      s_out.data(), zp_out.data());
        REQUIRE(done == cn / 8 * 8);
        for (index_t j = 0; j < done; ++j) {
          auto const u = static_cast<std::size_t>(j);
          qnt::group_params const p =
              zero_points ? qnt::asymmetric_scale<T>(mx[u], mn[u], r) : qnt::symmetric_scale<T>(mx[u], mn[u], r);
          INFO("column " << j << ": mx " << mx[u] << ", mn " << mn[u] << ", qmax " << r.qmax << ", zp " << zero_points);
          REQUIRE(std::bit_cast<std::uint32_t>(sc[u]) == std::bit_cast<std::uint32_t>(p.s));
          REQUIRE(std::bit_cast<std::uint32_t>(zp[u]) == std::bit_cast<std::uint32_t>(p.zp));
          REQUIRE(bits_of(s_out[u]) == bits_of(qnt::store<T>(p.s)));
          if (zero_points) {
            REQUIRE(zp_out[u] == static_cast<std::int32_t>(p.zp));
          }
        }
      }
    }
  }
}

/// A scale of a clean tile: finite and positive, from subnormal to the type's largest.
template <class T>
float random_clean_scale(std::mt19937& rng) {
  if (rng() % 2 == 0) {  // a typical scale
    return qnt::round_to<T>(0.001f * static_cast<float>(1 + rng() % 97));
  }
  for (;;) {  // any positive finite value of T
    float const s = qnt::load<T>(T{static_cast<std::uint16_t>(rng() & 0x7FFF)});
    if (s > 0.0f && s <= std::numeric_limits<float>::max()) {
      return s;
    }
  }
}

/// Pass 2 on clean tiles (every scale finite and positive, no NaN weight): the clean kernel, with
/// ordinary and non-temporal stores, against the portable loops; weights include ±Inf, ±0 and
/// subnormals, scales from subnormal to the largest finite. Tiles that are not clean (a NaN
/// maximum, a zero, Inf or NaN scale) must be detected as such.
template <class T, bool After>
void compare_clean_rows(qtl::quant_range r, bool zero_points, std::mt19937& rng) {
  for (index_t cn : {1, 8, 15, 16, 17, 40, 203}) {
    auto const n = static_cast<std::size_t>(cn);
    std::vector<T> in(n);
    std::vector<float> sc(n), zp(n), mx(n);
    for (std::size_t j = 0; j < n; ++j) {
      do {
        in[j] = random_code<T>(rng);
      } while (qnt::isnan(qnt::load<T>(in[j])));
      sc[j] = random_clean_scale<T>(rng);
      zp[j] = zero_points ? static_cast<float>(rng() % static_cast<std::uint32_t>(r.qmax + 1)) : 0.0f;
      mx[j] = qnt::load<T>(in[j]);
    }
    auto tile = std::make_unique<qnt::x86_tile>();
    qnt::prepare_x86_tile<T, true>(*tile, cn, r, sc.data(), zp.data(), mx.data(), 0);
    REQUIRE(tile->clean);
    std::vector<std::int32_t> q_ref(n);
    std::vector<T> w_ref(n);
    qnt::quantize_row<T, true, After>(in.data(), sc.data(), zp.data(), cn, r, 0, q_ref.data(), w_ref.data());
    for (int const variant : {0, 1, 2, 3}) {
      bool const stream = (variant & 1) != 0;
      tile->stream = stream;
      tile->avx512 = (variant & 2) != 0;  // the AVX-512 kernel, where this CPU has it
      if (tile->avx512 && !qnt::x86::has_avx512()) {
        continue;
      }
      // Outputs 16-byte aligned (the AVX2 kernel streams only then) or shifted by a few elements
      // (the AVX-512 kernel then starts streaming further into the row).
      alignas(64) std::int32_t q_buf[224];
      alignas(64) T w_buf[224];
      std::size_t const shift = rng() % 2 ? 0 : rng() % 16;
      std::int32_t* const q_fast = q_buf + shift;
      T* const w_fast = w_buf + shift;
      qnt::quantize_row_x86<T, true, After>(*tile, in.data(), sc.data(), zp.data(), cn, r, 0, q_fast, w_fast);
      for (std::size_t j = 0; j < n; ++j) {
        INFO("column " << j << " of " << cn << ": w bits " << bits_of(in[j]) << ", s " << sc[j] << ", zp " << zp[j]
                       << ", stream " << stream << ", avx512 " << tile->avx512
                       << ", shift " << shift);
        REQUIRE(q_fast[j] == q_ref[j]);
        REQUIRE(bits_of(w_fast[j]) == bits_of(w_ref[j]));
      }
    }
    // One bad column makes the tile unclean.
    std::size_t const bad = rng() % n;
    float const saved_s = sc[bad], saved_mx = mx[bad];
    for (int kind = 0; kind < 4; ++kind) {
      sc[bad] = kind == 0 ? 0.0f : kind == 1 ? std::numeric_limits<float>::infinity()
                                 : kind == 2 ? std::numeric_limits<float>::quiet_NaN()
                                             : saved_s;
      mx[bad] = kind == 3 ? std::numeric_limits<float>::quiet_NaN() : saved_mx;
      qnt::prepare_x86_tile<T, true>(*tile, cn, r, sc.data(), zp.data(), mx.data(), 0);
      REQUIRE_FALSE(tile->clean);
    }
    sc[bad] = saved_s;
    mx[bad] = saved_mx;
  }
}

template <class T>
void compare_clean_all(std::mt19937& rng) {
  qtl::quant_range const u4 = qtl::quant_range_of(qtl::uint4);
  qtl::quant_range const u4b8 = qtl::quant_range_of(qtl::uint4b8);
  qtl::quant_range const u8 = qtl::quant_range_of(qtl::uint8);
  qtl::quant_range const i8 = qtl::quant_range_of(qtl::int8);
  for (int rep = 0; rep < qtl_test::rounds(300); ++rep) {
    compare_clean_rows<T, false>(u4b8, false, rng);
    compare_clean_rows<T, false>(i8, false, rng);
    compare_clean_rows<T, false>(u4, true, rng);
    compare_clean_rows<T, true>(u4, true, rng);
    compare_clean_rows<T, false>(u8, true, rng);
    compare_clean_rows<T, true>(u8, true, rng);
  }
}

/// The whole grouped executor (tiles, prefetching, clean and general tiles, non-temporal stores
/// for large outputs) against the element functions applied group by group, written out here.
template <class T, int G>
void compare_executor(index_t k, index_t n, bool zero_points, bool after, std::mt19937& rng) {
  constexpr qtl::scalar_type q_type = qtl::uint4;
  constexpr qtl::scalar_type q_sym = qtl::uint4b8;
  qtl::quant_range const r = qtl::quant_range_of(zero_points ? q_type : q_sym);
  std::vector<T> w(static_cast<std::size_t>(k * n));
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (auto& x : w) {
    x = qtl::from_float<T>(dist(rng));
  }
  for (int i = 0; i < 40; ++i) {  // a few hostile weights and all-zero columns
    std::size_t const at = rng() % w.size();
    w[at] = random_code<T>(rng);
    index_t const col = static_cast<index_t>(rng() % static_cast<std::uint32_t>(n));
    for (index_t row = 0; row < k; ++row) {
      w[static_cast<std::size_t>(row * n + col)] = T{0};
    }
  }
  index_t const gs = G == qtl::group_channelwise ? k : G;
  qtl::quantize_options opt;
  opt.zero_points = zero_points;
  opt.ref_zero_points_after_scales = after;
  auto const res = zero_points ? qtl::quantize_weights<q_type, G>(qtl::make_view(w.data(), k, n), opt)
                               : qtl::quantize_weights<q_sym, G>(qtl::make_view(w.data(), k, n), opt);
  for (index_t g = 0; g < k / gs; ++g) {
    for (index_t j = 0; j < n; ++j) {
      float mx = 0, mn = 0;
      qnt::x86::column_minmax(w.data() + g * gs * n + j, n, gs, mx, mn);
      qnt::group_params const p =
          zero_points ? qnt::asymmetric_scale<T>(mx, mn, r) : qnt::symmetric_scale<T>(mx, mn, r);
      INFO("group " << g << ", column " << j);
      REQUIRE(bits_of(res.w_s.data()[g * n + j]) == bits_of(qnt::store<T>(p.s)));
      for (index_t i = g * gs; i < g * gs + gs; ++i) {
        float const q = qnt::quantize_code<T>(qnt::load<T>(w[static_cast<std::size_t>(i * n + j)]), p, r);
        T const ref = qnt::store<T>(qnt::dequantize_code<T, true>(q, p, zero_points && after, 0));
        REQUIRE(res.w_q.data()[i * n + j] == static_cast<std::int32_t>(q) + r.bias);
        REQUIRE(bits_of(res.w_ref.data()[i * n + j]) == bits_of(ref));
      }
    }
  }
}

}  // namespace

TEST_CASE("x86 AVX2 scales equal the element functions bit for bit", "[quantize][x86]") {
#if QTL_X86
  if (!qnt::x86::has_avx2_f16c()) {
    return qtl_test::skip("this CPU has no AVX2/F16C: the AVX2 executor cannot run");
  }
  std::mt19937 rng(5);
  SECTION("fp16") { compare_scales<qtl::half_t>(rng); }
  SECTION("bf16") { compare_scales<qtl::bfloat16_t>(rng); }
#else
  qtl_test::skip("no x86 executors in this build");
#endif  // ^^^ QTL_X86 ^^^
}

TEST_CASE("x86 AVX2 pass 2 on clean tiles equals the portable loops bit for bit", "[quantize][x86]") {
#if QTL_X86
  if (!qnt::x86::has_avx2_f16c()) {
    return qtl_test::skip("this CPU has no AVX2/F16C: the AVX2 executor cannot run");
  }
  std::mt19937 rng(6);
  SECTION("fp16") { compare_clean_all<qtl::half_t>(rng); }
  SECTION("bf16") { compare_clean_all<qtl::bfloat16_t>(rng); }
#else
  qtl_test::skip("no x86 executors in this build");
#endif  // ^^^ QTL_X86 ^^^
}

TEST_CASE("the grouped executor equals the element functions group by group", "[quantize][x86]") {
  std::mt19937 rng(7);
  SECTION("fp16, group 128, tiles and a tail") {
    compare_executor<qtl::half_t, 128>(256, 1100, false, false, rng);
    compare_executor<qtl::half_t, 128>(256, 1100, true, false, rng);
    compare_executor<qtl::half_t, 128>(256, 1100, true, true, rng);
  }
  SECTION("bf16, group 32 and channelwise") {
    compare_executor<qtl::bfloat16_t, 32>(96, 530, true, false, rng);
    compare_executor<qtl::bfloat16_t, qtl::group_channelwise>(600, 77, false, false, rng);
  }
  SECTION("fp16, outputs large enough for non-temporal stores") {
    index_t const k = 2048, n = 5504;
    REQUIRE(static_cast<std::size_t>(k * n) * 6 >= qnt::stream_output_bytes);
    compare_executor<qtl::half_t, 128>(k, n, false, false, rng);
  }
}

TEST_CASE("x86 AVX2 pass 1 (max/min on 16-bit keys) gives the portable scales", "[quantize][x86]") {
#if QTL_X86
  if (!qnt::x86::has_avx2_f16c()) {
    return qtl_test::skip("this CPU has no AVX2/F16C: the AVX2 executor cannot run");
  }
  std::mt19937 rng(4);
  SECTION("fp16") { compare_minmax<qtl::half_t>(rng); }
  SECTION("bf16") { compare_minmax<qtl::bfloat16_t>(rng); }
#else
  qtl_test::skip("no x86 executors in this build");
#endif  // ^^^ QTL_X86 ^^^
}

TEST_CASE("x86 AVX2/F16C pass 2 equals the portable loops bit for bit", "[quantize][x86]") {
#if QTL_X86
  if (!qnt::x86::has_avx2_f16c()) {
    return qtl_test::skip("this CPU has no AVX2/F16C: the AVX2 executor cannot run");
  }
  std::mt19937 rng(3);
  SECTION("fp16") { compare_all<qtl::half_t>(rng); }
  SECTION("bf16") { compare_all<qtl::bfloat16_t>(rng); }
#else
  qtl_test::skip("no x86 executors in this build");
#endif  // ^^^ QTL_X86 ^^^
}

#else

TEST_CASE("x86 executor of quantize", "[quantize][x86]") { qtl_test::skip("QTL_X86 is 0 in this build: no executor to compare"); }

#endif  // ^^^ QTL_X86 ^^^
