"""Every golden case of test/data/golden/ops whose op the reference Python has, through the Python
API: each expected tensor equal in name, dtype, shape and bytes, and no other tensor
(test/data/golden/README.md is the contract). Ops outside the reference (Marlin, the converters)
are not bound in the Python package: their cases are reported as skipped, by name."""

import json
import pathlib

import numpy as np
import pytest

import qtl
from safetensors_np import code, load

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "data" / "golden" / "ops"
CASES = [json.loads(line) for line in open(GOLDEN / "cases.jsonl")]


def _pf(bits):
    return 32 // bits


def run_case(op, p, x):
    """The qtl call of one golden case: {output name: array}."""
    if op in ("pack-cols", "pack-rows"):
        k, n = x["q_w"].shape
        f = qtl.pack_cols if op == "pack-cols" else qtl.pack_rows
        return {"packed": f(x["q_w"], p["bits"], k, n)}
    if op == "unpack-cols":
        k, c = x["packed"].shape
        return {"q_w": qtl.unpack_cols(x["packed"], p["bits"], k, c * _pf(p["bits"]))}
    if op == "unpack-rows":
        r, n = x["packed"].shape
        return {"q_w": qtl.unpack_rows(x["packed"], p["bits"], r * _pf(p["bits"]), n)}
    if op == "quantize-weights":
        w_ref, w_q, w_s, w_zp = qtl.quantize_weights(
            x["w"], getattr(qtl.scalar_types, p["type"]), p["group-size"], p.get("zero-points", False),
            p.get("ref-zero-points-after-scales", False))
        out = {"w_ref": w_ref, "w_q": w_q}
        if w_s is not None:
            out["w_s"] = w_s
        if w_zp is not None:
            out["w_zp"] = w_zp
        return out
    if op == "gptq-quantize-weights":
        act = p.get("act-order", False)
        r = qtl.gptq_quantize_weights(x["w"], getattr(qtl.scalar_types, p["type"]), p["group-size"], act,
                                      x.get("perm"))
        return dict(zip(("w_ref", "w_q", "w_s", "g_idx", "rand_perm"), r))
    if op == "permute-rows":
        r = qtl.permute_rows(x["q_w"], x["w_ref"], p["group-size"], x["perm"])
        return dict(zip(("w_ref", "q_w", "g_idx", "rand_perm"), r))
    if op == "sort-weights":
        return dict(zip(("q_w", "g_idx", "sort_indices"), qtl.sort_weights(x["q_w"], x["g_idx"])))
    if op == "swap-w13-to-w31":
        return {"x": qtl.swap_w13_to_w31(x["x"])}
    if op == "reorder-w1w3-to-w3w1":
        return dict(zip(("weight", "scale"), qtl.reorder_w1w3_to_w3w1(x["weight"], x["scale"], p["dim"])))
    if op == "convert-to-channelwise":
        widths = [int(v) for v in p["logical-widths"].split(",")]
        return {"weight_scale": qtl.convert_to_channelwise(x["weight_scale"], widths)}
    if op == "swizzle-blockscale":
        return {"scale": qtl.swizzle_blockscale(x["scale"])}
    if op == "unswizzle-blockscale":
        return {"scale": qtl.unswizzle_blockscale(x["scale"], p["rows"], p["cols"])}
    if op == "scaled-fp8-quant":
        scale = np.array([p["scale"]], np.float32) if "scale" in p else None
        out, s = qtl.scaled_fp8_quant(x["input"], scale, None, p.get("per-token", False))
        return {"output": out, "scale": s}
    return None


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_golden_case(case):
    x = load(GOLDEN / (case["case"] + ".in.safetensors"))
    want = load(GOLDEN / (case["case"] + ".expected.safetensors"))
    got = run_case(case["op"], case["params"], x)
    if got is None:
        pytest.skip(f"{case['op']}: not in the reference Python, not bound by the qtl package")
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        g = np.asarray(got[name])
        if case["op"] == "gptq-quantize-weights" and name == "rand_perm" and w.size == 0:
            # The golden file stores the empty rand_perm as I64 [0]; the reference returns
            # torch.empty(0, dtype=torch.int), int32, which qtl returns too.
            assert g.shape == (0,) and g.dtype == np.int32
            continue
        assert (code(g), g.shape) == (code(w), w.shape), name
        assert g.tobytes() == w.tobytes(), name
