// static_assert-only checks of the Marlin index maps (qtl/element/marlin.hpp) against a literal
// port of the torch reference's permutation tables (vLLM marlin_utils_test.py `get_weight_perm`,
// `get_scale_perms`; docs/spec/marlin.md §3.2, §4.1), on every variant's 1024-code tile.

#include <array>
#include <cstdint>

#include <qtl/marlin.hpp>

namespace {

using qtl::marlin::act_width;
using qtl::marlin::layout;

// get_weight_perm(num_bits, is_a_8bit), token for token.
constexpr std::array<int, 1024> torch_weight_perm(int num_bits, bool is_a_8bit) {
  std::array<int, 1024> perm_list{};
  int n = 0;
  for (int i = 0; i < 32; ++i) {
    int perm1[16] = {};
    int m = 0;
    int const col = i / 4;
    if (is_a_8bit) {
      for (int block = 0; block < 2; ++block) {
        int const rows[8] = {4 * (i % 4),     4 * (i % 4) + 1,     4 * (i % 4) + 2,     4 * (i % 4) + 3,
                             4 * (i % 4 + 4), 4 * (i % 4 + 4) + 1, 4 * (i % 4 + 4) + 2, 4 * (i % 4 + 4) + 3};
        for (int row : rows) {
          perm1[m++] = 16 * row + col + 8 * block;
        }
      }
      for (int j = 0; j < 2; ++j) {
        for (int p = 0; p < 16; ++p) {
          perm_list[static_cast<std::size_t>(n++)] = perm1[p] + 512 * j;
        }
      }
    } else {
      for (int block = 0; block < 2; ++block) {
        int const rows[4] = {2 * (i % 4), 2 * (i % 4) + 1, 2 * (i % 4 + 4), 2 * (i % 4 + 4) + 1};
        for (int row : rows) {
          perm1[m++] = 16 * row + col + 8 * block;
        }
      }
      for (int j = 0; j < 4; ++j) {
        for (int p = 0; p < 8; ++p) {
          perm_list[static_cast<std::size_t>(n++)] = perm1[p] + 256 * j;
        }
      }
    }
  }
  int il[8] = {};
  int len = 0;
  if (num_bits == 4 && !is_a_8bit) {
    int const v[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    for (int x : v) il[len++] = x;
  } else if (num_bits == 8 && !is_a_8bit) {
    int const v[4] = {0, 2, 1, 3};
    for (int x : v) il[len++] = x;
  } else if (num_bits == 4) {
    int const v[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    for (int x : v) il[len++] = x;
  } else {
    int const v[4] = {0, 1, 2, 3};
    for (int x : v) il[len++] = x;
  }
  std::array<int, 1024> perm{};
  for (int r = 0; r < 1024 / len; ++r) {
    for (int c = 0; c < len; ++c) {
      perm[static_cast<std::size_t>(r * len + c)] = perm_list[static_cast<std::size_t>(r * len + il[c])];
    }
  }
  return perm;
}

static_assert(layout<4>::weight_perm() == torch_weight_perm(4, false));
static_assert(layout<8>::weight_perm() == torch_weight_perm(8, false));
static_assert(layout<4, act_width::a8>::weight_perm() == torch_weight_perm(4, true));
static_assert(layout<8, act_width::a8>::weight_perm() == torch_weight_perm(8, true));

// The first entries docs/spec/marlin.md §3.2 prints.
static_assert(layout<4>::weight_perm()[0] == 0 && layout<4>::weight_perm()[1] == 128 &&
              layout<4>::weight_perm()[2] == 8 && layout<4>::weight_perm()[3] == 136 &&
              layout<4>::weight_perm()[8] == 256 && layout<4>::weight_perm()[9] == 384);
static_assert(layout<8>::weight_perm()[2] == 16 && layout<8>::weight_perm()[4] == 8);
static_assert(layout<4, act_width::a8>::weight_perm()[1] == 256 &&
              layout<4, act_width::a8>::weight_perm()[8] == 8);
static_assert(layout<8, act_width::a8>::weight_perm()[4] == 256);

// dst is the exact inverse of src: a bijection between (word, slot) and (dk, dn).
template <class L>
constexpr bool inverse_exact() {
  std::array<bool, 1024> seen{};
  for (int w = 0; w < L::tile_words; ++w) {
    for (int t = 0; t < L::pack; ++t) {
      auto const p = L::src(w, t);
      if (p.dk < 0 || p.dk >= L::tile_k || p.dn < 0 || p.dn >= L::tile_n) return false;
      if (!(L::dst(p.dk, p.dn) == qtl::marlin::word_slot{w, t})) return false;
      auto& s = seen[static_cast<std::size_t>(p.dk * L::tile_n + p.dn)];
      if (s) return false;
      s = true;
    }
  }
  return true;
}
static_assert(inverse_exact<layout<4>>());
static_assert(inverse_exact<layout<8>>());
static_assert(inverse_exact<layout<4, act_width::a8>>());
static_assert(inverse_exact<layout<8, act_width::a8>>());

// Slot 0..7 of tile word 0 (docs/spec/marlin.md §3.3).
static_assert(layout<4>::src(0, 1) == qtl::marlin::tile_pos{8, 0} && layout<4>::src(0, 2) == qtl::marlin::tile_pos{0, 8} &&
              layout<4>::src(0, 7) == qtl::marlin::tile_pos{9, 8});
static_assert(layout<8>::src(0, 2) == qtl::marlin::tile_pos{1, 0} && layout<8>::src(2, 0) == qtl::marlin::tile_pos{0, 16});
static_assert(layout<4, act_width::a8>::src(0, 1) == qtl::marlin::tile_pos{16, 0} &&
              layout<4, act_width::a8>::src(4, 0) == qtl::marlin::tile_pos{4, 0});
static_assert(layout<8, act_width::a8>::src(1, 0) == qtl::marlin::tile_pos{16, 0} &&
              layout<8, act_width::a8>::src(2, 0) == qtl::marlin::tile_pos{0, 8});
// EX1's word 127 holds (6,55) (14,55) (6,63) (14,63) (7,55) (15,55) (7,63) (15,63).
static_assert(layout<4>::src(127, 0) == qtl::marlin::tile_pos{6, 55} && layout<4>::src(127, 7) == qtl::marlin::tile_pos{15, 63});

// The scale permutations: scale_source is the gather of get_scale_perms.
constexpr bool scale_perms_match() {
  for (int p = 0; p < 64; ++p) {
    int const i = p / 8, j = p % 8;  // scale_perm = [i + 8*j for i in range(8) for j in range(8)]
    if (qtl::marlin::scale_source(qtl::marlin::scale_perm_kind::grouped, p) != i + 8 * j) return false;
  }
  int const single[8] = {0, 1, 8, 9, 16, 17, 24, 25};
  for (int p = 0; p < 32; ++p) {  // [2*i + j for i in range(4) for j in single]
    if (qtl::marlin::scale_source(qtl::marlin::scale_perm_kind::single, p) != 2 * (p / 8) + single[p % 8]) return false;
  }
  return true;
}
static_assert(scale_perms_match());
static_assert(qtl::marlin::scale_kind(128, 128, act_width::a16) == qtl::marlin::scale_perm_kind::single);
static_assert(qtl::marlin::scale_kind(256, 128, act_width::a16) == qtl::marlin::scale_perm_kind::grouped);
static_assert(qtl::marlin::scale_kind(256, -1, act_width::a16) == qtl::marlin::scale_perm_kind::single);
static_assert(qtl::marlin::scale_kind(256, 128, act_width::a8) == qtl::marlin::scale_perm_kind::single);

// Zero points: the closed form against marlin_zero_points' reshapes (scale_perm, then the
// interleave, then pack_cols) on one 64-column chunk.
template <int Bits, act_width A>
constexpr bool zero_points_match() {
  constexpr int pf = 32 / Bits;
  int const il4[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  int const il8[4] = {0, 2, 1, 3};
  for (int w = 0; w < 64 / pf; ++w) {
    for (int t = 0; t < pf; ++t) {
      int const e = A == act_width::a8 ? t : (Bits == 4 ? il4[t] : il8[t]);
      int const q = pf * w + e;                   // position after scale_perm
      int const src = q / 8 + 8 * (q % 8);        // scale_perm[q]
      if (qtl::marlin::zero_point_source<Bits, A>(w, t) != src) return false;
    }
  }
  return true;
}
static_assert(zero_points_match<4, act_width::a16>());
static_assert(zero_points_match<8, act_width::a16>());
static_assert(zero_points_match<4, act_width::a8>());
static_assert(zero_points_match<8, act_width::a8>());

// AWQ's order and its undo are inverse.
static_assert(qtl::marlin::awq_slot<4>(qtl::marlin::awq_column<4>(3)) == 3 && qtl::marlin::awq_column<4>(1) == 2 &&
              qtl::marlin::awq_slot<4>(1) == 4 && qtl::marlin::awq_slot<8>(1) == 2);

// EX1 in constant evaluation: q = (k+n) % 16, K = 16, N = 64, through the compile-time shape API.
using ex1 = qtl::marlin::fixed_shape<4, act_width::a16, 16, 64>;
constexpr std::array<std::int32_t, ex1::gptq_words> ex1_qweight() {
  std::array<std::int32_t, ex1::gptq_words> q{};
  for (int r = 0; r < 2; ++r)
    for (int n = 0; n < 64; ++n) {
      std::uint32_t w = 0;
      for (int j = 0; j < 8; ++j) w |= static_cast<std::uint32_t>((8 * r + j + n) % 16) << (4 * j);
      q[static_cast<std::size_t>(r * 64 + n)] = static_cast<std::int32_t>(w);
    }
  return q;
}
constexpr auto ex1_marlin = qtl::marlin::repack_gptq<ex1>(ex1_qweight());
static_assert(static_cast<std::uint32_t>(ex1_marlin[0]) == 0x19910880u);
static_assert(static_cast<std::uint32_t>(ex1_marlin[4]) == 0x3bb32aa2u);
static_assert(static_cast<std::uint32_t>(ex1_marlin[127]) == 0xe66ed55du);
static_assert(qtl::marlin::unrepack_gptq<ex1>(ex1_marlin) == ex1_qweight());
static_assert(static_cast<std::uint32_t>(ex1_qweight()[0]) == 0x76543210u);

}  // namespace
