"""End-to-end tests of `qtl quantize` on fused 3-D MoE expert stacks.

Usage: test_qtl_moe.py QTL

Standard library only. The layouts are transformers' (docs/spec/checkpoint_formats.md §0.6), redone
here from the modelling code, not from QTL's:
  1. A Llama-4-shaped checkpoint (`feed_forward.experts.gate_up_proj` [E, H, 2I], in x out, gate the
     first half; `down_proj` [E, I, H]), a gpt-oss-shaped one (`mlp.experts.gate_up_proj` [E, H, 2I]
     with gate/up interleaved along the last dim, `gate_up_proj_bias` [E, 2I] likewise,
     `down_proj` [E, I, H], `down_proj_bias` [E, H]; F32) and a transformers v5 fused one
     (Qwen3-MoE `mlp.experts.gate_up_proj` [E, 2I, H], `down_proj` [E, H, I]): for every format and
     FP8 scheme, every output tensor equals, byte for byte, what `qtl quantize` writes for the same
     model given as a per-expert 2-D checkpoint (`experts.<e>.{gate,up,down}_proj.weight` [out, in],
     biases `experts.<e>.<proj>.bias`), and so does the written quantization_config; routers stay
     in the input's dtype.
  2. NVFP4: each expert's gate/up still share one weight_global_scale (the max amax of the two),
     and experts differ from each other.
  3. A 3-D stack whose layout is not understood (an unknown model_type, no config.json, a shape
     other than the family's) is refused, exit 2, naming the tensor and why, no output left;
     --keep-expert-stacks copies it with a warning and lists its experts module in `ignore`.
"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from checks import check, run_in_temp_dir  # noqa: E402

QTL = sys.argv[1]
E, H, I = 3, 64, 32

FORMATS = [["--format", "gptq", "--group-size", "32"], ["--format", "gptq", "--asym", "--group-size", "32"],
           ["--format", "w4a16", "--group-size", "32"], ["--format", "w8a16", "--asym", "--group-size", "-1"],
           ["--format", "nvfp4"], ["--format", "mxfp4"]] + \
          [["--format", "fp8", "--fp8-scheme", s] for s in ("tensor", "channel", "block", "ct-block")]


def run(*args):
    p = subprocess.run([QTL] + [str(a) for a in args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


class Mat:
    """A row-major [rows, cols] matrix of floats."""

    def __init__(self, rows, cols, values):
        self.rows, self.cols, self.v = rows, cols, values

    def at(self, r, c):
        return self.v[r * self.cols + c]


def rand_values(n, scale, rng):
    return [rng.uniform(-1.0, 1.0) * scale for _ in range(n)]


def encode(values, dtype):
    """F32 or BF16 (the high half of the F32 bits: every value here is exact in either way of
    writing it, so both checkpoints hold the same numbers)."""
    b = struct.pack("<%df" % len(values), *values)
    if dtype == "F32":
        return b
    return b"".join(b[i + 2:i + 4] for i in range(0, len(b), 4))


def bf16_round(values):
    """The values as BF16 holds them (truncated as `encode` writes them)."""
    out = []
    for x in values:
        (u,) = struct.unpack("<I", struct.pack("<f", x))
        (y,) = struct.unpack("<f", struct.pack("<I", u & 0xFFFF0000))
        out.append(y)
    return out


def tensor(name, dtype, shape, values):
    return (name, dtype, list(shape), encode(values, dtype))


def experts_of(rng, dtype):
    """Per expert: gate [I, H], up [I, H], down [H, I] (out x in), biases [I], [I], [H]. The up
    half of each expert has a larger amax than the gate half, and the experts differ."""
    out = []
    for e in range(E):
        r = (lambda v: bf16_round(v)) if dtype == "BF16" else (lambda v: v)
        out.append({"gate": Mat(I, H, r(rand_values(I * H, 1.0 + e, rng))),
                    "up": Mat(I, H, r(rand_values(I * H, 2.5 + e, rng))),
                    "down": Mat(H, I, r(rand_values(H * I, 0.5 + e, rng))),
                    "gate_b": r(rand_values(I, 0.1, rng)), "up_b": r(rand_values(I, 0.2, rng)),
                    "down_b": r(rand_values(H, 0.3, rng))})
    return out


def per_expert_tensors(prefix, ex, dtype, biases):
    """The experts as a per-expert 2-D checkpoint's tensors."""
    t = []
    for e, x in enumerate(ex):
        for proj in ("gate", "up", "down"):
            m = x[proj]
            t.append(tensor("%s%d.%s_proj.weight" % (prefix, e, proj), dtype, [m.rows, m.cols], m.v))
            if biases:
                b = x[proj + "_b"]
                t.append(tensor("%s%d.%s_proj.bias" % (prefix, e, proj), dtype, [len(b)], b))
    return t


def stacked_tensors(prefix, ex, dtype, layout):
    """The experts as the family stores them: `layout` llama4 (in x out, halves), gpt_oss (in x out,
    interleaved, with biases) or v5 (out x in, halves)."""
    gate_up, down, gate_up_b, down_b = [], [], [], []
    for x in ex:
        g, u, d = x["gate"], x["up"], x["down"]
        if layout == "v5":
            gate_up += g.v + u.v  # [2I, H]: gate rows then up rows
            down += d.v           # [H, I]
        else:
            for k in range(H):    # [H, 2I]: row k holds output column k of the fused layer
                if layout == "gpt_oss":
                    for n in range(I):
                        gate_up += [g.at(n, k), u.at(n, k)]
                else:
                    gate_up += [g.at(n, k) for n in range(I)] + [u.at(n, k) for n in range(I)]
            for k in range(I):    # [I, H] = down.T
                down += [d.at(n, k) for n in range(H)]
        if layout == "gpt_oss":
            for n in range(I):
                gate_up_b += [x["gate_b"][n], x["up_b"][n]]
        down_b += x["down_b"]
    if layout == "v5":
        shapes = ([E, 2 * I, H], [E, H, I])
    else:
        shapes = ([E, H, 2 * I], [E, I, H])
    t = [tensor(prefix + "gate_up_proj", dtype, shapes[0], gate_up), tensor(prefix + "down_proj", dtype, shapes[1], down)]
    if layout == "gpt_oss":
        t += [tensor(prefix + "gate_up_proj_bias", dtype, [E, 2 * I], gate_up_b),
              tensor(prefix + "down_proj_bias", dtype, [E, H], down_b)]
    return t


def model(layout, rng):
    """(config.json, per-expert tensors, stacked tensors, experts prefix, router module) of a small
    model of `layout`: one attention weight, a router, the experts."""
    if layout == "llama4":
        dtype = "BF16"
        config = {"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"],
                  "text_config": {"model_type": "llama4_text", "hidden_size": H, "intermediate_size": I,
                                  "intermediate_size_mlp": 2 * I, "num_local_experts": E}}
        layer = "language_model.model.layers.0."
        prefix, router = layer + "feed_forward.experts.", layer + "feed_forward.router"
    elif layout == "gpt_oss":
        dtype = "F32"
        config = {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "hidden_size": H,
                  "intermediate_size": I, "num_local_experts": E}
        layer = "model.layers.0."
        prefix, router = layer + "mlp.experts.", layer + "mlp.router"
    else:
        dtype = "BF16"
        config = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": H,
                  "intermediate_size": 4 * I, "moe_intermediate_size": I, "num_experts": E}
        layer = "model.layers.0."
        prefix, router = layer + "mlp.experts.", layer + "mlp.gate"
    ex = experts_of(rng, dtype)
    r = (lambda v: bf16_round(v)) if dtype == "BF16" else (lambda v: v)
    common = [tensor(layer + "self_attn.o_proj.weight", dtype, [H, H], r(rand_values(H * H, 1.0, rng))),
              tensor(router + ".weight", dtype, [E, H], r(rand_values(E * H, 1.0, rng)))]
    if layout == "gpt_oss":
        common.append(tensor(router + ".bias", dtype, [E], r(rand_values(E, 1.0, rng))))
    biases = layout == "gpt_oss"
    return (config, common + per_expert_tensors(prefix, ex, dtype, biases), common + stacked_tensors(prefix, ex, dtype, layout),
            prefix, router)


def write(folder, config, tensors):
    st.write_checkpoint(folder, tensors, 1)
    if config is not None:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)


def quant_config(out):
    with open(os.path.join(out, "config.json")) as f:
        return json.load(f)["quantization_config"]


def global_scale(t, module):
    """The NVFP4 weight_global_scale of `module` in the tensors `t`, None when there is none."""
    e = t.get(module + ".weight_global_scale")
    return struct.unpack("<f", e[2])[0] if e else None


def test_same_as_per_expert(tmp, layout, rng):
    """1 and 2."""
    config, flat, stacked, prefix, router = model(layout, rng)
    flat_in, stacked_in = os.path.join(tmp, layout + "-flat"), os.path.join(tmp, layout + "-stacked")
    write(flat_in, config, flat)
    write(stacked_in, config, stacked)
    for fmt in FORMATS:
        what = "%s %s" % (layout, " ".join(fmt))
        outs = []
        for src in (flat_in, stacked_in):
            out = os.path.join(tmp, "out-" + os.path.basename(src))
            shutil.rmtree(out, ignore_errors=True)
            rc, _, se = run("quantize", src, out, *fmt, "--threads", "2")
            check(rc == 0, "%s: %s quantized (%d %s)" % (what, os.path.basename(src), rc, se.strip()))
            outs.append(out)
        if not all(os.path.exists(os.path.join(o, "model.safetensors")) for o in outs):
            continue
        a, _ = st.read(os.path.join(outs[0], "model.safetensors"))
        b, _ = st.read(os.path.join(outs[1], "model.safetensors"))
        check(sorted(a) == sorted(b), "%s: the same tensor names (only per-expert: %s; only stacked: %s)"
              % (what, sorted(set(a) - set(b))[:4], sorted(set(b) - set(a))[:4]))
        differ = [n for n in a if n in b and a[n] != b[n]]
        check(not differ, "%s: every tensor equal byte for byte (differ: %s)" % (what, differ[:4]))
        check(quant_config(outs[0]) == quant_config(outs[1]), what + ": the same quantization_config")
        check(b.get(router + ".weight", ("",))[0] == ("F32" if layout == "gpt_oss" else "BF16"),
              what + ": the router kept in the input's dtype")
        check(any(n.startswith(prefix + "0.gate_proj.") and not n.endswith(".bias") and n != prefix + "0.gate_proj.weight"
                  for n in b) or b.get(prefix + "0.gate_proj.weight", ("",))[0] == "F8_E4M3",
              what + ": expert 0's gate quantized")
        if fmt == ["--format", "nvfp4"]:
            gs = [[global_scale(b, "%s%d.%s_proj" % (prefix, e, p)) for p in ("gate", "up")] for e in range(E)]
            check(all(g == u and g is not None for g, u in gs),
                  "%s: each expert's gate/up share one global scale (%s)" % (what, gs))
            check(len({g for g, _ in gs}) == E, "%s: each expert its own global scale (%s)" % (what, gs))


def test_refused(tmp, rng):
    """3."""
    config, _, stacked, prefix, _ = model("llama4", rng)
    cases = [("unknown model_type", dict(config, model_type="mystery_moe", text_config=dict(config["text_config"], model_type="mystery_moe_text")),
              ["mystery_moe", "layout"]),
             ("no config.json", None, ["config.json"]),
             ("another shape", dict(config, text_config=dict(config["text_config"], intermediate_size=I // 2)),
              ["shape [3, 64, 64]", "[3, 64, 32]"])]
    for what, cfg, words in cases:
        src = os.path.join(tmp, "refused-in")
        shutil.rmtree(src, ignore_errors=True)
        write(src, cfg, stacked)
        out = os.path.join(tmp, "refused-out")
        rc, _, se = run("quantize", src, out, "--format", "w4a16", "--group-size", "32")
        check(rc == 2 and "qtl: error:" in se and prefix + "gate_up_proj" in se and all(w in se for w in words)
              and "--keep-expert-stacks" in se, "%s: exit 2 naming the stack and why (%d %s)" % (what, rc, se.strip()))
        check(not os.path.exists(out), what + ": no output")
        rc, _, se = run("quantize", src, out, "--format", "w4a16", "--group-size", "32", "--keep-expert-stacks")
        check(rc == 0 and "warning" in se and "copied unquantized" in se,
              "%s, --keep-expert-stacks: copied with a warning (%d %s)" % (what, rc, se.strip()))
        if rc == 0:
            t, _ = st.read(os.path.join(out, "model.safetensors"))
            check(t.get(prefix + "gate_up_proj", ("",))[1] == [E, H, 2 * I], what + ": the stack copied whole")
            check(prefix[:-1] in quant_config(out)["ignore"], "%s: %s in ignore" % (what, prefix[:-1]))
        shutil.rmtree(out, ignore_errors=True)


def main():
    rng = random.Random(7)

    def body(tmp):
        for layout in ("llama4", "gpt_oss", "v5"):
            test_same_as_per_expert(tmp, layout, rng)
        test_refused(tmp, rng)
    run_in_temp_dir("qtl-moe-test-", body)


if __name__ == "__main__":
    main()
