"""Makes a small checkpoint in DeepSeek-V4's own form (V4-Flash; V4-Pro has the same), the input of
test_qtl_dsv4.py. Standard library only (safetensors_py writes the files).

Usage: make_dsv4_checkpoint.py OUT_DIR [--variant flash|flash-base|v4.1] [--shards N] [--seed S]
                               [--inexact]

The form (docs/spec/deepseek_v4.md):
  config.json   quantization_config {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                "weight_block_size": [128, 128], "activation_scheme": "dynamic"}, top-level
                "expert_dtype": "fp4", model_type "deepseek_v4"
  DeepSeek's tensor names: embed.weight, layers.N.attn.{wq_a,wq_b,wkv,wo_a,wo_b}.weight,
  layers.N.ffn.experts.E.w{1,2,3}.weight, layers.N.ffn.shared_experts.w{1,2,3}.weight, head.weight;
  each quantized weight's scales are L.scale.
  routed experts  I8 [out, in/2] (two e2m1 codes a byte, element 2j in the low nibble) with
                  F8_E8M0 [out, in/32] scales
  other linears   F8_E4M3 [out, in] with F8_E8M0 [ceil(out/128), ceil(in/128)] scales
  not quantized   BF16 norms, embedding, head and router gate; F32 gate bias and attention sinks

Some dimensions are not multiples of 128 (partial blocks, which the engines do not take but QTL
does), and one expert group's scale lies 2^26 below its block's top with zero codes (exact).
Variants, for the refusals of other releases:
  flash-base  "expert_dtype": "fp8": experts F8_E4M3 [out, in] with F32 128x128 block scales
  v4.1        "weight_block_size": [32, 32]: every F8_E4M3 weight's scales per 32x32 block
--inexact plants a block that the cast to e4m3 cannot hold: in layers.1.ffn.experts.2.w2.weight,
element (130, 32) is e2m1 0.5 with scale 2^-18 in block (1, 0), whose largest scale is 2^-3
(INEXACT below names them).
"""
import argparse
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402

H, V, E, INTER, LAYERS = 256, 64, 4, 160, 2
# The planted inexact block (--inexact): tensor, element (row, column), the group's scale code and
# its block's largest.
INEXACT = ("layers.1.ffn.experts.2.w2.weight", 130, 32, 109, 124)

QUANT_CONFIG = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                "weight_block_size": [128, 128], "activation_scheme": "dynamic"}


def cdiv(a, b):
    return (a + b - 1) // b


def linears():
    """(name, out, in, routed expert?) of every quantized linear layer."""
    out = []
    for i in range(LAYERS):
        p = "layers.%d." % i
        out += [(p + "attn.wq_a", 192, H, False), (p + "attn.wq_b", H, 192, False), (p + "attn.wkv", 160, H, False),
                (p + "attn.wo_a", H, 128, False), (p + "attn.wo_b", H, H, False)]
        for e in range(E):
            q = p + "ffn.experts.%d." % e
            out += [(q + "w1", INTER, H, True), (q + "w2", H, INTER, True), (q + "w3", INTER, H, True)]
        q = p + "ffn.shared_experts."
        out += [(q + "w1", INTER, H, False), (q + "w2", H, INTER, False), (q + "w3", INTER, H, False)]
    return out


def make(folder, variant="flash", shards=2, seed=4, inexact=False):
    """Writes the checkpoint into `folder` (see the file comment); returns its config."""
    rnd = random.Random(seed)
    block = 32 if variant == "v4.1" else 128
    finite = [c for c in range(256) if c not in (0x7F, 0xFF)]
    tensors = []

    def rbytes(n, choices=None):
        if choices is None:
            return bytes(rnd.getrandbits(8) for _ in range(n))
        return bytes(rnd.choice(choices) for _ in range(n))

    def bf16(name, shape):
        n = 1
        for d in shape:
            n *= d
        # small normal bf16 values: sign, exponent 110..125, random mantissa
        vals = [(rnd.getrandbits(1) << 15) | (rnd.randint(110, 125) << 7) | rnd.getrandbits(7) for _ in range(n)]
        tensors.append((name, "BF16", shape, struct.pack("<%dH" % n, *vals)))

    def f32(name, shape):
        tensors.append((name, "F32", shape, struct.pack("<%df" % shape[0], *[rnd.gauss(0, 1) for _ in range(shape[0])])))

    bf16("embed.weight", [V, H])
    for i in range(LAYERS):
        p = "layers.%d." % i
        bf16(p + "attn_norm.weight", [H])
        bf16(p + "attn.q_norm.weight", [192])
        bf16(p + "attn.kv_norm.weight", [160])
        f32(p + "attn.attn_sink", [4])
        bf16(p + "ffn_norm.weight", [H])
        bf16(p + "ffn.gate.weight", [E, H])
        f32(p + "ffn.gate.bias", [E])
    for name, n, k, expert in linears():
        if expert and variant != "flash-base":
            codes = bytearray(rbytes(n * k // 2))
            scales = bytearray(rbytes(n * k // 32, list(range(116, 125))))
            if name.endswith("experts.0.w1"):
                scales[5] = 98  # 2^26 below the top: exact only as zeros
                codes[5 * 16:6 * 16] = bytes(16)
            if inexact and name + ".weight" == INEXACT[0]:
                _, row, col, low, top = INEXACT
                g = row * (k // 32) + col // 32
                scales[g] = low
                scales[g + 1] = top
                codes[g * 16] = 0x01  # element (row, col): e2m1 0.5, the next one 0
            tensors.append((name + ".weight", "I8", [n, k // 2], bytes(codes)))
            tensors.append((name + ".scale", "F8_E8M0", [n, k // 32], bytes(scales)))
        elif expert:  # V4-Flash-Base: FP8 experts with F32 block scales
            tensors.append((name + ".weight", "F8_E4M3", [n, k], rbytes(n * k, finite)))
            s = [2.0 ** -rnd.randint(6, 12) * rnd.uniform(1, 2) for _ in range(cdiv(n, 128) * cdiv(k, 128))]
            tensors.append((name + ".scale", "F32", [cdiv(n, 128), cdiv(k, 128)], struct.pack("<%df" % len(s), *s)))
        else:
            tensors.append((name + ".weight", "F8_E4M3", [n, k], rbytes(n * k, finite)))
            shape = [cdiv(n, block), cdiv(k, block)]
            tensors.append((name + ".scale", "F8_E8M0", shape, rbytes(shape[0] * shape[1], list(range(112, 122)))))
    bf16("norm.weight", [H])
    bf16("head.weight", [V, H])
    st.write_checkpoint(folder, tensors, shards)

    qc = dict(QUANT_CONFIG)
    config = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "hidden_size": H,
              "vocab_size": V, "num_hidden_layers": LAYERS, "n_routed_experts": E, "moe_intermediate_size": INTER,
              "q_lora_rank": 192, "torch_dtype": "bfloat16", "expert_dtype": "fp4", "quantization_config": qc}
    if variant == "flash-base":
        config["expert_dtype"] = "fp8"
    if variant == "v4.1":
        config["model_type"] = "deepseek_v41"
        qc["weight_block_size"] = [32, 32]
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"model_max_length": 4096}, f)
    return config


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--variant", choices=["flash", "flash-base", "v4.1"], default="flash")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--inexact", action="store_true")
    a = ap.parse_args()
    make(a.out_dir, a.variant, a.shards, a.seed, a.inexact)


if __name__ == "__main__":
    main()
