"""vLLM's FlashInfer / CUTLASS FP4 MoE preparations through the Python API under vLLM's names and
arguments (the bytes: test_golden.py's cases recorded from vLLM): the keyword forms, dtypes and
shapes kept, new arrays returned, and the errors."""

import ml_dtypes
import numpy as np
import pytest

import qtl

rng = np.random.default_rng(34)


def layer(e, r1, h, i):
    b = lambda *s: rng.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
    return b(e, r1, h // 2), b(e, r1, h // 16).view(ml_dtypes.float8_e4m3fn), b(e, h, i // 2), \
        b(e, h, i // 16).view(ml_dtypes.float8_e4m3fn)


def test_prepare_trtllm_takes_vllms_keyword_and_sglangs():
    g1w, g1s, g2w, g2s = layer(2, 128, 128, 128)
    args = (g1w, g2w, g1s, g2s, 128, 128, 2)
    vllm = qtl.prepare_static_weights_for_trtllm_fp4_moe(*args, is_gated_activation=False)
    sglang = qtl.prepare_static_weights_for_trtllm_fp4_moe(*args, is_gated=False)
    positional = qtl.prepare_static_weights_for_trtllm_fp4_moe(*args, False)
    for a, b, c in zip(vllm, sglang, positional):
        assert a.tobytes() == b.tobytes() == c.tobytes()
    g1w, g1s, g2w, g2s = layer(2, 256, 128, 128)
    gated = qtl.prepare_static_weights_for_trtllm_fp4_moe(g1w, g2w, g1s, g2s, 128, 128, 2, is_gated_activation=True)
    assert gated[0].shape == (2, 256, 64)


def test_align_fp4_moe_weights_for_fi_pads_each_projection():
    w13, w13s, w2, w2s = layer(2, 2 * 176, 64, 176)
    o13, o13s, o2, o2s, ip = qtl.align_fp4_moe_weights_for_fi(w13, w13s, w2, w2s, True, 64)
    assert ip == 192
    assert (o13.shape, o13s.shape, o2.shape, o2s.shape) == ((2, 384, 32), (2, 384, 4), (2, 64, 96), (2, 64, 12))
    assert o13.dtype == np.uint8 and o13s.dtype == ml_dtypes.float8_e4m3fn
    assert (o13[:, :176] == w13[:, :176]).all() and (o13[:, 192:368] == w13[:, 176:]).all()
    assert not o13[:, 176:192].any() and not o13[:, 368:].any()
    assert (o2[:, :, :88] == w2).all() and not o2[:, :, 88:].any()


def test_aligned_layers_come_back_as_copies():
    w13, w13s, w2, w2s = layer(1, 2 * 128, 256, 128)
    out = qtl.align_fp4_moe_weights_for_fi(w13, w13s, w2, w2s, True)
    assert out[4] == 128
    assert out[0].tobytes() == w13.tobytes() and not np.shares_memory(out[0], w13)
    hid = qtl.align_fp4_moe_hidden_dim_for_fi(w13, w13s, w2, w2s)
    assert hid[4] == 256 and hid[2].tobytes() == w2.tobytes()


def test_pad_nvfp4_weight_for_cutlass():
    w = rng.integers(0, 256, (50, 7), dtype=np.uint8)
    out, pad = qtl.pad_nvfp4_weight_for_cutlass(w, 16)
    assert pad == 1 and out.shape == (64, 8)
    assert (out[:50, :7] == w).all() and not out[50:].any() and not out[:, 7:].any()
    assert qtl.pad_nvfp4_weight_for_cutlass(w)[0].shape == (64, 16)  # alignment 32: 14 -> 32 columns


def test_errors():
    w13, w13s, w2, w2s = layer(1, 96, 32, 48)
    with pytest.raises(qtl.ShapeError, match="input w13 has shape"):
        qtl.align_fp4_moe_weights_for_fi(w13, w13s, w2, w2s, False)  # w13 has 2I rows
    with pytest.raises(qtl.InvalidValueError, match="must be positive"):
        qtl.align_fp4_moe_hidden_dim_for_fi(w13, w13s, w2, w2s, 0)
    with pytest.raises(qtl.DTypeError):
        qtl.align_fp4_moe_weights_for_fi(w13.astype(np.float32), w13s, w2, w2s, True)
    with pytest.raises(qtl.ShapeError):
        qtl.pad_nvfp4_weight_for_cutlass(w13)  # rank 3


def test_cutedsl_row_orders():
    x = np.arange(2 * 8 * 3, dtype=np.float32).reshape(2, 8, 3)
    got = qtl.interleave_linear_and_gate(x, 2, 1)
    assert got.dtype == np.float32 and got.shape == x.shape
    assert (got[:, :, 0] == x[:, [0, 1, 4, 5, 2, 3, 6, 7], 0]).all()

    class MoEActivation:  # vLLM's enum, by its member's name
        name = "SWIGLUOAI"

    w13, w13s = layer(1, 6, 32, 16)[:2]
    w, s = qtl.reorder_w13_to_w31_for_flashinfer_cutedsl(MoEActivation(), w13, w13s)
    assert (w[0] == w13[0, [1, 3, 5, 0, 2, 4]]).all() and s.dtype == ml_dtypes.float8_e4m3fn
    w, _ = qtl.reorder_w13_to_w31_for_flashinfer_cutedsl("silu", w13, w13s)
    assert (w[0] == w13[0, [3, 4, 5, 0, 1, 2]]).all()
    with pytest.raises(qtl.ShapeError, match="divisible by 128"):
        qtl.interleave_linear_and_gate(x, 64, 1)
    with pytest.raises(qtl.DTypeError):
        qtl.reorder_w13_to_w31_for_flashinfer_cutedsl(3, w13, w13s)


def mxint4_layer(e, h, i, dtype):
    b = lambda *s: rng.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
    s = lambda *sh: rng.random(sh, dtype=np.float32).astype(ml_dtypes.bfloat16)  # noqa: E731
    return b(e, 2 * i, h // 2).view(dtype), s(e, 2 * i, h // 32), b(e, h, i // 2).view(dtype), s(e, h, i // 32)


def test_prepare_trtllm_mxint4_moe_takes_int32_words_or_int4_bytes():
    g1w, g1s, g2w, g2s = mxint4_layer(2, 512, 256, np.int32)
    kept = g1w.copy()
    out = qtl.prepare_static_weights_for_trtllm_mxint4_moe(g1w, g1s, g2w, g2s)
    assert sorted(out) == ["gemm1_scales", "gemm1_weights", "gemm2_scales", "gemm2_weights"]
    assert out["gemm1_weights"].shape == (2, 2, 512, 128) and out["gemm1_weights"].dtype == np.uint8
    assert out["gemm2_weights"].shape == (2, 1, 512, 128)
    assert out["gemm1_scales"].shape == (2, 512 * 16) and out["gemm1_scales"].dtype == ml_dtypes.bfloat16
    assert out["gemm2_scales"].shape == (2, 512 * 8)
    # uint4b8 words become signed int4: the same layout as the bytes with every nibble XOR 8
    as_bytes = qtl.prepare_static_weights_for_trtllm_mxint4_moe(g1w.view(np.uint8) ^ 0x88, g1s,
                                                                g2w.view(np.uint8) ^ 0x88, g2s)
    for k in out:
        assert out[k].tobytes() == as_bytes[k].tobytes()
    assert (g1w == kept).all()  # the engine converts its int32 inputs in place; QTL leaves them alone


def test_prepare_trtllm_mxint4_moe_errors():
    g1w, g1s, g2w, g2s = mxint4_layer(1, 256, 256, np.int32)
    with pytest.raises(qtl.DTypeError, match="both are uint4b8 words"):
        qtl.prepare_static_weights_for_trtllm_mxint4_moe(g1w, g1s, g2w.view(np.uint8), g2s)
    with pytest.raises(qtl.DTypeError):
        qtl.prepare_static_weights_for_trtllm_mxint4_moe(g1w, g1s.view(np.uint16), g2w, g2s)
    h1w, h1s, h2w, h2s = mxint4_layer(1, 128, 256, np.uint8)
    with pytest.raises(qtl.ShapeError, match="multiples of 256"):
        qtl.prepare_static_weights_for_trtllm_mxint4_moe(h1w, h1s, h2w, h2s)
    with pytest.raises(qtl.ShapeError, match="gemm2_scales"):
        qtl.prepare_static_weights_for_trtllm_mxint4_moe(g1w, g1s, g2w, g2s[:, :128])


def test_fp8_bf16_mxfp8_layouts_keep_dtypes_and_take_the_engines_shapes():
    b = lambda *s: rng.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
    w13, w2 = b(2, 256, 256).view(ml_dtypes.float8_e4m3fn), b(2, 256, 128).view(ml_dtypes.float8_e4m3fn)
    o13, o2 = qtl.shuffle_deepseek_fp8_moe_weights(w13, w2)
    assert (o13.shape, o2.shape) == ((2, 2, 256, 128), (2, 1, 256, 128)) and o13.dtype == ml_dtypes.float8_e4m3fn
    r1, r2 = qtl.rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(w13, w2, is_gated_activation=True)
    assert r1.shape == w13.shape and r2.shape == w2.shape
    h13 = rng.random((2, 128, 128), dtype=np.float32).astype(ml_dtypes.bfloat16)
    h2 = rng.random((2, 128, 64), dtype=np.float32).astype(ml_dtypes.bfloat16)
    c13, c2 = qtl.convert_moe_weights_to_flashinfer_trtllm_block_layout({}, h13, h2)
    assert (c13.shape, c2.shape) == ((2, 2, 128, 64), (2, 1, 128, 64)) and c13.dtype == ml_dtypes.bfloat16
    # an even row of W13's block 0 is the shuffled gated-interleaved [w1; w3] row: the first is w3's row 0
    assert c13[0, 0, 0].tobytes() == h13[0, 64, :64].tobytes()
    m = qtl.shuffle_mxfp8_moe_weights(w13, w2.reshape(2, 128, 256), b(2, 256, 8), b(2, 128, 8), True)
    assert [x.shape for x in m] == [(2, 256, 256), (2, 128, 256), (2, 256, 8), (2, 128, 8)]
    with pytest.raises(qtl.ShapeError, match="multiple of 16"):
        qtl.shuffle_deepseek_fp8_moe_weights(b(1, 40, 128), b(1, 32, 128))
    with pytest.raises(qtl.DTypeError):
        qtl.convert_moe_weights_to_flashinfer_trtllm_block_layout(None, w13, w2)
    with pytest.raises(qtl.ShapeError, match="multiple of 128"):
        qtl.shuffle_mxfp8_moe_weights(b(1, 64, 128), b(1, 128, 128), b(1, 64, 4), b(1, 128, 4), True)


def test_trtllm_layout_inverses_round_trip():
    b = lambda *s: rng.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
    w13, w2 = b(2, 64, 256).view(ml_dtypes.float8_e4m3fn), b(2, 32, 128).view(ml_dtypes.float8_e4m3fn)
    back = qtl.unshuffle_deepseek_fp8_moe_weights(*qtl.shuffle_deepseek_fp8_moe_weights(w13, w2))
    assert back[0].dtype == ml_dtypes.float8_e4m3fn and back[0].tobytes() == w13.tobytes()
    assert back[1].shape == w2.shape and back[1].tobytes() == w2.tobytes()
    h13 = rng.random((2, 128, 128), dtype=np.float32).astype(ml_dtypes.bfloat16)
    h2 = rng.random((2, 64, 256), dtype=np.float32).astype(ml_dtypes.bfloat16)
    for gated in (True, False):
        r = qtl.rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(w13, w2, gated)
        back = qtl.unrotate_weights_for_fi_trtllm_fp8_per_tensor_moe(*r, is_gated_activation=gated)
        assert back[0].tobytes() == w13.tobytes() and back[1].tobytes() == w2.tobytes()
        c = qtl.convert_moe_weights_to_flashinfer_trtllm_block_layout(None, h13, h2, gated)
        back = qtl.convert_moe_weights_from_flashinfer_trtllm_block_layout(*c, is_gated_act_gemm=gated)
        assert back[0].dtype == ml_dtypes.bfloat16 and back[0].shape == h13.shape
        assert back[0].tobytes() == h13.tobytes() and back[1].tobytes() == h2.tobytes()
    mx = (b(2, 256, 128), b(2, 128, 128), b(2, 256, 4), b(2, 128, 4))  # w13, w2, their E8M0 scales
    for gated in (True, False):
        back = qtl.unshuffle_mxfp8_moe_weights(*qtl.shuffle_mxfp8_moe_weights(*mx, gated), gated)
        assert all(x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(back, mx))
    for dtype in (np.int32, np.uint8):
        layer = mxint4_layer(2, 512, 256, dtype)
        prepared = qtl.prepare_static_weights_for_trtllm_mxint4_moe(*layer)
        keys = ["gemm1_weights", "gemm1_scales", "gemm2_weights", "gemm2_scales"]
        back = qtl.unprepare_static_weights_for_trtllm_mxint4_moe(*(prepared[k] for k in keys),
                                                                  uint4b8=dtype == np.int32)
        for k, x in zip(keys, layer):
            assert back[k].dtype == x.dtype and back[k].shape == x.shape and back[k].tobytes() == x.tobytes()


def test_trtllm_layout_inverses_refuse_what_no_forward_layout_gives():
    b = lambda *s: rng.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
    with pytest.raises(qtl.ShapeError, match=r"the block layout is \[E, K/128, R, 128\]"):
        qtl.unshuffle_deepseek_fp8_moe_weights(b(1, 2, 32, 64), b(1, 1, 32, 128))
    with pytest.raises(qtl.ShapeError, match="multiple of 16"):
        qtl.unshuffle_deepseek_fp8_moe_weights(b(1, 2, 40, 128), b(1, 1, 32, 128))
    with pytest.raises(qtl.ShapeError, match="expected 4"):
        qtl.convert_moe_weights_from_flashinfer_trtllm_block_layout(
            rng.random((1, 64, 64), dtype=np.float32).astype(ml_dtypes.bfloat16),
            rng.random((1, 64, 64), dtype=np.float32).astype(ml_dtypes.bfloat16))
    with pytest.raises(qtl.ShapeError, match="multiple of 32"):
        qtl.unrotate_weights_for_fi_trtllm_fp8_per_tensor_moe(b(1, 48, 64), b(1, 32, 64), False)
    prepared = qtl.prepare_static_weights_for_trtllm_mxint4_moe(*mxint4_layer(1, 256, 256, np.uint8))
    g1w, g1s, g2w, g2s = (prepared[k] for k in ["gemm1_weights", "gemm1_scales", "gemm2_weights", "gemm2_scales"])
    with pytest.raises(qtl.ShapeError, match=r"gemm1_scales has shape \[1, 2048\], expected \[1, 4096\]"):
        qtl.unprepare_static_weights_for_trtllm_mxint4_moe(g1w, g1s[:, :2048], g2w, g2s)
    with pytest.raises(qtl.ShapeError, match="multiples of 256"):
        qtl.unprepare_static_weights_for_trtllm_mxint4_moe(g1w[:, :, :256], g1s, g2w, g2s)
    with pytest.raises(qtl.DTypeError):
        qtl.unprepare_static_weights_for_trtllm_mxint4_moe(g1w.view(np.int8), g1s, g2w, g2s)
