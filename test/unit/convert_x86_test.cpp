// The x86 executors of qtl/convert.hpp (qtl/x86/convert.hpp, AVX2 and AVX-512) against the portable
// loops, bit for bit, through the public functions: each case runs the same call with the executors
// capped at `portable`, at `avx2` and uncapped, and compares every output byte, or the error message where the portable
// loop refuses the input. Inputs: every code in every block, random blocks with NaN codes, zero
// and sign-only blocks, scales that are 0, -0, negative, subnormal, huge, Inf or NaN, partial
// blocks, block widths that are and are not multiples of 32, K with a tail past the last vector,
// and buffers that start at odd addresses. The MXFP4 thresholds are also checked alone against
// the element function on every code magnitude, for scales around powers of two and every exponent
// that occurs. Skipped (with a warning) on CPUs without AVX2, and empty under QTL_NO_SIMD (the
// portable loops are all there is).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <qtl/convert.hpp>

#include "skip.hpp"

#if QTL_X86

namespace {

namespace cv = qtl::convert;
using bytes = std::vector<std::uint8_t>;

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float qnan = std::numeric_limits<float>::quiet_NaN();

bool have_avx2() {
  if (!qtl::detail::convert_x86::has_avx2()) {
    qtl_test::skip("this CPU has no AVX2: the convert executors cannot run");
    return false;
  }
  return true;
}

/// Every output byte of `f` (or its error message) with the executors capped at `cap`.
std::string run(std::function<std::string()> const& f, qtl::x86::level cap) {
  qtl::x86::scoped_level_cap const capped(cap);
  if (cap == qtl::x86::level::portable) {
    REQUIRE_FALSE(qtl::detail::convert_x86::has_avx2());
  }
  return f();
}

/// `f` uncapped (AVX-512 where the CPU has it) and capped at AVX2 equal to `f` capped at `portable`.
void check_agree(std::function<std::string()> const& f) {
  std::string const want = run(f, qtl::x86::level::portable);
  for (auto const cap : {qtl::x86::level::avx2, qtl::x86::level::avx512}) {
    std::string const got = run(f, cap);
    REQUIRE(got.size() == want.size());
    std::size_t first = 0;
    while (first < got.size() && got[first] == want[first]) ++first;
    INFO("cap " << static_cast<int>(cap) << ": first differing byte " << first << " of " << got.size() << ": portable "
                << (first < got.size() ? int(static_cast<std::uint8_t>(want[first])) : -1) << ", executor "
                << (first < got.size() ? int(static_cast<std::uint8_t>(got[first])) : -1));
    CHECK(first == got.size());
  }
}

template <class T>
std::string as_bytes(std::vector<T> const& v) {
  return std::string(reinterpret_cast<char const*>(v.data()), v.size() * sizeof(T));
}

struct weight {
  cv::block_grid g;
  bytes q;
  std::vector<float> s;
};

/// Random codes (NaN codes with probability `nan_rate`), scales from `scales` or random powers
/// of two times a random mantissa.
weight make_weight(std::mt19937& rng, cv::block_grid g, double nan_rate, std::vector<float> const& scales = {}) {
  weight w{g, bytes(static_cast<std::size_t>(g.elements())), std::vector<float>(static_cast<std::size_t>(g.scales()))};
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (auto& c : w.q) {
    c = static_cast<std::uint8_t>(rng());
    if ((c & 0x7F) == 0x7F && u(rng) >= nan_rate) {
      c = static_cast<std::uint8_t>(c ^ 1);
    }
  }
  for (std::size_t i = 0; i < w.s.size(); ++i) {
    if (!scales.empty()) {
      w.s[i] = scales[i % scales.size()];
    } else {
      w.s[i] = std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024.0f, static_cast<int>(rng() % 40) - 30);
    }
  }
  return w;
}

/// Shapes: full and partial blocks, block widths with and without a multiple of 32.
std::vector<cv::block_grid> grids() {
  return {{1, 256, 256, {128, 128}}, {2, 130, 288, {128, 128}}, {1, 77, 96, {16, 96}},
          {1, 40, 160, {8, 48}},     {1, 5, 37, {4, 7}},        {1, 33, 64, {128, 64}}};
}

std::vector<std::vector<float>> hostile_scales() {
  float const sub = std::numeric_limits<float>::denorm_min() * 5;
  return {{}, {0.0f, 1.0f}, {-0.0f, 0.5f, -2.0f}, {sub, 1e-30f}, {1e30f, 3e38f}, {inf, 1.0f}, {1.0f, qnan}};
}

}  // namespace

TEST_CASE("convert x86: the MXFP4 thresholds equal the element function", "[convert][x86]") {
  std::mt19937 rng(7);
  std::vector<float> scales = {1.0f, 0.5f, 3.0f, 1e-6f, 2.5e-3f, 448.0f, std::numeric_limits<float>::denorm_min()};
  for (int i = 0; i < 40; ++i) {
    scales.push_back(std::ldexp(1.0f + static_cast<float>(rng() % 4096) / 4096.0f, static_cast<int>(rng() % 80) - 60));
    scales.push_back(std::nextafter(std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30), 0.0f));
  }
  for (float const s : scales) {
    for (int top = 0; top < 127; ++top) {
      float const amax = cv::dequant_element_as<cv::dequant_precision::bf16>(static_cast<std::uint8_t>(top), s);
      int const e = cv::mxfp4_exponent(amax);
      auto const st = qtl::detail::mxfp4_steps_of(s, e);
      for (int c = 0; c < 256; ++c) {
        int const m = c & 0x7F;
        if (m > top) {
          continue;
        }
        float const x = cv::dequant_element_as<cv::dequant_precision::bf16>(static_cast<std::uint8_t>(c), s);
        int mag = 0;
        for (int j = 0; j < 7; ++j) {
          mag += m > st.below[j] ? 1 : 0;
        }
        int const sign = (c & 0x80) != 0 || m < st.zero_end ? 8 : 0;
        INFO("scale " << s << " top " << top << " code " << c);
        REQUIRE((mag | sign) == cv::mxfp4_nibble(x, e));
      }
    }
  }
}

TEST_CASE("convert x86: block_quant_dequant to BF16 and F32", "[convert][x86]") {
  if (!have_avx2()) return;
  std::mt19937 rng(11);
  for (auto const& g : grids()) {
    for (auto const& sc : hostile_scales()) {
      weight const w = make_weight(rng, g, 0.02, sc);
      check_agree([&] {
        std::vector<qtl::bfloat16_t> out(w.q.size() + 1);
        cv::block_quant_dequant<qtl::bfloat16_t>(w.q, w.s, g, std::span(out).subspan(1));
        std::vector<float> f(w.q.size());
        cv::block_quant_dequant<float>(w.q, w.s, g, f);
        return as_bytes(out) + as_bytes(f);
      });
    }
  }
}

TEST_CASE("convert x86: block_quant_dequant of every code under every scale class", "[convert][x86]") {
  if (!have_avx2()) return;
  // one 128 x 256 weight whose every row holds each of the 256 codes once, 1 x 2 blocks
  cv::block_grid const g{1, 128, 256, {128, 128}};
  bytes q(static_cast<std::size_t>(g.elements()));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<std::uint8_t>((i * 37 + i / 256) & 0xFF);
  for (float const s : {1.0f, -1.0f, 0.0f, 1e-40f, 3e38f, inf, -inf, qnan, 0.3f}) {
    std::vector<float> const sv{s, 1.0f / 3};
    check_agree([&] {
      std::vector<qtl::bfloat16_t> out(q.size());
      cv::block_quant_dequant<qtl::bfloat16_t>(q, sv, g, out);
      return as_bytes(out);
    });
  }
}

TEST_CASE("convert x86: fp8_block_bf16_amax finds a block's largest code in any of its rows", "[convert][x86]") {
  if (!have_avx2()) return;
  std::mt19937 rng(13);
  for (auto const& g : grids()) {
    // small codes everywhere; block b holds the one large code, in its first, a middle or its last
    // row, under the largest scale: the amax is that code's dequant
    for (std::int64_t b = 0; b < g.groups * g.n_blocks() * g.k_blocks(); ++b) {
      std::int64_t const gi = b / (g.n_blocks() * g.k_blocks());
      std::int64_t const bi = b / g.k_blocks() % g.n_blocks();
      std::int64_t const bj = b % g.k_blocks();
      std::int64_t const n0 = bi * g.block.n;
      std::int64_t const rows = std::min<std::int64_t>(g.block.n, g.n - n0);
      std::int64_t const c0 = bj * g.block.k;
      std::int64_t const cols = std::min<std::int64_t>(g.block.k, g.k - c0);
      for (std::int64_t r : {std::int64_t{0}, rows / 2, rows - 1}) {
        weight w = make_weight(rng, g, 0.0, {1.0f});
        for (auto& c : w.q) c &= 0xBF;  // magnitudes below 0x40
        std::int64_t const col = c0 + static_cast<std::int64_t>(rng() % static_cast<unsigned>(cols));
        w.q[static_cast<std::size_t>((gi * g.n + n0 + r) * g.k + col)] = 0xD5;  // -(0x55)
        w.s[static_cast<std::size_t>(b)] = 1024.0f;
        float const want = std::fabs(cv::dequant_element_as<cv::dequant_precision::bf16>(std::uint8_t{0x55}, 1024.0f));
        check_agree([&] {
          float const amax = cv::fp8_block_bf16_amax(w.q, w.s, g);
          CHECK(amax == want);
          return as_bytes(std::vector<float>{amax});
        });
      }
    }
  }
}

TEST_CASE("convert x86: requant_weight_ue8m0, every recipe, hostile blocks", "[convert][x86]") {
  if (!have_avx2()) return;
  std::mt19937 rng(13);
  for (auto const& shape : std::vector<std::pair<std::int64_t, std::int64_t>>{{256, 256}, {130, 300}, {5, 40}}) {
    for (auto const& sc : hostile_scales()) {
      for (double const nan_rate : {0.0, 0.01}) {
        cv::block_grid const g{2, shape.first, shape.second, {128, 128}};
        weight w = make_weight(rng, g, nan_rate, sc);
        // blocks of zeros, of one sign-only code, of tops just below a power of two
        std::fill(w.q.begin(), w.q.begin() + 128, std::uint8_t{0x80});
        check_agree([&] {
          std::string r;
          bytes qo(w.q.size() + 3);
          std::vector<float> so(w.s.size());
          std::span<std::uint8_t> qs = std::span(qo).subspan(3);
          cv::requant_weight_ue8m0<cv::recipe::sglang>(w.q, w.s, g.groups, g.n, g.k, qs, so);
          r += as_bytes(qo) + as_bytes(so);
          cv::requant_weight_ue8m0<cv::recipe::vllm>(w.q, w.s, g.groups, g.n, g.k, qs, so);
          r += as_bytes(qo) + as_bytes(so);
          cv::requant_weight_ue8m0_canonical<cv::recipe::sglang_legacy>(w.q, w.s, g.groups, g.n, g.k, qs, so, 2);
          r += as_bytes(qo) + as_bytes(so);
          return r;
        });
      }
    }
  }
}

TEST_CASE("convert x86: per_block_cast_to_fp8, every rule, hostile floats", "[convert][x86]") {
  if (!have_avx2()) return;
  std::mt19937 rng(19);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (auto const& g : grids()) {
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<float> x(static_cast<std::size_t>(g.elements()));
      for (auto& v : x) {
        double const p = u(rng);
        if (variant == 0) {
          v = static_cast<float>(std::ldexp(u(rng) - 0.5, static_cast<int>(rng() % 40) - 20));
        } else if (variant == 1) {  // any float bits: NaN payloads, Inf, subnormals
          v = qtl::bits_to_float(static_cast<std::uint32_t>(rng()));
        } else if (variant == 2) {  // rare specials in ordinary blocks
          v = p < 0.001 ? inf : (p < 0.002 ? -qnan : (p < 0.003 ? -0.0f : static_cast<float>(u(rng) * 448.0)));
        } else {  // tiny blocks (the 1e-4 floor) and amax just around powers of two
          v = p < 0.5 ? static_cast<float>(u(rng) * 1e-5)
                      : std::nextafter(std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10), p < 0.75 ? 0.0f : inf);
        }
      }
      check_agree([&] {
        std::string r;
        bytes q(x.size() + 1);
        std::vector<float> s(static_cast<std::size_t>(g.scales()));
        for (cv::pow2_rule const rule : {cv::pow2_rule::bits, cv::pow2_rule::log2, cv::pow2_rule::none}) {
          cv::per_block_cast_to_fp8(rule, x, g, std::span(q).subspan(1), s);
          r += as_bytes(q) + as_bytes(s);
        }
        return r;
      });
    }
  }
}

TEST_CASE("convert x86: fp8_block_to_mxfp4, codes, scales and errors", "[convert][x86]") {
  if (!have_avx2()) return;
  std::mt19937 rng(17);
  std::vector<cv::block_grid> gs;
  for (auto const& g : grids()) {
    if (g.k % 32 == 0) gs.push_back(g);
  }
  gs.push_back({3, 300, 512, {128, 128}});
  for (auto const& g : gs) {
    for (auto const& sc : hostile_scales()) {
      for (double const nan_rate : {0.0, 0.001}) {
        weight w = make_weight(rng, g, nan_rate, sc);
        // small-magnitude groups (tops near the bottom), zero groups, sign-only groups
        for (std::size_t i = 0; i < w.q.size(); ++i) {
          std::size_t const group = i / 32;
          if (group % 7 == 1) w.q[i] = static_cast<std::uint8_t>(w.q[i] & 0x87);
          if (group % 11 == 2) w.q[i] = static_cast<std::uint8_t>(w.q[i] & 0x80);
          if (group % 13 == 3) w.q[i] = static_cast<std::uint8_t>(w.q[i] & 0xBF);
        }
        check_agree([&] {
          bytes packed(w.q.size() / 2 + 1);
          bytes scales(w.q.size() / 32);
          try {
            cv::fp8_block_to_mxfp4(w.q, w.s, g, std::span(packed).subspan(1), scales);
          } catch (qtl::value_error const& e) {
            return std::string("error: ") + e.what();
          }
          return as_bytes(packed) + as_bytes(scales);
        });
      }
    }
  }
}

#else

TEST_CASE("convert x86: the portable loops only", "[convert][x86]") {
  // QTL_NO_SIMD or not an x86-64 GCC/Clang host: no executor may take anything
  CHECK_FALSE(qtl::detail::convert_x86::has_avx2());
  std::uint8_t top = 0;
  std::uint8_t const q[64] = {};
  CHECK(qtl::detail::convert_x86::block_top(q, 64, 1, 64, top) == 0);
}

#endif  // ^^^ QTL_X86 ^^^
