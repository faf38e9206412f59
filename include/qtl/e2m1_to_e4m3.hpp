#pragma once
/// \file
/// DeepSeek-V4's lossless MXFP4 -> FP8-block cast on the host: sglang `cast_e2m1fn_to_e4m3fn`
/// (`SGLANG_DSV4_FP4_DEQUANT`), the function of DeepSeek's own `inference/convert.py`, bit for bit
/// (golden cases 2200.. recorded from sglang's; `docs/spec/deepseek_v4.md`). The element rules are
/// <qtl/element/e2m1_to_e4m3.hpp>.
///
///   x          [G, N, K/2]   e2m1 codes, element 2j in the low nibble of byte j (I8 or U8)
///   scale      [G, N, K/32]  E8M0 codes, one per 1x32 group of a row
///   out        [G, N, K]     e4m3fn codes
///   out_scale  [G, ceil(N/BN), ceil(K/BK)]  E8M0 codes: per block, its largest group scale / 2^6
///
/// G = 1 for one expert's [N, K] weight; stacked experts are cast one matrix at a time. The engines
/// take N and K multiples of 128; here the last block row and column may be partial, and are what
/// the engines give for the weight zero-padded to whole blocks (codes 0, scales 0), cut back.
/// Nothing is written unless every block casts exactly: a block with a NaN scale (0xFF), with a
/// nonzero element whose group scale lies too far below the block's largest (`e2m1_to_e4m3_exact`:
/// more than 2^14 for every code), or whose largest scale is below 2^-121 (its scale would be below
/// E8M0's range) is refused with a `value_error` naming it, where the engines write an inexact
/// (or NaN) block without a word.

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <qtl/convert.hpp>
#include <qtl/element/e2m1_to_e4m3.hpp>
#include <qtl/error.hpp>
#include <qtl/numeric.hpp>
#include <qtl/x86/e2m1_to_e4m3.hpp>

namespace qtl::convert {

namespace detail {

/// The cast's tables, indexed by `table_index(shift)`: index 0 (every shift below
/// `lossless_min_shift`, where only zeros are exact) all zeros, index i the shift
/// `lossless_min_shift + i - 1`. `codes` has the e4m3fn code of each e2m1 code (the x86
/// executor's `pshufb` tables), `pairs` the two of each byte of two e2m1 codes (the low nibble's
/// first, little-endian): the portable loop casts a group in 16 lookups.
struct e2m1_tables {
  static constexpr int size = lossless_max_shift - lossless_min_shift + 2;
  std::uint8_t codes[size][16] = {};
  std::array<std::array<std::uint16_t, 256>, size> pairs{};

  e2m1_tables() {
    for (int i = 1; i < size; ++i) {
      for (int c = 0; c < 16; ++c) {
        codes[i][c] = e2m1_to_e4m3(static_cast<std::uint8_t>(c), lossless_min_shift + i - 1);
      }
      for (int b = 0; b < 256; ++b) {
        pairs[i][b] = static_cast<std::uint16_t>(codes[i][b & 15] | codes[i][b >> 4] << 8);
      }
    }
  }
  static e2m1_tables const& get() {
    static e2m1_tables const t;
    return t;
  }
  static constexpr std::uint8_t table_index(int shift) {
    return static_cast<std::uint8_t>(shift < lossless_min_shift ? 0 : shift - lossless_min_shift + 1);
  }
};

/// The scale codes of one block row (rows n0..n1 of one matrix's [N, K/32] `scale`): per group
/// column j the largest and least code over the rows, then per block its largest (`block_max`, a
/// NaN scale 0xFF being the max) and least. Column-wise, so the loops vectorize.
struct block_row_scales {
  std::vector<std::uint8_t> col_max, col_min, block_max, block_min;

  explicit block_row_scales(block_grid const& g)
      : col_max(static_cast<std::size_t>(g.k / e2m1_scale_group)),
        col_min(col_max.size()),
        block_max(static_cast<std::size_t>(g.k_blocks())),
        block_min(block_max.size()) {}

  void read(std::uint8_t const* scale, block_grid const& g, std::int64_t n0, std::int64_t n1) {
    std::size_t const groups = col_max.size();
    std::size_t const per_block = static_cast<std::size_t>(g.block.k / e2m1_scale_group);
    std::memcpy(col_max.data(), scale + n0 * static_cast<std::int64_t>(groups), groups);
    std::memcpy(col_min.data(), col_max.data(), groups);
    for (std::int64_t r = n0 + 1; r < n1; ++r) {
      std::uint8_t const* row = scale + r * static_cast<std::int64_t>(groups);
      for (std::size_t j = 0; j < groups; ++j) {
        col_max[j] = row[j] > col_max[j] ? row[j] : col_max[j];
        col_min[j] = row[j] < col_min[j] ? row[j] : col_min[j];
      }
    }
    for (std::size_t bj = 0; bj < block_max.size(); ++bj) {
      std::size_t const j1 = (bj + 1) * per_block < groups ? (bj + 1) * per_block : groups;
      std::uint8_t hi = 0, lo = 0xFF;
      for (std::size_t j = bj * per_block; j < j1; ++j) {
        hi = col_max[j] > hi ? col_max[j] : hi;
        lo = col_min[j] < lo ? col_min[j] : lo;
      }
      block_max[bj] = hi;
      block_min[bj] = lo;
    }
  }
};

[[noreturn]] inline void refuse_block(block_grid const& g, std::int64_t gi, std::int64_t n0, std::int64_t k0,
                                      std::string const& why) {
  std::int64_t const n1 = n0 + g.block.n < g.n ? n0 + g.block.n : g.n;
  std::int64_t const k1 = k0 + g.block.k < g.k ? k0 + g.block.k : g.k;
  throw value_error("qtl::convert::cast_e2m1fn_to_e4m3fn: block (" + std::to_string(n0 / g.block.n) + ", " +
                    std::to_string(k0 / g.block.k) + ")" +
                    (g.groups > 1 ? " of matrix " + std::to_string(gi) : std::string()) + " (rows " +
                    std::to_string(n0) + ".." + std::to_string(n1 - 1) + ", columns " + std::to_string(k0) + ".." +
                    std::to_string(k1 - 1) + ") cannot be cast to e4m3 losslessly: " + why);
}

inline std::string pow2_text(int e) { return "2^" + std::to_string(e - 127); }

inline std::string e2m1_text(std::uint8_t code) {
  char const* const m[8] = {"0", "0.5", "1", "1.5", "2", "3", "4", "6"};
  return std::string(code & 8u ? "-" : "") + m[code & 7u];
}

/// Throws for the first element of block (n0, k0) of matrix `gi` (`xm`, `sm` its codes and
/// scales) that does not cast exactly, its largest scale code being `emax`.
inline void check_block(std::uint8_t const* xm, std::uint8_t const* sm, block_grid const& g, std::int64_t gi,
                        std::int64_t n0, std::int64_t k0, std::uint8_t emax) {
  std::int64_t const groups = g.k / e2m1_scale_group;
  std::int64_t const n1 = n0 + g.block.n < g.n ? n0 + g.block.n : g.n;
  std::int64_t const k1 = k0 + g.block.k < g.k ? k0 + g.block.k : g.k;
  for (std::int64_t r = n0; r < n1; ++r) {
    for (std::int64_t col = k0; col < k1; ++col) {
      std::uint8_t const e = sm[r * groups + col / e2m1_scale_group];
      auto const code = static_cast<std::uint8_t>(xm[r * (g.k / 2) + col / 2] >> (col % 2 * 4) & 15);
      if (e2m1_to_e4m3_exact(code, e, emax)) {
        continue;
      }
      std::string const elem = "element (" + std::to_string(r) + ", " + std::to_string(col) + "), e2m1 " +
                               e2m1_text(code) + " with scale " + pow2_text(e);
      if (emax < lossless_max_shift) {
        refuse_block(g, gi, n0, k0,
                     "its largest scale " + pow2_text(emax) + " is below 2^-121, so its scale " +
                         pow2_text(int(emax) - lossless_max_shift) + " is no E8M0 value, and " + elem + " is not zero");
      }
      refuse_block(g, gi, n0, k0,
                   elem + " lies 2^" + std::to_string(int(emax) - int(e)) + " below the block's largest scale " +
                       pow2_text(emax) + "; e4m3 holds it within 2^" +
                       std::to_string(lossless_max_shift - e2m1_min_exact_shift(code)) + " (every code within 2^14)");
    }
  }
}

/// Throws for the first block of `g` that does not cast exactly (see the file comment). Only the
/// blocks whose least scale lies more than 2^14 below their largest (or whose largest is below
/// 2^-121) have their codes read: down to there every code is exact.
inline void check_lossless(std::span<std::uint8_t const> x, std::span<std::uint8_t const> scale, block_grid const& g) {
  std::int64_t const groups = g.k / e2m1_scale_group;
  block_row_scales rs(g);
  for (std::int64_t gi = 0; gi < g.groups; ++gi) {
    std::uint8_t const* sm = scale.data() + gi * g.n * groups;
    std::uint8_t const* xm = x.data() + gi * g.n * (g.k / 2);
    for (std::int64_t n0 = 0; n0 < g.n; n0 += g.block.n) {
      rs.read(sm, g, n0, n0 + g.block.n < g.n ? n0 + g.block.n : g.n);
      for (std::size_t bj = 0; bj < rs.block_max.size(); ++bj) {
        std::uint8_t const m = rs.block_max[bj];
        std::int64_t const k0 = static_cast<std::int64_t>(bj) * g.block.k;
        if (m == 0xFF) {
          refuse_block(g, gi, n0, k0, "a scale is NaN (E8M0 0xFF)");
        }
        if (m < lossless_max_shift || int(rs.block_min[bj]) < int(m) - lossless_max_shift - 8) {
          check_block(xm, sm, g, gi, n0, k0, m);
        }
      }
    }
  }
}

/// The cast of one matrix (or a slice of its whole block rows: `g`), once checked.
inline void cast_matrix(std::uint8_t const* x, std::uint8_t const* scale, block_grid const& g, std::uint8_t* out,
                        std::uint8_t* out_scale) {
  auto const& t = e2m1_tables::get();
  std::int64_t const groups = g.k / e2m1_scale_group;
  std::int64_t const per_block = g.block.k / e2m1_scale_group;
  std::int64_t const kb = g.k_blocks();
  block_row_scales rs(g);
  std::vector<int> base(static_cast<std::size_t>(groups));  // per group: its block's scale + 1 - min shift
  std::vector<std::uint8_t> index(static_cast<std::size_t>(groups));
  for (std::int64_t n0 = 0; n0 < g.n; n0 += g.block.n) {
    std::int64_t const n1 = n0 + g.block.n < g.n ? n0 + g.block.n : g.n;
    rs.read(scale, g, n0, n1);
    for (std::int64_t bj = 0; bj < kb; ++bj) {
      out_scale[n0 / g.block.n * kb + bj] = lossless_block_scale(rs.block_max[static_cast<std::size_t>(bj)]);
    }
    for (std::int64_t j = 0; j < groups; ++j) {
      base[static_cast<std::size_t>(j)] = out_scale[n0 / g.block.n * kb + j / per_block] + lossless_min_shift - 1;
    }
    for (std::int64_t r = n0; r < n1; ++r) {
      std::uint8_t const* xr = x + r * (g.k / 2);
      std::uint8_t* o = out + r * g.k;
      std::uint8_t const* sr = scale + r * groups;
      for (std::int64_t j = 0; j < groups; ++j) {
        // e2m1_tables::table_index(shift), shift = scale - block scale
        int const i = int(sr[j]) - base[static_cast<std::size_t>(j)];
        index[static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(i < 0 ? 0 : i);
      }
      for (std::int64_t j = qtl::detail::e2m1_x86::cast_row(xr, t.codes, index.data(), groups, o); j < groups; ++j) {
        auto const& pairs = t.pairs[index[static_cast<std::size_t>(j)]];
        std::uint8_t const* xj = xr + j * (e2m1_scale_group / 2);
        std::uint8_t* oj = o + j * e2m1_scale_group;
        for (int b = 0; b < e2m1_scale_group / 2; ++b) {
          std::uint16_t const p = pairs[xj[b]];
          std::memcpy(oj + 2 * b, &p, 2);
        }
      }
    }
  }
}

}  // namespace detail

/// sglang `cast_e2m1fn_to_e4m3fn` (and DeepSeek's `inference/convert.py`): the MXFP4 weight `x`
/// (packed e2m1 codes [G, N, K/2]) with E8M0 `scale` [G, N, K/32] -> e4m3fn codes `out` [G, N, K]
/// and E8M0 `out_scale` [G, ceil(N/BN), ceil(K/BK)], as the file comment lays out. `g.k` is the
/// logical K (a multiple of 32), `g.block` the output block (128 x 128 in the engines; BK a
/// multiple of 32).
/// @throws shape_error (sizes, K or BK not a multiple of 32), value_error naming the first block
///   that does not cast exactly (nothing is written then)
inline void cast_e2m1fn_to_e4m3fn(std::span<std::uint8_t const> x, std::span<std::uint8_t const> scale,
                                  block_grid const& g, std::span<std::uint8_t> out, std::span<std::uint8_t> out_scale,
                                  int threads = 1) {
  std::string const op = "cast_e2m1fn_to_e4m3fn";
  detail::check_grid(op, g, out.size(), out_scale.size());
  if (g.k % e2m1_scale_group != 0 || g.block.k % e2m1_scale_group != 0) {
    detail::fail_shape(op, "K = " + std::to_string(g.k) + " and the block's " + std::to_string(g.block.k) +
                               " columns must be multiples of the MXFP4 group of 32");
  }
  if (static_cast<std::int64_t>(x.size()) * 2 != g.elements() ||
      static_cast<std::int64_t>(scale.size()) * e2m1_scale_group != g.elements()) {
    detail::fail_shape(op, "x has " + std::to_string(x.size()) + " bytes and scale " + std::to_string(scale.size()) +
                               " codes; G*N*K = " + std::to_string(g.elements()) + " needs G*N*K/2 and G*N*K/32");
  }
  detail::check_lossless(x, scale, g);
  detail::for_each_row_slice(g, threads, [&](block_grid const& sub, std::size_t e0, std::size_t s0) {
    block_grid const one{1, sub.n, sub.k, sub.block};
    for (std::int64_t m = 0; m < sub.groups; ++m) {
      std::size_t const e = e0 + static_cast<std::size_t>(m * one.elements());
      detail::cast_matrix(x.data() + e / 2, scale.data() + e / e2m1_scale_group, one, out.data() + e,
                          out_scale.data() + s0 + static_cast<std::size_t>(m * one.scales()));
    }
  });
}

}  // namespace qtl::convert
