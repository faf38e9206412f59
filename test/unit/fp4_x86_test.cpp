// The run-time dispatched x86 executors of qtl/fp4.hpp (NVFP4, MXFP4, MXFP8 block quantization and
// NVFP4's global scale) against the portable loops, bit for bit, under every executor level the
// CPU has, on adversarial inputs (every bf16 code, magnitudes from subnormal to huge, global scales
// at the ends of float's range, K-block counts around every vector step, both scale layouts); and
// the AVX-512 E2M1 encoder alone against qtl::e2m1_encode at every rounding boundary.
#include <qtl/fp4.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
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

TEST_CASE("the AVX-512 E2M1 encoder equals e2m1_encode at every rounding boundary", "[fp4][x86]") {
  if (x86::fp8_cpu_isa() < x86::fp8_isa::avx512) {
    return qtl_test::skip("no AVX-512 on this CPU: the 32-lane E2M1 encoder cannot run");
  }
  std::vector<float> const x = boundary_floats();
  std::size_t const n = x.size() - x.size() % 32;
  std::vector<std::uint8_t> e2m1(n);
  avx512_e2m1(x, e2m1);
  for (std::size_t i = 0; i < n; ++i) {
    INFO("float bits " << std::hex << qtl::float_to_bits(x[i]));
    REQUIRE(int(e2m1[i]) == int(qtl::e2m1_encode(x[i])));
  }
}

}  // namespace

#else

TEST_CASE("x86 executors of fp4", "[fp4][x86]") { qtl_test::skip("not an x86-64 GCC/Clang host build: no executor to compare"); }

#endif  // ^^^ QTL_X86 ^^^
