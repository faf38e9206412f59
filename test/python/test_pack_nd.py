"""vLLM's gptq_pack, awq_pack and pack/unpack_quantized_values_into_int32 through the Python API:
round trips along every dimension, vLLM's argument names and defaults, and the errors (the golden
cases recorded from vLLM itself are in test_golden.py)."""

import numpy as np
import pytest

import qtl


def codes(shape, hi, seed):
    return np.random.default_rng(seed).integers(0, hi + 1, shape, dtype=np.int64).astype(np.int32)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_pack_unpack_round_trip_along_every_dimension(dim):
    shape = [8, 16, 24]
    q = codes(shape, 15, dim)
    packed = qtl.pack_quantized_values_into_int32(q, qtl.scalar_types.uint4b8, packed_dim=dim)
    want = list(shape)
    want[dim] //= 8
    assert packed.shape == tuple(want) and packed.dtype == np.int32
    back = qtl.unpack_quantized_values_into_int32(w_q=packed, wtype=qtl.scalar_types.uint4b8, packed_dim=dim)
    assert np.array_equal(back, q)


def test_packed_dim_defaults_to_0_and_matches_gptq_pack():
    q = codes([16, 5], 15, 1)
    assert np.array_equal(qtl.pack_quantized_values_into_int32(q, "uint4"), qtl.gptq_pack(q, 4, 16, 5))
    assert np.array_equal(qtl.gptq_pack(q, 4, 16, 5), qtl.pack_rows(q, 4, 16, 5))


def test_signed_fields_come_back_zero_extended_as_vllm():
    q = np.array([[-8, -1, 0, 7, 1, 2, 3, 4]], np.int32)
    packed = qtl.pack_quantized_values_into_int32(q, qtl.scalar_types.int4, packed_dim=1)
    assert packed.tolist() == [[0x432170F8]]
    back = qtl.unpack_quantized_values_into_int32(packed, qtl.scalar_types.int4, packed_dim=1)
    assert back.tolist() == [[8, 15, 0, 7, 1, 2, 3, 4]]


def test_awq_pack_interleaves_each_word():
    q = np.arange(8, dtype=np.int32).reshape(1, 8)
    assert qtl.awq_pack(q, 4, 1, 8).tolist() == [[0x75316420]]


def test_errors_name_the_problem():
    q = codes([4, 12], 15, 2)
    with pytest.raises(qtl.UnsupportedError, match="num_bits must be 4 or 8"):
        qtl.awq_pack(q, 2, 4, 12)
    with pytest.raises(qtl.ShapeError, match="size_n"):
        qtl.awq_pack(q, 4, 4, 12)
    with pytest.raises(qtl.ShapeError, match="not a multiple of the pack factor 8"):
        qtl.pack_quantized_values_into_int32(q, qtl.scalar_types.uint4, packed_dim=1)
    with pytest.raises(qtl.ShapeError, match="packed_dim = 2"):
        qtl.pack_quantized_values_into_int32(q, qtl.scalar_types.uint4, packed_dim=2)
    with pytest.raises(qtl.UnsupportedError, match="uint3b4"):
        qtl.pack_quantized_values_into_int32(q, qtl.scalar_types.uint3b4)
    with pytest.raises(qtl.InvalidValueError, match="16"):
        qtl.pack_quantized_values_into_int32(np.full((8, 1), 16, np.int32), qtl.scalar_types.uint4)
