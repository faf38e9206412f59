#!/usr/bin/env python3
"""Writes the golden cases 2100-2106 of `normalize-e4m3fn-to-e4m3fnuz`, `float8-e4m3fnuz-encode` and
`float8-e4m3fnuz-decode` into ops/ (and prints their cases.jsonl lines):

- `normalize-e4m3fn-to-e4m3fnuz` from sglang's own `normalize_e4m3fn_to_e4m3fnuz` of
  `python/sglang/srt/layers/quantization/fp8_utils.py` (read at commit 002ed7e465ec), taken from
  that file by name (`ast`) and run on CPU torch. Weights hold every byte (0x80, e4m3fn's -0 and
  fnuz's NaN, and e4m3fn's NaNs 0x7F/0xFF included); scales are float32 (one near the float32 top,
  which doubles to Inf) and bfloat16; one case has no input_scale. The fnuz weight is stored as its
  bytes (U8): safetensors has no fnuz dtype.
- the codec from torch's own conversions: `x.to(torch.float8_e4m3fnuz)` of floats around every
  rounding boundary (ties, the 240/256 overflow tie, subnormals, +-0, +-Inf, NaN), and
  `codes.view(torch.float8_e4m3fnuz).float()` of the 255 codes but the NaN 0x80 (torch decodes it
  to the bits 0x7F800001, a signalling NaN; QTL's decoders give the quiet 0x7FC00000, as for
  every format, and its unit test checks 0x80 as a NaN).

Needs torch (the heavy interop venv) and the sglang source file; the cases are committed, CI only
replays them.

    python make_sglang_fnuz_cases.py FP8_UTILS_PY OPS_DIR
"""
import ast
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402


def load_sglang(path):
    tree = ast.parse(open(path).read())
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "normalize_e4m3fn_to_e4m3fnuz"]
    assert len(defs) == 1
    ns = {"torch": torch, "Optional": None, "Tuple": None}
    for d in defs:
        for a in d.args.args:
            a.annotation = None
        d.returns = None
    exec(compile(ast.Module(body=defs, type_ignores=[]), path, "exec"), ns)
    return ns["normalize_e4m3fn_to_e4m3fnuz"]


DT = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.uint8: "U8",
      torch.float8_e4m3fn: "F8_E4M3"}


def raw(t):
    t = t.contiguous()
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        t = t.view(torch.uint8)
    elif t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.reshape(-1).numpy().tobytes()


def tensor(name, t):
    return (name, DT[t.dtype], list(t.shape), raw(t))


def weight_bytes(shape, g):
    n = 1
    for s in shape:
        n *= s
    b = torch.randint(0, 256, [n], generator=g, dtype=torch.int64)
    b[:256 if n >= 256 else n] = torch.arange(256)[:min(n, 256)]  # every byte, where it fits
    b[-3:] = torch.tensor([0x80, 0x7F, 0xFF])
    return b.to(torch.uint8)[torch.randperm(n, generator=g)].reshape(shape).view(torch.float8_e4m3fn)


def encode_inputs(g):
    vals = []
    for c in range(0x80):  # every positive fnuz value, its neighbours and the midpoints
        v = torch.tensor([c], dtype=torch.uint8).view(torch.float8_e4m3fnuz).float().item()
        w = torch.tensor([c + 1], dtype=torch.uint8).view(torch.float8_e4m3fnuz).float().item() if c < 0x7F else 256.0
        mid = (v + w) / 2
        vals += [v, mid, torch.nextafter(torch.tensor(mid), torch.tensor(0.0)).item(),
                 torch.nextafter(torch.tensor(mid), torch.tensor(1e9)).item()]
    vals += [0.0, 2.0 ** -11, 2.0 ** -12, 1e-30, 247.99, 248.0, 250.0, 255.9, 256.0, 1e5, 3e38,
             float("inf"), float("nan")]
    x = torch.tensor(vals, dtype=torch.float32)
    x = torch.cat([x, -x, torch.randn(len(vals), generator=g) * 100.0])
    return x


def cases(fn, g):
    # (weight shape, weight_scale, input_scale)
    setups = [
        ([64, 48], torch.tensor([0.0123], dtype=torch.float32), torch.tensor([0.5], dtype=torch.float32)),
        ([3, 5, 7], torch.tensor([1.5, 2.0e38, 3.0e-39], dtype=torch.float32), None),
        ([6, 40], (torch.rand([6, 1], generator=g) * 4).to(torch.bfloat16), torch.tensor(1.25, dtype=torch.float32)),
    ]
    for shape, ws, iscale in setups:
        w = weight_bytes(shape, g)
        ins = [tensor("weight", w.clone()), tensor("weight_scale", ws)]
        if iscale is not None:
            ins.append(tensor("input_scale", iscale))
        ow, ows, ois = fn(w.clone(), ws, iscale)
        assert ow.dtype == torch.float8_e4m3fnuz
        outs = [("weight", "U8", list(ow.shape), raw(ow)), tensor("weight_scale", ows)]
        if ois is not None:
            outs.append(tensor("input_scale", ois))
        yield shape, "normalize-e4m3fn-to-e4m3fnuz", {}, ins, outs
    x = encode_inputs(g)
    for shape in ([len(x)], [3, len(x) // 3]):
        xs = x[:shape[0] * (shape[1] if len(shape) > 1 else 1)].reshape(shape)
        q = xs.to(torch.float8_e4m3fnuz)
        yield shape, "float8-e4m3fnuz-encode", {}, [tensor("x", xs)], [("codes", "U8", shape, raw(q))]
    codes = torch.cat([torch.arange(0x80), torch.arange(0x81, 0x100)]).to(torch.uint8)
    for shape in ([255], [15, 17]):
        c = codes.reshape(shape)
        y = c.view(torch.float8_e4m3fnuz).float()
        yield shape, "float8-e4m3fnuz-decode", {}, [tensor("codes", c)], [tensor("x", y)]


def main():
    fn = load_sglang(sys.argv[1])
    g = torch.Generator().manual_seed(2100)
    write_golden_cases(sys.argv[2], 2100, list(cases(fn, g)))


if __name__ == "__main__":
    main()
