"""torch's own fp8 casts and torchao's NVFP4 / MX reference functions against QTL (dump_numeric,
`qtl op nvfp4-quant`, `qtl op swizzle-blockscale`) on random and hostile inputs: equal, or each
difference a row of a documented list pinned here."""
import subprocess
import tempfile

import ml_dtypes as md
import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

from qtl_interop import DUMP_NUMERIC, load_any, qtl

RNG = np.random.default_rng(20261203)


def dump(*args, data):
    return subprocess.run([str(DUMP_NUMERIC), *args], input=data, capture_output=True, check=True).stdout


def sweep():
    bf = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)
    rnd = RNG.integers(0, 1 << 32, 100_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = np.array([448, 464, 464.01, 480, 1e9, 57344, 61439, 61440, 2.0**127, 1.5 * 2.0**127,
                      2.0**-127, 2.0**-130, 0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    return np.concatenate([bf, rnd, edges, -edges])


# (qtl format, qtl mode, torch dtype) -> [(what, predicate, why)]: inputs where torch differs
TORCH_CASTS = {
    ("e4m3fn", "finite", torch.float8_e4m3fn): [],
    ("e5m2", "none", torch.float8_e5m2): [],
    ("e8m0", "nearest-none", torch.float8_e8m0fnu): [],
}


def same(qtl_codes, torch_codes, decode):
    a, b = decode(qtl_codes), decode(torch_codes)
    return (qtl_codes == torch_codes) | (np.isnan(a) & np.isnan(b))


@pytest.mark.parametrize("fmt,mode,dt", list(TORCH_CASTS), ids=[k[0] + "-" + k[1] for k in TORCH_CASTS])
def test_torch_casts(fmt, mode, dt):
    """torch 2.15 eager CPU `.to(dtype)`: e4m3fn saturates finite overflow (QTL's saturation::finite,
    not the NaN of ml_dtypes and torch < 2.13); e5m2 overflows to Inf; e8m0 uses c10's rule (QTL's
    nearest)."""
    x = sweep()
    q = np.frombuffer(dump("encode", fmt, mode, data=x.tobytes()), np.uint8)
    t = torch.from_numpy(x.copy()).to(dt).view(torch.uint8).numpy()
    mdt = {"e4m3fn": md.float8_e4m3fn, "e5m2": md.float8_e5m2, "e8m0": md.float8_e8m0fnu}[fmt]
    dec = lambda c: c.view(mdt).astype(np.float32)
    ok = same(q, t, dec)
    # torch on Inf input to e4m3fn: recorded, whatever it is (an open question of docs/spec/interop.md section 8)
    inf_codes = t[np.isinf(x)]
    print("RESULT torch %s: +-inf -> %s; %d of %d inputs differ from QTL %s %s" % (
        dt, sorted(set(int(c) for c in inf_codes)), int((~ok).sum()), x.size, fmt, mode))
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, "x=%s qtl=%s torch=%s" % (x[bad[:6]], q[bad[:6]], t[bad[:6]])


def qtl_nvfp4(x):
    with tempfile.TemporaryDirectory() as d:
        src, out = d + "/in.st", d + "/out.st"
        save_file({"input": x}, src, metadata={"format": "pt"})
        qtl("op", "nvfp4-quant", src, out)
        return load_any(out)


def nvfp4_inputs():
    yield "random-normal", RNG.standard_normal((128, 256)).astype(np.float32)
    yield "random-wide", (RNG.standard_normal((64, 128)) * np.exp(RNG.uniform(-8, 8, (64, 1)))).astype(np.float32)
    z = RNG.standard_normal((32, 64)).astype(np.float32)
    z[0, :16] = 0                     # an all-zero block
    z[1, :] = 0                       # an all-zero row
    z[2, 16:32] = 1e-30               # a block far below the rest (e4m3 scale underflows)
    z[3, :16] = np.array([6, 5, 3.5, 2.5, 1.75, 1.25, 0.75, 0.25] * 2, np.float32)  # E2M1 ties
    yield "hostile", z


@pytest.mark.parametrize("name,x", list(nvfp4_inputs()), ids=[n for n, _ in nvfp4_inputs()])
def test_nvfp4_vs_torchao(name, x):
    """torchao NVFP4Tensor.to_nvfp4 with per_tensor_scale = amax / (448*6) (a multiplier: 1/QTL's
    global scale). torchao scales the data by the reciprocal, x * ((1/pts) / s), where QTL (and
    ModelOpt/CT) divide: a tie can move by one code. Codes and scales are compared; the data
    differences are counted and must each be a one-code move next to a rounding tie."""
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale
    q = qtl_nvfp4(x)
    xt = torch.from_numpy(x)
    pts = per_tensor_amax_to_scale(xt.abs().max())
    t = NVFP4Tensor.to_nvfp4(xt, block_size=16, per_tensor_scale=pts)
    gs = np.float32(q["global_scale"])
    assert np.float32(1.0) / np.float32(pts.item()) == pytest.approx(gs, rel=2e-7), (gs, pts.item())
    t_scale = t.scale.view(torch.uint8).numpy().reshape(q["scale"].shape)
    q_scale = q["scale"].view(np.uint8)
    # Known difference: torchao clamps each block scale to at least finfo(float8_e4m3fn).tiny = 2^-6
    # (nvfp4_quantize's clamp(min=E4M3_EPS)); QTL, as vLLM's/sglang's scaled_fp4_quant, keeps the
    # E4M3 subnormal scales and 0 for an all-zero block. Pinned: exactly those blocks differ, and
    # torchao has 2^-6 there. The codes are compared in the other blocks.
    q_sv = q_scale.view(md.float8_e4m3fn).astype(np.float32)
    t_sv = t_scale.view(md.float8_e4m3fn).astype(np.float32)
    small = q_sv < 2.0**-6
    assert (t_sv[small] == 2.0**-6).all()
    sc_diff = int((t_scale != q_scale)[~small].sum())
    t_data = t.qdata.view(torch.uint8).numpy().reshape(q["output"].shape)
    q_data = q["output"]
    # nibble-level comparison
    def nib(a):
        return np.stack([a & 0xF, a >> 4], -1).reshape(a.shape[0], -1)
    tn, qn = nib(t_data), nib(q_data)
    diff = (tn != qn) & ~np.repeat(small, 16, axis=1)
    e2m1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    one_code = np.abs(np.abs(e2m1[tn]) - np.abs(e2m1[qn]))
    print("RESULT nvfp4 %s: %d scales below 2^-6 (torchao clamps: known), %d other scales differ, %d codes differ" % (
        name, int(small.sum()), sc_diff, int(diff.sum())))
    assert sc_diff == 0
    # every code difference: adjacent codes, same sign or a zero, and the exact quotient at a tie
    blocks = x.reshape(x.shape[0], -1, 16)
    s = q_scale.view(md.float8_e4m3fn).astype(np.float32)
    quot = blocks / (s[..., None] / gs)
    quot = quot.reshape(x.shape)
    for i, j in zip(*np.nonzero(diff)):
        a, b = e2m1[qn[i, j]], e2m1[tn[i, j]]
        mid = (abs(a) + abs(b)) / 2
        assert abs(abs(quot[i, j]) - mid) <= 1e-5 * max(1.0, mid), (name, i, j, quot[i, j], a, b)


def test_to_blocked_vs_qtl_swizzle():
    """torchao's to_blocked (the 128x4 scale layout cuBLAS/tcgen05 read) vs qtl op swizzle-blockscale,
    on shapes that need padding in both dimensions."""
    from torchao.prototype.mx_formats.utils import to_blocked
    for m, k in [(128, 4), (130, 6), (1, 1), (257, 9), (64, 16)]:
        s = RNG.integers(1, 255, (m, k), dtype=np.uint8)
        with tempfile.TemporaryDirectory() as d:
            save_file({"scale": s}, d + "/in.st", metadata={"format": "pt"})
            qtl("op", "swizzle-blockscale", d + "/in.st", d + "/out.st")
            q = load_any(d + "/out.st")["scale"]
        t = to_blocked(torch.from_numpy(s)).numpy().reshape(-1)
        assert q.reshape(-1).tobytes() == t.tobytes(), (m, k)


@pytest.mark.parametrize("mode", ["FLOOR", "EVEN", "CEIL", "RCEIL"])
def test_mx_scale_rules_vs_e8m0_encoders(mode):
    """torchao to_mx's E8M0 scale per 32 elements of FP4, from the block amax, against QTL's
    e8m0 encoders: FLOOR = toward_zero(amax) - 2 (OCP), CEIL = up(amax) - 2, RCEIL = up(amax / 6), EVEN =
    amax rounded to a power of two up from mantissa 0.75 (CT's MXFP4 rule), - 2: each rule
    written from torchao's config.ScaleCalculationMode docs and checked here on random blocks."""
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx
    x = (RNG.standard_normal((64, 256)) * np.exp(RNG.uniform(-10, 10, (64, 1)))).astype(np.float32)
    scale, _ = to_mx(torch.from_numpy(x), torch.float4_e2m1fn_x2, 32, ScaleCalculationMode[mode])
    t = scale.view(torch.uint8).numpy().reshape(64, -1)
    amax = np.abs(x.reshape(64, -1, 32)).max(-1).astype(np.float32)
    if mode == "FLOOR":
        q = np.frombuffer(dump("encode", "e8m0", "zero-none", data=amax.tobytes()), np.uint8).astype(int) - 2
    elif mode == "CEIL":
        q = np.frombuffer(dump("encode", "e8m0", "up-none", data=amax.tobytes()), np.uint8).astype(int) - 2
    elif mode == "RCEIL":
        q = np.frombuffer(dump("encode", "e8m0", "up-none", data=(amax / np.float32(6)).tobytes()), np.uint8).astype(int)
    else:  # EVEN: round amax to a power of two (up when its mantissa is >= 0.75), then - 2
        b = amax.view(np.uint32).astype(np.uint64)
        b = (b + (1 << 21)) & 0x7F800000
        q = (b >> 23).astype(int) - 2
    same = (q.reshape(t.shape) == t)
    print("RESULT to_mx %s: %d of %d E8M0 scales equal QTL's rule" % (mode, int(same.sum()), same.size))
    assert same.all(), (mode, amax.reshape(-1)[~same.reshape(-1)][:5], q.reshape(-1)[~same.reshape(-1)][:5],
                        t.reshape(-1)[~same.reshape(-1)][:5])
