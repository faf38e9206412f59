"""The safetensors container, QTL against the reference library (safetensors 0.8, Rust):
- the library reads every file QTL writes (every dtype, zero-size tensors, sharded indexes, the
  output of each `qtl quantize` format), and QTL reads what the library writes;
- QTL's read -> write of its own file is byte-identical;
- QTL's reader rejects exactly the malformed files the library rejects, on a hostile corpus
  generated here (one file per check of docs/spec/interop.md section 2.2, plus accepted edge cases).
"""
import json
import os
import re
import struct

import ml_dtypes as md
import numpy as np
import pytest
import safetensors
from safetensors.numpy import save_file

from qtl_interop import NP, QTL, load_any, load_info, qtl

DTYPES = ["F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0",
          "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL"]


def random_array(dtype, shape, rng):
    n = int(np.prod(shape))
    size = np.dtype(NP[dtype]).itemsize
    raw = rng.integers(0, 256, n * size, dtype=np.uint8)
    if dtype == "BOOL":
        raw = raw & 1
    return raw.view(NP[dtype]).reshape(shape)


def header_of(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return n, json.loads(f.read(n))


def check_container(path, format_pt=True):
    """What every consumer relies on: the library parses it (deserialize and safe_open), the
    metadata is str -> str with format pt (transformers refuses other metadata), the header keeps
    the data section 8-aligned. `format_pt=False`: the file must NOT have it (a pinned difference)."""
    tensors = load_any(path)
    info, meta = load_info(path)
    assert set(info) == set(tensors)
    meta = meta or {}
    assert (meta.get("format") == "pt") == format_pt, (path, meta)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    n, _ = header_of(path)
    assert n % 8 == 0, (path, n)
    return tensors


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# --- every dtype through QTL's reader and writer ---------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (4, 2, 5), (2, 0), (0, 3)])
def test_dtype_round_trip(tmp_path, dtype, shape):
    rng = np.random.default_rng(hash((dtype, shape)) & 0xFFFF)
    x = random_array(dtype, shape, rng)
    src = tmp_path / "lib.safetensors"
    save_file({"x": x}, str(src), metadata={"format": "pt"})
    # QTL reads the library's file and writes its own (swap-w13-to-w31 exchanges the halves of
    # dimension -2, any dtype); twice gives the input back.
    once, twice, thrice, again = (tmp_path / n for n in ("1.st", "2.st", "3.st", "4.st"))
    qtl("op", "swap-w13-to-w31", src, once)
    qtl("op", "swap-w13-to-w31", once, twice)
    # `qtl op` writes "format": "pt" as `qtl quantize` does (transformers' loader rejects a file
    # without it).
    a = check_container(once)["x"]
    b = check_container(twice)["x"]
    h = shape[-2] // 2
    assert same(a, np.concatenate([x[..., h:, :], x[..., :h, :]], axis=-2))
    assert same(b, x)
    # QTL's file -> QTL -> QTL: the same bytes (read and write are exact inverses).
    qtl("op", "swap-w13-to-w31", twice, thrice)
    qtl("op", "swap-w13-to-w31", thrice, again)
    assert twice.read_bytes() == again.read_bytes()


def test_qtl_writer_equals_reference_writer(tmp_path):
    """For one tensor and the same metadata, QTL's writer gives exactly the bytes of
    safetensors.numpy.save_file (same header JSON, key order and space padding)."""
    rng = np.random.default_rng(3)
    for dtype in DTYPES:
        for shape in [(2, 6), (2, 0), (3, 4, 1)]:
            x = random_array(dtype, shape, rng)
            lib, mid, out, ref = (tmp_path / n for n in ("lib.st", "mid.st", "out.st", "ref.st"))
            save_file({"x": x}, str(lib), metadata={"format": "pt"})
            qtl("op", "swap-w13-to-w31", lib, mid)
            qtl("op", "swap-w13-to-w31", mid, out)
            _, meta = load_info(out)
            save_file({"x": x}, str(ref), metadata=meta)
            assert out.read_bytes() == ref.read_bytes(), (dtype, shape)


def test_qtl_reads_what_the_library_writes(tmp_path):
    """Many tensors of every dtype in one file (the library orders them by alignment, then name):
    `qtl inspect` lists each with the library's dtype and shape."""
    rng = np.random.default_rng(7)
    tensors = {"t_%s_%d" % (d.lower(), i): random_array(d, shape, rng)
               for i, shape in enumerate([(3,), (2, 2), (0,), ()]) for d in DTYPES}
    p = tmp_path / "many.safetensors"
    save_file(tensors, str(p), metadata={"format": "pt", "note": "ünïcode ✓"})
    out = qtl("inspect", p).stdout
    for name, a in tensors.items():
        dt = next(k for k, v in NP.items() if np.dtype(v) == a.dtype)
        m = re.search(r"^\s*%s\s+(\S+)\s+\[([^\]]*)\]" % re.escape(name), out, re.M)
        assert m, (name, out)
        assert m.group(1) == dt
        assert m.group(2).replace(" ", "") == ",".join(map(str, a.shape))


# --- qtl quantize outputs -----------------------------------------------------------------------

def quantize_formats():
    """The (name, qtl quantize arguments) of every format this build's `qtl quantize` offers."""
    helptext = qtl("quantize", "--help").stdout
    m = re.search(r"--format TEXT:\{([^}]*)\}", helptext)
    offered = m.group(1).split(",") if m else []
    cases = []
    if "gptq" in offered:
        cases += [("gptq-int4", ["--format", "gptq", "--bits", "4", "--group-size", "64"]),
                  ("gptq-int4-asym", ["--format", "gptq", "--bits", "4", "--asym", "--group-size", "64"]),
                  ("gptq-int8", ["--format", "gptq", "--bits", "8", "--group-size", "-1"])]
    if "fp8" in offered:
        schemes = re.search(r"--fp8-scheme TEXT:\{([^}]*)\}", helptext).group(1).split(",")
        cases += [("fp8-" + s, ["--format", "fp8", "--fp8-scheme", s]) for s in schemes]
    for f in ("w4a16", "w8a16", "nvfp4", "mxfp4"):
        if f in offered:
            cases.append((f, ["--format", f]))
    return cases


def make_checkpoint(folder, shards, rng):
    """A tiny float checkpoint with the names of a 2-layer Llama (every linear K % 128 == 0),
    written by the reference library, sharded with an index when shards > 1."""
    names = {}
    for layer in range(2):
        p = "model.layers.%d." % layer
        for proj, shape in (("self_attn.q_proj", (128, 128)), ("self_attn.k_proj", (64, 128)),
                            ("self_attn.v_proj", (64, 128)), ("self_attn.o_proj", (128, 128)),
                            ("mlp.gate_proj", (256, 128)), ("mlp.up_proj", (256, 128)),
                            ("mlp.down_proj", (128, 256))):
            names[p + proj + ".weight"] = (rng.standard_normal(shape) * 0.05).astype(md.bfloat16)
        names[p + "input_layernorm.weight"] = np.ones(128, md.bfloat16)
    names["model.embed_tokens.weight"] = (rng.standard_normal((64, 128)) * 0.05).astype(md.bfloat16)
    names["lm_head.weight"] = (rng.standard_normal((64, 128)) * 0.05).astype(md.bfloat16)
    names["model.norm.weight"] = np.ones(128, md.bfloat16)
    os.makedirs(folder, exist_ok=True)
    items = sorted(names.items())
    if shards == 1:
        save_file(dict(items), os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    else:
        per = -(-len(items) // shards)
        wm = {}
        for s in range(shards):
            fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            part = dict(items[s * per:(s + 1) * per])
            save_file(part, os.path.join(folder, fn), metadata={"format": "pt"})
            wm.update({k: fn for k in part})
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(a.nbytes for a in names.values())},
                       "weight_map": wm}, f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
                   "num_hidden_layers": 2, "torch_dtype": "bfloat16"}, f)
    return names


def output_tensors(folder):
    """{name: array} of a qtl quantize output folder, checking the index against the shards."""
    files = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    assert files, folder
    tensors, where = {}, {}
    for fn in files:
        for k, v in check_container(os.path.join(folder, fn)).items():
            assert k not in tensors, "tensor %s in two shards" % k
            tensors[k] = v
            where[k] = fn
    index = os.path.join(folder, "model.safetensors.index.json")
    if len(files) > 1 or os.path.exists(index):
        with open(index) as f:
            wm = json.load(f)["weight_map"]
        assert wm == where, "index weight_map does not match the shards' tensors"
    return tensors


@pytest.mark.parametrize("shards", [1, 3])
@pytest.mark.parametrize("name,args", quantize_formats())
def test_quantize_output_reads_in_the_library(tmp_path, name, args, shards):
    src = tmp_path / "in"
    dense = make_checkpoint(src, shards, np.random.default_rng(11))
    out = tmp_path / "out"
    qtl("quantize", *args, "--threads", "1", src, out)
    tensors = output_tensors(out)
    # Every linear of the layers is quantized (some tensor of it changed name or dtype); the rest
    # is copied bit for bit.
    for k, a in dense.items():
        if ".layers." in k and k.endswith("proj.weight"):
            mod = k[: -len(".weight")]
            assert any(t.startswith(mod + ".") and (t != k or tensors[t].dtype != a.dtype) for t in tensors), k
        elif k in tensors:
            assert same(tensors[k], a), k
    # QTL reads its own output back (inspect recognises a scheme) through the index or the file.
    target = out / "model.safetensors.index.json" if shards > 1 else out / "model.safetensors"
    r = qtl("inspect", target)
    assert "none recognised" not in r.stdout, r.stdout
    cfg = json.loads((out / "config.json").read_text())
    assert "quantization_config" in cfg


# --- the hostile corpus -------------------------------------------------------------------------

def _file(header, data=b"", length=None):
    h = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h) if length is None else length) + h + data


def _t(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def hostile_corpus():
    """(name, bytes): malformed files, one per check of the reference reader, and edge cases the
    reference accepts. Generated, so the corpus is the same for both readers by construction."""
    ok = {"a": _t("F32", [2], 0, 8)}
    d8 = b"\x00" * 8
    c = [
        ("empty", b""),
        ("short_7_bytes", b"\x05\x00\x00\x00\x00\x00\x00"),
        ("header_len_too_large", struct.pack("<Q", 100_000_001) + b"{}"),
        ("header_len_huge", struct.pack("<Q", 2**64 - 1) + b"{}"),
        ("header_past_eof", _file(ok, d8, length=4096)),
        ("header_not_utf8", _file(b'{"\xff":1}')),
        ("header_not_json", _file(b"{not json}   ")),
        ("header_json_array", _file(b"[]")),
        ("unknown_dtype", _file({"a": _t("F8_E4M3FN", [2], 0, 2)}, b"\0\0")),
        ("dtype_lowercase", _file({"a": _t("f32", [2], 0, 8)}, d8)),
        ("metadata_value_not_string", _file({"__metadata__": {"format": 1}, **ok}, d8)),
        ("metadata_not_object", _file({"__metadata__": "pt", **ok}, d8)),
        ("shape_negative", _file({"a": _t("F32", [-2], 0, 8)}, d8)),
        ("shape_not_list", _file({"a": _t("F32", 2, 0, 8)}, d8)),
        ("shape_float", _file({"a": _t("F32", [2.0], 0, 8)}, d8)),
        ("offsets_three", _file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 8]}}, d8)),
        ("offsets_missing", _file({"a": {"dtype": "F32", "shape": [2]}}, d8)),
        ("dtype_missing", _file({"a": {"shape": [2], "data_offsets": [0, 8]}}, d8)),
        ("first_offset_not_zero", _file({"a": _t("F32", [2], 8, 16)}, d8 * 2)),
        ("gap", _file({"a": _t("F32", [2], 0, 8), "b": _t("F32", [2], 16, 24)}, d8 * 3)),
        ("overlap", _file({"a": _t("F32", [2], 0, 8), "b": _t("F32", [2], 4, 12)}, d8 * 2)),
        ("end_before_begin", _file({"a": _t("F32", [0], 8, 0)}, d8)),
        ("size_mismatch", _file({"a": _t("F32", [3], 0, 8)}, d8)),
        ("shape_product_overflows", _file({"a": _t("F32", [2**32, 2**32, 2**8], 0, 8)}, d8)),
        ("trailing_byte", _file(ok, d8 + b"\0")),
        ("truncated_data", _file(ok, d8[:7])),
        ("entry_not_object", _file({"a": [1, 2]}, d8)),
        ("offset_negative", _file({"a": _t("F32", [2], -8, 0)}, d8)),
        ("duplicate_tensor_name", _file(b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                              b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', d8)),
        # accepted by the reference reader (docs/spec/interop.md section 2.2, "not checked")
        ("ok_plain", _file(ok, d8)),
        ("ok_no_tensors", _file({})),
        ("ok_metadata_only", _file({"__metadata__": {"format": "pt"}})),
        ("ok_zero_size", _file({"z": _t("F32", [0, 3], 0, 0), **ok}, d8)),
        ("ok_offsets_out_of_order", _file({"b": _t("F32", [2], 8, 16), "a": _t("F32", [2], 0, 8)}, d8 * 2)),
        ("ok_leading_space", _file(b"  " + json.dumps(ok).encode(), d8)),
        ("ok_trailing_spaces", _file(json.dumps(ok).encode() + b"      ", d8)),
        ("ok_scalar", _file({"s": _t("I8", [], 0, 1)}, b"\x01")),
        ("ok_unaligned_data", _file({"a": _t("U8", [3], 0, 3), "b": _t("F32", [1], 3, 7)}, b"\0" * 7)),
    ]
    return c


# Where QTL's reader is deliberately stricter or laxer than the reference one. Each entry: the
# corpus file, what QTL does, and why. Empty means full parity.
KNOWN_READER_DIFFERENCES = {
    "duplicate_tensor_name": (False, "the library (serde) keeps one of two entries with the same "
                              "tensor name; QTL refuses the file: which tensor a consumer gets "
                              "would depend on the parser (docs/spec/interop.md section 8)"),
}


def lib_accepts(blob):
    try:
        safetensors.deserialize(blob)
        return True, ""
    except Exception as e:  # SafetensorError or a JSON error: both are rejections
        return False, str(e)


@pytest.mark.parametrize("name,blob", hostile_corpus(), ids=[n for n, _ in hostile_corpus()])
def test_reader_rejection_parity(tmp_path, name, blob):
    p = tmp_path / (name + ".safetensors")
    p.write_bytes(blob)
    lib_ok, lib_err = lib_accepts(blob)
    r = qtl("inspect", p, check=False)
    assert r.returncode in (0, 2), "qtl inspect %s: exit %d (crash?)\n%s" % (name, r.returncode, r.stderr)
    qtl_ok = r.returncode == 0
    if qtl_ok is False:
        assert str(p.name) in r.stderr, "the message names the file: " + r.stderr
    if name in KNOWN_READER_DIFFERENCES:
        want, why = KNOWN_READER_DIFFERENCES[name]
        assert qtl_ok == want and lib_ok != want, (name, why, lib_err, r.stderr)
        return
    assert name.startswith("ok_") == lib_ok, "the corpus' expectation of the library is wrong: %s %s" % (name, lib_err)
    assert qtl_ok == lib_ok, "%s: safetensors %s (%s), qtl %s (%s)" % (
        name, "accepts" if lib_ok else "rejects", lib_err, "accepts" if qtl_ok else "rejects", r.stderr.strip())
