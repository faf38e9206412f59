"""The converters' arithmetic redone in plain Python (standard library only; float32 rounding by
struct), independently of the C++, for test_qtl_convert.py and test/data/golden/make_convert_cases.py:
e4m3/bf16/E2M1 encodings, both power-of-two rules, the FP8 block dequant, the engines' requant
(docs/spec/converters.md §3) and QTL's NVFP4 block recipe (qtl/fp4.hpp's file comment)."""
import bisect
import math
import struct

BN = BK = 128



def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def from_bits(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def e4m3_value(c):
    s = -1.0 if c & 0x80 else 1.0
    e = (c >> 3) & 0xF
    m = c & 7
    if e == 15 and m == 7:
        return float("nan")
    if e == 0:
        return s * m * 2.0 ** -9
    return s * (1 + m / 8.0) * 2.0 ** (e - 7)


E4M3 = [e4m3_value(c) for c in range(256)]
POS = [(E4M3[c], c) for c in range(0x7F)]  # ascending
POS_V = [v for v, _ in POS]


def nearest_code(grid, a):
    """The index of the value of the ascending `grid` nearest to a (grid[0] <= a <= grid[-1]), ties
    to the even index: the codes of a non-negative float grid in order."""
    i = bisect.bisect_left(grid, a)
    if grid[i] == a:
        return i
    lo, hi = i - 1, i
    dl, dh = a - grid[lo], grid[hi] - a
    return lo if dl < dh else hi if dh < dl else (lo if lo % 2 == 0 else hi)


def e4m3_rne(x):
    """The torch cast for |x| <= 464 (RNE, ties to the even code), sign kept (-0 -> 0x80)."""
    neg = math.copysign(1.0, x) < 0
    a = abs(x)
    c = 0x7E if a > POS_V[-1] else nearest_code(POS_V, a)
    return c | (0x80 if neg else 0)


def bf16_round(x):
    b = f32_bits(x)
    if (b & 0x7FFFFFFF) > 0x7F800000:
        return from_bits(0x7FC00000)
    return from_bits(((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16)


def bf16_bytes(x):
    b = f32_bits(x)
    if (b & 0x7FFFFFFF) > 0x7F800000:
        return struct.pack("<H", 0x7FC0)
    return struct.pack("<H", (b + 0x7FFF + ((b >> 16) & 1)) >> 16)


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e2m1_value(c):
    return (-1.0 if c & 8 else 1.0) * E2M1[c & 7]


def e2m1_rne(x):
    neg = math.copysign(1.0, x) < 0
    a = min(abs(x), 6.0)
    return nearest_code(E2M1, a) | (8 if neg else 0)


def ceil_pow2_bits(x):
    b = f32_bits(abs(x))
    e = ((b >> 23) & 0xFF) + (1 if b & 0x7FFFFF else 0)
    return from_bits(min(max(e, 1), 254) << 23)


def ceil_pow2_log2(x):
    return 2.0 ** math.ceil(f32(math.log2(abs(x))))


def cdiv(a, b):
    return (a + b - 1) // b


def dequant(q, s, n, k, bf16):
    """fl(e4m3(q) * s) per element ([n*k] floats), bf16-rounded when `bf16`."""
    kb = cdiv(k, BK)
    out = [0.0] * (n * k)
    for r in range(n):
        srow = s[(r // BN) * kb:(r // BN + 1) * kb]
        for c in range(k):
            v = f32(E4M3[q[r * k + c]] * srow[c // BK])
            out[r * k + c] = bf16_round(v) if bf16 else v
    return out


def requant(q, s, n, k, recipe):
    """The engines' requant_weight_ue8m0, per 128x128 block (docs/spec/converters.md §3): sglang (bf16 dequant,
    bits rule), sglang-legacy (bf16, log2 rule) or vllm (f32, log2 rule)."""
    bf16 = recipe != "vllm"
    rule = ceil_pow2_bits if recipe == "sglang" else ceil_pow2_log2
    d = dequant(q, s, n, k, bf16)
    nb, kb = cdiv(n, BN), cdiv(k, BK)
    q2 = bytearray(n * k)
    s2 = [0.0] * (nb * kb)
    for bi in range(nb):
        for bj in range(kb):
            rows = range(bi * BN, min(n, bi * BN + BN))
            cols = range(bj * BK, min(k, bj * BK + BK))
            amax = max(abs(d[r * k + c]) for r in rows for c in cols)
            amax = max(amax, f32(1e-4))
            sf = rule(f32(amax / 448.0))
            inv = f32(1.0 / sf)
            for r in rows:
                for c in cols:
                    q2[r * k + c] = e4m3_rne(f32(d[r * k + c] * inv))
            s2[bi * kb + bj] = sf
    return bytes(q2), s2


def unpack_f32(b):
    return list(struct.unpack("<%df" % (len(b) // 4), b))


def nvfp4_reference(d, n, k, gs):
    """QTL's NVFP4 recipe (qtl/fp4.hpp) on float values d [n*k]: codes [n*k], scale bytes [n*k/16]."""
    codes = [0] * (n * k)
    scales = [0] * (n * k // 16)
    inv_gs = f32(1.0 / gs)
    for b in range(n * k // 16):
        x = d[b * 16:(b + 1) * 16]
        vmax = max(abs(v) for v in x)
        sc = e4m3_rne(min(f32(gs * f32(vmax / 6.0)), 448.0)) & 0x7F
        sf = E4M3[sc]
        os_ = 0.0 if sf == 0 else f32(1.0 / f32(sf * inv_gs))
        scales[b] = sc
        for i, v in enumerate(x):
            codes[b * 16 + i] = e2m1_rne(max(-6.0, min(6.0, f32(v * os_))))
    return codes, scales
