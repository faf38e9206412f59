// qtl/convert.hpp: the worked examples of docs/spec/converters.md §6 (E1-E7), the properties of
// its §5 (requant fixed point after two passes, lossless on power-of-two scales, per-expert 3-D,
// the layout round trip), NaN/Inf/zero blocks, amax just above and below a power of two, the
// FP8-block -> NVFP4 definition (global scale shared, one block row at a time) and the size checks.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include <qtl/convert.hpp>

namespace cv = qtl::convert;
using qtl::bits_to_float;
using qtl::float_to_bits;

namespace {

constexpr std::uint32_t bits_of(float x) { return float_to_bits(x); }
constexpr float from_bits(std::uint32_t b) { return bits_to_float(b); }

// E1: the two power-of-two rules (input bits -> result bits).
static_assert(bits_of(cv::ceil_pow2_bits(from_bits(0x3b000000))) == 0x3b000000);
static_assert(bits_of(cv::ceil_pow2_bits(from_bits(0x3b000001))) == 0x3b800000);
static_assert(bits_of(cv::ceil_pow2_bits(from_bits(0x3b000003))) == 0x3b800000);
static_assert(bits_of(cv::ceil_pow2_bits(from_bits(0x346facad))) == 0x34800000);
static_assert(bits_of(cv::ceil_pow2_bits(from_bits(0x3c4985f0))) == 0x3c800000);
static_assert(bits_of(cv::ceil_pow2_bits(0.0f)) == 0x00800000);
static_assert(bits_of(cv::ceil_pow2_bits(from_bits(0x00000001))) == 0x00800000);
static_assert(bits_of(cv::ceil_pow2_bits(from_bits(0x7f800000))) == 0x7f000000);
static_assert(bits_of(cv::ceil_pow2_bits(from_bits(0x7fc00000))) == 0x7f000000);
static_assert(bits_of(cv::ceil_pow2_log2(from_bits(0x3b000000))) == 0x3b000000);
static_assert(bits_of(cv::ceil_pow2_log2(from_bits(0x3b000001))) == 0x3b000000);  // the trap band
static_assert(bits_of(cv::ceil_pow2_log2(from_bits(0x3b000002))) == 0x3b000000);
static_assert(bits_of(cv::ceil_pow2_log2(from_bits(0x3b000003))) == 0x3b800000);
static_assert(bits_of(cv::ceil_pow2_log2(from_bits(0x346facad))) == 0x34800000);
static_assert(bits_of(cv::ceil_pow2_log2(from_bits(0x3c4985f0))) == 0x3c800000);
static_assert(bits_of(cv::ceil_pow2_log2(0.0f)) == 0x00000000);
static_assert(bits_of(cv::ceil_pow2_log2(from_bits(0x00000001))) == 0x00000001);
static_assert(bits_of(cv::ceil_pow2_log2(from_bits(0x7f800000))) == 0x7f800000);
static_assert(bits_of(cv::ceil_pow2_log2(from_bits(0x7fc00000))) == 0x7fc00000);

// E4's packed words as index maps: N = 130, kb = 5 -> P = 2, A = 132.
constexpr cv::dg_packed_layout e4{1, 130, 5};
static_assert(e4.aligned_mn() == 132 && e4.packed_k() == 2 && e4.scale_rows() == 2);
static_assert(e4.word(0, 0, 129) == 129 && e4.word(0, 1, 0) == 132 && e4.word(0, 1, 131) == 263);
static_assert(cv::ue8m0_decode(0) == 0.0f && cv::ue8m0_decode(127) == 1.0f);
static_assert(bits_of(cv::ue8m0_decode(255)) == 0x7f800000u);
static_assert(cv::is_ue8m0_packable(1.0f) && !cv::is_ue8m0_packable(3.0f) && !cv::is_ue8m0_packable(-1.0f) &&
              !cv::is_ue8m0_packable(0.0f) && !cv::is_ue8m0_packable(from_bits(0x7f800000)));

float log2_rule_reference(float x) {
  float const l = static_cast<float>(std::log2(static_cast<double>(std::fabs(x))));
  return std::pow(2.0f, std::ceil(l));
}

std::uint8_t e4m3(float v) { return qtl::float_to_e4m3fn(v); }

/// One [N,K] FP8 block weight: codes and scales.
struct block_weight {
  std::int64_t n, k;
  std::vector<std::uint8_t> q;
  std::vector<float> s;
};

block_weight random_weight(std::int64_t n, std::int64_t k, std::uint32_t seed, bool pow2_scales) {
  std::mt19937 rng(seed);
  block_weight w{n, k, std::vector<std::uint8_t>(static_cast<std::size_t>(n * k)),
                 std::vector<float>(static_cast<std::size_t>(((n + 127) / 128) * ((k + 127) / 128)))};
  for (auto& c : w.q) {
    do {
      c = static_cast<std::uint8_t>(rng() & 0xFF);
    } while ((c & 0x7F) == 0x7F);
  }
  std::uniform_real_distribution<float> e(-14.0f, -2.0f);
  for (auto& v : w.s) {
    v = pow2_scales ? std::exp2(std::floor(e(rng))) : std::exp2(e(rng));
  }
  return w;
}

template <class R>
block_weight requant(block_weight const& in, std::int64_t groups = 1) {
  block_weight out{in.n, in.k, std::vector<std::uint8_t>(in.q.size()), std::vector<float>(in.s.size())};
  cv::requant_weight_ue8m0<R>(in.q, in.s, groups, in.n / groups, in.k, out.q, out.s);
  return out;
}

std::vector<float> dequant(block_weight const& w) {
  std::vector<float> out(w.q.size());
  cv::block_quant_dequant<float>(w.q, w.s, cv::block_grid{1, w.n, w.k, {128, 128}}, out);
  return out;
}

/// The E2 block: q[0,0..2] = 448, 1.5, -0.75 and q[5,7] = 2^-9, all else 0, scale `s`.
block_weight e2_block(std::uint32_t s_bits) {
  block_weight w{128, 128, std::vector<std::uint8_t>(128 * 128, 0), {from_bits(s_bits)}};
  w.q[0] = 0x7e;
  w.q[1] = 0x3c;
  w.q[2] = 0xb4;
  w.q[5 * 128 + 7] = 0x01;
  return w;
}

void check_e2(block_weight const& r, std::uint32_t sf_bits, std::uint8_t a, std::uint8_t b, std::uint8_t c) {
  CHECK(bits_of(r.s[0]) == sf_bits);
  CHECK(r.q[0] == a);
  CHECK(r.q[1] == b);
  CHECK(r.q[2] == c);
  CHECK(r.q[5 * 128 + 7] == 0x01);
  std::size_t nonzero = 0;
  for (auto c8 : r.q) nonzero += c8 != 0;
  CHECK(nonzero == 4);
}

}  // namespace

TEST_CASE("convert: the log2 rule from the bits equals 2^ceil of a correctly rounded log2f", "[convert]") {
  std::mt19937 rng(7);
  for (int biased = 0; biased <= 254; ++biased) {
    for (std::uint32_t m = 1; m < 40; ++m) {
      float const x = from_bits(static_cast<std::uint32_t>(biased) << 23 | m);
      INFO("x bits " << std::hex << bits_of(x));
      CHECK(bits_of(cv::ceil_pow2_log2(x)) == bits_of(log2_rule_reference(x)));
    }
    for (int i = 0; i < 64; ++i) {
      float const x = from_bits(static_cast<std::uint32_t>(biased) << 23 | (rng() & 0x7FFFFF));
      if (bits_of(x) == 0) continue;
      INFO("x bits " << std::hex << bits_of(x));
      CHECK(bits_of(cv::ceil_pow2_log2(x)) == bits_of(log2_rule_reference(x)));
    }
  }
  // the per-binade trap thresholds of docs/spec/converters.md §1.3: k = -16 -> m0 = 3, k = -8 -> 2, k = -20 -> 6
  CHECK(cv::ceil_pow2_log2(std::ldexp(1.0f + 2 * 0x1p-23f, -16)) == std::ldexp(1.0f, -16));
  CHECK(cv::ceil_pow2_log2(std::ldexp(1.0f + 3 * 0x1p-23f, -16)) == std::ldexp(1.0f, -15));
  CHECK(cv::ceil_pow2_log2(std::ldexp(1.0f + 1 * 0x1p-23f, -8)) == std::ldexp(1.0f, -8));
  CHECK(cv::ceil_pow2_log2(std::ldexp(1.0f + 2 * 0x1p-23f, -8)) == std::ldexp(1.0f, -7));
  CHECK(cv::ceil_pow2_log2(std::ldexp(1.0f + 5 * 0x1p-23f, -20)) == std::ldexp(1.0f, -20));
  CHECK(cv::ceil_pow2_log2(std::ldexp(1.0f + 6 * 0x1p-23f, -20)) == std::ldexp(1.0f, -19));
}

TEST_CASE("convert: E2 and E2b, one block where the recipes differ", "[convert]") {
  // E2: s = 2^-9 (1 + 2^-12); fl(448 s) = 0.8752..., bf16 0.875
  check_e2(requant<cv::recipe::sglang>(e2_block(0x3b000800)), 0x3b000000, 0x7e, 0x3c, 0xb4);
  check_e2(requant<cv::recipe::vllm>(e2_block(0x3b000800)), 0x3b800000, 0x76, 0x34, 0xac);
  // E2b: s = 2^-9 (1 + 2^-23): vLLM's log2 trap keeps 2^-9; f32 dequant with the bits rule would not
  check_e2(requant<cv::recipe::sglang>(e2_block(0x3b000001)), 0x3b000000, 0x7e, 0x3c, 0xb4);
  check_e2(requant<cv::recipe::vllm>(e2_block(0x3b000001)), 0x3b000000, 0x7e, 0x3c, 0xb4);
  using hybrid = cv::requant_recipe<cv::dequant_precision::f32, cv::pow2_rule::bits>;
  check_e2(requant<hybrid>(e2_block(0x3b000001)), 0x3b800000, 0x76, 0x34, 0xac);
}

TEST_CASE("convert: E3, double rounding of the bf16 dequant", "[convert]") {
  block_weight w{128, 128, std::vector<std::uint8_t>(128 * 128, 0), {from_bits(0x3ca7cb92)}};
  std::size_t i = 0;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) != 0x7F) w.q[i++] = static_cast<std::uint8_t>(c);
  }
  auto const sg = requant<cv::recipe::sglang>(w);
  auto const vl = requant<cv::recipe::vllm>(w);
  CHECK(sg.s[0] == 0x1p-5f);
  CHECK(vl.s[0] == 0x1p-5f);
  auto const at = [&](std::uint8_t code) {
    for (std::size_t j = 0; j < 254; ++j)
      if (w.q[j] == code) return j;
    return std::size_t{0};
  };
  CHECK(sg.q[at(0x0d)] == 0x08);
  CHECK(vl.q[at(0x0d)] == 0x09);
  CHECK(sg.q[at(0x15)] == 0x10);
  CHECK(vl.q[at(0x15)] == 0x11);
  CHECK(sg.q[at(0x3d)] == 0x38);
  CHECK(vl.q[at(0x3d)] == 0x39);
  int differ = 0;
  for (std::size_t j = 0; j < 254; ++j) differ += sg.q[j] != vl.q[j];
  CHECK(differ == 30);
}

TEST_CASE("convert: E4, the DeepGEMM packed layout and its inverse", "[convert]") {
  // N = 130, K = 640: scales 2^-(3+i+j)
  std::vector<float> sf(2 * 5);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j) sf[static_cast<std::size_t>(i * 5 + j)] = std::ldexp(1.0f, -(3 + i + j));
  auto const l = cv::deepgemm_layout(1, 130, 5);
  std::vector<std::int32_t> w(static_cast<std::size_t>(l.words()), -1);
  cv::deepgemm_pack_ue8m0(sf, l, w);
  CHECK(static_cast<std::uint32_t>(w[0]) == 0x797a7b7cu);
  CHECK(static_cast<std::uint32_t>(w[127]) == 0x797a7b7cu);
  CHECK(static_cast<std::uint32_t>(w[128]) == 0x78797a7bu);
  CHECK(static_cast<std::uint32_t>(w[129]) == 0x78797a7bu);
  CHECK(w[132] == 0x78);
  CHECK(w[261] == 0x77);
  CHECK(w[130] == 0);
  CHECK(w[263] == 0);
  // the inverse, any N: [ceil(132/128), kb]
  std::vector<float> back(2 * 5);
  cv::deepgemm_unpack_ue8m0(w, 1, 2, 132, 5, back);
  CHECK(back == sf);
  // round trip over random shapes (property 4), experts included
  std::mt19937 rng(3);
  for (int t = 0; t < 50; ++t) {
    std::int64_t const g = 1 + rng() % 3, n = 1 + rng() % 700, kb = 1 + rng() % 11;
    auto const lt = cv::deepgemm_layout(g, n, kb);
    std::vector<float> s(static_cast<std::size_t>(g * lt.scale_rows() * kb));
    for (auto& v : s) v = std::ldexp(1.0f, static_cast<int>(rng() % 250) - 125);
    std::vector<std::int32_t> p(static_cast<std::size_t>(lt.words()));
    cv::deepgemm_pack_ue8m0(s, lt, p);
    std::int64_t const rows = (lt.aligned_mn() + 127) / 128;
    std::vector<float> u(static_cast<std::size_t>(g * rows * kb));
    cv::deepgemm_unpack_ue8m0(p, g, lt.packed_k(), lt.aligned_mn(), kb, u);
    for (std::int64_t gi = 0; gi < g; ++gi)
      for (std::int64_t i = 0; i < lt.scale_rows(); ++i)
        for (std::int64_t j = 0; j < kb; ++j)
          CHECK(u[static_cast<std::size_t>((gi * rows + i) * kb + j)] ==
                s[static_cast<std::size_t>((gi * lt.scale_rows() + i) * kb + j)]);
    for (std::int64_t gi = 0; gi < g; ++gi)  // pad rows are zero
      for (std::int64_t pi = 0; pi < lt.packed_k(); ++pi)
        for (std::int64_t nn = n; nn < lt.aligned_mn(); ++nn)
          CHECK(p[static_cast<std::size_t>(lt.word(gi, pi, nn))] == 0);
  }
}

TEST_CASE("convert: the packer refuses scales that are not positive normal powers of two", "[convert]") {
  auto const l = cv::deepgemm_layout(1, 128, 2);
  std::vector<std::int32_t> w(static_cast<std::size_t>(l.words()));
  for (float bad : {3.0f, -1.0f, 0.0f, INFINITY, NAN, from_bits(0x00400000)}) {
    std::vector<float> s{1.0f, bad};
    CHECK_THROWS_AS(cv::deepgemm_pack_ue8m0(s, l, w), qtl::value_error);
  }
  std::vector<float> s3{1.0f, 1.0f, 1.0f};
  CHECK_THROWS_AS(cv::deepgemm_pack_ue8m0(s3, l, w), qtl::shape_error);
  std::vector<float> out(2);
  CHECK_THROWS_AS(cv::deepgemm_unpack_ue8m0(w, 1, 1, 128, 5, out), qtl::shape_error);  // kb > 4P
}

TEST_CASE("convert: E6, FP8 block to MXFP4 as sglang does it", "[convert]") {
  float const row[12] = {6, 0.75f, 1.75f, 3.5f, 0, -0.0f, -0.25f, 0.3125f, 2.5f, 5, -6, 1.25f};
  std::vector<std::uint8_t> q(32, e4m3(0.5f));
  for (int i = 0; i < 12; ++i) q[static_cast<std::size_t>(i)] = e4m3(row[i]);
  std::vector<float> s{1.0f};
  cv::block_grid const g{1, 1, 32, {128, 128}};
  std::vector<std::uint8_t> packed(16), scale(1);
  cv::fp8_block_to_mxfp4(q, s, g, packed, scale);
  CHECK(scale[0] == 127);
  std::uint8_t const want[6] = {0x17, 0x53, 0x88, 0x18, 0x64, 0x2f};
  for (int i = 0; i < 6; ++i) CHECK(packed[static_cast<std::size_t>(i)] == want[i]);

  std::vector<std::uint8_t> q7(32, 0);
  q7[0] = e4m3(7.0f);
  cv::fp8_block_to_mxfp4(q7, s, g, packed, scale);
  CHECK(scale[0] == 128);
  CHECK((packed[0] & 0xF) == 0x5);  // 3.5 ties down to 3
  CHECK((packed[0] >> 4) == 0x8);   // every zero is 0x8
  // the bf16-log2 trap: log2f(bf(amax/6)) = -9.98877 rounds to -10 in bf16
  CHECK(cv::mxfp4_exponent(0.00592041015625f) == -10);
  CHECK(cv::mxfp4_exponent(0.0f) == -127);
}

TEST_CASE("convert: requant reaches its fixed point after two passes, values kept (§5.1-5.3)", "[convert]") {
  auto const props = []<class R>(std::type_identity<R>) {
    for (std::uint32_t seed = 1; seed <= 4; ++seed) {
      auto const x = random_weight(256, 384, seed, false);
      auto const r1 = requant<R>(x);
      auto const r2 = requant<R>(r1);
      auto const r3 = requant<R>(r2);
      CHECK(r3.q == r2.q);
      CHECK(r3.s == r2.s);
      CHECK(dequant(r2) == dequant(r1));
      for (float v : r1.s) CHECK(cv::is_ue8m0_packable(v));
      // max|q| of every block is in [224, 448]; where r2 differs from r1 it is 224 and sf halves
      for (std::int64_t bi = 0; bi < 2; ++bi)
        for (std::int64_t bj = 0; bj < 3; ++bj) {
          float m = 0;
          for (std::int64_t n = bi * 128; n < bi * 128 + 128; ++n)
            for (std::int64_t k = bj * 128; k < bj * 128 + 128; ++k)
              m = std::max(m, std::fabs(qtl::e4m3fn_to_float(r1.q[static_cast<std::size_t>(n * 384 + k)])));
          CHECK(m >= 224.0f);
          CHECK(m <= 448.0f);
          auto const si = static_cast<std::size_t>(bi * 3 + bj);
          if (r2.s[si] != r1.s[si]) {
            CHECK(m == 224.0f);
            CHECK(r2.s[si] == r1.s[si] / 2);
          }
        }
      // canonical = two passes
      block_weight c{x.n, x.k, std::vector<std::uint8_t>(x.q.size()), std::vector<float>(x.s.size())};
      cv::requant_weight_ue8m0_canonical<R>(x.q, x.s, 1, x.n, x.k, c.q, c.s);
      CHECK(c.q == r2.q);
      CHECK(c.s == r2.s);
      // power-of-two input scales: lossless
      auto const p = random_weight(256, 384, seed + 100, true);
      CHECK(dequant(requant<R>(p)) == dequant(p));
    }
  };
  props(std::type_identity<cv::recipe::sglang>{});
  props(std::type_identity<cv::recipe::vllm>{});
}

TEST_CASE("convert: 3-D requant equals per-expert requant (§5.6)", "[convert]") {
  auto const a = random_weight(130, 200, 11, false);
  auto const b = random_weight(130, 200, 12, false);
  block_weight stacked{260, 200, a.q, a.s};
  stacked.q.insert(stacked.q.end(), b.q.begin(), b.q.end());
  stacked.s.insert(stacked.s.end(), b.s.begin(), b.s.end());
  auto const r = requant<cv::recipe::sglang>(stacked, 2);
  auto const ra = requant<cv::recipe::sglang>(a);
  auto const rb = requant<cv::recipe::sglang>(b);
  CHECK(std::vector<std::uint8_t>(r.q.begin(), r.q.begin() + 130 * 200) == ra.q);
  CHECK(std::vector<std::uint8_t>(r.q.begin() + 130 * 200, r.q.end()) == rb.q);
  CHECK(std::vector<float>(r.s.begin(), r.s.begin() + 4) == ra.s);
  CHECK(std::vector<float>(r.s.begin() + 4, r.s.end()) == rb.s);
}

TEST_CASE("convert: zero, Inf and NaN blocks in the per-block cast and the sglang requant", "[convert]") {
  cv::block_grid const g{1, 4, 4, {4, 4}};
  std::vector<std::uint8_t> q(16);
  std::vector<float> s(1);
  std::vector<float> zero(16, 0.0f);
  cv::per_block_cast_to_fp8<cv::pow2_rule::bits>(zero, g, q, s);
  CHECK(s[0] == 0x1p-22f);  // ceil(f32(1e-4)/448) = 2^-22 (E1)
  for (auto c : q) CHECK(c == 0);
  cv::per_block_cast_to_fp8<cv::pow2_rule::none>(zero, g, q, s);
  CHECK(s[0] == 1e-4f / 448.0f);

  std::vector<float> x(16, 1.0f);
  x[0] = INFINITY;
  x[1] = -INFINITY;
  x[2] = NAN;
  x[3] = -1.0f;
  cv::per_block_cast_to_fp8<cv::pow2_rule::bits>(x, g, q, s);
  CHECK(s[0] == 0x1p127f);
  CHECK(q[0] == 0x7F);
  CHECK(q[1] == 0xFF);
  CHECK(q[2] == 0x7F);
  CHECK(q[3] == 0x80);
  CHECK(q[4] == 0x00);

  // sglang requant of a block with a NaN code: bf16 NaN is positive, the block gets 2^127
  block_weight w{128, 128, std::vector<std::uint8_t>(128 * 128, 0x38), {1.0f}};
  w.q[10] = 0xFF;
  w.q[11] = 0xB8;
  auto const r = requant<cv::recipe::sglang>(w);
  CHECK(r.s[0] == 0x1p127f);
  CHECK(r.q[10] == 0x7F);
  CHECK(r.q[11] == 0x80);
  CHECK(r.q[0] == 0x00);
}

TEST_CASE("convert: amax just below, at and just above a power of two times 448", "[convert]") {
  cv::block_grid const g{1, 1, 2, {1, 2}};
  std::vector<std::uint8_t> q(2);
  std::vector<float> s(1);
  float const at = 448.0f * 0x1p-9f;
  auto const cast = [&](cv::pow2_rule rule, float amax) {
    std::vector<float> x{amax, 0x1p-9f};
    cv::per_block_cast_to_fp8(rule, x, g, q, s);
  };
  for (auto rule : {cv::pow2_rule::bits, cv::pow2_rule::log2}) {
    cast(rule, at);
    CHECK(s[0] == 0x1p-9f);
    CHECK(q[0] == 0x7E);
    cast(rule, std::nextafter(at, 0.0f));
    CHECK(s[0] == 0x1p-9f);
    CHECK(q[0] == 0x7E);  // 447.99997 rounds to 448
  }
  float const above = std::nextafter(at, 1.0f);  // fl(amax/448) = 2^-9 (1 + 2^-23)
  cast(cv::pow2_rule::bits, above);
  CHECK(s[0] == 0x1p-8f);
  CHECK(q[0] == 0x76);  // 224
  cast(cv::pow2_rule::log2, above);
  CHECK(s[0] == 0x1p-9f);  // the log2 trap band: a scale below amax/448, still no NaN
  CHECK(q[0] == 0x7E);
}

TEST_CASE("convert: size checks name what is wrong", "[convert]") {
  std::vector<std::uint8_t> q(128 * 256), qo(q.size());
  std::vector<float> s(1), so(1), out(q.size());
  CHECK_THROWS_AS(cv::block_quant_dequant<float>(q, s, cv::block_grid{1, 128, 256, {128, 128}}, out), qtl::shape_error);
  CHECK_THROWS_AS((cv::requant_weight_ue8m0<cv::recipe::vllm>(q, s, 1, 128, 256, qo, so)), qtl::shape_error);
  std::vector<std::uint8_t> p(q.size() / 2), sc(q.size() / 32);
  std::vector<float> s2(2);
  CHECK_THROWS_AS(cv::fp8_block_to_mxfp4(q, s2, cv::block_grid{1, 128, 256, {128, 128}}, p, p), qtl::shape_error);
  CHECK_NOTHROW(cv::fp8_block_to_mxfp4(q, s2, cv::block_grid{1, 128, 256, {128, 128}}, p, sc));
  try {
    cv::block_quant_dequant<float>(q, s, cv::block_grid{1, 128, 256, {128, 128}}, out);
  } catch (qtl::shape_error const& e) {
    CHECK(std::string(e.what()).find("1 x 2") != std::string::npos);
  }
}

TEST_CASE("convert: E5, input_to_float8 returns fl(1/fl(448/amax)), not amax/448", "[convert]") {
  std::vector<float> const x{from_bits(0x410b375bu), -1.0f, 0.5f};
  CHECK(x[0] == 8.701014518737793f);
  std::vector<std::uint8_t> q(3);
  float const scale_inv = cv::input_to_float8(x, q);
  CHECK(bits_of(scale_inv) == 0x3c9f1ab2u);
  CHECK(bits_of(qtl::detail::div_rn(x[0], 448.0f)) == 0x3c9f1ab1u);  // amax/448: one ulp below
  CHECK(q[0] == 0x7e);
  CHECK(q[1] == 0xe5);
  CHECK(q[2] == 0x5d);
  // the block form: dequant in f32, then the same per-tensor quant
  std::vector<std::uint8_t> codes{e4m3(1.0f), e4m3(-0.5f), e4m3(0.25f), 0x00};
  std::vector<float> const s{2.0f};
  std::vector<std::uint8_t> out(4);
  float const si = cv::fp8_block_to_fp8_tensor(codes, s, cv::block_grid{1, 2, 2, {128, 128}}, out);
  CHECK(si == qtl::detail::div_rn(1.0f, qtl::detail::div_rn(448.0f, 2.0f)));
  CHECK(out[0] == 0x7e);  // 2 * 224 = 448
  CHECK(out[3] == 0x00);
  std::vector<float> bad{1.0f, std::nanf("")};
  std::vector<std::uint8_t> q2(2);
  CHECK_THROWS_AS(cv::input_to_float8(bad, q2), qtl::value_error);
}

TEST_CASE("convert: E7, FP8 block to NVFP4 (bf16 dequant, gs = fl(1/fl(amax/2688)))", "[convert]") {
  // one row of 48 = 3 NVFP4 blocks, FP8 block scale 0.01
  float const b0[16] = {0.5f, -1, 0.25f, 3, 0.125f, -0.0625f, 2, 1.5f, 0, 0.75f, -3, 1, 0.375f, -2.5f, 0.1875f, 0.875f};
  std::vector<std::uint8_t> q(48, 0);
  for (int i = 0; i < 16; ++i) q[static_cast<std::size_t>(i)] = e4m3(b0[i]);
  q[32] = e4m3(0.01171875f);
  q[33] = e4m3(-0.0078125f);
  for (int i = 34; i < 48; ++i) q[static_cast<std::size_t>(i)] = e4m3(0.001953125f);
  std::vector<float> const s{0.01f};
  cv::block_grid const g{1, 1, 48, {128, 128}};
  float const amax = cv::fp8_block_bf16_amax(q, s, g);
  CHECK(amax == 0.030029296875f);
  float const gs = cv::nvfp4_shared_global_scale(amax);
  CHECK(bits_of(qtl::detail::div_rn(amax, 2688.0f)) == 0x373b6db7u);
  CHECK(bits_of(gs) == 0x47aed44bu);
  std::vector<qtl::float4_e2m1x2_t> packed(24);
  std::vector<qtl::float8_e4m3fn_t> sf(3);
  cv::fp8_block_to_nvfp4(q, s, g, gs, packed, sf);
  CHECK(sf[0].bits == 0x7e);
  CHECK(sf[1].bits == 0x00);  // the IEEE/flashinfer shape: a zero block's scale is 0 (torchao: 0x08)
  CHECK(sf[2].bits == 0x3e);
  std::uint8_t const want[24] = {0xc2, 0x71, 0x80, 0x56, 0x30, 0x4f, 0xe2, 0x31, 0,    0,    0,    0,
                                 0,    0,    0,    0,    0xe7, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22};
  for (int i = 0; i < 24; ++i) CHECK(packed[static_cast<std::size_t>(i)].bits == want[i]);
}

TEST_CASE("convert: FP8 block to NVFP4 equals block_quant_dequant then block_quantize, by block rows", "[convert]") {
  std::mt19937 rng(5);
  std::int64_t const n = 300, k = 96;  // three block rows, the last partial; K in one partial block column
  cv::block_grid const g{2, n, k, {128, 128}};
  std::vector<std::uint8_t> q(static_cast<std::size_t>(g.elements()));
  for (auto& c : q) {
    c = static_cast<std::uint8_t>(rng() & 0xFF);
    if ((c & 0x7F) == 0x7F) c = 0x01;
  }
  std::vector<float> s(static_cast<std::size_t>(g.scales()));
  std::uniform_real_distribution<float> u(-12, -4);
  for (auto& x : s) x = std::exp2(u(rng));
  float const amax = cv::fp8_block_bf16_amax(q, s, g);
  std::vector<qtl::bfloat16_t> bf(q.size());
  cv::block_quant_dequant<qtl::bfloat16_t>(q, s, g, bf);
  float want_amax = 0;
  for (auto v : bf) want_amax = std::max(want_amax, std::fabs(qtl::bf16_to_float(v.bits)));
  CHECK(amax == want_amax);
  float const gs = cv::nvfp4_shared_global_scale(amax);
  std::vector<qtl::float4_e2m1x2_t> packed(q.size() / 2), want_p(q.size() / 2);
  std::vector<qtl::float8_e4m3fn_t> sf(q.size() / 16), want_s(q.size() / 16);
  cv::fp8_block_to_nvfp4(q, s, g, gs, packed, sf);
  qtl::block_quantize<qtl::nvfp4>(qtl::make_view(static_cast<qtl::bfloat16_t const*>(bf.data()), 2 * n, k),
                                  qtl::make_view(want_p.data(), 2 * n, k / 2), std::span(want_s), gs);
  bool same = true;
  for (std::size_t i = 0; i < packed.size(); ++i) same = same && packed[i].bits == want_p[i].bits;
  for (std::size_t i = 0; i < sf.size(); ++i) same = same && sf[i].bits == want_s[i].bits;
  CHECK(same);
  // refusals: K % 16, a bad global scale, a NaN code, a negative amax
  std::vector<qtl::float4_e2m1x2_t> p2(q.size() / 2);
  CHECK_THROWS_AS(cv::fp8_block_to_nvfp4(q, s, g, 0.0f, packed, sf), qtl::value_error);
  q[7] = 0x7F;
  CHECK_THROWS_WITH(cv::fp8_block_to_nvfp4(q, s, g, gs, packed, sf),
                    Catch::Contains("element (0, 0, 7) dequantizes to NaN or Inf"));
  // checked: the caller's fp8_block_bf16_amax refused it already, so the op does not look again
  CHECK_NOTHROW(cv::fp8_block_to_nvfp4(q, s, g, gs, packed, sf, 1, true));
  q[7] = 0;
  q[static_cast<std::size_t>((n + 130) * k + 50)] = 0xFF;  // a NaN code in matrix 1, past its first block row
  CHECK_THROWS_WITH(cv::fp8_block_to_nvfp4(q, s, g, gs, packed, sf),
                    Catch::Contains("element (1, 130, 50) dequantizes to NaN or Inf"));
  CHECK_THROWS_AS(cv::fp8_block_bf16_amax(q, s, g), qtl::value_error);
  CHECK_THROWS_AS(cv::nvfp4_shared_global_scale(-1.0f), qtl::value_error);
  CHECK(cv::nvfp4_shared_global_scale(0.0f) == 1.0f);
  std::vector<std::uint8_t> q8(40, 0);
  std::vector<float> s8{1.0f};
  std::vector<qtl::float4_e2m1x2_t> p8(20);
  std::vector<qtl::float8_e4m3fn_t> f8(2);
  CHECK_THROWS_AS(cv::fp8_block_to_nvfp4(q8, s8, cv::block_grid{1, 1, 40, {128, 128}}, 1.0f, p8, f8), qtl::shape_error);
}

TEST_CASE("convert: the threads parameter cuts whole block rows; the bytes do not depend on it", "[convert]") {
  std::mt19937 rng(9);
  cv::block_grid const g{3, 300, 320, {128, 128}};  // experts, a partial block row and column
  std::vector<std::uint8_t> q(static_cast<std::size_t>(g.elements()));
  for (auto& c : q) {
    c = static_cast<std::uint8_t>(rng() & 0xFF);
    if ((c & 0x7F) == 0x7F) c = 0x12;
  }
  std::vector<float> s(static_cast<std::size_t>(g.scales()));
  std::uniform_real_distribution<float> u(-12, -4);
  for (auto& x : s) x = std::exp2(u(rng));
  auto const n = q.size();
  std::vector<qtl::bfloat16_t> b1(n), bt(n);
  std::vector<float> f1(n), ft(n);
  std::vector<std::uint8_t> r1(n), rt(n), m1(n / 2), mt(n / 2), e1(n / 32), et(n / 32), c1(n), ct(n);
  std::vector<float> rs1(s.size()), rst(s.size()), cs1(s.size()), cst(s.size());
  std::vector<qtl::float4_e2m1x2_t> p1(n / 2), pt(n / 2);
  std::vector<qtl::float8_e4m3fn_t> v1(n / 16), vt(n / 16);
  cv::block_quant_dequant<qtl::bfloat16_t>(q, s, g, b1);
  cv::block_quant_dequant<float>(q, s, g, f1);
  cv::requant_weight_ue8m0_canonical<cv::recipe::vllm>(q, s, g.groups, g.n, g.k, r1, rs1);
  cv::fp8_block_to_mxfp4(q, s, g, m1, e1);
  cv::per_block_cast_to_fp8<cv::pow2_rule::bits>(f1, g, c1, cs1);
  cv::fp8_block_to_nvfp4(q, s, g, 1000.0f, p1, v1);
  auto const bytes_equal = [](auto const& a, auto const& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
  };
  for (int t : {2, 3, 7, 64}) {
    cv::block_quant_dequant<qtl::bfloat16_t>(q, s, g, bt, t);
    cv::block_quant_dequant<float>(q, s, g, ft, t);
    cv::requant_weight_ue8m0_canonical<cv::recipe::vllm>(q, s, g.groups, g.n, g.k, rt, rst, t);
    cv::fp8_block_to_mxfp4(q, s, g, mt, et, t);
    cv::per_block_cast_to_fp8<cv::pow2_rule::bits>(f1, g, ct, cst, t);
    cv::fp8_block_to_nvfp4(q, s, g, 1000.0f, pt, vt, t);
    CHECK(bytes_equal(bt, b1));
    CHECK(bytes_equal(ft, f1));
    CHECK(bytes_equal(rt, r1));
    CHECK(bytes_equal(rst, rs1));
    CHECK(bytes_equal(mt, m1));
    CHECK(bytes_equal(et, e1));
    CHECK(bytes_equal(ct, c1));
    CHECK(bytes_equal(cst, cs1));
    CHECK(bytes_equal(pt, p1));
    CHECK(bytes_equal(vt, v1));
  }
  // an error in one slice reaches the caller after every thread has joined, naming the element of
  // the whole weight (not of the slice), as one thread does
  q[q.size() - 5] = 0x7F;
  CHECK_THROWS_AS(cv::fp8_block_to_mxfp4(q, s, g, mt, et, 4), qtl::value_error);
  q[static_cast<std::size_t>((2 * g.n + 150) * g.k + 7)] = 0xFF;  // matrix 2, row 150: the first
  for (int t : {1, 4}) {
    CHECK_THROWS_WITH(cv::fp8_block_to_mxfp4(q, s, g, mt, et, t),
                      "qtl::convert::fp8_block_to_mxfp4: element (2, 150, 7) dequantizes to NaN or Inf");
    CHECK_THROWS_WITH(cv::fp8_block_to_nvfp4(q, s, g, 1000.0f, pt, vt, t),
                      "qtl::convert::fp8_block_to_nvfp4: element (2, 150, 7) dequantizes to NaN or Inf");
  }
}
