"""vLLM's scaled_quantize, scaled_dequantize and group_broadcast through the Python API: the argument
names and defaults, the GroupShape tuples, the dtypes returned (fnuz codes as ml_dtypes'
float8_e4m3fnuz), the -1 group shapes that vLLM's own scaled_dequantize asserts on, and the errors
(the golden cases recorded from vLLM itself are in test_golden.py)."""

import ml_dtypes
import numpy as np
import pytest

import qtl


def sample(m, n, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal([m, n]) * np.exp2(rng.integers(-8, 9, [m, 1]))).astype(np.float32)


@pytest.mark.parametrize("group", [(-1, -1), (1, -1), (-1, 1), (128, 128), (1, 128)])
def test_round_trip_and_shapes(group):
    x = sample(256, 384, 1)
    x_q, x_s = qtl.scaled_quantize(x, group, "float8_e4m3fn")
    gm = group[0] if group[0] > 0 else 256
    gn = group[1] if group[1] > 0 else 384
    assert x_q.dtype == ml_dtypes.float8_e4m3fn and x_q.shape == (256, 384)
    assert x_s.dtype == np.float32 and x_s.shape == (256 // gm, 384 // gn)
    y = qtl.scaled_dequantize(x_q, x_s, group)  # vLLM asserts here for a -1 extent; qtl takes it
    assert y.dtype == np.float32
    assert np.array_equal(y, qtl.scaled_dequantize(x_q, x_s))  # group_shape None: the same broadcast
    # e4m3's precision, and its subnormal step (2^-9 of the group's scale) for the group's small values
    step = qtl.group_broadcast(x_s, x.shape) * 2.0 ** -9
    assert np.all(np.abs(y - x) <= np.abs(x) / 16 + step)
    z = qtl.scaled_dequantize(x_q, x_s, out_dtype=ml_dtypes.bfloat16)
    assert z.dtype == ml_dtypes.bfloat16


def test_fnuz_and_the_platform_max():
    x = sample(64, 96, 2)
    q, s = qtl.scaled_quantize(x, (1, -1), "float8_e4m3fnuz")
    assert q.dtype == ml_dtypes.float8_e4m3fnuz
    assert np.max(np.abs(q.astype(np.float32)), axis=1).tolist() == [224.0] * 64  # get_fp8_min_max on ROCm
    q2, s2 = qtl.scaled_quantize(x, (1, -1), "float8_e4m3fnuz", is_fp8_fnuz=False)
    assert np.max(np.abs(q2.astype(np.float32))) == 240.0  # fp8_max 448, clamped to fnuz's 240
    y = qtl.scaled_dequantize(q, s, (1, -1))
    assert np.all(np.abs(y - x) <= np.abs(x) / 16 + s * 2.0 ** -10)  # fnuz's subnormal step


def test_compute_dtype_and_bfloat16_input():
    x = sample(128, 256, 3).astype(ml_dtypes.bfloat16)
    q_bf16, s_bf16 = qtl.scaled_quantize(x, (128, 128), "float8_e4m3fn")
    q_f32, s_f32 = qtl.scaled_quantize(x, (128, 128), "float8_e4m3fn", compute_dtype="float32")
    q_ref, s_ref = qtl.scaled_quantize(x.astype(np.float32), (128, 128), "float8_e4m3fn")
    assert np.array_equal(s_f32, s_ref) and np.array_equal(q_f32.view(np.uint8), q_ref.view(np.uint8))
    assert not np.array_equal(s_bf16, s_f32)  # fp8_max / amax rounded to bf16 twice


def test_one_dimensional_scales_and_group_broadcast():
    x = sample(128, 256, 4)
    q, s = qtl.scaled_quantize(x, (128, 128), "float8_e4m3fn")
    assert np.array_equal(qtl.scaled_dequantize(q, s.reshape(-1), (128, 128)), qtl.scaled_dequantize(q, s))
    t = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = qtl.group_broadcast(t, (4, 6))
    assert b.tolist() == [[0, 0, 1, 1, 2, 2]] * 2 + [[3, 3, 4, 4, 5, 5]] * 2
    assert qtl.group_broadcast(t[:1], (4, 6)).shape == (1, 6)  # an extent of 1 stays 1, as vLLM's


def test_errors():
    x = np.ones([3, 4], np.float32)
    with pytest.raises(qtl.ShapeError, match="not a whole number"):
        qtl.scaled_quantize(x, (2, 2), "float8_e4m3fn")
    with pytest.raises(qtl.DTypeError, match="quant_dtype"):
        qtl.scaled_quantize(x, (1, -1), "int8")
    q, s = qtl.scaled_quantize(x, (1, -1), "float8_e4m3fn")
    with pytest.raises(qtl.InvalidValueError, match="needs a group_shape"):
        qtl.scaled_dequantize(q, s.reshape(-1))
    with pytest.raises(qtl.ShapeError):
        qtl.group_broadcast(np.ones([3, 3], np.float32), (4, 6))
