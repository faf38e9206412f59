// The streaming row copies of qtl/moe.hpp's weight gather (16-byte SSE2 and, where the CPU runs
// AVX-512F, 64-byte streaming stores) against memcpy: every destination alignment around the
// 64-byte boundary, lengths that leave 16-byte heads and tails, unaligned sources, and the
// fallbacks (destinations not 16-byte aligned, lengths not multiples of 16).
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <qtl/moe.hpp>
#include <random>
#include <vector>

namespace {

using qtl::detail::byte_t;
using qtl::detail::row_store;

template <row_store How>
void compare_copies(std::mt19937& rng) {
  for (std::size_t const n : {0, 1, 15, 16, 48, 64, 80, 112, 128, 130, 752, 768, 2048, 2064}) {
    for (std::size_t dst_off = 0; dst_off < 80; dst_off += (dst_off % 16 == 0 ? 3 : 13)) {
      for (std::size_t src_off = 0; src_off < 5; ++src_off) {
        INFO("n " << n << ", destination offset " << dst_off << " from 64-byte alignment, source offset " << src_off);
        std::vector<byte_t> src(n + 8);
        for (auto& b : src) {
          b = static_cast<byte_t>(rng());
        }
        std::vector<byte_t> buf(n + 256, 0xA5);
        auto const a = reinterpret_cast<std::uintptr_t>(buf.data());
        byte_t* const dst = buf.data() + (64 - a % 64) % 64 + dst_off;
        std::vector<byte_t> want = buf;
        std::memcpy(want.data() + (dst - buf.data()), src.data() + src_off, n);
        qtl::detail::copy_row_bytes<How>(dst, src.data() + src_off, n);
        qtl::detail::band_stream_fence();
        REQUIRE(buf == want);
      }
    }
  }
}

TEST_CASE("streaming row copies equal memcpy", "[moe][stream]") {
  std::mt19937 rng(3);
  compare_copies<row_store::plain>(rng);
#if QTL_X86
  compare_copies<row_store::stream16>(rng);
  if (qtl::detail::best_band_isa() == qtl::detail::band_isa::avx512) {
    compare_copies<row_store::stream64>(rng);
  } else {
    WARN("no AVX-512F: the 64-byte streaming copy is not compared");
  }
#endif  // ^^^ QTL_X86 ^^^
}

}  // namespace
