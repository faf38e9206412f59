#!/usr/bin/env python3
"""Writes the golden cases 1900-1909 of the FP8/FP4 Marlin preparation ops and of the stable
act-order sort into ops/ (and prints
their cases.jsonl lines). No golden rows of the reference cover these ops, so the cases are built
from docs/spec/marlin.md's worked example EX9 and its formulas (§0, §4.1, §6, §7), transcribed
here in plain Python independently of the C++ (standard library only):

  1900-1903  marlin-fp8-prepare: EX9's bytes (16k+n)%256 (their 8-bit Marlin is EX3), scales
             [0.5,1,2,3] per channel or per tensor, each fold (EX9: fp16 -> [128,256,512,768]).
  1904-1905  marlin-nvfp4-prepare: EX9's e4m3 bytes 38 40 30 7e | 01 08 39 00 placed where the
             grouped permutation brings them to row 0, columns 0..7, every other scale 1.0 (0x38):
             fp16 -> b0 a8 b8 f6 | 68 b1 80 00 (others b0), bf16 -> sf 8, c8 c0 d0 f8 | 80 c9 98 00
             (others c8); global scale 1.0 -> 2^7 (fp16) or 2^119 / 8 (bf16).
  1906-1907  marlin-mxfp4-prepare: N = 32 padded to 64, scale bytes 120 + (n + 3g) % 16: bf16
             (regroup {0,2,1,3}) and --a8 (A8 layout, single permutation, +6).
  1908-1909  marlin-sort-g-idx: EX5's g_idx = [1,0]*16 (stable: [1,3,...,31,0,2,...,30], where
             torch's CPU argsort gives [1,31,29,...]) and g_idx[k] = 7k % 4 over 64 rows, sorted by
             Python's (stable) sorted().

    python3 make_marlin_fp_cases.py OPS_DIR
"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from safetensors_py import write_golden_cases  # noqa: E402


# docs/spec/marlin.md §0: word w, slot t -> (dk, dn) inside a tile.
def slot_source(bits, a8, w, t):
    if not a8 and bits == 4:
        lane, warp, e = w // 4, w % 4, [0, 2, 4, 6, 1, 3, 5, 7][t]
        return 2 * (lane % 4) + [0, 1, 8, 9][e % 4], 16 * warp + lane // 4 + 8 * (e // 4)
    if not a8 and bits == 8:
        lane, warp, h, r = w // 8, (w % 8) // 2, w % 2, [0, 2, 1, 3][t]
        return 2 * (lane % 4) + [0, 1, 8, 9][r], 16 * warp + lane // 4 + 8 * h
    if a8 and bits == 4:
        lane, j, b, r = w // 4, (w % 4) // 2, w % 2, [0, 4, 1, 5, 2, 6, 3, 7][t]
        return 4 * (lane % 4) + r % 4 + 16 * (r // 4), 16 * j + lane // 4 + 8 * b
    raise ValueError("not needed here")


def marlin(q, K, N, bits, a8=False):
    """Marlin int32 words of codes q[k][n] (docs/spec/marlin.md §0: tiles in (kt, nt) order)."""
    pf = 32 // bits
    tk, tn = (32, 32) if a8 else (16, 64)
    tw = tk * tn // pf
    out = []
    for kt in range(K // tk):
        for nt in range(N // tn):
            for w in range(tw):
                word = 0
                for t in range(pf):
                    dk, dn = slot_source(bits, a8, w, t)
                    word |= q[kt * tk + dk][nt * tn + dn] << (bits * t)
                out.append(word)
    return out


def scale_perm_source(n, grouped):
    """docs/spec/marlin.md §4.1: output column n takes input column scale_perm(_single)[n % chunk]."""
    if grouped:
        p = n % 64
        return n - p + p // 8 + 8 * (p % 8)
    p = n % 32
    return n - p + 2 * (p // 8) + [0, 1, 8, 9, 16, 17, 24, 25][p % 8]


def i32(words):
    return struct.pack("<%di" % len(words), *[w - (1 << 32) if w >= 1 << 31 else w for w in words])


def f16(values):
    return struct.pack("<%de" % len(values), *values)


def bf16(values):
    # exact bf16 values only (asserted): the top half of their float32
    out = b""
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        assert bits & 0xFFFF == 0, v
        out += struct.pack("<H", bits >> 16)
    return out


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def fp8_cases():
    K, N = 16, 64
    q = [[(16 * k + n) % 256 for n in range(N)] for k in range(K)]
    weight_nk = bytes(q[k][n] for n in range(N) for k in range(K))
    weight_kn = bytes(q[k][n] for k in range(K) for n in range(N))
    m = i32(marlin(q, K, N, 8))
    base = [0.5, 1.0, 2.0, 3.0]
    chan = [base[n % 4] for n in range(N)]
    perm = [chan[scale_perm_source(n, False)] for n in range(N)]  # group -1: scale_perm_single
    yield ([K, N], "marlin-fp8-prepare", {"dtype": "f16"},
           [("weight", "F8_E4M3", [N, K], weight_nk), ("weight_scale", "F32", [N], f32(chan))],
           [("weight", "I32", [K // 16, 4 * N], m), ("weight_scale", "F16", [1, N], f16([256 * v for v in perm]))])
    yield ([K, N], "marlin-fp8-prepare", {"dtype": "bf16", "size-k-first": True, "fold": "none"},
           [("weight", "F8_E4M3", [K, N], weight_kn), ("weight_scale", "F32", [], f32([0.5]))],
           [("weight", "I32", [K // 16, 4 * N], m), ("weight_scale", "BF16", [1, N], bf16([0.5] * N))])
    yield ([K, N], "marlin-fp8-prepare", {"dtype": "bf16"},
           [("weight", "F8_E4M3", [N, K], weight_nk), ("weight_scale", "F32", [N], f32(chan))],
           [("weight", "I32", [K // 16, 4 * N], m), ("weight_scale", "BF16", [1, N], bf16([v * 2.0 ** 120 for v in perm]))])
    yield ([K, N], "marlin-fp8-prepare", {"dtype": "bf16", "fold": "sglang-fp16"},
           [("weight", "F8_E4M3", [N, K], weight_nk), ("weight_scale", "F32", [N], f32(chan))],
           [("weight", "I32", [K // 16, 4 * N], m), ("weight_scale", "BF16", [1, N], bf16([256 * v for v in perm]))])


def fp4_weight(N, K):
    """Bytes [N, K/2] with element (n, k) = (n + 3k) % 16, and the codes q[k][n] padded to 64."""
    w = bytes(((n + 6 * i) % 16) | (((n + 6 * i + 3) % 16) << 4) for n in range(N) for i in range(K // 2))
    n_pad = (N + 63) // 64 * 64
    q = [[(n + 3 * k) % 16 if n < N else 0 for n in range(n_pad)] for k in range(K)]
    return w, q, n_pad


def nvfp4_cases():
    K, N = 32, 64
    w, q, n_pad = fp4_weight(N, K)
    m = i32(marlin(q, K, n_pad, 4))
    ex9 = [0x38, 0x40, 0x30, 0x7E, 0x01, 0x08, 0x39, 0x00]
    s = [[0x38] * (K // 16) for _ in range(N)]
    for j in range(8):
        s[8 * j][0] = ex9[j]  # grouped permutation: row 0, column j <- column 8j
    scale = bytes(s[n][g] for n in range(N) for g in range(K // 16))
    for dt, want, other, sf, gs in (("f16", [0xB0, 0xA8, 0xB8, 0xF6, 0x68, 0xB1, 0x80, 0x00], 0xB0, 1.0, 2.0 ** 7),
                                    ("bf16", [0xC8, 0xC0, 0xD0, 0xF8, 0x80, 0xC9, 0x98, 0x00], 0xC8, 8.0, 2.0 ** 116)):
        out = [other] * ((K // 16) * n_pad)
        out[0:8] = want
        yield ([K, N], "marlin-nvfp4-prepare", {"dtype": dt},
               [("weight", "U8", [N, K // 2], w), ("weight_scale", "F8_E4M3", [N, K // 16], scale),
                ("weight_global_scale", "F32", [], f32([1.0]))],
               [("weight", "I32", [K // 16, 2 * n_pad], m), ("weight_scale", "F8_E4M3", [K // 16, n_pad], bytes(out)),
                ("weight_global_scale", "F32", [], f32([gs])), ("scale_factor", "F32", [], f32([sf]))])


def mxfp4_cases():
    K, N = 64, 32
    w, q, n_pad = fp4_weight(N, K)
    G = K // 32
    s = [[120 + (n + 3 * g) % 16 for g in range(G)] for n in range(N)]
    scale = bytes(s[n][g] for n in range(N) for g in range(G))
    t = [[s[n][g] if n < N else 0 for n in range(n_pad)] for g in range(G)]  # transposed, padded
    for a8 in (False, True):
        grouped = not a8 and 32 < K
        out = []
        for g in range(G):
            p = [t[g][scale_perm_source(n, grouped)] for n in range(n_pad)]
            if a8:
                out += [b + 6 for b in p]
            else:
                out += [p[n - n % 4 + [0, 2, 1, 3][n % 4]] for n in range(n_pad)]
        params = {"dtype": "bf16", "a8": True} if a8 else {"dtype": "bf16"}
        yield ([K, N], "marlin-mxfp4-prepare", params,
               [("weight", "U8", [N, K // 2], w), ("weight_scale", "U8", [N, G], scale)],
               [("weight", "I32", [K // 16, 2 * n_pad], i32(marlin(q, K, n_pad, 4, a8))),
                ("weight_scale", "U8", [G, n_pad], bytes(out))])


def sort_cases():
    for g in ([1, 0] * 16, [(7 * k) % 4 for k in range(64)]):
        K = len(g)
        idx = sorted(range(K), key=lambda k: g[k])  # Python's sort is stable
        if K == 32:
            assert idx == list(range(1, 32, 2)) + list(range(0, 32, 2))  # EX5
        yield ([K], "marlin-sort-g-idx", {},
               [("g_idx", "I32", [K], i32(g))],
               [("g_idx", "I32", [K], i32([g[k] for k in idx])), ("sort_indices", "I32", [K], i32(idx))])


def main():
    write_golden_cases(sys.argv[1], 1900, list(fp8_cases()) + list(nvfp4_cases()) + list(mxfp4_cases()) + list(sort_cases()))


if __name__ == "__main__":
    main()
