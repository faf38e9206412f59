"""The Python API beyond the golden cases: errors (the qtl.Error hierarchy, never a crash), the
arrays it takes (strided, read-only, foreign dtypes) and gives (zero-copy where the reference
works in place), and qtl.scalar_types against vLLM's definition of the fields and ids."""

import ml_dtypes
import numpy as np
import pytest

import qtl

st = qtl.scalar_types
rng = np.random.default_rng(19)


def vllm_id(exponent, mantissa, signed, bias, finite_values_only, nan_repr):
    """vLLM ScalarType.id: the fields packed in declaration order (8, 8, 1, 32, 1, 8 bits)."""
    val = 0
    offset = 0
    for v, width in ((exponent, 8), (mantissa, 8), (signed, 1), (bias, 32), (finite_values_only, 1), (nan_repr, 8)):
        val |= (int(v) & ((1 << width) - 1)) << offset
        offset += width
    return val


NAMED = ["int4", "uint4", "int8", "uint8", "uint2b2", "uint3b4", "uint4b8", "uint8b128", "float4_e2m1f",
         "float6_e3m2f", "float6_e2m3f", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float16_e8m7",
         "float16_e5m10"]


@pytest.mark.parametrize("name", NAMED)
def test_scalar_type_fields_and_id(name):
    t = getattr(st, name)
    assert str(t) == name and repr(t) == "ScalarType." + name
    assert t.id == vllm_id(t.exponent, t.mantissa, t.signed, t.bias, t._finite_values_only, t.nan_repr.value)
    assert qtl.ScalarType.from_id(t.id) == t and qtl.ScalarType.from_name(name) == t
    assert t.size_bits == t.exponent + t.mantissa + int(t.signed)


def test_scalar_type_values():
    assert (st.uint4b8.mantissa, st.uint4b8.bias, st.uint4b8.signed) == (4, 8, False)
    assert st.uint4b8.min() == -8 and st.uint4b8.max() == 7
    assert st.int4.min() == -8 and st.int4.max() == 7
    assert st.float8_e4m3fn.max() == 448.0 and st.float8_e4m3fn.nan_repr == qtl.NanRepr.EXTD_RANGE_MAX_MIN
    assert st.bfloat16 == st.float16_e8m7 and st.float16 == st.float16_e5m10
    assert len({getattr(st, n).id for n in NAMED}) == 16


def test_error_hierarchy():
    for e in (qtl.ShapeError, qtl.UnsupportedError, qtl.ConfigError, qtl.FormatError, qtl.RegexError,
              qtl.InvalidValueError, qtl.DTypeError):
        assert issubclass(e, qtl.Error) and issubclass(e, ValueError)
    assert issubclass(qtl.DTypeError, TypeError)


def codes(k, n, bits):
    return rng.integers(0, 1 << bits, size=(k, n), dtype=np.int32)


def test_pack_errors():
    q = codes(16, 16, 4)
    with pytest.raises(qtl.ShapeError, match="size_n"):
        qtl.pack_cols(q, 4, 16, 12)
    with pytest.raises(qtl.UnsupportedError, match="num_bits = 3"):
        qtl.pack_cols(q, 3, 16, 16)
    bad = q.copy()
    bad[2, 5] = 16
    with pytest.raises(qtl.InvalidValueError):
        qtl.pack_rows(bad, 4, 16, 16)
    with pytest.raises(qtl.DTypeError):
        qtl.pack_cols(q.astype(np.int64), 4, 16, 16)
    with pytest.raises(TypeError):
        qtl.pack_cols([[1, 2]], 4, 1, 2)
    with pytest.raises(qtl.ShapeError):
        qtl.pack_cols(q[0], 4, 16, 16)


def test_quantize_errors():
    w = rng.standard_normal((96, 8)).astype(np.float32)
    with pytest.raises(qtl.ShapeError):
        qtl.quantize_weights(w, st.uint4b8, 64)  # 64 < K does not divide 96
    with pytest.raises(qtl.UnsupportedError):
        qtl.quantize_weights(w, st.float8_e4m3fn, 32)
    with pytest.raises(qtl.InvalidValueError):
        qtl.quantize_weights(w, st.int4, 32, zero_points=True)  # zero points need an unsigned type
    with pytest.raises(qtl.UnsupportedError):
        qtl.gptq_quantize_weights(w, st.uint4, 32, False)
    with pytest.raises(qtl.Error):
        qtl.gptq_quantize_weights(w, st.uint4b8, -1, True)
    with pytest.raises(qtl.DTypeError):
        qtl.quantize_weights(w.astype(np.float64), st.uint4b8, 32)
    with pytest.raises(qtl.Error):
        qtl.quantize_weights(np.zeros((0, 8), np.float32), st.uint4b8, 32)
    q = codes(8, 4, 4)
    with pytest.raises(qtl.InvalidValueError):
        qtl.permute_rows(q, q.astype(np.float32), 4, np.array([0, 1, 2, 3, 4, 5, 6, 6], np.int64))
    with pytest.raises(qtl.DTypeError):
        qtl.permute_rows(q, q.astype(np.float32), 4, np.arange(8, dtype=np.int32))


def test_quant_type_forms():
    """A qtl.ScalarType, a name, or any object with vLLM's `id` (vLLM's / sgl-kernel's ScalarType)."""
    w = rng.standard_normal((64, 16)).astype(np.float16)

    class Foreign:
        id = st.uint4b8.id

    a = qtl.quantize_weights(w, st.uint4b8, 32)
    for t in ("uint4b8", Foreign()):
        b = qtl.quantize_weights(w, t, 32)
        for x, y in zip(a[:3], b[:3]):
            assert np.array_equal(x, y)
    with pytest.raises(qtl.InvalidValueError):
        qtl.quantize_weights(w, "uint5", 32)


def test_strided_inputs_equal_contiguous():
    """Non-contiguous inputs are read through their strides (same bits as a contiguous copy), or
    rejected with the library's message where it needs unit column strides."""
    base = rng.standard_normal((128, 64)).astype(np.float16)
    rows = base[::2]  # (64, 64) view, strides (128, 1) elements
    assert not rows.flags.c_contiguous
    for x, y in zip(qtl.quantize_weights(rows, st.uint4b8, 32)[:3],
                    qtl.quantize_weights(np.ascontiguousarray(rows), st.uint4b8, 32)[:3]):
        assert np.array_equal(x, y)
    with pytest.raises(qtl.ShapeError, match="unit stride"):
        qtl.quantize_weights(base.T, st.uint4b8, 32)
    q = codes(32, 64, 4)[:, ::2]
    assert np.array_equal(qtl.pack_cols(q, 4, 32, 32), qtl.pack_cols(np.ascontiguousarray(q), 4, 32, 32))


def test_read_only_inputs():
    w = rng.standard_normal((64, 16)).astype(np.float32)
    w.flags.writeable = False
    assert qtl.quantize_weights(w, st.uint4b8, 32)[1].shape == (64, 16)


def fp8(a):
    return np.asarray(a, np.float32).astype(ml_dtypes.float8_e4m3fn)


def test_requantize_with_max_scale_in_place():
    """The reference writes `weight` in place and returns it: so does qtl (the same object)."""
    weight = fp8(rng.standard_normal((24, 16)))
    scale = np.array([0.5, 1.0, 0.25], np.float32)
    before = weight.copy()
    max_s, out = qtl.requantize_with_max_scale(weight, scale, [8, 8, 8])
    assert out is weight and np.shares_memory(out, weight)
    assert max_s.shape == () and max_s.dtype == np.float32 and float(max_s) == 1.0
    assert not np.array_equal(weight.view(np.uint8), before.view(np.uint8))  # shards 0 and 2 rescaled
    assert np.array_equal(weight[8:16].view(np.uint8), before[8:16].view(np.uint8))  # max-scale shard kept
    ro = fp8(np.ones((8, 4)))
    ro.flags.writeable = False
    with pytest.raises(qtl.InvalidValueError, match="read-only"):
        qtl.requantize_with_max_scale(ro, np.array([1.0], np.float32), [8])


def test_per_tensor_dequantize_promotion():
    t = fp8(rng.standard_normal((4, 8)))
    a = qtl.per_tensor_dequantize(t, 0.5)
    b = qtl.per_tensor_dequantize(t, np.array(0.5, np.float32))
    c = qtl.per_tensor_dequantize(t, np.array([0.5], np.float32))
    assert a.dtype == np.float16 and b.dtype == np.float16 and c.dtype == np.float32
    assert np.array_equal(a, (t.astype(np.float32) * 0.5).astype(np.float16))
    assert np.array_equal(c, t.astype(np.float32) * 0.5)
    assert np.array_equal(qtl.per_tensor_dequantize(t.view(np.uint8), 0.5), a)  # raw codes accepted


def test_bfloat16_round_trip_types():
    w = rng.standard_normal((64, 16)).astype(ml_dtypes.bfloat16)
    w_ref, w_q, w_s, w_zp = qtl.quantize_weights(w, st.uint4b8, 32)
    assert w_ref.dtype == ml_dtypes.bfloat16 and w_s.dtype == ml_dtypes.bfloat16 and w_zp is None
    out, s = qtl.scaled_fp8_quant(w)
    assert out.dtype == ml_dtypes.float8_e4m3fn and s.shape == (1,)


def test_scaled_fp8_quant_padding():
    x = rng.standard_normal((5, 16)).astype(np.float32)
    out, s = qtl.scaled_fp8_quant(x, num_token_padding=8, use_per_token_if_dynamic=True)
    assert out.shape == (8, 16) and s.shape == (8, 1)
    assert not out[5:].view(np.uint8).any() and not s[5:].any()


def test_layout_ops():
    x = np.arange(2 * 6 * 3, dtype=np.float32).reshape(2, 6, 3)
    y = qtl.swap_w13_to_w31(x)
    assert np.array_equal(y, np.concatenate([x[:, 3:], x[:, :3]], axis=1))
    with pytest.raises(qtl.ShapeError):
        qtl.swap_w13_to_w31(np.zeros((5, 3), np.float32))
    s = rng.integers(0, 255, size=(130, 7), dtype=np.uint8)
    sw = qtl.swizzle_blockscale(s)
    assert sw.shape == (256, 8)
    assert np.array_equal(qtl.unswizzle_blockscale(sw, 130, 7), s)
    w, sc = qtl.reorder_w1w3_to_w3w1(x, x[..., :1], dim=1)
    assert np.array_equal(w, y)
    with pytest.raises(qtl.ShapeError):
        qtl.reorder_w1w3_to_w3w1(x, x, dim=3)
