#pragma once
/// \file
/// The binding groups of qtl._qtl (one .cpp each) and what they share.

#include <functional>
#include <vector>

#include <qtl/scalar_type.hpp>

#include "arrays.hpp"

namespace qtl::py {

/// pack_cols, pack_rows, unpack_cols, unpack_rows (qtl/pack.hpp).
void bind_pack(nb::module_& m);
/// quantize_weights, gptq_quantize_weights, permute_rows, sort_weights, convert_to_channelwise,
/// all_close_1d (qtl/quantize.hpp).
void bind_quantize(nb::module_& m);
/// scaled_fp8_quant, per_tensor_dequantize, requantize_with_max_scale, assert_fp8_all_close
/// (qtl/fp8.hpp).
void bind_fp8(nb::module_& m);
/// swizzle_blockscale, unswizzle_blockscale (qtl/blockscale.hpp); swap_w13_to_w31,
/// reorder_w1w3_to_w3w1 (qtl/moe.hpp).
void bind_layout(nb::module_& m);

/// is_layer_skipped, get_dynamic_override, override_config (qtl/rules/skip.hpp, qtl/rules/dynamic.hpp).
void bind_rules(nb::module_& m);
/// nvfp4/mxfp4/mxfp8 quantize and dequantize (qtl/fp4.hpp); prepare_static_weights_for_trtllm_fp4_moe
/// (qtl/moe.hpp).
void bind_fp4(nb::module_& m);
/// align_fp4_moe_weights_for_fi, align_fp4_moe_hidden_dim_for_fi, pad_nvfp4_weight_for_cutlass, and
/// vLLM's keyword form of prepare_static_weights_for_trtllm_fp4_moe (qtl/moe.hpp); after bind_fp4.
void bind_moe_prep(nb::module_& m);
/// gptq/awq_marlin_repack, marlin_permute_scales, marlin/awq_to_marlin_zero_points,
/// marlin_sort_g_idx, the FP8/FP4 Marlin preparation, and the inverses (qtl/marlin.hpp).
void bind_marlin(nb::module_& m);
/// block_quant_dequant, per_block_cast_to_fp8, requant_weight_ue8m0, deepgemm_pack/unpack_ue8m0,
/// fp8_block_to_mxfp4/nvfp4 (qtl/convert.hpp).
void bind_convert(nb::module_& m);

/// cutlass_encode_and_reorder_int4b(_grouped), cutlass_pack_scale_fp8, convert_bf16_scales_to_fp8,
/// convert_packed_uint4b8_to_signed_int4_inplace, interleave_scales and the inverses (qtl/w4a8.hpp).
void bind_w4a8(nb::module_& m);

/// deepgemm_post_process_e8m0 (qtl/deepgemm_e8m0.hpp): DeepSeek-V4's E8M0 block scales packed.
void bind_dsv4(nb::module_& m);

/// quantize_checkpoint (tools/qtl/lib/checkpoint.hpp); only where the build has the tool's command
/// library (QTL_PY_COMMANDS).
void bind_checkpoint(nb::module_& m);

/// cuda_available, the device table's extras (device.hpp) and the stream setting of qtl.cuda_stream.
void bind_device(nb::module_& m);
/// `obj` viewed as its bytes when it is an int8 or float8_e8m0fnu array (types the bindings' arrays
/// do not carry), else itself.
nb::object byte_view(nb::handle obj);

/// Runs `launch(table, stream, first)` on `lead`'s device with `n` device words set to ~0 first,
/// where the kernels store (atomicMin) the index of what the host op refuses on the data, and
/// returns them read back (~0: nothing refused).
std::vector<unsigned long long> run_with_first(
    array_in const& lead, char const* op, std::size_t n,
    std::function<int(device::backend const&, device::stream_t, unsigned long long*)> const& launch);
/// `bytes` of device array `a` from byte `offset` on, read back on its stream (to name what a
/// kernel reported).
void read_back(array_in const& a, std::size_t offset, void* dst, std::size_t bytes);
/// The host packers' refusal (qtl::convert::deepgemm_pack_ue8m0, deepgemm_post_process_e8m0: `op`)
/// of scale `index` of `s`, a device array of float32 scales or E8M0 codes, that a kernel reported.
[[noreturn]] void refuse_unpackable(char const* op, array_in const& s, unsigned long long index);
/// A qtl.ScalarType, vLLM's/sgl-kernel's ScalarType (by its `id`), or a type name.
scalar_type scalar_type_of(nb::handle obj, char const* name);

}  // namespace qtl::py
