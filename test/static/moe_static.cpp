// Compile-time checks of the trtllm-gen row maps of qtl/moe.hpp: the vectors and byte offsets of
// docs/spec/blockscale.md §8.2-§8.3 (computed there by blockscale_verify.py from flashinfer's
// index helpers), bijection, and the half swap. Building this file is the test.
#include <qtl/blockscale.hpp>
#include <qtl/moe.hpp>

namespace {

using qtl::index_t;

// §8.2: shuffle_rows(64, etm=128)[0:32] and shuffle_rows(64, etm=64)[0:16].
constexpr index_t shuffle128[32] = {0, 4, 8,  12, 16, 20, 24, 28, 1, 5, 9,  13, 17, 21, 25, 29,
                                    2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31};
constexpr index_t shuffle64[16] = {0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15};
constexpr bool prefix_matches() {
  for (index_t n = 0; n < 32; ++n) {
    if (qtl::w2_row_source<128>(n) != shuffle128[n] || qtl::w2_row_source<128>(n + 32) != shuffle128[n] + 32) {
      return false;
    }
  }
  for (index_t n = 0; n < 16; ++n) {
    if (qtl::w2_row_source<64>(n) != shuffle64[n]) {
      return false;
    }
  }
  return true;
}
static_assert(prefix_matches());
static_assert(qtl::shuffle_block_rows<128> == 32 && qtl::shuffle_block_rows<256> == 32 &&
              qtl::shuffle_block_rows<64> == 16);

// §8.2: gated w3_w1 permutation, I = 64 (M = 128), first 40 entries.
constexpr index_t gated[40] = {0, 2,  4,  6,  8,  10, 12, 14, 64, 66, 68, 70, 72, 74, 76, 78, 1,  3,  5,  7,
                               9, 11, 13, 15, 65, 67, 69, 71, 73, 75, 77, 79, 16, 18, 20, 22, 24, 26, 28, 30};
constexpr bool gated_matches() {
  for (index_t n = 0; n < 40; ++n) {
    if (qtl::w3w1_row_source<128>(n, 128, true) != gated[n]) {
      return false;
    }
  }
  return true;
}
static_assert(gated_matches());
static_assert(qtl::w3w1_row_source<128>(5, 128, false) == qtl::w2_row_source<128>(5));

// §8.3: where a source (row, col) of the GEMM1 scales (I = 64, H = 64: [128 x 4], rows [w3; w1])
// lands in the expert's 128x4 buffer, and GEMM2's (H = 128, I = 64).
template <bool Gemm1>
constexpr index_t scale_byte(index_t src_row, index_t col) {
  for (index_t n = 0; n < 128; ++n) {
    index_t const s = Gemm1 ? qtl::w3w1_row_source<128>(n, 128, true) : qtl::w2_row_source<128>(n);
    if (s == src_row) {
      return qtl::blockscale_offset(n, col, 4);
    }
  }
  return -1;
}
static_assert(scale_byte<true>(0, 0) == 0 && scale_byte<true>(0, 3) == 3 && scale_byte<true>(64, 0) == 128);
static_assert(scale_byte<true>(1, 0) == 256 && scale_byte<true>(65, 2) == 386 && scale_byte<true>(2, 1) == 17);
static_assert(scale_byte<true>(31, 0) == 372 && scale_byte<true>(32, 0) == 8 && scale_byte<true>(63, 3) == 383);
static_assert(scale_byte<true>(127, 3) == 511);
static_assert(scale_byte<false>(0, 0) == 0 && scale_byte<false>(1, 0) == 128 && scale_byte<false>(4, 1) == 17);
static_assert(scale_byte<false>(8, 0) == 32 && scale_byte<false>(31, 3) == 499 && scale_byte<false>(32, 0) == 4);
static_assert(scale_byte<false>(100, 2) == 30 && scale_byte<false>(127, 3) == 511);

// Every map is a bijection of [0, M).
template <int Etm>
constexpr bool is_bijection(index_t m, int map) {
  bool seen[1024] = {};
  for (index_t n = 0; n < m; ++n) {
    index_t const s = map == 0   ? qtl::w2_row_source<Etm>(n)
                      : map == 1 ? qtl::w3w1_row_source<Etm>(n, m, true)
                                 : qtl::swap_halves_source(n, m);
    if (s < 0 || s >= m || seen[s]) {
      return false;
    }
    seen[s] = true;
  }
  return true;
}
static_assert(is_bijection<128>(1024, 0) && is_bijection<128>(1024, 1) && is_bijection<128>(1024, 2));
static_assert(is_bijection<64>(496, 0) && is_bijection<64>(496, 1));

// swap_w13_to_w31 on rows [g0, g1, u0, u1] -> [u0, u1, g0, g1]; twice is the identity.
static_assert(qtl::swap_halves_source(0, 4) == 2 && qtl::swap_halves_source(3, 4) == 1);
static_assert(qtl::swap_halves_source(qtl::swap_halves_source(7, 10), 10) == 7);

}  // namespace
