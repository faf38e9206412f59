#!/usr/bin/env python3
"""Writes the golden cases 2200-2203 of `cast-e2m1fn-to-e4m3fn` (DeepSeek-V4's lossless MXFP4 ->
FP8-block cast) into ops/ (and prints their cases.jsonl lines) from sglang's own function run on CPU
torch: `cast_e2m1fn_to_e4m3fn` and the `DSV4_DEQUANT_FP4_TABLE` it reads, of
`python/sglang/srt/layers/quantization/fp8.py` (read at commit d94a1535900d). Both are taken from
that file by name (`ast`) and executed with torch; the rest of the file (its sglang imports) is not
run.

  2200  [256, 256]: 2 x 2 blocks, random codes (both zeros included), 1x32 scales down to 2^14 below
        each block's largest (so e4m3 subnormals occur).
  2201  [200, 160]: N and K not multiples of 128. sglang asserts whole blocks; the case is its result
        on the weight zero-padded to [256, 256] (codes 0, scale codes 0, which never raise a block's
        largest scale), cut back to [200, 160] and [2, 2] scales: the partial blocks' definition.
  2202  [2, 128, 384]: two stacked experts, each cast alone (the engines cast one expert at a time).
  2203  [128, 128]: every code at every offset 0..14 below the block's largest scale, and groups of
        zeros 40 below it (exact at any offset).

Each output is checked lossless here (decoded both sides in float64) before it is written. Needs
torch (the heavy interop venv) and the sglang source file; the cases are committed, CI only replays
them.

    python make_dsv4_cases.py FP8_PY OPS_DIR
"""
import ast
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402

NAMES = ["DSV4_DEQUANT_FP4_TABLE", "cast_e2m1fn_to_e4m3fn"]
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def load_sglang(path):
    """sglang's table and function, executed with torch."""
    tree = ast.parse(open(path).read())
    body = [node for node in tree.body
            if (isinstance(node, ast.FunctionDef) and node.name in NAMES) or
            (isinstance(node, ast.Assign) and any(getattr(t, "id", None) in NAMES for t in node.targets))]
    assert len(body) == 2, [ast.dump(b)[:40] for b in body]
    ns = {"torch": torch}
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), ns)
    return ns["cast_e2m1fn_to_e4m3fn"]


def raw(t):
    return t.contiguous().view(torch.uint8).reshape(-1).numpy().tobytes()


def decode_mxfp4(x, sc):
    """float64 [N, K] of codes x (uint8 [N, K/2]) and scale codes sc (uint8 [N, K/32])."""
    codes = torch.stack([x & 15, x >> 4], dim=-1).flatten(-2).long()
    v = torch.tensor([(-1 if c & 8 else 1) * E2M1[c & 7] for c in range(16)], dtype=torch.float64)[codes]
    return v * torch.pow(2.0, sc.double() - 127).repeat_interleave(32, dim=-1)


def decode_fp8(q, s, n, k):
    v = q.view(torch.float8_e4m3fn).double()
    f = torch.pow(2.0, s.view(torch.uint8).double() - 127)
    return v * f.repeat_interleave(128, 0).repeat_interleave(128, 1)[:n, :k]


def cast(fn, x, sc):
    """sglang's cast of one matrix (uint8 codes and scale codes), zero-padded to whole blocks."""
    n, k = x.shape[0], x.shape[1] * 2
    np_, kp = -(-n // 128) * 128, -(-k // 128) * 128
    xp = torch.zeros(np_, kp // 2, dtype=torch.uint8)
    xp[:n, :k // 2] = x
    sp = torch.zeros(np_, kp // 32, dtype=torch.uint8)
    sp[:n, :k // 32] = sc
    q, s = fn(xp.view(torch.int8), sp.view(torch.float8_e8m0fnu))
    assert q.dtype == torch.float8_e4m3fn and s.dtype == torch.float8_e8m0fnu
    q = q[:n, :k].contiguous()
    assert torch.equal(decode_fp8(q, s, n, k), decode_mxfp4(x, sc)), "not lossless"
    return q, s


def random_scales(n, k, g, spread):
    """Per block a top code, each 1x32 scale up to `spread` below it."""
    top = torch.randint(100, 140, (-(-n // 128), -(-k // 128)), generator=g)
    top = top.repeat_interleave(128, 0).repeat_interleave(4, 1)[:n, :k // 32]
    return (top - torch.randint(0, spread + 1, (n, k // 32), generator=g)).to(torch.uint8)


def case(fn, xs, scs):
    """One case of a matrix or of a stack of them."""
    outs = [cast(fn, x, sc) for x, sc in zip(xs, scs)]
    stack = len(xs) > 1
    n, k = xs[0].shape[0], xs[0].shape[1] * 2

    def cat(ts):
        return torch.stack(ts) if stack else ts[0]

    x, sc = cat(xs), cat(scs)
    q, s = cat([o[0] for o in outs]), cat([o[1] for o in outs])
    shape = ([len(xs)] if stack else []) + [n, k]
    return shape, "cast-e2m1fn-to-e4m3fn", {}, \
        [("weight", "I8", list(x.shape), raw(x)), ("scale", "F8_E8M0", list(sc.shape), raw(sc))], \
        [("weight", "F8_E4M3", list(q.shape), raw(q)), ("scale", "F8_E8M0", list(s.shape), raw(s))]


def codes(n, k, g):
    return torch.randint(0, 256, (n, k // 2), generator=g, dtype=torch.int64).to(torch.uint8)


def cases(fn, g):
    yield case(fn, [codes(256, 256, g)], [random_scales(256, 256, g, 14)])
    yield case(fn, [codes(200, 160, g)], [random_scales(200, 160, g, 14)])
    yield case(fn, [codes(128, 384, g) for _ in range(2)], [random_scales(128, 384, g, 14) for _ in range(2)])
    # every code at every offset d = 0..14: row r, group j holds code (r + j) % 16 everywhere with
    # scale 127 - (r + 3 j) % 15; row 0 group 0 keeps the top (127); the last group of rows 64.. is
    # zeros (codes 0 and 8) 40 below the top
    x = torch.zeros(128, 64, dtype=torch.uint8)
    sc = torch.zeros(128, 4, dtype=torch.uint8)
    for r in range(128):
        for j in range(4):
            c = (r + j) % 16
            x[r, j * 16:(j + 1) * 16] = c | c << 4
            sc[r, j] = 127 - (r + 3 * j) % 15
            if r >= 64 and j == 3:
                x[r, j * 16:(j + 1) * 16] = 0x80 if r % 2 else 0x08
                sc[r, j] = 127 - 40
    sc[0, 0] = 127
    yield case(fn, [x], [sc])


def main():
    fn = load_sglang(sys.argv[1])
    g = torch.Generator().manual_seed(2200)
    write_golden_cases(sys.argv[2], 2200, list(cases(fn, g)))


if __name__ == "__main__":
    main()
