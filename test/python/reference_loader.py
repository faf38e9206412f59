"""Loads the reference Python (sglang's quantization utils, `sglang_quantization_utils.py`, kept
outside this repository) with the real `ScalarType` (vLLM's `vllm/scalar_type.py`, taken from the
pinned vLLM wheel, as sgl-kernel ships the same file as `sgl_kernel.scalar_type`). The module's
only other import, sglang's GPU `scaled_fp8_quant`, is a stand-in that raises: that function and
the TRT-LLM preparation are checked against the golden data instead. Nothing here calls qtl.

Paths: QTL_REFERENCE (the .py; default: the one `reference_path()` names, outside the checkout),
QTL_VLLM_WHEEL (the wheel; default: the wheels/ folder of the running virtualenv, as
scripts/interop-venv.sh leaves it)."""

import glob
import importlib.util
import os
import pathlib
import sys
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def reference_path():
    return pathlib.Path(os.environ.get("QTL_REFERENCE",
                                       ROOT.parent / "shared" / "reference" / "sglang_quantization_utils.py"))


def vllm_wheel():
    if os.environ.get("QTL_VLLM_WHEEL"):
        return pathlib.Path(os.environ["QTL_VLLM_WHEEL"])
    found = sorted(glob.glob(os.path.join(sys.prefix, "wheels", "vllm-*.whl")))
    return pathlib.Path(found[-1]) if found else None


def missing():
    """Why the reference cannot be loaded here, or None."""
    if not reference_path().is_file():
        return f"no reference Python at {reference_path()} (set QTL_REFERENCE)"
    w = vllm_wheel()
    if w is None or not w.is_file():
        return "no vLLM wheel for the real scalar_type.py (set QTL_VLLM_WHEEL)"
    return None


_loaded = None


def load():
    """The reference module (loaded once)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    why = missing()
    if why:
        raise RuntimeError(why)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="qtl-reference-"))
    (tmp / "sgl_kernel").mkdir()
    (tmp / "sgl_kernel" / "__init__.py").write_text("")
    (tmp / "sgl_kernel" / "scalar_type.py").write_bytes(zipfile.ZipFile(vllm_wheel()).read("vllm/scalar_type.py"))
    fp8 = tmp / "sglang" / "srt" / "layers" / "quantization"
    fp8.mkdir(parents=True)
    for d in (tmp / "sglang", tmp / "sglang" / "srt", tmp / "sglang" / "srt" / "layers", fp8):
        (d / "__init__.py").write_text("")
    (fp8 / "fp8_kernel.py").write_text(
        "def scaled_fp8_quant(*args, **kwargs):\n"
        "    raise NotImplementedError('sglang scaled_fp8_quant is a GPU kernel (checked by the golden data)')\n")
    sys.path.insert(0, str(tmp))
    spec = importlib.util.spec_from_file_location("sglang_quantization_utils", reference_path())
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.ScalarType.__module__ == "sgl_kernel.scalar_type", "the reference must use the real ScalarType"
    _loaded = mod
    return mod
