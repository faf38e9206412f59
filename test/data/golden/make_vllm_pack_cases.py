#!/usr/bin/env python3
"""Writes the golden cases 2000-2015 of `gptq-pack`, `awq-pack`, `pack-quantized-values-into-int32`
and `unpack-quantized-values-into-int32` into ops/ (and prints their cases.jsonl lines) from vLLM's
own functions run on CPU torch: `gptq_pack`, `awq_pack` (with the `pack_rows`, `pack_cols` and
`get_pack_factor` they call), `pack_quantized_values_into_int32` and
`unpack_quantized_values_into_int32` of `vllm/model_executor/layers/quantization/utils/quant_utils.py`
(read at commit 4de0dd6db70f). The functions are taken from that file by name (`ast`) and executed
with torch and numpy; the rest of the file (its vLLM imports) is not run. `wtype` is a stand-in
holding the one attribute the functions read, `size_bits`.

Each op has a shape whose free extent is not a multiple of the pack factor (vLLM only asserts on the
packed one): N for gptq-pack, K for awq-pack, the other dimensions for the packings along a dim; the
latter also run on 3-D tensors along the first, middle and last dimension, on a signed type (int4:
negative codes, masked to two's complement) and, unpacking, on words of every bit pattern.

Needs torch and numpy (the heavy interop venv) and the vLLM source file; the cases are committed,
CI only replays them.

    python make_vllm_pack_cases.py QUANT_UTILS_PY OPS_DIR
"""
import ast
import os
import sys

import numpy
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402

FUNCTIONS = ["get_pack_factor", "pack_rows", "pack_cols", "gptq_pack", "awq_pack",
             "pack_quantized_values_into_int32", "unpack_quantized_values_into_int32"]

# size_bits and the code range of the vLLM scalar types used below
TYPES = {"uint4b8": (4, 0, 15), "uint4": (4, 0, 15), "int4": (4, -8, 7), "uint8b128": (8, 0, 255),
         "uint2b2": (2, 0, 3), "int8": (8, -128, 127)}


class WType:
    def __init__(self, size_bits):
        self.size_bits = size_bits


def load_vllm(path):
    """The named functions of vLLM's quant_utils.py, executed with torch and numpy."""
    tree = ast.parse(open(path).read())
    defs = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in FUNCTIONS]
    assert sorted(d.name for d in defs) == sorted(FUNCTIONS), [d.name for d in defs]
    for d in defs:
        for a in d.args.args:
            a.annotation = None  # ScalarType is vLLM's; the annotations are not needed
        d.returns = None
    ns = {"torch": torch, "numpy": numpy}
    exec(compile(ast.Module(body=defs, type_ignores=[]), path, "exec"), ns)
    return ns


def raw(t):
    return t.contiguous().reshape(-1).numpy().tobytes()


def codes(shape, lo, hi, g):
    return torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64).to(torch.int32)


def words(shape, g):
    return torch.randint(-(1 << 31), 1 << 31, shape, generator=g, dtype=torch.int64).to(torch.int32)


def cases(v, g):
    for bits, k, n in [(4, 64, 12), (8, 16, 7), (2, 32, 5)]:
        q = codes([k, n], 0, (1 << bits) - 1, g)
        out = v["gptq_pack"](q, bits, k, n)
        assert out.dtype == torch.int32
        yield [k, n], "gptq-pack", {"bits": bits}, [("q_w", "I32", [k, n], raw(q))], \
            [("packed", "I32", list(out.shape), raw(out))]
    for bits, k, n in [(4, 5, 32), (8, 3, 12), (4, 16, 64)]:
        q = codes([k, n], 0, (1 << bits) - 1, g)
        out = v["awq_pack"](q, bits, k, n)
        assert out.dtype == torch.int32
        yield [k, n], "awq-pack", {"bits": bits}, [("q_w", "I32", [k, n], raw(q))], \
            [("packed", "I32", list(out.shape), raw(out))]
    # (type, shape of the codes, packed_dim)
    for t, shape, dim in [("uint4b8", [64, 6], 0), ("uint4", [6, 64], 1), ("int4", [3, 16, 5], 1),
                          ("uint8b128", [2, 5, 8], 2), ("uint2b2", [32, 3, 2], 0)]:
        bits, lo, hi = TYPES[t]
        q = codes(shape, lo, hi, g)
        out = v["pack_quantized_values_into_int32"](q, WType(bits), dim)
        assert out.dtype == torch.int32
        yield shape, "pack-quantized-values-into-int32", {"type": t, "packed-dim": dim}, \
            [("w_q", "I32", shape, raw(q))], [("packed", "I32", list(out.shape), raw(out))]
    # (type, shape of the words, packed_dim)
    for t, shape, dim in [("uint4b8", [8, 6], 0), ("uint4", [6, 8], 1), ("int4", [3, 2, 5], 1),
                          ("uint8b128", [2, 5, 2], 2), ("int8", [3, 7], 1)]:
        bits = TYPES[t][0]
        w = words(shape, g)
        out = v["unpack_quantized_values_into_int32"](w, WType(bits), dim)
        assert out.dtype == torch.int32
        yield shape, "unpack-quantized-values-into-int32", {"type": t, "packed-dim": dim}, \
            [("packed", "I32", shape, raw(w))], [("w_q", "I32", list(out.shape), raw(out))]


def main():
    v = load_vllm(sys.argv[1])
    g = torch.Generator().manual_seed(2000)
    write_golden_cases(sys.argv[2], 2000, list(cases(v, g)))


if __name__ == "__main__":
    main()
