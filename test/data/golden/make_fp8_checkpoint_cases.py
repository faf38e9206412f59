#!/usr/bin/env python3
"""Writes the golden cases 2480-2485 of `fp8-checkpoint-quantize` into ops/ (and prints their
cases.jsonl lines), on CPU torch:

  compressed-tensors (2480-2482; 0.20.0): the presets FP8_BLOCK, FP8_DYNAMIC's weights (channel)
      and FP8 (tensor) on float32 weights: each block's / row's / the tensor's min and max,
      `quantization.utils.calculate_qparams`, then the registered `float-quantized` compressor.
      (On bf16 and f16 weights compressed-tensors rounds x / s to the weight's dtype first, where
      the op keeps float32, docs/spec/checkpoint_formats.md §7; its code of a -0.0 weight is +0,
      x / s plus the zero point, where the op keeps -0 (0x80): no -0.0 in these inputs, and the
      unit tests pin the op's. The op multiplies by fl(1/s) where compressed-tensors divides: the
      same codes on these inputs.)
  Hugging Face `fp8` blocks (2483-2485): the format's rule written in torch: per 128 x 128 block
      s = max(amax, 1e-12) / 448 (float32), codes e4m3(clamp(x · fl(1/s), -448, 448)) as vLLM's
      static scaled_fp8_quant takes them, bf16, f16 and f32 weights, partial blocks included.

Inputs hold rows of very different ranges, an all-zero block and (Hugging Face cases) -0.0.

Needs torch and compressed-tensors (the heavy interop venv); the cases are committed, CI only
replays them.

    python make_fp8_checkpoint_cases.py OPS_DIR
"""
import os
import sys

import torch
from compressed_tensors.compressors import BaseCompressor
from compressed_tensors.quantization import QuantizationScheme
from compressed_tensors.quantization.quant_scheme import FP8, FP8_BLOCK, FP8_DYNAMIC
from compressed_tensors.quantization.utils import calculate_qparams

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402

DTYPES = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16"}
PRESETS = {"block": FP8_BLOCK, "channel": FP8_DYNAMIC, "tensor": FP8}

# (rule, scheme, dtype, [N, K])
CASES = [
    ("ct", "block", torch.float32, [256, 384]),
    ("ct", "channel", torch.float32, [64, 160]),
    ("ct", "tensor", torch.float32, [48, 96]),
    ("hf", "block", torch.bfloat16, [300, 200]),
    ("hf", "block", torch.float16, [128, 256]),
    ("hf", "block", torch.float32, [130, 130]),
]


def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def weights(dtype, n, k, g, negative_zero):
    x = torch.randn(n, k, generator=g) * torch.exp2(torch.rand(n, 1, generator=g) * 8 - 6)
    if n >= 256 and k >= 256:
        x[128:256, 128:256] = 0  # an all-zero block
    if negative_zero:
        x[2, 3] = -0.0
    return x.to(dtype)


def ct_case(scheme_name, w):
    n, k = w.shape
    scheme = QuantizationScheme(targets=["Linear"], **PRESETS[scheme_name])
    args = scheme.weights
    if scheme_name == "block":
        b = 128
        nb, kb = -(-n // b), -(-k // b)
        lo = torch.empty(nb, kb)
        hi = torch.empty(nb, kb)
        for i in range(nb):
            for j in range(kb):
                blk = w[i * b:(i + 1) * b, j * b:(j + 1) * b]
                lo[i, j], hi[i, j] = blk.amin(), blk.amax()
    elif scheme_name == "channel":
        lo, hi = w.amin(1, keepdim=True), w.amax(1, keepdim=True)
    else:
        lo, hi = w.amin().reshape(1), w.amax().reshape(1)
    scale, zp = calculate_qparams(lo, hi, args)
    out = BaseCompressor.get_value_from_registry("float-quantized").compress(
        {"weight": w, "weight_scale": scale, "weight_zero_point": zp}, scheme)
    return out["weight"], out["weight_scale"].float().reshape(-1)


def hf_block(w):
    n, k = w.shape
    b = 128
    x = w.float()
    codes = torch.empty(n, k, dtype=torch.float8_e4m3fn)
    scales = []
    for i in range(0, n, b):
        for j in range(0, k, b):
            blk = x[i:i + b, j:j + b]
            s = torch.clamp(blk.abs().amax(), min=1e-12) / 448.0
            inv = 1.0 / s  # vLLM's static quantizer: x times the scale's float32 reciprocal
            codes[i:i + b, j:j + b] = torch.clamp(blk * inv, -448.0, 448.0).to(torch.float8_e4m3fn)
            scales.append(s)
    return codes, torch.stack(scales)


def case(rule, scheme_name, dtype, shape, g):
    n, k = shape
    w = weights(dtype, n, k, g, rule == "hf")
    codes, scales = ct_case(scheme_name, w) if rule == "ct" else hf_block(w)
    params = {"scheme": scheme_name}
    if scheme_name == "block":
        params["rule"] = rule
    outs = [("codes", "F8_E4M3", [n, k], raw(codes)), ("scales", "F32", [scales.numel()], raw(scales))]
    return shape, params, [("weight", DTYPES[dtype], shape, raw(w))], outs


def main():
    g = torch.Generator().manual_seed(2480)
    cases = []
    for rule, scheme_name, dtype, shape in CASES:
        shape, params, ins, outs = case(rule, scheme_name, dtype, shape, g)
        cases.append((shape, "fp8-checkpoint-quantize", params, ins, outs))
    write_golden_cases(sys.argv[1], 2480, cases)


if __name__ == "__main__":
    main()
