"""The Marlin layouts and the load-time converters through the Python API beyond the golden cases:
round trips (unmarlin(marlin(x)) == x), cross-checks between the peers' entry points, the thread
count not changing a byte, strided inputs, and the errors each binding raises (the qtl.Error class
and the argument named)."""

import ml_dtypes
import numpy as np
import pytest

import qtl

rng = np.random.default_rng(1919)


def u8(a):
    a = np.asarray(a)
    return (a.reshape(1) if a.ndim == 0 else a).view(np.uint8)
AWQ_ORDER = {4: [0, 2, 4, 6, 1, 3, 5, 7], 8: [0, 2, 1, 3]}


def codes(k, n, bits):
    return rng.integers(0, 1 << bits, size=(k, n), dtype=np.int32)


def awq_pack(q, bits):
    """AWQ's qweight/qzeros of codes [R, N]: slot i of word c holds column pf*c + AWQ_ORDER[i]."""
    pf = 32 // bits
    r, n = q.shape
    u = q.astype(np.uint32).reshape(r, n // pf, pf)[:, :, AWQ_ORDER[bits]]
    words = np.zeros((r, n // pf), np.uint32)
    for i in range(pf):
        words |= u[:, :, i] << np.uint32(bits * i)
    return words.view(np.int32)


@pytest.mark.parametrize("bits,a8,act_order", [(4, False, False), (4, False, True), (8, False, False),
                                               (8, False, True), (4, True, False), (8, True, False)])
def test_gptq_round_trip(bits, a8, act_order):
    k, n = 128, 192
    q = codes(k, n, bits)
    qweight = qtl.pack_rows(q, bits, k, n)
    perm = rng.permutation(k).astype(np.int32) if act_order else np.empty(0, np.int32)
    m = qtl.gptq_marlin_repack(qweight, perm, k, n, bits, is_a_8bit=a8)
    assert m.shape == (k // 16, n * 16 // (32 // bits)) and m.dtype == np.int32
    assert np.array_equal(qtl.unmarlin_gptq(m, perm, k, n, bits, is_a_8bit=a8), qweight)
    if not act_order:  # None is the empty perm
        assert np.array_equal(qtl.gptq_marlin_repack(qweight, None, k, n, bits, is_a_8bit=a8), m)


@pytest.mark.parametrize("bits,a8", [(4, False), (8, False), (4, True), (8, True)])
def test_awq_round_trip_and_gptq_agreement(bits, a8):
    k, n = 64, 128
    q = codes(k, n, bits)
    awq = awq_pack(q, bits)
    m = qtl.awq_marlin_repack(awq, k, n, bits, is_a_8bit=a8)
    assert np.array_equal(qtl.unmarlin_awq(m, k, n, bits, is_a_8bit=a8), awq)
    # The same codes through GPTQ's packing land in the same Marlin words (docs/spec/marlin.md §3).
    assert np.array_equal(qtl.gptq_marlin_repack(qtl.pack_rows(q, bits, k, n), None, k, n, bits, is_a_8bit=a8), m)


def test_repack_takes_strided_input():
    k, n = 64, 128
    big = qtl.pack_rows(codes(k, 2 * n, 4), 4, k, 2 * n)
    view = big[:, ::2]
    assert not view.flags.c_contiguous
    want = qtl.gptq_marlin_repack(np.ascontiguousarray(view), None, k, n, 4)
    assert np.array_equal(qtl.gptq_marlin_repack(view, None, k, n, 4), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("group_size,a8", [(32, False), (-1, False), (128, False), (32, True)])
def test_scales_round_trip(dtype, group_size, a8):
    k, n = 128, 128
    rows = 1 if group_size == -1 else k // group_size
    s = rng.standard_normal((rows, n)).astype(dtype)
    p = qtl.marlin_permute_scales(s, k, n, group_size, is_a_8bit=a8)
    assert p.dtype == s.dtype and p.shape == s.shape
    assert np.array_equal(qtl.unmarlin_permute_scales(p, k, n, group_size, is_a_8bit=a8).view(np.uint8),
                          s.view(np.uint8))
    assert sorted(p[0].view(np.uint8).tobytes()) == sorted(s[0].view(np.uint8).tobytes())  # a permutation


@pytest.mark.parametrize("bits,a8", [(4, False), (8, False), (4, True), (8, True)])
def test_zero_points_round_trip_and_awq_agreement(bits, a8):
    g, n = 4, 128
    zp = codes(g, n, bits)
    m = qtl.marlin_zero_points(zp, g, n, bits, is_a_8bit=a8)
    assert m.shape == (g, n // (32 // bits))
    assert np.array_equal(qtl.awq_to_marlin_zero_points(awq_pack(zp, bits), g, n, bits, is_a_8bit=a8), m)
    assert np.array_equal(qtl.unmarlin_zero_points(m, g, n, bits, is_a_8bit=a8), zp)


def test_sort_g_idx_is_stable():
    g_idx = rng.integers(0, 4, size=96).astype(np.int32)
    sorted_g, idx = qtl.marlin_sort_g_idx(g_idx)
    assert np.array_equal(idx, np.argsort(g_idx, kind="stable").astype(np.int32))
    assert np.array_equal(sorted_g, g_idx[idx]) and idx.dtype == np.int32


def test_fp8_prepare_channel_equals_tensor_broadcast():
    n, k = 64, 32
    w = rng.integers(0, 256, size=(n, k), dtype=np.uint8)
    w[(w & 0x7F) == 0x7F] = 0  # no NaN codes
    one = qtl.marlin_fp8_prepare(w, np.array(0.5, np.float32), "float16")
    each = qtl.marlin_fp8_prepare(w.view(ml_dtypes.float8_e4m3fn), np.full(n, 0.5, np.float32), np.float16)
    assert np.array_equal(one[0], each[0]) and np.array_equal(one[1], each[1])
    assert one[1].dtype == np.float16 and np.all(one[1] == 128.0)  # 0.5 * 2^8: vLLM's fold
    unfolded = qtl.marlin_fp8_prepare(w, np.array(0.5, np.float32), "float16", fold="none")[1]
    assert np.all(unfolded == 0.5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fp8_prepare_block_scales(dtype):
    # Block scales [ceil(N/BN), K/BK] become [K/BK, N] (scale (g, n) = s[n // BN, g]), then the
    # grouped permutation and vLLM's fold (x 2^8 in fp16, x 2^120 in bf16); size_k_first is the
    # transposed checkpoint and gives the same bytes.
    n, k, bn, bk = 128, 64, 48, 32
    w = rng.integers(0, 256, size=(n, k), dtype=np.uint8)
    w[(w & 0x7F) == 0x7F] = 0
    s = np.ldexp(np.float32(1), rng.integers(-8, -1, size=(-(-n // bn), k // bk))).astype(np.float32)
    mw, ms = qtl.marlin_fp8_prepare(w, s, dtype, block_size=(bn, bk))
    groups = s[np.arange(n) // bn, :].T
    np_dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    fold = np.float32(256.0 if dtype == "float16" else 2.0 ** 120)
    want = qtl.marlin_permute_scales((groups * fold).astype(np_dtype), k, n, bk)
    assert ms.dtype == np_dtype and ms.shape == (k // bk, n)
    assert ms.tobytes() == want.tobytes()
    assert np.array_equal(mw, qtl.gptq_marlin_repack(qtl.pack_rows(w.T.astype(np.int32), 8, k, n), None, k, n, 8))
    tw, ts = qtl.marlin_fp8_prepare(np.ascontiguousarray(w.T), np.ascontiguousarray(s.T), dtype, size_k_first=True,
                                    block_size=(bn, bk))
    assert np.array_equal(tw, mw) and ts.tobytes() == ms.tobytes()


def fp8_block(n, k, block=(128, 128), experts=None):
    """Random finite e4m3 codes [.., N, K] and power-of-two-ish block scales."""
    shape = (n, k) if experts is None else (experts, n, k)
    q = rng.integers(0, 256, size=shape, dtype=np.uint8)
    q[(q & 0x7F) == 0x7F] = 0
    nb, kb = -(-n // block[0]), -(-k // block[1])
    s_shape = (nb, kb) if experts is None else (experts, nb, kb)
    s = (rng.random(s_shape, dtype=np.float32) * 0.01 + 1e-3).astype(np.float32)
    return q.view(ml_dtypes.float8_e4m3fn), s


def test_threads_do_not_change_bytes():
    q, s = fp8_block(300, 256)
    for f in (lambda t: qtl.block_quant_dequant(q, s, (128, 128), "bfloat16", threads=t),
              lambda t: qtl.fp8_block_to_mxfp4(q, s, threads=t),
              lambda t: qtl.fp8_block_to_nvfp4(q, s, threads=t),
              lambda t: qtl.requant_weight_ue8m0(q, s, threads=t)):
        one, many = f(1), f(3)
        one, many = (one,) if not isinstance(one, tuple) else one, (many,) if not isinstance(many, tuple) else many
        for a, b in zip(one, many):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    x = rng.standard_normal((300, 260)).astype(np.float32)
    for a, b in zip(qtl.per_block_cast_to_fp8(x, threads=1), qtl.per_block_cast_to_fp8(x, threads=None)):
        assert a.tobytes() == b.tobytes()


def test_cast_then_dequant_and_requant_fixed_point():
    x = rng.standard_normal((256, 384)).astype(np.float32)
    q, sf = qtl.per_block_cast_to_fp8(x, [128, 128], True, ue8m0_rule="bits")  # a list block size too
    assert q.dtype == ml_dtypes.float8_e4m3fn and sf.shape == (2, 3)
    assert np.all(np.frexp(sf)[0] == 0.5)  # powers of two
    d = qtl.block_quant_dequant(q, sf, (128, 128), "float32")
    # The dequant is q times its block scale, exactly.
    want = q.astype(np.float32) * np.repeat(np.repeat(sf, 128, 0), 128, 1)
    assert np.array_equal(d, want)
    for recipe in ("sglang", "vllm", "sglang-legacy"):
        r2 = qtl.requant_weight_ue8m0(q, sf, recipe=recipe, canonical=True)
        r3 = qtl.requant_weight_ue8m0(*r2, recipe=recipe)
        assert r3[0].tobytes() == r2[0].tobytes() and r3[1].tobytes() == r2[1].tobytes(), recipe


@pytest.mark.parametrize("mn,experts", [(130, None), (256, 3), (1, None)])
def test_deepgemm_pack_round_trip(mn, experts):
    kb = 5
    rows = -(-mn // 128)
    shape = (rows, kb) if experts is None else (experts, rows, kb)
    sf = np.ldexp(np.float32(1), rng.integers(-20, 20, size=shape)).astype(np.float32)
    packed = qtl.deepgemm_pack_ue8m0(sf, mn)
    assert packed.dtype == np.int32 and packed.shape[-2:] == (2, -(-mn // 4) * 4)
    back = qtl.deepgemm_unpack_ue8m0(packed, kb)
    assert np.array_equal(back, sf)


# ---- errors -------------------------------------------------------------------------------------

def test_marlin_errors():
    k, n = 64, 128
    qweight = qtl.pack_rows(codes(k, n, 4), 4, k, n)
    with pytest.raises(qtl.UnsupportedError, match="num_bits"):
        qtl.gptq_marlin_repack(qweight, None, k, n, 2)
    with pytest.raises(qtl.ShapeError, match="b_q_weight"):
        qtl.gptq_marlin_repack(qweight, None, 2 * k, n, 4)
    with pytest.raises(qtl.DTypeError, match="b_q_weight"):
        qtl.gptq_marlin_repack(qweight.astype(np.float32), None, k, n, 4)
    with pytest.raises(TypeError):  # DTypeError is a TypeError too
        qtl.gptq_marlin_repack(qweight.astype(np.int64), None, k, n, 4)
    with pytest.raises(qtl.ShapeError, match="N = 96"):
        qtl.gptq_marlin_repack(qweight[:, :96], None, k, 96, 4)
    with pytest.raises(qtl.ShapeError, match="K = 24"):
        qtl.gptq_marlin_repack(qtl.pack_rows(codes(24, n, 4), 4, 24, n), None, 24, n, 4)
    with pytest.raises(qtl.ShapeError, match="perm"):
        qtl.gptq_marlin_repack(qweight, np.arange(k - 1, dtype=np.int32), k, n, 4)
    with pytest.raises(qtl.InvalidValueError):
        qtl.gptq_marlin_repack(qweight, np.zeros(k, np.int32), k, n, 4)  # not a permutation
    with pytest.raises(qtl.UnsupportedError):
        qtl.gptq_marlin_repack(qweight, np.arange(k, dtype=np.int32), k, n, 4, is_a_8bit=True)
    m = qtl.gptq_marlin_repack(qweight, None, k, n, 4)
    with pytest.raises(qtl.ShapeError, match="contiguous"):
        qtl.unmarlin_gptq(np.asfortranarray(m), None, k, n, 4)
    with pytest.raises(qtl.ShapeError, match="marlin_q_w"):
        qtl.unmarlin_awq(m, k, 2 * n, 4)
    with pytest.raises(qtl.ShapeError, match="size_n"):
        qtl.awq_marlin_repack(qweight, k, 100, 4)
    s = np.ones((2, n), np.float16)
    with pytest.raises(qtl.DTypeError, match="s"):
        qtl.marlin_permute_scales(s.astype(np.int32), k, n, 32)
    with pytest.raises(qtl.ShapeError, match="columns"):
        qtl.marlin_permute_scales(s, k, 2 * n, 32)
    with pytest.raises(qtl.ShapeError, match="rows"):
        qtl.marlin_permute_scales(s, k, n, 16)
    with pytest.raises(qtl.InvalidValueError, match="group_size"):
        qtl.marlin_permute_scales(s, k, n, 0)
    with pytest.raises(qtl.ShapeError, match="multiple of 64"):
        qtl.marlin_permute_scales(np.ones((2, 96), np.float16), k, 96, 32)
    with pytest.raises(qtl.InvalidValueError):
        qtl.marlin_zero_points(np.full((2, n), 16, np.int32), 2, n, 4)  # a code outside 4 bits
    with pytest.raises(qtl.ShapeError, match="zp"):
        qtl.marlin_zero_points(np.zeros((2, n), np.int32), 3, n, 4)
    with pytest.raises(qtl.ShapeError, match="g_idx"):
        qtl.marlin_sort_g_idx(np.zeros((2, 2), np.int32))


def test_fp_prepare_errors():
    w8 = np.zeros((64, 32), np.uint8)
    with pytest.raises(qtl.DTypeError, match="dtype"):
        qtl.marlin_fp8_prepare(w8, np.float32(1), "float32")
    with pytest.raises(qtl.InvalidValueError, match="fold"):
        qtl.marlin_fp8_prepare(w8, np.array(1, np.float32), "float16", fold="sglang")
    with pytest.raises(qtl.ShapeError, match="weight_scale"):
        qtl.marlin_fp8_prepare(w8, np.ones(3, np.float32), "float16")
    with pytest.raises(qtl.ShapeError, match="weight_scale"):
        qtl.marlin_fp8_prepare(w8, np.ones((2, 1), np.float32), "bfloat16", block_size=(128, 16))
    with pytest.raises(qtl.DTypeError, match="weight"):
        qtl.marlin_fp8_prepare(w8.astype(np.float32), np.array(1, np.float32), "float16")
    w4 = np.zeros((64, 16), np.uint8)
    with pytest.raises(qtl.ShapeError, match="weight_scale"):
        qtl.marlin_nvfp4_prepare(w4, np.zeros((64, 3), np.uint8), np.float32(1), "float16")
    with pytest.raises(qtl.ShapeError, match="group of 32"):
        qtl.marlin_mxfp4_prepare(w4[:, :8], np.zeros((64, 1), np.uint8), "bfloat16")
    # fp16 parameters would turn E8M0 byte 20 (2^-107) into 0: refused.
    with pytest.raises(qtl.InvalidValueError, match="fp16"):
        qtl.marlin_mxfp4_prepare(w4, np.full((64, 1), 20, np.uint8), "float16")


def test_convert_errors():
    q, s = fp8_block(256, 256)
    with pytest.raises(qtl.ShapeError, match="x_s"):
        qtl.block_quant_dequant(q, s[:1], (128, 128), "bfloat16")
    with pytest.raises(qtl.DTypeError, match="dtype"):
        qtl.block_quant_dequant(q, s, (128, 128), "float16")
    with pytest.raises(qtl.DTypeError, match="x_q_block"):
        qtl.block_quant_dequant(q.astype(np.float32), s, (128, 128), "float32")
    with pytest.raises(qtl.InvalidValueError, match="block size"):
        qtl.block_quant_dequant(q, s, (0, 128), "float32")
    with pytest.raises(qtl.ShapeError, match="x_q_block"):
        qtl.block_quant_dequant(q.reshape(-1), s, (128, 128), "float32")
    with pytest.raises(qtl.UnsupportedError, match="128x128"):
        qtl.requant_weight_ue8m0(q, s, (64, 64))
    with pytest.raises(qtl.InvalidValueError, match="recipe"):
        qtl.requant_weight_ue8m0(q, s, recipe="deepgemm")
    with pytest.raises(qtl.InvalidValueError, match="threads"):
        qtl.requant_weight_ue8m0(q, s, threads=0)
    with pytest.raises(qtl.InvalidValueError, match="power of two"):
        qtl.deepgemm_pack_ue8m0(np.full((1, 2), 0.75, np.float32), 128)
    with pytest.raises(qtl.ShapeError, match="block rows"):
        qtl.deepgemm_pack_ue8m0(np.ones((1, 2), np.float32), 130)
    with pytest.raises(qtl.ShapeError, match="kb"):
        qtl.deepgemm_unpack_ue8m0(np.zeros((2, 128), np.int32), 9)
    q48, s48 = fp8_block(64, 48)
    with pytest.raises(qtl.ShapeError, match="32"):
        qtl.fp8_block_to_mxfp4(q48, s48)
    with pytest.raises(qtl.InvalidValueError, match="global scale"):
        qtl.fp8_block_to_nvfp4(q48, s48, global_scale=np.array(0, np.float32))
    with pytest.raises(qtl.InvalidValueError, match="ue8m0_rule"):
        qtl.per_block_cast_to_fp8(np.ones((4, 4), np.float32), use_ue8m0=True, ue8m0_rule="ceil")
    with pytest.raises(qtl.DTypeError, match="x"):
        qtl.per_block_cast_to_fp8(np.ones((4, 4), np.int32))


def test_one_spelling_of_names_and_dtypes():
    """Every function takes the same names: a recipe with '-' or '_', a float dtype as a name, an
    alias or a dtype object, and refuses the others naming the accepted ones."""
    q = rng.integers(0, 0x7F, size=(128, 256), dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    s = rng.uniform(0.001, 1, size=(1, 2)).astype(np.float32)
    legacy = qtl.requant_weight_ue8m0(q, s, recipe="sglang-legacy")
    for a, b in zip(legacy, qtl.requant_weight_ue8m0(q, s, recipe="sglang_legacy")):
        assert np.array_equal(u8(a), u8(b))
    with pytest.raises(qtl.InvalidValueError, match=r"\{sglang, sglang-legacy, vllm\}"):
        qtl.requant_weight_ue8m0(q, s, recipe="sglang legacy")
    ref = u8(qtl.block_quant_dequant(q, s, (128, 128), "bfloat16"))
    for dt in ("bf16", ml_dtypes.bfloat16, np.dtype(ml_dtypes.bfloat16)):
        assert np.array_equal(u8(qtl.block_quant_dequant(q, s, (128, 128), dt)), ref)
    with pytest.raises(qtl.DTypeError, match="float32, bfloat16"):
        qtl.block_quant_dequant(q, s, (128, 128), "half")
    x = rng.standard_normal((4, 32)).astype(np.float32)
    v, sc = qtl.mxfp4_quantize(x, swizzle=False)
    ref = u8(qtl.mxfp4_dequantize(v, sc, swizzle=False, dtype="bfloat16"))
    for dt in ("bf16", ml_dtypes.bfloat16):
        assert np.array_equal(u8(qtl.mxfp4_dequantize(v, sc, swizzle=False, dtype=dt)), ref)
    with pytest.raises(qtl.DTypeError, match="float32, float16, bfloat16"):
        qtl.mxfp4_dequantize(v, sc, swizzle=False, dtype="int8")
