"""qtl.quantize_checkpoint: the tool's whole-checkpoint job through the Python API, on a small
checkpoint written here. The layout itself is the tool's tests' (test/tools/test_qtl_quantize.py);
this checks the binding: the report, the files, the progress callback, and the errors."""

import json

import numpy as np
import pytest

import qtl
from safetensors_np import load, save

pytestmark = pytest.mark.skipif(not hasattr(qtl, "quantize_checkpoint"),
                                reason="this build has no tool command library (nlohmann-json missing)")


def model(tmp_path):
    d = tmp_path / "model"
    d.mkdir()
    rng = np.random.default_rng(18)
    save(d / "model.safetensors", {
        "model.layers.0.mlp.up_proj.weight": (rng.standard_normal((256, 128)) * 0.02).astype(np.float16),
        "model.layers.0.mlp.down_proj.weight": (rng.standard_normal((128, 256)) * 0.02).astype(np.float16),
        "model.norm.weight": np.ones(128, np.float16),
        "lm_head.weight": (rng.standard_normal((64, 128)) * 0.02).astype(np.float16),
    })
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 128}))
    return d


def test_gptq_checkpoint(tmp_path):
    src = model(tmp_path)
    dst = tmp_path / "out"
    seen = []
    r = qtl.quantize_checkpoint(str(src), str(dst), format="gptq", bits=4, group_size=128, threads=2,
                                progress=lambda done, total: seen.append((done, total)))
    assert r["format"] == "gptq" and r["threads"] >= 1
    assert sorted(m for m, _ in r["layers"]) == ["model.layers.0.mlp.down_proj", "model.layers.0.mlp.up_proj"]
    assert "lm_head" in [m for m, _ in r["kept"]]
    out = load(dst / "model.safetensors")
    assert out["model.layers.0.mlp.up_proj.qweight"].dtype == np.int32
    assert json.loads((dst / "config.json").read_text())["quantization_config"]["bits"] == 4
    assert seen and seen[-1][0] == seen[-1][1]


def test_errors(tmp_path):
    src = model(tmp_path)
    with pytest.raises(qtl.InvalidValueError):
        qtl.quantize_checkpoint(str(src), str(tmp_path / "o1"), format="gptq", sym=True, asym=True)
    with pytest.raises(qtl.Error):
        qtl.quantize_checkpoint(str(tmp_path / "missing"), str(tmp_path / "o2"), format="gptq")
    assert not (tmp_path / "o2").exists()
    with pytest.raises(qtl.InvalidValueError):
        qtl.quantize_checkpoint(str(src), str(tmp_path / "o3"), format="gptq", threads=-1)

    def boom(done, total):
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        qtl.quantize_checkpoint(str(src), str(tmp_path / "o4"), format="fp8", progress=boom)
