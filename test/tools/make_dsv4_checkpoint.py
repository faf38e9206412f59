"""Makes a small checkpoint in DeepSeek-V4's own form (V4-Flash; V4-Pro has the same), the input of
test_qtl_dsv4.py. Standard library only (safetensors_py writes the files).

Usage: make_dsv4_checkpoint.py OUT_DIR [--variant flash|flash-base|v4.1] [--shards N] [--seed S]
                               [--inexact] [--scale S]

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
--scale S multiplies every dimension (hidden, intermediate, the attention ranks, vocabulary) by S
for benchmarks: about 1.25 MB x S^2 (S = 29: 1.07 GB).
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


def linears(scale=1):
    """(name, out, in, routed expert?) of every quantized linear layer."""
    h, inter, q_rank, kv_rank, o_rank = H * scale, INTER * scale, 192 * scale, 160 * scale, 128 * scale
    out = []
    for i in range(LAYERS):
        p = "layers.%d." % i
        out += [(p + "attn.wq_a", q_rank, h, False), (p + "attn.wq_b", h, q_rank, False),
                (p + "attn.wkv", kv_rank, h, False), (p + "attn.wo_a", h, o_rank, False), (p + "attn.wo_b", h, h, False)]
        for e in range(E):
            q = p + "ffn.experts.%d." % e
            out += [(q + "w1", inter, h, True), (q + "w2", h, inter, True), (q + "w3", inter, h, True)]
        q = p + "ffn.shared_experts."
        out += [(q + "w1", inter, h, False), (q + "w2", h, inter, False), (q + "w3", inter, h, False)]
    return out


def make(folder, variant="flash", shards=2, seed=4, inexact=False, scale=1):
    """Writes the checkpoint into `folder` (see the file comment); returns its config."""
    rnd = random.Random(seed)
    block = 32 if variant == "v4.1" else 128
    finite = [c for c in range(256) if c not in (0x7F, 0xFF)]
    h, v, inter, q_rank, kv_rank = H * scale, V * scale, INTER * scale, 192 * scale, 160 * scale
    tensors = []

    def rbytes(n, choices=None):
        """n random bytes, or n bytes of `choices` (each random byte mapped to one of them)."""
        b = rnd.randbytes(n)
        return b if choices is None else b.translate(bytes(choices[i % len(choices)] for i in range(256)))

    def bf16(name, shape):
        n = 1
        for d in shape:
            n *= d
        # small normal bf16 values: sign, exponent 110..125, random mantissa (the high byte holds
        # the sign and the exponent's top 7 bits, 55..62; the low byte's top bit is its last)
        b = bytearray(rbytes(2 * n))
        b[1::2] = bytes(b[1::2]).translate(bytes((i & 0x80) | (55 + i % 8) for i in range(256)))
        tensors.append((name, "BF16", shape, bytes(b)))

    def f32(name, shape):
        tensors.append((name, "F32", shape, struct.pack("<%df" % shape[0], *[rnd.gauss(0, 1) for _ in range(shape[0])])))

    bf16("embed.weight", [v, h])
    for i in range(LAYERS):
        p = "layers.%d." % i
        bf16(p + "attn_norm.weight", [h])
        bf16(p + "attn.q_norm.weight", [q_rank])
        bf16(p + "attn.kv_norm.weight", [kv_rank])
        f32(p + "attn.attn_sink", [4])
        bf16(p + "ffn_norm.weight", [h])
        bf16(p + "ffn.gate.weight", [E, h])
        f32(p + "ffn.gate.bias", [E])
    for name, n, k, expert in linears(scale):
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
    bf16("norm.weight", [h])
    bf16("head.weight", [v, h])
    st.write_checkpoint(folder, tensors, shards)

    qc = dict(QUANT_CONFIG)
    config = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "hidden_size": h,
              "vocab_size": v, "num_hidden_layers": LAYERS, "n_routed_experts": E, "moe_intermediate_size": inter,
              "q_lora_rank": q_rank, "torch_dtype": "bfloat16", "expert_dtype": "fp4", "quantization_config": qc}
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
    ap.add_argument("--scale", type=int, default=1, help="every dimension times S (benchmarks)")
    a = ap.parse_args()
    make(a.out_dir, a.variant, a.shards, a.seed, a.inexact, a.scale)


if __name__ == "__main__":
    main()
