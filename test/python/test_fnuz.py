"""sglang's normalize_e4m3fn_to_e4m3fnuz through the Python API: its argument names and default, the
dtypes it returns, that the caller's weight is left as it was (QTL returns a new array), and the
errors (the golden cases recorded from sglang itself are in test_golden.py)."""

import ml_dtypes
import numpy as np
import pytest

import qtl


def test_weight_bytes_and_doubled_scales():
    codes = np.arange(256, dtype=np.uint8).reshape(16, 16)
    w = codes.view(ml_dtypes.float8_e4m3fn)
    ws = np.array([0.25, 3.0e38], np.float32)
    out, ows, ois = qtl.normalize_e4m3fn_to_e4m3fnuz(weight=w, weight_scale=ws)
    assert ois is None
    assert out.dtype == ml_dtypes.float8_e4m3fnuz and out.shape == (16, 16)
    want = codes.copy()
    want[want == 0x80] = 0
    assert np.array_equal(out.view(np.uint8), want)
    assert np.array_equal(w.view(np.uint8), codes)  # the argument is untouched
    assert ows.dtype == np.float32 and ows[0] == 0.5 and np.isinf(ows[1])
    # every finite, non-zero byte dequantizes to the same value with the doubled scale
    fn = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    fnuz = out.astype(np.float32)
    finite = (codes & 0x7F) != 0x7F
    assert np.array_equal(fnuz[finite] * 2, fn[finite])


def test_input_scale_and_bfloat16_scales():
    w = np.zeros([2, 3], np.uint8).view(ml_dtypes.float8_e4m3fn)
    ws = np.array([[1.5], [2.5]], ml_dtypes.bfloat16)
    _, ows, ois = qtl.normalize_e4m3fn_to_e4m3fnuz(w, ws, np.array(0.75, np.float32))
    assert ows.dtype == ml_dtypes.bfloat16 and ows.shape == (2, 1) and ows.astype(np.float32).tolist() == [[3.0], [5.0]]
    assert ois.dtype == np.float32 and ois.shape == () and float(ois) == 1.5


def test_errors():
    with pytest.raises(qtl.DTypeError, match="not float8_e4m3fn"):
        qtl.normalize_e4m3fn_to_e4m3fnuz(np.zeros([4], np.float32), np.ones([1], np.float32))
    w = np.zeros([4], np.uint8).view(ml_dtypes.float8_e4m3fn)
    with pytest.raises(qtl.DTypeError):
        qtl.normalize_e4m3fn_to_e4m3fnuz(w, np.ones([1], np.int32))


def test_float8_e4m3fnuz_is_a_named_scalar_type():
    t = qtl.scalar_types.float8_e4m3fnuz
    assert t.nan_repr == qtl.NanRepr.NEG_ZERO
    assert t.max() == 240.0 and t.min() == -240.0 and t.size_bits == 8
