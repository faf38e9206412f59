#!/usr/bin/env python3
"""Writes the golden cases 2550.. of the FlashInfer / TRT-LLM MoE weight preparations beyond NVFP4 into
ops/ (and prints their cases.jsonl lines), from vLLM's own functions run on CPU torch:

- `prepare-trtllm-mxint4-moe`: vLLM's `prepare_static_weights_for_trtllm_mxint4_moe`
  (`flashinfer_mxint4_moe.py`) with its own helpers: `reorder_w1w3_to_w3w1` (`flashinfer_fp4_moe.py`),
  `convert_packed_uint4b8_to_signed_int4_inplace` (`quant_utils.py`, its `assert t.is_cuda` dropped),
  FlashInfer's row-index helpers and `convert_to_block_layout` (`flashinfer/fused_moe/core.py`,
  `flashinfer/utils.py`), all taken from those files by name (`ast`). FlashInfer's
  `block_scale_interleave` is a CUDA kernel; on CPU it is make_fi_moe_cases.py's torch 128x4
  interleave (any element type: the BF16 scales here). int32 (uint4b8) and uint8 (signed int4) weights.
- `shuffle-deepseek-fp8-moe-weights`, `rotate-weights-for-fi-trtllm-fp8-per-tensor-moe`,
  `convert-moe-weights-to-flashinfer-trtllm-block-layout`, `shuffle-mxfp8-moe-weights`: vLLM's
  `_shuffle_deepseek_fp8_moe_weights`, `rotate_weights_for_fi_trtllm_fp8_per_tensor_moe`,
  `convert_moe_weights_to_flashinfer_trtllm_block_layout` and `_shuffle_mxfp8_moe_weights`
  (`flashinfer_utils.py`) with FlashInfer's `shuffle_matrix_a` (`flashinfer/quantization/fp4_quantization.py`),
  `reorder_rows_for_gated_act_gemm` and the row helpers; `block_scale_interleave` batched on CPU as above.

Needs torch (the heavy interop venv) and the sources; the cases are committed, CI only replays them.

    python make_fi_moe2_cases.py VLLM_FLASHINFER_MXINT4_MOE_PY VLLM_FLASHINFER_FP4_MOE_PY VLLM_QUANT_UTILS_PY \
        VLLM_FLASHINFER_UTILS_PY FLASHINFER_CORE_PY FLASHINFER_UTILS_PY FLASHINFER_FP4_QUANTIZATION_PY OPS_DIR
"""
import ast
import sys
import types
import typing

import torch

from make_fi_moe_cases import block_scale_interleave_cpu, extract, rand_bytes, u8
from safetensors_py import write_golden_cases  # noqa: E402 (on the path make_fi_moe_cases sets)


class _DropCudaAsserts(ast.NodeTransformer):
    """Removes `assert x.is_cuda` (the helper runs on CPU tensors here)."""

    def visit_Assert(self, node):
        t = node.test
        return None if isinstance(t, ast.Attribute) and t.attr == "is_cuda" else node


def extract_on_cpu(path, names, ns):
    tree = _DropCudaAsserts().visit(ast.parse(open(path).read()))
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert {n.name for n in body} == set(names), (path, names)
    exec(compile(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[])), path, "exec"), ns)


def module(name, **attrs):
    m = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m
    return m


def block_scale_interleave_batched(sf):
    """FlashInfer's `block_scale_interleave` on CPU: each [M, K] matrix of a 2-D or 3-D input, flat."""
    if sf.dim() == 2:
        return block_scale_interleave_cpu(sf)
    return torch.cat([block_scale_interleave_cpu(x) for x in sf])


def load(vllm_mxint4, vllm_fp4_moe, vllm_quant_utils, vllm_fi_utils, fi_core, fi_utils, fi_fp4):
    fi = {"torch": torch, "Union": typing.Union, "Optional": typing.Optional, "flashinfer_api": lambda f: f}
    extract(fi_utils, ["srcToDstBlk16RowMap", "srcToDstBlk32RowMap", "get_shuffle_block_size",
                       "get_shuffle_matrix_a_row_indices", "get_shuffle_matrix_sf_a_row_indices"], fi)
    extract(fi_core, ["get_reorder_rows_for_gated_act_gemm_row_indices", "reorder_rows_for_gated_act_gemm",
                      "_maybe_get_cached_w3_w1_permute_indices", "get_w2_permute_indices_with_cache",
                      "convert_to_block_layout"], fi)
    extract(fi_fp4, ["shuffle_matrix_a"], fi)
    v = {"torch": torch}
    extract(vllm_fp4_moe, ["reorder_w1w3_to_w3w1"], v)
    extract_on_cpu(vllm_quant_utils, ["convert_packed_uint4b8_to_signed_int4_inplace"], v)
    # The modules the engine's functions import from.
    core = module("flashinfer.fused_moe.core", **{k: fi[k] for k in (
        "_maybe_get_cached_w3_w1_permute_indices", "get_w2_permute_indices_with_cache",
        "get_reorder_rows_for_gated_act_gemm_row_indices")})
    fused = module("flashinfer.fused_moe", convert_to_block_layout=fi["convert_to_block_layout"], core=core)
    module("flashinfer.utils", get_shuffle_matrix_a_row_indices=fi["get_shuffle_matrix_a_row_indices"])
    module("flashinfer.quantization")
    module("flashinfer.quantization.fp4_quantization", block_scale_interleave=block_scale_interleave_batched)
    module("flashinfer", block_scale_interleave=block_scale_interleave_batched,
           nvfp4_block_scale_interleave=block_scale_interleave_batched, fused_moe=fused,
           shuffle_matrix_a=fi["shuffle_matrix_a"], reorder_rows_for_gated_act_gemm=fi["reorder_rows_for_gated_act_gemm"])
    utils = "vllm.model_executor.layers.quantization.utils"
    for name in ("vllm", "vllm.model_executor", "vllm.model_executor.layers", "vllm.model_executor.layers.quantization",
                 utils):
        module(name)
    module(utils + ".flashinfer_fp4_moe", reorder_w1w3_to_w3w1=v["reorder_w1w3_to_w3w1"])
    module(utils + ".quant_utils",
           convert_packed_uint4b8_to_signed_int4_inplace=v["convert_packed_uint4b8_to_signed_int4_inplace"])
    extract(vllm_mxint4, ["prepare_static_weights_for_trtllm_mxint4_moe"], v)
    extract(vllm_fi_utils, ["rotate_weights_for_fi_trtllm_fp8_per_tensor_moe",
                            "convert_moe_weights_to_flashinfer_trtllm_block_layout",
                            "_shuffle_deepseek_fp8_moe_weights", "_shuffle_mxfp8_moe_weights"], v)
    return v


def raw(name, dtype, t):
    """A tensor's bytes under a safetensors dtype name."""
    return (name, dtype, list(t.shape), t.contiguous().view(torch.uint8).reshape(-1).numpy().tobytes())


def rand_bf16(g, *shape):
    # positive normal BF16 scales (the op moves them; any bits would do)
    return (torch.rand(shape, generator=g) * 0.01 + 1e-4).to(torch.bfloat16)


def cases(v, g):
    prep = v["prepare_static_weights_for_trtllm_mxint4_moe"]
    # (E, H, I, int32): the engine asserts H and I multiples of 256, so nothing is ever padded
    for e, h, i, words in [(1, 256, 512, True), (1, 512, 256, False)]:
        if words:
            w1 = rand_bytes(g, e, 2 * i, h // 2).view(torch.int32)
            w2 = rand_bytes(g, e, h, i // 2).view(torch.int32)
        else:
            w1, w2 = rand_bytes(g, e, 2 * i, h // 2), rand_bytes(g, e, h, i // 2)
        s1, s2 = rand_bf16(g, e, 2 * i, h // 32), rand_bf16(g, e, h, i // 32)
        o = prep(w1.clone(), s1.clone(), w2.clone(), s2.clone())
        wt = "I32" if words else "U8"
        ins = [raw("gemm1_weights", wt, w1), raw("gemm1_scales", "BF16", s1), raw("gemm2_weights", wt, w2),
               raw("gemm2_scales", "BF16", s2)]
        outs = [u8("gemm1_weights", o["gemm1_weights"]), raw("gemm1_scales", "BF16", o["gemm1_scales"]),
                u8("gemm2_weights", o["gemm2_weights"]), raw("gemm2_scales", "BF16", o["gemm2_scales"])]
        yield [e, h, i], "prepare-trtllm-mxint4-moe", {}, ins, outs

    fp8 = lambda *shape: rand_bytes(g, *shape).view(torch.float8_e4m3fn)  # noqa: E731
    deepseek = v["_shuffle_deepseek_fp8_moe_weights"]
    for e, h, i in [(1, 256, 128), (2, 128, 256)]:
        w13, w2 = fp8(e, 2 * i, h), fp8(e, h, i)
        o13, o2 = deepseek(w13.clone(), w2.clone())
        yield [e, h, i], "shuffle-deepseek-fp8-moe-weights", {}, [raw("w13", "F8_E4M3", w13), raw("w2", "F8_E4M3", w2)], \
            [raw("w13", "F8_E4M3", o13), raw("w2", "F8_E4M3", o2)]

    rotate = v["rotate_weights_for_fi_trtllm_fp8_per_tensor_moe"]
    for e, r1, h, i, gated in [(2, 128, 96, 64, True), (1, 64, 160, 64, False)]:
        g1, g2 = fp8(e, r1, h), fp8(e, h, i)
        o1, o2 = g1.clone(), g2.clone()
        rotate(o1, o2, gated)  # replaces the tensors' .data
        params = {"is-gated-activation": True} if gated else {}
        yield [e, h, i], "rotate-weights-for-fi-trtllm-fp8-per-tensor-moe", params, \
            [raw("gemm1_weights", "F8_E4M3", g1), raw("gemm2_weights", "F8_E4M3", g2)], \
            [raw("gemm1_weights", "F8_E4M3", o1), raw("gemm2_weights", "F8_E4M3", o2)]

    convert = v["convert_moe_weights_to_flashinfer_trtllm_block_layout"]
    for e, r1, h, i, gated in [(2, 128, 128, 64, True), (1, 96, 192, 64, False)]:
        w13, w2 = torch.randn(e, r1, h, generator=g).to(torch.bfloat16), torch.randn(e, h, i, generator=g).to(torch.bfloat16)
        o13, o2 = convert({}, w13.clone(), w2.clone(), gated)
        params = {} if gated else {"no-gated": True}
        yield [e, h, i], "convert-moe-weights-to-flashinfer-trtllm-block-layout", params, \
            [raw("w13_weight", "BF16", w13), raw("w2_weight", "BF16", w2)], \
            [raw("w13_weight", "BF16", o13), raw("w2_weight", "BF16", o2)]

    mxfp8 = v["_shuffle_mxfp8_moe_weights"]
    for e, r1, h, i, gated in [(2, 256, 128, 128, True), (1, 128, 256, 128, False)]:
        w13, w2 = fp8(e, r1, h), fp8(e, h, i)
        s13, s2 = rand_bytes(g, e, r1, h // 32), rand_bytes(g, e, h, i // 32)
        o = mxfp8(w13.clone(), w2.clone(), s13.clone(), s2.clone(), gated)
        params = {"is-gated": True} if gated else {}
        yield [e, h, i], "shuffle-mxfp8-moe-weights", params, \
            [raw("w13", "F8_E4M3", w13), raw("w2", "F8_E4M3", w2), raw("w13_scale", "U8", s13), raw("w2_scale", "U8", s2)], \
            [raw("w13", "F8_E4M3", o[0]), raw("w2", "F8_E4M3", o[1]), raw("w13_scale", "U8", o[2]),
             raw("w2_scale", "U8", o[3])]


def main():
    v = load(*sys.argv[1:8])
    g = torch.Generator().manual_seed(2550)
    write_golden_cases(sys.argv[8], 2550, list(cases(v, g)))


if __name__ == "__main__":
    main()
