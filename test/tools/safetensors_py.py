"""Minimal safetensors reading and writing with the standard library only (struct + json), for the
end-to-end tests of the qtl tool: they must not trust the C++ reader they are testing."""
import json
import os
import struct

DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
              "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
              "F8_E8M0": 1}


def raw(header_text, data=b"", length=None):
    """The bytes of a file with header text `header_text` (str or bytes), verbatim."""
    h = header_text.encode() if isinstance(header_text, str) else header_text
    n = len(h) if length is None else length
    return struct.pack("<Q", n) + h + data


def build(tensors, metadata=None):
    """The bytes of a well-formed file; `tensors` is a list of (name, dtype, shape, bytes)."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - (8 + len(text)) % 8) % 8)
    return raw(text, b"".join(t[3] for t in tensors))


def write_golden_cases(ops_dir, number, cases):
    """Writes golden op cases (shape, op, params, inputs, outputs; tensors as `build` takes them) as
    NNNN-<op>.in/.expected.safetensors into `ops_dir`, numbered from `number`, and prints each one's
    cases.jsonl line (test/data/golden/README.md)."""
    for shape, op, params, ins, outs in cases:
        name = "%04d-%s" % (number, op)
        with open(os.path.join(ops_dir, name + ".in.safetensors"), "wb") as f:
            f.write(build(ins))
        with open(os.path.join(ops_dir, name + ".expected.safetensors"), "wb") as f:
            f.write(build(outs))
        print(json.dumps({"case": name, "op": op, "params": params, "shape": shape}))
        number += 1


def read(path):
    """{name: (dtype, shape, bytes)} and the metadata of a file, checking the basics."""
    with open(path, "rb") as f:
        b = f.read()
    (n,) = struct.unpack("<Q", b[:8])
    header = json.loads(b[8:8 + n])
    data = b[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        count = 1
        for d in e["shape"]:
            count *= d
        assert end - begin == count * DTYPE_SIZE[e["dtype"]], (path, name)
        assert end <= len(data), (path, name)
        out[name] = (e["dtype"], list(e["shape"]), data[begin:end])
    return out, meta


def write_checkpoint(folder, tensors, shards):
    """Writes `tensors` ((name, dtype, shape, bytes) tuples) into `folder` as model.safetensors, or as
    `shards` files model-0000i-of-0000n.safetensors with their model.safetensors.index.json."""
    os.makedirs(folder, exist_ok=True)
    per = (len(tensors) + shards - 1) // shards
    weight_map = {}
    for s in range(shards):
        part = tensors[s * per:(s + 1) * per]
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards) if shards > 1 else "model.safetensors"
        with open(os.path.join(folder, fname), "wb") as f:
            f.write(build(part, {"format": "pt"}))
        for t in part:
            weight_map[t[0]] = fname
    if shards > 1:
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(len(t[3]) for t in tensors)}, "weight_map": weight_map}, f)
