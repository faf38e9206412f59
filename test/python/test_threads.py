"""threads= on quantize_weights: column slices on several threads give the same bytes as one thread,
in every mode (group sizes, channelwise, none, zero points, both zero-point orders, every float
dtype); the block quantizers' case is test_fp4.py's."""

import ml_dtypes
import numpy as np
import pytest

import qtl

st = qtl.scalar_types
rng = np.random.default_rng(1919)

MODES = [(st.uint4b8, 128, False, False), (st.uint4b8, None, False, False), (st.uint8b128, -1, False, False),
         (st.int4, 32, False, False), (st.uint4, 64, True, False), (st.uint4, 64, True, True),
         (st.uint8, -1, True, False)]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=str)
@pytest.mark.parametrize("qtype,group,zp,after", MODES, ids=str)
def test_quantize_weights_threads_same_bytes(dtype, qtype, group, zp, after):
    w = (rng.standard_normal((256, 1000)) * 0.05).astype(dtype)  # 1000 columns: a ragged last slice
    want = qtl.quantize_weights(w, qtype, group, zp, after, threads=1)
    for t in (2, 3, 7, None):
        got = qtl.quantize_weights(w, qtype, group, zp, after, threads=t)
        for a, b in zip(want, got):
            if a is None:
                assert b is None
                continue
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_threads_argument():
    w = rng.standard_normal((64, 64)).astype(np.float32)
    with pytest.raises(qtl.Error, match="threads"):
        qtl.quantize_weights(w, st.uint4b8, 32, threads=0)
    with pytest.raises(TypeError):
        qtl.quantize_weights(w, st.uint4b8, 32, False, False, 2)  # keyword only
