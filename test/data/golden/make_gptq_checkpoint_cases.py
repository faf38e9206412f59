#!/usr/bin/env python3
"""Writes the golden cases 2470-2475 of `gptq-checkpoint-quantize` into ops/ (and prints their
cases.jsonl lines), on CPU torch:

  symmetric (2470-2473): the reference's own `quantize_weights` (no zero points; uint4b8 or
      uint8b128) on W transposed to (K, N), its `pack_rows`, and its scales cast to float16, the
      checkpoint's dtype. The two functions are taken by name (`ast`) from the reference Python
      (sglang_quantization_utils.py, path as the first argument) and run with a minimal stand-in
      for the quant type (max, min, bias: the only members they read).
  asymmetric (2474-2475): GPTQ's quantizer (`Quantizer.find_params` / `quantize` of the GPTQ
      paper's code: xmin = min(x, 0), xmax = max(x, 0), -1/+1 for an all-zero group, scale
      (xmax - xmin) / maxq, zero round(-xmin / scale)), written here in torch from that formula
      on float32 weights, the codes taken under the float16 scale as a checkpoint stores it.

Inputs hold rows of very different ranges, a group of one sign, -0.0 and, for the asymmetric rule,
an all-zero group (the symmetric one's is QTL's documented int(NaN) = 0 case, pinned by unit tests).

Needs torch (the heavy interop venv); the cases are committed, CI only replays them.

    python make_gptq_checkpoint_cases.py REFERENCE.py OPS_DIR
"""
import ast
import os
import sys

import numpy
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402

DTYPES = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16"}

# (dtype, [N, K], bits, group size, symmetric)
CASES = [
    (torch.bfloat16, [24, 256], 4, 128, True),
    (torch.float16, [16, 128], 8, 32, True),
    (torch.float32, [40, 192], 4, 64, True),
    (torch.bfloat16, [8, 64], 8, 64, True),
    (torch.float32, [24, 256], 4, 128, False),
    (torch.bfloat16, [16, 128], 8, 32, False),
]


class QuantType:
    """uint4b8 / uint8b128 as the reference's quantize_weights reads them."""

    def __init__(self, bits):
        self.bias = 1 << (bits - 1)

    def is_integer(self):
        return True

    def is_signed(self):
        return False

    def has_bias(self):
        return True

    def max(self):
        return self.bias - 1

    def min(self):
        return -self.bias


def reference(path):
    tree = ast.parse(open(path).read())
    wanted = {"get_pack_factor", "pack_rows", "quantize_weights"}
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    assert {d.name for d in defs} == wanted, "the reference lacks one of %s" % sorted(wanted)
    ns = {"torch": torch, "numpy": numpy, "Optional": __import__("typing").Optional, "ScalarType": QuantType}
    exec(compile(ast.Module(body=defs, type_ignores=[]), path, "exec"), ns)
    return ns


def raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def weights(dtype, n, k, gs, g, sym):
    x = torch.randn(n, k, generator=g) * torch.exp2(torch.rand(n, 1, generator=g) * 8 - 6)
    if not sym:
        # an all-zero group (symmetric: scale 0, and 0/0 = NaN, whose int conversion is CPU-specific;
        # QTL's int(NaN) = 0 gives the code the bias, the CPU reference qmin + bias: the unit tests pin it)
        x[0, :gs] = 0
    x[1, :gs] = 0.4 + 0.2 * torch.rand(gs, generator=g)    # one sign, far from 0
    x[2, 3] = -0.0
    return x.to(dtype)


def gptq_asym(w, bits, gs):
    """GPTQ's quantizer per group (float32), codes under the F16 scale: (codes [N, K], scales, zeros)."""
    n, k = w.shape
    x = w.float().reshape(n, k // gs, gs)
    maxq = 2 ** bits - 1
    xmin = torch.minimum(x.amin(-1), torch.zeros(()))
    xmax = torch.maximum(x.amax(-1), torch.zeros(()))
    both = (xmin == 0) & (xmax == 0)
    xmin = torch.where(both, -1.0, xmin)
    xmax = torch.where(both, 1.0, xmax)
    scale = (xmax - xmin) / maxq
    zero = torch.round(-xmin / scale)
    stored = scale.half().float()
    q = torch.clamp(torch.round(x / stored[..., None]) + zero[..., None], 0, maxq)
    return q.reshape(n, k).int(), scale.half(), zero.int()


def case(ref, dtype, shape, bits, gs, sym, g):
    n, k = shape
    w = weights(dtype, n, k, gs, g, sym)
    if sym:
        _, w_q, w_s, _ = ref["quantize_weights"](w.t().contiguous(), QuantType(bits), gs)
        qweight = ref["pack_rows"](w_q, bits, k, n)
        scales = w_s.half()
        zeros = torch.full((k // gs, n), 1 << (bits - 1), dtype=torch.int32)
    else:
        q, s, z = gptq_asym(w, bits, gs)
        qweight = ref["pack_rows"](q.t().contiguous(), bits, k, n)
        scales, zeros = s.t(), z.t()
    params = {"bits": bits, "group-size": gs}
    if not sym:
        params["asym"] = True
    outs = [("qweight", "I32", [k * bits // 32, n], raw(qweight)),
            ("scales", "F16", [k // gs, n], raw(scales)),
            ("zeros", "I32", [k // gs, n], raw(zeros.int()))]
    return shape, params, [("weight", DTYPES[dtype], shape, raw(w))], outs


def main():
    ref = reference(sys.argv[1])
    g = torch.Generator().manual_seed(2400)
    cases = []
    for dtype, shape, bits, gs, sym in CASES:
        shape, params, ins, outs = case(ref, dtype, shape, bits, gs, sym, g)
        cases.append((shape, "gptq-checkpoint-quantize", params, ins, outs))
    write_golden_cases(sys.argv[2], 2470, cases)


if __name__ == "__main__":
    main()
