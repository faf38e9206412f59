"""End-to-end tests of `qtl explain` and `qtl lint` against what the engines (and `qtl quantize`) do.

  1. explain, lint and quantize on one checkpoint give one decision per module: only linear layers
     are decided (norms, embeddings and MoE routers are "not a linear layer" / "MoE router"), a
     skip-list entry naming a norm is unused, and a quantized checkpoint's linear modules (GPTQ
     `qweight`, FP8 `weight` + `weight_scale_inv`) are listed and decided as before quantization.
  2. The default packed_modules_mapping is one mapping: lint says the same with and without
     --packed-modules-mapping naming it (vLLM raises ValueError for a half-skipped qkv_proj).
  3. Text from files reaches the terminal escaped: ESC/OSC/BEL in tensor names and config entries,
     U+202E, a 100 KB name (abridged with a marker), in explain, lint, inspect and error messages.
  4. --checkpoint without --config reads the checkpoint's config.json; a model config without a
     quantization_config says so; the default consumers are those that load the quant_method.

Usage: test_qtl_explain.py QTL
"""
import json
import os
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from checks import check, run_in_temp_dir  # noqa: E402

QTL = sys.argv[1]


def run(*args, stdin=None):
    p = subprocess.run([QTL] + [str(a) for a in args], input=stdin, capture_output=True)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), p.stdout + p.stderr


H, I, V = 64, 128, 64  # hidden, intermediate, vocabulary
LINEAR = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
ROUTER = "model.layers.1.block_sparse_moe.gate"


def shape_of(leaf):
    return {"k_proj": [H // 2, H], "v_proj": [H // 2, H], "gate_proj": [I, H], "up_proj": [I, H],
            "down_proj": [H, I]}.get(leaf.split(".")[-1], [H, H])


def bf16_tensor(name, shape, seed):
    n = 1
    for d in shape:
        n *= d
    vals = [((i * 7 + seed * 13) % 23 - 11) / 64.0 for i in range(n)]
    data = b"".join(struct.pack("<f", v)[2:] for v in vals)  # bf16: the high half of float32
    return (name, "BF16", shape, data)


def make_llama(folder, extra=()):
    """A 2-layer Llama-shaped bf16 checkpoint with norms, embeddings, lm_head and one MoE router."""
    tensors = [bf16_tensor("model.embed_tokens.weight", [V, H], 1)]
    for i in range(2):
        p = "model.layers.%d." % i
        for j, m in enumerate(LINEAR):
            tensors.append(bf16_tensor(p + m + ".weight", shape_of(m), i * 10 + j))
        tensors.append(bf16_tensor(p + "input_layernorm.weight", [H], 2))
        tensors.append(bf16_tensor(p + "post_attention_layernorm.weight", [H], 3))
    tensors.append(bf16_tensor(ROUTER + ".weight", [4, H], 4))
    tensors.append(bf16_tensor("model.norm.weight", [H], 5))
    tensors.append(bf16_tensor("lm_head.weight", [V, H], 6))
    tensors += list(extra)
    st.write_checkpoint(folder, tensors, 1)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
                   "intermediate_size": I, "num_hidden_layers": 2, "vocab_size": V}, f)
    return [t[0][:-len(".weight")] for t in tensors if t[0].endswith(".weight")]


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def explain_decisions(*args):
    """{module: "quantized N-bit" | "skipped" | "kept: WHY" | "error"} from explain --json for sglang."""
    rc, out, err, _ = run("explain", "--json", "--consumer", "sglang", *args)
    check(rc == 0, "explain %s: exit 0 (got %d: %s)" % (" ".join(map(str, args)), rc, err.strip()[:300]))
    got = {}
    for line in out.splitlines():
        d = json.loads(line)
        if "kept" in d:
            got[d["module"]] = "kept: " + d["kept"]
        elif d["error"] is not None:
            got[d["module"]] = "error"
        elif d["skipped"]:
            got[d["module"]] = "skipped"
        else:
            got[d["module"]] = "quantized %d-bit" % d["bits"]
    return got


def quantize_decisions(src, out, *args):
    """{module: ...} as explain_decisions says it, from quantize's report and its output's tensors."""
    rc, so, se, _ = run("quantize", src, out, *args)
    check(rc == 0, "quantize %s: exit 0 (got %d: %s)" % (" ".join(args), rc, se.strip()[:300]))
    report = {}
    for line in so.splitlines():
        m = re.match(r"^  (\S+)\s+(kept: .*|gptq (\d+)-bit.*|fp8 e4m3.*)$", line)
        if m and m.group(1) != "layer":
            report[m.group(1)] = m.group(2)
    tensors, _ = st.read(os.path.join(out, "model.safetensors"))
    got = {}
    for name in tensors:
        module = name.rsplit(".", 1)[0]
        if module in got:
            continue
        why = report.get(module, "")
        if module + ".qweight" in tensors:
            got[module] = "quantized %d-bit" % int(re.match(r"gptq (\d+)-bit", why).group(1))
        elif tensors.get(module + ".weight", ("",))[0] == "F8_E4M3":
            got[module] = "quantized 8-bit"
        elif why in ("kept: not a linear layer", "kept: MoE router (the engines build it unquantized)"):
            got[module] = why
        elif why.startswith("kept: "):
            got[module] = "skipped"
        elif name.endswith(".weight"):
            got[module] = "kept: not a linear layer"  # copied without a word: 1-D norms
    return got


def lint(*args):
    rc, out, err, _ = run("lint", *args)
    m = re.search(r"qtl lint: (\d+) linear modules \((\d+) fused\)", out)
    return rc, out, err, (int(m.group(1)), int(m.group(2))) if m else None


# ------------------------------------------------------------------------------------------------
# 1. explain, lint and quantize agree on every module

def test_agreement(tmp):
    src = os.path.join(tmp, "llama")
    modules = make_llama(src)
    norms = ["model.norm", "model.layers.0.input_layernorm"]
    fp8 = write_json(os.path.join(tmp, "fp8.json"), {
        "quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
        "modules_to_not_convert": ["lm_head", "model.layers.1.mlp.down_proj", "model.layers.0.mlp.gate_proj",
                                   "model.layers.0.mlp.up_proj"] + norms})
    gptq = write_json(os.path.join(tmp, "gptq.json"), {
        "quant_method": "gptq", "bits": 4, "group_size": 32, "sym": True, "desc_act": False,
        "dynamic": {"-:.*layers\\.1\\.mlp\\..*": {}, "+:.*layers\\.0\\.self_attn\\..*": {"bits": 8}}})
    for what, cfg, args in (("fp8", fp8, ["--format", "fp8", "--fp8-scheme", "block"]),
                            ("gptq", gptq, ["--format", "gptq"])):
        out = os.path.join(tmp, what + "-out")
        ex = explain_decisions("--config", cfg, "--checkpoint", src)
        qz = quantize_decisions(src, out, "--config", cfg, *args)
        check(sorted(ex) == sorted(modules), what + ": explain lists every module once: %s" % sorted(ex))
        for m in modules:
            check(ex.get(m) == qz.get(m), "%s: %s: explain says %r, quantize did %r" % (what, m, ex.get(m), qz.get(m)))
        for m in norms + ["model.embed_tokens", "model.layers.1.post_attention_layernorm"]:
            check(ex.get(m) == "kept: not a linear layer", "%s: %s is not a linear layer (%r)" % (what, m, ex.get(m)))
        check(ex.get(ROUTER, "").startswith("kept: MoE router"), what + ": the router is not decided")
        # lint checks the same linear modules (and the fused layers built from them) ...
        rc, lo, le, counts = lint("--config", cfg, "--checkpoint", src)
        linear = [m for m in modules if not ex.get(m, "").startswith("kept: ")]
        check(counts == (len(linear) + 4, 4), "%s: lint checks the %d linear modules and 4 fused layers: %s"
              % (what, len(linear), lo.strip()[-200:]))
        # ... and an entry naming a norm decides no linear module: unused, as quantize keeps it anyway
        problems = [x for x in lo.splitlines() if not x.startswith("qtl lint:")]
        unused = sorted(re.search(r"entry '([^']*)'", x).group(1) for x in problems if x.startswith("unused"))
        want = sorted(norms) if what == "fp8" else []
        check(unused == want and len(problems) == len(want) and rc == (3 if want else 0),
              "%s: lint's only problems are the entries naming norms %s (rc %d): %s" % (what, want, rc, lo))
        check(all("not a linear layer" in x for x in problems), what + ": lint says the norm is not a linear layer")
        # A quantized checkpoint's linear modules (qweight; F8 weight + scale) are listed and decided
        # alike; its config.json holds the quantization_config, so no --config is needed.
        ex_out = explain_decisions("--checkpoint", out)
        for m in modules:
            check(ex_out.get(m) == ex.get(m), "%s: explain on the output: %s %r (the input's: %r)"
                  % (what, m, ex_out.get(m), ex.get(m)))


# ------------------------------------------------------------------------------------------------
# 2. one default packed_modules_mapping

def test_default_mapping(tmp):
    src = os.path.join(tmp, "llama-map")
    make_llama(src)
    cfg = write_json(os.path.join(tmp, "fp8-q.json"), {
        "quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
        "modules_to_not_convert": ["lm_head", "model.layers.0.self_attn.q_proj"]})
    mapping = write_json(os.path.join(tmp, "map.json"), {"qkv_proj": ["q_proj", "k_proj", "v_proj"],
                                                         "gate_up_proj": ["gate_proj", "up_proj"]})
    rc_a, a, _, _ = lint("--config", cfg, "--checkpoint", src)
    rc_b, b, _, _ = lint("--config", cfg, "--checkpoint", src, "--packed-modules-mapping", mapping)
    check(rc_a == rc_b == 3 and a == b, "lint: the default mapping is the one the help names:\n%s---\n%s" % (a, b))
    check("qkv_proj: vllm_fp8 raises ValueError" in a, "lint: vLLM raises ValueError for the half-skipped qkv_proj: " + a)
    rc, out, _, _ = run("explain", "--json", "--consumer", "vllm", "--config", cfg, "--checkpoint", src)
    q = [d for d in map(json.loads, out.splitlines()) if d["module"] == "model.layers.0.self_attn.q_proj"]
    check(rc == 0 and len(q) == 1 and (q[0]["error"] or "").startswith("ValueError") and
          q[0].get("decided_as") == "model.layers.0.self_attn.qkv_proj", "explain: vLLM decides q_proj as qkv_proj: %s" % q)
    rc, _, se, _ = run("quantize", src, os.path.join(tmp, "map-out"), "--format", "fp8", "--fp8-scheme", "block",
                       "--config", cfg)
    check(rc == 2 and "qkv_proj" in se, "quantize refuses the half-skipped qkv_proj too: " + se)


# ------------------------------------------------------------------------------------------------
# 3. escaped text

EVIL = "\x1b]0;pwned\x07\x1b[2Jx"
BIDI = "model.layers.0.\u202eevil_proj"
LONG = "m" * 100000


def terminal_safe(raw, what, whole_names=False):
    """No control or non-ASCII byte; lines abridged unless `whole_names` (JSON keeps names whole)."""
    bad = sorted({c for c in raw if (c < 0x20 and c != 0x0a) or c >= 0x7f})
    check(not bad, what + ": no control or non-ASCII byte reaches the terminal (found %s)" % [hex(c) for c in bad])
    longest = max((len(x) for x in raw.split(b"\n")), default=0)
    check(whole_names or longest < 5000, what + ": no line longer than 5000 bytes (longest %d)" % longest)


def test_escaping(tmp):
    src = os.path.join(tmp, "evil")
    make_llama(src, [bf16_tensor(EVIL + ".weight", [H, H], 7), bf16_tensor(BIDI + ".weight", [H, H], 8),
                     bf16_tensor(LONG + ".weight", [H], 9)])
    cfg = write_json(os.path.join(tmp, "evil.json"), {
        "quant_method": "fp8", "activation_scheme": "dynamic",
        "modules_to_not_convert": ["lm_head", EVIL, "\u202eunused" + EVIL]})
    for args in (["explain", "--config", cfg, "--checkpoint", src, "--consumer", "all"],
                 ["explain", "--config", cfg, "--checkpoint", src, "--json"],
                 ["lint", "--config", cfg, "--checkpoint", src],
                 ["inspect", src], ["inspect", "--json", src]):
        rc, so, se, raw = run(*args)
        what = " ".join(a for a in args if a not in (cfg, src))
        check(rc in (0, 3), what + ": runs (rc %d: %s)" % (rc, se[:200]))
        terminal_safe(raw, what, "--json" in args)
        if "--json" in args and rc == 0:
            if args[0] == "explain":
                names = {json.loads(x)["module"] for x in so.splitlines()}
            else:
                names = {t["name"][:-len(".weight")] for t in json.loads(so)["files"][0]["tensors"]}
            check({EVIL, BIDI, LONG} <= names, what + ": the JSON keeps the names whole (as escapes)")
    rc, so, _, _ = run("explain", "--config", cfg, "--checkpoint", src)
    check("\\x1b]0;pwned\\x07\\x1b[2Jx" in so and "\\xe2\\x80\\xaeevil_proj" in so,
          "explain shows the escapes: " + so[:300])
    rc, so, _, _ = run("inspect", src)
    check(re.search(r"m{200}\.\.\.\[\d+ more bytes\]", so) is not None, "inspect abridges the 100 KB name with a marker")
    # quantize's and convert's reports name the modules (and the rule that kept one)
    fp8_out, bf16_out = os.path.join(tmp, "evil-fp8"), os.path.join(tmp, "evil-bf16")
    rc, so, se, raw = run("quantize", src, fp8_out, "--format", "fp8", "--fp8-scheme", "block", "--config", cfg)
    check(rc == 0 and "kept: rule '\\x1b]0;pwned" in so and "\\xe2\\x80\\xaeevil_proj" in so,
          "quantize reports the modules escaped: %d %s" % (rc, se[:200]))
    terminal_safe(raw, "quantize's report")
    rc, so, se, raw = run("convert", fp8_out, bf16_out, "--to", "bf16")
    check(rc == 0 and "\\xe2\\x80\\xaeevil_proj" in so, "convert reports the modules escaped: %d %s" % (rc, se[:200]))
    terminal_safe(raw, "convert's report")
    # an error message quoting a config entry
    bad = write_json(os.path.join(tmp, "bad-regex.json"), {
        "quant_method": "gptq", "bits": 4, "group_size": 32, "sym": True, "desc_act": False,
        "dynamic": {"-:" + EVIL + "(": {}}})
    rc, so, se, raw = run("quantize", os.path.join(tmp, "llama"), os.path.join(tmp, "bad-out"), "--format", "gptq",
                          "--config", bad)
    check(rc == 2 and "pwned" in se, "quantize refuses the bad regex, quoting it: " + se)
    terminal_safe(raw, "quantize's error message")


# ------------------------------------------------------------------------------------------------
# 4. the checkpoint's own config, its message, the default consumers

def test_config_and_consumers(tmp):
    src = os.path.join(tmp, "llama")  # from test_agreement, with its fp8-out and gptq-out
    gptq_out = os.path.join(tmp, "gptq-out")
    rc_a, a, ea, _ = run("explain", "--checkpoint", gptq_out)
    rc_b, b, _, _ = run("explain", "--checkpoint", gptq_out, "--config", os.path.join(gptq_out, "config.json"))
    check(rc_a == 0 and a == b and "quantized 8-bit" in a, "explain --checkpoint reads its config.json: " + ea)
    rc, lo, le, _ = lint("--checkpoint", gptq_out)
    check(rc == 0, "lint --checkpoint reads its config.json (rc %d): %s" % (rc, lo + le))
    rc, _, se, _ = run("explain", "--checkpoint", src)
    check(rc == 1 and "has no quantization_config" in se, "explain on an unquantized checkpoint: " + se)
    rc, _, se, _ = run("explain", "--config", os.path.join(src, "config.json"), "--checkpoint", src)
    check(rc == 2 and "has no quantization_config" in se and "quant_method" not in se,
          "--config naming a model config: " + se)
    # default consumers: those that load the quant_method
    for cfg, want in ((os.path.join(tmp, "gptq.json"), ["sglang_gptq", "vllm_gptq"]),
                      (os.path.join(tmp, "fp8.json"), ["sglang_fp8", "vllm_fp8", "transformers_v4", "transformers_v5"])):
        rc, out, _, _ = run("explain", "--json", "--config", cfg, "--checkpoint", src)
        rows = [json.loads(x) for x in out.splitlines()]
        per = [d["consumer"] for d in rows if d["module"] == "model.layers.0.mlp.down_proj"]
        check(rc == 0 and per == want, "%s: the default consumers are %s (got %s)" % (os.path.basename(cfg), want, per))
        rc, out, _, _ = run("explain", "--json", "--config", cfg, "--checkpoint", src, "--consumer", "all")
        per = [d["consumer"] for d in map(json.loads, out.splitlines()) if d["module"] == "model.layers.0.mlp.down_proj"]
        check(rc == 0 and len(per) == 19, "--consumer all: every dialect (%d)" % len(per))
    rc, out, _, _ = run("explain", "--config", os.path.join(tmp, "gptq.json"), "--checkpoint", src)
    check("sglang_fp8" not in out, "a GPTQ config's default explanation names no FP8 loader")


def main():
    def tests(tmp):
        test_agreement(tmp)
        test_default_mapping(tmp)
        test_escaping(tmp)
        test_config_and_consumers(tmp)
    run_in_temp_dir("qtl-explain-test-", tests)


if __name__ == "__main__":
    main()
