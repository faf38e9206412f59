#!/usr/bin/env python3
"""Writes the golden cases 2300- of `scaled-quantize`, `scaled-dequantize` and `group-broadcast`
into ops/ (and prints their cases.jsonl lines) from vLLM's own functions run on CPU torch:
`scaled_quantize`, `scaled_dequantize`, `group_broadcast`, `prep_scale_for_group_broadcast`,
`_normalize_quant_group_shape`, `get_fp8_min_max` and the `GroupShape` class of
`vllm/model_executor/layers/quantization/utils/quant_utils.py` (read at commit 4de0dd6db70f). They
are taken from that file by name (`ast`) and executed with torch; the rest of the file (its vLLM
imports) is not run. `current_platform` is a stand-in answering the two questions
`get_fp8_min_max` asks (`is_fp8_fnuz()`, `fp8_dtype()`): a CUDA platform (e4m3fn, max 448) or a
ROCm MI300 one (e4m3fnuz, max 224).

`scaled_quantize`: bf16 [256, 384] and f32 [128, 256] inputs under each group shape (per tensor, per token,
per channel, 128x128, 1x128), shapes that are no multiple of 128 where vLLM allows them ([100, 200]
with the -1 shapes, [100, 256] with 1x128), compute_dtype float32 on a bf16 input, e4m3fnuz with
the ROCm platform, and inputs with an all-zero group and values near bf16's smallest normal. No
NaN or Inf: the NaN that either makes comes out of CPU torch with whatever sign and payload its
vectorised kernels leave (codes 0xFF, scales 0xFFFF0000, 0xFFFFFFFF or 0x7FC00000 depending on the
reduction's path); QTL defines one result (the positive NaN code, the quiet NaN scale), checked by
its unit tests. The fnuz codes are stored as their bytes (U8): safetensors has no fnuz dtype.
`scaled_dequantize`: the outputs of the f32 `scaled_quantize` cases back with group_shape None (vLLM's asserts
fail for every group shape holding -1), with the positive group shapes given, a 1-D scale, out_dtype
bfloat16 and fnuz codes ([256, 384]). `group_broadcast`: scales stretched to [256, 384], one extent left at 1.

Needs torch (the heavy interop venv) and the vLLM source file; the cases are committed, CI only
replays them.

    python make_vllm_group_shape_cases.py QUANT_UTILS_PY OPS_DIR
"""
import ast
import os
import sys
from typing import ClassVar, NamedTuple

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402

FUNCTIONS = ["get_fp8_min_max", "_normalize_quant_group_shape", "group_broadcast", "prep_scale_for_group_broadcast",
             "scaled_quantize", "scaled_dequantize"]
CLASSES = ["_GroupShape", "GroupShape"]


class Platform:
    def __init__(self, fnuz):
        self.fnuz = fnuz

    def is_fp8_fnuz(self):
        return self.fnuz

    def fp8_dtype(self):
        return torch.float8_e4m3fnuz if self.fnuz else torch.float8_e4m3fn


def load_vllm(path, fnuz):
    """The named functions and classes of vLLM's quant_utils.py on the stand-in platform."""
    tree = ast.parse(open(path).read())
    body = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in FUNCTIONS:
            body.append(node)
        elif isinstance(node, ast.ClassDef) and node.name in CLASSES:
            body.append(node)
        elif (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute)
              and isinstance(node.targets[0].value, ast.Name) and node.targets[0].value.id == "GroupShape"):
            body.append(node)  # GroupShape.PER_TENSOR = ... and the other aliases
    names = [n.name for n in body if not isinstance(n, ast.Assign)]
    assert sorted(names) == sorted(FUNCTIONS + CLASSES), names
    ns = {"torch": torch, "NamedTuple": NamedTuple, "ClassVar": ClassVar, "current_platform": Platform(fnuz)}
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), ns)
    return ns


DT = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.float8_e4m3fn: "F8_E4M3",
      torch.float8_e4m3fnuz: "U8"}
NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float8_e4m3fn: "float8_e4m3fn",
         torch.float8_e4m3fnuz: "float8_e4m3fnuz"}


def raw(t):
    t = t.contiguous()
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        t = t.view(torch.uint8)
    elif t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)
    return t.reshape(-1).numpy().tobytes()


def tensor(name, t):
    return (name, DT[t.dtype], list(t.shape), raw(t))


def sample(shape, dtype, g, special=False):
    """Values over many magnitudes (rows scaled from 2^-20 to 2^20), in `dtype`."""
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-20, 21, [shape[0], 1], generator=g).float())
    if special:
        x[0, :] = 0.0                                # an all-zero row: every group shape has a zero group
        x[:, 0] = 0.0                                # and an all-zero column
        x[1, 1:] = torch.randn(shape[1] - 1, generator=g) * 2.0 ** -126  # near bf16's smallest normal
        x[2, 5] = 2.0 ** -133                        # a subnormal amid normal values
    return x.to(dtype)


def main():
    src, ops = sys.argv[1], sys.argv[2]
    cuda = load_vllm(src, False)
    rocm = load_vllm(src, True)
    GS = cuda["GroupShape"]
    shapes = {"per-tensor": GS(-1, -1), "per-token": GS(1, -1), "per-channel": GS(-1, 1),
              "block-128x128": GS(128, 128), "group-1x128": GS(1, 128)}
    g = torch.Generator().manual_seed(2300)
    cases = []
    quantized = []  # (x_q, x_s, group) for the dequantize cases

    def quantize(ns, x, gs, qdt, cdt=None, fnuz_platform=False):
        x_q, x_s = ns["scaled_quantize"](x.clone(), gs, qdt, cdt)
        assert x_s.dtype == torch.float32
        params = {"group-rows": gs[0], "group-cols": gs[1], "quant-dtype": NAMES[qdt]}
        if cdt is not None:
            params["compute-dtype"] = NAMES[cdt]
        if fnuz_platform:
            params["is-fp8-fnuz"] = True
        cases.append((list(x.shape), "scaled-quantize", params, [tensor("x", x)],
                      [tensor("x_q", x_q), tensor("x_s", x_s)]))
        return x_q, x_s

    for dtype, shape in ((torch.bfloat16, [256, 384]), (torch.float32, [128, 256])):
        x = sample(shape, dtype, g, special=True)
        for name, gs in shapes.items():
            x_q, x_s = quantize(cuda, x, gs, torch.float8_e4m3fn)
            if dtype == torch.float32:
                quantized.append((x_q, x_s, gs))
    for dtype in (torch.bfloat16, torch.float32):
        x = sample([100, 200], dtype, g, special=True)
        for gs in (GS(-1, -1), GS(1, -1), GS(-1, 1)):
            quantize(cuda, x, gs, torch.float8_e4m3fn)
    quantize(cuda, sample([100, 256], torch.bfloat16, g), GS(1, 128), torch.float8_e4m3fn)
    x = sample([256, 384], torch.bfloat16, g, special=True)
    quantize(cuda, x, GS(128, 128), torch.float8_e4m3fn, torch.float32)
    fnuz_q, fnuz_s = quantize(rocm, x, GS(128, 128), torch.float8_e4m3fnuz, None, True)
    quantize(rocm, sample([64, 96], torch.float32, g, special=True), GS(1, -1), torch.float8_e4m3fnuz, None, True)

    def dequantize(x_q, x_s, gs, out_dtype=torch.float32, group_param=True):
        y = cuda["scaled_dequantize"](x_q, x_s, gs, out_dtype)
        params = {"quant-dtype": NAMES[x_q.dtype], "out-dtype": NAMES[out_dtype]}
        if gs is not None and group_param:
            params["group-rows"], params["group-cols"] = gs[0], gs[1]
        cases.append((list(x_q.shape), "scaled-dequantize", params, [tensor("x_q", x_q), tensor("x_s", x_s)],
                      [tensor("out", y)]))

    for x_q, x_s, gs in quantized:
        dequantize(x_q, x_s, None)  # vLLM asserts on a -1 in group_shape: the None form
        if gs[0] > 0 and gs[1] > 0:
            dequantize(x_q, x_s, gs)
    dequantize(quantized[3][0], quantized[3][1], GS(128, 128), torch.bfloat16)
    dequantize(quantized[3][0], quantized[3][1][0].clone(), GS(128, 128))  # [128, 256]: a 1-D scale
    dequantize(fnuz_q, fnuz_s, GS(128, 128))

    for t, shape in ((torch.randn([2, 3], generator=g), (256, 384)),
                     (torch.randn([1, 3], generator=g).to(torch.bfloat16), (256, 384)),
                     (torch.randn([4, 1], generator=g), (256, 384))):
        out = cuda["group_broadcast"](t.clone(), shape)
        cases.append((list(shape), "group-broadcast", {"shape": "%d,%d" % shape}, [tensor("t", t)],
                      [tensor("t", out.contiguous())]))
    write_golden_cases(ops, 2300, cases)


if __name__ == "__main__":
    main()
