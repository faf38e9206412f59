// Lay out NVFP4 block scales for a Blackwell block-scaled GEMM and print where a few land.
//
// A [130, 80] NVFP4 weight has one E4M3 scale per 16 elements: a [130, 5] scale matrix. The GEMM
// reads them in the 128x4 layout: rows padded to 256, K-blocks to 8, 512-byte tiles of 128 rows x
// 4 K-blocks. qtl::blockscale_offset says where scale (m, k) goes; qtl::swizzle_blockscale moves
// a whole matrix (padding zeroed) and qtl::unswizzle_blockscale brings it back.
#include <cstdint>
#include <cstdio>
#include <qtl/blockscale.hpp>
#include <qtl/moe.hpp>
#include <vector>

int main() {
  using qtl::index_t;
  index_t const rows = 130;
  index_t const k_blocks = 80 / 16;
  std::vector<std::uint8_t> scales(static_cast<std::size_t>(rows * k_blocks));
  for (index_t m = 0; m < rows; ++m) {
    for (index_t k = 0; k < k_blocks; ++k) {
      scales[static_cast<std::size_t>(m * k_blocks + k)] =
          static_cast<std::uint8_t>(0x30 + (m + k) % 64);  // E4M3 bytes
    }
  }
  auto const swizzled = qtl::swizzle_blockscale(qtl::make_view(scales.data(), rows, k_blocks));
  index_t const padded_cols = swizzled.extent(1);
  std::printf("scales [%lld, %lld] -> 128x4 layout [%lld, %lld] (%lld bytes)\n", static_cast<long long>(rows),
              static_cast<long long>(k_blocks), static_cast<long long>(swizzled.extent(0)),
              static_cast<long long>(padded_cols), static_cast<long long>(swizzled.size()));
  struct probe {
    index_t m, k;
  };
  int bad = 0;
  for (auto const [m, k] : {probe{0, 0}, probe{0, 4}, probe{1, 0}, probe{32, 0}, probe{33, 2}, probe{127, 3},
                            probe{128, 0}, probe{129, 4}}) {
    index_t const off = qtl::blockscale_offset(m, k, padded_cols);
    std::uint8_t const byte = swizzled.storage()[static_cast<std::size_t>(off)];
    std::uint8_t const want = scales[static_cast<std::size_t>(m * k_blocks + k)];
    std::printf("  scale (m=%3lld, k=%lld) -> byte %4lld  (tile %lld, line %2lld, slot %lld)  0x%02X\n",
                static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(off),
                static_cast<long long>(off / 512), static_cast<long long>(off % 512 / 16),
                static_cast<long long>(off % 16 / 4), byte);
    bad += byte != want;
  }
  // Padding: rows 130..255 and K-blocks 5..7 read as zero scales.
  index_t const pad = qtl::blockscale_offset(200, 6, padded_cols);
  std::printf("  padding (m=200, k=6) -> byte %lld = 0x%02X\n", static_cast<long long>(pad),
              swizzled.storage()[static_cast<std::size_t>(pad)]);
  bad += swizzled.storage()[static_cast<std::size_t>(pad)] != 0;

  auto const back = qtl::unswizzle_blockscale(swizzled.view(), rows, k_blocks);
  bad += back.storage() != scales;
  std::printf("unswizzle_blockscale gives the scales back: %s\n", back.storage() == scales ? "yes" : "NO");

  // The trtllm-gen FP4 MoE kernels also shuffle rows: GEMM1 output row n reads [up; gate] row source(n).
  auto const gemm1 = qtl::w3w1_row_indices(128, /*gated=*/true);
  std::printf("trtllm-gen GEMM1 rows 0..11 read:");
  for (int n = 0; n < 12; ++n) {
    std::printf(" %d", gemm1[static_cast<std::size_t>(n)]);
  }
  std::printf("  (rows 64.. are the gate half)\n");
  return bad == 0 ? 0 : 1;
}
