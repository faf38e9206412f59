// qtl/fp4.hpp: NVFP4, MXFP4 and MXFP8 block quantization — the worked example of docs/spec/blockscale.md
// §8.4, properties of every format (nearest code, power-of-two scales, zeroed padding), scales
// written directly in the 128x4 layout, dequantization, errors.
#include <qtl/fp4.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>
#include "test_data.hpp"

namespace {

using qtl_test::cview;

using qtl::bfloat16_t;
using qtl::float4_e2m1x2_t;
using qtl::float8_e4m3fn_t;
using qtl::float8_e8m0fnu_t;
using qtl::index_t;

template <class T>
std::vector<T> random_matrix(index_t rows, index_t cols, std::uint32_t seed) {
  auto v = qtl_test::block_ranged_normal<T>(rows, cols, seed, 6);
  for (std::size_t i = 0; i < v.size(); i += 53) {
    v[i] = qtl::from_float<T>(0.0f);  // zeros among the values
  }
  return v;
}

/// x [m, k] quantized to block format F with linear scales: the global scale (NVFP4: of x's amax;
/// else 1), the values and the scales.
template <class F, class T>
std::tuple<float, std::vector<typename F::element>, std::vector<typename F::scale>> quantize_linear(
    std::vector<T> const& x, index_t m, index_t k) {
  float const gs = F::has_global_scale ? qtl::nvfp4_global_scale(cview(x, m, k)) : 1.0f;
  std::vector<typename F::element> q(static_cast<std::size_t>(m * k / F::elements_per_value));
  std::vector<typename F::scale> s(static_cast<std::size_t>(qtl::block_scale_bytes<F>(m, k)));
  qtl::block_quantize<F>(cview(x, m, k), qtl::make_view(q.data(), m, k / F::elements_per_value), std::span(s), gs);
  return {gs, std::move(q), std::move(s)};
}

// Nearest E2M1 code to y (ties to the even code, saturating), by search over the 8 magnitudes.
std::uint8_t nearest_e2m1(float y) {
  double const a = std::fmin(std::fabs(static_cast<double>(y)), 6.0);
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    double const d = std::fabs(qtl::e2m1_to_float(static_cast<std::uint8_t>(c)) - a);
    double const bd = std::fabs(qtl::e2m1_to_float(static_cast<std::uint8_t>(best)) - a);
    if (d < bd || (d == bd && c % 2 == 0)) {
      best = c;
    }
  }
  return static_cast<std::uint8_t>((std::signbit(y) ? 8 : 0) | best);
}

template <class F>
std::uint8_t element_code(std::vector<typename F::element> const& v, index_t cols, index_t i, index_t j) {
  std::uint8_t const b = v[static_cast<std::size_t>(i * (cols / F::elements_per_value) + j / F::elements_per_value)].bits;
  if constexpr (F::elements_per_value == 2) {
    return j % 2 == 0 ? (b & 0xF) : (b >> 4);
  } else {
    return b;
  }
}

}  // namespace

TEST_CASE("e2m1_encode equals numeric.hpp's float_to_e2m1", "[fp4]") {
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 65521) {
    float const x = qtl::bits_to_float(static_cast<std::uint32_t>(b));
    REQUIRE(qtl::e2m1_encode(x) == qtl::float_to_e2m1(x));
  }
  for (float x : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -5.0f, 6.0f, 1e30f, -0.0f}) {
    CHECK(qtl::e2m1_encode(x) == qtl::float_to_e2m1(x));
  }
}

TEST_CASE("NVFP4 block of docs/spec/blockscale.md §8.4", "[fp4][nvfp4]") {
  std::vector<float> const x = {0,   0.1f, -0.2f, 0.3f, 0.45f, -0.6f, 0.75f, 1.0f,
                                -1.2f, 1.5f, 2.0f, -2.5f, 3.0f, 3.7f, -4.2f, 4.5f};
  float const gs = qtl::nvfp4_global_scale(cview(x, 1, 16));
  CHECK(gs == 597.3333129882812f);
  std::vector<float4_e2m1x2_t> q(8);
  std::vector<float8_e4m3fn_t> s(1);
  qtl::block_quantize<qtl::nvfp4>(cview(x, 1, 16), qtl::make_view(q.data(), 1, 8), std::span(s), gs);
  CHECK(s[0].bits == 0x7E);
  std::vector<std::uint8_t> bytes;
  for (auto b : q) {
    bytes.push_back(b.bits);
  }
  CHECK(bytes == std::vector<std::uint8_t>{0x00, 0x19, 0xA1, 0x32, 0x4B, 0xD5, 0x66, 0x7F});
  std::vector<float> dq(16);
  qtl::block_dequantize<qtl::nvfp4>(cview(q, 1, 8), std::span<float8_e4m3fn_t const>(s), gs,
                                    qtl::make_view(dq.data(), 1, 16));
  std::vector<float> const want = {0,      0,   -0.375f, 0.375f, 0.375f, -0.75f, 0.75f, 1.125f,
                                   -1.125f, 1.5f, 2.25f,  -2.25f, 3.0f,   3.0f,   -4.5f, 4.5f};
  for (int i = 0; i < 16; ++i) {
    CHECK(dq[static_cast<std::size_t>(i)] == Approx(want[static_cast<std::size_t>(i)]).epsilon(1e-6));
  }
}

TEST_CASE("MXFP4 example of docs/spec/blockscale.md §8.4: max 1.3 -> E8M0 125, -0.01 -> -0", "[fp4][mx]") {
  std::vector<float> x(32, 0.1f);
  x[5] = 1.3f;
  x[6] = -0.01f;
  std::vector<float4_e2m1x2_t> q(16);
  std::vector<float8_e8m0fnu_t> s(1);
  qtl::block_quantize<qtl::mxfp4>(cview(x, 1, 32), qtl::make_view(q.data(), 1, 16), std::span(s));
  CHECK(s[0].bits == 125);
  CHECK((q[3].bits & 0xF) == 0x8);  // element 6, low nibble
  CHECK((q[2].bits >> 4) == 0x7);  // element 5, high nibble: 1.3 * 4 = 5.2 > 5 -> 6.0 (code 7)
  CHECK((q[0].bits & 0xF) == 0x1);  // 0.1 * 4 = 0.4 -> 0.5
}

TEST_CASE("an MX block of scale code 0 is multiplied by 2^127, not by 1 as TransformerEngine does", "[fp4][mx]") {
  // amax 2^-128 * 6: the scale is 2^-127 (code 0); x * 2^127 = 3 -> E2M1 code 5, and 2^-130 * 2^127
  // = 0.125 -> 0; TransformerEngine's and torchao's x * 1 would make every code 0.
  std::vector<float> x(32, 0x1p-130f);
  x[0] = 6.0f * 0x1p-128f;
  std::vector<float4_e2m1x2_t> q(16);
  std::vector<float8_e8m0fnu_t> s(1);
  qtl::block_quantize<qtl::mxfp4>(cview(x, 1, 32), qtl::make_view(q.data(), 1, 16), std::span(s));
  CHECK(s[0].bits == 0);
  CHECK(q[0].bits == 0x05);
  CHECK(qtl::block_output_scale<qtl::mxfp4>(0, x[0], 1.0f) == 0x1p127f);
}

TEMPLATE_LIST_TEST_CASE("each element is the nearest code of x * os; scales per the recipe", "[fp4]", qtl::block_formats) {
  using F = TestType;
  index_t const m = 9;
  index_t const k = 256;
  auto const x = random_matrix<bfloat16_t>(m, k, 5);
  auto const [gs, q, s] = quantize_linear<F>(x, m, k);
  for (index_t i = 0; i < m; ++i) {
    for (index_t b = 0; b < k / F::block_size; ++b) {
      float vmax = 0;
      for (index_t j = b * F::block_size; j < (b + 1) * F::block_size; ++j) {
        vmax = std::fmax(vmax, std::fabs(qtl::to_float(x[static_cast<std::size_t>(i * k + j)])));
      }
      std::uint8_t const sc = s[static_cast<std::size_t>(i * (k / F::block_size) + b)].bits;
      float os = 0;
      if constexpr (F::has_global_scale) {
        // sf = e4m3(min(gs * (vmax / 6), 448)), os = 1 / (sf * (1 / gs))
        float const sf = std::fmin(gs * (vmax / 6.0f), 448.0f);
        REQUIRE(sc == qtl::float_to_e4m3fn(sf, qtl::saturation::finite));
        float const sfd = qtl::e4m3fn_to_float(sc);
        os = sfd == 0 ? 0.0f : 1.0f / (sfd * (1.0f / gs));
      } else {
        // a power of two, the smallest with vmax / scale <= element max
        float const scale = qtl::e8m0_to_float(sc);
        int e = 0;
        REQUIRE(std::frexp(scale, &e) == 0.5f);
        if (vmax > 0) {
          REQUIRE(vmax / F::element_max <= scale);
          REQUIRE(vmax / F::element_max > scale / 2);
          os = 1.0f / scale;
        }
      }
      for (index_t j = b * F::block_size; j < (b + 1) * F::block_size; ++j) {
        float const y = qtl::to_float(x[static_cast<std::size_t>(i * k + j)]) * os;
        std::uint8_t const want = F::elements_per_value == 2
                                      ? nearest_e2m1(y)
                                      : qtl::float_to_e4m3fn(std::fmax(-448.0f, std::fmin(448.0f, y)));
        REQUIRE(element_code<F>(q, k, i, j) == want);
      }
    }
  }
}

TEMPLATE_LIST_TEST_CASE("scales go straight into the 128x4 layout, padding zeroed", "[fp4][blockscale]", qtl::block_formats) {
  using F = TestType;
  index_t const m = 130;
  index_t const kb = 6;
  index_t const k = kb * F::block_size;
  auto const x = random_matrix<float>(m, k, 9);
  float const gs = F::has_global_scale ? qtl::nvfp4_global_scale(cview(x, m, k)) : 1.0f;
  std::vector<typename F::element> q1(static_cast<std::size_t>(m * k / F::elements_per_value));
  auto q2 = q1;
  std::vector<typename F::scale> lin(static_cast<std::size_t>(m * kb));
  std::vector<typename F::scale> swz(static_cast<std::size_t>(qtl::block_scale_bytes<F, qtl::layout_128x4>(m, k)),
                                     typename F::scale{0xAB});
  REQUIRE(swz.size() == 256 * 8);
  auto const vk = k / F::elements_per_value;
  qtl::block_quantize<F>(cview(x, m, k), qtl::make_view(q1.data(), m, vk), std::span(lin), gs);
  qtl::block_quantize<F, qtl::layout_128x4>(cview(x, m, k), qtl::make_view(q2.data(), m, vk), std::span(swz), gs);
  CHECK(q1 == q2);
  std::vector<bool> real(swz.size(), false);
  for (index_t i = 0; i < m; ++i) {
    for (index_t b = 0; b < kb; ++b) {
      auto const off = static_cast<std::size_t>(qtl::blockscale_offset<qtl::layout_128x4>(i, b, 8));
      real[off] = true;
      REQUIRE(swz[off] == lin[static_cast<std::size_t>(i * kb + b)]);
    }
  }
  for (std::size_t o = 0; o < swz.size(); ++o) {
    if (!real[o]) {
      REQUIRE(swz[o].bits == 0);
    }
  }
  // docs/spec/blockscale.md §8.1: (1, 0) sits at byte 16 and (128, 0) at byte 1024
  CHECK(swz[16] == lin[static_cast<std::size_t>(1 * kb)]);
  CHECK(swz[1024] == lin[static_cast<std::size_t>(128 * kb)]);
}

TEMPLATE_LIST_TEST_CASE("dequantization: value times the block's scale, within half a step of the input", "[fp4]", qtl::block_formats) {
  using F = TestType;
  index_t const m = 4;
  index_t const k = 128;
  auto const x = random_matrix<float>(m, k, 13);
  auto const [gs, q, s] = quantize_linear<F>(x, m, k);
  std::vector<float> dq(static_cast<std::size_t>(m * k));
  qtl::block_dequantize<F>(cview(q, m, k / F::elements_per_value), std::span<typename F::scale const>(s), gs,
                           qtl::make_view(dq.data(), m, k));
  for (index_t i = 0; i < m; ++i) {
    for (index_t j = 0; j < k; ++j) {
      std::uint8_t const c = element_code<F>(q, k, i, j);
      std::uint8_t const sc = s[static_cast<std::size_t>(i * (k / F::block_size) + j / F::block_size)].bits;
      float const d = F::has_global_scale ? qtl::e4m3fn_to_float(sc) / gs : qtl::e8m0_to_float(sc);
      float const v = F::elements_per_value == 2 ? qtl::e2m1_to_float(c) : qtl::e4m3fn_to_float(c);
      REQUIRE(dq[static_cast<std::size_t>(i * k + j)] == v * d);
      // half a step of the element grid at that magnitude, in input units (E2M1 steps are at most 2)
      float const xi = x[static_cast<std::size_t>(i * k + j)];
      float const step = F::elements_per_value == 2 ? (std::fabs(v) >= 4 ? 2.0f : std::fabs(v) >= 2 ? 1.0f : 0.5f)
                                                    : std::fmax(std::exp2(std::floor(std::log2(std::fabs(v)))) / 8,
                                                                0x1p-9f);
      if (std::fabs(v) < F::element_max) {
        CHECK(std::fabs(dq[static_cast<std::size_t>(i * k + j)] - xi) <= 0.5f * step * d * 1.0001f + 1e-30f);
      }
    }
  }
}

TEST_CASE("all-zero input: global scale 1, zero scales and codes", "[fp4]") {
  std::vector<float> const x(32, 0.0f);
  float const gs = qtl::nvfp4_global_scale(cview(x, 1, 32));
  CHECK(gs == 1.0f);
  std::vector<float4_e2m1x2_t> q(16, float4_e2m1x2_t{0xFF});
  std::vector<float8_e4m3fn_t> s(2, float8_e4m3fn_t{0xFF});
  qtl::block_quantize<qtl::nvfp4>(cview(x, 1, 32), qtl::make_view(q.data(), 1, 16), std::span(s), gs);
  for (auto b : q) {
    CHECK(b.bits == 0);
  }
  CHECK(s[0].bits == 0);
  CHECK(s[1].bits == 0);
}

TEST_CASE("block quantization rejects bad shapes and global scales", "[fp4]") {
  std::vector<float> const x(48, 1.0f);
  std::vector<float4_e2m1x2_t> q(24);
  std::vector<float8_e4m3fn_t> s(3);
  auto const v = qtl::make_view(q.data(), 1, 24);
  CHECK_THROWS_AS(qtl::block_quantize<qtl::nvfp4>(cview(x, 1, 48), v, std::span(s), 0.0f), qtl::value_error);
  CHECK_THROWS_AS(qtl::block_quantize<qtl::nvfp4>(cview(x, 1, 48), v, std::span(s),
                                                  std::numeric_limits<float>::infinity()),
                  qtl::value_error);
  CHECK_THROWS_AS(qtl::block_quantize<qtl::nvfp4>(cview(x, 1, 48), v, std::span(s).first(2), 1.0f), qtl::shape_error);
  std::vector<float8_e8m0fnu_t> s32(2);
  CHECK_THROWS_AS(qtl::block_quantize<qtl::mxfp4>(cview(x, 1, 48), v, std::span(s32)), qtl::shape_error);
  CHECK_THROWS_AS(qtl::block_quantize<qtl::nvfp4>(cview(x, 2, 24), v, std::span(s), 1.0f), qtl::shape_error);
  CHECK_NOTHROW(qtl::block_quantize<qtl::nvfp4>(cview(x, 1, 48), v, std::span(s), 1.0f));
}

TEMPLATE_LIST_TEST_CASE("block element codes (SIMD where available) equal the element function on every bf16 code", "[fp4]", qtl::block_formats) {
  using F = TestType;
  std::vector<bfloat16_t> x(65536);
  for (std::size_t c = 0; c < x.size(); ++c) {
    x[c].bits = static_cast<std::uint16_t>(c);
  }
  // the portable loops, and the AVX2 executor where the CPU has it
  for (bool const avx2 : {false, qtl::detail::avx2_quantizes<bfloat16_t>()}) {
    for (float os : {1.0f, 0.001f, 3.3f, 0x1p100f, 0.0f}) {
      INFO("os " << os << ", avx2 " << avx2);
      for (std::size_t b = 0; b < x.size(); b += F::block_size) {
        typename F::element o[F::block_size];
        if (avx2) {
          qtl::detail::block_codes_dispatch<F>(true, x.data() + b, o, os);
        } else {
          qtl::detail::block_codes<F>(x.data() + b, o, os);
        }
        for (int j = 0; j < F::block_size; ++j) {
          std::uint8_t const want = qtl::block_element_code<F>(qtl::to_float(x[b + static_cast<std::size_t>(j)]), os);
          std::uint8_t got = o[j / F::elements_per_value].bits;
          if constexpr (F::elements_per_value == 2) {
            got = j % 2 == 0 ? (got & 0xF) : (got >> 4);
          }
          REQUIRE(got == want);
        }
      }
    }
  }
}

// The block path runs 4 blocks at a time (SSE2: max, scale code and output scale in lanes): every
// positive bf16 code (Inf and NaN included) is once the largest magnitude of a block, and the
// quantized row must equal the scalar recipe of the element functions, block by block.
template <class F, class T>
void check_block_path_on_every_bf16_vmax(float gs) {
  index_t const k = 64 * F::block_size;  // 64 blocks per row: the 4-block path and no tail
  index_t const m = 32768 / 64;
  std::vector<T> x(static_cast<std::size_t>(m * k));
  for (std::size_t blk = 0; blk < x.size() / F::block_size; ++blk) {
    auto const c = static_cast<std::uint32_t>(blk);  // the block's largest |x| (a bf16 code)
    for (std::uint32_t j = 0; j < F::block_size; ++j) {
      std::uint32_t const mag = j == 0 ? c : (c > j * 131 ? c - j * 131 : j);  // smaller ones beside
      auto const bits = static_cast<std::uint16_t>(mag | ((j + blk) % 3 == 0 ? 0x8000u : 0u));
      x[blk * F::block_size + j] = qtl::from_float<T>(qtl::to_float(bfloat16_t{bits}));
    }
  }
  std::vector<typename F::element> q(static_cast<std::size_t>(m * k / F::elements_per_value));
  std::vector<typename F::scale> s(static_cast<std::size_t>(qtl::block_scale_bytes<F>(m, k)));
  qtl::block_quantize<F>(cview(x, m, k), qtl::make_view(q.data(), m, k / F::elements_per_value), std::span(s), gs);
  for (std::size_t blk = 0; blk < x.size() / F::block_size; ++blk) {
    T const* b = x.data() + blk * F::block_size;
    std::uint32_t vmax_bits = 0;
    for (int j = 0; j < F::block_size; ++j) {
      vmax_bits = std::max<std::uint32_t>(vmax_bits, qtl::amax_bits(b[j]));
    }
    float const vmax = qtl::amax_value<T>(static_cast<typename qtl::detail::input_bits<T>::word>(vmax_bits));
    std::uint8_t const sc = qtl::block_scale_code<F>(vmax, gs);
    float const os = qtl::block_output_scale<F>(sc, vmax, gs);
    INFO("block " << blk << ", vmax " << vmax << ", gs " << gs);
    REQUIRE(s[blk].bits == sc);  // linear layout: block blk of the [m, 64] scale matrix
    for (int j = 0; j < F::block_size; ++j) {
      auto const col = static_cast<index_t>(blk % 64) * F::block_size + j;
      REQUIRE(element_code<F>(q, k, static_cast<index_t>(blk / 64), col) ==
              qtl::block_element_code<F>(qtl::to_float(b[j]), os));
    }
  }
}

TEMPLATE_LIST_TEST_CASE("4-block path (SIMD where available) equals the scalar recipe for every bf16 block max", "[fp4]", qtl::block_formats) {
  using F = TestType;
  for (float gs : {1.0f, 0.37f, 2688.0f, 1e30f}) {
    check_block_path_on_every_bf16_vmax<F, bfloat16_t>(gs);
    check_block_path_on_every_bf16_vmax<F, float>(gs);
    if constexpr (!F::has_global_scale) {
      break;  // MX formats have no global scale
    }
  }
}
