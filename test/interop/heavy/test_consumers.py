"""Real consumers load what `qtl quantize` writes (issue 18, heavy tier): transformers +
compressed-tensors, transformers' HF fp8, transformers + optimum + GPTQModel; each dequantized
weight equals the numpy dequantization of QTL's file bit for bit; the logits match a dense model
built from those weights; compressed-tensors' own compressor writes the same bytes."""
import os

import ml_dtypes as md
import numpy as np
import pytest
import torch

import models

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def base():
    return models.make_models()


def param(sd, mod):
    """The [N, K] weight of a checkpoint module in a transformers v5 state dict: a plain Linear's
    weight, or a view into the fused expert tensors (experts.gate_up_proj [E, 2I, H] = gate rows
    then up rows, experts.down_proj [E, H, I])."""
    if mod + ".weight" in sd:
        return sd[mod + ".weight"]
    head, _, tail = mod.rpartition(".experts.")
    e, proj = tail.split(".")
    e = int(e)
    if proj == "down_proj":
        return sd[head + ".experts.down_proj"][e]
    gu = sd[head + ".experts.gate_up_proj"][e]
    half = gu.shape[0] // 2
    return gu[:half] if proj == "gate_proj" else gu[half:]


def dense_logits(model_dir, weights, cls):
    """Logits of the fp16 model at `model_dir` with `weights` ({module: [N, K] float32}) put in."""
    m = cls.from_pretrained(model_dir, dtype=torch.float16, device_map="cpu")
    sd = m.state_dict()
    for mod, w in weights.items():
        param(sd, mod).copy_(torch.from_numpy(w).to(torch.float16))
    with torch.no_grad():
        return m(torch.tensor(models.PROMPT)).logits.float()


def fp16_logits(model_dir, cls):
    m = cls.from_pretrained(model_dir, dtype=torch.float16, device_map="cpu")
    with torch.no_grad():
        return m(torch.tensor(models.PROMPT)).logits.float()


def check_logits(name, got, dense, ref):
    diff = (got - dense).abs().max().item()
    err = (got - ref).abs().max().item()
    print("RESULT %s: max|logits - dense(QTL dequant)| = %.3g, max|logits - fp16| = %.3g" % (name, diff, err))
    assert diff <= 1e-2, diff
    assert torch.equal(got.argmax(-1), dense.argmax(-1))


def no_loading_problems(info):
    bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    assert not bad, bad


_TORCH = {"float8_e4m3fn": torch.float8_e4m3fn, "int32": torch.int32, "int64": torch.int64,
          "uint8": torch.uint8, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}

CT_FORMATS = {
    "fp8-tensor": ["--format", "fp8", "--fp8-scheme", "tensor"],
    "fp8-channel": ["--format", "fp8", "--fp8-scheme", "channel"],
}


def model_class(model_dir):
    from transformers import LlamaForCausalLM, Qwen3MoeForCausalLM
    return Qwen3MoeForCausalLM if model_dir.name == "moe" else LlamaForCausalLM


def _offered():
    import re
    from qtl_interop import qtl
    h = qtl("quantize", "--help").stdout
    m = re.search(r"--format TEXT:\{([^}]*)\}", h)
    fmts = m.group(1).split(",") if m else []
    m = re.search(r"--fp8-scheme TEXT:\{([^}]*)\}", h)
    schemes = m.group(1).split(",") if m else []
    return fmts, schemes


def _ct_cases():
    """Today's CT formats plus each new one this build's qtl quantize offers (issue 18: w4a16,
    w8a16, nvfp4, mxfp4 and a CT FP8_BLOCK scheme); the rest are listed as skipped."""
    fmts, schemes = _offered()
    cases = dict(CT_FORMATS)
    for f in ("w4a16", "w8a16", "nvfp4", "mxfp4"):
        cases[f] = ["--format", f] if f in fmts else None
    if "w4a16" in fmts:
        cases["w4a16-asym"] = ["--format", "w4a16", "--asym"]
    for sch in schemes:
        if sch not in ("tensor", "channel", "block"):
            cases["fp8-" + sch] = ["--format", "fp8", "--fp8-scheme", sch]
    return cases


@pytest.mark.parametrize("which", ["llama", "moe"])
@pytest.mark.parametrize("fmt", list(_ct_cases()))
def test_compressed_tensors_load(base, fmt, which):
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig
    args = _ct_cases()[fmt]
    if args is None:
        pytest.skip("qtl quantize of this build offers no --format " + fmt)
    model_dir = base[0] if which == "llama" else base[1]
    check_ct_output(models.quantize(model_dir, fmt, args), model_dir, which, fmt)


def check_ct_output(qdir, model_dir, which, fmt):
    """A compressed-tensors folder: CT's per-module decompression and transformers' load equal
    QTL's own dequantization bit for bit, no missing or unexpected keys, logits as the dense model."""
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig
    t = models.tensors(qdir)
    qc = models.config(qdir)["quantization_config"]
    assert qc["quant_method"] == "compressed-tensors" and qc["quantization_status"] == "compressed"
    want = {m: models.dequant_ct(t, m, qc) for m in models.linear_modules(t, ".weight_scale")}
    if qc["format"] == "nvfp4-pack-quantized":
        # Known: CT's NVFP4 decompress computes e2m1 * (s / g) in float32 and returns bfloat16
        # whatever the model dtype (unpack_fp4_from_uint8's default), so an fp16 model gets
        # fp16(bf16(w)): one more rounding than QTL's float32 dequantization. Pinned as that.
        want = {m: w.astype(md.bfloat16).astype(np.float32) for m, w in want.items()}
    # compressed-tensors' own per-module decompression (no model, no transformers) first.
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationScheme
    (group,) = qc["config_groups"].values()
    scheme = QuantizationScheme.model_validate(group)
    comp = BaseCompressor.get_value_from_registry(qc["format"])
    exact = {m: models.dequant_ct(t, m, qc) for m in want}
    for mod in want:
        local = {k[len(mod) + 1:]: torch.from_numpy(np.ascontiguousarray(v).view(np.uint8)).view(_TORCH[v.dtype.name]).reshape(v.shape)
                 for k, v in t.items() if k.startswith(mod + ".") and "." not in k[len(mod) + 1:]}
        dq = comp.decompress(local, scheme)["weight"]
        # CT returns its own dtype (the scale's; bfloat16 for NVFP4): QTL's float32 dequantization
        # rounded once to it must be the same bits.
        assert torch.equal(dq, torch.from_numpy(exact[mod]).to(dq.dtype)), (mod, "CT decompress", dq.dtype)
    if which == "moe" and fmt == "w4a16-asym":
        # Known consumer limitation (transformers 5.23): its fused-expert conversion of
        # pack-quantized asymmetric experts finds no zero points ("Asymmetric quant requires
        # zero-point values"); CT's own per-module decompression above equals QTL's for every expert.
        print("RESULT moe %s: CT per-module decompress == QTL dequant; transformers' fused-expert "
              "conversion fails on zero points (known, transformers)" % fmt)
        return
    if which == "moe" and qc["format"] in ("nvfp4-pack-quantized",) or (which == "moe" and fmt == "fp8-ct-block"):
        # Known consumer limitation (transformers 5.23, integrations/compressed_tensors.py): for
        # Qwen3-MoE's fused experts its CompressedTensorsDequantize ignores NVFP4's
        # weight_global_scale (weights come out global_scale times too large) and cannot broadcast
        # FP8 block scales (RuntimeError). The files are right: CT's own per-module decompression
        # above equals QTL's dequantization for every expert. Pinned as that.
        try:
            m = AutoModelForCausalLM.from_pretrained(qdir, dtype=torch.float16, device_map="cpu",
                                                     quantization_config=CompressedTensorsConfig(run_compressed=False))
        except RuntimeError as e:
            assert fmt == "fp8-ct-block" and "conversion" in str(e).lower(), e
        else:
            got = m.state_dict()["model.layers.0.mlp.experts.down_proj"][0].float().numpy()
            w = want["model.layers.0.mlp.experts.0.down_proj"]
            ratio = np.median(np.abs(got[w != 0] / w[w != 0]))
            g = float(t["model.layers.0.mlp.experts.0.down_proj.weight_global_scale"].reshape(()))
            assert abs(ratio / g - 1) < 0.01, (ratio, g)
        print("RESULT moe %s: CT per-module decompress == QTL dequant; transformers' fused-expert "
              "conversion wrong (known, transformers)" % fmt)
        return
    m, info = AutoModelForCausalLM.from_pretrained(
        qdir, dtype=torch.float16, device_map="cpu", output_loading_info=True,
        quantization_config=CompressedTensorsConfig(run_compressed=False))
    no_loading_problems(info)
    sd = m.state_dict()
    for mod, w in want.items():
        got = param(sd, mod)
        exp = torch.from_numpy(w).to(got.dtype)
        assert torch.equal(got, exp), (mod, (got.float() - exp.float()).abs().max().item())
    with torch.no_grad():
        logits = m(torch.tensor(models.PROMPT)).logits.float()
    cls = model_class(model_dir)
    check_logits("%s %s" % (which, fmt), logits, dense_logits(model_dir, want, cls), fp16_logits(model_dir, cls))


@pytest.mark.parametrize("to", ["nvfp4", "mxfp4", "bf16", "fp8-ue8m0"])
def test_qtl_convert_outputs_load(base, to):
    """`qtl convert` (issue 20) of an FP8-block checkpoint: the compressed-tensors targets load in
    transformers + compressed-tensors equal to QTL's dequantization; bf16 and fp8-ue8m0 load as a
    dense and an HF fp8 model, equal to the file's values."""
    from qtl_interop import qtl
    from transformers import AutoModelForCausalLM
    src = models.quantize(base[0], "fp8-block", ["--format", "fp8", "--fp8-scheme", "block"])
    out = models.WORK / ("c_llama_" + to)
    qtl("convert", src, out, "--to", to, "--threads", "1")
    if to in ("nvfp4", "mxfp4"):
        check_ct_output(out, base[0], "llama", "convert-" + to)
        return
    t = models.tensors(out)
    if to == "bf16":
        want = {k[:-7]: models.f32(v) for k, v in t.items() if k.endswith("proj.weight")}
    else:
        want = {m: models.dequant_fp8(t, m, block=(128, 128), scale_key="weight_scale_inv")
                for m in models.linear_modules(t, ".weight_scale_inv")}
    m, info = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float16, device_map="cpu",
                                                   output_loading_info=True)
    no_loading_problems(info)
    sd = m.state_dict()
    assert want
    for mod, w in want.items():
        got = param(sd, mod)
        exp = torch.from_numpy(w).to(got.dtype)
        assert torch.equal(got, exp), (mod, (got.float() - exp.float()).abs().max().item())
    with torch.no_grad():
        logits = m(torch.tensor(models.PROMPT)).logits.float()
    cls = model_class(base[0])
    check_logits("llama convert-" + to, logits, dense_logits(base[0], want, cls), fp16_logits(base[0], cls))


def test_hf_fp8_block_dequantizes_in_transformers(base):
    from transformers import AutoModelForCausalLM
    qdir = models.quantize(base[0], "fp8-block", ["--format", "fp8", "--fp8-scheme", "block"])
    t = models.tensors(qdir)
    want = {m: models.dequant_fp8(t, m, block=(128, 128), scale_key="weight_scale_inv")
            for m in models.linear_modules(t, ".weight_scale_inv")}
    m, info = AutoModelForCausalLM.from_pretrained(qdir, dtype=torch.float16, device_map="cpu",
                                                   output_loading_info=True)
    no_loading_problems(info)
    sd = m.state_dict()
    for mod, w in want.items():
        got = param(sd, mod)
        exp = torch.from_numpy(w).to(got.dtype)
        assert got.dtype != torch.float8_e4m3fn, "transformers kept FP8 weights on a CPU"
        assert torch.equal(got, exp), (mod, (got.float() - exp.float()).abs().max().item())
    with torch.no_grad():
        logits = m(torch.tensor(models.PROMPT)).logits.float()
    cls = model_class(base[0])
    check_logits("llama fp8-block (HF fp8)", logits, dense_logits(base[0], want, cls), fp16_logits(base[0], cls))


def qtl_formats():
    import re
    from qtl_interop import qtl
    h = qtl("quantize", "--help").stdout
    m = re.search(r"--format TEXT:\{([^}]*)\}", h)
    return m.group(1).split(",") if m else []


COMPRESSOR_CASES = {
    "fp8-tensor": ["--format", "fp8", "--fp8-scheme", "tensor"],
    "fp8-channel": ["--format", "fp8", "--fp8-scheme", "channel"],
    "w4a16": ["--format", "w4a16"],
    "w8a16": ["--format", "w8a16"],
}


@pytest.mark.parametrize("fmt", list(COMPRESSOR_CASES))
def test_ct_compressor_writes_the_same_bytes(base, fmt):
    """compressed-tensors' own qparams (calculate_qparams on the weights' min/max per the scheme)
    and compressor (BaseCompressor registry, `compress`) on the same fp16 weights and QTL's
    scheme: the same scale and packed bytes as `qtl quantize`."""
    if COMPRESSOR_CASES[fmt][1] not in qtl_formats():
        pytest.skip("qtl quantize of this build offers no --format %s" % COMPRESSOR_CASES[fmt][1])
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationScheme
    from compressed_tensors.quantization.utils import calculate_qparams
    qdir = models.quantize(base[0], "ct-" + fmt, COMPRESSOR_CASES[fmt])
    qc = models.config(qdir)["quantization_config"]
    (group,) = qc["config_groups"].values()
    scheme = QuantizationScheme.model_validate(group)
    comp = BaseCompressor.get_value_from_registry(qc["format"])
    t = models.tensors(qdir)
    dense = models.tensors(base[0])
    args = scheme.weights
    checked = 0
    tie_moves = [0, 0]
    for mod in models.linear_modules(t, ".weight_scale"):
        w = torch.from_numpy(dense[mod + ".weight"].astype(np.float32))
        if args.strategy == "tensor":
            lo, hi = w.amin().reshape(1), w.amax().reshape(1)
        elif args.strategy == "channel":
            lo, hi = w.amin(1, keepdim=True), w.amax(1, keepdim=True)
        else:  # group
            g = w.reshape(w.shape[0], -1, args.group_size)
            lo, hi = g.amin(-1), g.amax(-1)
        scale, zp = calculate_qparams(lo, hi, args)
        qscale = torch.from_numpy(np.ascontiguousarray(t[mod + ".weight_scale"]).astype(np.float32))
        if args.type == "int" and args.symmetric:
            # BUG pinned (tools/qtl w4a16/w8a16, reported): QTL's symmetric scale is
            # amax / (2^(b-1) - 1) (amax/7, amax/127, vLLM's quantize_weights rule); CT's
            # calculate_qparams (what llm-compressor writes) is amax / ((2^b - 1) / 2)
            # (amax/7.5, amax/127.5; research/interop.md section 3.1 b). Both decompress
            # consistently, but the bytes differ. Fails once QTL follows CT: then delete this.
            half = 2 ** (args.num_bits - 1)
            ratio = (scale.float().reshape(qscale.shape) / qscale).median().item()
            assert abs(ratio - (half - 1) / (half - 0.5)) < 5e-3, ratio   # QTL scales are fp16
            checked += 1
            continue
        sd = {"weight": w, "weight_scale": scale.to(qscale.dtype).reshape(qscale.shape)}
        if not args.symmetric:
            sd["weight_zero_point"] = zp
        out = comp.compress(dict(sd), scheme)
        assert torch.equal(scale.float().reshape(qscale.shape), qscale), (mod, "scale")
        for k, v in out.items():
            if k == "weight_scale" or v is None:
                continue
            mine = np.ascontiguousarray(t[mod + "." + k])
            theirs = v.contiguous().view(torch.uint8).numpy().reshape(mine.shape)
            if k == "weight" and mine.dtype == md.float8_e4m3fn:
                # Known difference: CT quantizes x / s (one division, RNE to e4m3); QTL's FP8
                # quantizer multiplies by the reciprocal, x * (1/s), as vLLM's and sglang's
                # scaled_fp8_quant kernels do. They differ only where the two float32 quotients
                # fall on different sides of an e4m3 rounding boundary (ties, mostly). Pinned:
                # CT == e4m3(x / s) and QTL == e4m3(x * (1/s)) everywhere.
                x = w.numpy()
                s32 = qscale.numpy()
                sat = lambda v: np.clip(v, -448, 448).astype(md.float8_e4m3fn).view(np.uint8)
                assert (theirs == sat(x / s32)).all(), (mod, "CT is not e4m3(x / s)")
                assert (mine.view(np.uint8) == sat(x * (np.float32(1) / s32))).all(), (mod, "QTL is not e4m3(x * (1/s))")
                tie_moves[0] += int((theirs != mine.view(np.uint8)).sum())
                tie_moves[1] += mine.size
                continue
            assert theirs.tobytes() == mine.view(np.uint8).tobytes(), (mod, k)
        checked += 1
    assert checked
    if args.type == "int" and args.symmetric:
        print("RESULT CT compressor %s: %d modules, scale differs: CT amax/%.1f, QTL amax/%d (bug, reported)"
              % (fmt, checked, 2 ** (args.num_bits - 1) - 0.5, 2 ** (args.num_bits - 1) - 1))
        return
    print("RESULT CT compressor %s: %d modules, same scales; %d of %d codes differ, all x/s vs "
          "x*(1/s) (known)" % (fmt, checked, *tie_moves))
