#!/usr/bin/env python3
"""Writes the golden cases 1936-1943 of `ct-nvfp4-quantize` and `ct-mxfp4-quantize` into ops/ (and
prints their cases.jsonl lines) from compressed-tensors itself (0.20.0, CPU torch): each block's
min and max taken in the weight's own dtype (as llm-compressor's observers take them),
`quantization.utils.calculate_qparams` on them with the presets NVFP4A16 / MXFP4A16, then the
registered `nvfp4-pack-quantized` / `mxfp4-pack-quantized` compressor of a one-layer state dict.
NVFP4's global scale is `generate_gparam` of the weight's min and max as float32 (the library's
`ct_nvfp4_global_scale`; llm-compressor's observer passes them in the weight's dtype, which rounds
the quotient to that dtype: a choice of the checkpoint writer, not of this op).

Each input has, besides rows of very different ranges, an all-zero block, -0.0 weights, a block
of one sign, a constant block, a block whose max lies between 6 and 7 times a power of two (where
CT's MX scale rounds down and clips), and values near T's smallest normal.

  1936-1939  ct-nvfp4-quantize: f32 [16, 64], [8, 128], [32, 256], [4, 32] (float32 only: on bf16
             and f16 weights compressed-tensors rounds its intermediates to the weight's dtype,
             where the op keeps the engines' float32 arithmetic; docs/spec/checkpoint_formats.md)
  1940-1943  ct-mxfp4-quantize: bf16 [16, 128], f16 [8, 128], f32 [8, 64], bf16 [4, 32]

Needs torch and compressed-tensors (the heavy interop venv); the cases are committed, CI only
replays them.

    python make_ct_fp4_cases.py OPS_DIR
"""
import json
import os
import sys

import torch
from compressed_tensors.compressors import BaseCompressor
from compressed_tensors.quantization import QuantizationScheme
from compressed_tensors.quantization.quant_scheme import MXFP4A16, NVFP4A16
from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402

DTYPES = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16"}
FORMATS = {"ct-nvfp4-quantize": (NVFP4A16, "nvfp4-pack-quantized"),
           "ct-mxfp4-quantize": (MXFP4A16, "mxfp4-pack-quantized")}

# (op, dtype, [N, K])
CASES = [
    ("ct-nvfp4-quantize", torch.float32, [16, 64]),
    ("ct-nvfp4-quantize", torch.float32, [8, 128]),
    ("ct-nvfp4-quantize", torch.float32, [32, 256]),
    ("ct-nvfp4-quantize", torch.float32, [4, 32]),
    ("ct-mxfp4-quantize", torch.bfloat16, [16, 128]),
    ("ct-mxfp4-quantize", torch.float16, [8, 128]),
    ("ct-mxfp4-quantize", torch.float32, [8, 64]),
    ("ct-mxfp4-quantize", torch.bfloat16, [4, 32]),
]


def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def weights(dtype, n, k, g):
    x = torch.randn(n, k, generator=g) * torch.exp2(torch.rand(n, 1, generator=g) * 12 - 6)
    x[0, :16] = 0                                        # an all-zero block (NVFP4's; MXFP4: half)
    x[0, 16:32] = -0.0                                   # -0.0 weights
    x[1, :32] = 0.4 + 0.2 * torch.rand(32, generator=g)  # one sign, far from 0
    x[1, 3] = -0.0
    x[2, :32] = -3.0                                     # constant
    x[2, 5] = 6.9                                        # max in [6, 7): CT's MX scale clips it
    x[3, :] = torch.finfo(dtype).tiny * torch.randn(k, generator=g)  # near the smallest normal
    return x.to(dtype)


def case(op, dtype, shape, g):
    n, k = shape
    preset, fmt = FORMATS[op]
    scheme = QuantizationScheme(targets=["Linear"], **preset)
    args = scheme.weights
    w = weights(dtype, n, k, g)
    grouped = w.reshape(n, -1, args.group_size)
    lo, hi = grouped.amin(-1), grouped.amax(-1)
    sd = {"weight": w}
    gs = None
    if op == "ct-nvfp4-quantize":
        gs = generate_gparam(w.float().amin(), w.float().amax())
        sd["weight_global_scale"] = gs
    scale, _ = calculate_qparams(lo, hi, args, global_scale=gs)
    sd["weight_scale"] = scale
    out = BaseCompressor.get_value_from_registry(fmt).compress(dict(sd), scheme)
    blocks = k // args.group_size
    assert out["weight_packed"].shape == (n, k // 2) and out["weight_scale"].shape == (n, blocks)
    scale_type = "F8_E4M3" if op == "ct-nvfp4-quantize" else "U8"
    outs = [("weight_packed", "U8", [n, k // 2], raw(out["weight_packed"])),
            ("weight_scale", scale_type, [n, blocks], raw(out["weight_scale"]))]
    if gs is not None:
        outs.append(("weight_global_scale", "F32", [1], raw(out["weight_global_scale"].float())))
    return shape, {}, [("weight", DTYPES[dtype], shape, raw(w))], outs


def main():
    g = torch.Generator().manual_seed(1936)
    cases = []
    for op, dtype, shape in CASES:
        shape, params, ins, outs = case(op, dtype, shape, g)
        cases.append((shape, op, params, ins, outs))
    write_golden_cases(sys.argv[1], 1936, cases)


if __name__ == "__main__":
    main()
