"""A numpy-only safetensors reader for the tests (the golden files are plain safetensors: an 8-byte
little-endian header length, a JSON header, raw little-endian data). BF16, F8_E4M3 and F8_E8M0
load as ml_dtypes' bfloat16 / float8_e4m3fn / float8_e8m0fnu."""

import json
import struct

import ml_dtypes
import numpy as np

DTYPES = {
    "F32": np.dtype(np.float32), "F16": np.dtype(np.float16), "BF16": np.dtype(ml_dtypes.bfloat16),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn), "F8_E8M0": np.dtype(ml_dtypes.float8_e8m0fnu), "I64": np.dtype(np.int64), "I32": np.dtype(np.int32),
    "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
}
CODES = {v: k for k, v in DTYPES.items()}


def load(path):
    """{name: numpy array} of a safetensors file."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dt = DTYPES[info["dtype"]]
        out[name] = np.frombuffer(body[begin:end], dtype=dt).reshape(info["shape"]).copy()
    return out


def code(array):
    """The safetensors dtype code of a numpy array ("F32", "BF16", ...)."""
    return CODES[np.dtype(array.dtype)]


def save(path, tensors):
    """Writes {name: numpy array} as a safetensors file (offsets in name order, no padding needed)."""
    header = {}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.tobytes()
        header[name] = {"dtype": code(a), "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
