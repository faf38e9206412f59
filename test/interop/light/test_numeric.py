"""Every number format of qtl/numeric.hpp against an independent implementation: ml_dtypes (numpy
for fp16), on every code (decode) and on a dense sweep of float32 inputs (encode).

The inputs are float32 only (ml_dtypes casts float64 through float32: double rounding). Each known
difference between QTL and the oracle is a row of KNOWN below: the inputs it covers (a predicate),
what QTL gives there, why, and a check that the oracle really differs on some of them (a row that
stopped being a difference fails, so the table cannot go stale). Everywhere else the codes must be
equal; NaNs compare as NaNs (the peers' NaN codes differ, docs/spec/interop.md section 1.4).
"""
import subprocess

import ml_dtypes as md
import numpy as np
import pytest

from qtl_interop import DUMP_NUMERIC

# format -> (oracle dtype, code dtype, number of codes, code mask)
FORMATS = {
    "fp16": (np.float16, np.uint16, 1 << 16),
    "bf16": (md.bfloat16, np.uint16, 1 << 16),
    "e4m3fn": (md.float8_e4m3fn, np.uint8, 256),
    "e5m2": (md.float8_e5m2, np.uint8, 256),
    "e3m2": (md.float6_e3m2fn, np.uint8, 64),
    "e2m3": (md.float6_e2m3fn, np.uint8, 64),
    "e2m1": (md.float4_e2m1fn, np.uint8, 16),
    "e8m0": (md.float8_e8m0fnu, np.uint8, 256),
}


def dump(*args, data=None):
    r = subprocess.run([str(DUMP_NUMERIC), *args], input=data, capture_output=True, check=True)
    return r.stdout


def decode_table(fmt):
    return np.frombuffer(dump("decode", fmt), np.float32)


def qtl_encode(fmt, mode, x):
    _, code_t, _ = FORMATS[fmt]
    return np.frombuffer(dump("encode", fmt, mode, data=np.ascontiguousarray(x, np.float32).tobytes()), code_t)


def oracle_decode(fmt, codes):
    dt, code_t, _ = FORMATS[fmt]
    return codes.astype(code_t).view(dt).astype(np.float32)


def oracle_encode(fmt, x):
    dt, code_t, _ = FORMATS[fmt]
    return x.astype(dt).view(code_t)


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def sweep(fmt):
    """float32 inputs: every bf16 pattern widened, every midpoint of adjacent finite values of
    `fmt` and its two float32 neighbours, the overflow boundaries, ±0, ±inf, NaN, and random bits."""
    xs = [np.arange(1 << 16, dtype=np.uint32).astype(np.uint32) << 16]
    table = decode_table(fmt).astype(np.float64)
    v = np.unique(table[np.isfinite(table)])
    mids = ((v[:-1] + v[1:]) / 2).astype(np.float32)
    top = np.float32(v[-1])
    if fmt != "e8m0":
        ulp = v[-1] - v[-2]
        beyond = np.array([v[-1] + ulp / 2, v[-1] + ulp, 2 * v[-1], 1e30], np.float64).astype(np.float32)
    else:  # powers of two: the next tie above 2^127 is 1.5 * 2^127
        beyond = np.array([1.5 * 2.0**127, 3e38], np.float32)
    edge = np.concatenate([mids, beyond, [top]])
    edge = np.concatenate([edge, -edge])
    up = np.nextafter(edge, np.float32(np.inf))
    down = np.nextafter(edge, np.float32(-np.inf))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], np.float32)
    rnd = np.random.default_rng(20261203).integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    parts = [xs[0], bits(edge), bits(up), bits(down), bits(specials), rnd]
    return np.concatenate(parts).view(np.float32)


def same_codes(fmt, qtl_codes, oracle_codes):
    """Elementwise: equal codes, or both NaN."""
    q = oracle_decode(fmt, qtl_codes)
    o = oracle_decode(fmt, oracle_codes)
    return (qtl_codes == oracle_codes) | (np.isnan(q) & np.isnan(o))


# --- decode: every code ---------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_decode_every_code(fmt):
    _, code_t, n = FORMATS[fmt]
    codes = np.arange(n, dtype=np.uint32).astype(code_t)
    q = decode_table(fmt)
    o = oracle_decode(fmt, codes)
    assert q.shape == o.shape == (n,)
    nan = np.isnan(o)
    np.testing.assert_array_equal(np.isnan(q), nan, err_msg=fmt + ": NaN codes differ")
    # Bit-exact on everything else (so -0 is -0 and subnormals are exact).
    bad = np.flatnonzero(bits(q)[~nan] != bits(o)[~nan])
    assert bad.size == 0, "%s: codes %s decode to %s, ml_dtypes %s" % (
        fmt, codes[~nan][bad[:8]], q[~nan][bad[:8]], o[~nan][bad[:8]])
    # NaN codes keep their sign (where the format has a sign).
    if fmt != "e8m0":
        np.testing.assert_array_equal(np.signbit(q[nan]), np.signbit(o[nan]))


# --- encode: the known differences ---------------------------------------------------------------

def _finite_max(fmt):
    t = decode_table(fmt)
    return np.float32(np.max(t[np.isfinite(t)]))


def _sat(fmt):
    """QTL's saturation::finite = clip to ±max first, then the oracle's (RNE) cast; NaN stays NaN."""
    m = _finite_max(fmt)
    return lambda x: oracle_encode(fmt, np.clip(x, -m, m))


def _toward_zero(fmt):
    """Round toward zero from the decode table: the largest magnitude ≤ |x|, with x's sign;
    saturating; NaN -> +max (CUDA's rule, numeric.hpp)."""
    table = decode_table(fmt)
    _, code_t, n = FORMATS[fmt]
    half = n // 2
    mags = table[:half].astype(np.float64)          # codes 0..half-1: +0 .. +max, increasing
    def enc(x):
        a = np.abs(x.astype(np.float64))
        i = np.searchsorted(mags, a, side="right") - 1
        i = np.clip(i, 0, half - 1).astype(np.uint32)
        code = np.where(np.signbit(x), i | half, i).astype(code_t)
        return np.where(np.isnan(x), half - 1, code).astype(code_t)
    return enc


def _e8m0_pow2(rounding, sat):
    """floor/ceil of log2|x| in exact float64 arithmetic; below 2^-127 -> code 0; beyond 2^127 ->
    NaN (0xFF) or 2^127 (0xFE, finite); NaN -> 0xFF; the sign is ignored."""
    def enc(x):
        a = np.abs(x.astype(np.float64))
        m, e = np.frexp(a)                  # a = m * 2^e, m in [0.5, 1)
        fl = e - 1
        ce = np.where(m == 0.5, fl, e)
        k = (fl if rounding == "zero" else ce).astype(np.int64)
        k = np.where(a == 0, -127, k)
        code = np.clip(k, -127, None) + 127
        over = (code > 254) | np.isinf(a)
        code = np.where(over, 254 if sat == "finite" else 255, code)
        return np.where(np.isnan(a), 255, code).astype(np.uint8)
    return enc


def _nan_in(x):
    return np.isnan(x)


def _nonpositive(x):
    return ~np.isnan(x) & (np.signbit(x) | (x == 0))


# (fmt, mode) -> (expected outside KNOWN rows, [known rows])
#   a known row: (what, predicate(x), QTL's value(x), why)
KNOWN = {
    ("fp16", "none"): (lambda x: oracle_encode("fp16", x), []),
    ("fp16", "finite"): (_sat("fp16"), []),
    ("bf16", "none"): (lambda x: oracle_encode("bf16", x), []),
    ("bf16", "finite"): (_sat("bf16"), []),
    ("e4m3fn", "none"): (lambda x: oracle_encode("e4m3fn", x), []),
    ("e4m3fn", "finite"): (_sat("e4m3fn"), []),
    ("e5m2", "none"): (lambda x: oracle_encode("e5m2", x), []),
    ("e5m2", "finite"): (_sat("e5m2"), []),
    ("e3m2", "nearest"): (lambda x: oracle_encode("e3m2", x), [
        ("NaN", _nan_in, lambda x: np.full(x.shape, 0x1F, np.uint8),
         "fp6 has no NaN: QTL encodes NaN as +max (0x1F) as CUDA's __nv_cvt_float_to_fp6 does; "
         "ml_dtypes gives 0x20 (-0) for +NaN and 0 for -NaN"),
    ]),
    ("e3m2", "zero"): (_toward_zero("e3m2"), []),
    ("e2m3", "nearest"): (lambda x: oracle_encode("e2m3", x), [
        ("NaN", _nan_in, lambda x: np.full(x.shape, 0x1F, np.uint8),
         "fp6 has no NaN: QTL gives +max (0x1F, CUDA); ml_dtypes 0x20 / 0"),
    ]),
    ("e2m3", "zero"): (_toward_zero("e2m3"), []),
    ("e2m1", "nearest"): (lambda x: oracle_encode("e2m1", x), [
        ("NaN", _nan_in, lambda x: np.full(x.shape, 0x7, np.uint8),
         "fp4 has no NaN: QTL gives +max (0x7, CUDA's __nv_cvt_float_to_fp4); ml_dtypes 0x8 (-0) / 0"),
    ]),
    ("e2m1", "zero"): (_toward_zero("e2m1"), []),
    ("e8m0", "nearest-none"): (lambda x: oracle_encode("e8m0", x), [
        ("zero and negative inputs", _nonpositive,
         lambda x: oracle_encode("e8m0", np.where(x == 0, np.float32(2.0**-127), np.abs(x)).astype(np.float32)),
         "e8m0 is unsigned: QTL (as torch's c10 fp8e8m0fnu_from_fp32_value and CUDA) ignores the sign "
         "and maps 0 to code 0 (2^-127); ml_dtypes gives NaN (0xFF) for 0, -0 and every negative"),
    ]),
    ("e8m0", "nearest-finite"): (
        lambda x: np.where(np.isnan(x), 255, np.where(oracle_encode("e8m0", x) == 255, 254,
                                                      oracle_encode("e8m0", x))).astype(np.uint8),
        [("zero and negative inputs", _nonpositive,
          lambda x: np.minimum(oracle_encode("e8m0", np.where(x == 0, np.float32(2.0**-127),
                                                              np.abs(x)).astype(np.float32)), 254).astype(np.uint8),
          "as nearest-none; finite also saturates |x| >= 1.5*2^127 and Inf to 0xFE"),
         ]),
    ("e8m0", "zero-none"): (_e8m0_pow2("zero", "none"), []),
    ("e8m0", "zero-finite"): (_e8m0_pow2("zero", "finite"), []),
    ("e8m0", "up-none"): (_e8m0_pow2("up", "none"), []),
    ("e8m0", "up-finite"): (_e8m0_pow2("up", "finite"), []),
}


@pytest.mark.parametrize("fmt,mode", list(KNOWN))
def test_encode_sweep(fmt, mode):
    x = sweep(fmt if fmt != "fp16" else "fp16")
    q = qtl_encode(fmt, mode, x)
    expected_fn, known = KNOWN[(fmt, mode)]
    covered = np.zeros(x.shape, bool)
    for what, pred, qtl_value, why in known:
        sel = pred(x) & ~covered
        assert sel.any(), "%s %s: known difference '%s' covers no input of the sweep" % (fmt, mode, what)
        want = qtl_value(x[sel])
        ok = same_codes(fmt, q[sel], want)
        assert ok.all(), "%s %s (%s): x=%s QTL %s, documented %s" % (
            fmt, mode, what, x[sel][~ok][:6], q[sel][~ok][:6], want[~ok][:6])
        # The row is a real difference from the oracle on at least one input.
        plain = oracle_encode(fmt, x[sel]) if not mode.endswith("finite") else expected_fn(x[sel])
        assert not same_codes(fmt, q[sel], plain).all(), "%s %s: '%s' is no longer a difference (%s)" % (
            fmt, mode, what, why)
        covered |= sel
    rest = ~covered
    want = expected_fn(x[rest])
    ok = same_codes(fmt, q[rest], want)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, "%s %s: %d inputs differ, e.g. x=%s (bits %s) QTL %s, oracle %s" % (
        fmt, mode, bad.size, x[rest][bad[:6]], [hex(b) for b in bits(x[rest][bad[:6]])],
        q[rest][bad[:6]], want[bad[:6]])


def test_round_half_even_matches_numpy_rint():
    x = sweep("bf16")
    got = np.frombuffer(dump("rint", data=x.tobytes()), np.float32)
    want = np.rint(x)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(bits(got)[~nan], bits(want)[~nan])   # -0.0 stays -0.0


def test_hand_worked_vectors():
    """A few values worked by hand (docs/spec/interop.md section 1.2), independent of both peers."""
    e4 = qtl_encode("e4m3fn", "none", np.array([448, 464, 464.0001, 480, -0.0, 2.0**-9, 2.0**-10], np.float32))
    assert list(e4) == [0x7E, 0x7E, 0x7F, 0x7F, 0x80, 0x01, 0x00]
    e4s = qtl_encode("e4m3fn", "finite", np.array([1e9, -np.inf], np.float32))
    assert list(e4s) == [0x7E, 0xFE]
    fp4 = qtl_encode("e2m1", "nearest", np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 7, -0.1], np.float32))
    assert list(fp4) == [0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6, 0x7, 0x8]
    e8 = qtl_encode("e8m0", "nearest-none", np.array([1.0, 1.4999, 1.5, 3.0, 2.0**127, 1.5 * 2.0**127], np.float32))
    assert list(e8) == [127, 127, 128, 129, 254, 255]
    e5 = qtl_encode("e5m2", "none", np.array([57344, 61439, 61440], np.float32))
    assert list(e5) == [0x7B, 0x7B, 0x7C]
