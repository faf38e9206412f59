#!/usr/bin/env python3
"""Writes the golden cases 1916-1923 of `mxfp4-quant` and `mxfp8-quant` into ops/ (and prints their
cases.jsonl lines) from torchao's MX quantizer, an implementation independent of QTL's:
`torchao.prototype.mx_formats.mx_tensor.to_mx(x, elem, 32, ScaleCalculationMode.RCEIL)` (torchao
0.15; RCEIL is cuBLAS's and flashinfer's rule: the scale is the smallest power of two >= amax /
max element, from the float32 quotient), `is_swizzled_scales=True` for `--swizzle` (torchao's
`to_blocked`, the 128x4 layout). torchao takes its input as float32 here: for a bfloat16 input it
would divide amax by 6 or 448 in bfloat16, a rounding neither cuBLAS nor QTL makes. No block has
the scale code 0 (amax below 2^-127 times the element max): there torchao multiplies by 1 where QTL
multiplies by 2^127 (`block_output_scale` in qtl/element/fp4.hpp, pinned by test/unit/fp4_test.cpp).

  1916/1920  bf16 [64, 256], normal x 4, one all-zero block, values below bf16's normal range
  1917/1921  f32 [32, 128], magnitudes log-uniform over 2^-118 .. 2^100 per block
  1918/1922  f16 [130, 64] --swizzle (rows padded to 256, scale columns to 4)
  1919/1923  bf16 [4, 32], each block's amax just above a power of two times the element max

Needs torch and torchao (the heavy interop venv); the cases are committed, CI only replays them.

    python make_mx_cases.py OPS_DIR
"""
import os
import sys

import torch
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import to_mx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402

DTYPES = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16"}


def raw(t):
    return t.contiguous().view(torch.uint8).numpy().tobytes()


def inputs():
    g = torch.Generator().manual_seed(1916)
    x = torch.randn(64, 256, generator=g) * 4
    x[0, :32] = 0
    x[1, :7] = 2.0 ** -130
    yield x.to(torch.bfloat16), False
    e = torch.rand(32, 4, 1, generator=g) * 218 - 118
    m = torch.randn(32, 4, 32, generator=g)
    yield (m * torch.exp2(e)).reshape(32, 128).to(torch.float32), False
    yield (torch.randn(130, 64, generator=g) * 100).to(torch.float16), True
    # amax = 6 * 2^k * (1 + 2^-7) (MXFP4) or 448 * 2^k * (1 + 2^-7): the float32 quotient lies just
    # above 2^k, so the scale is 2^(k+1) (a bfloat16 quotient would round down to 2^k)
    y = torch.randn(4, 32, generator=g).clamp(-1, 1)
    yield y.to(torch.bfloat16), False


def cases(op, elem, max_elem):
    for x, swizzle in inputs():
        if x.shape == (4, 32):
            x = x.clone()
            x[:, 0] = torch.tensor([max_elem * 2.0 ** k * (1 + 2 ** -7) for k in (-3, 0, 2, 5)]).to(x.dtype)
        scale, data = to_mx(x.to(torch.float32), elem, 32, ScaleCalculationMode.RCEIL, is_swizzled_scales=swizzle)
        m, k = x.shape
        if swizzle:
            sshape = [(m + 127) // 128 * 128, (k // 32 + 3) // 4 * 4]
        else:
            sshape = [m, k // 32]
        scale_bytes = raw(scale)
        assert len(scale_bytes) == sshape[0] * sshape[1]
        out_type, vk = ("U8", k // 2) if op == "mxfp4-quant" else ("F8_E4M3", k)
        yield ([m, k], op, {"swizzle": True} if swizzle else {},
               [("input", DTYPES[x.dtype], [m, k], raw(x))],
               [("output", out_type, [m, vk], raw(data)), ("scale", "F8_E8M0", sshape, scale_bytes)])


def main():
    write_golden_cases(sys.argv[1], 1916, (list(cases("mxfp4-quant", torch.float4_e2m1fn_x2, 6.0)) +
                                         list(cases("mxfp8-quant", torch.float8_e4m3fn, 448.0))))


if __name__ == "__main__":
    main()
