"""GPTQ (`qtl quantize --format gptq`) through transformers -> optimum -> GPTQModel's pure-torch
kernel on the CPU (backend gptq_torch, fp16): loads with no missing keys, every
`dequantize_weight()` equals the numpy dequantization of QTL's file, logits match the dense model."""
import os

import pytest
import torch

import models
from test_consumers import base, check_logits, dense_logits, fp16_logits, model_class, no_loading_problems, param  # noqa: F401

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")

CASES = {
    "gptq-int4-g128": (4, ["--format", "gptq", "--bits", "4", "--group-size", "128"]),
    "gptq-int4-asym-g64": (4, ["--format", "gptq", "--bits", "4", "--asym", "--group-size", "64"]),
    "gptq-int8-g128": (8, ["--format", "gptq", "--bits", "8", "--group-size", "128"]),
}


@pytest.mark.parametrize("which", ["llama", "moe"])
@pytest.mark.parametrize("case", list(CASES))
def test_gptq_torch_kernel(base, case, which):
    from gptqmodel.nn_modules.qlinear import BaseQuantLinear
    from transformers import AutoModelForCausalLM, GPTQConfig
    bits, args = CASES[case]
    model_dir = base[0] if which == "llama" else base[1]
    qdir = models.quantize(model_dir, case, args)
    t = models.tensors(qdir)
    want = {m: models.dequant_gptq(t, m, bits) for m in models.linear_modules(t, ".qweight")}
    m, info = AutoModelForCausalLM.from_pretrained(
        qdir, dtype=torch.float16, device_map="cpu", output_loading_info=True,
        quantization_config=GPTQConfig(bits=bits, backend="gptq_torch"))
    no_loading_problems(info)
    seen = 0
    for name, mod in m.named_modules():
        if isinstance(mod, BaseQuantLinear):
            got = mod.dequantize_weight().T
            exp = torch.from_numpy(want[name]).to(got.dtype)
            assert torch.equal(got, exp), (name, (got.float() - exp.float()).abs().max().item())
            seen += 1
    assert seen == len(want), (seen, len(want))
    with torch.no_grad():
        logits = m(torch.tensor(models.PROMPT)).logits.float()
    cls = model_class(model_dir)
    check_logits("%s %s (GPTQModel gptq_torch)" % (which, case), logits,
                 dense_logits(model_dir, want, cls), fp16_logits(model_dir, cls))
