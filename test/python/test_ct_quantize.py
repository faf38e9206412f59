"""qtl.ct_pack_quantize beyond its golden cases (1924-1935, recorded from compressed-tensors): the
layout by hand, the bytes independent of the thread count, NaN/Inf refused naming the element
unless allowed, and the argument errors."""

import ml_dtypes
import numpy as np
import pytest

import qtl

rng = np.random.default_rng(1924)


def test_layout_by_hand():
    # amax 7.5 -> scale 1 (int4: amax / 7.5); codes w + 8, element j of a word in bits [4j, 4j+4)
    w = np.array([[-7.5, -3, -1, 0, 1, 2, 3, 7]], np.float32)
    packed, scale, zp = qtl.ct_pack_quantize(w, 4, -1)
    assert zp is None and scale.dtype == np.float32 and scale.tolist() == [[1.0]]
    assert packed.dtype == np.int32 and packed.shape == (1, 1)
    assert packed.view(np.uint32)[0, 0] == 0xFBA98750


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_threads_give_the_same_bytes(dtype):
    w = (rng.standard_normal((300, 256)) * 0.02).astype(dtype)
    one = qtl.ct_pack_quantize(w, 4, 128, False, threads=1)
    many = qtl.ct_pack_quantize(w, 4, 128, False, threads=4)
    assert one[1].dtype == np.dtype(dtype) and one[2].shape == (300, 2)
    for a, b in zip(one, many):
        assert a.tobytes() == b.tobytes()


def test_nonfinite_refused_unless_allowed():
    w = np.ones((4, 64), np.float32)
    w[2, 37] = np.inf
    with pytest.raises(qtl.InvalidValueError, match=r"element \[2, 37\] is \+Inf"):
        qtl.ct_pack_quantize(w, 8, 32)
    packed, scale, _ = qtl.ct_pack_quantize(w, 8, 32, allow_nonfinite=True)
    assert np.isinf(scale[2, 1]) and packed.shape == (4, 16)


def test_argument_errors():
    w = np.ones((4, 64), np.float32)
    with pytest.raises(qtl.InvalidValueError, match="bits is 3"):
        qtl.ct_pack_quantize(w, 3, 32)
    with pytest.raises(qtl.ShapeError, match="group_size 48 does not divide K = 64"):
        qtl.ct_pack_quantize(w, 4, 48)
    with pytest.raises(qtl.ShapeError, match="K = 60 is not a multiple of 8"):
        qtl.ct_pack_quantize(np.ones((4, 60), np.float32), 4, -1)
    with pytest.raises(qtl.DTypeError):
        qtl.ct_pack_quantize(np.ones((4, 64), np.int32), 4, 32)
