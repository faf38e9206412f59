"""Golden data for the light tier (test/data/interop/): a micro Llama made here (one layer), each
format's `qtl quantize` arguments, and the weights a real consumer dequantized from QTL's output
(transformers + compressed-tensors, transformers' HF fp8, GPTQModel's gptq_torch kernel).

With QTL_INTEROP_WRITE_GOLDEN=1 this writes test/data/interop/; otherwise it checks that the
consumers still give the committed weights. test/interop/light/test_golden_replay.py replays it
in CI without torch: QTL's output dequantized in numpy must equal these consumer weights."""
import hashlib
import json
import os
import shutil

import numpy as np
import pytest
import torch

import models
from qtl_interop import DATA, load_any

GOLDEN = DATA / "interop"
FORMATS = {
    "fp8-tensor": ["--format", "fp8", "--fp8-scheme", "tensor"],
    "fp8-channel": ["--format", "fp8", "--fp8-scheme", "channel"],
    "fp8-block": ["--format", "fp8", "--fp8-scheme", "block"],
    "gptq-int4-g64": ["--format", "gptq", "--bits", "4", "--group-size", "64"],
    "gptq-int4-asym-g64": ["--format", "gptq", "--bits", "4", "--asym", "--group-size", "64"],
    "gptq-int8-g128": ["--format", "gptq", "--bits", "8", "--group-size", "128"],
    "ct-w4a16-g64": ["--format", "w4a16", "--group-size", "64"],
    "ct-w4a16-asym-g128": ["--format", "w4a16", "--asym"],
    "ct-w8a16-channel": ["--format", "w8a16", "--group-size", "-1"],
    "ct-w8a16-asym-g64": ["--format", "w8a16", "--asym", "--group-size", "64"],
    "ct-nvfp4": ["--format", "nvfp4"],
    "ct-mxfp4": ["--format", "mxfp4"],
    "ct-fp8-block": ["--format", "fp8", "--fp8-scheme", "ct-block"],
}
KEEP = ("model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj")   # stored whole


def micro_llama():
    """The committed micro Llama when there is one (the light tier replays from it), else a new one."""
    from transformers import LlamaConfig, LlamaForCausalLM
    d = models.WORK / "micro"
    if not (d / "model.safetensors").exists() and (GOLDEN / "micro_llama.safetensors").exists():
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(GOLDEN / "micro_llama.safetensors", d / "model.safetensors")
        shutil.copy(GOLDEN / "micro_llama.config.json", d / "config.json")
    if not (d / "model.safetensors").exists():
        torch.manual_seed(1)
        LlamaForCausalLM(LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                                     num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                                     vocab_size=64, tie_word_embeddings=False,
                                     max_position_embeddings=32)).to(torch.float16).save_pretrained(d)
    return d


def consumer_weights(qdir, fmt):
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig, GPTQConfig
    if fmt.startswith("gptq"):
        from gptqmodel.nn_modules.qlinear import BaseQuantLinear
        bits = 8 if "int8" in fmt else 4
        m = AutoModelForCausalLM.from_pretrained(qdir, dtype=torch.float16, device_map="cpu",
                                                 quantization_config=GPTQConfig(bits=bits, backend="gptq_torch"))
        return {n: mod.dequantize_weight().T.contiguous().numpy() for n, mod in m.named_modules()
                if isinstance(mod, BaseQuantLinear)}
    kw = {} if fmt == "fp8-block" else {"quantization_config": CompressedTensorsConfig(run_compressed=False)}
    m = AutoModelForCausalLM.from_pretrained(qdir, dtype=torch.float16, device_map="cpu", **kw)
    return {n: mod.weight.detach().numpy().copy() for n, mod in m.named_modules()
            if isinstance(mod, torch.nn.Linear) and n != "lm_head"}


def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_golden(fmt):
    src = micro_llama()
    qdir = models.quantize(src, fmt, FORMATS[fmt])
    w = consumer_weights(qdir, fmt)
    record = {"args": FORMATS[fmt], "consumer_sha256": {k: sha(v) for k, v in sorted(w.items())},
              "qtl_output_sha256": {k: sha(v) for k, v in sorted(models.tensors(qdir).items())}}
    if os.environ.get("QTL_INTEROP_WRITE_GOLDEN") == "1":
        GOLDEN.mkdir(parents=True, exist_ok=True)
        if not (GOLDEN / "micro_llama.safetensors").exists():
            shutil.copy(src / "model.safetensors", GOLDEN / "micro_llama.safetensors")
            shutil.copy(src / "config.json", GOLDEN / "micro_llama.config.json")
        from safetensors.numpy import save_file
        save_file({k: w[k] for k in KEEP}, str(GOLDEN / ("%s.consumer.safetensors" % fmt)),
                  metadata={"format": "pt", "consumer": "transformers+GPTQModel gptq_torch" if fmt.startswith("gptq")
                            else "transformers (HF fp8)" if fmt == "fp8-block" else "transformers+compressed-tensors"})
        (GOLDEN / ("%s.json" % fmt)).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    else:
        want = json.loads((GOLDEN / ("%s.json" % fmt)).read_text())
        assert record["consumer_sha256"] == want["consumer_sha256"], "the consumer now dequantizes differently"
        kept = load_any(GOLDEN / ("%s.consumer.safetensors" % fmt))
        for k in KEEP:
            assert kept[k].tobytes() == w[k].tobytes()
