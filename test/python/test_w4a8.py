"""The W4A8 transforms through the Python API (qtl/w4a8.hpp): the inverses round-trip, the in-place
uint4b8 conversion writes its argument, the quantizer's rule is checked, and the shapes the engines
refuse (or CUTLASS cannot reorder) raise qtl.ShapeError with the reason. The golden cases run in
test_golden.py."""

import ml_dtypes
import numpy as np
import pytest

import qtl

RNG = np.random.default_rng(2500)


def words(*shape):
    return RNG.integers(-(1 << 31), 1 << 31, size=shape, dtype=np.int64).astype(np.int32)


def test_reorder_round_trips_and_the_grouped_op_is_each_expert():
    b = words(3, 32, 256 // 8)
    packed = qtl.cutlass_encode_and_reorder_int4b_grouped(b)
    assert packed.shape == b.shape and packed.dtype == np.int32
    assert np.array_equal(qtl.cutlass_decode_and_unreorder_int4b(packed), b)
    for e in range(3):
        assert np.array_equal(qtl.cutlass_encode_and_reorder_int4b(b[e]), packed[e])
    plain = words(48, 96 // 8)
    assert np.array_equal(qtl.cutlass_decode_and_unreorder_int4b(qtl.cutlass_encode_and_reorder_int4b(plain)), plain)


def test_reorder_refuses_unaligned_shapes():
    with pytest.raises(qtl.ShapeError, match="N = 20 is not a multiple of 16"):
        qtl.cutlass_encode_and_reorder_int4b(words(20, 8))
    with pytest.raises(qtl.ShapeError, match="not a multiple of 256"):
        qtl.cutlass_encode_and_reorder_int4b_grouped(words(2, 16, 16))
    with pytest.raises(qtl.ShapeError, match="dimensions"):
        qtl.cutlass_encode_and_reorder_int4b(words(2, 16, 32))


def test_pack_scale_fp8_byte_7_is_minus_the_scale():
    s = np.arange(0, 0x7F, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    packed = qtl.cutlass_pack_scale_fp8(s).view(np.uint8).reshape(-1, 8)
    assert np.array_equal(packed[:, 7] ^ 0x80, s.view(np.uint8))
    assert np.array_equal(packed[:, 0], (-8 * s.astype(np.float32)).clip(-448, 448)
                          .astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    # the uint8 codes (as CuPy and DLPack producers without FP8 hand them over) give the same bytes, as uint8
    codes = qtl.cutlass_pack_scale_fp8(s.view(np.uint8))
    assert codes.dtype == np.uint8 and codes.tobytes() == packed.tobytes()


def test_uint4b8_conversion_is_in_place_and_its_own_inverse():
    t = words(5, 7)
    before = t.copy()
    assert qtl.convert_packed_uint4b8_to_signed_int4_inplace(t) is t
    assert np.array_equal(t, before ^ np.int32(-0x77777778))  # every nibble ^ 8
    qtl.convert_packed_uint4b8_to_signed_int4_inplace(t)
    assert np.array_equal(t, before)


def test_scale_split_takes_the_rule_and_keeps_the_leading_shape():
    s = (RNG.random((2, 4, 6)) * 0.01).astype(ml_dtypes.bfloat16)
    q, chan = qtl.convert_bf16_scales_to_fp8("divide", s)
    assert q.shape == (2, 4, 6) and q.dtype == ml_dtypes.float8_e4m3fn
    assert chan.shape == (2, 4, 1) and chan.dtype == np.float32
    with pytest.raises(qtl.InvalidValueError, match="'divide'"):
        qtl.convert_bf16_scales_to_fp8("cuda", s)
    with pytest.raises(qtl.InvalidValueError, match="finite"):
        qtl.convert_bf16_scales_to_fp8("reciprocal", np.array([[1.0, np.inf]], dtype=np.float32))


def test_interleave_scales_round_trips_and_refuses_like_sglang():
    s = RNG.standard_normal((2, 8, 12)).astype(np.float32)
    x = qtl.interleave_scales(s, 4)
    assert x.shape == (2, 3, 32)
    assert np.array_equal(x, s.reshape(2, 8, 3, 4).transpose(0, 2, 1, 3).reshape(2, 3, 32))
    assert np.array_equal(qtl.deinterleave_scales(x, 4), s)
    with pytest.raises(qtl.ShapeError, match="scale K groups 12 must be divisible by scale_pack 5"):
        qtl.interleave_scales(s, 5)
