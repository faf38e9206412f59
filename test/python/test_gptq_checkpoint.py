"""qtl.gptq_checkpoint_quantize (qtl/gptq_checkpoint.hpp): GPTQ checkpoint tensors of row-major
weight [N, K]. The symmetric rule against the reference's path (quantize_weights on W transposed,
gptq_pack, F16 scales); the asymmetric rule's scales and zero points by GPTQ's quantizer written
out in numpy; the bytes independent of the thread count; the refusals."""

import ml_dtypes
import numpy as np
import pytest

import qtl

rng = np.random.default_rng(2601)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("bits", [4, 8])
def test_symmetric_is_the_references_quantize_weights_packed(dtype, bits):
    n, k, gs = 96, 256, 64
    w = (rng.standard_normal((n, k)) * 0.02).astype(dtype)
    qweight, scales, zeros = qtl.gptq_checkpoint_quantize(w, bits, gs)
    quant_type = qtl.scalar_types.uint4b8 if bits == 4 else qtl.scalar_types.uint8b128
    _, w_q, w_s, _ = qtl.quantize_weights(np.ascontiguousarray(w.T), quant_type, gs)
    assert qweight.dtype == np.int32 and qweight.shape == (k * bits // 32, n)
    assert qweight.tobytes() == qtl.gptq_pack(w_q, bits, k, n).tobytes()
    assert scales.dtype == np.float16 and scales.tobytes() == w_s.astype(np.float32).astype(np.float16).tobytes()
    assert zeros.dtype == np.int32 and (zeros == 1 << (bits - 1)).all()


def test_asymmetric_scales_and_zero_points_are_gptqs():
    n, k, gs, bits = 8, 128, 32, 4
    w = rng.standard_normal((n, k)).astype(np.float32)
    w[3] = np.abs(w[3]) + 0.5  # one sign: the range widened to hold 0
    _, scales, zeros = qtl.gptq_checkpoint_quantize(w, bits, gs, symmetric=False)
    g = w.reshape(n, k // gs, gs)
    xmin = np.minimum(g.min(axis=2), np.float32(0))
    xmax = np.maximum(g.max(axis=2), np.float32(0))
    s = ((xmax - xmin) / np.float32(2**bits - 1)).astype(np.float32)
    assert scales.tobytes() == s.T.astype(np.float16).tobytes()
    assert (zeros == np.rint(-xmin / s).T.astype(np.int32)).all()
    assert zeros[:, 3].tolist() == [0] * (k // gs)


def test_threads_give_the_same_bytes():
    w = (rng.standard_normal((300, 256)) * 0.02).astype(ml_dtypes.bfloat16)
    for symmetric in (True, False):
        one = qtl.gptq_checkpoint_quantize(w, 4, 128, symmetric, threads=1)
        many = qtl.gptq_checkpoint_quantize(w, 4, 128, symmetric, threads=4)
        for a, b in zip(one, many):
            assert a.tobytes() == b.tobytes()


def test_refusals():
    w = np.ones((4, 64), np.float32)
    w[2, 37] = np.nan
    with pytest.raises(qtl.InvalidValueError, match=r"element \[2, 37\] is NaN"):
        qtl.gptq_checkpoint_quantize(w, 4, 32)
    assert qtl.gptq_checkpoint_quantize(w, 4, 32, allow_nonfinite=True)[0].shape == (8, 4)
    big = np.full((2, 32), 1e6, np.float32)
    with pytest.raises(qtl.InvalidValueError, match="overflows to Inf"):
        qtl.gptq_checkpoint_quantize(big, 4, 32)
    with pytest.raises(qtl.ShapeError):
        qtl.gptq_checkpoint_quantize(np.ones((2, 64), np.float32), 4, 48)
    with pytest.raises(qtl.InvalidValueError):
        qtl.gptq_checkpoint_quantize(np.ones((2, 64), np.float32), 3, 32)
