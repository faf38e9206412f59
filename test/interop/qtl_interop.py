"""Shared helpers of the interop tiers: where the built programs are, safetensors I/O through the
reference library, and numpy views of every safetensors dtype (ml_dtypes for the narrow ones)."""
import os
import pathlib
import subprocess

import ml_dtypes as md
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("QTL_BUILD_DIR", ROOT / "build"))
QTL = pathlib.Path(os.environ.get("QTL_BIN", BUILD / "tools" / "qtl" / "qtl"))
DUMP_NUMERIC = pathlib.Path(os.environ.get("QTL_DUMP_NUMERIC", BUILD / "test" / "interop" / "dump_numeric"))
DATA = ROOT / "test" / "data"

# safetensors dtype name -> numpy dtype (ml_dtypes for BF16 and the FP8s; F4 has no numpy dtype).
NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": md.bfloat16,
      "F8_E4M3": md.float8_e4m3fn, "F8_E5M2": md.float8_e5m2, "F8_E8M0": md.float8_e8m0fnu,
      "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
      "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_}


def qtl(*args, check=True, **kw):
    """Runs the qtl tool; returns the CompletedProcess (text mode)."""
    r = subprocess.run([str(QTL), *map(str, args)], capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError("qtl %s: exit %d\n%s%s" % (" ".join(map(str, args)), r.returncode,
                                                        r.stdout, r.stderr))
    return r


def load_any(path):
    """{name: ndarray} of a safetensors file, parsed by the reference library (safetensors.deserialize)."""
    import safetensors
    out = {}
    with open(path, "rb") as f:
        blob = f.read()
    for name, t in safetensors.deserialize(blob):
        out[name] = np.frombuffer(bytes(t["data"]), NP[t["dtype"]]).reshape(t["shape"])
    return out


def load_info(path):
    """{name: (dtype name, shape)} and the metadata, through safe_open (validates on open)."""
    from safetensors import safe_open
    with safe_open(str(path), "np") as f:
        meta = f.metadata()
        info = {}
        for k in f.keys():
            s = f.get_slice(k)
            info[k] = (s.get_dtype(), list(s.get_shape()))
    return info, meta
