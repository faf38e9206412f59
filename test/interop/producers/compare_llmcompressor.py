"""llm-compressor's `model_free_ptq` and `qtl quantize` on the same Qwen3-shaped bf16 checkpoint,
every output tensor and config key compared (the producers tier, opt-in: scripts/interop-producers.sh).

Usage: compare_llmcompressor.py QTL WORK_DIR [SCHEME ...]

For each scheme (default: all of llmc_rules.SCHEMES) it runs model_free_ptq(scheme=NAME,
ignore=llmc_rules.IGNORE) on the CPU and `qtl quantize` with the matching flags into
WORK_DIR/<scheme>/{llmc,qtl}, then compares them with llmc_rules.compare (test/tools/, the rules
the CI test test_qtl_llmc.py applies to recorded outputs): every tensor equal, or one of the known
differences holding its exact relation; every quantization_config key equal or known; config.json's
other keys equal. Prints one line per scheme and exits 1 on any failure.

The checkpoint: Qwen3 names (embed_tokens, q/k/v/o_proj, q_norm/k_norm, gate/up/down_proj, the
layer norms, model.norm, lm_head untied), bf16, two layers in three shards with q_proj and k_proj of
layer 1 in different files (model_free_ptq's cross-shard fusion), and spreads that differ inside
each fused group (k_proj's 1.18x q_proj's, up_proj's 1.5x gate_proj's), so that a per-shard NVFP4
global scale would differ from the fused one.
"""
import json
import os
import shutil
import subprocess
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import llmc_rules  # noqa: E402


def write_checkpoint(folder, tensors, shard_of, config):
    """Saves `tensors` (name -> bf16 torch tensor) into `folder`: the files `shard_of(name)` names
    (with model.safetensors.index.json when there are several) and config.json."""
    os.makedirs(folder, exist_ok=True)
    files = {name: shard_of(name) for name in tensors}
    for fn in sorted(set(files.values())):
        save_file({n: t.contiguous() for n, t in tensors.items() if files[n] == fn}, os.path.join(folder, fn),
                  metadata={"format": "pt"})
    if len(set(files.values())) > 1:
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": files}, f, indent=2)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def qwen3_config(layers, hidden, inter, heads, kv_heads, head_dim, vocab):
    return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": hidden,
            "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads, "head_dim": head_dim, "vocab_size": vocab,
            "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
            "max_position_embeddings": 4096, "rope_theta": 1000000.0, "hidden_act": "silu"}


def qwen3_tensors(shapes, layers, seed=0):
    """Qwen3's tensors in bf16: `shapes` gives [N, K] of each linear (q, k, v, o, gate, up, down),
    of embed_tokens and lm_head, and the lengths of the norms (hidden, head_dim). Spreads differ
    inside each fused group: k_proj 1.18x q_proj, v_proj 0.7x, up_proj 1.5x gate_proj."""
    g = torch.Generator().manual_seed(seed)
    spread = {"k_proj": 1.18, "v_proj": 0.7, "up_proj": 1.5}

    def w(name):
        n, k = shapes[name]
        return (torch.randn(n, k, generator=g) * 0.02 * spread.get(name, 1.0)).to(torch.bfloat16)

    def norm(n):
        return (1.0 + 0.1 * torch.randn(n, generator=g)).to(torch.bfloat16)

    hidden, head_dim = shapes["hidden"], shapes["head_dim"]
    tensors = {"model.embed_tokens.weight": w("embed_tokens"), "model.norm.weight": norm(hidden),
               "lm_head.weight": w("lm_head")}
    for i in range(layers):
        p = "model.layers.%d." % i
        tensors[p + "input_layernorm.weight"] = norm(hidden)
        tensors[p + "post_attention_layernorm.weight"] = norm(hidden)
        tensors[p + "self_attn.q_norm.weight"] = norm(head_dim)
        tensors[p + "self_attn.k_norm.weight"] = norm(head_dim)
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[p + "self_attn." + proj + ".weight"] = w(proj)
        for proj in ("gate_proj", "up_proj", "down_proj"):
            tensors[p + "mlp." + proj + ".weight"] = w(proj)
    return tensors


def make_checkpoint(folder, layers=2, hidden=256, inter=512, heads=4, kv_heads=2, head_dim=64, vocab=512):
    """The Qwen3-shaped bf16 checkpoint of the comparison, in three shards: embeddings and layer 0;
    layer 1's q_proj and norms; the rest (so q_proj and k_proj of layer 1 are in different files)."""
    shapes = {"q_proj": (heads * head_dim, hidden), "k_proj": (kv_heads * head_dim, hidden),
              "v_proj": (kv_heads * head_dim, hidden), "o_proj": (hidden, heads * head_dim),
              "gate_proj": (inter, hidden), "up_proj": (inter, hidden), "down_proj": (hidden, inter),
              "embed_tokens": (vocab, hidden), "lm_head": (vocab, hidden), "hidden": hidden,
              "head_dim": head_dim}

    def shard_of(name):
        if name.startswith("model.embed_tokens") or name.startswith("model.layers.0."):
            return "model-00001-of-00003.safetensors"
        if name.startswith("model.layers.1.") and ("q_proj" in name or "norm" in name):
            return "model-00002-of-00003.safetensors"
        return "model-00003-of-00003.safetensors"

    write_checkpoint(folder, qwen3_tensors(shapes, layers), shard_of,
                     qwen3_config(layers, hidden, inter, heads, kv_heads, head_dim, vocab))


def run_llmc(src, out, scheme):
    from llmcompressor import model_free_ptq
    shutil.rmtree(out, ignore_errors=True)
    model_free_ptq(src, out, scheme=scheme, ignore=llmc_rules.IGNORE, max_workers=1, device="cpu")


def run_qtl(qtl, src, out, flags):
    p = subprocess.run([qtl, "quantize", src, out, "--threads", "1"] + flags, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("qtl quantize %s: rc %d: %s" % (flags, p.returncode, p.stderr))


def main():
    qtl, work = sys.argv[1], sys.argv[2]
    schemes = sys.argv[3:] or list(llmc_rules.SCHEMES)
    src = os.path.join(work, "input")
    shutil.rmtree(src, ignore_errors=True)
    make_checkpoint(src)
    inp = llmc_rules.read_folder(src)
    failed = 0
    for scheme in schemes:
        d = os.path.join(work, scheme)
        llmc, ours = os.path.join(d, "llmc"), os.path.join(d, "qtl")
        shutil.rmtree(d, ignore_errors=True)
        run_llmc(src, llmc, scheme)
        run_qtl(qtl, src, ours, llmc_rules.SCHEMES[scheme])
        with open(os.path.join(ours, "config.json")) as f:
            oc = json.load(f)
        with open(os.path.join(llmc, "config.json")) as f:
            tc = json.load(f)
        o = llmc_rules.read_folder(ours)
        equal, notes, failures = llmc_rules.compare(scheme, inp, o, llmc_rules.read_folder(llmc),
                                                    oc.pop("quantization_config"), tc.pop("quantization_config"))
        if oc != tc:
            failures.append("config.json keys beside quantization_config differ")
        print("%s: %s, %d tensors equal of %d%s" % (scheme, "FAIL" if failures else "ok", equal, len(o),
                                                   "".join("; " + n for n in notes)))
        for f in failures:
            print("  " + f)
        failed += bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
