#!/usr/bin/env python3
"""Writes the golden cases 2450-2453 of `ct-mxfp8-quantize` into ops/ (and prints their
cases.jsonl lines) from compressed-tensors itself (0.20.0, CPU torch): each block's min and max
taken in the weight's own dtype (as llm-compressor's observers take them),
`quantization.utils.calculate_qparams` on them with the MXFP8 preset's weights (FP8 E4M3, group
32, uint8 E8M0 scales), then the registered `mxfp8-quantized` compressor of a one-layer state
dict. The inputs are make_ct_fp4_cases.py's (rows of very different ranges, an all-zero block,
-0.0 weights, one sign, a constant block, values near T's smallest normal) plus a block whose max
has a significand just below and at 1.75 (where CT's power-of-two rounding turns up) and values
past 448 times the block's scale.

  2450-2453  ct-mxfp8-quantize: bf16 [16, 128], f16 [8, 128], f32 [8, 64], bf16 [4, 32]

Needs torch and compressed-tensors (the heavy interop venv); the cases are committed, CI only
replays them.

    python make_ct_mxfp8_cases.py OPS_DIR
"""
import os
import sys

import torch
from compressed_tensors.compressors import BaseCompressor
from compressed_tensors.quantization import QuantizationScheme
from compressed_tensors.quantization.quant_scheme import MXFP8
from compressed_tensors.quantization.utils import calculate_qparams

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from make_ct_fp4_cases import DTYPES, raw, weights  # noqa: E402
from safetensors_py import write_golden_cases  # noqa: E402

CASES = [(torch.bfloat16, [16, 128]), (torch.float16, [8, 128]), (torch.float32, [8, 64]), (torch.bfloat16, [4, 32])]


def case(dtype, shape, g):
    n, k = shape
    scheme = QuantizationScheme(targets=["Linear"], weights=MXFP8["weights"])
    args = scheme.weights
    w = weights(dtype, n, k, g).float()
    if n > 4:
        w[4, :32] = torch.linspace(-1, 1, 32)
        w[4, 7] = 1.74                               # significand below 1.75: rounds down
        w[5, :32] = torch.linspace(-1, 1, 32)
        w[5, 9] = -1.75                              # at 1.75: the next power of two
    w = w.to(dtype)
    grouped = w.reshape(n, -1, args.group_size)
    lo, hi = grouped.amin(-1), grouped.amax(-1)
    scale, _ = calculate_qparams(lo, hi, args)
    out = BaseCompressor.get_value_from_registry("mxfp8-quantized").compress({"weight": w, "weight_scale": scale},
                                                                            scheme)
    assert out["weight"].dtype == torch.float8_e4m3fn and out["weight"].shape == (n, k)
    assert out["weight_scale"].dtype == torch.uint8 and out["weight_scale"].shape == (n, k // 32)
    outs = [("weight", "F8_E4M3", [n, k], raw(out["weight"])),
            ("weight_scale", "U8", [n, k // 32], raw(out["weight_scale"]))]
    return shape, {}, [("weight", DTYPES[dtype], shape, raw(w))], outs


def main():
    g = torch.Generator().manual_seed(2450)
    cases = []
    for dtype, shape in CASES:
        shape, params, ins, outs = case(dtype, shape, g)
        cases.append((shape, "ct-mxfp8-quantize", params, ins, outs))
    write_golden_cases(sys.argv[1], 2450, cases)


if __name__ == "__main__":
    main()
