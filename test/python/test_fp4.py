"""NVFP4 / MXFP4 / MXFP8 quantization and dequantization, the TRT-LLM FP4 MoE preparation and the
fp8 comparison through the Python API: hand-worked blocks (qtl/fp4.hpp's recipes), properties
(round trips, swizzle = swizzle_blockscale of the linear scales, bytes independent of threads=),
and the MoE preparation against a numpy implementation of docs/spec/blockscale.md §4's formulas
(the oracle of test/unit/moe_test.cpp) plus the row vectors of §8.2."""

import ml_dtypes
import numpy as np
import pytest

import qtl

rng = np.random.default_rng(19)

E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
# Every E2M1 magnitude, then the same negated (-0 keeps its sign: code 8): codes 0..15 in order.
GRID = np.array(E2M1 + [-v for v in E2M1], np.float32)
GRID[8] = -0.0
PAIRS = [0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE]  # element 2i in the low nibble


def u8(a):
    a = np.asarray(a)
    return (a.reshape(1) if a.ndim == 0 else a).view(np.uint8)


def test_nvfp4_hand_worked_block():
    x = GRID.reshape(1, 16)
    values, scales, gs = qtl.nvfp4_quantize(x, swizzle=False)
    # amax 6: gs = 448 * 6 / 6 = 448; block scale e4m3(448 * 6 / 6) = 448 (code 0x7E); os = 1.
    assert gs.shape == () and gs.dtype == np.float32 and float(gs) == 448.0
    assert values.dtype == np.uint8 and values.shape == (1, 8) and list(values[0]) == PAIRS
    assert scales.dtype == ml_dtypes.float8_e4m3fn and scales.shape == (1, 1) and u8(scales)[0, 0] == 0x7E
    back = qtl.nvfp4_dequantize(values, scales, gs, swizzle=False)
    assert back.dtype == np.float32 and np.array_equal(back, x) and np.signbit(back[0, 8])
    # A given global scale is used as is: gs = 224 halves the block scale (224 -> 0x76).
    _, s2, g2 = qtl.nvfp4_quantize(x, 224.0, swizzle=False)
    assert float(g2) == 224.0 and u8(s2)[0, 0] == 0x76


def test_mx_hand_worked_blocks():
    x = np.zeros((1, 32), np.float32)
    x[0, :16] = GRID
    values, scales = qtl.mxfp4_quantize(x, swizzle=False)
    # vmax 6: scale 2^ceil(log2(6 / 6)) = 2^0, UE8M0 code 127.
    assert scales.dtype == np.uint8 and scales.shape == (1, 1) and scales[0, 0] == 127
    assert list(values[0]) == PAIRS + [0] * 8
    assert np.array_equal(qtl.mxfp4_dequantize(values, scales, swizzle=False), x)
    y = np.zeros((1, 32), np.float32)
    y[0, :4] = [448, -448, 1, 0.5]
    v8, s8 = qtl.mxfp8_quantize(y, swizzle=False)
    assert v8.dtype == ml_dtypes.float8_e4m3fn and s8[0, 0] == 127
    assert list(u8(v8)[0, :4]) == [0x7E, 0xFE, 0x38, 0x30]
    # vmax 896: the scale doubles (code 128) and every element halves.
    v8, s8 = qtl.mxfp8_quantize(y * 2, swizzle=False)
    assert s8[0, 0] == 128 and list(u8(v8)[0, :4]) == [0x7E, 0xFE, 0x38, 0x30]
    assert np.array_equal(qtl.mxfp8_dequantize(v8, s8, swizzle=False), y * 2)


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4", "mxfp8"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_round_trip_and_swizzle(fmt, dtype):
    m, k = 200, 96
    x = (rng.standard_normal((m, k)) * 3).astype(dtype)
    quant = getattr(qtl, fmt + "_quantize")
    deq = getattr(qtl, fmt + "_dequantize")
    lin = quant(x, swizzle=False)
    sw = quant(x)  # swizzle=True is the default
    assert np.array_equal(lin[0], sw[0])
    assert sw[1].shape == (256, (k // (16 if fmt == "nvfp4" else 32) + 3) // 4 * 4)
    assert np.array_equal(u8(qtl.swizzle_blockscale(lin[1])), u8(sw[1]))
    extra = (lin[2],) if fmt == "nvfp4" else ()
    a = deq(lin[0], lin[1], *extra, swizzle=False)
    b = deq(sw[0], sw[1], *extra)
    assert np.array_equal(a, b)
    xf = x.astype(np.float32)
    # E2M1 keeps 1 mantissa bit, E4M3 3; block scales at most double the step.
    tol = {"nvfp4": 0.5, "mxfp4": 0.5, "mxfp8": 0.125}[fmt]
    block = 16 if fmt == "nvfp4" else 32
    vmax = np.abs(xf).reshape(m, k // block, block).max(axis=2).repeat(block, axis=1)
    assert np.all(np.abs(a - xf) <= tol * vmax + 1e-6)
    for out_dtype, np_type in (("float16", np.float16), (np.float16, np.float16), ("bfloat16", ml_dtypes.bfloat16)):
        h = deq(lin[0], lin[1], *extra, swizzle=False, dtype=out_dtype)
        assert h.dtype == np_type and np.array_equal(h, a.astype(np_type))


@pytest.mark.parametrize("swizzle", [False, True])
def test_block_quantize_threads_do_not_change_bytes(swizzle):
    x = rng.standard_normal((1000, 64)).astype(np.float32)
    for fn in (qtl.nvfp4_quantize, qtl.mxfp4_quantize, qtl.mxfp8_quantize):
        want = fn(x, swizzle=swizzle, threads=1)
        for t in (2, 3, 7, None):
            got = fn(x, swizzle=swizzle, threads=t)
            for w, g in zip(want, got):
                assert u8(w).tobytes() == u8(g).tobytes() and w.shape == g.shape
    with pytest.raises(qtl.Error, match="threads"):
        qtl.mxfp4_quantize(x, threads=0)


def test_block_quantize_errors():
    with pytest.raises(qtl.ShapeError, match="block size 16"):
        qtl.nvfp4_quantize(np.zeros((4, 24), np.float32))
    with pytest.raises(qtl.ShapeError, match="block size 32"):
        qtl.mxfp8_quantize(np.zeros((4, 48), np.float32))
    with pytest.raises(qtl.DTypeError):
        qtl.mxfp4_quantize(np.zeros((4, 32), np.float64))
    with pytest.raises(qtl.Error):
        qtl.nvfp4_quantize(np.ones((4, 16), np.float32), 0.0)  # the global scale must be > 0
    v, s, g = qtl.nvfp4_quantize(np.ones((4, 16), np.float32))
    with pytest.raises(qtl.ShapeError):
        qtl.nvfp4_dequantize(v, s, g, swizzle=False)  # swizzled scales read as linear: wrong size
    with pytest.raises(qtl.DTypeError):
        qtl.nvfp4_dequantize(v, s, g, dtype="int8")


# --- prepare_static_weights_for_trtllm_fp4_moe ---------------------------------------------------

def shuffle_rows(m):
    """trtllm-gen's row shuffle (epilogue tile 128: 32-row blocks), as a gather vector."""
    gather = np.empty(m, np.int64)
    for blk in range(m // 32):
        for r in range(32):
            gather[blk * 32 + 8 * (r % 4) + r // 4] = blk * 32 + r
    return gather


def w3w1_rows(m, gated):
    p0 = np.arange(m)
    if gated:
        p0[0::2] = np.arange(m // 2)
        p0[1::2] = m // 2 + np.arange(m // 2)
    return p0[shuffle_rows(m)]


def interleave(s):
    """block_scale_interleave of one [M, K] byte matrix: (M/128, 4, 32, K/4, 4) -> (M/128, K/4, 32, 4, 4)."""
    m, k = s.shape
    return s.reshape(m // 128, 4, 32, k // 4, 4).transpose(0, 3, 2, 1, 4).reshape(m, k)


def oracle(g1w, g1s, g2w, g2s, gated):
    p1 = w3w1_rows(g1w.shape[1], gated)
    p2 = shuffle_rows(g2w.shape[1])
    s1 = np.array([interleave(s[p1]) for s in g1s], np.uint8).reshape(g1s.shape)
    s2 = np.array([interleave(s[p2]) for s in g2s], np.uint8).reshape(g2s.shape)
    return g1w[:, p1], s1, g2w[:, p2], s2


@pytest.mark.parametrize("h,i,e,gated", [(128, 64, 3, True), (256, 128, 2, True), (128, 128, 2, False),
                                         (384, 192, 3, True), (128, 64, 0, True)])
def test_trtllm_fp4_moe_equals_the_formulas(h, i, e, gated):
    r1 = (2 if gated else 1) * i
    g1w = rng.integers(0, 256, (e, r1, h // 2), dtype=np.uint8)
    g1s = rng.integers(0, 256, (e, r1, h // 16), dtype=np.uint8)
    g2w = rng.integers(0, 256, (e, h, i // 2), dtype=np.uint8)
    g2s = rng.integers(0, 256, (e, h, i // 16), dtype=np.uint8)
    got = qtl.prepare_static_weights_for_trtllm_fp4_moe(g1w, g2w, g1s.view(ml_dtypes.float8_e4m3fn), g2s, h, i, e,
                                                        is_gated=gated)
    want = oracle(g1w, g1s, g2w, g2s, gated)
    assert [g.dtype for g in got] == [np.uint8, ml_dtypes.float8_e4m3fn] * 2
    for g, w in zip(got, want):
        assert g.shape == w.shape and u8(g).tobytes() == w.tobytes()
    # The reference reshapes its inputs: flat bytes of the right size are taken too.
    flat = qtl.prepare_static_weights_for_trtllm_fp4_moe(g1w.reshape(-1), g2w.reshape(-1), g1s.reshape(-1),
                                                         g2s.reshape(-1), h, i, e, gated)
    for g, f in zip(got, flat):
        assert u8(g).tobytes() == u8(f).tobytes()


def test_trtllm_fp4_moe_row_vectors():
    """docs/spec/blockscale.md §8.2: the first gather entries of GEMM1 (gated, 128 rows) and GEMM2 (128 rows)."""
    h, i = 128, 64
    g1w = np.repeat(np.arange(128, dtype=np.uint8)[None, :, None], h // 2, axis=2)  # each row tagged by its index
    g2w = np.repeat(np.arange(128, dtype=np.uint8)[None, :, None], i // 2, axis=2)
    g1s = np.zeros((1, 128, h // 16), np.uint8)
    g2s = np.zeros((1, h, i // 16), np.uint8)
    o1, _, o2, _ = qtl.prepare_static_weights_for_trtllm_fp4_moe(g1w, g2w, g1s, g2s, h, i, 1)
    assert list(o1[0, :40, 0]) == [0, 2, 4, 6, 8, 10, 12, 14, 64, 66, 68, 70, 72, 74, 76, 78, 1, 3, 5, 7, 9, 11, 13,
                                   15, 65, 67, 69, 71, 73, 75, 77, 79, 16, 18, 20, 22, 24, 26, 28, 30]
    assert list(o2[0, :32, 0]) == [0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29, 2, 6, 10, 14, 18, 22,
                                   26, 30, 3, 7, 11, 15, 19, 23, 27, 31]


def test_trtllm_fp4_moe_errors():
    z = np.zeros(1 << 16, np.uint8)
    with pytest.raises(qtl.ShapeError, match=r"hidden_size \(96\) must be a positive multiple of 128"):
        qtl.prepare_static_weights_for_trtllm_fp4_moe(z, z, z, z, 96, 64, 1)
    with pytest.raises(qtl.ShapeError, match="multiple of 128 when not gated"):
        qtl.prepare_static_weights_for_trtllm_fp4_moe(z, z, z, z, 128, 64, 1, False)
    with pytest.raises(qtl.ShapeError, match="gemm1_weights"):
        qtl.prepare_static_weights_for_trtllm_fp4_moe(z, z, z, z, 128, 64, 1)
    with pytest.raises(qtl.DTypeError, match="byte type"):
        qtl.prepare_static_weights_for_trtllm_fp4_moe(np.zeros((1, 128, 64), np.float16), z, z, z, 128, 64, 1)


# --- assert_fp8_all_close, update_tensor_inplace, replace_parameter -----------------------------

def test_assert_fp8_all_close():
    a = rng.integers(0, 0x7E, (40, 50), dtype=np.uint8)
    qtl.assert_fp8_all_close(a.view(ml_dtypes.float8_e4m3fn), a.view(ml_dtypes.float8_e4m3fn))
    b = a.copy()
    b[3, 4] ^= 1  # one code one apart in 2000: 0.05 % < 0.5 %
    qtl.assert_fp8_all_close(a.view(ml_dtypes.float8_e4m3fn), b.view(ml_dtypes.float8_e4m3fn))
    qtl.assert_fp8_all_close(a, b)  # numpy uint8: the codes
    b[5, 6] = a[5, 6] + 2 if a[5, 6] < 0x7C else a[5, 6] - 2
    with pytest.raises(AssertionError, match="count_large_diff=1 numel=2000"):
        qtl.assert_fp8_all_close(a, b)
    c = a.copy()
    c[:3] ^= 1  # 150 codes one apart: 7.5 %
    with pytest.raises(AssertionError, match="count_tiny_diff=150"):
        qtl.assert_fp8_all_close(a, c)
    with pytest.raises(AssertionError, match="shapes differ"):
        qtl.assert_fp8_all_close(a, a[:, :10])
    with pytest.raises(AssertionError, match="float8_e4m3fn"):
        qtl.assert_fp8_all_close(a.astype(np.float32), a.astype(np.float32))


def test_update_tensor_inplace_numpy():
    old = np.zeros((2, 3), np.float32)
    ptr = old.ctypes.data
    assert qtl.update_tensor_inplace(old, np.arange(6).reshape(2, 3)) is None
    assert old.ctypes.data == ptr and np.array_equal(old, np.arange(6).reshape(2, 3))
    qtl.update_tensor_inplace(old, np.float32(7))  # broadcasts, as torch's copy_
    assert (old == 7).all()
    with pytest.raises(qtl.UnsupportedError, match="torch.nn.Module"):
        qtl.replace_parameter(object(), "weight", old)


def test_cutedsl_mma_view_aliases_the_swizzled_scales():
    rng = np.random.default_rng(7)
    linear = rng.integers(0, 256, size=(3, 200, 10), dtype=np.uint8)
    swizzled = qtl.swizzle_blockscale(linear)  # [3, 256, 12]
    view = qtl.nvfp4_swizzled_scale_to_cutedsl_mma_view(swizzled)
    assert view.shape == (32, 4, 2, 4, 3, 3)
    assert np.shares_memory(view, swizzled)
    # flashinfer's convert_sf_to_mma_layout: view(E, m_tiles, k_tiles, 32, 4, 4).permute(3, 4, 1, 5, 2, 0)
    assert np.array_equal(view, swizzled.reshape(3, 2, 3, 32, 4, 4).transpose(3, 4, 1, 5, 2, 0))
    b, m, k = np.meshgrid(np.arange(3), np.arange(200), np.arange(10), indexing="ij")
    assert np.array_equal(view[m % 32, (m % 128) // 32, m // 128, k % 4, k // 4, b], linear)
    view[5, 2, 1, 3, 1, 0] = 7  # a write through the view lands in the buffer: row 128 + 2 * 32 + 5, K-block 4 + 3
    assert qtl.unswizzle_blockscale(swizzled, 200, 10)[0, 197, 7] == 7


def test_cutedsl_mma_view_errors():
    with pytest.raises(qtl.ShapeError, match="E, M_padded, K_sf_padded"):
        qtl.nvfp4_swizzled_scale_to_cutedsl_mma_view(np.zeros((128, 4), np.uint8))
    with pytest.raises(qtl.ShapeError, match="whole 128x4 tiles"):
        qtl.nvfp4_swizzled_scale_to_cutedsl_mma_view(np.zeros((1, 120, 4), np.uint8))
    with pytest.raises(qtl.DTypeError, match="1-byte"):
        qtl.nvfp4_swizzled_scale_to_cutedsl_mma_view(np.zeros((1, 128, 4), np.uint16))
    with pytest.raises(qtl.DTypeError, match="not contiguous"):
        qtl.nvfp4_swizzled_scale_to_cutedsl_mma_view(np.zeros((1, 128, 8), np.uint8)[:, :, ::2])
