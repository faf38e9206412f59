"""The device tier: CUDA arrays in, CUDA arrays out. In the test build of the extension against the
simulated device (scripts/python-ci.sh builds it: qtl._sim hands out "device" arrays in the
simulator's cudaMalloc memory), every device-capable function runs on device arrays and must equal
the host path bit for bit; the wrong-device, mixed, non-contiguous and stream cases raise or
behave as documented. In the host-only build, a CUDA array is refused with how to get the CUDA
build."""

import ctypes

import numpy as np
import pytest

import qtl

st = qtl.scalar_types
sim = getattr(qtl._qtl, "_sim", None)
needs_sim = pytest.mark.skipif(sim is None, reason="needs the test build against the simulated device")
rng = np.random.default_rng(35)


class Producer:
    """A DLPack producer over a simulated-device array that records the streams its consumer asks
    for (as CuPy or torch do, it would order its work before that stream)."""

    def __init__(self, host, device_id=0):
        self.array = sim.from_host(np.require(host, requirements="C"), device_id)  # keeps 0-dim
        self.streams = []

    def __dlpack__(self, stream=None, **kwargs):
        self.streams.append(stream)
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def on_device(fn, *args, **kwargs):
    """fn on device copies of the array arguments; the outputs copied back to the host."""
    dev = [Producer(a) if isinstance(a, np.ndarray) else a for a in args]
    out = fn(*dev, **kwargs)
    outs = out if isinstance(out, tuple) else (out,)
    for o in outs:
        assert isinstance(o, qtl._qtl.DeviceArray) and o.__dlpack_device__() == (2, 0)
    host = tuple(sim.to_host(o) for o in outs)
    return host if isinstance(out, tuple) else host[0]


def assert_same(dev, host):
    """Bit for bit: same dtype (by item size: device fp8 comes back as its uint8 codes), same bytes."""
    dev, host = np.asarray(dev), np.asarray(host)
    assert dev.shape == host.shape and dev.dtype.itemsize == host.dtype.itemsize
    assert dev.tobytes() == host.tobytes()


def float_array(shape, dtype, scale=1.0):
    """Random floats of `dtype` (np.float32, np.float16 or "bfloat16": ml_dtypes')."""
    import ml_dtypes

    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    return (rng.standard_normal(shape) * scale).astype(dt)


def to_device(a):
    """A simulated-device copy of a host array (bfloat16 by its storage)."""
    a = np.require(a, requirements="C")  # keeps 0-dim
    if a.dtype.name == "bfloat16":
        return sim.from_host(a.view(np.uint16), bfloat16=True)
    return sim.from_host(a)


def assert_all_same(dev, host):
    """Tuples of device outputs and host outputs, element by element (None for None)."""
    assert len(dev) == len(host)
    for d, h in zip(dev, host):
        if h is None:
            assert d is None
        else:
            assert_same(sim.to_host(d), h)


# --- any build ----------------------------------------------------------------------------------

class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class CudaCapsuleProducer:
    """A DLPack producer of an int32 array that claims to be on CUDA device 0 (ctypes only, so it
    exists in every build; its data pointer is never dereferenced: only the host-only refusal uses
    it)."""

    _name = b"dltensor"

    def __init__(self, shape):
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._tensor = _DLTensor(data=0x1000, device_type=2, device_id=0, ndim=len(shape), code=0, bits=32,
                                 lanes=1, shape=self._shape)

    def __dlpack__(self, stream=None, **kwargs):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._tensor), self._name, None)

    def __dlpack_device__(self):
        return (2, 0)


def test_cuda_available_says_which_build():
    assert qtl.cuda_available() is (qtl._qtl._device_backend is not None)
    if sim is not None:
        assert qtl._qtl._device_backend == "cuda-sim"


@pytest.mark.skipif(qtl.cuda_available(), reason="the host-only build's refusal")
def test_host_only_build_refuses_cuda_arrays_with_how_to_get_the_cuda_build():
    with pytest.raises(qtl.UnsupportedError, match=r"q_w: is a CUDA array.*host-only.*nvcc on PATH.*pip install"):
        qtl.pack_cols(CudaCapsuleProducer((4, 8)), 4, 4, 8)


def test_cuda_stream_takes_handles_and_stream_objects():
    class TorchLike:
        cuda_stream = 7

    with pytest.raises(qtl.DTypeError, match="cuda_stream"):
        qtl.cuda_stream("default")
    with qtl.cuda_stream(TorchLike()) as s:
        assert s._stream == 7


# --- packing --------------------------------------------------------------------------------------

PACKERS = [("pack_cols", qtl.pack_cols, True), ("pack_rows", qtl.pack_rows, True),
           ("gptq_pack", qtl.gptq_pack, True), ("unpack_cols", qtl.unpack_cols, False),
           ("unpack_rows", qtl.unpack_rows, False)]


@needs_sim
@pytest.mark.parametrize("bits", [1, 2, 4, 8, 16, 32])
@pytest.mark.parametrize("name,fn,packing", PACKERS, ids=[p[0] for p in PACKERS])
def test_packing_on_device_equals_host(name, fn, packing, bits):
    k, n = 64, 96  # both multiples of every pack factor, and rows not 16-byte multiples for 32-bit codes
    pf = 32 // bits
    if packing:
        x = rng.integers(0, 1 << bits, size=(k, n), dtype=np.int64).astype(np.int32)
    else:
        shape = (k, n // pf) if "cols" in name else (k // pf, n)
        x = rng.integers(-2**31, 2**31, size=shape, dtype=np.int64).astype(np.int32)
    assert_same(on_device(fn, x, bits, k, n), fn(x, bits, k, n))


@needs_sim
@pytest.mark.parametrize("bits", [4, 8])
def test_awq_pack_on_device_equals_host(bits):
    x = rng.integers(0, 1 << bits, size=(32, 64), dtype=np.int32)
    assert_same(on_device(qtl.awq_pack, x, bits, 32, 64), qtl.awq_pack(x, bits, 32, 64))


@needs_sim
@pytest.mark.parametrize("wtype", ["int4", "uint4", "int8", "uint8", "uint2b2", "uint4b8", "uint8b128"])
@pytest.mark.parametrize("packed_dim", [0, 1, 2])
def test_pack_quantized_values_on_device_equals_host(wtype, packed_dim):
    t = getattr(st, wtype)
    shape = [16, 16, 32]  # every extent a multiple of every pack factor
    lo = -(1 << (t.size_bits - 1)) if t.signed else 0
    codes = rng.integers(lo, lo + (1 << t.size_bits), size=shape, dtype=np.int32)
    packed = qtl.pack_quantized_values_into_int32(codes, t, packed_dim)
    assert_same(on_device(qtl.pack_quantized_values_into_int32, codes, t, packed_dim), packed)
    assert_same(on_device(qtl.unpack_quantized_values_into_int32, packed, t, packed_dim),
                qtl.unpack_quantized_values_into_int32(packed, t, packed_dim))


@needs_sim
def test_empty_device_arrays():
    x = np.zeros((0, 16), dtype=np.int32)
    out = on_device(qtl.pack_cols, x, 4, 0, 16)
    assert out.shape == (0, 2)


# --- quantize_weights ---------------------------------------------------------------------------

@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("wtype,group_size,zero_points", [
    ("uint4b8", None, False), ("uint4b8", 128, False), ("uint4b8", -1, False), ("uint8b128", 64, False),
    ("uint4", 128, True), ("uint4", -1, True), ("int8", 32, False), ("uint2b2", 128, False), ("uint3b4", 32, False),
    ("int4", None, False), ("uint8", 64, True)])
def test_quantize_weights_on_device_equals_host(dtype, wtype, group_size, zero_points):
    import ml_dtypes

    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    w = rng.standard_normal((256, 80)).astype(dt)
    t = getattr(st, wtype)
    host = qtl.quantize_weights(w, t, group_size, zero_points=zero_points)
    d = qtl.quantize_weights(to_device(w), t, group_size, zero_points=zero_points)
    assert len(d) == len(host) == 4
    assert_all_same(d, host)


# --- swizzles and fp8 -----------------------------------------------------------------------------

@needs_sim
@pytest.mark.parametrize("shape", [(130, 9), (128, 4), (3, 200, 5), (0, 4)])
def test_blockscale_swizzles_on_device_equal_host(shape):
    s = rng.integers(0, 256, size=shape, dtype=np.uint8)
    sw = qtl.swizzle_blockscale(s)
    assert_same(on_device(qtl.swizzle_blockscale, s), sw)
    assert_same(on_device(qtl.unswizzle_blockscale, sw, shape[-2], shape[-1]), s)


@needs_sim
@pytest.mark.parametrize("shape,dim", [((4, 64, 24), -2), ((64, 24), -2), ((3, 8, 10), -1), ((6, 5, 7), 0),
                                       ((2, 0, 4), -2)])
def test_half_swaps_on_device_equal_host(shape, dim):
    w = float_array(shape, np.float16)
    sshape = list(shape)
    sshape[-1 if dim != -1 else 0] = 3  # the scale splits along the same dimension, other sizes differ
    s = rng.integers(0, 256, size=sshape, dtype=np.uint8)
    if shape[-2] % 2 == 0:
        assert_same(on_device(qtl.swap_w13_to_w31, w), qtl.swap_w13_to_w31(w))
    got = on_device(qtl.reorder_w1w3_to_w3w1, w, s, dim=dim)
    want = qtl.reorder_w1w3_to_w3w1(w, s, dim=dim)
    assert_same(got[0], want[0])
    assert_same(got[1], want[1])


@needs_sim
def test_half_swaps_on_device_refuse_what_the_host_refuses():
    odd = Producer(np.zeros((2, 5, 4), np.float16))
    with pytest.raises(qtl.ShapeError, match=r"odd size 5"):
        qtl.swap_w13_to_w31(odd)
    with pytest.raises(qtl.ShapeError, match=r"scale has size 6 along dimension 0 but weight has 4"):
        qtl.reorder_w1w3_to_w3w1(Producer(np.zeros((4, 4), np.float16)), Producer(np.zeros((6, 1), np.uint8)))
    with pytest.raises(qtl.InvalidValueError, match=r"weight is on cuda:0 but scale on the host"):
        qtl.reorder_w1w3_to_w3w1(Producer(np.zeros((4, 4), np.float16)), np.zeros((4, 1), np.uint8))
    with pytest.raises(qtl.UnsupportedError, match=r"1-D CUDA arrays"):
        qtl.reorder_w1w3_to_w3w1(Producer(np.zeros(4, np.float16)), Producer(np.zeros(4, np.uint8)), dim=0)
    with pytest.raises(qtl.ShapeError, match=r"must be contiguous"):
        qtl.swap_w13_to_w31(sim.transposed(sim.from_host(np.zeros((8, 16), dtype=np.int32))))


@needs_sim
@pytest.mark.parametrize("inv_scale", [0.37, np.array(0.37, dtype=np.float32), np.array([0.37], dtype=np.float32)])
def test_per_tensor_dequantize_on_device_equals_host(inv_scale):
    import ml_dtypes

    codes = rng.integers(0, 256, size=(33, 17), dtype=np.uint8)
    codes[codes & 0x7F == 0x7F] = 0  # no NaN codes: their payload is the platform's
    host = qtl.per_tensor_dequantize(codes.view(ml_dtypes.float8_e4m3fn), inv_scale)
    dev_scale = Producer(inv_scale) if isinstance(inv_scale, np.ndarray) else inv_scale
    dev = qtl.per_tensor_dequantize(Producer(codes), dev_scale)
    assert_same(sim.to_host(dev), host)


@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("mode", ["static", "static_device_scale", "dynamic", "per_token"])
@pytest.mark.parametrize("padding", [None, 40])
def test_scaled_fp8_quant_on_device_equals_host(dtype, mode, padding):
    import ml_dtypes

    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    x = (rng.standard_normal((33, 48)) * 50).astype(dt)
    x[0, :4] = 0
    scale = {"static": 0.37, "static_device_scale": np.array([0.37], dtype=np.float32)}.get(mode)
    per_token = mode == "per_token"
    host = qtl.scaled_fp8_quant(x, scale, num_token_padding=padding, use_per_token_if_dynamic=per_token)
    dx = sim.from_host(x.view(np.uint16), bfloat16=True) if dtype == "bfloat16" else Producer(x)
    ds = Producer(scale) if isinstance(scale, np.ndarray) else scale
    dev = qtl.scaled_fp8_quant(dx, ds, num_token_padding=padding, use_per_token_if_dynamic=per_token)
    assert_same(sim.to_host(dev[0]), host[0])
    assert_same(sim.to_host(dev[1]), host[1])


@needs_sim
def test_mixed_host_and_device_arrays_are_refused():
    codes = rng.integers(0, 0x70, size=(8, 8), dtype=np.uint8)
    one = np.array([0.5], dtype=np.float32)
    with pytest.raises(qtl.InvalidValueError,
                       match=r"per_tensor_dequantize: tensor is on cuda:0 but inv_scale on the host; pass every array"):
        qtl.per_tensor_dequantize(Producer(codes), one)
    with pytest.raises(qtl.InvalidValueError, match=r"tensor is on the host but inv_scale on cuda:0"):
        qtl.per_tensor_dequantize(codes, Producer(one))
    with pytest.raises(qtl.InvalidValueError, match=r"scaled_fp8_quant: input is on cuda:0 but scale on the host"):
        qtl.scaled_fp8_quant(Producer(codes.astype(np.float32)), one)
    # a 0-dim host scalar goes with a device tensor, as in torch
    out = qtl.per_tensor_dequantize(Producer(codes), np.array(0.5, dtype=np.float32))
    assert_same(sim.to_host(out), qtl.per_tensor_dequantize(codes, 0.5))
    x = codes.astype(np.float32)
    q, s = qtl.scaled_fp8_quant(Producer(x), np.array(0.5, dtype=np.float32))
    assert_same(sim.to_host(q), qtl.scaled_fp8_quant(x, 0.5)[0])


# --- Marlin repack --------------------------------------------------------------------------------

@needs_sim
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("a8", [False, True])
@pytest.mark.parametrize("act_order", [False, True])
def test_gptq_marlin_repack_on_device_equals_host(bits, a8, act_order):
    if a8 and act_order:
        pytest.skip("the A8 layout takes no act-order (refused on both paths)")
    k, n = 128, 128
    words = rng.integers(-2**31, 2**31, size=(k * bits // 32, n), dtype=np.int64).astype(np.int32)
    perm = rng.permutation(k).astype(np.int32) if act_order else np.zeros(0, dtype=np.int32)
    host = qtl.gptq_marlin_repack(words, perm, k, n, bits, is_a_8bit=a8)
    assert_same(on_device(qtl.gptq_marlin_repack, words, perm, k, n, bits, is_a_8bit=a8), host)


@needs_sim
def test_gptq_marlin_repack_checks_a_device_perm_on_the_host():
    k, n = 128, 64
    words = rng.integers(0, 2**31, size=(k // 8, n), dtype=np.int32)
    perm = np.arange(k, dtype=np.int32)
    perm[5] = 4  # a repeat: the kernel would take it
    with pytest.raises(qtl.InvalidValueError, match=r"sort_indices\[5\] = 4 repeats an earlier entry"):
        qtl.gptq_marlin_repack(Producer(words), Producer(perm), k, n, 4)
    with pytest.raises(qtl.InvalidValueError, match=r"b_q_weight is on cuda:0 but perm on the host"):
        qtl.gptq_marlin_repack(Producer(words), np.arange(k, dtype=np.int32), k, n, 4)


@needs_sim
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("a8", [False, True])
def test_awq_marlin_repack_on_device_equals_host(bits, a8):
    k, n = 128, 128
    words = rng.integers(-2**31, 2**31, size=(k, n * bits // 32), dtype=np.int64).astype(np.int32)
    host = qtl.awq_marlin_repack(words, k, n, bits, is_a_8bit=a8)
    assert_same(on_device(qtl.awq_marlin_repack, words, k, n, bits, is_a_8bit=a8), host)


# --- where the arrays are -----------------------------------------------------------------------

@needs_sim
def test_array_on_another_device_than_the_current_one_is_refused():
    x = Producer(np.zeros((8, 8), dtype=np.int32), device_id=1)
    with pytest.raises(qtl.InvalidValueError, match=r"q_w: is on cuda:1 but the current device is cuda:0"):
        qtl.pack_cols(x, 4, 8, 8)


HOST_ONLY = [  # docs/python.md, "No device path": (function, arguments; the first is the device array)
    (qtl.unmarlin_awq, (np.zeros((8, 256), np.int32), 128, 128, 4), "marlin_q_w"),
    (qtl.unmarlin_permute_scales, (np.zeros((1, 128), np.float16), 128, 128, -1), "s"),
    (qtl.marlin_zero_points, (np.zeros((1, 64), np.int32), 1, 64, 4), "zp"),
    (qtl.marlin_sort_g_idx, (np.zeros(8, np.int32),), "g_idx"),
    (qtl.convert_to_channelwise, (np.ones(2, np.float32), [4, 4]), "weight_scale"),
    (qtl.all_close_1d, (np.ones(4, np.float32),), "x"),
]


@needs_sim
@pytest.mark.parametrize("fn,args,name", HOST_ONLY, ids=[f[0].__name__ for f in HOST_ONLY])
def test_functions_without_a_device_path_refuse_device_arrays(fn, args, name):
    fn(*args)  # the host path takes them
    with pytest.raises(qtl.UnsupportedError,
                       match=name + r": is a CUDA array, and this function runs on host arrays only"):
        fn(Producer(args[0]), *args[1:])


@needs_sim
def test_non_contiguous_device_view_is_refused():
    x = sim.transposed(sim.from_host(np.zeros((8, 16), dtype=np.int32)))
    with pytest.raises(qtl.ShapeError, match=r"q_w: must be contiguous"):
        qtl.pack_cols(x, 4, 16, 8)


# --- streams ----------------------------------------------------------------------------------------

@needs_sim
def test_default_stream_is_the_legacy_default_one():
    x = Producer(rng.integers(0, 16, size=(8, 16), dtype=np.int32))
    qtl.pack_cols(x, 4, 8, 16)
    assert x.streams[-1] == 1  # DLPack's legacy default stream, asked of the producer
    assert sim.last_stream() == 0  # and the kernel enqueued on it (the null handle)


@needs_sim
def test_cuda_stream_orders_the_export_and_runs_the_kernel_on_it():
    x = Producer(rng.integers(0, 16, size=(8, 16), dtype=np.int32))

    class StreamLike:  # torch.cuda.Stream's attribute
        cuda_stream = 0x5000

    with qtl.cuda_stream(StreamLike()):
        out = qtl.pack_cols(x, 4, 8, 16)
        assert x.streams[-1] == 0x5000 and sim.last_stream() == 0x5000
        with qtl.cuda_stream(0x6000):
            qtl.pack_rows(x, 4, 8, 16)
            assert x.streams[-1] == 0x6000 and sim.last_stream() == 0x6000
        qtl.pack_rows(x, 4, 8, 16)
        assert x.streams[-1] == 0x5000  # the outer stream again
    qtl.pack_cols(x, 4, 8, 16)
    assert x.streams[-1] == 1 and sim.last_stream() == 0
    assert_same(sim.to_host(out), qtl.pack_cols(sim.to_host(x.array), 4, 8, 16))


@needs_sim
def test_device_outputs_feed_device_inputs():
    x = rng.integers(0, 16, size=(16, 32), dtype=np.int32)
    packed = qtl.pack_cols(Producer(x), 4, 16, 32)
    assert packed.shape == (16, 4) and packed.dtype == "int32"
    assert_same(sim.to_host(qtl.unpack_cols(packed, 4, 16, 32)), x)


# --- act-order: gptq_quantize_weights, permute_rows, sort_weights -------------------------------

@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("wtype,group_size,act_order,given_perm", [
    ("uint4b8", 128, False, False), ("uint4b8", -1, False, False), ("uint8b128", 32, False, False),
    ("uint4b8", 64, True, False), ("uint4b8", 32, True, True), ("uint8b128", 128, True, True)])
def test_gptq_quantize_weights_on_device_equals_host(dtype, wtype, group_size, act_order, given_perm):
    k, n = 256, 48
    w = float_array((k, n), dtype)
    perm = rng.permutation(k).astype(np.int64) if given_perm else None
    t = getattr(st, wtype)
    host = qtl.gptq_quantize_weights(w, t, group_size, act_order, perm, seed=7)
    dev = qtl.gptq_quantize_weights(to_device(w), t, group_size, act_order,
                                    None if perm is None else Producer(perm), seed=7)
    assert_all_same(dev, host)


@needs_sim
def test_gptq_quantize_weights_on_device_refuses_as_the_host_does():
    w = rng.standard_normal((128, 16)).astype(np.float32)
    perm = np.arange(128, dtype=np.int64)
    perm[3] = 2
    with pytest.raises(qtl.InvalidValueError, match=r"perm is not a permutation of \[0, 128\): entry 3 is 2"):
        qtl.gptq_quantize_weights(Producer(w), st.uint4b8, 32, True, Producer(perm))
    with pytest.raises(qtl.InvalidValueError, match=r"act_order needs group_size < K"):
        qtl.gptq_quantize_weights(Producer(w), st.uint4b8, -1, True)
    with pytest.raises(qtl.UnsupportedError, match=r"group_size 48 is not supported"):
        qtl.gptq_quantize_weights(Producer(w), st.uint4b8, 48, False)
    with pytest.raises(qtl.InvalidValueError, match=r"w is on cuda:0 but test_perm on the host"):
        qtl.gptq_quantize_weights(Producer(w), st.uint4b8, 32, True, perm)


@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("group_size,given_perm", [(32, True), (-1, True), (16, False)])
def test_permute_rows_on_device_equals_host(dtype, group_size, given_perm):
    k, n = 64, 24
    q_w = rng.integers(0, 16, size=(k, n), dtype=np.int32)
    w_ref = float_array((k, n), dtype)
    perm = rng.permutation(k).astype(np.int64) if given_perm else None
    host = qtl.permute_rows(q_w, w_ref, group_size, perm, seed=11)
    dev = qtl.permute_rows(Producer(q_w), to_device(w_ref), group_size, None if perm is None else Producer(perm),
                           seed=11)
    assert_all_same(dev, host)
    bad = np.zeros(k, dtype=np.int64)
    with pytest.raises(qtl.InvalidValueError, match=r"perm is not a permutation"):
        qtl.permute_rows(Producer(q_w), to_device(w_ref), group_size, Producer(bad))
    with pytest.raises(qtl.InvalidValueError, match=r"q_w is on cuda:0 but w_ref on the host"):
        qtl.permute_rows(Producer(q_w), w_ref, group_size)


@needs_sim
@pytest.mark.parametrize("k,groups", [(96, 4), (128, 1), (0, 1), (37, 6)])
def test_sort_weights_on_device_equals_host(k, groups):
    q_w = rng.integers(0, 1 << 20, size=(k, 40), dtype=np.int32)
    g_idx = rng.integers(0, groups, size=k, dtype=np.int32)  # ties: the stable order is the contract
    host = qtl.sort_weights(q_w, g_idx)
    assert_all_same(qtl.sort_weights(Producer(q_w), Producer(g_idx)), host)
    with pytest.raises(qtl.ShapeError, match=r"g_idx has %d elements, expected %d" % (k + 1, k)):
        qtl.sort_weights(Producer(q_w), Producer(np.zeros(k + 1, dtype=np.int32)))


# --- NVFP4 / MXFP4 / MXFP8 ------------------------------------------------------------------------

BLOCK_FORMATS = [("nvfp4", 16), ("mxfp4", 32), ("mxfp8", 32)]


@needs_sim
@pytest.mark.parametrize("fmt,block", BLOCK_FORMATS, ids=[f[0] for f in BLOCK_FORMATS])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("swizzle", [True, False])
@pytest.mark.parametrize("shape", [(130, 2), (7, 3), (0, 1)], ids=["130x", "7x", "0x"])
def test_block_formats_on_device_equal_host(fmt, block, dtype, swizzle, shape):
    m, kb = shape
    x = float_array((m, kb * block), dtype, scale=30.0)
    if m:
        x[0, :block] = 0  # an all-zero block
    quant = getattr(qtl, fmt + "_quantize")
    dequant = getattr(qtl, fmt + "_dequantize")
    host = quant(x, swizzle=swizzle)
    dev = quant(to_device(x), swizzle=swizzle)
    assert_all_same(dev, host)
    extra = (float(host[2]),) if fmt == "nvfp4" else ()
    for out_dtype in ["float32", "float16", "bfloat16"]:
        want = dequant(host[0], host[1], *extra, swizzle=swizzle, dtype=out_dtype)
        values, scales = (Producer(np.asarray(a).view(np.uint8)) for a in host[:2])
        got = dequant(values, scales, *extra, swizzle=swizzle, dtype=out_dtype)
        assert_same(sim.to_host(got), np.asarray(want).view(np.uint16) if out_dtype == "bfloat16" else want)


@needs_sim
def test_nvfp4_on_device_with_a_given_global_scale_and_the_refusals():
    x = float_array((16, 64), np.float32)
    host = qtl.nvfp4_quantize(x, 1234.5, swizzle=False)
    assert_all_same(qtl.nvfp4_quantize(Producer(x), 1234.5, swizzle=False), host)
    with pytest.raises(qtl.InvalidValueError, match=r"global scale must be finite and > 0"):
        qtl.nvfp4_quantize(Producer(x), -1.0)
    values, scales = (np.asarray(a) for a in host[:2])
    with pytest.raises(qtl.ShapeError, match=r"the scale buffer has 63 bytes, the layout needs 64"):
        qtl.nvfp4_dequantize(Producer(values), Producer(scales.view(np.uint8).reshape(-1)[:63]), 1.0, swizzle=False)
    with pytest.raises(qtl.InvalidValueError, match=r"values is on cuda:0 but scales on the host"):
        qtl.nvfp4_dequantize(Producer(values), scales, 1.0, swizzle=False)
    with pytest.raises(qtl.InvalidValueError, match=r"global scale must be finite and > 0"):
        qtl.nvfp4_dequantize(Producer(values), Producer(scales.view(np.uint8)), 0.0, swizzle=False)


@needs_sim
def test_device_array_dlpack_orders_the_consumers_stream_after_its_own():
    x = Producer(rng.integers(0, 16, size=(8, 16), dtype=np.int32))
    with qtl.cuda_stream(0x5000):
        out = qtl.pack_cols(x, 4, 8, 16)  # written on stream 0x5000
    sim.last_order()
    out.__dlpack__(stream=0x7000)  # a consumer on another stream waits for 0x5000's work
    assert sim.last_order() == (0x5000, 0x7000)
    out.__dlpack__(stream=None)  # None and 1: the legacy default stream
    assert sim.last_order() == (0x5000, 0)
    out.__dlpack__(stream=2)  # cudaStreamPerThread
    assert sim.last_order() == (0x5000, 2)
    out.__dlpack__(stream=0x5000)  # the same stream: ordered already
    out.__dlpack__(stream=-1)  # the consumer asks for no ordering
    assert sim.last_order() == (0, 0)
    with pytest.raises(qtl.InvalidValueError, match=r"stream 0 is not a CUDA stream value"):
        out.__dlpack__(stream=0)
    # qtl consuming its own output on another stream orders that stream too
    with qtl.cuda_stream(0x6000):
        back = qtl.unpack_cols(out, 4, 8, 16)
    assert sim.last_order() == (0x5000, 0x6000)
    assert_same(sim.to_host(back), sim.to_host(x.array))


# --- scaled_quantize, scaled_dequantize, group_broadcast, fnuz, requantize, fp8 compare ----------

@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("group,compute", [((1, 32), None), ((-1, -1), None), ((16, 16), "float32"),
                                           ((4, -1), "bfloat16"), ((1, 64), "float16")])
@pytest.mark.parametrize("quant_dtype", ["float8_e4m3fn", "float8_e4m3fnuz"])
def test_scaled_quantize_on_device_equals_host(dtype, group, compute, quant_dtype):
    x = float_array((32, 64), dtype, scale=20.0)
    x[0, :32] = 0
    host = qtl.scaled_quantize(x, group, quant_dtype, compute)
    dev = qtl.scaled_quantize(to_device(x), group, quant_dtype, compute)
    assert_all_same(dev, host)
    if quant_dtype == "float8_e4m3fnuz":
        return
    # back, from the uint8 codes (e4m3fn); no NaN codes (the all-zero group's): their payload is the platform's
    codes = np.asarray(host[0]).view(np.uint8).copy()
    codes[codes & 0x7F == 0x7F] = 0
    scales = np.nan_to_num(np.asarray(host[1]))
    for out_dtype in ["float32", "bfloat16"]:
        want = np.asarray(qtl.scaled_dequantize(codes, scales, group, out_dtype))
        got = qtl.scaled_dequantize(Producer(codes), Producer(scales), group, out_dtype)
        assert_same(sim.to_host(got), want.view(np.uint16) if out_dtype == "bfloat16" else want)


@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("t_shape,shape", [((4, 2), (16, 64)), ((1, 8), (5, 32)), ((3, 1), (3, 7))])
def test_group_broadcast_on_device_equals_host(dtype, t_shape, shape):
    t = float_array(t_shape, dtype)
    assert_same(sim.to_host(qtl.group_broadcast(to_device(t), shape)),
                np.asarray(qtl.group_broadcast(t, shape)).view(np.uint16 if dtype == "bfloat16" else t.dtype))
    with pytest.raises(qtl.ShapeError, match=r"does not broadcast in groups"):
        qtl.group_broadcast(to_device(t), (t_shape[0] * 2 + 1, 9))


@needs_sim
def test_scaled_dequantize_on_device_refuses_as_the_host_does():
    codes = rng.integers(0, 0x70, size=(8, 8), dtype=np.uint8)
    s = np.ones((3, 3), dtype=np.float32)
    with pytest.raises(qtl.ShapeError, match=r"qtl::scaled_dequantize"):
        qtl.scaled_dequantize(Producer(codes), Producer(s))
    with pytest.raises(qtl.InvalidValueError, match=r"x_q is on cuda:0 but x_s on the host"):
        qtl.scaled_dequantize(Producer(codes), np.ones((1, 1), dtype=np.float32))


@needs_sim
@pytest.mark.parametrize("scale_dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("shape", [(16, 24), (3, 5, 8), (0,)])
def test_normalize_e4m3fn_to_e4m3fnuz_on_device_equals_host(scale_dtype, shape):
    codes = rng.integers(0, 256, size=shape, dtype=np.uint8)
    codes.reshape(-1)[:3] = 0x80  # -0, which fnuz has no code for
    ws, ins = float_array((4,), scale_dtype), float_array((), scale_dtype)
    host = qtl.normalize_e4m3fn_to_e4m3fnuz(codes, ws, ins)
    dev = qtl.normalize_e4m3fn_to_e4m3fnuz(Producer(codes), to_device(ws), to_device(ins))
    assert_all_same(dev, tuple(np.asarray(h).view(np.uint16) if h.dtype.name == "bfloat16" else h for h in host))
    assert qtl.normalize_e4m3fn_to_e4m3fnuz(Producer(codes), to_device(ws))[2] is None
    with pytest.raises(qtl.InvalidValueError, match=r"weight is on cuda:0 but weight_scale on the host"):
        qtl.normalize_e4m3fn_to_e4m3fnuz(Producer(codes), np.ones(4, dtype=np.float32))


@needs_sim
@pytest.mark.parametrize("scales,widths", [([0.5, 2.0, 1.0], [8, 16, 8]), ([0.5], [32]),
                                           ([1.5, -3.4028235e38], [16, 16])])
def test_requantize_with_max_scale_on_device_equals_host(scales, widths):
    import ml_dtypes

    codes = rng.integers(0, 256, size=(32, 24), dtype=np.uint8)
    codes[codes & 0x7F == 0x7F] = 0
    s = np.array(scales, dtype=np.float32)
    host_w = codes.copy().view(ml_dtypes.float8_e4m3fn)
    host = qtl.requantize_with_max_scale(host_w, s, widths)
    dev_w = sim.from_host(codes)
    dev = qtl.requantize_with_max_scale(dev_w, Producer(s), widths)
    assert dev[1] is dev_w  # in place, returned itself
    assert_same(sim.to_host(dev[0]), host[0])
    assert_same(sim.to_host(dev_w), host_w.view(np.uint8))
    with pytest.raises(qtl.ShapeError, match=r"logical"):  # the host's plan refuses widths past the rows
        qtl.requantize_with_max_scale(dev_w, Producer(np.ones(2, dtype=np.float32)), [20, 20])


@needs_sim
def test_assert_fp8_all_close_on_device_gives_the_hosts_verdict():
    import ml_dtypes

    a = rng.integers(0, 0x70, size=(24, 40), dtype=np.uint8)
    b = a.copy()
    qtl.assert_fp8_all_close(Producer(a), Producer(b))
    b[:, :8] ^= 0x80  # sign flips
    with pytest.raises(AssertionError) as host_err:
        qtl.assert_fp8_all_close(a.view(ml_dtypes.float8_e4m3fn), b.view(ml_dtypes.float8_e4m3fn))
    with pytest.raises(AssertionError) as dev_err:
        qtl.assert_fp8_all_close(Producer(a), Producer(b))
    assert str(dev_err.value) == str(host_err.value)
    with pytest.raises(qtl.InvalidValueError, match=r"a is on cuda:0 but b on the host"):
        qtl.assert_fp8_all_close(Producer(a), b)


# --- Marlin scales and the inverse repack ---------------------------------------------------------

@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("size_k,group_size,a8", [(256, 64, False), (256, -1, False), (128, 128, False),
                                                  (256, 64, True)])
def test_marlin_permute_scales_on_device_equals_host(dtype, size_k, group_size, a8):
    n = 128
    rows = size_k // group_size if 0 < group_size < size_k else 1
    s = float_array((rows, n), dtype)
    host = qtl.marlin_permute_scales(s, size_k, n, group_size, is_a_8bit=a8)
    dev = qtl.marlin_permute_scales(to_device(s), size_k, n, group_size, is_a_8bit=a8)
    assert_same(sim.to_host(dev), np.asarray(host).view(np.uint16) if dtype == "bfloat16" else host)
    with pytest.raises(qtl.ShapeError, match=r"is not a multiple of"):
        qtl.marlin_permute_scales(to_device(s[:, :60]), size_k, 60, group_size, is_a_8bit=a8)


@needs_sim
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("a8,act_order", [(False, False), (False, True), (True, False)])
def test_unmarlin_gptq_on_device_equals_host(bits, a8, act_order):
    k, n = 128, 128
    words = rng.integers(-2**31, 2**31, size=(k * bits // 32, n), dtype=np.int64).astype(np.int32)
    perm = rng.permutation(k).astype(np.int32) if act_order else np.zeros(0, dtype=np.int32)
    marlin = np.asarray(qtl.gptq_marlin_repack(words, perm, k, n, bits, is_a_8bit=a8))
    host = qtl.unmarlin_gptq(marlin, perm, k, n, bits, is_a_8bit=a8)
    assert_same(on_device(qtl.unmarlin_gptq, marlin, perm, k, n, bits, is_a_8bit=a8), host)
    assert_same(host, words)
    if act_order:
        bad = perm.copy()
        bad[1] = bad[0]
        with pytest.raises(qtl.InvalidValueError, match=r"sort_indices\[1\] = \d+ repeats an earlier entry"):
            qtl.unmarlin_gptq(Producer(marlin), Producer(bad), k, n, bits)
        with pytest.raises(qtl.InvalidValueError, match=r"marlin_q_w is on cuda:0 but perm on the host"):
            qtl.unmarlin_gptq(Producer(marlin), perm, k, n, bits)


# --- the FP8 block converters ---------------------------------------------------------------------

def fp8_block_weight(shape, block):
    """E4M3 codes (no NaN) of `shape` ([N, K] or [E, N, K]) and float32 block scales for `block`."""
    codes = rng.integers(0, 256, size=shape, dtype=np.uint8)
    codes[codes & 0x7F == 0x7F] = 0
    lead = shape[:-2]
    nb, kb = -(-shape[-2] // block[0]), -(-shape[-1] // block[1])
    scales = (rng.random(lead + (nb, kb)) * 0.01 + 1e-4).astype(np.float32)
    return codes, scales


@needs_sim
@pytest.mark.parametrize("shape,block", [((200, 384), (128, 128)), ((2, 64, 96), (32, 64)), ((0, 128), (128, 128))])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_block_quant_dequant_on_device_equals_host(shape, block, dtype):
    codes, scales = fp8_block_weight(shape, block)
    host = np.asarray(qtl.block_quant_dequant(codes, scales, block, dtype))
    dev = qtl.block_quant_dequant(Producer(codes), Producer(scales), block, dtype)
    assert_same(sim.to_host(dev), host.view(np.uint16) if dtype == "bfloat16" else host)
    with pytest.raises(qtl.InvalidValueError, match=r"x_q_block is on cuda:0 but x_s on the host"):
        qtl.block_quant_dequant(Producer(codes), scales, block, dtype)


@needs_sim
@pytest.mark.parametrize("shape,block", [((200, 384), (128, 128)), ((2, 64, 96), (32, 64))])
@pytest.mark.parametrize("use_ue8m0,rule", [(False, "log2"), (True, "log2"), (True, "bits")])
def test_per_block_cast_to_fp8_on_device_equals_host(shape, block, use_ue8m0, rule):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x[..., :block[0], :block[1]] = 0  # an all-zero block
    host = qtl.per_block_cast_to_fp8(x, block, use_ue8m0, ue8m0_rule=rule)
    assert_all_same(qtl.per_block_cast_to_fp8(Producer(x), block, use_ue8m0, ue8m0_rule=rule), host)
    with pytest.raises(qtl.DTypeError, match=r"x: dtype float16 is not supported here; expected float32"):
        qtl.per_block_cast_to_fp8(Producer(x.astype(np.float16)), block, use_ue8m0)


@needs_sim
@pytest.mark.parametrize("shape", [(256, 384), (2, 130, 128)])
@pytest.mark.parametrize("recipe", ["sglang", "sglang-legacy", "vllm"])
@pytest.mark.parametrize("canonical", [False, True])
def test_requant_weight_ue8m0_on_device_equals_host(shape, recipe, canonical):
    codes, scales = fp8_block_weight(shape, (128, 128))
    host = qtl.requant_weight_ue8m0(codes, scales, recipe=recipe, canonical=canonical)
    dev = qtl.requant_weight_ue8m0(Producer(codes), Producer(scales), recipe=recipe, canonical=canonical)
    assert_all_same(dev, host)
    with pytest.raises(qtl.InvalidValueError, match=r"recipe = 'nope' is not one of"):
        qtl.requant_weight_ue8m0(Producer(codes), Producer(scales), recipe="nope")


@needs_sim
@pytest.mark.parametrize("groups,mn,kb", [(None, 200, 7), (3, 128, 4), (None, 1, 1)])
def test_deepgemm_unpack_ue8m0_on_device_equals_host(groups, mn, kb):
    rows = -(-mn // 128)
    shape = (rows, kb) if groups is None else (groups, rows, kb)
    sf = np.exp2(rng.integers(-20, 20, size=shape)).astype(np.float32)
    packed = np.asarray(qtl.deepgemm_pack_ue8m0(sf, mn))
    host = qtl.deepgemm_unpack_ue8m0(packed, kb)
    assert_same(on_device(qtl.deepgemm_unpack_ue8m0, packed, kb), host)
    with pytest.raises(qtl.ShapeError, match=r"does not fit P"):
        qtl.deepgemm_unpack_ue8m0(Producer(packed), 4 * packed.shape[-2] + 1)


# --- MoE preparations -----------------------------------------------------------------------------

def random_bytes(*shape):
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


@needs_sim
@pytest.mark.parametrize("hidden,inter,experts,gated", [(128, 64, 2, True), (256, 128, 3, False), (128, 64, 0, True)])
def test_prepare_static_weights_for_trtllm_fp4_moe_on_device_equals_host(hidden, inter, experts, gated):
    r1 = (2 if gated else 1) * inter
    args = (random_bytes(experts, r1, hidden // 2), random_bytes(experts, hidden, inter // 2),
            random_bytes(experts, r1, hidden // 16), random_bytes(experts, hidden, inter // 16))
    host = qtl.prepare_static_weights_for_trtllm_fp4_moe(*args, hidden, inter, experts, gated)
    assert_all_same(qtl.prepare_static_weights_for_trtllm_fp4_moe(*(Producer(a) for a in args), hidden, inter,
                                                                  experts, gated), host)
    with pytest.raises(qtl.InvalidValueError, match=r"gemm1_weights is on cuda:0 but gemm2_weights on the host"):
        qtl.prepare_static_weights_for_trtllm_fp4_moe(Producer(args[0]), *args[1:], hidden, inter, experts, gated)


@needs_sim
@pytest.mark.parametrize("hidden_dim", [False, True])
@pytest.mark.parametrize("gated", [True, False])
def test_align_fp4_moe_on_device_equals_host(hidden_dim, gated):
    e, h, i = 2, 64, 48
    r1 = (2 if gated else 1) * i
    args = (random_bytes(e, r1, h // 2), random_bytes(e, r1, h // 16), random_bytes(e, h, i // 2),
            random_bytes(e, h, i // 16))
    if hidden_dim:
        host = qtl.align_fp4_moe_hidden_dim_for_fi(*args, min_alignment=128)
        dev = qtl.align_fp4_moe_hidden_dim_for_fi(*(Producer(a) for a in args), min_alignment=128)
    else:
        host = qtl.align_fp4_moe_weights_for_fi(*args, gated, min_alignment=32)
        dev = qtl.align_fp4_moe_weights_for_fi(*(Producer(a) for a in args), gated, min_alignment=32)
    assert dev[4] == host[4]
    assert_all_same(dev[:4], host[:4])


@needs_sim
@pytest.mark.parametrize("shape,alignment", [((30, 24), 32), ((64, 64), 32), ((5, 8), 16)])
def test_pad_nvfp4_weight_for_cutlass_on_device_equals_host(shape, alignment):
    w = random_bytes(*shape)
    host = qtl.pad_nvfp4_weight_for_cutlass(w, alignment)
    dev = qtl.pad_nvfp4_weight_for_cutlass(Producer(w), alignment)
    assert dev[1] == host[1]
    assert_same(sim.to_host(dev[0]), host[0])


@needs_sim
@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.uint8])
@pytest.mark.parametrize("shape,dim", [((4, 256), -1), ((256, 3), 0), ((2, 128, 5), 1)])
def test_interleave_linear_and_gate_on_device_equals_host(dtype, shape, dim):
    x = rng.integers(0, 100, size=shape).astype(dtype)
    assert_same(on_device(qtl.interleave_linear_and_gate, x, 64, dim), qtl.interleave_linear_and_gate(x, 64, dim))
    with pytest.raises(qtl.ShapeError, match=r"must be divisible by"):
        qtl.interleave_linear_and_gate(Producer(x), 48, dim)


@needs_sim
@pytest.mark.parametrize("activation", ["silu", "swigluoai"])
def test_reorder_w13_to_w31_on_device_equals_host(activation):
    w13, s = random_bytes(3, 64, 32), random_bytes(3, 64, 4)
    host = qtl.reorder_w13_to_w31_for_flashinfer_cutedsl(activation, w13, s)
    assert_all_same(qtl.reorder_w13_to_w31_for_flashinfer_cutedsl(activation, Producer(w13), Producer(s)), host)
    with pytest.raises(qtl.ShapeError, match=r"odd number of rows"):
        qtl.reorder_w13_to_w31_for_flashinfer_cutedsl(activation, Producer(w13[:, :63]), Producer(s[:, :63]))


# the two-tensor trtllm-gen layouts and their inverses: (forward, inverse, the two tensors' [E, R, K], dtype)
PAIR_LAYOUTS = [
    ("deepseek_fp8", lambda a, b, g: qtl.shuffle_deepseek_fp8_moe_weights(a, b),
     lambda a, b, g: qtl.unshuffle_deepseek_fp8_moe_weights(a, b), ((2, 48, 256), (2, 32, 128)), np.uint8),
    ("fp8_per_tensor", lambda a, b, g: qtl.rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(a, b, g),
     lambda a, b, g: qtl.unrotate_weights_for_fi_trtllm_fp8_per_tensor_moe(a, b, g), ((2, 64, 96), (2, 96, 32)),
     np.uint8),
    ("bf16_block", lambda a, b, g: qtl.convert_moe_weights_to_flashinfer_trtllm_block_layout(None, a, b, g),
     lambda a, b, g: qtl.convert_moe_weights_from_flashinfer_trtllm_block_layout(a, b, g), ((3, 64, 128), (3, 64, 64)),
     "bfloat16"),
]


@needs_sim
@pytest.mark.parametrize("name,forward,inverse,shapes,dtype", PAIR_LAYOUTS, ids=[p[0] for p in PAIR_LAYOUTS])
@pytest.mark.parametrize("gated", [True, False])
def test_trtllm_pair_layouts_and_inverses_on_device_equal_host(name, forward, inverse, shapes, dtype, gated):
    a, b = (random_bytes(*s) if dtype == np.uint8 else float_array(s, dtype) for s in shapes)
    host = forward(a, b, gated)
    dev = forward(to_device(a), to_device(b), gated)
    assert_all_same(dev, host)
    back = inverse(*dev, gated)  # device in, device out
    assert_all_same(back, inverse(*host, gated))
    assert_all_same(back, (a, b))
    with pytest.raises(qtl.InvalidValueError, match=r"is on cuda:0 but .* on the host"):
        forward(to_device(a), b, gated)
    with pytest.raises(qtl.InvalidValueError, match=r"is on the host but .* on cuda:0"):
        inverse(host[0], dev[1], gated)
    with pytest.raises(qtl.ShapeError, match=r"multiple of"):  # 8 rows: no whole shuffle block
        forward(to_device(a[:, :8]), to_device(b), gated)


@needs_sim
@pytest.mark.parametrize("gated", [True, False])
def test_shuffle_mxfp8_moe_weights_on_device_equals_host(gated):
    args = (random_bytes(2, 256, 64), random_bytes(2, 128, 128), random_bytes(2, 256, 2 * 4),
            random_bytes(2, 128, 4))
    host = qtl.shuffle_mxfp8_moe_weights(*args, gated)
    dev = qtl.shuffle_mxfp8_moe_weights(*(Producer(x) for x in args), gated)
    assert_all_same(dev, host)
    assert_all_same(qtl.unshuffle_mxfp8_moe_weights(*dev, gated), args)  # the inverse, on the device
    with pytest.raises(qtl.InvalidValueError, match=r"w13 is on cuda:0 but w2_scale on the host"):
        qtl.shuffle_mxfp8_moe_weights(*(Producer(x) for x in args[:3]), args[3], gated)
    with pytest.raises(qtl.ShapeError, match=r"multiple of 128"):
        qtl.shuffle_mxfp8_moe_weights(Producer(args[0][:, :64]), Producer(args[1]), Producer(args[2][:, :64]),
                                      Producer(args[3]), gated)


@needs_sim
@pytest.mark.parametrize("dtype", [np.int32, np.uint8])
def test_trtllm_mxint4_moe_and_its_inverse_on_device_equal_host(dtype):
    e, h, i = 2, 512, 256
    args = (random_bytes(e, 2 * i, h // 2).view(dtype), float_array((e, 2 * i, h // 32), "bfloat16"),
            random_bytes(e, h, i // 2).view(dtype), float_array((e, h, i // 32), "bfloat16"))
    keys = ["gemm1_weights", "gemm1_scales", "gemm2_weights", "gemm2_scales"]
    host = qtl.prepare_static_weights_for_trtllm_mxint4_moe(*args)
    dev = qtl.prepare_static_weights_for_trtllm_mxint4_moe(*(to_device(x) for x in args))
    assert_all_same([dev[k] for k in keys], [host[k] for k in keys])
    back = qtl.unprepare_static_weights_for_trtllm_mxint4_moe(*(dev[k] for k in keys), uint4b8=dtype == np.int32)
    assert_all_same([back[k] for k in keys], args)
    with pytest.raises(qtl.InvalidValueError, match=r"gemm1_weights is on cuda:0 but gemm2_weights on the host"):
        qtl.prepare_static_weights_for_trtllm_mxint4_moe(to_device(args[0]), to_device(args[1]), *args[2:])
    with pytest.raises(qtl.ShapeError, match=r"multiples of 256"):
        qtl.prepare_static_weights_for_trtllm_mxint4_moe(*(to_device(x[:, :256]) for x in args))
    with pytest.raises(qtl.ShapeError, match=r"gemm2_scales has shape"):
        qtl.unprepare_static_weights_for_trtllm_mxint4_moe(dev["gemm1_weights"], dev["gemm1_scales"],
                                                           dev["gemm2_weights"], dev["gemm1_scales"])


@needs_sim
def test_trtllm_layouts_and_w4a8_run_on_the_callers_stream():
    args = [Producer(x) for x in (random_bytes(1, 128, 32), random_bytes(1, 128, 32), random_bytes(1, 128, 4),
                                  random_bytes(1, 128, 4))]
    s = Producer(np.abs(float_array((4, 8), np.float32)))
    with qtl.cuda_stream(0x7000):
        qtl.shuffle_mxfp8_moe_weights(*args, True)
        assert [a.streams[-1] for a in args] == [0x7000] * 4 and sim.last_stream() == 0x7000
        qtl.convert_bf16_scales_to_fp8("divide", s)  # the scales read back on that stream, then the launch
        assert s.streams[-1] == 0x7000 and sim.last_stream() == 0x7000


# --- W4A8 -----------------------------------------------------------------------------------------

def int4_words(*shape):
    return rng.integers(-2**31, 2**31, size=shape, dtype=np.int64).astype(np.int32)


@needs_sim
@pytest.mark.parametrize("fn,shape", [(qtl.cutlass_encode_and_reorder_int4b, (48, 12)),
                                      (qtl.cutlass_encode_and_reorder_int4b_grouped, (3, 32, 32)),
                                      (qtl.cutlass_decode_and_unreorder_int4b, (48, 12)),
                                      (qtl.cutlass_decode_and_unreorder_int4b, (2, 16, 8))],
                         ids=["plain", "grouped", "inverse", "inverse-grouped"])
def test_int4b_reorders_on_device_equal_host(fn, shape):
    b = int4_words(*shape)
    assert_same(on_device(fn, b), fn(b))
    with pytest.raises(qtl.ShapeError, match=r"N = 20 is not a multiple of 16"):
        fn(Producer(int4_words(*shape[:-2], 20, shape[-1])))


@needs_sim
def test_w4a8_scale_ops_on_device_equal_host():
    s = rng.integers(0, 0x7F, size=(6, 5), dtype=np.uint8)
    assert_same(on_device(qtl.cutlass_pack_scale_fp8, s), qtl.cutlass_pack_scale_fp8(s))
    w = int4_words(5, 7)
    dev = Producer(w)
    out = qtl.convert_packed_uint4b8_to_signed_int4_inplace(dev)
    assert out is dev  # the argument, converted in place
    assert_same(sim.to_host(dev.array), qtl.convert_packed_uint4b8_to_signed_int4_inplace(w.copy()))


@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("quant_fp8", ["divide", "reciprocal"])
def test_convert_bf16_scales_to_fp8_on_device_equals_host(dtype, quant_fp8):
    s = np.abs(float_array((3, 4, 16), dtype, 0.01))
    host = qtl.convert_bf16_scales_to_fp8(quant_fp8, s)
    assert_all_same(qtl.convert_bf16_scales_to_fp8(quant_fp8, to_device(s)), host)
    s[1, 2, 3] = np.nan
    with pytest.raises(qtl.InvalidValueError, match=r"scale \(6, 3\) is nan; the scales must be finite"):
        qtl.convert_bf16_scales_to_fp8(quant_fp8, to_device(s))


@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("pack", [1, 4])
def test_interleave_scales_on_device_equals_host(dtype, pack):
    s = float_array((2, 6, 8), dtype)
    host = qtl.interleave_scales(s, pack)
    dev = qtl.interleave_scales(to_device(s), pack)
    assert_same(sim.to_host(dev), host)
    assert_same(sim.to_host(qtl.deinterleave_scales(dev, pack)), s)
    with pytest.raises(qtl.ShapeError, match=r"scale K groups 8 must be divisible by scale_pack 3"):
        qtl.interleave_scales(to_device(s), 3)


# --- checkpoint quantizers ------------------------------------------------------------------------

@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("bits,group_size,symmetric", [(4, 128, True), (8, -1, True), (4, 32, False), (8, 64, False)])
def test_ct_pack_quantize_on_device_equals_host(dtype, bits, group_size, symmetric):
    w = float_array((24, 256), dtype)
    host = qtl.ct_pack_quantize(w, bits, group_size, symmetric)
    assert_all_same(qtl.ct_pack_quantize(to_device(w), bits, group_size, symmetric),
                    tuple(None if h is None else np.asarray(h).view(np.uint16) if dtype == "bfloat16" and i == 1
                          else h for i, h in enumerate(host)))


@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("bits,group_size,symmetric", [(4, 128, True), (8, 64, False), (4, 32, False)])
def test_gptq_checkpoint_quantize_on_device_equals_host(dtype, bits, group_size, symmetric):
    w = float_array((40, 256), dtype)
    host = qtl.gptq_checkpoint_quantize(w, bits, group_size, symmetric)
    assert_all_same(qtl.gptq_checkpoint_quantize(to_device(w), bits, group_size, symmetric), host)


@needs_sim
@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4", "mxfp8"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
def test_ct_block_quantize_on_device_equals_host(fmt, dtype):
    w = float_array((24, 128), dtype, scale=10.0)
    w[0, :32] = 0
    fn = getattr(qtl, "ct_%s_quantize" % fmt)
    assert_all_same(fn(to_device(w)), fn(w))
    if fmt == "nvfp4":
        assert_all_same(fn(to_device(w), 1234.5), fn(w, 1234.5))
        with pytest.raises(qtl.InvalidValueError, match=r"global scale must be finite and > 0"):
            fn(to_device(w), -2.0)


@needs_sim
def test_checkpoint_quantizers_on_device_refuse_what_the_host_refuses():
    w = rng.standard_normal((16, 128)).astype(np.float32)
    w[3, 7] = np.nan
    for fn, args in [(qtl.ct_pack_quantize, (4, 32)), (qtl.gptq_checkpoint_quantize, (4, 32)),
                     (qtl.ct_mxfp4_quantize, ()), (qtl.ct_mxfp8_quantize, ())]:
        with pytest.raises(qtl.InvalidValueError):
            fn(w, *args)
        with pytest.raises(qtl.InvalidValueError, match=r"weight holds a NaN or infinite value"):
            fn(Producer(w), *args)
        # quantized as the host does; a NaN scale's payload is the platform's (CUDA's canonical NaN)
        for d, h in zip(fn(Producer(w), *args, allow_nonfinite=True), fn(w, *args, allow_nonfinite=True)):
            if h is None:
                assert d is None
                continue
            d, h = sim.to_host(d), np.asarray(h)
            if h.dtype.kind == "f":
                assert np.array_equal(d, h, equal_nan=True) and np.isnan(h).any()
            else:
                assert_same(d, h)
    with pytest.raises(qtl.ShapeError, match=r"group size 48 must divide K = 128"):
        qtl.gptq_checkpoint_quantize(Producer(w), 4, 48)
    big = np.full((4, 128), 1e30, dtype=np.float32)
    big[:, ::2] = -1e30
    with pytest.raises(qtl.InvalidValueError, match=r"GPTQ scale"):
        qtl.gptq_checkpoint_quantize(big, 4, 32)
    with pytest.raises(qtl.InvalidValueError, match=r"GPTQ scale does not fit float16"):
        qtl.gptq_checkpoint_quantize(Producer(big), 4, 32)


# --- refusals of the data on the device: the converters and fp8_checkpoint_quantize ---------------

def raises_like_host(fn, *args, **kwargs):
    """fn raises on device copies of the array arguments what it raises on the host: the same class
    and message."""
    with pytest.raises(qtl.Error) as host:
        fn(*args, **kwargs)
    with pytest.raises(qtl.Error) as dev:
        fn(*[to_device(a) if isinstance(a, np.ndarray) else a for a in args], **kwargs)
    assert type(dev.value) is type(host.value) and str(dev.value) == str(host.value)


@needs_sim
@pytest.mark.parametrize("groups,mn,kb", [(None, 200, 7), (3, 128, 4)])
def test_deepgemm_pack_ue8m0_on_device_equals_host_and_refuses_as_it(groups, mn, kb):
    rows = -(-mn // 128)
    sf = np.exp2(rng.integers(-20, 20, size=(rows, kb) if groups is None else (groups, rows, kb))).astype(np.float32)
    assert_same(on_device(qtl.deepgemm_pack_ue8m0, sf, mn), qtl.deepgemm_pack_ue8m0(sf, mn))
    sf.flat[-1] = 0.0
    sf.flat[5] = 0.75
    raises_like_host(qtl.deepgemm_pack_ue8m0, sf, mn)


@needs_sim
@pytest.mark.parametrize("shape", [(256, 384), (2, 130, 128)])
def test_deepgemm_post_process_e8m0_on_device_equals_host_and_refuses_as_it(shape):
    w = random_bytes(*shape)  # e4m3 codes (not read)
    s = rng.integers(1, 255, size=shape[:-2] + (-(-shape[-2] // 128), -(-shape[-1] // 128)), dtype=np.uint8)
    host = qtl.deepgemm_post_process_e8m0(w, s)
    dev = qtl.deepgemm_post_process_e8m0(Producer(w), Producer(s))
    assert_same(sim.to_host(dev[1]), host[1])
    s.flat[-1] = 0
    s.flat[1] = 255
    raises_like_host(qtl.deepgemm_post_process_e8m0, w, s)
    with pytest.raises(qtl.InvalidValueError, match=r"weight is on cuda:0 but scale on the host"):
        qtl.deepgemm_post_process_e8m0(Producer(w), s)


@needs_sim
@pytest.mark.parametrize("shape,block", [((200, 384), (128, 128)), ((2, 64, 96), (32, 64))])
def test_fp8_block_to_mxfp4_on_device_equals_host_and_refuses_as_it(shape, block):
    codes, scales = fp8_block_weight(shape, block)
    host = qtl.fp8_block_to_mxfp4(codes, scales, block)
    assert_all_same(qtl.fp8_block_to_mxfp4(Producer(codes), Producer(scales), block), host)
    nan = codes.copy()
    nan[..., -1, 5] = 0x7F
    nan[..., 3, -1] = 0xFF  # the first in row-major order
    raises_like_host(qtl.fp8_block_to_mxfp4, nan, scales, block)
    inf = scales.copy()
    inf[..., -1, -1] = np.inf
    raises_like_host(qtl.fp8_block_to_mxfp4, codes, inf, block)
    with pytest.raises(qtl.InvalidValueError, match=r"weight is on cuda:0 but weight_scale_inv on the host"):
        qtl.fp8_block_to_mxfp4(Producer(codes), scales, block)


@needs_sim
@pytest.mark.parametrize("shape,block", [((200, 384), (128, 128)), ((2, 40, 48), (128, 128))])
def test_fp8_block_to_nvfp4_on_device_equals_host_and_refuses_as_it(shape, block):
    codes, scales = fp8_block_weight(shape, block)
    for gs in [None, 1234.5]:
        host = qtl.fp8_block_to_nvfp4(codes, scales, block, gs)
        assert_all_same(qtl.fp8_block_to_nvfp4(Producer(codes), Producer(scales), block, gs), host)
    nan = codes.copy()
    nan[..., 5, -1] = 0x7F  # the first element, in a later block where there are several
    nan[..., 30, 0] = 0xFF
    for gs in [None, 1234.5]:  # the amax pass names the block, the conversion the element
        raises_like_host(qtl.fp8_block_to_nvfp4, nan, scales, block, gs)
    raises_like_host(qtl.fp8_block_to_nvfp4, codes, scales, block, -1.0)
    with pytest.raises(qtl.InvalidValueError, match=r"weight is on cuda:0 but weight_scale_inv on the host"):
        qtl.fp8_block_to_nvfp4(Producer(codes), scales, block)


@needs_sim
@pytest.mark.parametrize("shape", [(256, 128), (2, 130, 64)])
def test_cast_e2m1fn_to_e4m3fn_on_device_equals_host_and_refuses_as_it(shape):
    x = random_bytes(*shape)
    s = rng.integers(100, 110, size=shape[:-1] + (shape[-1] // 16,), dtype=np.uint8)
    assert_all_same(qtl.cast_e2m1fn_to_e4m3fn(Producer(x), Producer(s)), qtl.cast_e2m1fn_to_e4m3fn(x, s))
    far = s.copy()
    far[..., -1, 3] = 1  # its nonzero codes lie far below the block's largest scale
    raises_like_host(qtl.cast_e2m1fn_to_e4m3fn, x, far)
    nan = far.copy()
    nan[..., 0, -1] = 0xFF  # a NaN scale in an earlier block
    raises_like_host(qtl.cast_e2m1fn_to_e4m3fn, x, nan)
    with pytest.raises(qtl.InvalidValueError, match=r"x is on cuda:0 but scale on the host"):
        qtl.cast_e2m1fn_to_e4m3fn(Producer(x), s)


@needs_sim
@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("scheme,rule", [("tensor", "hf"), ("channel", "hf"), ("block", "hf"), ("block", "ct")])
def test_fp8_checkpoint_quantize_on_device_equals_host_and_refuses_as_it(dtype, scheme, rule):
    w = float_array((130, 200), dtype)
    w[:128, 128:] = 0  # an all-zero block
    assert_all_same(qtl.fp8_checkpoint_quantize(to_device(w), scheme, rule), qtl.fp8_checkpoint_quantize(w, scheme, rule))
    w[3, 150] = np.inf  # the first in row-major order
    w[100, 5] = np.nan  # the first by blocks
    raises_like_host(qtl.fp8_checkpoint_quantize, w, scheme, rule)
    assert_all_same(qtl.fp8_checkpoint_quantize(to_device(w), scheme, rule, allow_nonfinite=True),
                    qtl.fp8_checkpoint_quantize(w, scheme, rule, allow_nonfinite=True))
