#pragma once
/// \file
/// The device path of qtl._qtl: the table of CUDA runtime calls and kernel launchers that the
/// bindings use for arrays on a CUDA device. It is filled in by one translation unit chosen by the
/// build: `device_kernels.cu` compiled by nvcc (the CUDA build), the same file compiled by g++
/// against the simulated device of test/support/cuda_sim (the test build), or `device_none.cpp`
/// (the host-only build, where `backend()` is null and device arrays are refused). Nothing here
/// includes a CUDA header: the binding files stay plain C++, compiled once for every build.
///
/// Launchers take device views and a stream (a `cudaStream_t` as `void*`), enqueue, and return the
/// `cudaError_t` as an int (0: success); they never synchronise. Host-side argument checks stay in
/// the bindings, shared with the host path.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>

#include <qtl/element/fp8_checkpoint.hpp>
#include <qtl/element/moe.hpp>
#include <qtl/element/quantize.hpp>
#include <qtl/numeric.hpp>
#include <qtl/scalar_type.hpp>
#include <qtl/view.hpp>

namespace qtl::py::device {

/// A CUDA stream handle (`cudaStream_t`), opaque to the bindings.
using stream_t = void*;

/// Which of the four 2-D packings (qtl/pack.hpp) and AWQ's (qtl/pack_nd.hpp).
enum class pack_op : std::uint8_t { pack_cols, pack_rows, unpack_cols, unpack_rows, awq_pack };

/// A float weight's element type.
enum class float_type : std::uint8_t { f32, f16, bf16 };

/// The float_type of float, half_t or bfloat16_t.
template <class T>
constexpr float_type float_type_of() {
  return std::is_same_v<T, half_t>       ? float_type::f16
         : std::is_same_v<T, bfloat16_t> ? float_type::bf16
                                         : float_type::f32;
}

/// The arguments of quantize_weights on the device (all C-contiguous device memory): w (k, n) of
/// `type`; w_ref (k, n) and w_s (groups, n) of `type` (w_ref float32 when ungrouped: no
/// group_size), w_q (k, n), w_zp (groups, n) when `opt.zero_points`.
struct quantize_call {
  scalar_type q;
  float_type type;
  void const* w;
  index_t k, n;
  std::optional<index_t> group_size;
  index_t groups;
  void* w_ref;
  std::int32_t* w_q;
  void* w_s;
  std::int32_t* w_zp;
  quantize_options opt;
};

/// The arguments of gptq_quantize_weights on the device (C-contiguous device memory): w, w_ref
/// (k, n) and w_s (groups, n) of `type`, w_q (k, n); with `perm` (int64 [k], a checked
/// permutation, may be `rand_perm` itself) the rows are permuted into g_idx / rand_perm [k], with
/// `scratch` int32 [k]; without it those three are not touched.
struct gptq_call {
  scalar_type q;
  float_type type;
  void const* w;
  index_t k, n;
  index_t group_size;
  index_t groups;
  void* w_ref;
  std::int32_t* w_q;
  void* w_s;
  std::int64_t const* perm;
  std::int32_t* g_idx;
  std::int64_t* rand_perm;
  std::int32_t* scratch;
};

/// The block formats of qtl/fp4.hpp (qtl::block_formats).
enum class block_format : std::uint8_t { nvfp4, mxfp4, mxfp8 };

/// The FP4 MoE preparations over the four tensors of qtl::trtllm_fp4_moe_tensors (qtl/moe.hpp).
enum class moe_op : std::uint8_t { prepare_trtllm, align_intermediate, align_hidden };

/// The row maps of one byte tensor (qtl/moe.hpp): pad_nvfp4_weight_for_cutlass (parameter: the
/// alignment), interleave_linear_and_gate (the group size), swap_halves (swap_w13_to_w31 and
/// reorder_w1w3_to_w3w1 on [outer, S, inner bytes]; no parameter).
enum class rows_op : std::uint8_t { pad_cutlass, interleave, swap_halves };

/// The two-tensor trtllm-gen layouts of qtl/moe_trtllm.hpp: shuffle_deepseek_fp8_moe_weights,
/// rotate_weights_for_fi_trtllm_fp8_per_tensor_moe, convert_moe_weights_to_flashinfer_trtllm_block_layout.
enum class trtllm_pair_op : std::uint8_t { deepseek_fp8, fp8_per_tensor, bf16_block };

/// The int4 reorders of qtl/w4a8.hpp: encode_and_reorder_int4b, its grouped form, the inverse.
enum class int4b_op : std::uint8_t { plain, grouped, inverse };

/// scaled_fp8_quant's three modes.
enum class fp8_mode : std::uint8_t { static_scale, dynamic, per_token };

/// The runtime calls and the kernel launchers of one build, one entry per op family.
struct backend {
  char const* name;  ///< "cuda" or "cuda-sim"
  /// cudaGetDevice: the calling thread's current device.
  int (*current_device)(int* device);
  /// cudaMalloc / cudaFree (for outputs of producers without an allocator of their own).
  int (*malloc)(void** p, std::size_t bytes);
  void (*free)(void* p);
  /// Device-to-host copy ordered on `stream`, then a wait for it (for scalar arguments).
  int (*copy_to_host)(void* dst, void const* src, std::size_t bytes, stream_t stream);
  /// Host-to-device copy ordered on `stream` (the source may be reused on return).
  int (*copy_to_device)(void* dst, void const* src, std::size_t bytes, stream_t stream);
  char const* (*error_string)(int err);
  /// Orders `consumer` after the work enqueued so far on `producer` (an event recorded on one, waited
  /// for by the other): DLPack's contract for an array handed to a consumer on another stream.
  int (*order_after)(stream_t producer, stream_t consumer);

  /// qtl::cuda::pack_cols / pack_rows / unpack_cols / unpack_rows / awq_pack<bits>.
  int (*pack)(pack_op op, int bits, view2d<std::int32_t const> in, view2d<std::int32_t> out, stream_t stream);
  /// qtl::cuda::pack_quantized_values_into_int32<t> (`packing`) or its inverse.
  int (*pack_dim)(bool packing, scalar_type t, view3d<std::int32_t const> in, view3d<std::int32_t> out,
                  stream_t stream);

  /// qtl::cuda::swizzle_blockscale (`swizzle`) or unswizzle_blockscale of byte scales, [B, M, K].
  int (*blockscale)(bool swizzle, view3d<std::uint8_t const> in, view3d<std::uint8_t> out, stream_t stream);
  /// qtl::cuda::per_tensor_dequantize: `out` (contiguous, t's extents) float32 or float16.
  int (*per_tensor_dequantize)(view2d<float8_e4m3fn_t const> t, float inv_scale, void* out, bool f32_out,
                               stream_t stream);
  /// qtl::cuda::quantize_weights<c.q> (the integer types of qtl.quantize_weights).
  int (*quantize_weights)(quantize_call const& c, stream_t stream);

  /// qtl::cuda::marlin::repack_gptq<bits, a8> (with `perm`, device int32 [K], or null) or repack_awq.
  int (*marlin_repack)(bool awq, int bits, bool a8, view2d<std::int32_t const> w, std::int32_t const* perm,
                       view2d<std::int32_t> out, stream_t stream);

  /// qtl::cuda::scaled_fp8_quant_static (`scale` holds the scale), _dynamic (`scale` gets it) or
  /// _per_token (`scale` gets out's rows of scales): `in` (m, n) of `type`, `out` (rows >= m, n).
  int (*scaled_fp8_quant)(fp8_mode mode, float_type type, void const* in, index_t m, index_t n, float8_e4m3fn_t* out,
                          index_t rows, float* scale, stream_t stream);

  /// qtl::cuda::gptq_quantize_weights<c.q> (uint4b8, uint8b128); see gptq_call.
  int (*gptq_quantize_weights)(gptq_call const& c, stream_t stream);
  /// qtl::cuda::permute_rows: q_w and w_ref (k, n) of `type` gathered by `perm` (device int64 [k])
  /// into q_out / r_out; g_idx = perm // group_size, rand_perm = perm (may be `perm` itself).
  int (*permute_rows)(float_type type, view2d<std::int32_t const> q_w, void const* w_ref, index_t group_size,
                      std::int64_t const* perm, view2d<std::int32_t> q_out, void* r_out, std::int32_t* g_idx,
                      std::int64_t* rand_perm, stream_t stream);
  /// qtl::cuda::sort_weights, CUB's two-call protocol: with `workspace` null, sets `workspace_bytes`.
  int (*sort_weights)(void* workspace, std::size_t& workspace_bytes, view2d<std::int32_t const> q_w,
                      std::int32_t const* g_idx, view2d<std::int32_t> q_out, std::int32_t* g_out,
                      std::int32_t* sort_indices, stream_t stream);

  /// qtl::cuda::block_quantize<f, layout 128x4 (`swizzle`) or linear> of `in` (m, k) of `type`
  /// into values and scales; NVFP4 reads `*global_scale`, computed first (nvfp4_global_scale) when
  /// `compute_global_scale`.
  int (*block_quantize)(block_format f, bool swizzle, float_type type, void const* in, index_t m, index_t k,
                        void* values, void* scales, float* global_scale, bool compute_global_scale, stream_t stream);
  /// qtl::cuda::block_dequantize<f, layout> of values (m, k / elements per byte) and scales into
  /// `out` (m, k) of `out_type`.
  int (*block_dequantize)(block_format f, bool swizzle, float_type out_type, void const* values, index_t m, index_t k,
                          void const* scales, float const* global_scale, void* out, stream_t stream);

  /// qtl::cuda::scaled_quantize<e4m3fnuz (`fnuz`) or e4m3fn, compute> of x (m, n) of `type` under
  /// the group shape (rows, cols; -1: the whole extent) into q (m, n) and scale (s_rows, s_cols).
  int (*scaled_quantize)(bool fnuz, float_type type, float_type compute, void const* x, index_t m, index_t n,
                         index_t group_rows, index_t group_cols, void* q, float* scale, index_t s_rows, index_t s_cols,
                         float fp8_max, stream_t stream);
  /// qtl::cuda::scaled_dequantize<out_type> of q (m, n; e4m3fnuz codes when `fnuz`) by a scale
  /// (s_rows, s_cols) of `scale_type`.
  int (*scaled_dequantize)(bool fnuz, float_type scale_type, float_type out_type, void const* q, index_t m, index_t n,
                           void const* scale, index_t s_rows, index_t s_cols, void* out, stream_t stream);
  /// qtl::cuda::group_broadcast of t (rows, cols) into out (out_rows, out_cols), both of `type`.
  int (*group_broadcast)(float_type type, void const* t, index_t rows, index_t cols, void* out, index_t out_rows,
                         index_t out_cols, stream_t stream);
  /// qtl::cuda::normalize_e4m3fn_to_e4m3fnuz of n codes (`weight`), else double_scales of n scales
  /// of `scale_type`.
  int (*fnuz)(bool weight, float_type scale_type, void const* in, void* out, index_t n, stream_t stream);
  /// qtl::cuda::requantize_with_max_scale of `weight` in place, for a plan the host made (requantize
  /// true) from the host copy of the scales.
  int (*requantize_with_max_scale)(view2d<float8_e4m3fn_t> weight, float max_scale, std::span<float const> scales,
                                   std::span<index_t const> logical_widths, stream_t stream);
  /// qtl::cuda::fp8_compare: counts (device, 3) = {sign flips, differ, differ_large}.
  int (*fp8_compare)(view2d<float8_e4m3fn_t const> a, view2d<float8_e4m3fn_t const> b, unsigned long long* counts,
                     stream_t stream);

  /// qtl::cuda::marlin::permute_scales of s (rows, cols) of `elem_bytes`-byte elements (2 or 4) by
  /// the kind (qtl::marlin::scale_perm_kind as int).
  int (*marlin_permute_scales)(int elem_bytes, int kind, void const* s, index_t rows, index_t cols, void* out,
                               stream_t stream);
  /// qtl::cuda::marlin::unrepack_gptq<bits, a8> of Marlin `m` with `inverse_perm` (device int32 [K],
  /// checked) or null.
  int (*marlin_unrepack)(int bits, bool a8, view2d<std::int32_t const> m, std::int32_t const* inverse_perm,
                         view2d<std::int32_t> out, stream_t stream);

  /// A weight of `groups` matrices [n, k] in blocks of (bn, bk) (qtl::convert::block_grid).
  struct block_grid {
    std::int64_t groups, n, k;
    int bn, bk;
  };
  /// qtl::cuda::block_quant_dequant<float or bfloat16_t>.
  int (*block_quant_dequant)(bool bf16, std::uint8_t const* q, float const* s, block_grid g, void* out,
                             stream_t stream);
  /// qtl::cuda::per_block_cast_to_fp8<rule> (qtl::convert::pow2_rule as int) of float32 x.
  int (*per_block_cast_to_fp8)(int rule, float const* x, block_grid g, std::uint8_t* q, float* s, stream_t stream);
  /// qtl::cuda::requant_weight_ue8m0(_canonical)<the recipe named `recipe`> of groups x [n, k].
  int (*requant_weight_ue8m0)(char const* recipe, bool canonical, std::uint8_t const* q, float const* s,
                              std::int64_t groups, std::int64_t n, std::int64_t k, std::uint8_t* q_out, float* s_out,
                              stream_t stream);
  /// qtl::cuda::deepgemm_unpack_ue8m0.
  int (*deepgemm_unpack_ue8m0)(std::int32_t const* packed, std::int64_t groups, std::int64_t p, std::int64_t a,
                               std::int64_t k_blocks, float* sf, stream_t stream);
  // The launchers below report what the host op refuses on the data through `first`: device words
  // the caller set to ~0, where the kernels store (atomicMin) the least index of what the host op
  // names (see each kernel's header).
  /// qtl::cuda::convert::deepgemm_pack_ue8m0 of float scales, or deepgemm_post_process_e8m0 of E8M0
  /// codes (`e8m0`), [groups, ceil(mn/128), k_blocks] into out (qtl::convert::deepgemm_layout);
  /// `*first`: the first scale that is not a positive normal power of two.
  int (*deepgemm_pack)(bool e8m0, void const* sf, std::int64_t groups, std::int64_t mn, std::int64_t k_blocks,
                       std::int32_t* out, unsigned long long* first, stream_t stream);
  /// qtl::cuda::convert::fp8_block_to_mxfp4; `*first`: the first element whose bf16 dequant is not
  /// finite.
  int (*fp8_block_to_mxfp4)(std::uint8_t const* q, float const* s, block_grid g, std::uint8_t* packed,
                            std::uint8_t* scales, unsigned long long* first, stream_t stream);
  /// qtl::cuda::convert::fp8_block_to_nvfp4 by way of `workspace` (bf16 [G*N*K]) with the device
  /// float `*global_scale`, computed first (nvfp4_shared_global_scale of the dequant) when
  /// `compute_global_scale`; first[0], first[1]: the first element and the first block whose bf16
  /// dequant is not finite.
  int (*fp8_block_to_nvfp4)(std::uint8_t const* q, float const* s, block_grid g, bool compute_global_scale,
                            float* global_scale, std::uint8_t* packed, std::uint8_t* scales, void* workspace,
                            unsigned long long* first, stream_t stream);
  /// qtl::cuda::convert::cast_e2m1fn_to_e4m3fn (g.k the logical K); `*first`: the first block that
  /// does not cast exactly.
  int (*cast_e2m1fn_to_e4m3fn)(std::uint8_t const* x, std::uint8_t const* scale, block_grid g, std::uint8_t* out,
                               std::uint8_t* out_scale, unsigned long long* first, stream_t stream);
  /// qtl::cuda::fp8_checkpoint_quantize of w (m, k) of `type` by `opt` into codes (m, k) and scales;
  /// `*first` (null: the NaN and Inf weights are quantized): the row-major index of the NaN or
  /// infinite weight the host op names.
  int (*fp8_checkpoint_quantize)(float_type type, void const* w, index_t m, index_t k,
                                 fp8_checkpoint_options const& opt, std::uint8_t* codes, float* scales,
                                 unsigned long long* first, stream_t stream);

  /// qtl::cuda::prepare_static_weights_for_trtllm_fp4_moe (shape: hidden, inter, experts, gated),
  /// align_fp4_moe_weights_for_fi (gated: is_act_and_mul) or align_fp4_moe_hidden_dim_for_fi, of the
  /// four byte tensors gemm1 weights, gemm1 scales, gemm2 weights, gemm2 scales.
  int (*fp4_moe)(moe_op op, index_t hidden, index_t inter, index_t experts, bool gated, index_t min_alignment,
                 view3d<std::uint8_t const> const* in, view3d<std::uint8_t> const* out, stream_t stream);
  /// qtl::cuda::pad_nvfp4_weight_for_cutlass (in, out [1, rows, cols]) or interleave_linear_and_gate
  /// of bytes.
  int (*moe_rows)(rows_op op, view3d<std::uint8_t const> in, view3d<std::uint8_t> out, index_t param, stream_t stream);
  /// qtl::cuda::reorder_w13_to_w31_for_flashinfer_cutedsl of bytes.
  int (*reorder_w13_to_w31)(bool interleaved, view3d<std::uint8_t const> w13, view3d<std::uint8_t const> w13_scale,
                            view3d<std::uint8_t> w13_out, view3d<std::uint8_t> w13_scale_out, stream_t stream);
  /// qtl::cuda::shuffle_deepseek_fp8_moe_weights, rotate_weights_for_fi_trtllm_fp8_per_tensor_moe or
  /// convert_moe_weights_to_flashinfer_trtllm_block_layout (`gated` for the last two) of the byte
  /// tensors a, b [E, R, K] into the contiguous oa, ob (one launch each).
  int (*trtllm_pair)(trtllm_pair_op op, bool gated, view3d<std::uint8_t const> a, view3d<std::uint8_t const> b,
                     view3d<std::uint8_t> oa, view3d<std::uint8_t> ob, stream_t stream);
  /// qtl::cuda::shuffle_mxfp8_moe_weights (or with `inverse` unshuffle_mxfp8_moe_weights) of the
  /// four byte tensors gemm1 weights, gemm1 scales, gemm2 weights, gemm2 scales.
  int (*mxfp8_moe)(bool inverse, bool gated, view3d<std::uint8_t const> const* in, view3d<std::uint8_t> const* out,
                   stream_t stream);
  /// qtl::cuda::prepare_static_weights_for_trtllm_mxint4_moe (hidden, inter, experts, uint4b8), or
  /// with `inverse` unprepare_static_weights_for_trtllm_mxint4_moe, of the tensors gemm1 and gemm2
  /// (weights as bytes [E, R, K/2], scales as BF16 bits [E, R, K/32]), inputs to outputs.
  int (*mxint4_moe)(bool inverse, index_t hidden, index_t inter, index_t experts, bool uint4b8,
                    view3d<std::uint8_t const> const* w_in, view3d<std::uint16_t const> const* s_in,
                    view3d<std::uint8_t> const* w_out, view3d<std::uint16_t> const* s_out, stream_t stream);
  /// qtl::cuda::trtllm_moe_unshuffle_rows of bytes (the inverses of the two-tensor layouts).
  int (*trtllm_unshuffle_rows)(view3d<std::uint8_t const> in, view3d<std::uint8_t> out, trtllm_row_map map,
                               index_t block_k, stream_t stream);
  /// qtl::cuda::encode_and_reorder_int4b (one matrix), _grouped or decode_and_unreorder_int4b of
  /// `experts` int4 matrices [n, k] (n k / 2 bytes each).
  int (*int4b_reorder)(int4b_op op, std::uint8_t const* in, index_t experts, index_t n, index_t k, std::uint8_t* out,
                       stream_t stream);
  /// qtl::cuda::pack_scale_fp8 of `count` e4m3 codes into 8 `count`.
  int (*pack_scale_fp8)(std::uint8_t const* scales, index_t count, std::uint8_t* packed, stream_t stream);
  /// qtl::cuda::convert_packed_uint4b8_to_signed_int4 of `count` words (`in == out`: in place).
  int (*uint4b8_to_int4)(std::int32_t const* in, index_t count, std::int32_t* out, stream_t stream);
  /// qtl::cuda::convert_bf16_scales_to_fp8 of scales (rows, cols) of `type` (`divide`: x / s, else
  /// x * (1/s)) into fp8 codes (rows, cols) and chan (rows).
  int (*w4a8_scale_split)(float_type type, bool divide, void const* scales, index_t rows, index_t cols,
                          std::uint8_t* fp8, float* chan, stream_t stream);
  /// qtl::cuda::interleave_scales or (`inverse`) deinterleave_scales of `in` (experts, rows, cols)
  /// into `out` (experts, cols / scale_pack, rows * scale_pack), both contiguous, of `type`.
  int (*interleave_scales)(bool inverse, float_type type, void const* in, index_t experts, index_t rows, index_t cols,
                           void* out, index_t scale_pack, stream_t stream);

  /// qtl::cuda::ct_pack_quantize of w (m, k) of `type` into packed (m, k / pf), scales (m, groups)
  /// of `type` and, asymmetric, zero points; `*nonfinite` (device, zeroed by the caller) set to 1
  /// for a NaN or infinite weight.
  int (*ct_pack_quantize)(float_type type, void const* w, index_t m, index_t k, int bits, index_t group_size,
                          bool symmetric, std::int32_t* packed, void* scales, std::int32_t* zero_points, int* nonfinite,
                          stream_t stream);
  /// qtl::cuda::gptq_checkpoint_quantize of w (m, k) of `type` (symmetric: the reference's rule) into
  /// qweight (k / pf, m), F16 scales and zeros (k / group_size, m); flags (device, 2 ints, zeroed by
  /// the caller) = {a NaN or infinite weight, a scale F16 cannot hold}.
  int (*gptq_checkpoint_quantize)(float_type type, void const* w, index_t m, index_t k, int bits, index_t group_size,
                                  bool symmetric, std::int32_t* qweight, void* scales, std::int32_t* zeros, int* flags,
                                  stream_t stream);
  /// qtl::cuda::ct_nvfp4_quantize (with `global_scale`), ct_mxfp4_quantize or ct_mxfp8_quantize
  /// (`*nonfinite` as ct_pack_quantize's) of w (m, k) of `type` into values (m, k / 2 for FP4, k for
  /// MXFP8 bytes) and scales (m, k / block).
  int (*ct_block_quantize)(block_format f, float_type type, void const* w, index_t m, index_t k, float global_scale,
                           std::uint8_t* values, std::uint8_t* scales, int* nonfinite, stream_t stream);
  /// qtl::cuda::fp8_amax of in (m, k) of `type` into `*amax` (device).
  int (*amax)(float_type type, void const* in, index_t m, index_t k, float* amax, stream_t stream);

  /// Test builds only: adds qtl._sim (the simulated device's array producer) to the module; null
  /// elsewhere.
  void (*bind_extras)(void* module);  // a PyObject*
};

/// This build's table; null in the host-only build.
backend const* get();

}  // namespace qtl::py::device
