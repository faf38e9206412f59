"""Replays, without torch, what the heavy tier recorded from real consumers (test/data/interop/,
written by test/interop/heavy/test_golden.py): `qtl quantize` of the committed micro Llama still
writes the same tensors, and QTL's output dequantized in numpy (from the format specs) equals, bit
for bit, the fp16 weights that transformers + compressed-tensors (fp8 tensor/channel/ct-block,
w4a16/w8a16 sym/asym group/channel, nvfp4, mxfp4), transformers' HF fp8 and GPTQModel's gptq_torch
kernel dequantized from it."""
import hashlib
import json
import pathlib
import shutil
import sys

import ml_dtypes as md
import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "heavy"))
import models  # noqa: E402  (numpy-only parts: the dequantizers)
from qtl_interop import DATA, load_any, qtl  # noqa: E402

GOLDEN = DATA / "interop"
CASES = sorted(p.stem for p in GOLDEN.glob("*.json") if not p.name.endswith(".config.json"))


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def test_golden_present():
    assert {"fp8-tensor", "fp8-channel", "fp8-block", "gptq-int4-g64", "ct-w4a16-g64", "ct-w4a16-asym-g128",
            "ct-w8a16-channel", "ct-w8a16-asym-g64", "ct-nvfp4", "ct-mxfp4", "ct-fp8-block"} <= set(CASES), CASES


@pytest.mark.parametrize("fmt", CASES)
def test_replay(tmp_path, fmt):
    rec = json.loads((GOLDEN / (fmt + ".json")).read_text())
    src = tmp_path / "micro"
    src.mkdir()
    shutil.copy(GOLDEN / "micro_llama.safetensors", src / "model.safetensors")
    shutil.copy(GOLDEN / "micro_llama.config.json", src / "config.json")
    out = tmp_path / "q"
    qtl("quantize", *rec["args"], "--threads", "1", src, out)
    t = models.tensors(out)
    assert {k: sha(v) for k, v in sorted(t.items())} == rec["qtl_output_sha256"], \
        "qtl quantize writes other tensors than when the golden data was recorded"
    if fmt.startswith("gptq"):
        bits = 8 if "int8" in fmt else 4
        mods = models.linear_modules(t, ".qweight")
        w = {m: models.dequant_gptq(t, m, bits) for m in mods}
    elif fmt == "fp8-block":
        mods = models.linear_modules(t, ".weight_scale_inv")
        w = {m: models.dequant_fp8(t, m, block=(128, 128), scale_key="weight_scale_inv") for m in mods}
    elif fmt.startswith("ct-"):
        # compressed-tensors (w4a16/w8a16, nvfp4, mxfp4, FP8_BLOCK): the spec's dequantization
        qc = models.config(out)["quantization_config"]
        mods = models.linear_modules(t, ".weight_scale")
        w = {m: models.dequant_ct(t, m, qc) for m in mods}
        if qc["format"] == "nvfp4-pack-quantized":
            # CT's NVFP4 decompress returns bfloat16 (unpack_fp4_from_uint8's default dtype), which
            # the fp16 model then rounds again (test/interop/heavy/test_consumers.py pins it)
            w = {m: v.astype(md.bfloat16).astype(np.float32) for m, v in w.items()}
    else:
        mods = models.linear_modules(t, ".weight_scale")
        w = {m: models.dequant_fp8(t, m) for m in mods}
    w16 = {m: v.astype(np.float16) for m, v in w.items()}
    assert sorted(w16) == sorted(rec["consumer_sha256"])
    kept = load_any(GOLDEN / (fmt + ".consumer.safetensors"))
    for m, a in kept.items():
        assert a.tobytes() == w16[m].tobytes(), (fmt, m)
    bad = [m for m in w16 if sha(w16[m]) != rec["consumer_sha256"][m]]
    assert not bad, (fmt, bad)
