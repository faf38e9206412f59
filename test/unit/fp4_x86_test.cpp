// The run-time dispatched x86 executors of qtl/fp4.hpp (NVFP4, MXFP4, MXFP8 block quantization and
// NVFP4's global scale) against the portable loops, bit for bit, under every executor level the
// CPU has, on adversarial inputs (every bf16 code, magnitudes from subnormal to huge, global scales
// at the ends of float's range, K-block counts around every vector step, both scale layouts); and
// each x86 E2M1 encoder and block-scale rule alone against the element functions on every float
// exponent and rounding boundary.
#include <qtl/fp4.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "skip.hpp"
#include "x86_compare.hpp"

#if QTL_X86

namespace {

using qtl::bfloat16_t;
using qtl::index_t;
using namespace qtl_test::x86_compare;
using qtl_test::x86_compare::inf;  // not ::inf or ::nan of <cmath>
using qtl_test::x86_compare::nan;

template <class F, class Layout>
void check_blocks(float gs) {
  // K-block counts below, at and past the 16-block steps of the AVX-512 executor, with tails
  for (index_t const kb : {1, 4, 16, 23, 67}) {
    matrix<bfloat16_t> const in =
        hostile_input<bfloat16_t>(37, kb * F::block_size, 300u + static_cast<std::uint32_t>(kb));
    INFO("K-blocks " << kb << " gs " << gs);
    check_executors_agree([&] {
      matrix<typename F::element> v(in.rows, in.cols / F::elements_per_value, 3);
      std::vector<typename F::scale> s(static_cast<std::size_t>(qtl::block_scale_bytes<F, Layout>(in.rows, in.cols)),
                                       typename F::scale{0xAB});
      qtl::block_quantize<F, Layout>(in.cview(), v.view(), s, gs);
      bytes b;
      v.append_to(b);
      append(b, s.data(), s.size());
      return b;
    });
  }
}

TEMPLATE_LIST_TEST_CASE("block quantization: every executor equals the portable one", "[fp4][x86]", qtl::block_formats) {
  using F = TestType;
  for (float const gs : {597.0f, 1.0f, 1e-30f, 3e38f, 0x1p-140f}) {
    check_blocks<F, qtl::layout_linear>(gs);
    check_blocks<F, qtl::layout_128x4>(gs);
    if constexpr (!F::has_global_scale) {
      break;  // the MX recipe has no global scale
    }
  }
  // the global scale of a tensor with every bf16 code
  matrix<bfloat16_t> const in = hostile_input<bfloat16_t>(16, 4096, 9);
  check_executors_agree([&] {
    float const gs = qtl::nvfp4_global_scale(in.cview());
    bytes b;
    append(b, &gs, 1);
    return b;
  });
}

#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic push
#    pragma GCC diagnostic ignored "-Wuninitialized"  // see qtl/fp8.hpp
#    pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#  endif  // ^^^ g++ ^^^
/// e2m1_encode32 takes 16 even and 16 odd elements and gives their codes as 16-bit pairs.
QTL_X86_AVX512_VBMI void avx512_e2m1(std::vector<float> const& x, std::vector<std::uint8_t>& e2m1) {
  std::size_t const n = x.size() - x.size() % 32;
  alignas(64) std::int32_t c[16];
  for (std::size_t i = 0; i < n; i += 32) {
    __m512 const a = _mm512_loadu_ps(x.data() + i);
    __m512 const b = _mm512_loadu_ps(x.data() + i + 16);
    _mm512_store_si512(c, x86::e2m1_encode32(a, b));
    for (std::size_t k = 0; k < 16; ++k) {
      e2m1[i + k] = static_cast<std::uint8_t>(c[k] & 0xffff);
      e2m1[i + 16 + k] = static_cast<std::uint8_t>(static_cast<std::uint32_t>(c[k]) >> 16);
    }
  }
}
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic pop
#  endif  // ^^^ g++ ^^^

/// e2m1_encode4 (SSE2) and e2m1_encode8 (AVX2): one code per int32 lane.
void sse2_e2m1(std::vector<float> const& x, std::vector<std::uint8_t>& e2m1) {
  alignas(16) std::int32_t c[4];
  for (std::size_t i = 0; i + 4 <= x.size(); i += 4) {
    _mm_store_si128(reinterpret_cast<__m128i*>(c), qtl::detail::e2m1_encode4(_mm_loadu_ps(x.data() + i)));
    for (std::size_t k = 0; k < 4; ++k) {
      e2m1[i + k] = static_cast<std::uint8_t>(c[k]);
    }
  }
}
QTL_X86_AVX2 void avx2_e2m1(std::vector<float> const& x, std::vector<std::uint8_t>& e2m1) {
  alignas(32) std::int32_t c[8];
  for (std::size_t i = 0; i + 8 <= x.size(); i += 8) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(c), x86::e2m1_encode8(_mm256_loadu_ps(x.data() + i)));
    for (std::size_t k = 0; k < 8; ++k) {
      e2m1[i + k] = static_cast<std::uint8_t>(c[k]);
    }
  }
}

// Each x86 form of `e2m1_encode` on every float of `boundary_floats()` (every exponent, both
// signs, ±0, subnormals, ±Inf, NaNs, every tie and its neighbours, saturation) against it.
TEST_CASE("every x86 E2M1 encoder equals e2m1_encode at every rounding boundary", "[fp4][x86]") {
  std::vector<float> const x = boundary_floats();
  std::size_t const n = x.size() - x.size() % 32;
  auto const check = [&](char const* what, void (*encode)(std::vector<float> const&, std::vector<std::uint8_t>&)) {
    std::vector<std::uint8_t> e2m1(n);
    encode(x, e2m1);
    for (std::size_t i = 0; i < n; ++i) {
      INFO(what << ": float bits " << std::hex << qtl::float_to_bits(x[i]));
      REQUIRE(int(e2m1[i]) == int(qtl::e2m1_encode(x[i])));
    }
  };
  check("SSE2", sse2_e2m1);
  if (x86::fp8_cpu_isa() < x86::fp8_isa::avx2) {
    return qtl_test::skip("no AVX2 on this CPU: the 8- and 32-lane E2M1 encoders cannot run");
  }
  check("AVX2", avx2_e2m1);
  if (x86::fp8_cpu_isa() < x86::fp8_isa::avx512) {
    return qtl_test::skip("no AVX-512 on this CPU: the 32-lane E2M1 encoder cannot run");
  }
  check("AVX-512", avx512_e2m1);
}

/// The scale codes and output scales of `block_scales4` (SSE2) or `block_scales16` (AVX-512) for
/// the block maxima `vmax`, `Lanes` at a time.
template <class F>
void sse2_scales(std::vector<float> const& vmax, float gs, std::vector<std::int32_t>& codes, std::vector<float>& os) {
  float const inv_gs = qtl::detail::div_rn(1.0f, gs);
  for (std::size_t i = 0; i + 4 <= vmax.size(); i += 4) {
    __m128i c;
    __m128 o;
    qtl::detail::block_scales4<F>(_mm_loadu_ps(vmax.data() + i), gs, inv_gs, c, o);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes.data() + i), c);
    _mm_storeu_ps(os.data() + i, o);
  }
}
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic push
#    pragma GCC diagnostic ignored "-Wuninitialized"  // see qtl/fp8.hpp
#    pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#  endif  // ^^^ g++ ^^^
template <class F>
QTL_X86_AVX512_VBMI void avx512_scales(std::vector<float> const& vmax, float gs, std::vector<std::int32_t>& codes,
                                       std::vector<float>& os) {
  float const inv_gs = qtl::detail::div_rn(1.0f, gs);
  for (std::size_t i = 0; i + 16 <= vmax.size(); i += 16) {
    __m512i c;
    __m512 o;
    x86::block_scales16<F>(_mm512_loadu_ps(vmax.data() + i), gs, inv_gs, c, o);
    _mm512_storeu_si512(codes.data() + i, c);
    _mm512_storeu_ps(os.data() + i, o);
  }
}
#  if defined(__GNUC__) && !defined(__clang__)
#    pragma GCC diagnostic pop
#  endif  // ^^^ g++ ^^^

// Each x86 form of the block-scale rule against `block_scale_code` and `block_output_scale`, on
// every block max a block can have (the magnitudes of `boundary_floats()` but NaN: 0, subnormals,
// every exponent, the ties of E4M3 and E8M0 rounding, +Inf) under global scales from tiny to huge.
TEMPLATE_LIST_TEST_CASE("every x86 block-scale rule equals the element functions on every block max", "[fp4][x86]",
                        qtl::block_formats) {
  using F = TestType;
  std::vector<float> vmax;
  for (float const x : boundary_floats()) {
    if (qtl::float_to_bits(x) <= 0x7f800000u) {
      vmax.push_back(x);
    }
  }
  vmax.resize(vmax.size() - vmax.size() % 16);
  using scales_fn = void (*)(std::vector<float> const&, float, std::vector<std::int32_t>&, std::vector<float>&);
  std::vector<std::pair<char const*, scales_fn>> forms = {{"SSE2", sse2_scales<F>}};
  if (x86::fp8_cpu_isa() >= x86::fp8_isa::avx512) {
    forms.emplace_back("AVX-512", avx512_scales<F>);
  } else {
    WARN("no AVX-512 on this CPU: the 16-lane block scales are not compared");
  }
  for (float const gs : {597.0f, 1.0f, 1e-30f, 3e38f, 0x1p-140f}) {
    for (auto const& [what, scales] : forms) {
      std::vector<std::int32_t> codes(vmax.size());
      std::vector<float> os(vmax.size());
      scales(vmax, gs, codes, os);
      for (std::size_t i = 0; i < vmax.size(); ++i) {
        std::uint8_t const code = qtl::block_scale_code<F>(vmax[i], gs);
        INFO(what << ": vmax bits " << std::hex << qtl::float_to_bits(vmax[i]) << " gs " << gs);
        REQUIRE(codes[i] == int(code));
        REQUIRE(qtl::float_to_bits(os[i]) == qtl::float_to_bits(qtl::block_output_scale<F>(code, vmax[i], gs)));
      }
    }
    if constexpr (!F::has_global_scale) {
      break;  // the MX recipe has no global scale
    }
  }
}

}  // namespace

#else

TEST_CASE("x86 executors of fp4", "[fp4][x86]") { qtl_test::skip("not an x86-64 GCC/Clang host build: no executor to compare"); }

#endif  // ^^^ QTL_X86 ^^^
