#!/usr/bin/env python3
"""Writes the golden cases 1924-1935 of `ct-pack-quantize` into ops/ (and prints their cases.jsonl
lines) from compressed-tensors itself (0.20.0, CPU torch): the weights' min and max per group (or
per row) taken in the weight's own dtype, as llm-compressor's observers take them;
`quantization.utils.calculate_qparams` on them; then the registered `pack-quantized` compressor
(`PackedQuantizationCompressor.compress` of a one-layer state dict: `quantize` to int8, then
`pack_to_int32` along K). Expected: `weight_packed` and `weight_scale` as the compressor returns
them, and `zero_point` (asymmetric only) the zero point + 2^(b-1) unpacked [N, G]; the
compressor's packed `weight_zero_point` is checked to be those codes packed along N.

Each input has, besides normal rows of very different ranges, an all-zero group, a group of one
sign far from 0, a constant group and a row of values near T's smallest normal.

  1924-1927  bf16: int4 sym g128, int4 asym g128, int8 sym g32, int8 asym channel
  1928-1931  f16:  int4 sym g32, int4 asym g32, int8 asym g128, int8 sym channel
  1932-1935  f32:  int4 sym channel, int4 asym g128, int8 asym g32; bf16 int4 asym channel

Needs torch and compressed-tensors (the heavy interop venv); the cases are committed, CI only
replays them.

    python make_ct_cases.py OPS_DIR
"""
import json
import os
import sys

import torch
from compressed_tensors.compressors import BaseCompressor
from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
from compressed_tensors.quantization.utils import calculate_qparams

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import build  # noqa: E402

DTYPES = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16"}

# (dtype, [N, K], bits, symmetric, group size or -1 for channel)
CASES = [
    (torch.bfloat16, [32, 256], 4, True, 128),
    (torch.bfloat16, [32, 256], 4, False, 128),
    (torch.bfloat16, [24, 128], 8, True, 32),
    (torch.bfloat16, [24, 128], 8, False, -1),
    (torch.float16, [16, 256], 4, True, 32),
    (torch.float16, [16, 256], 4, False, 32),
    (torch.float16, [16, 128], 8, False, 128),
    (torch.float16, [16, 96], 8, True, -1),
    (torch.float32, [8, 256], 4, True, -1),
    (torch.float32, [8, 256], 4, False, 128),
    (torch.float32, [8, 128], 8, False, 32),
    (torch.bfloat16, [8, 64], 4, False, -1),
]


def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def weights(dtype, n, k, g):
    x = torch.randn(n, k, generator=g) * torch.exp2(torch.rand(n, 1, generator=g) * 18 - 12)
    x[0, :32] = 0                                        # all-zero group
    x[1, :32] = 0.4 + 0.2 * torch.rand(32, generator=g)  # one sign, far from 0
    x[2, :] = -3.0                                       # constant row
    x[3, :] = torch.finfo(dtype).tiny * torch.randn(k, generator=g)  # near the smallest normal
    return x.to(dtype)


def case(dtype, shape, bits, sym, gs, g):
    n, k = shape
    w = weights(dtype, n, k, g)
    strategy = "channel" if gs == -1 else "group"
    args = QuantizationArgs(num_bits=bits, type="int", symmetric=sym, strategy=strategy,
                            group_size=None if gs == -1 else gs)
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    if gs == -1:
        lo, hi = w.amin(1, keepdim=True), w.amax(1, keepdim=True)
    else:
        grouped = w.reshape(n, -1, gs)
        lo, hi = grouped.amin(-1), grouped.amax(-1)
    scale, zp = calculate_qparams(lo, hi, args)
    sd = {"weight": w, "weight_scale": scale}
    if not sym:
        sd["weight_zero_point"] = zp
    out = BaseCompressor.get_value_from_registry("pack-quantized").compress(dict(sd), scheme)
    groups = 1 if gs == -1 else k // gs
    assert out["weight_packed"].shape == (n, k * bits // 32) and out["weight_scale"].shape == (n, groups)
    outs = [("weight_packed", "I32", [n, k * bits // 32], raw(out["weight_packed"])),
            ("weight_scale", DTYPES[dtype], [n, groups], raw(out["weight_scale"]))]
    if not sym:
        codes = zp.to(torch.int32).reshape(n, groups) + (1 << (bits - 1))
        assert torch.equal(out["weight_zero_point"], pack_to_int32(zp.to(torch.int8), bits, packed_dim=0))
        outs.append(("zero_point", "I32", [n, groups], raw(codes)))
    params = {"bits": bits, "group-size": gs}
    if not sym:
        params["asym"] = True
    return shape, params, [("weight", DTYPES[dtype], shape, raw(w))], outs


def main():
    ops_dir = sys.argv[1]
    g = torch.Generator().manual_seed(1924)
    for number, spec in enumerate(CASES, 1924):
        shape, params, ins, outs = case(*spec, g)
        name = "%04d-ct-pack-quantize" % number
        with open(os.path.join(ops_dir, name + ".in.safetensors"), "wb") as f:
            f.write(build(ins))
        with open(os.path.join(ops_dir, name + ".expected.safetensors"), "wb") as f:
            f.write(build(outs))
        print(json.dumps({"case": name, "op": "ct-pack-quantize", "params": params, "shape": shape}))


if __name__ == "__main__":
    main()
