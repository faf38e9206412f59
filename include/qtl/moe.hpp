#pragma once
/// \file
/// MoE weight preparation: the gate/up half swaps (`swap_w13_to_w31`, `reorder_w1w3_to_w3w1`) and
/// the TRT-LLM (trtllm-gen) FP4 MoE static weight preparation of sglang's
/// `prepare_static_weights_for_trtllm_fp4_moe`: row permutations for the epilogue tile and the gated
/// activation, applied to every expert's packed E2M1 weights and E4M3 scales, the scales then laid
/// out 128x4. Spec: `docs/spec/blockscale.md` §3.2-§3.4 and §4. The row maps are
/// `QTL_HOST_DEVICE constexpr` closed forms shared with `qtl/cuda/moe.cuh`; the host keeps them as
/// index vectors computed once per shape (`trtllm_fp4_moe_plan`) and applies them to all experts.
/// Also vLLM's FP4 paddings and CuteDSL row orders (`docs/spec/engines.md` §6-§7). The other
/// TRT-LLM MoE layouts (MXINT4, DeepSeek FP8, FP8 per tensor, BF16, MXFP8) are `qtl/moe_trtllm.hpp`.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <qtl/blockscale.hpp>
#include <qtl/element/moe.hpp>
#include <qtl/error.hpp>
#include <qtl/macros.hpp>
#include <qtl/view.hpp>
#include <qtl/x86/moe.hpp>

namespace qtl {

namespace detail {

template <int Dim, int Rank>
inline constexpr int normalized_dim = Dim < 0 ? Rank + Dim : Dim;

template <class T, int Rank>
view<T, 3> as_rank3(view<T, Rank> v) {
  view<T, 3> r;
  r.data = v.data;
  for (int d = 0; d < 3 - Rank; ++d) {
    r.extent[d] = 1;
    r.stride[d] = 0;
  }
  for (int d = 0; d < Rank; ++d) {
    r.extent[d + 3 - Rank] = v.extent[d];
    r.stride[d + 3 - Rank] = v.stride[d];
  }
  return r;
}

// Copies `n` elements of one innermost row, strided or not.
template <class In, class Out>
void copy_strided_row(In* src, index_t src_stride, Out* dst, index_t dst_stride, index_t n) {
  if (src_stride == 1 && dst_stride == 1) {
    if (n > 0) {
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(Out));
    }
    return;
  }
  for (index_t i = 0; i < n; ++i) {
    dst[i * dst_stride] = src[i * src_stride];
  }
}

// out = in with the halves of dimension `d` (0, 1 or 2 of a rank-3 view) exchanged.
template <class In, class Out>
void swap_halves_rank3(view<In, 3> in, view<Out, 3> out, int d) {
  index_t const n = in.extent[d];
  for (index_t i0 = 0; i0 < in.extent[0]; ++i0) {
    for (index_t i1 = 0; i1 < in.extent[1]; ++i1) {
      if (d == 2) {  // the halves of one row
        index_t const h = n / 2;
        copy_strided_row(&in(i0, i1, h), in.stride[2], &out(i0, i1, 0), out.stride[2], h);
        copy_strided_row(&in(i0, i1, 0), in.stride[2], &out(i0, i1, h), out.stride[2], h);
      } else {
        index_t const s0 = d == 0 ? swap_halves_source(i0, n) : i0;
        index_t const s1 = d == 1 ? swap_halves_source(i1, n) : i1;
        copy_strided_row(&in(s0, s1, 0), in.stride[2], &out(i0, i1, 0), out.stride[2], in.extent[2]);
      }
    }
  }
}

// Outputs at least this large are written with streaming stores: they cannot stay in cache, and
// streaming stores skip reading each destination line before writing it (as memcpy does).
inline constexpr index_t stream_store_bytes = index_t{8} << 20;

inline bool use_stream_stores(void const* out, index_t bytes) {
  return moe_x86::streams && bytes >= stream_store_bytes && reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
}

// Asks for the cache lines of `n` bytes at `p` (a row that is read next), into every cache level
// (`Locality` 3) or only up to L2 (2: read after the data in hand).
template <int Locality = 3>
inline void prefetch_bytes(byte_t const* p, index_t n) {
#if defined(__GNUC__)
  for (index_t i = 0; i < n; i += 64) {
    __builtin_prefetch(p + i, 0, Locality);
  }
#else
  (void)p;
  (void)n;
#endif  // ^^^ __GNUC__ ^^^
}

/// Copies `n` bytes; streaming (`How` != plain, `moe_x86::copy_row`) only where `dst` is 16-byte
/// aligned and `n` a multiple of 16, else (and on other CPUs) as `memcpy`.
template <row_store How>
inline void copy_row_bytes(byte_t* dst, byte_t const* src, std::size_t n) {
  if (!moe_x86::copy_row<How>(dst, src, n)) {
    std::memcpy(dst, src, n);
  }
}

/// Checks one tensor (`role` "input" or "output") of a MoE layout op: its shape `want` and a
/// contiguous innermost dimension (where it has more than one element).
/// @throws shape_error naming `fn` and the tensor.
template <class T>
void check_byte_tensor(char const* fn, char const* role, char const* name, view3d<T> const& v,
                       index_t const (&want)[3]) {
  for (int d = 0; d < 3; ++d) {
    if (v.extent[d] != want[d]) {
      throw shape_error(std::string(fn) + ": " + role + " " + name + " has shape " + shape_string(v.extent, 3) +
                        ", expected " + shape_string(want, 3));
    }
  }
  if (v.stride[2] != 1 && want[2] > 1) {
    throw shape_error(std::string(fn) + ": " + role + " " + name +
                      ": the innermost dimension must be contiguous (stride 1)");
  }
}

/// `check_byte_tensor` of an input and its output, which must not overlap (value_error).
template <class In, class Out>
void check_byte_pair(char const* fn, char const* name, view3d<In> const& in, index_t const (&want_in)[3],
                     view3d<Out> const& out, index_t const (&want_out)[3]) {
  check_byte_tensor(fn, "input", name, in, want_in);
  check_byte_tensor(fn, "output", name, out, want_out);
  if (views_overlap(in, out)) {
    throw value_error(std::string(fn) + ": output " + name + " overlaps its input");
  }
}

template <class In, class Out, int Rank>
void check_same_shape(char const* fn, char const* in_name, view<In, Rank> const& in, char const* out_name,
                      view<Out, Rank> const& out) {
  for (int d = 0; d < Rank; ++d) {
    if (in.extent[d] < 0) {
      throw shape_error(std::string(fn) + ": " + in_name + " extent " + std::to_string(d) + " is negative (" +
                        std::to_string(in.extent[d]) + ")");
    }
    if (out.extent[d] != in.extent[d]) {
      throw shape_error(std::string(fn) + ": " + out_name + " has shape " + shape_string(out.extent, Rank) +
                        ", expected the shape of " + in_name + " " + shape_string(in.extent, Rank));
    }
  }
  if (views_overlap(in, out)) {
    throw value_error(std::string(fn) + ": " + out_name + " overlaps " + in_name);
  }
}

template <int D, class In, class Out, int Rank>
void swap_halves_checked(char const* fn, char const* in_name, view<In, Rank> in, char const* out_name,
                         view<Out, Rank> out) {
  check_same_shape(fn, in_name, in, out_name, out);
  if (in.extent[D] % 2 != 0) {
    throw shape_error(std::string(fn) + ": " + in_name + " dimension " + std::to_string(D) + " has odd size " +
                      std::to_string(in.extent[D]) + "; it must hold two equal halves");
  }
  if (in.size() == 0) {
    return;
  }
  swap_halves_rank3(as_rank3(in), as_rank3(out), D + 3 - Rank);
}

}  // namespace detail

/// sglang `swap_w13_to_w31`: exchanges the top and bottom halves of the row dimension (-2) of every
/// `[.., R, C]` matrix, `[w1; w3] -> [w3; w1]` (`[gate; up] -> [up; gate]`):
/// `out(.., r, c) = x(.., (r + R/2) % R, c)`. Any element type; `x` and `out` any strides.
/// @throws shape_error if R is odd or `out`'s shape differs; value_error if they overlap.
template <class Out, readable_as<Out> In, int Rank>
void swap_w13_to_w31(view<In, Rank> x, view<Out, Rank> out) {
  static_assert(Rank >= 2 && std::is_trivially_copyable_v<Out>,
                "qtl::swap_w13_to_w31: needs [.., R, C] views of a trivially copyable type");
  detail::swap_halves_checked<Rank - 2>("qtl::swap_w13_to_w31", "x", x, "out", out);
}

/// sglang `reorder_w1w3_to_w3w1(weight, scale, dim=Dim)`: the concatenation `[w1, w3]` along
/// dimension `Dim` (negative counts from the end, as torch) becomes `[w3, w1]`, for the weight and
/// its scale alike (each of any element type and strides). The reference splits the scale with the
/// weight's half size; QTL requires the scale to have the same size along `Dim` as the weight.
/// @throws shape_error if the weight's size along `Dim` is odd, the scale's differs from it, or an
///         output's shape differs from its input's; value_error if an output overlaps its input.
template <int Dim = -2, class WOut, class SOut, readable_as<WOut> WIn, readable_as<SOut> SIn, int Rank>
void reorder_w1w3_to_w3w1(view<WIn, Rank> weight, view<SIn, Rank> scale, view<WOut, Rank> weight_out,
                          view<SOut, Rank> scale_out) {
  static_assert(std::is_trivially_copyable_v<WOut> && std::is_trivially_copyable_v<SOut>,
                "qtl::reorder_w1w3_to_w3w1: weight and scale must be trivially copyable");
  constexpr int d = detail::normalized_dim<Dim, Rank>;
  static_assert(d >= 0 && d < Rank, "qtl::reorder_w1w3_to_w3w1: Dim must be in [-Rank, Rank)");
  if (scale.extent[d] != weight.extent[d]) {
    throw shape_error("qtl::reorder_w1w3_to_w3w1: scale has size " + std::to_string(scale.extent[d]) +
                      " along dimension " + std::to_string(Dim) + " but weight has " +
                      std::to_string(weight.extent[d]) + "; both are split into the same two halves");
  }
  detail::check_same_shape("qtl::reorder_w1w3_to_w3w1", "scale", scale, "scale_out", scale_out);
  detail::swap_halves_checked<d>("qtl::reorder_w1w3_to_w3w1", "weight", weight, "weight_out", weight_out);
  if (scale.size() != 0) {
    detail::swap_halves_rank3(detail::as_rank3(scale), detail::as_rank3(scale_out), d + 3 - Rank);
  }
}

/// The GEMM1 gather vector for `rows` rows (`out[n] = in[indices[n]]`).
/// @throws shape_error unless `rows` is a non-negative multiple of the shuffle block (and even).
template <int EpilogueTileM = 128>
std::vector<std::int32_t> w3w1_row_indices(index_t rows, bool gated) {
  constexpr int bs = shuffle_block_rows<EpilogueTileM>;
  if (rows < 0 || rows % bs != 0 || rows > INT32_MAX) {
    throw shape_error("qtl::w3w1_row_indices: rows (" + std::to_string(rows) + ") must be a multiple of the " +
                      std::to_string(bs) + "-row shuffle block of epilogue_tile_m " + std::to_string(EpilogueTileM));
  }
  std::vector<std::int32_t> idx(static_cast<std::size_t>(rows));
  for (index_t n = 0; n < rows; ++n) {
    idx[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(w3w1_row_source<EpilogueTileM>(n, rows, gated));
  }
  return idx;
}

/// The GEMM2 gather vector for `rows` rows. @throws shape_error as `w3w1_row_indices`.
template <int EpilogueTileM = 128>
std::vector<std::int32_t> w2_row_indices(index_t rows) {
  constexpr int bs = shuffle_block_rows<EpilogueTileM>;
  if (rows < 0 || rows % bs != 0 || rows > INT32_MAX) {
    throw shape_error("qtl::w2_row_indices: rows (" + std::to_string(rows) + ") must be a multiple of the " +
                      std::to_string(bs) + "-row shuffle block of epilogue_tile_m " + std::to_string(EpilogueTileM));
  }
  std::vector<std::int32_t> idx(static_cast<std::size_t>(rows));
  for (index_t n = 0; n < rows; ++n) {
    idx[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(w2_row_source<EpilogueTileM>(n));
  }
  return idx;
}

// ------------------------------------------------------------------------------------------------
// prepare_static_weights_for_trtllm_fp4_moe
// ------------------------------------------------------------------------------------------------

/// The sizes of one MoE layer for trtllm-gen FP4 (NVFP4: 16 elements per E4M3 scale).
///
///     gemm1_weights  [E, R1, H/2]   packed E2M1, rows [w3; w1] = [up; gate] when gated   R1 = 2I (gated) or I
///     gemm1_scales   [E, R1, H/16]  E4M3, linear
///     gemm2_weights  [E, H,  I/2]
///     gemm2_scales   [E, H,  I/16]
struct trtllm_fp4_moe_shape {
  index_t hidden_size = 0;        ///< H
  index_t intermediate_size = 0;  ///< I
  index_t num_experts = 0;        ///< E
  bool gated = true;              ///< GEMM1 computes gate and up (SwiGLU-style) rather than one projection

  constexpr index_t gemm1_rows() const { return (gated ? 2 : 1) * intermediate_size; }
  /// The preconditions of `trtllm_fp4_moe_plan` (`H % 128 == 0`, `I % 64 == 0`, `I % 128 == 0`
  /// when not gated, all positive, `E >= 0`); the plan's constructor says which one fails.
  constexpr bool valid() const {
    return num_experts >= 0 && hidden_size > 0 && hidden_size % 128 == 0 && intermediate_size > 0 &&
           intermediate_size % (gated ? 64 : 128) == 0;
  }
};

/// A set of the four MoE tensors (inputs or outputs); `W`, `S` are byte types, const for inputs.
template <class W, class S>
struct trtllm_fp4_moe_tensors {
  view3d<W> gemm1_weights;  ///< [E, R1, H/2]
  view3d<S> gemm1_scales;   ///< [E, R1, H/16]
  view3d<W> gemm2_weights;  ///< [E, H, I/2]
  view3d<S> gemm2_scales;   ///< [E, H, I/16]
};

/// The row permutations of one MoE shape, computed once and applied to every expert (flashinfer
/// caches them per call in a dict; QTL keeps them in the plan, keyed by everything they depend on:
/// the shape, `gated` and `EpilogueTileM`).
///
/// The constructor checks what the reference leaves unchecked (`docs/spec/blockscale.md` §3.4), so
/// that its "per-expert output size equals the per-expert input numel" holds and no padding is
/// needed: `H % 128 == 0` (GEMM2 has H rows, the scale shuffle needs whole 128-row tiles, and
/// `H/16` must be a multiple of 4) and `I % 64 == 0` (`I/16` a multiple of 4) — `I % 128 == 0`
/// when not gated (GEMM1 then has I rows).
template <int EpilogueTileM = 128>
class trtllm_fp4_moe_plan {
 public:
  /// @throws shape_error naming the size that breaks a precondition.
  explicit trtllm_fp4_moe_plan(trtllm_fp4_moe_shape shape) : shape_(validated(shape)) {
    gemm1_rows_ = w3w1_row_indices<EpilogueTileM>(shape_.gemm1_rows(), shape_.gated);
    gemm2_rows_ = w2_row_indices<EpilogueTileM>(shape_.hidden_size);
  }

  trtllm_fp4_moe_shape const& shape() const { return shape_; }
  /// GEMM1 gather vector (weights and scales rows).
  std::vector<std::int32_t> const& gemm1_row_indices() const { return gemm1_rows_; }
  /// GEMM2 gather vector (weights and scales rows).
  std::vector<std::int32_t> const& gemm2_row_indices() const { return gemm2_rows_; }

  /// Writes the four prepared tensors of `out` from `in` (same shapes, see
  /// `trtllm_fp4_moe_shape`): `out.w[e][n] = in.w[e][P[n]]` for the weights, and each expert's
  /// scales row-permuted the same way, then laid out 128x4 (a flat `R1 * H/16` buffer per expert,
  /// viewed with the input's shape). Every tensor needs a contiguous innermost dimension; the output
  /// scales must be contiguous.
  /// @throws shape_error on a shape or stride mismatch (naming the tensor); value_error on overlap.
  template <blockscale_byte WOut, blockscale_byte SOut, readable_as<WOut> WIn, readable_as<SOut> SIn>
  void apply(trtllm_fp4_moe_tensors<WIn, SIn> const& in, trtllm_fp4_moe_tensors<WOut, SOut> const& out) const {
    index_t const e = shape_.num_experts;
    index_t const h = shape_.hidden_size;
    index_t const i = shape_.intermediate_size;
    index_t const r1 = shape_.gemm1_rows();
    check("gemm1_weights", in.gemm1_weights, out.gemm1_weights, {e, r1, h / 2}, false);
    check("gemm1_scales", in.gemm1_scales, out.gemm1_scales, {e, r1, h / 16}, true);
    check("gemm2_weights", in.gemm2_weights, out.gemm2_weights, {e, h, i / 2}, false);
    check("gemm2_scales", in.gemm2_scales, out.gemm2_scales, {e, h, i / 16}, true);
    gather_rows(in.gemm1_weights, out.gemm1_weights, gemm1_rows_);
    gather_rows(in.gemm2_weights, out.gemm2_weights, gemm2_rows_);
    gather_scales(in.gemm1_scales, out.gemm1_scales, gemm1_rows_, detail::best_band_isa());
    gather_scales(in.gemm2_scales, out.gemm2_scales, gemm2_rows_, detail::best_band_isa());
    detail::band_stream_fence();
  }

 private:
  static trtllm_fp4_moe_shape validated(trtllm_fp4_moe_shape s) {
    std::string const fn = "qtl::trtllm_fp4_moe_plan: ";
    if (s.num_experts < 0) {
      throw shape_error(fn + "num_experts (" + std::to_string(s.num_experts) + ") is negative");
    }
    if (s.hidden_size <= 0 || s.hidden_size % 128 != 0) {
      throw shape_error(fn + "hidden_size (" + std::to_string(s.hidden_size) +
                        ") must be a positive multiple of 128 (GEMM2 has hidden_size rows, shuffled and laid out in "
                        "128-row scale tiles; hidden_size/16 scales per GEMM1 row must fill 4-column tiles)");
    }
    index_t const need = s.gated ? 64 : 128;
    if (s.intermediate_size <= 0 || s.intermediate_size % need != 0) {
      throw shape_error(fn + "intermediate_size (" + std::to_string(s.intermediate_size) +
                        ") must be a positive multiple of " + std::to_string(need) +
                        (s.gated ? " (GEMM1 has 2*intermediate_size rows in 128-row scale tiles; "
                                   "intermediate_size/16 scales per GEMM2 row must fill 4-column tiles)"
                                 : " when not gated (GEMM1 has intermediate_size rows, laid out in 128-row scale "
                                   "tiles)"));
    }
    return s;
  }

  template <class In, class Out>
  static void check(char const* name, view3d<In> const& in, view3d<Out> const& out, index_t const (&want)[3],
                    bool is_scale) {
    char const* const fn = "qtl::trtllm_fp4_moe_plan::apply";
    detail::check_byte_pair(fn, name, in, want, out, want);
    if (is_scale && !out.is_contiguous()) {
      throw shape_error(std::string(fn) + ": output " + name + " must be contiguous (128x4 layout, a flat buffer)");
    }
  }

  // Whole-row byte copies; rows of large outputs go around the caches (streaming stores), which
  // is what memcpy does for buffers this size. The source rows jump around inside their 32-row
  // blocks, so the hardware prefetchers restart at every row: the rows 8 KiB ahead (in gather
  // order, across experts) are asked for explicitly, and rows go out with 64-byte streaming stores
  // where the CPU has AVX-512F (figures: docs/performance.md, moe).
  template <class In, class Out>
  static void gather_rows(view3d<In> const& in, view3d<Out> const& out, std::vector<std::int32_t> const& rows) {
    auto const width = static_cast<std::size_t>(in.extent[2]);
    auto const per_expert = static_cast<index_t>(rows.size());
    index_t const total = in.extent[0] * per_expert;
    index_t const ahead = static_cast<index_t>((8192 + width - 1) / width);
    auto const source = [&](index_t i) { return detail::byte_ptr(&in(i / per_expert, rows[i % per_expert], 0)); };
    bool const stream = detail::use_stream_stores(out.data, out.size());
    bool const wide = detail::best_band_isa() == detail::band_isa::avx512;
    for (index_t i = 0; i < ahead && i < total; ++i) {
      detail::prefetch_bytes(source(i), in.extent[2]);
    }
    for (index_t i = 0; i < total; ++i) {
      if (i + ahead < total) {
        detail::prefetch_bytes(source(i + ahead), in.extent[2]);
      }
      auto* const dst = detail::byte_ptr(&out(i / per_expert, i % per_expert, 0));
      if (!stream) {
        detail::copy_row_bytes<detail::row_store::plain>(dst, source(i), width);
      } else if (wide) {
        detail::copy_row_bytes<detail::row_store::stream64>(dst, source(i), width);
      } else {
        detail::copy_row_bytes<detail::row_store::stream16>(dst, source(i), width);
      }
    }
  }

  // Row permutation fused with the 128x4 layout: the 128 source rows of each output band, looked
  // up through the plan, are laid out straight into the expert's buffer (no padding: rows % 128
  // == 0 and cols % 4 == 0 by the preconditions), each band asking for the rows of the next, and
  // with streaming stores where the weights have them.
  template <class In, class Out>
  static void gather_scales(view3d<In> const& in, view3d<Out> const& out, std::vector<std::int32_t> const& rows,
                            detail::band_isa level) {
    index_t const cols = in.extent[2];
    auto const per_expert = static_cast<index_t>(rows.size()) / 128;
    index_t const n = in.extent[0] * per_expert;
    bool const stream = detail::use_stream_stores(out.data, out.size());
    detail::byte_t const* bands[2][128];
    auto const gather = [&](index_t band, detail::byte_t const** to) {  // band e * per_expert + m0 / 128
      index_t const e = band / per_expert;
      auto const m0 = static_cast<std::size_t>(band % per_expert * 128);
      for (std::size_t r = 0; r < 128; ++r) {
        to[r] = detail::byte_ptr(&in(e, rows[m0 + r], 0));
      }
    };
    if (n > 0) {
      gather(0, bands[0]);
    }
    for (index_t band = 0; band < n; ++band) {
      detail::byte_t const** const next = band + 1 < n ? bands[(band + 1) % 2] : nullptr;
      if (next != nullptr) {
        gather(band + 1, next);
      }
      detail::swizzle_band_128x4(bands[band % 2], cols, detail::byte_ptr(out.data) + band * 128 * cols, level, stream,
                                 next);
    }
  }

  trtllm_fp4_moe_shape shape_;
  std::vector<std::int32_t> gemm1_rows_;
  std::vector<std::int32_t> gemm2_rows_;
};

/// sglang `prepare_static_weights_for_trtllm_fp4_moe(g1_w, g2_w, g1_sf, g2_sf, H, I, E, is_gated)`
/// with `epilogue_tile_m = 128`: builds the plan for `shape` and applies it (see
/// `trtllm_fp4_moe_plan::apply`). Outputs: `gemm1_weights_fp4_shuffled`, `gemm1_scales_fp4_shuffled`,
/// `gemm2_weights_fp4_shuffled`, `gemm2_scales_fp4_shuffled`, written into `out`.
template <class WIn, class SIn, class WOut, class SOut>
void prepare_static_weights_for_trtllm_fp4_moe(trtllm_fp4_moe_shape const& shape,
                                               trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                               trtllm_fp4_moe_tensors<WOut, SOut> const& out) {
  trtllm_fp4_moe_plan<128>(shape).apply(in, out);
}

// ------------------------------------------------------------------------------------------------
// Zero padding for the alignments of FlashInfer's and CUTLASS's FP4 kernels
// ------------------------------------------------------------------------------------------------
//
// vLLM pads a tensor-parallel shard whose sizes the kernels cannot take (Gemma-4-26B's
// intermediate at TP4, say) with zero rows and columns. Each op below writes a new, larger tensor
// (the engine's `new_zeros` and slice copies, out of place as there; where no padding is needed the
// engine hands back its inputs and QTL copies them): the peak memory is the inputs plus the outputs.

namespace detail {

// out(e, r, c) = in(e, map.source(r), c) for c < in's columns; zero in the other columns and in
// rows whose source is -1. Byte elements, innermost dimensions contiguous (checked).
// Outputs too large for the caches are written with streaming stores, as memcpy writes them
// (plain row-by-row copies read every destination line first: about 0.5 of memcpy, see
// docs/performance.md), where the output rows start on 16 bytes.
template <class In, class Out>
void map_rows(view3d<In> const& in, view3d<Out> const& out, moe_row_map const& map) {
  auto const cols = static_cast<std::size_t>(in.extent[2]);
  auto const out_cols = static_cast<std::size_t>(out.extent[2]);
  if (out_cols == 0 || out.extent[0] == 0 || out.extent[1] == 0) {
    return;
  }
  bool const stream = use_stream_stores(out.data, out.size());
  bool const wide = best_band_isa() == band_isa::avx512;
  for (index_t e = 0; e < out.extent[0]; ++e) {
    for (index_t r = 0; r < out.extent[1]; ++r) {
      byte_t* const dst = byte_ptr(&out(e, r, 0));
      index_t const src = map.source(r);
      byte_t const* const from = src >= 0 && cols > 0 ? byte_ptr(&in(e, src, 0)) : nullptr;
      std::size_t const n = from != nullptr ? cols : 0;
      bool const streamed = stream && (wide ? moe_x86::pad_row<row_store::stream64>(dst, from, n, out_cols)
                                            : moe_x86::pad_row<row_store::stream16>(dst, from, n, out_cols));
      if (!streamed) {
        if (n > 0) {
          std::memcpy(dst, from, n);
        }
        std::memset(dst + n, 0, out_cols - n);
      }
    }
  }
  if (stream) {
    band_stream_fence();
  }
}

}  // namespace detail

/// The four NVFP4 MoE tensors' extents (w13 [E, R1, H/2], w13_scale [E, R1, H/16], w2 [E, H, I/2],
/// w2_scale [E, H, I/16], in that order), and the size the alignment ops pad to (their returned int).
struct fp4_moe_padding {
  index_t extents[4][3] = {};
  index_t padded = 0;  ///< Ip or Hp

  /// The extents of a layer of E experts, R1 GEMM1 rows, hidden size H and intermediate size I.
  static constexpr fp4_moe_padding of(index_t e, index_t r1, index_t h, index_t i, index_t padded = 0) {
    return {{{e, r1, h / 2}, {e, r1, h / 16}, {e, h, i / 2}, {e, h, i / 16}}, padded};
  }
};

namespace detail {

// One FP4 MoE padding: the inputs' and outputs' extents, and the row maps
// (`padded_row_source(r, rows, padded)`) of the w13 pair and of the w2 pair; the columns of each
// output past its input's are zeros. Sizes only: the callers check the tensors against them.
struct fp4_moe_pad_plan {
  fp4_moe_padding in, out;
  index_t rows13 = 0, padded13 = 1, rows2 = 0, padded2 = 1;
};

// align_fp4_moe_weights_for_fi: E experts, hidden H, intermediate I, `up` projections in w13.
constexpr fp4_moe_pad_plan align_intermediate_plan(index_t e, index_t h, index_t i, index_t up, index_t a) {
  index_t const ip = round_up(i, a);
  return {fp4_moe_padding::of(e, up * i, h, i), fp4_moe_padding::of(e, up * ip, h, ip, ip), i, ip, h, h};
}

// align_fp4_moe_hidden_dim_for_fi: w13 of R1 rows.
constexpr fp4_moe_pad_plan align_hidden_plan(index_t e, index_t r1, index_t h, index_t i, index_t a) {
  index_t const hp = round_up(h, a);
  return {fp4_moe_padding::of(e, r1, h, i), fp4_moe_padding::of(e, r1, hp, i, hp), r1, r1, h, hp};
}

inline constexpr char const* fp4_moe_names[4] = {"w13", "w13_scale", "w2", "w2_scale"};

// The plan of `in` (E and H/2 from w13, I/2 from w2, as vLLM reads them), its sizes and every
// tensor checked (`out` too unless null). `hidden` picks the op; `up` is w13's projections
// (the intermediate op's). @throws value_error / shape_error naming `fn` and what is wrong.
template <class WIn, class SIn, class WOut, class SOut>
fp4_moe_pad_plan fp4_moe_checked_plan(char const* fn, trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                      trtllm_fp4_moe_tensors<WOut, SOut> const* out, bool hidden, index_t up,
                                      index_t a) {
  if (a <= 0) {
    throw value_error(std::string(fn) + ": min_alignment (" + std::to_string(a) + ") must be positive");
  }
  index_t const e = in.gemm1_weights.extent[0];
  index_t const h = 2 * in.gemm1_weights.extent[2];
  index_t const i = 2 * in.gemm2_weights.extent[2];
  if (h % 16 != 0 || i % 16 != 0) {
    throw shape_error(std::string(fn) + ": hidden size " + std::to_string(h) + " and intermediate size " +
                      std::to_string(i) +
                      " (twice the last extents of w13 and w2) must be multiples of 16, the NVFP4 block");
  }
  fp4_moe_pad_plan const p =
      hidden ? align_hidden_plan(e, in.gemm1_weights.extent[1], h, i, a) : align_intermediate_plan(e, h, i, up, a);
  check_byte_tensor(fn, "input", fp4_moe_names[0], in.gemm1_weights, p.in.extents[0]);
  check_byte_tensor(fn, "input", fp4_moe_names[1], in.gemm1_scales, p.in.extents[1]);
  check_byte_tensor(fn, "input", fp4_moe_names[2], in.gemm2_weights, p.in.extents[2]);
  check_byte_tensor(fn, "input", fp4_moe_names[3], in.gemm2_scales, p.in.extents[3]);
  if (out != nullptr) {
    check_byte_pair(fn, fp4_moe_names[0], in.gemm1_weights, p.in.extents[0], out->gemm1_weights, p.out.extents[0]);
    check_byte_pair(fn, fp4_moe_names[1], in.gemm1_scales, p.in.extents[1], out->gemm1_scales, p.out.extents[1]);
    check_byte_pair(fn, fp4_moe_names[2], in.gemm2_weights, p.in.extents[2], out->gemm2_weights, p.out.extents[2]);
    check_byte_pair(fn, fp4_moe_names[3], in.gemm2_scales, p.in.extents[3], out->gemm2_scales, p.out.extents[3]);
  }
  return p;
}

template <class WIn, class SIn, class WOut, class SOut>
void run_fp4_moe_pad(fp4_moe_pad_plan const& p, trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                     trtllm_fp4_moe_tensors<WOut, SOut> const& out) {
  moe_row_map const m13{moe_row_map::kind::padded, p.rows13, p.padded13};
  moe_row_map const m2{moe_row_map::kind::padded, p.rows2, p.padded2};
  map_rows(in.gemm1_weights, out.gemm1_weights, m13);
  map_rows(in.gemm1_scales, out.gemm1_scales, m13);
  map_rows(in.gemm2_weights, out.gemm2_weights, m2);
  map_rows(in.gemm2_scales, out.gemm2_scales, m2);
}

using no_fp4_moe_out = trtllm_fp4_moe_tensors<std::uint8_t, std::uint8_t> const*;

}  // namespace detail

/// The output of `align_fp4_moe_weights_for_fi` for `in`: its extents and Ip.
/// @throws shape_error if the inputs' shapes do not fit together (w13 with `up`·I rows, up = 2
///         when `is_act_and_mul`) or H or I is no multiple of 16; value_error unless
///         `min_alignment > 0`.
template <class W, class S>
fp4_moe_padding align_fp4_moe_weights_for_fi_padding(trtllm_fp4_moe_tensors<W, S> const& in, bool is_act_and_mul,
                                                     index_t min_alignment = 16) {
  return detail::fp4_moe_checked_plan("qtl::align_fp4_moe_weights_for_fi", in, detail::no_fp4_moe_out{}, false,
                                      is_act_and_mul ? 2 : 1, min_alignment)
      .out;
}

/// vLLM `align_fp4_moe_weights_for_fi(w13, w13_scale, w2, w2_scale, is_act_and_mul,
/// min_alignment)` (`flashinfer_utils.py`): the NVFP4 MoE tensors (`gemm1_*` = w13, `gemm2_*` = w2)
/// with the intermediate size I (twice w2's last extent) zero-padded to
/// Ip = `round_up(I, min_alignment)`, each projection of w13 on its own:
///
///     w13, w13_scale [E, up*I, H/2 | H/16] -> [E, up*Ip, ..]  (up = 2 when is_act_and_mul)
///         rows [0, I) -> [0, I), rows [I, 2I) -> [Ip, Ip + I), the rest zero
///     w2, w2_scale   [E, H, I/2 | I/16]    -> [E, H, Ip/2 | Ip/16], the new columns zero
///
/// Returns Ip; `out` has the extents of `align_fp4_moe_weights_for_fi_padding`. H and I must be
/// multiples of 16 (the engine slices whatever it is given; a layer that is not would be no NVFP4).
/// @throws as `align_fp4_moe_weights_for_fi_padding`; shape_error if an output's shape or an
///         innermost stride differs, value_error if an output overlaps its input.
template <class WIn, class SIn, blockscale_byte WOut, blockscale_byte SOut>
index_t align_fp4_moe_weights_for_fi(trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                     trtllm_fp4_moe_tensors<WOut, SOut> const& out, bool is_act_and_mul,
                                     index_t min_alignment = 16) {
  detail::fp4_moe_pad_plan const p = detail::fp4_moe_checked_plan("qtl::align_fp4_moe_weights_for_fi", in, &out, false,
                                                                  is_act_and_mul ? 2 : 1, min_alignment);
  detail::run_fp4_moe_pad(p, in, out);
  return p.out.padded;
}

/// The output of `align_fp4_moe_hidden_dim_for_fi` for `in`: its extents and Hp.
/// @throws as `align_fp4_moe_weights_for_fi_padding` (w13 may have any number of rows).
template <class W, class S>
fp4_moe_padding align_fp4_moe_hidden_dim_for_fi_padding(trtllm_fp4_moe_tensors<W, S> const& in,
                                                        index_t min_alignment = 256) {
  return detail::fp4_moe_checked_plan("qtl::align_fp4_moe_hidden_dim_for_fi", in, detail::no_fp4_moe_out{}, true, 1,
                                      min_alignment)
      .out;
}

/// vLLM `align_fp4_moe_hidden_dim_for_fi(w13, w13_scale, w2, w2_scale, min_alignment)`
/// (`flashinfer_utils.py`): the hidden size H (twice w13's last extent) zero-padded to
/// Hp = `round_up(H, min_alignment)`:
///
///     w13, w13_scale [E, R1, H/2 | H/16] -> [E, R1, Hp/2 | Hp/16], the new columns zero
///     w2, w2_scale   [E, H, I/2 | I/16]  -> [E, Hp, ..], the new rows zero
///
/// Returns Hp; `out` has the extents of `align_fp4_moe_hidden_dim_for_fi_padding`.
/// @throws as `align_fp4_moe_weights_for_fi`.
template <class WIn, class SIn, blockscale_byte WOut, blockscale_byte SOut>
index_t align_fp4_moe_hidden_dim_for_fi(trtllm_fp4_moe_tensors<WIn, SIn> const& in,
                                        trtllm_fp4_moe_tensors<WOut, SOut> const& out, index_t min_alignment = 256) {
  detail::fp4_moe_pad_plan const p =
      detail::fp4_moe_checked_plan("qtl::align_fp4_moe_hidden_dim_for_fi", in, &out, true, 1, min_alignment);
  detail::run_fp4_moe_pad(p, in, out);
  return p.out.padded;
}

/// The padding of `pad_nvfp4_weight_for_cutlass`: the output's rows and byte columns, and the
/// engine's `weights_padding_bytes` (the byte columns added).
struct nvfp4_cutlass_padding {
  index_t rows = 0;
  index_t col_bytes = 0;
  index_t padding_bytes = 0;
};

/// The padding `pad_nvfp4_weight_for_cutlass` gives a `[rows, col_bytes]` packed weight: rows up to a
/// multiple of `alignment`; the 2 * `col_bytes` FP4 columns, where not a multiple of it, up to one,
/// adding half the added columns (rounded down) as bytes. @throws value_error unless `alignment > 0`.
inline nvfp4_cutlass_padding pad_nvfp4_weight_for_cutlass_shape(index_t rows, index_t col_bytes,
                                                                index_t alignment = 32) {
  if (alignment <= 0) {
    throw value_error("qtl::pad_nvfp4_weight_for_cutlass: alignment (" + std::to_string(alignment) +
                      ") must be positive");
  }
  index_t const k = 2 * col_bytes;
  index_t const pad = k % alignment != 0 ? (round_up(k, alignment) - k) / 2 : 0;
  return {round_up(rows, alignment), col_bytes + pad, pad};
}

/// vLLM `pad_nvfp4_weight_for_cutlass(weight, alignment)` (`nvfp4_utils.py`): the packed NVFP4
/// weight [N, K/2] (two E2M1 values a byte) with zero rows up to a multiple of `alignment` and zero
/// byte columns until K is one (`pad_nvfp4_weight_for_cutlass_shape`). Returns the engine's
/// `weights_padding_bytes`. @throws shape_error if `out`'s shape differs or an innermost stride is
/// not 1; value_error on overlap or an `alignment` that is not positive.
template <blockscale_byte Out, readable_as<Out> In>
index_t pad_nvfp4_weight_for_cutlass(view2d<In> weight, view2d<Out> out, index_t alignment = 32) {
  char const* const fn = "qtl::pad_nvfp4_weight_for_cutlass";
  nvfp4_cutlass_padding const p = pad_nvfp4_weight_for_cutlass_shape(weight.extent[0], weight.extent[1], alignment);
  view3d<In> const in3 = detail::as_rank3(weight);
  view3d<Out> const out3 = detail::as_rank3(out);
  detail::check_byte_pair(fn, "weight", in3, {1, weight.extent[0], weight.extent[1]}, out3, {1, p.rows, p.col_bytes});
  detail::map_rows(in3, out3, {moe_row_map::kind::padded, weight.extent[0], p.rows});
  return p.padding_bytes;
}

// ------------------------------------------------------------------------------------------------
// CuteDSL row orders (vLLM's FlashInfer CuteDSL MoE path)
// ------------------------------------------------------------------------------------------------

/// vLLM `interleave_linear_and_gate(x, group_size, dim)` (`flashinfer_fp4_moe.py`) on `x` seen as
/// `[outer, S, inner]` around `dim` (any element type as bytes: inner = the trailing extents times
/// the element size): the two halves of S interleaved in groups of `group_size`
/// (`interleave_linear_and_gate_source`). vLLM's CuteDSL preparation runs it on the gated `[up;
/// gate]` w13 and its linear scales along the rows (dim 1), group 64. The engine's result is a
/// new tensor (`.contiguous()`), as QTL's: peak memory the input plus the output.
/// @throws shape_error unless S is a multiple of `2 * group_size` (vLLM's assert), `out`'s shape
///         is `x`'s and the innermost strides are 1; value_error if `group_size <= 0` or they overlap.
template <blockscale_byte Out, readable_as<Out> In>
void interleave_linear_and_gate(view3d<In> x, view3d<Out> out, index_t group_size = 64) {
  char const* const fn = "qtl::interleave_linear_and_gate";
  if (group_size <= 0) {
    throw value_error(std::string(fn) + ": group_size (" + std::to_string(group_size) + ") must be positive");
  }
  index_t const size = x.extent[1];
  if (size % (2 * group_size) != 0) {
    throw shape_error(std::string(fn) + ": dimension size " + std::to_string(size) + " must be divisible by " +
                      std::to_string(2 * group_size) + " (two halves of whole groups of " + std::to_string(group_size) +
                      ")");
  }
  index_t const want[3] = {x.extent[0], x.extent[1], x.extent[2]};
  detail::check_byte_pair(fn, "x", x, want, out, want);
  detail::map_rows(x, out, {moe_row_map::kind::interleave_linear_and_gate, size, group_size});
}

/// vLLM `reorder_w13_to_w31_for_flashinfer_cutedsl(activation, w13, w13_scale)`: the rows (dim 1)
/// of w13 `[E, R, C]` and of its scales `[E, R, Cs]` (any element types, as bytes) to FlashInfer's
/// `[up; gate]`: from gpt-oss's interleaved `[gate0, up0, gate1, up1, ..]` when `interleaved` (the
/// engine's `activation == MoEActivation.SWIGLUOAI`), else from `[gate; up]` (the halves swapped);
/// `w13_to_w31_source`. New tensors as the engine's (`cat(...).contiguous()`): peak memory the
/// inputs plus the outputs.
/// @throws shape_error if R is odd (QTL's: the engine's halves then differ in size), the scales'
///         rows or experts differ, an output's shape differs or an innermost stride is not 1;
///         value_error if an output overlaps its input.
template <blockscale_byte WOut, blockscale_byte SOut, readable_as<WOut> WIn, readable_as<SOut> SIn>
void reorder_w13_to_w31_for_flashinfer_cutedsl(bool interleaved, view3d<WIn> w13, view3d<SIn> w13_scale,
                                               view3d<WOut> w13_out, view3d<SOut> w13_scale_out) {
  char const* const fn = "qtl::reorder_w13_to_w31_for_flashinfer_cutedsl";
  index_t const rows = w13.extent[1];
  if (rows % 2 != 0) {
    throw shape_error(std::string(fn) + ": w13 has an odd number of rows (" + std::to_string(rows) +
                      "); it must hold gate and up rows alike");
  }
  index_t const ww[3] = {w13.extent[0], rows, w13.extent[2]};
  index_t const ws[3] = {w13.extent[0], rows, w13_scale.extent[2]};
  detail::check_byte_pair(fn, "w13", w13, ww, w13_out, ww);
  detail::check_byte_pair(fn, "w13_scale", w13_scale, ws, w13_scale_out, ws);
  moe_row_map const map{interleaved ? moe_row_map::kind::w13_to_w31_interleaved : moe_row_map::kind::w13_to_w31, rows};
  detail::map_rows(w13, w13_out, map);
  detail::map_rows(w13_scale, w13_scale_out, map);
}

}  // namespace qtl
