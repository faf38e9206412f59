#pragma once
/// \file
/// The element layer of the W4A8 load-time transforms (int4 weights, FP8 activations;
/// `qtl/w4a8.hpp` runs it on the host, `qtl/cuda/w4a8.cuh` on the device). `docs/spec/w4a8.md` is
/// the spec, with the engines' files and revisions:
///
///   - CUTLASS's `unified_encode_int4b` nibble code and the Hopper reorder of
///     `compute_memory_reordering_atom<float_e4m3_t>()` tiled over an [N, K] int4 matrix (vLLM's
///     `cutlass_encode_and_reorder_int4b` and `_grouped`);
///   - CUTLASS's `packed_scale_t<float_e4m3_t>` (vLLM's `cutlass_pack_scale_fp8`): one e4m3 scale
///     s becomes the eight codes `e4m3(-8s), e4m3(-7s), ..., e4m3(-2s), e4m3(-s)`;
///   - the uint4b8 -> signed int4 nibble of `convert_packed_uint4b8_to_signed_int4_inplace`;
///   - the `/ 8` of `convert_bf16_scales_to_fp8`;
///   - the index map of sglang's `interleave_scales(scales, scale_pack)`;
///   - the shape rules the host ops and the launchers share.
///
/// **The reorder.** The int4 matrix B is [N, K], K contiguous, two codes a byte (low nibble
/// first, CUTLASS's `int4b_t` order). It is cut into 16 x 32 atoms, stored atom after atom, the
/// atoms of one K block (N / 16 of them) consecutive. Inside an atom, row r and column c
/// (warp-level fragment of the SM90 RS GMMA operand A for 8-bit types: thread t = (c/4)%4 +
/// 4 (r%8) owns values v = c%4 + 4 (r/8) + 8 (c/16)) go to nibble 16 t + v, so that the 16 codes a
/// thread loads are contiguous. Codes c, c+1 (c even) stay in one byte, so the reorder moves whole
/// bytes: destination byte b of an atom is source byte (row r, byte c/2) below.

#include <cstdint>

#include <qtl/element/fp8.hpp>
#include <qtl/element/pack.hpp>
#include <qtl/macros.hpp>
#include <qtl/numeric.hpp>
#include <qtl/view.hpp>

namespace qtl {

/// Rows of a reorder atom (the N extent of one warp's GMMA fragment).
inline constexpr index_t w4a8_atom_rows = 16;
/// Columns of a reorder atom (int4 codes along K).
inline constexpr index_t w4a8_atom_cols = 32;
/// Bytes of one atom: 16 x 32 codes, two a byte.
inline constexpr index_t w4a8_atom_bytes = w4a8_atom_rows * w4a8_atom_cols / 2;
/// The K multiple vLLM's grouped op demands (its check before CUTLASS's `reorder_tensor`, whose
/// 128-thread copy of two codes each runs out of bounds on any other K).
inline constexpr index_t w4a8_grouped_k_align = 256;

/// CUTLASS's `unified_encode_int4b` of one code: 1..7 become 8 - v (the negative's magnitude bits,
/// so that the mainloop's byte permute needs the sign only); 0 and 8..15 stay. Its own inverse.
QTL_HOST_DEVICE constexpr std::uint8_t unified_encode_int4b_nibble(std::uint8_t v) {
  v = static_cast<std::uint8_t>(v & 0xFu);
  return (v == 0 || (v & 0x8u) != 0) ? v : static_cast<std::uint8_t>(8 - v);
}

/// `unified_encode_int4b_nibble` of both codes of a byte (vLLM's 256-entry `kNibbleLUT`).
QTL_HOST_DEVICE constexpr std::uint8_t unified_encode_int4b_byte(std::uint8_t b) {
  return static_cast<std::uint8_t>(unified_encode_int4b_nibble(static_cast<std::uint8_t>(b & 0xFu)) |
                                   (unified_encode_int4b_nibble(static_cast<std::uint8_t>(b >> 4)) << 4));
}

/// `unified_encode_int4b_nibble` of the 16 codes of a 64-bit word, without a branch: a nibble whose
/// bit 3 is clear and whose low bits are not 0 becomes 8 - v (no borrow crosses a nibble).
QTL_HOST_DEVICE constexpr std::uint64_t unified_encode_int4b_word(std::uint64_t w) {
  constexpr std::uint64_t low3 = 0x7777777777777777u;
  constexpr std::uint64_t bit3 = 0x8888888888888888u;
  std::uint64_t const low = w & low3;
  std::uint64_t const change = (low + low3) & bit3 & ~w;  // bit 3 of each nibble in 1..7
  std::uint64_t const m = (change >> 3) * 0xFu;           // those nibbles, whole
  return (w & ~m) | ((bit3 - low) & m);
}

/// Where destination byte `b` (0..255) of a reorder atom comes from: row `row` of the atom and
/// byte `col_byte` (codes 2 col_byte and 2 col_byte + 1) of that row's 16 bytes.
struct w4a8_atom_source {
  index_t row;
  index_t col_byte;
};

/// The inverse of the atom's nibble map (file comment) at the even nibble 2 b: thread t = b / 8
/// holds values v = 2 (b % 8) and v + 1, row (t / 4) + 8 ((v / 4) % 2), column v % 4 + 4 (t % 4) +
/// 16 (v / 8).
QTL_HOST_DEVICE constexpr w4a8_atom_source w4a8_atom_source_of(index_t b) {
  index_t const t = b / 8;
  index_t const v = 2 * (b % 8);
  index_t const row = t / 4 + 8 * ((v / 4) % 2);
  index_t const col = v % 4 + 4 * (t % 4) + 16 * (v / 8);
  return {row, col / 2};
}

/// The source byte (in the row-major [N, K] matrix of one expert, `k` codes a row) of destination
/// byte `b` of `encode_and_reorder_int4b`.
QTL_HOST_DEVICE constexpr index_t w4a8_reorder_source_byte(index_t b, index_t n, index_t k) {
  index_t const atom = b / w4a8_atom_bytes;
  index_t const n_atoms = n / w4a8_atom_rows;
  w4a8_atom_source const s = w4a8_atom_source_of(b % w4a8_atom_bytes);
  index_t const row = (atom % n_atoms) * w4a8_atom_rows + s.row;
  index_t const col_byte = (atom / n_atoms) * (w4a8_atom_cols / 2) + s.col_byte;
  return row * (k / 2) + col_byte;
}

/// What `int4b_reorder_shape_check` finds wrong with an [N, K] int4 matrix.
enum class int4b_reorder_shape : std::uint8_t {
  ok,
  negative,    ///< an extent is negative
  n_align,     ///< N is not a multiple of 16 (the atom's rows)
  k_align,     ///< K is not a multiple of `k_align` (32, the atom's columns; 256 grouped)
  size_bytes,  ///< the buffers do not hold experts * N * K / 2 bytes
};

/// The shape rule of the reorder, shared by the host ops and the CUDA launchers. `k_align` is 32
/// (the plain op) or `w4a8_grouped_k_align` (the grouped op, as vLLM checks).
QTL_HOST_DEVICE constexpr int4b_reorder_shape int4b_reorder_shape_check(index_t experts, index_t n, index_t k,
                                                                        index_t k_align, index_t in_bytes,
                                                                        index_t out_bytes) {
  if (experts < 0 || n < 0 || k < 0) {
    return int4b_reorder_shape::negative;
  }
  if (n % w4a8_atom_rows != 0) {
    return int4b_reorder_shape::n_align;
  }
  if (k % k_align != 0) {
    return int4b_reorder_shape::k_align;
  }
  index_t const bytes = experts * n * (k / 2);
  if (in_bytes != bytes || out_bytes != bytes) {
    return int4b_reorder_shape::size_bytes;
  }
  return int4b_reorder_shape::ok;
}

/// float -> e4m3 as CUTLASS's host `float_e4m3_t(float)` (`convert_float_to_fp8`): RNE,
/// saturating to ±448 (Inf too), any NaN -> 0x7F.
QTL_HOST_DEVICE constexpr std::uint8_t cutlass_float_to_e4m3(float x) {
  if (x != x) {
    return 0x7Fu;
  }
  return float_to_e4m3fn(x, saturation::finite);
}

/// CUTLASS's `packed_scale_t<float_e4m3_t>(s)`: byte i (0..6) of `out` is `e4m3(float(s) * -(8 - i))`,
/// byte 7 is `-s` (`float_e4m3_t(-float(s))`); each product is exact in float, rounded once.
QTL_HOST_DEVICE constexpr void pack_scale_fp8_element(std::uint8_t s, std::uint8_t* out) {
  float const v = e4m3fn_to_float(s);
  for (int i = 0; i < 7; ++i) {
    out[i] = cutlass_float_to_e4m3(v * static_cast<float>(i - 8));
  }
  out[7] = cutlass_float_to_e4m3(-v);
}

/// `convert_bf16_scales_to_fp8`'s group scale: `(q.float() / 8.0).to(float8_e4m3fn)`, exact
/// division and torch's RNE (no overflow: the value only shrinks).
QTL_HOST_DEVICE constexpr std::uint8_t w4a8_group_scale_code(std::uint8_t q) {
  return float_to_e4m3fn(e4m3fn_to_float(q) / 8.0f);
}

/// The per-token options of the quantizer `convert_bf16_scales_to_fp8` is handed (vLLM's
/// `QuantFP8(static=False, group_shape=PER_TOKEN)`): scale `max(amax / 448, 1 / (448 * 512))`,
/// then `x / s` (`fp8_scale_op::divide`, its CUDA path) or `x * (1/s)` (`multiply_reciprocal`, its
/// native path), clamp to ±448, RNE.
QTL_HOST_DEVICE constexpr fp8_token_options w4a8_scale_quantizer(fp8_scale_op op) {
  fp8_token_options o = vllm_per_token_options<float8_e4m3fn_t>();
  o.op = op;
  return o;
}

/// sglang's `interleave_scales(scales, scale_pack)`: scales [E, N, G] -> [E, G / p, N * p];
/// the source (n, g) of output element (g2, c) of one expert.
struct interleave_source {
  index_t n;
  index_t g;
};
QTL_HOST_DEVICE constexpr interleave_source interleave_scales_source(index_t g2, index_t c, index_t scale_pack) {
  return {c / scale_pack, g2 * scale_pack + c % scale_pack};
}

}  // namespace qtl
