// Compile-time checks of qtl/blockscale.hpp: the worked offsets of docs/spec/blockscale.md §8.1
// (computed there by blockscale_verify.py from the 6-D permute of sglang's swizzle_blockscale),
// the inverse, and the tile shapes. Building this file is the test.
#include <qtl/blockscale.hpp>

namespace {

using qtl::blockscale_offset;
using qtl::blockscale_position_of;
using qtl::layout_128x4;
using qtl::layout_8x16;
using qtl::layout_8x4;
using qtl::layout_linear;

// Tile shapes: 128x4 = 32 lines x (4 row groups x 4 K-blocks), 512 bytes.
static_assert(layout_128x4::tile_rows == 128 && layout_128x4::tile_cols == 4 && layout_128x4::tile_size == 512);
static_assert(layout_8x4::tile_size == 32 && layout_8x16::tile_size == 128 && layout_linear::tile_size == 1);
static_assert(qtl::blockscale_layout_type<layout_128x4> && !qtl::blockscale_layout_type<int>);
static_assert(qtl::blockscale_byte<unsigned char> && !qtl::blockscale_byte<float>);

// §8.1: scale matrix 130 x 5 -> padded 256 x 8 (2048 bytes, 2 K-tiles).
static_assert(layout_128x4::pad_rows(130) == 256 && layout_128x4::pad_cols(5) == 8);
static_assert(layout_128x4::pad_rows(0) == 0 && layout_128x4::pad_rows(128) == 128);
constexpr qtl::index_t kp = 8;
static_assert(blockscale_offset(0, 0, kp) == 0);
static_assert(blockscale_offset(0, 1, kp) == 1);
static_assert(blockscale_offset(0, 3, kp) == 3);
static_assert(blockscale_offset(0, 4, kp) == 512);
static_assert(blockscale_offset(1, 0, kp) == 16);
static_assert(blockscale_offset(31, 3, kp) == 499);
static_assert(blockscale_offset(32, 0, kp) == 4);
static_assert(blockscale_offset(33, 2, kp) == 22);
static_assert(blockscale_offset(64, 0, kp) == 8);
static_assert(blockscale_offset(96, 3, kp) == 15);
static_assert(blockscale_offset(127, 3, kp) == 511);
static_assert(blockscale_offset(127, 4, kp) == 1020);
static_assert(blockscale_offset(128, 0, kp) == 1024);
static_assert(blockscale_offset(129, 1, kp) == 1041);
static_assert(blockscale_offset(129, 4, kp) == 1552);
static_assert(blockscale_offset(130, 0, kp) == 1056);  // padding
static_assert(blockscale_offset(255, 7, kp) == 2047);  // padding, the last byte
// (Mp, Kp) view of the flat buffer: (129,4) -> row 194, col 0.
static_assert(blockscale_offset(129, 4, kp) / kp == 194 && blockscale_offset(129, 4, kp) % kp == 0);
// B = 2, same shape: (b=1, m=129, k=4) -> 2048 + 1552.
static_assert(blockscale_offset(1, 129, 4, 256, kp) == 3600);
// 8x4 layout, same matrix (M 130 -> 136, Kb 5 -> 8): (9, 5) -> 101.
static_assert(blockscale_offset<layout_8x4>(9, 5, layout_8x4::pad_cols(5)) == 101);

// The project's other case shapes: 3x5 -> 128x8; 130x7 -> 256x8; 200x33 -> 256x36 (9 K-tiles).
static_assert(blockscale_offset(1, 0, 8) == 16 && blockscale_offset(0, 4, 8) == 512 &&
              blockscale_offset(2, 4, 8) == 544);
static_assert(blockscale_offset(0, 6, 8) == 514 && blockscale_offset(33, 5, 8) == 533 &&
              blockscale_offset(128, 6, 8) == 1538 && blockscale_offset(129, 6, 8) == 1554);
static_assert(layout_128x4::pad_cols(33) == 36);
static_assert(blockscale_offset(0, 32, 36) == 4096 && blockscale_offset(64, 8, 36) == 1032 &&
              blockscale_offset(150, 17, 36) == 7009 && blockscale_offset(199, 32, 36) == 8824);

// The sm100/sm103 CuTe atom ((32,4),(SFVec,4)):((16,4),(0,1)) inside one tile.
static_assert(layout_128x4::offset_in_tile(127, 3) == 31 * 16 + 3 * 4 + 3);
// linear layout is row-major: m * Kb + k.
static_assert(blockscale_offset<layout_linear>(7, 3, 5) == 38);
// R8c16: ((m/8)*Kb/16 + k/16)*128 + (m%8)*16 + k%16 with Kb = 32.
static_assert(blockscale_offset<layout_8x16>(13, 21, 32) == (1 * 2 + 1) * 128 + 5 * 16 + 5);

// The inverse returns every position of a padded 256 x 12 buffer, for every layout.
template <class Layout>
constexpr bool inverse_holds(qtl::index_t rows, qtl::index_t cols) {
  qtl::index_t const mp = Layout::pad_rows(rows);
  qtl::index_t const kbp = Layout::pad_cols(cols);
  for (qtl::index_t m = 0; m < mp; ++m) {
    for (qtl::index_t k = 0; k < kbp; ++k) {
      qtl::index_t const off = blockscale_offset<Layout>(m, k, kbp);
      if (off < 0 || off >= mp * kbp || blockscale_position_of<Layout>(off, kbp) != qtl::blockscale_position{m, k}) {
        return false;
      }
    }
  }
  return true;
}
static_assert(inverse_holds<layout_128x4>(256, 12));
static_assert(inverse_holds<layout_8x4>(24, 12));
static_assert(inverse_holds<layout_8x16>(16, 40));
static_assert(inverse_holds<layout_linear>(5, 7));

}  // namespace
