"""End-to-end tests of `qtl quantize`, `qtl explain`, `qtl lint` and `qtl demo`.

Usage: test_qtl_quantize.py QTL GOLDEN_CONFIGS_DIR

Standard library only (no numpy, no torch): safetensors parsed with struct/json (safetensors_py),
GPTQ words unpacked, e4m3 decoded and weights dequantized in pure Python on small shapes.
  1. GPTQ (sharded input, config with `dynamic` rules, sym and asym): every quantized layer
     dequantizes, in Python, to exactly the `w_ref` that `qtl op quantize-weights` (the golden-tested
     library path) returns for the same weight (--sym), or that GPTQ's own quantizer redone here
     gives (--asym: `gptq_asym_ref`, the range widened to hold 0); skipped layers and other tensors
     byte-identical; the index, config.json and quantize_config.json as
     docs/spec/checkpoint_formats.md says. Groups of one sign far from 0 (uniform in [0.4, 0.6], a
     constant) come back within a step with --asym; scales F16 cannot hold (BF16 weights of 2^20,
     or of 2^-106) are refused naming the layer and a format that holds them.
  2. FP8 channel (compressed-tensors) and block (HF fp8): shapes, names, no extra tensors, every
     element within half an e4m3 step of the original.
  3. A run killed halfway (SIGKILL and SIGTERM) leaves no file under a final name (the next run
     removes what a SIGKILL left), and an older
     output under that name untouched.
  4. `qtl explain --json` on every golden config: the decisions their `expected` fields state.
  5. `qtl lint`: planted problems found (exit 3), a clean config passes (exit 0).
  6. `qtl demo` end to end, with and without --out.
"""
import json
import math
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from checks import check, run_in_temp_dir  # noqa: E402

QTL = sys.argv[1]
GOLDEN = sys.argv[2]


def run(*args, stdin=None):
    p = subprocess.run([QTL] + [str(a) for a in args], input=stdin, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


# ------------------------------------------------------------------------------------------------
# A small Llama-shaped checkpoint (hidden 64, intermediate 128, 2 layers, vocabulary 64), fp16.

H, I, L, V = 64, 128, 2, 64


def linear_shapes():
    out = []
    for i in range(L):
        p = "model.layers.%d." % i
        out += [(p + "self_attn.q_proj", H, H), (p + "self_attn.k_proj", H // 2, H),
                (p + "self_attn.v_proj", H // 2, H), (p + "self_attn.o_proj", H, H),
                (p + "mlp.gate_proj", I, H), (p + "mlp.up_proj", I, H), (p + "mlp.down_proj", H, I)]
    return out


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def make_checkpoint(folder, shards=2, seed=7):
    rnd = random.Random(seed)
    tensors = []  # (name, dtype, shape, bytes)
    weights = {}

    def add(name, shape, sigma, mean=0.0):
        n = 1
        for d in shape:
            n *= d
        vals = [f16(mean + sigma * rnd.gauss(0, 1)) for _ in range(n)]
        # a few all-positive rows make asymmetric zero points of 0 (the gptq_v2 case)
        weights[name] = vals
        tensors.append((name, "F16", shape, struct.pack("<%de" % n, *vals)))

    add("model.embed_tokens.weight", [V, H], 0.02)
    for name, n, k in linear_shapes():
        add(name + ".weight", [n, k], 0.02)
    for i in range(L):
        add("model.layers.%d.input_layernorm.weight" % i, [H], 0.01, 1.0)
        add("model.layers.%d.post_attention_layernorm.weight" % i, [H], 0.01, 1.0)
    add("model.norm.weight", [H], 0.01, 1.0)
    add("lm_head.weight", [V, H], 0.02)
    st.write_checkpoint(folder, tensors, shards)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
                   "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": 2,
                   "num_key_value_heads": 1, "vocab_size": V, "torch_dtype": "float16"}, f)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        f.write('{"model_max_length": 2048}\n')
    return {t[0]: t for t in tensors}, weights


def read_checkpoint(folder):
    """{name: (dtype, shape, bytes)} over every shard, checking the index when there is one."""
    out = {}
    idx = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            index = json.load(f)
        files = sorted(set(index["weight_map"].values()))
        for fname in files:
            t, meta = st.read(os.path.join(folder, fname))
            check(meta.get("format") == "pt", fname + ": __metadata__.format is pt")
            for name, v in t.items():
                check(index["weight_map"].get(name) == fname, "index puts %s in %s" % (name, fname))
                out[name] = v
        check(len(out) == len(index["weight_map"]), "index lists exactly the tensors")
        check(index["metadata"]["total_size"] == sum(len(v[2]) for v in out.values()), "index total_size")
    else:
        out, meta = st.read(os.path.join(folder, "model.safetensors"))
    return out


def check_aligned(folder):
    for fname in os.listdir(folder):
        if not fname.endswith(".safetensors"):
            continue
        with open(os.path.join(folder, fname), "rb") as f:
            b = f.read()
        (n,) = struct.unpack("<Q", b[:8])
        header = json.loads(b[8:8 + n])
        check((8 + n) % 8 == 0, fname + ": data section 8-aligned")
        for name, e in header.items():
            if name == "__metadata__":
                continue
            check(e["data_offsets"][0] % st.DTYPE_SIZE[e["dtype"]] == 0, fname + ": " + name + " aligned")


def i32s(b):
    return struct.unpack("<%di" % (len(b) // 4), b)


def f16s(b):
    return struct.unpack("<%de" % (len(b) // 2), b)


def f32s(b):
    return struct.unpack("<%df" % (len(b) // 4), b)


def unpack_field(word, j, bits):
    return ((word & 0xFFFFFFFF) >> (bits * j)) & ((1 << bits) - 1)


def gptq_dequant(t, module, n, k, v1):
    """w_ref [K][N] as fp16 values, from the GPTQ tensors alone (the reference's T(T(q - z) * s))."""
    qdt, qshape, qw = t[module + ".qweight"]
    check(qdt == "I32", module + ".qweight is I32")
    bits = qshape[0] * 32 // k
    pf = 32 // bits
    check(qshape == [k // pf, n], module + ".qweight shape")
    sdt, sshape, sb = t[module + ".scales"]
    check(sdt == "F16", module + ".scales is F16")
    g = sshape[0]
    check(sshape == [g, n], module + ".scales shape")
    zdt, zshape, zb = t[module + ".qzeros"]
    check(zdt == "I32" and zshape == [g, n // pf], module + ".qzeros shape")
    gdt, gshape, gb = t[module + ".g_idx"]
    check(gdt == "I32" and gshape == [k], module + ".g_idx shape")
    qwords, zwords, scales, g_idx = i32s(qw), i32s(zb), f16s(sb), i32s(gb)
    check(all(g_idx[kk] == kk // (k // g) for kk in range(k)), module + ".g_idx = k // group_size")
    w_ref = [[0.0] * n for _ in range(k)]
    for kk in range(k):
        for nn in range(n):
            q = unpack_field(qwords[(kk // pf) * n + nn], kk % pf, bits)
            gi = g_idx[kk]
            z = unpack_field(zwords[gi * (n // pf) + nn // pf], nn % pf, bits) + (1 if v1 else 0)
            w_ref[kk][nn] = f16(f16(q - z) * scales[gi * n + nn])
    return bits, k // g, w_ref


def op_w_ref(tmp, w, n, k, qtype, group, zero_points):
    """w_ref of `qtl op quantize-weights` for HF weight w [N][K] (transposed to the op's [K, N])."""
    wt = [w[nn * k + kk] for kk in range(k) for nn in range(n)]
    src = os.path.join(tmp, "op_in.safetensors")
    dst = os.path.join(tmp, "op_out.safetensors")
    with open(src, "wb") as f:
        f.write(st.build([("w", "F16", [k, n], struct.pack("<%de" % len(wt), *wt))]))
    args = ["op", "quantize-weights", "--type", qtype, "--group-size", str(group)]
    if zero_points:
        args.append("--zero-points")
    rc, out, err = run(*(args + [src, dst]))
    check(rc == 0, "qtl op quantize-weights: " + err)
    t, _ = st.read(dst)
    vals = f16s(t["w_ref"][2])
    return [[vals[kk * n + nn] for nn in range(n)] for kk in range(k)]


def f32v(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def gptq_asym_ref(w, n, k, bits, group):
    """w_ref [K][N] of GPTQ's own quantizer (Quantizer.find_params / quantize, float32) for HF
    weight w [N][K], with the scale stored as F16 and the codes taken with that F16 scale."""
    maxq = (1 << bits) - 1
    out = [[0.0] * n for _ in range(k)]
    for nn in range(n):
        for g0 in range(0, k, group):
            vals = w[nn * k + g0:nn * k + g0 + group]
            xmin, xmax = min(min(vals), 0.0), max(max(vals), 0.0)
            if xmin == 0 and xmax == 0:
                xmin, xmax = -1.0, 1.0
            s = f32v(f32v(xmax - xmin) / maxq)
            z = round(f32v(-xmin / s))
            s16 = f16(s)
            for i, x in enumerate(vals):
                q = min(max(round(f32v(x / s16)) + z, 0), maxq)
                out[g0 + i][nn] = f16(f16(q - z) * s16)
    return out


def same_f16(a, b):
    return struct.pack("<e", a) == struct.pack("<e", b) or (math.isnan(a) and math.isnan(b))


def test_gptq(tmp, sym):
    src = os.path.join(tmp, "ckpt")
    inputs, weights = make_checkpoint(src, shards=2)
    cfg = os.path.join(tmp, "gptq_cfg.json")
    with open(cfg, "w") as f:
        json.dump({"quantization_config": {
            "quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": sym,
            "dynamic": {"-:.*\\.1\\.mlp\\.down_proj": {}, "+:.*\\.0\\.mlp\\..*": {"bits": 8, "group_size": 64}}}}, f)
    out = os.path.join(tmp, "out-gptq-" + ("sym" if sym else "asym"))
    rc, so, se = run("quantize", src, out, "--format", "gptq", "--config", cfg, "--threads", "2")
    check(rc == 0, "quantize gptq rc 0: " + se)
    if rc != 0:
        return
    check("layers quantized" in so and "GB/s" in so, "summary table printed")
    check(se == "", "nothing on stderr when it is not a terminal: " + se[:200])
    with open(os.path.join(out, "config.json")) as f:
        conf = json.load(f)
    with open(os.path.join(out, "quantize_config.json")) as f:
        qconf = json.load(f)
    q = conf["quantization_config"]
    check(q == qconf, "quantize_config.json equals quantization_config")
    check(conf["model_type"] == "llama" and conf["hidden_size"] == H, "config.json keeps the model fields")
    check(q["quant_method"] == "gptq" and q["bits"] == 4 and q["group_size"] == 32 and q["sym"] == sym and
          q["desc_act"] is False, "quantization_config fields")
    check(list(q["dynamic"].keys()) == ["-:.*\\.1\\.mlp\\.down_proj", "+:.*\\.0\\.mlp\\..*"], "dynamic kept in order")
    check(q["checkpoint_format"] in ("gptq", "gptq_v2"), "checkpoint_format")
    if sym:
        check(q["checkpoint_format"] == "gptq", "sym writes v1")
    v1 = q["checkpoint_format"] == "gptq"
    check(os.path.exists(os.path.join(out, "tokenizer_config.json")), "other files copied")
    check(not [f for f in os.listdir(out) if f.startswith(".") and f != ".qtl-output"], "no temporary left")
    check_aligned(out)
    t = read_checkpoint(out)
    expected_names = set()
    for name, n, k in linear_shapes():
        skipped = name == "model.layers.1.mlp.down_proj"
        if skipped:
            expected_names.add(name + ".weight")
            check(t[name + ".weight"] == tuple(inputs[name + ".weight"][1:]) or
                  t[name + ".weight"][2] == inputs[name + ".weight"][3], name + " kept byte-identical")
            continue
        for s in ("qweight", "qzeros", "scales", "g_idx"):
            expected_names.add(name + "." + s)
        bits, gs, w_ref = gptq_dequant(t, name, n, k, v1)
        want_bits, want_gs = (8, 64) if ".0.mlp." in name else (4, 32)
        check((bits, gs) == (want_bits, want_gs), "%s: %d-bit group %d" % (name, bits, gs))
        if sym:
            ref = op_w_ref(tmp, weights[name + ".weight"], n, k, "uint%db%d" % (bits, 1 << (bits - 1)), gs, False)
        else:
            ref = gptq_asym_ref(weights[name + ".weight"], n, k, bits, gs)
        bad = sum(1 for kk in range(k) for nn in range(n) if not same_f16(w_ref[kk][nn], ref[kk][nn]))
        check(bad == 0, "%s: %d of %d elements differ from %s" % (name, bad, n * k,
                                                                 "qtl op's w_ref" if sym else "GPTQ's quantizer"))
    for name in inputs:
        if not any(name == m + ".weight" for m, _, _ in linear_shapes()):
            expected_names.add(name)
            check(t[name][2] == inputs[name][3], name + " copied unchanged")
    check(set(t) == expected_names, "exactly the expected tensors (extra: %s, missing: %s)" %
          (sorted(set(t) - expected_names)[:5], sorted(expected_names - set(t))[:5]))


def bf16_bytes(vals):
    """BF16 bytes of values exact in BF16 (the top half of their float32)."""
    return b"".join(struct.pack("<f", v)[2:] for v in vals)


def test_gptq_ranges(tmp):
    """--asym: groups of one sign far from 0 within a step; F16 scales out of range refused."""
    n, k = 64, 128
    rnd = random.Random(3)
    w = [f16(0.02 * rnd.gauss(0, 1)) for _ in range(n * k)]
    w[0:k] = [f16(0.4 + 0.2 * rnd.random()) for _ in range(k)]   # row 0: uniform in [0.4, 0.6]
    w[k:2 * k] = [0.5] * k                                        # row 1: a constant
    w[2 * k:3 * k] = [f16(-0.6 + 0.2 * rnd.random()) for _ in range(k)]  # row 2: all negative
    src = os.path.join(tmp, "one-sign")
    st.write_checkpoint(src, [("model.layers.0.mlp.up_proj.weight", "F16", [n, k], struct.pack("<%de" % (n * k), *w))], 1)
    for bits in (4, 8):
        out = os.path.join(tmp, "one-sign-out")
        rc, so, se = run("quantize", src, out, "--format", "gptq", "--asym", "--bits", bits, "--group-size", k)
        check(rc == 0, "gptq --asym %d-bit on one-sign groups: %s" % (bits, se))
        if rc != 0:
            continue
        with open(os.path.join(out, "config.json")) as f:
            v1 = json.load(f)["quantization_config"]["checkpoint_format"] == "gptq"
        _, _, w_ref = gptq_dequant(read_checkpoint(out), "model.layers.0.mlp.up_proj", n, k, v1)
        for row, what in ((0, "uniform in [0.4, 0.6]"), (1, "constant 0.5"), (2, "uniform in [-0.6, -0.4]")):
            amax = max(abs(x) for x in w[row * k:(row + 1) * k])
            step = amax / ((1 << bits) - 1)
            err = max(abs(w_ref[kk][row] - w[row * k + kk]) for kk in range(k))
            check(err <= step, "gptq --asym %d-bit, %s: error %.4g within a step %.4g" % (bits, what, err, step))
        shutil.rmtree(out)
    # scales F16 cannot hold: BF16 weights of 2^20 (scale 2^20/7 overflows F16) and of 2^-106
    # (the scale rounds to 0 in F16): refused naming the layer and the formats that hold them
    for value, words in ((2.0 ** 20, "overflows"), (2.0 ** -106, "rounds to 0")):
        d = os.path.join(tmp, "range-%g" % value)
        vals = [value * (1 + (i % 7) / 8.0) for i in range(n * k)]
        st.write_checkpoint(d, [("model.layers.0.mlp.down_proj.weight", "BF16", [n, k], bf16_bytes(vals))], 1)
        for sym in ("--sym", "--asym"):
            out = os.path.join(tmp, "range-out")
            rc, so, se = run("quantize", d, out, "--format", "gptq", sym)
            check(rc == 2 and "model.layers.0.mlp.down_proj" in se and words in se and "F16" in se and
                  "w4a16" in se and "BF16" in se, "gptq %s, BF16 weights of %g: refused naming the layer (%d %s)"
                  % (sym, value, rc, se.strip()))
            check(not os.path.exists(out), "gptq %s, weights of %g: no output" % (sym, value))
        rc, so, se = run("quantize", d, os.path.join(tmp, "range-w4a16"), "--format", "w4a16")
        check(rc == 0, "w4a16 holds BF16 weights of %g: %s" % (value, se.strip()))
    # an all-zero group keeps its scale of 0 (sym) without a word
    z = os.path.join(tmp, "zeros")
    st.write_checkpoint(z, [("model.layers.0.mlp.up_proj.weight", "F16", [n, k], bytes(2 * n * k))], 1)
    for sym in ("--sym", "--asym"):
        rc, _, se = run("quantize", z, os.path.join(tmp, "zeros-out" + sym), "--format", "gptq", sym)
        check(rc == 0, "gptq %s on an all-zero weight: %s" % (sym, se.strip()))


E4M3 = []
for c in range(256):
    s = -1.0 if c & 0x80 else 1.0
    e = (c >> 3) & 0xF
    m = c & 7
    if e == 15 and m == 7:
        E4M3.append(float("nan"))
    elif e == 0:
        E4M3.append(s * m * 2.0 ** -9)
    else:
        E4M3.append(s * (1 + m / 8.0) * 2.0 ** (e - 7))


def test_fp8(tmp):
    src = os.path.join(tmp, "ckpt1")
    inputs, weights = make_checkpoint(src, shards=1)
    for scheme in ("channel", "block", "tensor"):
        out = os.path.join(tmp, "out-fp8-" + scheme)
        rc, so, se = run("quantize", os.path.join(src, "model.safetensors"), out, "--format", "fp8",
                         "--fp8-scheme", scheme, "--threads", "2")
        check(rc == 0, "quantize fp8 %s: %s" % (scheme, se))
        if rc != 0:
            continue
        check(not os.path.exists(os.path.join(out, "model.safetensors.index.json")), "single file: no index")
        with open(os.path.join(out, "config.json")) as f:
            q = json.load(f)["quantization_config"]
        if scheme == "block":
            check(q["quant_method"] == "fp8" and q["weight_block_size"] == [128, 128] and
                  q["activation_scheme"] == "dynamic" and q["modules_to_not_convert"] == ["lm_head"], "HF fp8 config")
        else:
            g = q["config_groups"]["group_0"]
            check(q["quant_method"] == "compressed-tensors" and q["format"] == "float-quantized" and
                  q["ignore"] == ["lm_head"] and g["weights"]["strategy"] == scheme and
                  g["input_activations"]["dynamic"] is True, "compressed-tensors config")
        t = read_checkpoint(out)
        check_aligned(out)
        check("lm_head.weight" in t and t["lm_head.weight"][2] == inputs["lm_head.weight"][3], "lm_head kept")
        check(not any(n.endswith("input_scale") for n in t), "no input_scale with dynamic activations")
        for name, n, k in linear_shapes():
            dt, shape, b = t[name + ".weight"]
            check(dt == "F8_E4M3" and shape == [n, k], name + " F8_E4M3 [N, K]")
            if scheme == "block":
                sdt, sshape, sb = t[name + ".weight_scale_inv"]
                check(sshape == [(n + 127) // 128, (k + 127) // 128], name + " block scale shape")
            else:
                sdt, sshape, sb = t[name + ".weight_scale"]
                check(sshape == ([n, 1] if scheme == "channel" else [1]), name + " scale shape")
            check(sdt == "F32", name + " scale F32")
            scales = f32s(sb)
            w = weights[name + ".weight"]
            worst = 0.0
            for nn in range(n):
                for kk in range(k):
                    s = scales[0] if scheme == "tensor" else scales[nn] if scheme == "channel" else \
                        scales[(nn // 128) * ((k + 127) // 128) + kk // 128]
                    d = E4M3[b[nn * k + kk]] * s
                    x = w[nn * k + kk]
                    allowed = max(abs(x) * 2.0 ** -4, s * 2.0 ** -10) * 1.001
                    worst = max(worst, abs(x - d) / allowed)
            check(worst <= 1.0, "%s fp8 %s: within half an e4m3 step (worst %.3f)" % (name, scheme, worst))


def test_killed(tmp):
    """A run killed halfway leaves no file under a final name; an older output stays intact."""
    src = os.path.join(tmp, "big")
    os.makedirs(src)
    rnd = random.Random(3)
    block = struct.pack("<4096e", *[f16(0.02 * rnd.gauss(0, 1)) for _ in range(4096)])
    n, k = 1024, 4096  # 8 MiB per tensor
    data = block * (n * k // 4096)
    tensors = [("model.layers.%d.mlp.up_proj.weight" % i, "F16", [n, k], data) for i in range(24)]
    with open(os.path.join(src, "model.safetensors"), "wb") as f:
        f.write(st.build(tensors, {"format": "pt"}))
    for sig in (signal.SIGKILL, signal.SIGTERM):
        out = os.path.join(tmp, "out-killed-%d" % sig)
        os.makedirs(out)
        old = b"an older output that must survive"
        with open(os.path.join(out, "model.safetensors"), "wb") as f:
            f.write(old)
        p = subprocess.Popen([QTL, "quantize", src, out, "--format", "gptq", "--threads", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        staging = ".out-killed-%d.qtl-new-" % sig
        deadline = time.time() + 20
        while time.time() < deadline and not [f for f in os.listdir(tmp) if f.startswith(staging)]:
            time.sleep(0.005)
        time.sleep(0.05)
        finished = p.poll() is not None
        p.send_signal(sig)
        p.wait()
        check(not finished, "the run was still going when killed (make the checkpoint bigger)")
        names = sorted(os.listdir(out))
        check(names == ["model.safetensors"], "killed run: the output folder holds the old file alone: %s" % names)
        with open(os.path.join(out, "model.safetensors"), "rb") as f:
            check(f.read() == old, "killed run: the older output untouched")
        left = [f for f in os.listdir(tmp) if f.startswith(staging)]
        if sig == signal.SIGTERM:
            check(left == [], "SIGTERM: the staging folder removed: %s" % left)
        else:
            # SIGKILL reaches no handler: the next run into the folder removes what it left.
            check(len(left) == 1, "SIGKILL leaves its staging folder: %s" % left)
            small = os.path.join(tmp, "small-%d" % sig)
            make_checkpoint(small, shards=1)
            rc, _, err = run("quantize", small, out, "--format", "gptq", "--group-size", "32")
            check(rc == 0 and "killed run" in err, "the next run reports the stale staging folder: " + err)
            check(not [f for f in os.listdir(tmp) if f.startswith(staging)], "the next run removed it")


# ------------------------------------------------------------------------------------------------
# explain on the golden configs

LABELS = {  # the words before the first space or parenthesis of an `expected` label -> consumer
    "vllm_INC": ["vllm_auto_round"], "sglang_auto_round": ["sglang_auto_round"],
    "sglang/vllm": ["sglang_awq", "vllm_awq"], "sglang_dot_boundary": ["sglang_is_layer_skipped"],
    "sglang_dot_boundary_literal": ["sglang_is_layer_skipped"],
    "vllm_should_ignore_layer": ["vllm_compressed_tensors"],
    "sglang_should_ignore_layer": ["sglang_compressed_tensors"],
    "sglang_Fp8Config": ["sglang_fp8"], "vllm_Fp8Config": ["vllm_fp8"],
    "transformers_v5_should_convert_module": ["transformers_v5"],
    "transformers_v4_finegrained_fp8": ["transformers_v4"],
    "sglang_get_dynamic_override": ["sglang_gptq"], "vllm_get_dynamic_override": ["vllm_gptq"],
    "sglang_ModelOptQuantConfig": ["sglang_modelopt"],
    "vllm_ModelOptQuantConfigBase.is_layer_excluded": ["vllm_modelopt"],
    "fnmatch_only": ["fnmatch"], "fnmatch_glob_reading": ["fnmatch_subtree"],
}
KEYS = ["module", "consumer", "skipped", "bits", "group_size", "desc_act", "sym", "quant_type", "rule", "error"]


def test_explain_golden():
    files = sorted(f for f in os.listdir(GOLDEN) if f.endswith(".json"))
    check(len(files) >= 10, "golden configs found")
    compared = 0
    for fname in files:
        path = os.path.join(GOLDEN, fname)
        with open(path) as f:
            doc = json.load(f)
        rc, out, err = run("explain", "--config", path, "--consumer", "all", "--json")
        check(rc == 0, fname + ": explain rc 0: " + err)
        decisions = {}
        for line in out.splitlines():
            d = json.loads(line)
            check(list(d.keys()) == KEYS, fname + ": keys in order, none absent")
            decisions[(d["module"], d["consumer"])] = d
        check(len(decisions) == len(doc["module_names"]) * 19, fname + ": one line per (module, consumer)")
        expected = doc["expected"]
        for label, table in expected.items():
            head = label.split(" ")[0].split("(")[0]
            check(head in LABELS, fname + ": label known: " + label)
            if isinstance(table, str):  # "identical to sglang (...)"
                table = expected[[k for k in expected if k.startswith("sglang")][0]]
            for consumer in LABELS.get(head, []):
                for module, want in table.items():
                    d = decisions.get((module, consumer))
                    check(d is not None, "%s: %s/%s decided" % (fname, module, consumer))
                    if d is None:
                        continue
                    compared += 1
                    what = "%s: %s %s: want %s, got %s" % (fname, consumer, module, json.dumps(want), json.dumps(d))
                    if want == "skip":
                        check(d["skipped"] is True and d["error"] is None, what)
                    elif want == "no_skip":
                        check(d["skipped"] is False and d["error"] is None, what)
                    elif want == "base":  # no dynamic rule: the base config (lm_head: false keeps lm_head)
                        check(d["rule"] is None and d["error"] is None and
                              d["skipped"] is (module == "lm_head"), what)
                    elif want is None:  # AutoRound: no extra_config entry applies
                        check(d["rule"] is None and d["error"] is None, what)
                    elif "override" in want:
                        o = want["override"]
                        check(d["skipped"] is False and d["rule"] == want["rule"] and
                              all(d[key] == v for key, v in o.items()), what)
                    else:  # AutoRound entry: bits 16 (float) means unquantized
                        if want.get("bits", 0) >= 16:
                            check(d["skipped"] is True, what)
                        else:
                            check(d["skipped"] is False and d["bits"] == want["bits"], what)
    check(compared >= 100, "golden decisions compared: %d" % compared)
    # modules from stdin; by default the consumers that load GPTQ: sglang's and vLLM's loaders
    cfg = os.path.join(GOLDEN, "gptq_gptqmodel_readme_dynamic.json")
    rc, out, err = run("explain", "--config", cfg, "--modules", "-", "--json",
                       stdin="model.layers.18.mlp.gate_up_proj\nmodel.layers.20.mlp.down_proj\n")
    lines = [json.loads(x) for x in out.splitlines()]
    check(rc == 0 and [d["consumer"] for d in lines] == ["sglang_gptq", "vllm_gptq"] * 2 and
          all(d["group_size"] == 32 for d in lines[:2]) and
          all(d["skipped"] is True and d["bits"] is None for d in lines[2:]), "explain --modules - (stdin)")
    rc, out, err = run("explain", "--config", cfg, "--consumer", "nonsense")
    check(rc == 1 and "nonsense" in err, "unknown consumer: exit 1 naming it")


def test_explain_lint_checkpoint(tmp):
    src = os.path.join(tmp, "ckpt")  # from test_gptq
    clean = os.path.join(tmp, "lint_clean.json")
    with open(clean, "w") as f:
        json.dump({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
                   "modules_to_not_convert": ["lm_head", "model.layers.1.mlp.down_proj"]}, f)
    rc, out, err = run("lint", "--config", clean, "--checkpoint", src)
    check(rc == 0, "lint clean config: exit 0: " + out + err)
    rc, out, err = run("explain", "--config", clean, "--checkpoint", src, "--json", "--consumer", "vllm")
    lines = [json.loads(x) for x in out.splitlines()]
    mods = [d["module"] for d in lines]
    check(rc == 0 and "model.layers.0.self_attn.q_proj" in mods and "lm_head" in mods and
          all(d["consumer"] == "vllm_fp8" for d in lines), "explain --checkpoint: unfused module names")
    planted = os.path.join(tmp, "lint_planted.json")
    with open(planted, "w") as f:
        json.dump({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
                   "modules_to_not_convert": ["lm_head", "model.layers.7.mlp.down_proj",
                                              "model.layers.0.self_attn.q_proj", "layers.1.mlp.up_proj"]}, f)
    rc, out, err = run("lint", "--config", planted, "--checkpoint", src)
    check(rc == 3, "lint planted problems: exit 3 (got %d)" % rc)
    check("unused" in out and "model.layers.7.mlp.down_proj" in out, "lint: the entry matching no module")
    check("fused" in out and "qkv_proj" in out, "lint: q_proj alone in a fused qkv_proj")
    check("disagree" in out, "lint: an entry sglang and vLLM read differently: " + out)


def test_demo(tmp):
    keep = os.path.join(tmp, "demo")
    rc, out, err = run("demo", "--out", keep)
    check(rc == 0, "demo --out: exit 0: " + err[-500:])
    check("every layer within half a quantization step" in out, "demo: its checks passed")
    for f in ("model/model.safetensors", "gptq-int4/model.safetensors", "gptq-int4/quantize_config.json",
              "fp8-block/model.safetensors", "gptq_config.json"):
        check(os.path.exists(os.path.join(keep, f)), "demo --out keeps " + f)
    check("model.layers.1.mlp.down_proj" in out and "kept" in out, "demo: prints what was done per layer")
    rc, out, err = run("demo")
    check(rc == 0, "demo: exit 0")
    where = [line for line in out.splitlines() if line.startswith("files: ")]
    check(len(where) == 1, "demo says where the files are")
    if where:
        path = where[0].split(" ")[1]
        check(not os.path.exists(path), "demo without --out removes its temporary folder")


def main():
    def tests(tmp):
        test_gptq(tmp, sym=True)
        os.makedirs(os.path.join(tmp, "asym"))
        test_gptq(os.path.join(tmp, "asym"), sym=False)
        test_fp8(tmp)
        test_gptq_ranges(tmp)
        test_explain_golden()
        test_explain_lint_checkpoint(tmp)
        test_killed(tmp)
        test_demo(tmp)

    run_in_temp_dir("qtl-quantize-test-", tests)


if __name__ == "__main__":
    main()
