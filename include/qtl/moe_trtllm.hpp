#pragma once
/// \file
/// The trtllm-gen MoE weight layouts beyond NVFP4 (`docs/spec/engines.md` §8-§9): vLLM's
/// `prepare_static_weights_for_trtllm_mxint4_moe` (and its inverse), the DeepSeek FP8 block shuffle,
/// the FP8 per-tensor rotation, the BF16 block layout (out of place and in place) and the MXFP8
/// shuffle, all built on one pass (`trtllm_moe_shuffle_rows`): a `trtllm_row_map` gather of every
/// expert's rows, then FlashInfer's block layout, one pass per tensor over all experts. The NVFP4
/// preparation, the paddings and the row helpers they share are `qtl/moe.hpp`; the device forms
/// `qtl/cuda/moe.cuh`.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include <qtl/blockscale.hpp>
#include <qtl/element/moe.hpp>
#include <qtl/element/pack.hpp>
#include <qtl/error.hpp>
#include <qtl/moe.hpp>
#include <qtl/view.hpp>
#include <qtl/x86/moe.hpp>

namespace qtl {

// ------------------------------------------------------------------------------------------------
// trtllm-gen weight layouts: a row map, then FlashInfer's block layout
// ------------------------------------------------------------------------------------------------
//
// FlashInfer's TRT-LLM MoE kernels beyond NVFP4 (MXINT4, DeepSeek FP8, FP8 per tensor, BF16, MXFP8)
// take every expert's weights [R, K] (K in bytes) with the rows gathered by a `trtllm_row_map` and,
// for some, cut into blocks of `block_k` bytes (`convert_to_block_layout`: [K/block_k, R, block_k]);
// scales, where there are any, take the same rows and the 128x4 layout. The engines run these per
// expert (or as one torch gather); QTL runs one pass per tensor over all experts, each output
// written front to back. Out of place: peak memory the inputs plus the outputs.

namespace detail {

inline void copy_flip_bytes(byte_t* dst, byte_t const* src, std::size_t n, bool flip) {
  if (!flip) {
    std::memcpy(dst, src, n);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    dst[i] = uint4b8_to_int4(src[i]);
  }
}

// How the forward passes write an output of `bytes` at `out`: streaming stores, as wide as the CPU
// has (under `qtl::x86::level_cap()`), where it is large (`use_stream_stores`); the inverse passes
// write scattered rows plainly.
template <bool Inverse>
row_store forward_stores(void const* out, index_t bytes) {
  band_isa const isa = best_band_isa();
  if (Inverse || isa == band_isa::portable || !use_stream_stores(out, bytes)) {
    return row_store::plain;
  }
  return isa == band_isa::avx512 ? row_store::stream64 : row_store::stream16;
}

// Weights of every expert: bytes [k, k + bk) of row map.source(n) of `lin` <-> the prepared
// expert's block k/bk, row n (`block_layout_offset`; bk == K: a plain row gather), XOR 0x88 with
// `flip`. A tile of rows at a time, so that the prepared side moves through memory in order (the
// tile's rows of one block follow each other there) while the tile's source rows are read from
// L2: each piece copied asks for the same piece of the next tile, so the next tile arrives while
// this one is copied, in the order it is read (the hardware prefetchers do not follow 128 rows
// read 128 bytes at a time; a burst of requests at the start of a tile leaves the copy waiting
// behind them). Large forward outputs go out with streaming stores (as memcpy writes them; plain
// copies read every destination line first; `qtl/x86/moe.hpp`).
template <bool Inverse, class L, class B>
void rows_to_blocks(view3d<L> const& lin, B* blk, trtllm_row_map const& map, index_t bk, bool flip) {
  index_t const rows = lin.extent[1];
  index_t const cols = lin.extent[2];
  // 32 rows a tile (4 KiB of output per block of 128 bytes; this tile's rows and the next's stay
  // in L2 with room to spare), or 16 (epilogue tile 64's shuffle block) where 32 do not divide R.
  index_t const tile = rows % 32 == 0 ? 32 : 16;
  index_t const per_expert = rows / tile;
  index_t const tiles = lin.extent[0] * per_expert;  // tile i: expert i / per_expert, rows from i % per_expert * tile
  decltype(byte_ptr(lin.data)) src[2][32];           // tile i's source rows in src[i % 2]
  auto const look_up = [&](index_t i) {
    for (index_t t = 0; t < tile; ++t) {
      src[i % 2][t] = byte_ptr(&lin(i / per_expert, map.source(i % per_expert * tile + t), 0));
    }
  };
  auto const chunk = static_cast<std::size_t>(bk);
  row_store const how = forward_stores<Inverse>(blk, lin.extent[0] * rows * cols);
  std::uint8_t const x = flip ? 0x88 : 0;
  if (tiles > 0) {
    look_up(0);
  }
  for (index_t i = 0; i < tiles; ++i) {
    bool const ahead = i + 1 < tiles;
    if (ahead) {
      look_up(i + 1);
    }
    auto const* const row = src[i % 2];
    auto const* const next = src[(i + 1) % 2];
    auto* const expert = byte_ptr(blk) + i / per_expert * rows * cols;
    for (index_t k = 0; k < cols; k += bk) {
      auto* const b =
          expert + block_layout_offset(i % per_expert * tile, k, rows, bk);  // the tile's rows follow each other
      for (index_t t = 0; t < tile; ++t) {
        if (ahead) {
          prefetch_bytes<2>(next[t] + k, bk);  // into L2: the next tile's piece, read after this one
        }
        if constexpr (Inverse) {
          copy_flip_bytes(row[t] + k, b + t * bk, chunk, flip);
        } else if (!moe_x86::copy_row(how, b + t * bk, row[t] + k, chunk, x)) {
          copy_flip_bytes(b + t * bk, row[t] + k, chunk, flip);
        }
      }
    }
  }
  if (how != row_store::plain) {
    band_stream_fence();
  }
}

// Scales of every expert: the 128x4 layout of the row-mapped scales (no padding: rows % 128 == 0,
// cols % 4 == 0, checked by the callers), one 128-row band at a time: its 128 source rows looked up
// once, then each word of the layout (four consecutive K-blocks of one row; `layout_128x4`'s tile
// of 4 x 128 is 32 lines of the rows r, r + 32, r + 64, r + 96) copied. The next band's rows are
// asked for meanwhile (`band_prefetch`: as many lines a K-tile as the tile holds). Large forward
// outputs: each K-tile gathered into a buffer in L1, then streamed out whole.
template <bool Inverse, class L, class B>
void scale_words(view3d<L> const& lin, B* blk, trtllm_row_map const& map) {
  index_t const rows = lin.extent[1];
  index_t const cols = lin.extent[2];
  constexpr auto word = 4 * sizeof(L);
  constexpr auto tile = 128 * word;  // one K-tile of a band
  index_t const bands = lin.extent[0] * (rows / 128);
  decltype(byte_ptr(lin.data)) src[2][128];  // band i's source rows in src[i % 2]
  auto const look_up = [&](index_t i) {
    for (index_t r = 0; r < 128; ++r) {
      src[i % 2][r] = byte_ptr(&lin(i / (rows / 128), map.source(i % (rows / 128) * 128 + r), 0));
    }
  };
  row_store const how = forward_stores<Inverse>(blk, lin.extent[0] * rows * cols * static_cast<index_t>(sizeof(L)));
  bool const stream = how != row_store::plain;
  alignas(64) byte_t stage[tile];
  if (bands > 0) {
    look_up(0);
  }
  for (index_t i = 0; i < bands; ++i) {
    if (i + 1 < bands) {
      look_up(i + 1);
    }
    band_prefetch ahead(src[(i + 1) % 2], i + 1 < bands ? 128 : 0, cols * static_cast<index_t>(sizeof(L)));
    auto const* const row = src[i % 2];
    auto* const band = byte_ptr(blk + i * 128 * cols);
    for (index_t kt = 0; kt < cols / 4; ++kt) {
      auto* const t = band + kt * static_cast<index_t>(tile);
      auto const word_of = [&](std::size_t line) {  // line = 4 * (row % 32) + row / 32
        return row[line % 4 * 32 + line / 4] + kt * static_cast<index_t>(word);
      };
      if constexpr (Inverse) {
        for (std::size_t line = 0; line < 128; ++line) {
          std::memcpy(word_of(line), t + line * word, word);
        }
      } else {
        for (std::size_t line = 0; line < 128; ++line) {
          std::memcpy((stream ? stage : t) + line * word, word_of(line), word);
        }
        if (stream && !moe_x86::copy_row(how, t, stage, tile)) {
          std::memcpy(t, stage, tile);
        }
      }
      ahead.lines(static_cast<int>(tile / 64));
    }
  }
  if (stream) {
    band_stream_fence();
  }
}

// The sizes `map` and `bk` need of `lin` [E, R, K]: R a multiple of the shuffle block (and of 128
// for scales), K of bk; the pair checked (`Inverse`: `blk` is the input), `blk` contiguous.
template <bool Inverse, class L, class B>
void check_layout_pair(char const* fn, char const* name, view3d<L> const& lin, view3d<B> const& blk,
                       trtllm_row_map const& map, index_t bk, bool is_scale) {
  index_t const rows = lin.extent[1];
  index_t const cols = lin.extent[2];
  index_t const need = is_scale ? 128 : map.block_rows();
  if (rows % need != 0 || map.rows != rows) {
    throw shape_error(std::string(fn) + ": " + name + " has " + std::to_string(rows) + " rows; the row shuffle" +
                      (is_scale ? " and the 128x4 layout need" : " needs") + " a multiple of " + std::to_string(need));
  }
  if (is_scale ? cols % 4 != 0 : (bk <= 0 || cols % bk != 0)) {
    throw shape_error(std::string(fn) + ": " + name + " has " + std::to_string(cols) +
                      (is_scale ? " columns" : " bytes") + " a row; " +
                      (is_scale ? "the 128x4 layout needs a multiple of 4"
                                : "convert_to_block_layout needs a multiple of block_k " + std::to_string(bk)));
  }
  index_t const want[3] = {lin.extent[0], rows, cols};
  if constexpr (Inverse) {
    check_byte_pair(fn, name, blk, want, lin, want);
  } else {
    check_byte_pair(fn, name, lin, want, blk, want);
  }
  if (!blk.is_contiguous()) {
    throw shape_error(std::string(fn) + ": the prepared " + name + " must be contiguous (a flat buffer per expert)");
  }
}

template <bool Inverse, class In, class Out>
void layout_rows(char const* fn, char const* name, view3d<In> const& in, view3d<Out> const& out, trtllm_row_map map,
                 index_t block_k, bool flip) {
  if constexpr (Inverse) {
    map.rows = out.extent[1];
    check_layout_pair<true>(fn, name, out, in, map, block_k, false);
    rows_to_blocks<true>(out, in.data, map, block_k, flip);
  } else {
    map.rows = in.extent[1];
    check_layout_pair<false>(fn, name, in, out, map, block_k, false);
    rows_to_blocks<false>(in, out.data, map, block_k, flip);
  }
}

// GEMM1's row map of the FP8 / BF16 / MXFP8 preparations: the gated interleave and the shuffle, or
// the shuffle alone.
constexpr trtllm_row_map gemm1_row_map(bool gated, trtllm_row_map::kind gated_kind = trtllm_row_map::kind::w3w1_gated) {
  return {gated ? gated_kind : trtllm_row_map::kind::shuffle, 0, 128};
}

}  // namespace detail

/// One MoE weight tensor `in` [E, R, K] (bytes) into trtllm-gen's layout: per expert, output row n
/// is input row `map.source(n)` (`map.rows` is taken from R), then FlashInfer's
/// `convert_to_block_layout(x, block_k)` ([R, K] -> [K/block_k, R, block_k]; `block_k == K`: none),
/// every byte XOR 0x88 with `flip` (uint4b8 <-> int4). `out` has `in`'s shape, holds that flat
/// per-expert buffer and must be contiguous. The building block of the engine-named functions below.
/// @throws shape_error unless R is a multiple of the shuffle block (32, or 16 for epilogue tile 64;
///         even for the gated maps) and K of `block_k`, on a shape mismatch, an innermost stride that
///         is not 1 or an `out` that is not contiguous; value_error on overlap.
template <blockscale_byte Out, readable_as<Out> In>
void trtllm_moe_shuffle_rows(view3d<In> in, view3d<Out> out, trtllm_row_map map, index_t block_k, bool flip = false) {
  detail::layout_rows<false>("qtl::trtllm_moe_shuffle_rows", "in", in, out, map, block_k, flip);
}

/// The inverse of `trtllm_moe_shuffle_rows` (same `map`, `block_k`, `flip`): `in` the prepared
/// (contiguous) tensor, `out` the original layout. @throws as that function.
template <blockscale_byte Out, readable_as<Out> In>
void trtllm_moe_unshuffle_rows(view3d<In> in, view3d<Out> out, trtllm_row_map map, index_t block_k, bool flip = false) {
  detail::layout_rows<true>("qtl::trtllm_moe_unshuffle_rows", "in", in, out, map, block_k, flip);
}

// ------------------------------------------------------------------------------------------------
// prepare_static_weights_for_trtllm_mxint4_moe
// ------------------------------------------------------------------------------------------------

/// The sizes of one MXINT4 MoE layer for trtllm-gen (int4 weights, one BF16 scale per 32 of them;
/// vLLM's `flashinfer_mxint4_moe.py`, Kimi-K2's W4A16 group 32 on Blackwell). Checkpoint layout,
/// the inputs of `prepare_static_weights_for_trtllm_mxint4_moe`:
///
///     gemm1_weights  [E, 2I, H/2]   packed int4, two a byte (the checkpoint's int32 words
///                                   [E, 2I, H/8] seen as little-endian bytes), rows [w1; w3] = [gate; up]
///     gemm1_scales   [E, 2I, H/32]  BF16 (any 2-byte element type: moved, never read)
///     gemm2_weights  [E, H,  I/2]
///     gemm2_scales   [E, H,  I/32]
struct trtllm_mxint4_moe_shape {
  index_t hidden_size = 0;        ///< H
  index_t intermediate_size = 0;  ///< I
  index_t num_experts = 0;        ///< E
  /// The weights are the checkpoint's uint4b8 (each nibble q stands for q - 8; vLLM converts them
  /// when it is handed int32 words) rather than signed int4 already (uint8 in vLLM).
  bool uint4b8 = true;

  /// The engine's asserts, which leave nothing to pad: `H % 256 == 0` and `I % 256 == 0`
  /// (`convert_to_block_layout` splits H/2 and I/2 bytes into blocks of 128; the scale shuffle
  /// wants 2I and H rows in 128-row tiles, which follows), all positive, `E >= 0`.
  constexpr bool valid() const {
    return num_experts >= 0 && hidden_size > 0 && hidden_size % 256 == 0 && intermediate_size > 0 &&
           intermediate_size % 256 == 0;
  }
  /// GEMM1's row map (`[w1; w3]` in) and GEMM2's.
  constexpr trtllm_row_map gemm1_rows() const { return {trtllm_row_map::kind::w1w3_gated, 2 * intermediate_size, 128}; }
  constexpr trtllm_row_map gemm2_rows() const { return {trtllm_row_map::kind::shuffle, hidden_size, 128}; }
};

namespace detail {

inline constexpr index_t mxint4_block_k = 128;  // convert_to_block_layout's block_k, in bytes

// Checks the checkpoint-side tensors `lin` and the prepared ones `blk` of `shape` (`Inverse`: `blk`
// are the inputs).
template <bool Inverse, class WL, class SL, class WB, class SB>
void check_mxint4_tensors(char const* fn, trtllm_mxint4_moe_shape const& shape,
                          trtllm_fp4_moe_tensors<WL, SL> const& lin, trtllm_fp4_moe_tensors<WB, SB> const& blk) {
  if (!shape.valid()) {
    throw shape_error(std::string(fn) + ": hidden_size (" + std::to_string(shape.hidden_size) +
                      ") and intermediate_size (" + std::to_string(shape.intermediate_size) +
                      ") must be positive multiples of 256 (their packed bytes are split into blocks of 128), "
                      "num_experts (" +
                      std::to_string(shape.num_experts) + ") not negative");
  }
  index_t const e = shape.num_experts;
  index_t const h = shape.hidden_size;
  index_t const i = shape.intermediate_size;
  index_t const x1[3] = {e, 2 * i, h / 2};
  index_t const x2[3] = {e, h, i / 2};
  index_t const s1[3] = {e, 2 * i, h / 32};
  index_t const s2[3] = {e, h, i / 32};
  // the extents first, so that a wrong tensor is named as such rather than by its rows
  check_byte_tensor(fn, Inverse ? "output" : "input", "gemm1_weights", lin.gemm1_weights, x1);
  check_byte_tensor(fn, Inverse ? "output" : "input", "gemm1_scales", lin.gemm1_scales, s1);
  check_byte_tensor(fn, Inverse ? "output" : "input", "gemm2_weights", lin.gemm2_weights, x2);
  check_byte_tensor(fn, Inverse ? "output" : "input", "gemm2_scales", lin.gemm2_scales, s2);
  check_layout_pair<Inverse>(fn, "gemm1_weights", lin.gemm1_weights, blk.gemm1_weights, shape.gemm1_rows(),
                             mxint4_block_k, false);
  check_layout_pair<Inverse>(fn, "gemm1_scales", lin.gemm1_scales, blk.gemm1_scales, shape.gemm1_rows(), 0, true);
  check_layout_pair<Inverse>(fn, "gemm2_weights", lin.gemm2_weights, blk.gemm2_weights, shape.gemm2_rows(),
                             mxint4_block_k, false);
  check_layout_pair<Inverse>(fn, "gemm2_scales", lin.gemm2_scales, blk.gemm2_scales, shape.gemm2_rows(), 0, true);
}

template <bool Inverse, class WL, class SL, class WB, class SB>
void run_mxint4(trtllm_mxint4_moe_shape const& shape, trtllm_fp4_moe_tensors<WL, SL> const& lin,
                trtllm_fp4_moe_tensors<WB, SB> const& blk) {
  rows_to_blocks<Inverse>(lin.gemm1_weights, blk.gemm1_weights.data, shape.gemm1_rows(), mxint4_block_k, shape.uint4b8);
  rows_to_blocks<Inverse>(lin.gemm2_weights, blk.gemm2_weights.data, shape.gemm2_rows(), mxint4_block_k, shape.uint4b8);
  scale_words<Inverse>(lin.gemm1_scales, blk.gemm1_scales.data, shape.gemm1_rows());
  scale_words<Inverse>(lin.gemm2_scales, blk.gemm2_scales.data, shape.gemm2_rows());
}

}  // namespace detail

/// A 2-byte scale element (BF16 bits, `std::uint16_t`): moved, never read as a number.
template <class T>
concept mxint4_scale_element = sizeof(T) == 2 && std::is_trivially_copyable_v<T>;

/// vLLM `prepare_static_weights_for_trtllm_mxint4_moe(gemm1_weights, gemm1_scales, gemm2_weights,
/// gemm2_scales)` (`flashinfer_mxint4_moe.py`, epilogue_tile_m 128), for every expert of `in` (the
/// checkpoint layout of `trtllm_mxint4_moe_shape`) into `out`:
///
///     weights  uint4b8 -> signed int4 (every nibble q -> q ^ 8; only with `shape.uint4b8`),
///              rows: `shape.gemm1_rows()` (GEMM1: [w1; w3] -> [w3; w1], gated interleave, 32-row
///              shuffle) or `gemm2_rows()` (GEMM2: the shuffle), then
///              convert_to_block_layout(block_k = 128): expert [R, K] -> [K/128, R, 128]
///     scales   the same rows, then the 128x4 layout (FlashInfer's block_scale_interleave), flat
///
/// Each output has its input's shape, holds that flat per-expert buffer and must be contiguous
/// (the engine's shapes: weights [E, K/128, R, 128], scales [E, R * K/16]). The engine converts
/// its int32 inputs in place (the caller's tensors change) and returns new tensors; QTL leaves
/// its inputs alone: peak memory the inputs plus the outputs.
/// @throws shape_error if a size breaks `shape.valid()`, a tensor's shape differs, an innermost
///         stride is not 1 or an output is not contiguous (naming the tensor); value_error on overlap.
template <blockscale_byte WOut, mxint4_scale_element SOut, readable_as<WOut> WIn, readable_as<SOut> SIn>
void prepare_static_weights_for_trtllm_mxint4_moe(trtllm_mxint4_moe_shape const& shape,
                                                  trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                                  trtllm_fp4_moe_tensors<WOut, SOut> const& out) {
  detail::check_mxint4_tensors<false>("qtl::prepare_static_weights_for_trtllm_mxint4_moe", shape, in, out);
  detail::run_mxint4<false>(shape, in, out);
}

/// The inverse of `prepare_static_weights_for_trtllm_mxint4_moe`: the checkpoint layout `out`
/// (uint4b8 again with `shape.uint4b8`) of the prepared tensors `in` (contiguous, as that
/// function writes them). @throws as that function.
template <blockscale_byte WOut, mxint4_scale_element SOut, readable_as<WOut> WIn, readable_as<SOut> SIn>
void unprepare_static_weights_for_trtllm_mxint4_moe(trtllm_mxint4_moe_shape const& shape,
                                                    trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                                    trtllm_fp4_moe_tensors<WOut, SOut> const& out) {
  detail::check_mxint4_tensors<true>("qtl::unprepare_static_weights_for_trtllm_mxint4_moe", shape, out, in);
  detail::run_mxint4<true>(shape, out, in);
}

// ------------------------------------------------------------------------------------------------
// FP8 (DeepSeek block, per tensor), BF16 and MXFP8 MoE weights for FlashInfer's TRT-LLM kernels
// ------------------------------------------------------------------------------------------------

/// vLLM `_shuffle_deepseek_fp8_moe_weights(w13, w2)` (`flashinfer_utils.py`): DeepSeek FP8
/// block-scale weights `[E, M, K]` (E4M3 bytes; w13 already `[w3; w1]`) into BlockMajorK: the
/// epilogue-tile-64 row shuffle (16-row blocks), then `convert_to_block_layout(block_k = 128)` —
/// per expert `[K/128, M, 128]`, held flat in `w13_out` / `w2_out` (the inputs' shapes,
/// contiguous; the engine's `[E, K/128, M, 128]`). The scales are not touched.
/// @throws shape_error unless M % 16 == 0 and K % 128 == 0 (the engine's gather asserts), or on a
///         shape or stride mismatch; value_error on overlap.
template <blockscale_byte Out, readable_as<Out> In>
void shuffle_deepseek_fp8_moe_weights(view3d<In> w13, view3d<In> w2, view3d<Out> w13_out, view3d<Out> w2_out) {
  char const* const fn = "qtl::shuffle_deepseek_fp8_moe_weights";
  trtllm_row_map const map{trtllm_row_map::kind::shuffle, 0, 64};
  detail::layout_rows<false>(fn, "w13", w13, w13_out, map, 128, false);
  detail::layout_rows<false>(fn, "w2", w2, w2_out, map, 128, false);
}

/// vLLM `rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(gemm1_weights, gemm2_weights,
/// is_gated_activation)`: FP8 per-tensor weights `[E, R, K]` (E4M3 bytes): GEMM1's rows gathered by
/// the gated interleave (when gated) and the 32-row shuffle, GEMM2's by the shuffle; no block
/// layout. The engine replaces its tensors' `.data` with new ones; QTL writes `*_out` (same shapes):
/// peak memory the inputs plus the outputs in both.
/// @throws shape_error unless each R is a multiple of 32, or on a shape or stride mismatch;
///         value_error on overlap.
template <blockscale_byte Out, readable_as<Out> In>
void rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(view3d<In> gemm1_weights, view3d<In> gemm2_weights,
                                                     bool is_gated_activation, view3d<Out> gemm1_out,
                                                     view3d<Out> gemm2_out) {
  char const* const fn = "qtl::rotate_weights_for_fi_trtllm_fp8_per_tensor_moe";
  detail::layout_rows<false>(fn, "gemm1_weights", gemm1_weights, gemm1_out, detail::gemm1_row_map(is_gated_activation),
                             gemm1_weights.extent[2], false);
  detail::layout_rows<false>(fn, "gemm2_weights", gemm2_weights, gemm2_out, detail::gemm1_row_map(false),
                             gemm2_weights.extent[2], false);
}

/// vLLM `convert_moe_weights_to_flashinfer_trtllm_block_layout(cache, w13_weight, w2_weight,
/// is_gated_act_gemm)`: BF16 weights as bytes (`[E, R, 2H]`; any 2-byte element moves alike): W13's
/// rows by FlashInfer's GEMM1 indices plus R/2 (`trtllm_row_map::kind::w1w3_gated`: vLLM's `[w1; w3]`)
/// when gated, else the 32-row shuffle; W2's by the shuffle; then `convert_to_block_layout(block_k =
/// 128 bytes)`, held flat in the outputs (the inputs' shapes, contiguous; the engine's
/// `[E, 2K/128, R, 64]` bf16). Out of place; `..._inplace` below is the engine's in-place form.
/// @throws shape_error unless each R is a multiple of 32 and each row's bytes of 128, or on a shape
///         or stride mismatch; value_error on overlap.
template <blockscale_byte Out, readable_as<Out> In>
void convert_moe_weights_to_flashinfer_trtllm_block_layout(view3d<In> w13_weight, view3d<In> w2_weight,
                                                           bool is_gated_act_gemm, view3d<Out> w13_out,
                                                           view3d<Out> w2_out) {
  char const* const fn = "qtl::convert_moe_weights_to_flashinfer_trtllm_block_layout";
  detail::layout_rows<false>(fn, "w13_weight", w13_weight, w13_out,
                             detail::gemm1_row_map(is_gated_act_gemm, trtllm_row_map::kind::w1w3_gated), 128, false);
  detail::layout_rows<false>(fn, "w2_weight", w2_weight, w2_out, detail::gemm1_row_map(false), 128, false);
}

/// `convert_moe_weights_to_flashinfer_trtllm_block_layout` in place, as the engine: each expert of
/// the contiguous `w13_weight` and `w2_weight` is copied to a scratch buffer of one expert and laid
/// out from there (peak memory: the weights plus one expert, the engine's too).
/// @throws as the out-of-place form; shape_error if a tensor is not contiguous.
template <blockscale_byte T>
void convert_moe_weights_to_flashinfer_trtllm_block_layout_inplace(view3d<T> w13_weight, view3d<T> w2_weight,
                                                                   bool is_gated_act_gemm) {
  char const* const fn = "qtl::convert_moe_weights_to_flashinfer_trtllm_block_layout_inplace";
  auto const one = [&](char const* name, view3d<T> w, trtllm_row_map map) {
    map.rows = w.extent[1];
    index_t const per_expert = w.extent[1] * w.extent[2];
    if (!w.is_contiguous()) {
      throw shape_error(std::string(fn) + ": " + name + " must be contiguous (it is laid out in place)");
    }
    if (w.extent[0] == 0) {
      return;
    }
    std::vector<T> scratch(static_cast<std::size_t>(per_expert));
    view3d<T const> const s = make_view(std::as_const(scratch).data(), index_t{1}, w.extent[1], w.extent[2]);
    detail::check_layout_pair<false>(fn, name, s, make_view(w.data, index_t{1}, w.extent[1], w.extent[2]), map, 128,
                                     false);
    for (index_t e = 0; e < w.extent[0]; ++e) {
      T* const x = w.data + e * per_expert;
      if (per_expert > 0) {
        std::memcpy(scratch.data(), x, static_cast<std::size_t>(per_expert) * sizeof(T));
      }
      detail::rows_to_blocks<false>(s, x, map, 128, false);
    }
  };
  one("w13_weight", w13_weight, detail::gemm1_row_map(is_gated_act_gemm, trtllm_row_map::kind::w1w3_gated));
  one("w2_weight", w2_weight, detail::gemm1_row_map(false));
}

namespace detail {
// One direction of the MXFP8 shuffle: `lin` the checkpoint-side tensors (checked as the input
// of the forward), `blk` the shuffled ones.
template <bool Inverse, class WL, class SL, class WB, class SB>
void run_mxfp8(char const* fn, trtllm_fp4_moe_tensors<WL, SL> const& lin, trtllm_fp4_moe_tensors<WB, SB> const& blk,
               bool is_gated) {
  char const* const role = Inverse ? "output" : "input";
  auto m1 = gemm1_row_map(is_gated);
  auto m2 = gemm1_row_map(false);
  m1.rows = lin.gemm1_weights.extent[1];
  m2.rows = lin.gemm2_weights.extent[1];
  index_t const w1[3] = {lin.gemm1_weights.extent[0], m1.rows, lin.gemm1_weights.extent[2]};
  index_t const w2[3] = {lin.gemm1_weights.extent[0], m2.rows, lin.gemm2_weights.extent[2]};
  index_t const s1[3] = {w1[0], m1.rows, lin.gemm1_scales.extent[2]};
  index_t const s2[3] = {w1[0], m2.rows, lin.gemm2_scales.extent[2]};
  check_byte_tensor(fn, role, "w2", lin.gemm2_weights, w2);
  check_byte_tensor(fn, role, "w13_scale", lin.gemm1_scales, s1);
  check_byte_tensor(fn, role, "w2_scale", lin.gemm2_scales, s2);
  check_layout_pair<Inverse>(fn, "w13", lin.gemm1_weights, blk.gemm1_weights, m1, w1[2], false);
  check_layout_pair<Inverse>(fn, "w2", lin.gemm2_weights, blk.gemm2_weights, m2, w2[2], false);
  check_layout_pair<Inverse>(fn, "w13_scale", lin.gemm1_scales, blk.gemm1_scales, m1, 0, true);
  check_layout_pair<Inverse>(fn, "w2_scale", lin.gemm2_scales, blk.gemm2_scales, m2, 0, true);
  rows_to_blocks<Inverse>(lin.gemm1_weights, blk.gemm1_weights.data, m1, w1[2], false);
  rows_to_blocks<Inverse>(lin.gemm2_weights, blk.gemm2_weights.data, m2, w2[2], false);
  scale_words<Inverse>(lin.gemm1_scales, blk.gemm1_scales.data, m1);
  scale_words<Inverse>(lin.gemm2_scales, blk.gemm2_scales.data, m2);
}
}  // namespace detail

/// vLLM `_shuffle_mxfp8_moe_weights(w13, w2, w13_scale, w2_scale, is_gated)`: MXFP8 weights
/// (`gemm1_weights` = w13 `[E, R1, H]`, `gemm2_weights` = w2 `[E, H, I]`, E4M3 bytes) and their
/// E8M0 scales (`[E, R1, H/32]`, `[E, H, I/32]`; w13 already `[w3; w1]`): rows gathered by the gated
/// interleave (when `is_gated`) and the 32-row shuffle (GEMM2: the shuffle), the scales the same
/// rows and then the 128x4 layout, held in the scales' shape (the engine's `reshape(s.shape)`). Outputs
/// the inputs' shapes; the scales' contiguous. Peak memory the inputs plus the outputs (the engine's
/// too).
/// @throws shape_error unless the rows are multiples of 128 and the scale columns of 4 (the engine's
///         reshape fails on a padded 128x4 buffer), or on a shape or stride mismatch; value_error on
///         overlap.
template <blockscale_byte WOut, blockscale_byte SOut, readable_as<WOut> WIn, readable_as<SOut> SIn>
void shuffle_mxfp8_moe_weights(trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                               trtllm_fp4_moe_tensors<WOut, SOut> const& out, bool is_gated) {
  detail::run_mxfp8<false>("qtl::shuffle_mxfp8_moe_weights", in, out, is_gated);
}

/// The inverse of `shuffle_mxfp8_moe_weights` (QTL's; the engine has none): the shuffled tensors
/// `in` back to the checkpoint's rows and linear scales in `out` (the same shapes).
/// @throws as the forward, with `out` checked as the forward's input.
template <blockscale_byte WOut, blockscale_byte SOut, readable_as<WOut> WIn, readable_as<SOut> SIn>
void unshuffle_mxfp8_moe_weights(trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                 trtllm_fp4_moe_tensors<WOut, SOut> const& out, bool is_gated) {
  detail::run_mxfp8<true>("qtl::unshuffle_mxfp8_moe_weights", out, in, is_gated);
}

}  // namespace qtl
