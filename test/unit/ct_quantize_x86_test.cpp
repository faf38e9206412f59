// qtl/x86/ct_quantize.hpp: ct_pack_quantize at each executor level the CPU runs (AVX2 + F16C,
// and the portable loops under the cap) against the element rules walked one element at a time,
// on weights with zeros of both signs, ranges that overflow T, subnormal quotients and, with
// allow_nonfinite, NaN and infinite groups (which the executor leaves to the portable loops).
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include <qtl/ct_quantize.hpp>

#include "ct_quantize_cases.hpp"
#include "skip.hpp"

#if QTL_X86

using qtl::bfloat16_t;
using qtl::half_t;
using qtl::index_t;
using namespace qtl_test::ct;

TEMPLATE_TEST_CASE("ct_pack_quantize: the AVX2 executor gives the element rules' bytes", "[ct][x86]", float, half_t,
                   bfloat16_t) {
  if (!qtl::detail::ct::has_avx2_f16c()) {
    return qtl_test::skip("no AVX2 + F16C on this CPU: the executor cannot run");
  }
  index_t const n = 23;
  index_t const k = 384;
  auto w = random_weights<TestType>(n, k, 99);
  w[static_cast<std::size_t>(7 * k + 200)] = qtl::from_float<TestType>(std::numeric_limits<float>::quiet_NaN());
  w[static_cast<std::size_t>(8 * k + 3)] = qtl::from_float<TestType>(std::numeric_limits<float>::infinity());
  for (auto level : {qtl::x86::level::avx2, qtl::x86::level::portable}) {
    qtl::x86::scoped_level_cap cap(level);
    for (int bits : {4, 8}) {
      for (bool sym : {true, false}) {
        for (index_t gs : {index_t{32}, index_t{128}, index_t{-1}, index_t{24}}) {
          qtl::ct_pack_options opt;
          opt.bits = bits;
          opt.group_size = gs;
          opt.symmetric = sym;
          opt.allow_nonfinite = true;
          CAPTURE(static_cast<int>(level), bits, sym, gs);
          check_equal(run(w, n, k, opt), reference(w, n, k, opt));
        }
      }
    }
  }
}

#else

TEST_CASE("x86 executor of ct_pack_quantize", "[ct][x86]") {
  qtl_test::skip("not an x86-64 GCC/Clang host build: no executor to compare");
}

#endif  // ^^^ QTL_X86 ^^^
