"""The cache of freed large outputs (arrays.cpp): a live array's buffer is never handed out again,
a freed one is reused for the next output of its size, results do not depend on the cache, and
set_buffer_cache returns the previous limit (0 frees what is kept)."""

import numpy as np

import qtl


def test_buffer_cache_reuse_and_no_aliasing():
    w = np.random.default_rng(7).standard_normal((1024, 2048)).astype(np.float32)  # w_q: 8 MiB
    previous = qtl.set_buffer_cache(0)  # empty it
    qtl.set_buffer_cache(256 << 20)
    try:
        first = qtl.quantize_weights(w, qtl.scalar_types.uint4b8, 128, threads=1)
        second = qtl.quantize_weights(w, qtl.scalar_types.uint4b8, 128, threads=1)
        # Both alive: distinct buffers, equal bytes.
        for a, b in zip(first[:3], second[:3]):
            assert not np.shares_memory(a, b) and a.tobytes() == b.tobytes()
        addresses = {first[0].ctypes.data, first[1].ctypes.data}  # w_ref and w_q: 8 MiB each
        want = first[1].copy()
        del first
        third = qtl.quantize_weights(w, qtl.scalar_types.uint4b8, 128, threads=1)
        assert {third[0].ctypes.data, third[1].ctypes.data} == addresses  # the freed buffers came back
        assert np.array_equal(third[1], want)
        assert qtl.set_buffer_cache(0) == 256 << 20
        fresh = qtl.quantize_weights(w, qtl.scalar_types.uint4b8, 128, threads=1)
        assert np.array_equal(fresh[1], want)
    finally:
        qtl.set_buffer_cache(previous)
