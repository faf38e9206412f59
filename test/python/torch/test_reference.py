"""The torch tier: the reference Python itself (reference_loader: sglang's utils with vLLM's real
ScalarType) and qtl on the same random inputs, fp32/fp16/bf16, equal bit for bit, and qtl raising
where the reference raises. Then the drop-in test: the reference module's quantize_weights and
permute_rows replaced by qtl's, its own caller gptq_quantize_weights run. scaled_fp8_quant and
the TRT-LLM preparation call GPU code in the reference: the golden tier checks them.

Run by scripts/python-heavy.sh (torch from PyPI); skipped where the reference cannot be loaded."""

import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import reference_loader  # noqa: E402

import qtl  # noqa: E402

if reference_loader.missing():
    pytest.skip(reference_loader.missing(), allow_module_level=True)
ref = reference_loader.load()

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(128, 64), (256, 32), (64, 128)]


def bits_of(t):
    """A tensor's bytes as an integer tensor (bitwise comparison, NaN included)."""
    t = t.contiguous()
    return t.view({4: torch.int32, 2: torch.int16, 1: torch.uint8, 8: torch.int64}[t.element_size()])


def same(a, b):
    if a is None or b is None:
        return a is None and b is None
    assert isinstance(a, torch.Tensor), type(a)
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits_of(a), bits_of(b))


def rand(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 0.05).to(dtype)


def rtype(name):
    return getattr(ref.scalar_types, name)


QUANT = [("uint4b8", 128, False), ("uint4b8", None, False), ("uint8b128", -1, False), ("int4", 32, False),
         ("int8", 64, False), ("uint4", 32, True), ("uint8", -1, True), ("uint2b2", 32, False), ("uint3b4", 64, False)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("qtype,group,zp", QUANT, ids=str)
def test_quantize_weights(dtype, shape, qtype, group, zp):
    w = rand(shape, dtype, 1)
    want = ref.quantize_weights(w, rtype(qtype), group, zp)
    # vLLM's ScalarType passed straight in: the drop-in call.
    got = qtl.quantize_weights(w, rtype(qtype), group, zp)
    assert all(same(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("qtype", ["uint4b8", "uint8b128"])
@pytest.mark.parametrize("group,act", [(32, True), (128, False), (-1, False), (64, True)])
def test_gptq_quantize_weights(dtype, qtype, group, act):
    w = rand((256, 64), dtype, 2)
    perm = torch.randperm(256, generator=torch.Generator().manual_seed(3)) if act else None
    want = ref.gptq_quantize_weights(w, rtype(qtype), group, act, perm)
    got = qtl.gptq_quantize_weights(w, rtype(qtype), group, act, perm)
    assert all(same(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("shape", [(64, 64), (32, 128)], ids=str)
def test_pack_unpack(bits, shape):
    k, n = shape
    g = torch.Generator().manual_seed(bits)
    q = torch.randint(0, 1 << bits, shape, generator=g, dtype=torch.int32)
    assert same(qtl.pack_cols(q, bits, k, n), ref.pack_cols(q, bits, k, n))
    assert same(qtl.pack_rows(q, bits, k, n), ref.pack_rows(q, bits, k, n))
    p = ref.pack_cols(q, bits, k, n)
    assert same(qtl.unpack_cols(p, bits, k, n), ref.unpack_cols(p, bits, k, n))


def test_pack_errors_where_the_reference_raises():
    q = torch.zeros((8, 12), dtype=torch.int32)
    for f in ("pack_cols", "unpack_cols"):
        with pytest.raises(AssertionError):
            getattr(ref, f)(q, 4, 8, 12)
        with pytest.raises(qtl.Error):
            getattr(qtl, f)(q, 4, 8, 12)
    q_rows = torch.zeros((12, 8), dtype=torch.int32)  # 12 rows: not a multiple of the pack factor 8
    with pytest.raises(AssertionError):
        ref.pack_rows(q_rows, 4, 12, 8)
    with pytest.raises(qtl.Error):
        qtl.pack_rows(q_rows, 4, 12, 8)
    with pytest.raises(AssertionError):
        ref.pack_cols(q, 4, 8, 16)
    with pytest.raises(qtl.Error):
        qtl.pack_cols(q, 4, 8, 16)
    w = rand((96, 8), torch.float16, 4)
    with pytest.raises(Exception):
        ref.quantize_weights(w, rtype("uint4b8"), 64)
    with pytest.raises(qtl.ShapeError):
        qtl.quantize_weights(w, rtype("uint4b8"), 64)
    with pytest.raises(AssertionError):
        ref.gptq_quantize_weights(w, rtype("uint4"), 32, False)
    with pytest.raises(qtl.UnsupportedError):
        qtl.gptq_quantize_weights(w, rtype("uint4"), 32, False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_permute_and_sort(dtype):
    k, n = 128, 32
    w_ref = rand((k, n), dtype, 5)
    q_w = torch.randint(0, 16, (k, n), generator=torch.Generator().manual_seed(6), dtype=torch.int32)
    perm = torch.randperm(k, generator=torch.Generator().manual_seed(7))
    assert all(same(a, b) for a, b in zip(qtl.permute_rows(q_w, w_ref, 32, perm),
                                          ref.permute_rows(q_w, w_ref, 32, perm)))
    keys = torch.randperm(k, generator=torch.Generator().manual_seed(8)).to(torch.int32)  # distinct: argsort is unique
    assert all(same(a, b) for a, b in zip(qtl.sort_weights(q_w, keys), ref.sort_weights(q_w, keys)))


@pytest.mark.parametrize("dtype", DTYPES + [torch.int32], ids=str)
def test_moe_layouts(dtype):
    x = rand((4, 64, 16), torch.float32, 9).to(dtype)
    assert same(qtl.swap_w13_to_w31(x), ref.swap_w13_to_w31(x))
    s = rand((4, 64, 2), torch.float32, 10)
    for dim in (-2, 1):
        assert all(same(a, b) for a, b in zip(qtl.reorder_w1w3_to_w3w1(x, s, dim), ref.reorder_w1w3_to_w3w1(x, s, dim)))
    s = rand((4, 2, 16), torch.float32, 10)
    assert all(same(a, b) for a, b in zip(qtl.reorder_w1w3_to_w3w1(x, s, -1), ref.reorder_w1w3_to_w3w1(x, s, -1)))
    with pytest.raises(ValueError):  # halves of different sizes: the reference's unpacking fails
        ref.reorder_w1w3_to_w3w1(x, rand((4, 64, 2), torch.float32, 10), -1)
    with pytest.raises(qtl.ShapeError):
        qtl.reorder_w1w3_to_w3w1(x, rand((4, 64, 2), torch.float32, 10), -1)


def test_scales():
    s = torch.tensor([0.5, 0.25, 2.0])
    assert same(qtl.convert_to_channelwise(s, [3, 5, 2]), ref.convert_to_channelwise(s, [3, 5, 2]))
    s0 = torch.tensor(0.125)
    assert same(qtl.convert_to_channelwise(s0, [4, 4]), ref.convert_to_channelwise(s0, [4, 4]))
    for x in (torch.tensor([1.0, 1.0 + 1e-9, 1.0]), torch.tensor([1.0, 1.1]), torch.tensor([2.0]),
              torch.tensor([1.0, float("nan")]), torch.tensor([float("inf"), float("inf")])):
        assert qtl.all_close_1d(x) == ref.all_close_1d(x)
    q = rand((16, 32), torch.float32, 11).to(torch.float8_e4m3fn)
    for inv in (0.5, torch.tensor(0.25), torch.tensor([3.0])):
        assert same(qtl.per_tensor_dequantize(q, inv), ref.per_tensor_dequantize(q, inv))


def test_torch_in_torch_out_zero_copy():
    w = rand((64, 32), torch.bfloat16, 12)
    w_ref, w_q, w_s, _ = qtl.quantize_weights(w, qtl.scalar_types.uint4b8, 32)
    assert isinstance(w_ref, torch.Tensor) and w_ref.dtype == torch.bfloat16 and w_q.dtype == torch.int32
    out, scale = qtl.scaled_fp8_quant(w)
    assert out.dtype == torch.float8_e4m3fn and scale.dtype == torch.float32
    weight = rand((16, 8), torch.float32, 13).to(torch.float8_e4m3fn)
    _, back = qtl.requantize_with_max_scale(weight, torch.tensor([0.5, 1.0]), [8, 8])
    assert back is weight  # in place, as the reference


def test_drop_in_gptq_caller():
    """The reference's gptq_quantize_weights running on qtl's quantize_weights and permute_rows."""
    w = rand((256, 64), torch.float16, 14)
    perm = torch.randperm(256, generator=torch.Generator().manual_seed(15))
    want = ref.gptq_quantize_weights(w, rtype("uint4b8"), 64, True, perm)
    saved = ref.quantize_weights, ref.permute_rows
    try:
        ref.quantize_weights, ref.permute_rows = qtl.quantize_weights, qtl.permute_rows
        got = ref.gptq_quantize_weights(w, rtype("uint4b8"), 64, True, perm)
    finally:
        ref.quantize_weights, ref.permute_rows = saved
    assert all(same(a, b) for a, b in zip(got, want))


# --- the rules, the fp8 comparison and the parameter helpers against the reference ---------

SKIP_CASES = [
    ("model.layers.0.mlp.gate_up_proj", ["mlp.gate"], {}),
    ("model.layers.0.mlp.gate", ["mlp.gate"], {}),
    ("model.layers.0.self_attn.qkv_proj", ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                                           "model.layers.0.self_attn.v_proj"], {}),
    ("model.layers.0.self_attn.qkv_proj", ["model.layers.0.self_attn.q_proj"], {}),
    ("model.layers.0.self_attn.fused", ["model.layers.0.self_attn.a"], {"fused": ["a", "b"]}),
    ("model.layers.0.mlp.gate_up_proj", ["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"], {}),
    ("model.layers.1.mlp.experts", ["model.layers.1.mlp.experts.3.w1"], {}),
    ("model.layers.10.self_attn.o_proj", ["model.layers.1"], {}),
    ("lm_head", ["lm_head."], {}),
]


@pytest.mark.parametrize("prefix,ignored,mapping", SKIP_CASES, ids=str)
def test_is_layer_skipped(prefix, ignored, mapping):
    try:
        want = ref.is_layer_skipped(prefix, ignored, mapping)
    except ValueError:
        with pytest.raises(ValueError):
            qtl.is_layer_skipped(prefix, ignored, mapping)
        return
    assert qtl.is_layer_skipped(prefix, ignored, mapping) == want


class _MarlinConfig:
    """The attributes the reference's override_config reads (sglang's GPTQMarlinConfig)."""

    def __init__(self, dynamic, bits=4, sym=True):
        self.weight_bits, self.group_size, self.desc_act, self.is_sym = bits, 128, False, sym
        self.dynamic = dynamic
        self.TYPE_MAP = {(4, True): ref.scalar_types.uint4b8, (8, True): ref.scalar_types.uint8b128}

    def get_name(self):
        return "gptq_marlin"


DYNAMIC = {"+:.*\\.1\\..*": {"bits": 8, "group_size": 64}, "-:.*down.*": {}, ".*\\.2\\..*": {"sym": False},
           ".*\\.3\\..*": {"bits": True, "desc_act": 1}}


@pytest.mark.parametrize("layer", ["model.layers.0.o_proj", "model.layers.1.down_proj", "model.layers.2.down_proj",
                                   "model.layers.2.o_proj", "model.layers.3.o_proj"])
def test_dynamic_override_and_override_config(layer):
    for key, default in ((None, None), ("bits", 4), ("group_size", 128), ("sym", True)):
        assert qtl.get_dynamic_override(_MarlinConfig(DYNAMIC), layer, key, default) == \
            ref.get_dynamic_override(_MarlinConfig(DYNAMIC), layer, key, default)
    a, b = _MarlinConfig(DYNAMIC), _MarlinConfig(DYNAMIC)
    try:
        ref.override_config(a, layer)
    except Exception as e:  # noqa: BLE001  the same exception type, then the same partial update
        with pytest.raises(type(e)):
            qtl.override_config(b, layer)
    else:
        qtl.override_config(b, layer)
    assert vars(a) == vars(b)


def test_assert_fp8_all_close_and_parameters():
    a = rand((32, 64), torch.float32, 16).to(torch.float8_e4m3fn)
    b = a.view(torch.uint8).clone()
    b[0, 0] ^= 1
    b = b.view(torch.float8_e4m3fn)
    ref.assert_fp8_all_close(a, b)
    qtl.assert_fp8_all_close(a, b)
    c = b.view(torch.uint8).clone()
    c[1, :] ^= 2
    c = c.view(torch.float8_e4m3fn)
    for f in (ref.assert_fp8_all_close, qtl.assert_fp8_all_close):
        with pytest.raises(AssertionError):
            f(a, c)
    old = torch.zeros(4, 4)
    qtl.update_tensor_inplace(old, torch.ones(4, 4))
    assert bool((old == 1).all())
    for impl in (ref, qtl):
        mod = torch.nn.Linear(4, 4, bias=False).requires_grad_(False)  # as engines' parameters
        ptr = mod.weight.data_ptr()
        # a Parameter of the same dtype and size: copied in place
        impl.replace_parameter(mod, "weight", torch.nn.Parameter(torch.full((4, 4), 2.0), requires_grad=False))
        assert mod.weight.data_ptr() == ptr and bool((mod.weight == 2).all())
        # a plain tensor of the same size is another type: re-registered (its storage), as the reference
        new = torch.full((4, 4), 3.0)
        impl.replace_parameter(mod, "weight", new)
        assert isinstance(mod.weight, torch.nn.Parameter) and mod.weight.data_ptr() == new.data_ptr()
        impl.replace_parameter(mod, "weight", torch.zeros(2, 8, dtype=torch.float16))  # re-registered
        assert isinstance(mod.weight, torch.nn.Parameter) and mod.weight.dtype == torch.float16
