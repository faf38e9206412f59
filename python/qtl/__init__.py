"""QTL from Python: sglang/vLLM's weight-quantization utilities, with the reference's names,
signatures and return tuples, run by QTL's C++ host library (zero-copy for numpy and torch CPU
arrays; torch tensors in, torch tensors out).

    import qtl
    w_ref, w_q, w_s, w_zp = qtl.quantize_weights(w, qtl.scalar_types.uint4b8, 128)

Errors are ``qtl.Error`` (a ``ValueError``) and its subclasses, mirroring ``qtl::error``;
``qtl.DTypeError`` is also a ``TypeError``.
"""

from types import SimpleNamespace as _Namespace

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
    convert_to_channelwise,
    gptq_quantize_weights,
    pack_cols,
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
    unpack_rows,
    unswizzle_blockscale,
)
# Marlin layouts (qtl/marlin.hpp) and the load-time converters (qtl/convert.hpp).
from ._qtl import (  # noqa: F401
    awq_marlin_repack,
    awq_to_marlin_zero_points,
    block_quant_dequant,
    deepgemm_pack_ue8m0,
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

#: The 16 named scalar types (vLLM's ``scalar_types``) plus the aliases ``bfloat16``, ``float16``.
scalar_types = _Namespace(**_named_scalar_types)

__version__ = "0.1.0"
