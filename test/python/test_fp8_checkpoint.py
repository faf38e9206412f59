"""qtl.fp8_checkpoint_quantize (qtl/fp8_checkpoint.hpp) beyond its golden cases (2480-2485): the
bytes independent of the thread count for every scheme, the block scales' layout, the refusals."""

import ml_dtypes
import numpy as np
import pytest

import qtl

rng = np.random.default_rng(2480)


@pytest.mark.parametrize("scheme", ["tensor", "channel", "block"])
def test_threads_give_the_same_bytes(scheme):
    w = (rng.standard_normal((700, 320)) * 0.02).astype(ml_dtypes.bfloat16)
    one = qtl.fp8_checkpoint_quantize(w, scheme, "ct", threads=1)
    many = qtl.fp8_checkpoint_quantize(w, scheme, "ct", threads=4)
    assert one[0].dtype == ml_dtypes.float8_e4m3fn and one[0].shape == (700, 320)
    assert one[1].shape == ({"tensor": 1, "channel": 700, "block": 6 * 3}[scheme],)
    for a, b in zip(one, many):
        assert a.tobytes() == b.tobytes()


def test_block_rules_differ_only_on_an_all_zero_block():
    w = np.zeros((128, 256), np.float32)
    w[:, 128:] = rng.standard_normal((128, 128))
    _, hf = qtl.fp8_checkpoint_quantize(w, "block", "hf")
    _, ct = qtl.fp8_checkpoint_quantize(w, "block", "ct")
    assert hf[0] == np.float32(1e-12) / np.float32(448) and ct[0] == np.float32(2.0**-23)
    assert hf[1] == ct[1]


def test_refusals():
    w = np.ones((4, 128), np.float32)
    w[3, 100] = np.inf
    with pytest.raises(qtl.InvalidValueError, match=r"element \[3, 100\] is \+Inf"):
        qtl.fp8_checkpoint_quantize(w, "block")
    assert qtl.fp8_checkpoint_quantize(w, "channel", allow_nonfinite=True)[1].shape == (4,)
    with pytest.raises(qtl.InvalidValueError, match="scheme"):
        qtl.fp8_checkpoint_quantize(w, "group")
    with pytest.raises(qtl.InvalidValueError, match="rule"):
        qtl.fp8_checkpoint_quantize(w, "block", "deepseek")
