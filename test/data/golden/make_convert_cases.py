#!/usr/bin/env python3
"""Writes the golden cases 1910-1915 of the converter ops that the reference's golden rows do not
cover into ops/ (and prints their cases.jsonl lines), from docs/spec/converters.md's worked example
E7 and its formulas, transcribed in plain Python independently of the C++ (test/tools/convert_py.py,
standard library only):

  1910  fp8-block-to-nvfp4: E7, one row of 48 with FP8 block scale 0.01: gs 0x47aed44b, scale bytes
        7e 00 3e, codes c2 71 80 56 30 4f e2 31 | 00 x8 | e7 22 x7 (bytes of the reference).
  1911  fp8-block-to-nvfp4: [2, 130, 64] (w1 and w3 stacked, one global scale), partial block rows,
        random codes and log-uniform block scales; QTL's NVFP4 recipe of the bf16 dequant.
  1912  fp8-block-to-nvfp4 with a given global_scale (0-dim), 64 x 32.
  1913  requant-weight-ue8m0 --recipe sglang --canonical: the requant applied twice, on blocks made
        to land on max|q| = 224 after one pass (amax/sf in (224, 232)), so the second pass changes them.
  1914  requant-weight-ue8m0 --recipe vllm --canonical: the same input.
  1915  requant-weight-ue8m0 --recipe sglang-legacy (bf16 dequant, log2 rule: sglang <= 6082c49).

    python3 make_convert_cases.py OPS_DIR
"""
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402
from convert_py import E4M3, cdiv, dequant, f32, f32_bits, nvfp4_reference, requant  # noqa: E402


def f32s(v):
    return struct.pack("<%df" % len(v), *v)


def nvfp4_case(q, s, shape, gs=None):
    groups = shape[0] if len(shape) == 3 else 1
    n, k = shape[-2], shape[-1]
    kb = cdiv(k, 128)
    nb = cdiv(n, 128)
    d = []
    for g in range(groups):
        d += dequant(q[g * n * k:(g + 1) * n * k], s[g * nb * kb:(g + 1) * nb * kb], n, k, True)
    given = gs is not None
    if not given:
        amax = max(abs(v) for v in d)
        gs = f32(1.0 / f32(amax / 2688.0)) if amax > 0 else 1.0
    codes, scales = nvfp4_reference(d, groups * n, k, gs)
    packed = bytes(codes[2 * i] | codes[2 * i + 1] << 4 for i in range(len(codes) // 2))
    sshape = shape[:-2] + [nb, kb]
    ins = [("weight", "F8_E4M3", shape, bytes(q)), ("weight_scale_inv", "F32", sshape, f32s(s))]
    if given:
        ins.append(("global_scale", "F32", [], f32s([gs])))
    outs = [("weight", "U8", shape[:-1] + [k // 2], packed), ("weight_scale", "F8_E4M3", shape[:-1] + [k // 16],
                                                                 bytes(scales)),
            ("global_scale", "F32", [], f32s([gs]))]
    return shape, "fp8-block-to-nvfp4", {}, ins, outs


def e4m3_code(v):
    c = E4M3.index(abs(v))
    return c | (0x80 if v < 0 else 0)


def nvfp4_cases():
    # E7
    b0 = [0.5, -1, 0.25, 3, 0.125, -0.0625, 2, 1.5, 0, 0.75, -3, 1, 0.375, -2.5, 0.1875, 0.875]
    q = [e4m3_code(v) for v in b0] + [0] * 16 + [e4m3_code(0.01171875), e4m3_code(-0.0078125)] + \
        [e4m3_code(0.001953125)] * 14
    case = nvfp4_case(q, [f32(0.01)], [1, 48])
    assert f32_bits(struct.unpack("<f", case[4][2][3])[0]) == 0x47aed44b
    assert case[4][1][3] == bytes([0x7e, 0x00, 0x3e])
    assert case[4][0][3] == bytes([0xc2, 0x71, 0x80, 0x56, 0x30, 0x4f, 0xe2, 0x31] + [0] * 8 + [0xe7] + [0x22] * 7)
    yield case
    rnd = random.Random(1911)
    finite = [c for c in range(256) if c & 0x7F != 0x7F]
    q = [rnd.choice(finite) for _ in range(2 * 130 * 64)]
    s = [f32(2.0 ** rnd.uniform(-12, -2)) for _ in range(2 * 2 * 1)]
    yield nvfp4_case(q, s, [2, 130, 64])
    q = [rnd.choice(finite) for _ in range(64 * 32)]
    yield nvfp4_case(q, [f32(0.003)], [64, 32], gs=f32(1234.5))


def requant_cases():
    rnd = random.Random(1913)
    n, k = 256, 256
    q = bytearray(rnd.randrange(0, 0x60) | rnd.choice((0, 0x80)) for _ in range(n * k))
    s = [f32(2.0 ** rnd.uniform(-12, -4)) for _ in range(4)]
    # blocks 0 and 3: a largest code 0x7E (448) and s = 2^-9 * 229/448, so amax = 229 * 2^-9: the
    # first pass picks sf = 2^-9 and 229 rounds down to the code 224; the second halves sf
    for b, (r0, c0) in ((0, (0, 0)), (3, (128, 128))):
        q[r0 * k + c0] = 0x7E
        s[b] = f32(2.0 ** -9 * 229.0 / 448.0)
    for recipe in ("sglang", "vllm"):
        q1, s1 = requant(bytes(q), s, n, k, recipe)
        q2, s2 = requant(q1, s1, n, k, recipe)
        assert s2 != s1, "the second pass must change a block"
        q3, s3 = requant(q2, s2, n, k, recipe)
        assert (q3, s3) == (q2, s2)
        yield ([n, k], "requant-weight-ue8m0", {"recipe": recipe, "canonical": True},
               [("weight", "F8_E4M3", [n, k], bytes(q)), ("weight_scale_inv", "F32", [2, 2], f32s(s))],
               [("weight", "F8_E4M3", [n, k], q2), ("weight_scale_inv", "F32", [2, 2], f32s(s2))])
    n, k = 200, 300
    q = bytes(rnd.randrange(0, 256) & 0xF7 for _ in range(n * k))  # no NaN codes (0x7F/0xFF)
    s = [f32(2.0 ** rnd.uniform(-14, -3)) for _ in range(2 * 3)]
    q1, s1 = requant(q, s, n, k, "sglang-legacy")
    yield ([n, k], "requant-weight-ue8m0", {"recipe": "sglang-legacy"},
           [("weight", "F8_E4M3", [n, k], q), ("weight_scale_inv", "F32", [2, 3], f32s(s))],
           [("weight", "F8_E4M3", [n, k], q1), ("weight_scale_inv", "F32", [2, 3], f32s(s1))])


def main():
    write_golden_cases(sys.argv[1], 1910, list(nvfp4_cases()) + list(requant_cases()))


if __name__ == "__main__":
    main()
