"""Every golden case of test/data/golden/ops through the Python API: each expected tensor equal in
name, dtype, shape and bytes, and no other tensor (test/data/golden/README.md is the contract). An
op of cases.jsonl without a Python mapping here fails its cases (no op can silently skip)."""

import json
import pathlib

import ml_dtypes
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
    if op in ("gptq-pack", "awq-pack"):
        k, n = x["q_w"].shape
        f = qtl.gptq_pack if op == "gptq-pack" else qtl.awq_pack
        return {"packed": f(x["q_w"], p["bits"], k, n)}
    if op == "pack-quantized-values-into-int32":
        return {"packed": qtl.pack_quantized_values_into_int32(x["w_q"], getattr(qtl.scalar_types, p["type"]),
                                                               p["packed-dim"])}
    if op == "unpack-quantized-values-into-int32":
        return {"w_q": qtl.unpack_quantized_values_into_int32(x["packed"], getattr(qtl.scalar_types, p["type"]),
                                                              p["packed-dim"])}
    if op == "normalize-e4m3fn-to-e4m3fnuz":
        w, ws, iscale = qtl.normalize_e4m3fn_to_e4m3fnuz(x["weight"], x["weight_scale"], x.get("input_scale"))
        out = {"weight": np.asarray(w).view(np.uint8), "weight_scale": ws}  # the file holds the fnuz bytes
        if iscale is not None:
            out["input_scale"] = iscale
        return out
    if op == "float8-e4m3fnuz-encode":
        return {"codes": np.asarray(x["x"]).astype(ml_dtypes.float8_e4m3fnuz).view(np.uint8)}
    if op == "float8-e4m3fnuz-decode":
        return {"x": x["codes"].view(ml_dtypes.float8_e4m3fnuz).astype(np.float32)}
    if op == "scaled-quantize":
        x_q, x_s = qtl.scaled_quantize(x["x"], (p["group-rows"], p["group-cols"]), p["quant-dtype"],
                                       p.get("compute-dtype"), is_fp8_fnuz=p.get("is-fp8-fnuz", False))
        if p["quant-dtype"] == "float8_e4m3fnuz":
            x_q = np.asarray(x_q).view(np.uint8)  # the file holds the fnuz bytes
        return {"x_q": x_q, "x_s": x_s}
    if op == "scaled-dequantize":
        x_q = x["x_q"]
        if p["quant-dtype"] == "float8_e4m3fnuz":
            x_q = x_q.view(ml_dtypes.float8_e4m3fnuz)
        group = (p["group-rows"], p["group-cols"]) if "group-rows" in p else None
        return {"out": qtl.scaled_dequantize(x_q, x["x_s"], group, p["out-dtype"])}
    if op == "group-broadcast":
        return {"t": qtl.group_broadcast(x["t"], [int(v) for v in p["shape"].split(",")])}
    if op == "encode-and-reorder-int4b":
        return {"b_packed": qtl.cutlass_encode_and_reorder_int4b(x["b"])}
    if op == "encode-and-reorder-int4b-grouped":
        return {"b_packed": qtl.cutlass_encode_and_reorder_int4b_grouped(x["b"])}
    if op == "pack-scale-fp8":
        return {"packed": qtl.cutlass_pack_scale_fp8(x["scales"])}
    if op == "convert-bf16-scales-to-fp8":
        return dict(zip(("fp8_scales", "chan_scales"), qtl.convert_bf16_scales_to_fp8(p["rule"], x["scales"])))
    if op == "convert-packed-uint4b8-to-signed-int4":
        return {"t": qtl.convert_packed_uint4b8_to_signed_int4_inplace(x["t"].copy())}
    if op == "interleave-scales":
        return {"scales_interleaved": qtl.interleave_scales(x["scales"], p["scale-pack"])}
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
    if op == "ct-pack-quantize":
        packed, scale, zp = qtl.ct_pack_quantize(x["weight"], p["bits"], p["group-size"], not p.get("asym", False))
        out = {"weight_packed": packed, "weight_scale": scale}
        if zp is not None:
            out["zero_point"] = zp
        return out
    if op == "fp8-checkpoint-quantize":
        r = qtl.fp8_checkpoint_quantize(x["weight"], p["scheme"], p.get("rule", "hf"))
        return dict(zip(("codes", "scales"), r))
    if op == "gptq-checkpoint-quantize":
        r = qtl.gptq_checkpoint_quantize(x["weight"], p["bits"], p["group-size"], not p.get("asym", False))
        return dict(zip(("qweight", "scales", "zeros"), r))
    if op == "ct-nvfp4-quantize":
        gs = float(x["global_scale"]) if "global_scale" in x else None
        return dict(zip(("weight_packed", "weight_scale", "weight_global_scale"), qtl.ct_nvfp4_quantize(x["weight"], gs)))
    if op == "ct-mxfp4-quantize":
        return dict(zip(("weight_packed", "weight_scale"), qtl.ct_mxfp4_quantize(x["weight"])))
    if op == "ct-mxfp8-quantize":
        return dict(zip(("weight", "weight_scale"), qtl.ct_mxfp8_quantize(x["weight"])))
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
    if op.endswith("-quant") and hasattr(qtl, op[:-len("-quant")] + "_quantize"):  # each block format
        f = getattr(qtl, op[:-len("-quant")] + "_quantize")
        if "global_scale" in x or op == "nvfp4-quant":
            values, scale, gs = f(x["input"], x.get("global_scale"), swizzle=p.get("swizzle", False))
            return {"output": values, "scale": scale, "global_scale": gs}
        values, scale = f(x["input"], swizzle=p.get("swizzle", False))
        # E8M0 scales come back as uint8 (numpy has no such dtype of its own)
        return {"output": values, "scale": np.asarray(scale).view(ml_dtypes.float8_e8m0fnu)}
    return run_marlin_convert_case(op, p, x)


def _block(p):
    """The golden params' "BN,BK" (default 128,128) as a tuple."""
    return tuple(int(v) for v in p.get("block-size", "128,128").split(","))


_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


def run_marlin_convert_case(op, p, x):
    """The Marlin layouts (qtl/marlin.hpp) and the converters (qtl/convert.hpp); None: no mapping."""
    bits, a8 = p.get("bits"), p.get("a8", False)
    if op in ("marlin-repack-gptq", "unmarlin-gptq"):
        q = x["qweight"]
        if op == "marlin-repack-gptq":
            k, n = q.shape[0] * _pf(bits), q.shape[1]
            f = qtl.gptq_marlin_repack
        else:
            k, n = q.shape[0] * 16, q.shape[1] * _pf(bits) // 16
            f = qtl.unmarlin_gptq
        return {"qweight": f(q, x.get("sort_indices", np.empty(0, np.int32)), k, n, bits, is_a_8bit=a8)}
    if op == "marlin-repack-awq":
        k, c = x["qweight"].shape
        return {"qweight": qtl.awq_marlin_repack(x["qweight"], k, c * _pf(bits), bits, is_a_8bit=a8)}
    if op == "unmarlin-awq":
        r, c = x["qweight"].shape
        return {"qweight": qtl.unmarlin_awq(x["qweight"], r * 16, c * _pf(bits) // 16, bits, is_a_8bit=a8)}
    if op in ("marlin-permute-scales", "unmarlin-permute-scales"):
        s, g = x["scales"], p["group-size"]
        size_k = s.shape[0] if g == -1 else s.shape[0] * g
        f = qtl.marlin_permute_scales if op == "marlin-permute-scales" else qtl.unmarlin_permute_scales
        return {"scales": f(s, size_k, s.shape[1], g, is_a_8bit=a8)}
    if op == "marlin-zero-points":
        g, n = x["zp"].shape
        return {"zp": qtl.marlin_zero_points(x["zp"], g, n, bits, is_a_8bit=a8)}
    if op in ("awq-to-marlin-zero-points", "unmarlin-zero-points"):
        z = x["qzeros" if op == "awq-to-marlin-zero-points" else "zp"]
        g, c = z.shape
        f = qtl.awq_to_marlin_zero_points if op == "awq-to-marlin-zero-points" else qtl.unmarlin_zero_points
        return {"zp": f(z, g, c * _pf(bits), bits, is_a_8bit=a8)}
    if op == "marlin-sort-g-idx":
        return dict(zip(("g_idx", "sort_indices"), qtl.marlin_sort_g_idx(x["g_idx"])))
    if op == "marlin-fp8-prepare":
        block = _block(p) if "block-size" in p else None
        w, s = qtl.marlin_fp8_prepare(x["weight"], x["weight_scale"], _DTYPES[p["dtype"]],
                                      size_k_first=p.get("size-k-first", False), block_size=block,
                                      fold=p.get("fold", "vllm"), is_a_8bit=a8)
        return {"weight": w, "weight_scale": s}
    if op == "marlin-nvfp4-prepare":
        r = qtl.marlin_nvfp4_prepare(x["weight"], x["weight_scale"], x["weight_global_scale"], _DTYPES[p["dtype"]],
                                     rescale=not p.get("no-rescale", False))
        return dict(zip(("weight", "weight_scale", "weight_global_scale", "scale_factor"), r))
    if op == "marlin-mxfp4-prepare":
        r = qtl.marlin_mxfp4_prepare(x["weight"], x["weight_scale"], _DTYPES[p["dtype"]], is_a_8bit=a8)
        return dict(zip(("weight", "weight_scale"), r))
    if op == "block-quant-dequant":
        return {"weight": qtl.block_quant_dequant(x["weight"], x["weight_scale_inv"], _block(p),
                                                  _DTYPES[p["dtype"]])}
    if op == "requant-weight-ue8m0":
        r = qtl.requant_weight_ue8m0(x["weight"], x["weight_scale_inv"], recipe=p["recipe"],
                                     canonical=p.get("canonical", False))
        return dict(zip(("weight", "weight_scale_inv"), r))
    if op == "deepgemm-pack-ue8m0":
        return {"weight_scale_inv": qtl.deepgemm_pack_ue8m0(x["weight_scale_inv"], p["mn"])}
    if op == "deepgemm-post-process-e8m0":
        w, s = qtl.deepgemm_post_process_e8m0(x["weight"], x["scale"], p.get("bmm-batch", 0))
        return {"weight": w, "scale": s}
    if op == "deepgemm-unpack-ue8m0":
        return {"weight_scale_inv": qtl.deepgemm_unpack_ue8m0(x["weight_scale_inv"], p["k-blocks"])}
    if op == "fp8-block-to-mxfp4":
        return dict(zip(("weight", "weight_scale"), qtl.fp8_block_to_mxfp4(x["weight"], x["weight_scale_inv"],
                                                                           _block(p))))
    if op == "fp8-block-to-nvfp4":
        r = qtl.fp8_block_to_nvfp4(x["weight"], x["weight_scale_inv"], _block(p), x.get("global_scale"))
        return dict(zip(("weight", "weight_scale", "global_scale"), r))
    if op == "cast-e2m1fn-to-e4m3fn":
        return dict(zip(("weight", "scale"), qtl.cast_e2m1fn_to_e4m3fn(x["weight"], x["scale"])))
    if op == "prepare-trtllm-fp4-moe":
        r = qtl.prepare_static_weights_for_trtllm_fp4_moe(
            x["gemm1_weights"], x["gemm2_weights"], x["gemm1_scales"], x["gemm2_scales"], p["hidden-size"],
            p["intermediate-size"], p["num-experts"], is_gated_activation=not p.get("no-gated", False))
        names = ("gemm1_weights", "gemm1_scales", "gemm2_weights", "gemm2_scales")
        return {n + "_fp4_shuffled": v for n, v in zip(names, r)}
    if op in ("align-fp4-moe-weights-for-fi", "align-fp4-moe-hidden-dim-for-fi"):
        args = (x["w13"], x["w13_scale"], x["w2"], x["w2_scale"])
        if op == "align-fp4-moe-weights-for-fi":
            r = qtl.align_fp4_moe_weights_for_fi(*args, p.get("is-act-and-mul", False), p["min-alignment"])
            size = "padded_intermediate"
        else:
            r = qtl.align_fp4_moe_hidden_dim_for_fi(*args, p["min-alignment"])
            size = "padded_hidden_size"
        return dict(zip(("w13", "w13_scale", "w2", "w2_scale"), r[:4])) | {size: np.array(r[4], dtype=np.int64)}
    if op == "interleave-linear-and-gate":
        return {"x": qtl.interleave_linear_and_gate(x["x"], p["group-size"], p["dim"])}
    if op == "reorder-w13-to-w31-for-flashinfer-cutedsl":
        act = "SWIGLUOAI" if p.get("swigluoai", False) else "SILU"
        return dict(zip(("w13", "w13_scale"), qtl.reorder_w13_to_w31_for_flashinfer_cutedsl(act, x["w13"],
                                                                                             x["w13_scale"])))
    if op == "prepare-trtllm-mxint4-moe":
        return qtl.prepare_static_weights_for_trtllm_mxint4_moe(x["gemm1_weights"], x["gemm1_scales"],
                                                                x["gemm2_weights"], x["gemm2_scales"])
    if op == "shuffle-deepseek-fp8-moe-weights":
        return dict(zip(("w13", "w2"), qtl.shuffle_deepseek_fp8_moe_weights(x["w13"], x["w2"])))
    if op == "rotate-weights-for-fi-trtllm-fp8-per-tensor-moe":
        return dict(zip(("gemm1_weights", "gemm2_weights"), qtl.rotate_weights_for_fi_trtllm_fp8_per_tensor_moe(
            x["gemm1_weights"], x["gemm2_weights"], p.get("is-gated-activation", False))))
    if op == "convert-moe-weights-to-flashinfer-trtllm-block-layout":
        return dict(zip(("w13_weight", "w2_weight"), qtl.convert_moe_weights_to_flashinfer_trtllm_block_layout(
            None, x["w13_weight"], x["w2_weight"], not p.get("no-gated", False))))
    if op == "shuffle-mxfp8-moe-weights":
        r = qtl.shuffle_mxfp8_moe_weights(x["w13"], x["w2"], x["w13_scale"], x["w2_scale"], p.get("is-gated", False))
        return dict(zip(("w13", "w2", "w13_scale", "w2_scale"), r))
    if op == "pad-nvfp4-weight-for-cutlass":
        w, pb = qtl.pad_nvfp4_weight_for_cutlass(x["weight"], p["alignment"])
        return {"weight": w, "weights_padding_bytes": np.array(pb, dtype=np.int64)}
    if op == "per-block-cast-to-fp8":
        q, s = qtl.per_block_cast_to_fp8(x["weight"], _block(p), "ue8m0" in p, ue8m0_rule=p.get("ue8m0", "log2"))
        return {"weight": q, "weight_scale_inv": s}
    return None


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_golden_case(case):
    x = load(GOLDEN / (case["case"] + ".in.safetensors"))
    want = load(GOLDEN / (case["case"] + ".expected.safetensors"))
    got = run_case(case["op"], case["params"], x)
    if got is None:
        pytest.fail(f"{case['op']}: no Python mapping in test_golden.py (bind the op, then map it here)")
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
