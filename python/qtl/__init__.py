"""QTL from Python: sglang/vLLM's weight-quantization utilities, with the reference's names,
signatures and return tuples, run by QTL's C++ host library (zero-copy for numpy and torch CPU
arrays; torch tensors in, torch tensors out).

    import qtl
    w_ref, w_q, w_s, w_zp = qtl.quantize_weights(w, qtl.scalar_types.uint4b8, 128)

CUDA arrays (torch CUDA tensors, CuPy, any DLPack producer on a CUDA device) run on the device in
the CUDA build (``qtl.cuda_available()``), on the caller's stream; docs/python.md lists which
functions have a device path.

Errors are ``qtl.Error`` (a ``ValueError``) and its subclasses, mirroring ``qtl::error``;
``qtl.DTypeError`` is also a ``TypeError``.
"""

from types import SimpleNamespace as _Namespace

from . import _qtl

from ._qtl import (  # noqa: F401
    ConfigError,
    DTypeError,
    Error,
    FormatError,
    InvalidValueError,
    NanRepr,
    RegexError,
    ScalarType,
    ShapeError,
    UnsupportedError,
    all_close_1d,
    awq_pack,
    convert_to_channelwise,
    ct_mxfp4_quantize,
    ct_mxfp8_quantize,
    ct_nvfp4_quantize,
    ct_pack_quantize,
    fp8_checkpoint_quantize,
    gptq_checkpoint_quantize,
    gptq_pack,
    gptq_quantize_weights,
    normalize_e4m3fn_to_e4m3fnuz,
    pack_cols,
    pack_quantized_values_into_int32,
    pack_rows,
    per_tensor_dequantize,
    permute_rows,
    quantize_weights,
    reorder_w1w3_to_w3w1,
    requantize_with_max_scale,
    scaled_fp8_quant,
    sort_weights,
    swap_w13_to_w31,
    swizzle_blockscale,
    unpack_cols,
    unpack_quantized_values_into_int32,
    unpack_rows,
    unswizzle_blockscale,
)
from ._qtl import (  # noqa: F401  (rules, block-scaled quantization, TRT-LLM MoE, fp8 compare)
    assert_fp8_all_close,
    get_dynamic_override,
    is_layer_skipped,
    mxfp4_dequantize,
    mxfp4_quantize,
    mxfp8_dequantize,
    mxfp8_quantize,
    nvfp4_dequantize,
    nvfp4_quantize,
    override_config,
    prepare_static_weights_for_trtllm_fp4_moe,
    set_buffer_cache,
)
# vLLM's GroupShape quantization (qtl/scaled_quantize.hpp).
from ._qtl import group_broadcast, scaled_dequantize, scaled_quantize  # noqa: F401
# W4A8, int4 weights with FP8 activations: vLLM's CUTLASS preparation, sglang's scale interleave (qtl/w4a8.hpp).
from ._qtl import (  # noqa: F401
    convert_bf16_scales_to_fp8,
    convert_packed_uint4b8_to_signed_int4_inplace,
    cutlass_decode_and_unreorder_int4b,
    cutlass_encode_and_reorder_int4b,
    cutlass_encode_and_reorder_int4b_grouped,
    cutlass_pack_scale_fp8,
    deinterleave_scales,
    interleave_scales,
)
# vLLM's FlashInfer / CUTLASS FP4 MoE padding and CuteDSL row orders (qtl/moe.hpp).
from ._qtl import (  # noqa: F401
    align_fp4_moe_hidden_dim_for_fi,
    align_fp4_moe_weights_for_fi,
    convert_moe_weights_to_flashinfer_trtllm_block_layout,
    interleave_linear_and_gate,
    pad_nvfp4_weight_for_cutlass,
    prepare_static_weights_for_trtllm_mxint4_moe,
    reorder_w13_to_w31_for_flashinfer_cutedsl,
    rotate_weights_for_fi_trtllm_fp8_per_tensor_moe,
    shuffle_deepseek_fp8_moe_weights,
    shuffle_mxfp8_moe_weights,
)
# Their inverses: the prepared layouts back to the checkpoint's (qtl/moe_trtllm.hpp).
from ._qtl import (  # noqa: F401
    convert_moe_weights_from_flashinfer_trtllm_block_layout,
    unprepare_static_weights_for_trtllm_mxint4_moe,
    unrotate_weights_for_fi_trtllm_fp8_per_tensor_moe,
    unshuffle_deepseek_fp8_moe_weights,
    unshuffle_mxfp8_moe_weights,
)
# Marlin layouts (qtl/marlin.hpp) and the load-time converters (qtl/convert.hpp).
from ._qtl import (  # noqa: F401
    awq_marlin_repack,
    awq_to_marlin_zero_points,
    block_quant_dequant,
    cast_e2m1fn_to_e4m3fn,
    deepgemm_pack_ue8m0,
    deepgemm_post_process_e8m0,
    deepgemm_unpack_ue8m0,
    fp8_block_to_mxfp4,
    fp8_block_to_nvfp4,
    gptq_marlin_repack,
    marlin_fp8_prepare,
    marlin_mxfp4_prepare,
    marlin_nvfp4_prepare,
    marlin_permute_scales,
    marlin_sort_g_idx,
    marlin_zero_points,
    per_block_cast_to_fp8,
    requant_weight_ue8m0,
    unmarlin_awq,
    unmarlin_gptq,
    unmarlin_permute_scales,
    unmarlin_zero_points,
)
try:  # only where the build had the tool's command library (nlohmann-json)
    from ._qtl import quantize_checkpoint  # noqa: F401
except ImportError:
    pass
from ._qtl import _named_scalar_types, _noop  # noqa: F401  (_noop: the benchmark's call baseline)
# CUDA arrays (DLPack on a CUDA device): the CUDA build runs the ops with kernels on the device.
from ._qtl import DeviceArray, cuda_available  # noqa: F401



def update_tensor_inplace(old, new):
    """The reference's ``old.copy_(new)``: torch tensors through ``copy_`` (its broadcasting and
    casting), numpy arrays through ``numpy.copyto(old, new, casting="unsafe")``, the same rules.
    A copy, so no QTL kernel: plain Python, for the reference's callers."""
    if hasattr(old, "copy_"):
        old.copy_(new)
        return None
    import numpy

    numpy.copyto(old, new, casting="unsafe")
    return None


def replace_parameter(mod, name, new):
    """The reference's ``replace_parameter`` (torch modules only: it registers a
    ``torch.nn.Parameter``): copies in place when type, dtype and storage size match, else
    re-registers ``new`` as a parameter. Plain Python, as the reference (module bookkeeping, no
    kernel); raises qtl.UnsupportedError for an object that is not a ``torch.nn.Module``."""
    import sys

    torch = sys.modules.get("torch")  # never imported here: a Module means torch is loaded
    nn = getattr(torch, "nn", None)
    if nn is None or not isinstance(mod, nn.Module):
        raise UnsupportedError(
            f"qtl.replace_parameter: mod is a {type(mod).__name__}, not a torch.nn.Module (parameters are "
            "torch's); for a numpy array use qtl.update_tensor_inplace")
    old = getattr(mod, name)
    if (type(old) is type(new) and old.dtype == new.dtype
            and old.untyped_storage().nbytes() == new.untyped_storage().nbytes()):
        update_tensor_inplace(old, new)
    else:
        if not isinstance(new, torch.nn.Parameter):
            new = torch.nn.Parameter(new, requires_grad=False)
        mod.register_parameter(name, torch.nn.Parameter(new, requires_grad=False))


def nvfp4_swizzled_scale_to_cutedsl_mma_view(scale):
    """vLLM's ``nvfp4_swizzled_scale_to_cutedsl_mma_view``: the 6-D view (32, 4, m_tiles, 4,
    k_tiles, E) that CuteDSL's grouped GEMM takes of swizzled (128x4) block scales ``scale``
    [E, M_padded, K_sf_padded] (flashinfer's ``convert_sf_to_mma_layout``). A view: it aliases
    ``scale`` (no byte moves), so later in-place updates of the scales show through it. numpy
    arrays and torch tensors (any device) of 1-byte elements, C-contiguous; the strides are
    QTL's ``cutedsl_mma_view_of`` (qtl/element/blockscale.hpp)."""
    shape = tuple(scale.shape)
    if len(shape) != 3:
        raise ShapeError(f"qtl.nvfp4_swizzled_scale_to_cutedsl_mma_view: scale must be [E, M_padded, K_sf_padded], "
                         f"got shape {list(shape)}")
    itemsize = scale.element_size() if hasattr(scale, "element_size") else scale.itemsize
    contiguous = scale.is_contiguous() if hasattr(scale, "is_contiguous") else scale.flags["C_CONTIGUOUS"]
    if itemsize != 1 or not contiguous:
        raise DTypeError("qtl.nvfp4_swizzled_scale_to_cutedsl_mma_view: scale must be C-contiguous with 1-byte "
                         f"elements (uint8 or float8_e4m3fn), got {scale.dtype}"
                         f"{'' if contiguous else ', not contiguous'}")
    view_shape, strides = _qtl._cutedsl_mma_view(*shape)
    if hasattr(scale, "as_strided"):  # torch: a view of the same storage
        return scale.as_strided(view_shape, strides)
    import numpy

    return numpy.lib.stride_tricks.as_strided(scale, view_shape, strides, writeable=scale.flags.writeable)


class cuda_stream:
    """``with qtl.cuda_stream(s):`` runs the ops on CUDA arrays on stream ``s`` in this thread: a
    ``torch.cuda.Stream`` or ``cupy.cuda.Stream`` (by ``cuda_stream`` / ``ptr``), or a raw
    ``cudaStream_t`` as an int (DLPack's: 1 is the legacy default stream); the arrays are exported
    to it (``__dlpack__(stream=...)``), so their producer orders its work before. Outside, torch
    tensors run on torch's current stream and other producers' arrays on the legacy default
    stream. Outputs of torch tensors come from torch's allocator, on torch's current stream."""

    def __init__(self, stream):
        for attr in ("cuda_stream", "ptr"):
            if hasattr(stream, attr):
                stream = getattr(stream, attr)
                break
        if not isinstance(stream, int) or stream < 0:
            raise DTypeError(f"qtl.cuda_stream: expected a CUDA stream or its handle (an int >= 0), got "
                             f"{type(stream).__name__}")
        self._stream = stream
        self._previous = None

    def __enter__(self):
        self._previous = _qtl._set_cuda_stream(self._stream)
        return self

    def __exit__(self, *exc):
        _qtl._set_cuda_stream(self._previous)
        return False


#: The 16 named scalar types (vLLM's ``scalar_types``) plus the aliases ``bfloat16``, ``float16``.
scalar_types = _Namespace(**_named_scalar_types)

__version__ = "0.1.0"
