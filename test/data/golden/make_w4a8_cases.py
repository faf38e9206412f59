#!/usr/bin/env python3
"""Writes the golden cases 2500-2549 of the W4A8 load-time transforms into ops/ (and prints their
cases.jsonl lines); docs/spec/w4a8.md names the sources and their revisions.

- `convert-bf16-scales-to-fp8` and `convert-packed-uint4b8-to-signed-int4`: vLLM's own
  `convert_bf16_scales_to_fp8` and `convert_packed_uint4b8_to_signed_int4_inplace`, taken by name
  (`ast`) from a copy of `vllm/model_executor/layers/quantization/utils/quant_utils.py` and run on
  CPU torch. Two statements are rewritten in the tree, and only those: the `assert ... is_cuda`
  (the functions run on CPU here), and the last `chan_scales.view(orig_shape[:-1], -1)`, which torch
  rejects (a `torch.Size` and an int: TypeError), into `view(*orig_shape[:-1], -1)`, what it means.
  The quantizer handed to it is vLLM's `QuantFP8(static=False, group_shape=PER_TOKEN)`, either
  path: `native` transcribes `forward_native` (scale `(amax / 448).clamp(min=1/(448*512))`, then
  `x.float() * scale.reciprocal()`, clamp, cast), `cuda` the per-token kernel `scaled_fp8_quant`
  runs (the same scale, then `x / scale`).
- `interleave-scales`: sglang's `interleave_scales(scales, scale_pack)` (`w4afp8.py`), taken by name.
- `encode-and-reorder-int4b(-grouped)` and `pack-scale-fp8`: C++ only in the engines (CUTLASS under
  vLLM's ops), so their index math is transcribed below with numpy, step by step as CUTLASS computes
  it: the 256-entry nibble table of vLLM's `w4a8_utils.cu`; `compute_memory_reordering_atom<e4m3>()`
  from the SM90 GMMA operand-A layout `ALayout_64x32` (warp slice, `make_layout_like`,
  `right_inverse`, the thread-value to offset product) tiled by `tile_to_shape` over (N, K)
  column-major; `packed_scale_t`'s eight products and CUTLASS's host `convert_float_to_fp8`.

Shapes: the plain reorder on K = 96 (vLLM accepts it; not a multiple of 256), the grouped one on
two shapes of the K % 256 == 0 it demands; every e4m3 code through pack-scale-fp8; scales whose rows
differ between the two quantizer rules; interleave packs 4, 2 and 1.

Needs torch and numpy (the heavy interop venv) and the two engine files; the cases are committed,
CI only replays them.

    python make_w4a8_cases.py QUANT_UTILS_PY W4AFP8_PY OPS_DIR
"""
import ast
import os
import struct
import sys

import numpy
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402

FP8_MAX = 448.0
MIN_SCALING_FACTOR = 1.0 / (FP8_MAX * 512.0)


class Rewrite(ast.NodeTransformer):
    """Drops `assert <x>.is_cuda` and unpacks the Size in `view(orig_shape[:-1], -1)`."""

    def visit_Assert(self, node):
        t = node.test
        if isinstance(t, ast.Attribute) and t.attr == "is_cuda":
            return None
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "view" and len(node.args) == 2 and \
                isinstance(node.args[0], ast.Subscript) and ast.unparse(node.args[0]) == "orig_shape[:-1]":
            node.args[0] = ast.Starred(value=node.args[0], ctx=ast.Load())
        return node


def load(path, names, rewrite=False):
    tree = ast.parse(open(path).read())
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert sorted(d.name for d in defs) == sorted(names), [d.name for d in defs]
    if rewrite:
        defs = [ast.fix_missing_locations(Rewrite().visit(d)) for d in defs]
    ns = {"torch": torch, "Callable": object}
    exec(compile(ast.Module(body=defs, type_ignores=[]), path, "exec"), ns)
    return ns


def raw(t):
    if isinstance(t, numpy.ndarray):
        return numpy.ascontiguousarray(t).tobytes()
    if t.dtype in (torch.bfloat16, torch.float8_e4m3fn):
        t = t.view(torch.uint8 if t.dtype == torch.float8_e4m3fn else torch.int16)
    return t.contiguous().reshape(-1).numpy().tobytes()


# ---- QuantFP8(static=False, group_shape=PER_TOKEN), both paths --------------------------------------
def quant_native(x):
    x_max, _ = x.abs().max(dim=-1)
    x_max = x_max.unsqueeze(-1).to(torch.float32)
    scale = (x_max / FP8_MAX).clamp(min=MIN_SCALING_FACTOR)
    out = x.to(torch.float32) * scale.to(torch.float32).expand(x.shape).reciprocal()
    out = out.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return out, scale


def quant_cuda(x):
    x_max = x.abs().max(dim=-1).values.to(torch.float32).unsqueeze(-1)
    scale = torch.maximum(x_max / FP8_MAX, torch.tensor(MIN_SCALING_FACTOR, dtype=torch.float32))
    out = (x.to(torch.float32) / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return out, scale


# ---- CUTLASS, transcribed ---------------------------------------------------------------------------
def nibble_lut():
    """vLLM w4a8_utils.cu upload_lut(): map_nib(v) = v if v == 0 or v & 8 else 8 - v, per nibble."""
    def map_nib(v):
        return v if (v == 0 or (v & 0x8)) else 8 - v
    return numpy.array([(map_nib((b >> 4) & 0xF) << 4) | map_nib(b & 0xF) for b in range(256)], dtype=numpy.uint8)


def layout(shape, stride):
    """A flat CuTe layout: coordinate (column-major over `shape`) -> sum(coord * stride), as a list."""
    size = 1
    for s in shape:
        size *= s
    out = []
    for i in range(size):
        idx, rem = 0, i
        for s, d in zip(shape, stride):
            idx += (rem % s) * d
            rem //= s
        out.append(idx)
    return out


def reorder_atom():
    """compute_memory_reordering_atom<float_e4m3_t>(): (m, k) of the 16 x 32 atom -> offset."""
    # 1. SM90 GMMA RS operand A for 8-bit types (cute mma_traits_sm90_gmma.hpp): (thr, val) -> m + 64 k
    #    ALayout_64x32 = ((4,8,4),(4,2,2)) : ((256,1,16),(64,8,1024))
    # 2. one warp: compose with the tiler (32, 16) -> ((4,8),(4,2,2)) : ((256,1),(64,8,1024))
    shape = [4, 8, 4, 2, 2]
    stride = [256, 1, 64, 8, 1024]
    # make_layout_like: the same shape, compact strides in the order of the old ones
    order = sorted(range(len(shape)), key=lambda i: stride[i])
    compact = [0] * len(shape)
    acc = 1
    for i in order:
        compact[i] = acc
        acc *= shape[i]
    tv_warp = layout(shape, compact)  # linear (thr + 32 val) -> index m + 16 k (mk_shape_warp (16, 32))
    # right_inverse(...).with_shape((16, 32)): (m, k) -> linear tv coordinate thr + 32 val
    mk_to_tv = [0] * len(tv_warp)
    for lin, idx in enumerate(tv_warp):
        mk_to_tv[idx] = lin
    # 4. tv_to_offset = select<1,0>(logical_product((1,16):(0,1), 32:1)): (thr, val) -> 16 thr + val
    atom = numpy.zeros((16, 32), dtype=numpy.int64)
    for k in range(32):
        for m in range(16):
            lin = mk_to_tv[m + 16 * k]
            thr, val = lin % 32, lin // 32
            atom[m, k] = 16 * thr + val
    assert sorted(atom.reshape(-1).tolist()) == list(range(512))
    return atom


def encode_and_reorder(b_bytes, n, k):
    """unified_encode_int4b then reorder_tensor(layout (n,k) LayoutRight -> tile_to_shape(atom, (n,k,1)))
    of one [n, k] int4 matrix given as n * k / 2 bytes, low nibble first (cutlass int4b_t)."""
    atom = reorder_atom()
    enc = nibble_lut()[b_bytes]
    nib = numpy.empty(n * k, dtype=numpy.uint8)
    nib[0::2] = enc & 0xF
    nib[1::2] = enc >> 4
    src = nib.reshape(n, k)
    out = numpy.zeros(n * k, dtype=numpy.uint8)
    written = numpy.zeros(n * k, dtype=bool)
    nt = n // 16
    for i in range(n):
        for j in range(k):
            # blocked_product(atom, make_ordered_layout((n/16, k/32, 1), LayoutLeft)): atoms col-major
            d = atom[i % 16, j % 32] + 512 * ((i // 16) + nt * (j // 32))
            out[d] = src[i, j]
            written[d] = True
    assert written.all()
    return (out[0::2] | (out[1::2] << 4)).astype(numpy.uint8)


def cutlass_float_to_e4m3(f):
    """cutlass float8_base<E4M3>::convert_float_to_fp8 (the host path of float_e4m3_t(float))."""
    s = struct.unpack("<I", struct.pack("<f", f))[0]
    sign = (s >> 24) & 0x80
    exp = ((s >> 23) & 0xFF) - 127
    mantissa = s & 0x7FFFFF
    if (s & 0x7FFFFFFF) > 0x7F800000:
        return 0x7F
    if s in (0x7F800000, 0xFF800000):
        return sign | 0x7E
    if exp == -128:
        return sign | 0x7E
    sticky = 0
    skip_sign = False
    may_be_nan = False
    if -6 <= exp <= 7:
        u = ((exp + 7) & 0xF) << 3
        u = u | (mantissa >> 20)
    elif exp < -6:
        rshift = -6 - exp
        if rshift < 32:
            mantissa |= 1 << 23
            sticky = int((mantissa & ((1 << rshift) - 1)) != 0)
            mantissa >>= rshift
            u = (mantissa >> 20) & 0x7
        else:
            mantissa = 0
            u = 0
    else:
        if exp == 8:
            mt = (mantissa >> 20) & 0xFF
            if mt < 7:
                u = (((exp + 7) << 3) | mt) & 0xFF
                may_be_nan = mt == 6
            else:
                return sign | 0x7E
        else:
            return sign | 0x7E
    round_bit = (mantissa >> 19) & 1
    sticky |= int((mantissa & ((1 << 19) - 1)) != 0)
    if (round_bit and sticky) or (round_bit and (u & 1)):
        u = (u + 1) & 0xFF
        if may_be_nan:
            skip_sign = True
    if u > 0x7E:
        u = sign | 0x7E
    if not skip_sign:
        u |= sign
    return u


def e4m3_value(c):
    return float(torch.tensor([c], dtype=torch.uint8).view(torch.float8_e4m3fn).float()[0])


def pack_scale_fp8(codes):
    """cutlass::pack_scale_fp8: packed_scale_t<float_e4m3_t>(v), signed: pack4(T(v*-8) .. T(v*-5)),
    pack4(T(v*-4), T(v*-3), T(v*-2), -v); pack4 puts its first argument in the low byte."""
    out = []
    for c in codes:
        v = numpy.float32(e4m3_value(int(c)))
        for m in (-8, -7, -6, -5, -4, -3, -2):
            out.append(cutlass_float_to_e4m3(float(numpy.float32(v * numpy.float32(m)))))
        out.append(cutlass_float_to_e4m3(float(-v)))  # float_e4m3_t operator-: T(-float(v))
    return numpy.array(out, dtype=numpy.uint8)


def random_bytes(count, g):
    return torch.randint(0, 256, (count,), generator=g, dtype=torch.int64).to(torch.uint8).numpy()


def scales_bf16(shape, g):
    """Group scales spanning a few binades, one row of equal values and one of zeros (the floor)."""
    x = torch.rand(shape, generator=g, dtype=torch.float64) * 2.0 ** torch.randint(-12, 2, shape, generator=g)
    x = x.to(torch.bfloat16)
    flat = x.view(-1, shape[-1])
    flat[0].fill_(0.0)
    flat[1].fill_(0.015625)
    return x


def cases(qu, sg, g):
    lut = nibble_lut()
    assert all(lut[lut[b]] == b for b in range(256))  # the encode is an involution
    # encode-and-reorder-int4b: the int32 tensor vLLM's op reads is [N, K/8] in memory
    for n, k in [(16, 64), (48, 96)]:
        b = random_bytes(n * k // 2, g)
        out = encode_and_reorder(b, n, k)
        yield [n, k], "encode-and-reorder-int4b", {}, [("b", "I32", [n, k // 8], raw(b))], \
            [("b_packed", "I32", [n, k // 8], raw(out))]
    for e, n, k in [(2, 32, 256), (3, 16, 512)]:
        b = random_bytes(e * n * k // 2, g)
        per = n * k // 2
        out = numpy.concatenate([encode_and_reorder(b[i * per:(i + 1) * per], n, k) for i in range(e)])
        yield [e, n, k], "encode-and-reorder-int4b-grouped", {}, [("b", "I32", [e, n, k // 8], raw(b))], \
            [("b_packed", "I32", [e, n, k // 8], raw(out))]
    # pack-scale-fp8: every e4m3 code, then a [K/128, N]-like block
    codes = numpy.arange(256, dtype=numpy.uint8)
    yield [256], "pack-scale-fp8", {}, [("scales", "F8_E4M3", [256], raw(codes))], \
        [("packed", "F8_E4M3", [256 * 8], raw(pack_scale_fp8(codes)))]
    c = random_bytes(4 * 6, g)
    c[(c & 0x7F) == 0x7F] = 0x38  # a weight scale is finite
    yield [4, 6], "pack-scale-fp8", {}, [("scales", "F8_E4M3", [4, 6], raw(c))], \
        [("packed", "F8_E4M3", [4 * 6 * 8], raw(pack_scale_fp8(c)))]
    # convert-bf16-scales-to-fp8, both rules of the quantizer, on the same scales
    differ = False
    for shape in ([2, 16, 8], [5, 7]):
        s = scales_bf16(shape, g)
        got = {}
        for rule, q in (("divide", quant_cuda), ("reciprocal", quant_native)):
            fp8, chan = qu["convert_bf16_scales_to_fp8"](q, s.clone())
            assert fp8.dtype == torch.float8_e4m3fn and chan.dtype == torch.float32
            assert list(fp8.shape) == shape and list(chan.shape) == shape[:-1] + [1]
            got[rule] = raw(fp8)
            yield shape, "convert-bf16-scales-to-fp8", {"rule": rule}, [("scales", "BF16", shape, raw(s))], \
                [("fp8_scales", "F8_E4M3", shape, raw(fp8)), ("chan_scales", "F32", shape[:-1] + [1], raw(chan))]
        differ = differ or got["divide"] != got["reciprocal"]
    assert differ, "no scale where the two rules round apart"
    # convert-packed-uint4b8-to-signed-int4: every bit pattern of int32 words
    for shape in ([4, 8], [3, 5, 7]):
        w = torch.randint(-(1 << 31), 1 << 31, shape, generator=g, dtype=torch.int64).to(torch.int32)
        out = qu["convert_packed_uint4b8_to_signed_int4_inplace"](w.clone())
        yield shape, "convert-packed-uint4b8-to-signed-int4", {}, [("t", "I32", shape, raw(w))], \
            [("t", "I32", shape, raw(out))]
    # interleave-scales: [E, N, G] -> [E, G/p, N*p]
    for shape, p, dt in [([2, 8, 8], 4, torch.bfloat16), ([1, 5, 6], 2, torch.float32),
                         ([3, 4, 3], 1, torch.bfloat16)]:
        s = torch.randn(shape, generator=g).to(dt)
        out = sg["interleave_scales"](s, p)
        name = "BF16" if dt == torch.bfloat16 else "F32"
        yield shape, "interleave-scales", {"scale-pack": p}, [("scales", name, shape, raw(s))], \
            [("scales_interleaved", name, list(out.shape), raw(out))]
    try:
        sg["interleave_scales"](torch.zeros(1, 2, 6), 4)
        raise AssertionError("sglang's interleave_scales took 6 groups in packs of 4")
    except ValueError:
        pass


def main():
    qu = load(sys.argv[1], ["convert_bf16_scales_to_fp8", "convert_packed_uint4b8_to_signed_int4_inplace"],
              rewrite=True)
    sg = load(sys.argv[2], ["interleave_scales"])
    g = torch.Generator().manual_seed(2500)
    write_golden_cases(sys.argv[3], 2500, list(cases(qu, sg, g)))


if __name__ == "__main__":
    main()
