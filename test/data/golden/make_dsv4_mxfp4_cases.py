#!/usr/bin/env python3
"""Writes the golden cases 2208-2210 of `fp8-block-to-mxfp4` on DeepSeek-V4's E8M0 block scales into
ops/ (and prints their cases.jsonl lines) from sglang's own `quantize_block_fp8_weight_to_mxfp4`,
the `block_quant_dequant` and `_MXFP4QuantizedData` it calls (`fp8_utils.py`) and
`MXFP4QuantizeUtil` (`mxfp4_tensor.py`, 12c0244), taken by name (`ast`) from the files given and
run on CPU torch with the scales as float8_e8m0fnu tensors (the function's own
`fp8_scale.to(torch.float32)` decodes them).

The op takes its scales as F32 (`weight_scale_inv`): the input files hold each code b as the float
2^(b - 127), which is what `.to(torch.float32)` gives for every code but 255 (NaN, not used).

  2208  [256, 384]: random finite e4m3 codes, E8M0 codes 112..121 (DeepSeek-V4's range).
  2209  [160, 256]: codes 0, 1 and 2 (float32 subnormal scales, bf16 underflow: MXFP4 scale 0)
        and 128..135 per block.
  2210  [2, 128, 96]: stacked, partial K block, codes 100..140.

    python make_dsv4_mxfp4_cases.py FP8_UTILS_PY MXFP4_TENSOR_PY OPS_DIR
"""
import ast
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402

NAMES = {"block_quant_dequant", "quantize_block_fp8_weight_to_mxfp4", "_MXFP4QuantizedData", "MXFP4QuantizeUtil"}


def load_sglang(paths):
    body = []
    for path in paths:
        tree = ast.parse(open(path).read())
        body += [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in NAMES]
    body.sort(key=lambda n: n.name != "MXFP4QuantizeUtil")  # the base class first
    assert {n.name for n in body} == NAMES, [n.name for n in body]
    ns = {"torch": torch, "List": list, "Tuple": tuple, "Optional": lambda x: x}
    ns["Optional"] = __import__("typing").Optional
    exec(compile(ast.Module(body=body, type_ignores=[]), "sglang", "exec"), ns)
    return ns["quantize_block_fp8_weight_to_mxfp4"]


def raw(t):
    return t.contiguous().view(torch.uint8).reshape(-1).numpy().tobytes()


FINITE = torch.tensor([c for c in range(256) if c not in (0x7F, 0xFF)], dtype=torch.uint8)


def case(fn, g, shape, codes):
    """One case: random finite e4m3 codes of `shape`, E8M0 block scale codes drawn from `codes`."""
    q = FINITE[torch.randint(0, len(FINITE), shape, generator=g)]
    sshape = shape[:-2] + [-(-shape[-2] // 128), -(-shape[-1] // 128)]
    choice = torch.tensor(codes, dtype=torch.uint8)
    s = choice[torch.randint(0, len(codes), sshape, generator=g)]
    w4, s4 = fn(q.view(torch.float8_e4m3fn), s.view(torch.float8_e8m0fnu), [128, 128])
    assert w4.dtype == torch.int8 and s4.dtype == torch.float8_e8m0fnu
    f32 = struct.pack("<%df" % s.numel(), *(2.0 ** (int(b) - 127) for b in s.reshape(-1)))
    assert f32 == raw(s.view(torch.float8_e8m0fnu).to(torch.float32))
    return shape, "fp8-block-to-mxfp4", {}, \
        [("weight", "F8_E4M3", shape, raw(q)), ("weight_scale_inv", "F32", sshape, f32)], \
        [("weight", "U8", list(w4.shape), raw(w4)), ("weight_scale", "U8", list(s4.shape), raw(s4))]


def main():
    fn = load_sglang(sys.argv[1:-1])
    g = torch.Generator().manual_seed(2208)
    cases = [case(fn, g, [256, 384], list(range(112, 122))),
             case(fn, g, [160, 256], [0, 1, 2] + list(range(128, 136))),
             case(fn, g, [2, 128, 96], list(range(100, 141)))]
    write_golden_cases(sys.argv[-1], 2208, cases)


if __name__ == "__main__":
    main()
