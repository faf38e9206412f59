#!/usr/bin/env python3
"""GPTQ `dynamic` keys that Python's `re` accepts, through `qtl lint`, `qtl explain` and `qtl quantize`.

    test_qtl_regex_keys.py QTL

A fixed-width lookbehind is run (Python's answers, checked against `re` when a key decides a
layer); a backreference, which QTL's regex engine does not run, is reported as QTL's limit ("QTL
cannot tell"), never as the engine raising re.error; a variable-width lookbehind is the re.error
Python raises. Prints a summary; exits 1 if any check fails.
"""
import json
import os
import random
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from checks import check, run_in_temp_dir  # noqa: E402

QTL = sys.argv[1]
H, I, V, L = 64, 128, 64, 2
LINEARS = [("self_attn.q_proj", H, H), ("self_attn.k_proj", H // 2, H), ("self_attn.v_proj", H // 2, H),
           ("self_attn.o_proj", H, H), ("mlp.gate_proj", I, H), ("mlp.up_proj", I, H), ("mlp.down_proj", H, I)]


def run(*args):
    p = subprocess.run([QTL] + [str(a) for a in args], capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout, p.stderr


def make_checkpoint(folder):
    """A 2-layer Llama of hidden size 64, fp16."""
    rnd = random.Random(3)
    tensors = []

    def add(name, shape):
        n = 1
        for d in shape:
            n *= d
        tensors.append((name, "F16", shape, struct.pack("<%de" % n, *[rnd.gauss(0, 0.02) for _ in range(n)])))

    add("model.embed_tokens.weight", [V, H])
    for i in range(L):
        for name, n, k in LINEARS:
            add("model.layers.%d.%s.weight" % (i, name), [n, k])
        add("model.layers.%d.input_layernorm.weight" % i, [H])
        add("model.layers.%d.post_attention_layernorm.weight" % i, [H])
    add("model.norm.weight", [H])
    add("lm_head.weight", [V, H])
    st.write_checkpoint(folder, tensors, 1)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
                   "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": 2,
                   "num_key_value_heads": 1, "vocab_size": V, "torch_dtype": "float16"}, f)


def gptq_config(tmp, name, key):
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump({"quant_method": "gptq", "bits": 4, "group_size": 64, "sym": True, "desc_act": False,
                   "dynamic": {key: {}}}, f)
    return path


def dtypes(folder):
    out = {}
    for fname in os.listdir(folder):
        if fname.endswith(".safetensors"):
            header, _ = st.read(os.path.join(folder, fname))
            out.update({k: v[0] for k, v in header.items()})
    return out


def test_lookbehind(tmp, src):
    # Python: re.match(r"model\.layers\.\d+\.(?<=\.0\.)mlp\..*", name) for layer 0's MLP only
    key = r"-:model\.layers\.\d+\.(?<=\.0\.)mlp\..*"
    kept = {"model.layers.%d.%s" % (i, n) for i in range(L) for n, _, _ in LINEARS
            if re.match(key[2:], "model.layers.%d.%s" % (i, n))}
    check(kept == {"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"},
          "Python's re keeps layer 0's MLP: %s" % sorted(kept))
    cfg = gptq_config(tmp, "behind", key)
    rc, out, err = run("lint", "--config", cfg, "--checkpoint", src)
    check("re.error" not in out + err and "raises" not in out and "cannot tell" not in out,
          "lint runs a fixed-width lookbehind (exit %d): %s" % (rc, (out + err)[:600]))
    rc, out, err = run("explain", "--config", cfg, "--checkpoint", src, "--json", "--consumer", "sglang_gptq")
    decisions = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    check(rc == 0 and decisions and all(d["error"] is None for d in decisions),
          "explain: decisions without error (exit %d): %s" % (rc, (out + err)[:600]))
    skipped = {d["module"] for d in decisions if d["skipped"] and d["rule"] == key}
    check({"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"} <= skipped
          and not any(m.startswith("model.layers.1.") for m in skipped),
          "explain: the lookbehind rule skips layer 0's MLP alone: %s" % sorted(skipped))
    dst = os.path.join(tmp, "out-behind")
    rc, out, err = run("quantize", src, dst, "--format", "gptq", "--config", cfg)
    check(rc == 0, "quantize with a fixed-width lookbehind key: exit 0 (%d): %s" % (rc, err[-600:]))
    if rc == 0:
        types = dtypes(dst)
        for i in range(L):
            for n, _, _ in LINEARS:
                module = "model.layers.%d.%s" % (i, n)
                if module in kept:
                    check(types.get(module + ".weight") == "F16", module + ": kept by the lookbehind rule")
                else:
                    check(module + ".qweight" in types, module + ": quantized")
    # under re.match a lookbehind at position 0 sees nothing behind: the rule matches no layer
    cfg = gptq_config(tmp, "behind0", r"-:(?<=layers\.0\.)mlp.*")
    rc, out, err = run("lint", "--config", cfg, "--checkpoint", src)
    check("re.error" not in out + err and "raises" not in out, "lint: a key starting with a lookbehind: " + out[:600])
    rc, out, err = run("quantize", src, os.path.join(tmp, "out-behind0"), "--format", "gptq", "--config", cfg)
    check(rc == 0, "quantize with -:(?<=layers\\.0\\.)mlp.*: exit 0 (%d): %s" % (rc, err[-600:]))


def test_backreference(tmp, src):
    for name, key in (("backref", r"+:.*\.1\..*(a)\1"), ("named", r"+:.*\.1\..*(?P<n>a)(?P=n)")):
        re.compile(key[2:])  # Python accepts both
        cfg = gptq_config(tmp, name, key)
        rc, out, err = run("lint", "--config", cfg, "--checkpoint", src)
        problems = [x for x in out.splitlines() if x.startswith(("error:", "fused:"))]
        check(rc == 3 and problems, "lint %s: problems reported, exit 3 (%d): %s" % (key, rc, (out + err)[:400]))
        check(all("QTL cannot tell" in x and "backreferences" in x and "re.error" not in x and " raises " not in x
                  for x in problems), "lint %s: QTL's limit, not an engine's re.error: %s" % (key, problems[:2]))
        rc, out, err = run("explain", "--config", cfg, "--checkpoint", src, "--json", "--consumer", "sglang_gptq")
        errors = {d["module"]: d["error"] for d in map(json.loads, filter(lambda x: x.startswith("{"), out.splitlines()))}
        linear = ["model.layers.%d.%s" % (i, n) for i in range(L) for n, _, _ in LINEARS]
        check(all((errors.get(m) or "").startswith("qtl::regex_unsupported_error: ") for m in linear),
              "explain %s: each linear layer's error is QTL's limit: %s" % (key, [errors.get(m) for m in linear][:2]))
        rc, out, err = run("quantize", src, os.path.join(tmp, "out-" + name), "--format", "gptq", "--config", cfg)
        check(rc == 2 and "QTL cannot tell" in err and "backreferences" in err and "re.error" not in err
              and "would raise" not in err, "quantize %s refuses naming QTL's limit (%d): %s" % (key, rc, err[-500:]))


def test_variable_lookbehind(tmp, src):
    key = r"-:.*(?<=a|bc)mlp"
    try:
        re.compile(key[2:])
        check(False, "Python accepts a variable-width lookbehind?")
    except re.error as e:
        check("look-behind requires fixed-width pattern" in str(e), "Python's message: %s" % e)
    cfg = gptq_config(tmp, "variable", key)
    rc, out, err = run("lint", "--config", cfg, "--checkpoint", src)
    problems = [x for x in out.splitlines() if x.startswith(("error:", "fused:"))]
    check(rc == 3 and problems and all(" raises re.error: " in x and "look-behind requires fixed-width pattern" in x
                                       for x in problems), "lint: the engine's re.error: %s" % problems[:2])
    rc, out, err = run("quantize", src, os.path.join(tmp, "out-variable"), "--format", "gptq", "--config", cfg)
    check(rc == 2 and "would raise re.error" in err and "look-behind requires fixed-width pattern" in err,
          "quantize refuses with the engine's re.error (%d): %s" % (rc, err[-500:]))


def main():
    def tests(tmp):
        src = os.path.join(tmp, "in")
        make_checkpoint(src)
        test_lookbehind(tmp, src)
        test_backreference(tmp, src)
        test_variable_lookbehind(tmp, src)
    run_in_temp_dir("qtl-regex-keys-", tests)


if __name__ == "__main__":
    main()
