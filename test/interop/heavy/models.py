"""The heavy tier's tiny models, made locally (nothing from a hub), and numpy dequantization of
QTL's files written from the format specs (docs/spec/interop.md sections 3-4), not from QTL code."""
import json
import os
import pathlib

import ml_dtypes as md
import numpy as np

from qtl_interop import BUILD, qtl

WORK = pathlib.Path(os.environ.get("QTL_INTEROP_WORK", BUILD / "interop-heavy"))
PROMPT = [[1, 5, 9, 13, 17, 21, 25, 29, 100, 200, 300, 400]]


def make_models():
    """llama/ (LlamaForCausalLM) and moe/ (Qwen3MoeForCausalLM), random, fp16, seed 0."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM
    WORK.mkdir(parents=True, exist_ok=True)
    common = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, vocab_size=512, tie_word_embeddings=False,
                  max_position_embeddings=128)
    if not (WORK / "llama" / "model.safetensors").exists():
        torch.manual_seed(0)
        LlamaForCausalLM(LlamaConfig(**common)).to(torch.float16).save_pretrained(WORK / "llama")
    if not (WORK / "moe" / "model.safetensors").exists():
        torch.manual_seed(0)
        Qwen3MoeForCausalLM(Qwen3MoeConfig(**common, moe_intermediate_size=128, num_experts=4,
                                           num_experts_per_tok=2, decoder_sparse_step=1,
                                           mlp_only_layers=[])).to(torch.float16).save_pretrained(WORK / "moe")
    return WORK / "llama", WORK / "moe"


def quantize(model_dir, name, args):
    out = WORK / ("q_%s_%s" % (model_dir.name, name))
    qtl("quantize", *args, "--threads", "1", model_dir, out)
    return out


def tensors(folder):
    """{name: ndarray} of every shard of a folder, through the reference parser."""
    from qtl_interop import load_any
    out = {}
    for f in sorted(pathlib.Path(folder).glob("*.safetensors")):
        out.update(load_any(f))
    return out


def f32(a):
    return np.asarray(a).astype(np.float32)


def dequant_fp8(t, mod, block=None, scale_key="weight_scale"):
    """CT float-quantized (tensor/channel) or block: w = e4m3(q) * s, in float32."""
    q = f32(t[mod + ".weight"].view(md.float8_e4m3fn))
    s = f32(t[mod + "." + scale_key])
    if block:
        bn, bk = block
        s = np.repeat(np.repeat(s, bn, 0), bk, 1)[: q.shape[0], : q.shape[1]]
    return q * s


def unpack_rows_i32(packed, bits, k):
    """Packed along axis 0 of int32 words, element i at bits [b*(i%pf), ...) of word i//pf."""
    pf = 32 // bits
    u = packed.view(np.uint32)
    sh = (np.arange(pf, dtype=np.uint32) * bits)[None, :, None]
    vals = (u[:, None, :] >> sh) & ((1 << bits) - 1)
    return vals.reshape(-1, u.shape[1])[:k]


def dequant_gptq(t, mod, bits):
    """GPTQ v1: qweight [K/pf, N] along K, qzeros [G, N/pf] along N (stored z - 1), scales [G, N],
    g_idx [K] (or k // gs). Returns [N, K] float32 (the [K, N] product transposed)."""
    qw = t[mod + ".qweight"]
    scales = f32(t[mod + ".scales"])
    k = qw.shape[0] * 32 // bits
    q = unpack_rows_i32(qw, bits, k).astype(np.int64)
    z = unpack_rows_i32(t[mod + ".qzeros"].T.copy(), bits, scales.shape[1]).T.astype(np.int64) + 1
    g = t[mod + ".g_idx"].astype(np.int64) if mod + ".g_idx" in t else np.arange(k) // (k // scales.shape[0])
    w = (q - z[g]).astype(np.float32) * scales[g]
    return w.T


def linear_modules(t, suffix):
    return sorted(k[: -len(suffix)] for k in t if k.endswith(suffix))


def config(folder):
    return json.loads((pathlib.Path(folder) / "config.json").read_text())


E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def dequant_ct(t, mod, qc):
    """Any compressed-tensors layout QTL writes (docs/spec/interop.md section 3.1), [N, K] float32:
    float-quantized / naive FP8 (tensor, channel, block), pack-quantized int (sym or asym, group or
    channel), nvfp4-pack-quantized, mxfp4-pack-quantized, mxfp8-quantized."""
    (group,) = qc["config_groups"].values()
    wa = group["weights"]
    if mod + ".weight_packed" not in t and t[mod + ".weight_scale"].dtype == np.uint8:  # MXFP8: 2^(c-127) per 32
        s = np.ldexp(np.float32(1), t[mod + ".weight_scale"].astype(np.int32) - 127).astype(np.float32)
        return f32(t[mod + ".weight"].view(md.float8_e4m3fn)) * np.repeat(s, 32, 1)
    if mod + ".weight_packed" not in t:
        s = t[mod + ".weight_scale"]
        n, k = t[mod + ".weight"].shape
        if s.size > 1 and tuple(s.shape) != (n, 1):
            bn, bk = wa.get("block_structure") or (128, 128)
            return dequant_fp8(t, mod, block=(bn, bk))
        return dequant_fp8(t, mod)
    packed = t[mod + ".weight_packed"]
    if packed.dtype == np.int32:
        b = wa["num_bits"]
        n, k = (int(v) for v in t[mod + ".weight_shape"])
        u = unpack_rows_i32(np.ascontiguousarray(packed.T), b, k).T.astype(np.int64)   # along K
        q = u - (1 << (b - 1))
        s = f32(t[mod + ".weight_scale"])
        g = np.arange(k) // (k // s.shape[1])
        if mod + ".weight_zero_point" in t:
            zu = unpack_rows_i32(t[mod + ".weight_zero_point"], b, n).astype(np.int64)  # along N
            zp = zu - (1 << (b - 1))
        else:
            zp = np.zeros((n, s.shape[1]), np.int64)
        return (q - zp[:, g]).astype(np.float32) * s[:, g]
    codes = np.stack([packed & 0xF, packed >> 4], -1).reshape(packed.shape[0], -1)
    e = E2M1[codes]
    if mod + ".weight_global_scale" in t:                  # NVFP4: scale / global, per 16
        s = f32(t[mod + ".weight_scale"].view(md.float8_e4m3fn)) / f32(t[mod + ".weight_global_scale"]).reshape(())
        return e * np.repeat(s, 16, 1)
    s = np.ldexp(np.float32(1), t[mod + ".weight_scale"].astype(np.int32) - 127).astype(np.float32)  # MXFP4
    return e * np.repeat(s, 32, 1)
