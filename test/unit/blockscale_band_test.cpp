// The 128x4 band executors of qtl/detail/blockscale_band.hpp (portable, SSE2, AVX2, AVX-512; each
// one this CPU runs) against the reference loops of qtl/blockscale.hpp, byte for byte: every M and
// K around the tile and vector widths (padding rows, ragged K-tiles, whole 16-tile blocks with
// leftovers), batches, unaligned pointers, row strides with gaps, and bands of arbitrary row
// pointers (permuted and repeated, as the MoE preparation gathers them).
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <qtl/blockscale.hpp>
#include <random>
#include <vector>

namespace {

using qtl::index_t;
using qtl::detail::band_isa;
using qtl::detail::byte_t;
using layout = qtl::layout_128x4;

std::vector<band_isa> levels() {
  std::vector<band_isa> v;
  for (band_isa l : {band_isa::portable, band_isa::sse2, band_isa::avx2, band_isa::avx512}) {
    if (l <= qtl::detail::best_band_isa()) {
      v.push_back(l);
    }
  }
  if (qtl::detail::best_band_isa() != band_isa::avx512) {
    WARN("this CPU does not run every executor; only the ones up to its best are compared");
  }
  return v;
}

std::vector<byte_t> random_bytes(std::size_t n, std::mt19937& rng) {
  std::vector<byte_t> v(n);
  for (auto& b : v) {
    b = static_cast<byte_t>(rng());
  }
  return v;
}

constexpr index_t ms[] = {1, 2, 31, 32, 33, 127, 128, 129, 200, 256, 383};
constexpr index_t ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 28, 31, 32, 33, 36, 60, 63, 64, 65, 67, 68, 96, 100, 131};

TEST_CASE("swizzle and unswizzle executors equal the reference loops", "[blockscale][band]") {
  std::mt19937 rng(7);
  for (band_isa const level : levels()) {
    for (index_t const batch : {1, 3}) {
      for (index_t const m : ms) {
        for (index_t const k : ks) {
          index_t const gap = static_cast<index_t>(rng() % 3) * 5;  // row stride k, k + 5 or k + 10
          index_t const misalign = static_cast<index_t>(rng() % 8);
          index_t const mp = layout::pad_rows(m);
          index_t const kp = layout::pad_cols(k);
          INFO("level " << static_cast<int>(level) << ", B " << batch << ", M " << m << ", K " << k << ", row gap "
                        << gap << ", offset " << misalign);
          // Swizzle from a strided, misaligned input into a misaligned output.
          std::vector<byte_t> in = random_bytes(static_cast<std::size_t>(misalign + batch * m * (k + gap)), rng);
          qtl::view<byte_t, 3> src;
          src.data = in.data() + misalign;
          src.extent[0] = batch;
          src.extent[1] = m;
          src.extent[2] = k;
          src.stride[0] = m * (k + gap);
          src.stride[1] = k + gap;
          src.stride[2] = 1;
          std::size_t const n_out = static_cast<std::size_t>(batch * mp * kp);
          std::vector<byte_t> want(n_out + 64, 0xEE);
          std::vector<byte_t> got(n_out + 64, 0xEE);
          qtl::detail::swizzle_generic<layout>(qtl::view<byte_t const, 3>(src), want.data() + misalign, mp, kp);
          qtl::detail::swizzle_128x4(qtl::view<byte_t const, 3>(src), got.data() + misalign, mp, kp, level);
          REQUIRE(got == want);

          // Unswizzle (every tile byte random, padding included) into a strided, misaligned output
          // whose gaps must stay untouched.
          std::vector<byte_t> tiles = random_bytes(n_out + 8, rng);
          std::vector<byte_t> back_want(in.size(), 0x5A);
          std::vector<byte_t> back_got(in.size(), 0x5A);
          qtl::view<byte_t, 3> dst_want = src;
          dst_want.data = back_want.data() + misalign;
          qtl::view<byte_t, 3> dst_got = src;
          dst_got.data = back_got.data() + misalign;
          REQUIRE(qtl::detail::disjoint_unit_rows(dst_got));
          qtl::detail::unswizzle_generic<layout>(tiles.data() + misalign % 8, dst_want, mp, kp);
          qtl::detail::unswizzle_128x4(tiles.data() + misalign % 8, dst_got, mp, level);
          REQUIRE(back_got == back_want);
        }
      }
    }
  }
}

TEST_CASE("band executors on arbitrary row pointers (permuted, repeated)", "[blockscale][band]") {
  std::mt19937 rng(11);
  for (band_isa const level : levels()) {
    for (index_t const k : ks) {
      index_t const kp = layout::pad_cols(k);
      INFO("level " << static_cast<int>(level) << ", K " << k);
      std::vector<byte_t> pool = random_bytes(static_cast<std::size_t>(200 * k + 3), rng);
      byte_t const* rows[128];
      for (auto& r : rows) {
        r = pool.data() + 1 + static_cast<index_t>(rng() % 200) * k;
      }
      std::vector<byte_t> want(static_cast<std::size_t>(128 * kp), 0xEE);
      for (index_t r = 0; r < 128; ++r) {
        for (index_t c = 0; c < kp; ++c) {
          want[static_cast<std::size_t>(qtl::blockscale_offset<layout>(r, c, kp))] = c < k ? rows[r][c] : byte_t{0};
        }
      }
      std::vector<byte_t> got(want.size() + 1, 0xEE);
      qtl::detail::swizzle_band_128x4(rows, k, got.data() + 1, level);
      REQUIRE(std::vector<byte_t>(got.begin() + 1, got.end()) == want);

      // And back into 128 separate rows in shuffled order.
      std::vector<byte_t> out(static_cast<std::size_t>(128 * (k + 1)), 0x5A);
      byte_t* out_rows[128];
      for (index_t r = 0; r < 128; ++r) {
        out_rows[r] = out.data() + ((r * 37) % 128) * (k + 1);
      }
      qtl::detail::unswizzle_band_128x4(got.data() + 1, k, out_rows, level);
      for (index_t r = 0; r < 128; ++r) {
        for (index_t c = 0; c < k; ++c) {
          REQUIRE(out_rows[r][c] == rows[r][c]);
        }
        REQUIRE(out_rows[r][k] == 0x5A);
      }
    }
  }
}

}  // namespace
