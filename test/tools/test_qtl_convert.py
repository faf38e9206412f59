"""End-to-end tests of `qtl convert`: a sharded FP8-block checkpoint through every target,
read back and checked independently here.

Usage: test_qtl_convert.py QTL

Standard library only: safetensors parsed with struct/json (safetensors_py), e4m3/bf16/E2M1 decoded
and the engines' arithmetic redone in Python (float32 rounding by struct).
  1. --to bf16: every weight equals bf16(f32(e4m3(q) * s)) exactly; scales and input scales gone,
     the quantization_config dropped, the other tensors and files byte-identical.
  2. --to fp8-ue8m0 with each recipe (sglang: bf16 dequant + bits rule; sglang-legacy: bf16 + log2;
     vllm: f32 + log2 rule):
     codes and scales equal a Python requant; scales are powers of two; the dequantized values are
     within one e4m3 step of the input's; `scale_fmt: "ue8m0"`; --canonical is the fixed point
     (the Python requant of the output changes nothing).
  3. --to mxfp4: the compressed-tensors layout and config, bytes equal to `qtl op
     fp8-block-to-mxfp4` (golden-tested) of each layer, and dequantized (CT's rule) within one
     MXFP4 step of the bf16 dequant.
  4. --to nvfp4: the compressed-tensors layout and config; global scale fl(1/fl(amax/2688)) of the
     bf16 dequant, shared by the shards of a fused layer (q/k/v, gate/up); codes and scales equal a Python NVFP4 quantizer.
  5. All or nothing: a run killed (SIGKILL) with every file staged leaves an older output in place
     and no file under a final name; the next run removes what it left and replaces the output.
  6. Refusals: flags of another target, an unknown --to, a non-FP8 config, a weight without scales,
     scales of the wrong shape, a NaN code or an infinite scale for every target (--allow-nonfinite
     lets bf16 and fp8-ue8m0 through), an input tensor named as an output (`L.weight_scale`,
     `L.weight_packed` beside an FP8 layer, --to mxfp4/nvfp4) (all exit 1 or 2, a message, no
     output folder).
  7. A single-file input (`weights.safetensors`) is written as model.safetensors, with the side
     files of its folder.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from convert_py import (BK, BN, E4M3, bf16_bytes, cdiv, dequant, e2m1_value, f32, f32_bits, from_bits,  # noqa: E402
                        nvfp4_reference, requant, unpack_f32)
from checks import check, finish  # noqa: E402

QTL = sys.argv[1]


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([QTL] + [str(a) for a in args], capture_output=True, text=True, env=e)
    return p.returncode, p.stdout, p.stderr


# ------------------------------------------------------------------------------------------------
# The checkpoint: 2 layers of a DeepSeek-like model, FP8 128x128 blocks, 3 shards

H, V = 256, 64


def fp8_layers():
    out = []
    for i in range(2):
        p = "model.layers.%d." % i
        out += [(p + "self_attn.q_proj", 256, H), (p + "self_attn.k_proj", 128, H), (p + "self_attn.v_proj", 128, H),
                (p + "self_attn.kv_a_proj_with_mqa", 192, H),
                (p + "mlp.gate_proj", 128, H), (p + "mlp.up_proj", 128, H), (p + "mlp.down_proj", H, 128)]
    return out


def make_checkpoint(folder, seed=11, nan=False):
    rnd = random.Random(seed)
    tensors = []
    layers = {}
    finite = [c for c in range(256) if c not in (0x7F, 0xFF)]

    def add_bf16(name, shape):
        n = 1
        for d in shape:
            n *= d
        tensors.append((name, "BF16", shape, b"".join(bf16_bytes(rnd.gauss(0, 0.02)) for _ in range(n))))

    add_bf16("model.embed_tokens.weight", [V, H])
    for li, (m, n, k) in enumerate(fp8_layers()):
        # codes mostly small (as real weights), some blocks with the full range
        q = bytearray(rnd.choice(finite) if rnd.random() < 0.05 else (rnd.randrange(0, 0x50) | rnd.choice((0, 0x80)))
                      for _ in range(n * k))
        nb, kb = cdiv(n, BN), cdiv(k, BK)
        s = [f32(2.0 ** rnd.uniform(-12, -4)) for _ in range(nb * kb)]
        if li == 0:
            s[0] = 2.0 ** -9                       # already a power of two, amax 448 s: kept
            q[0] = 0x7E
            s[1] = from_bits(0x3B000001)           # the log2 rule's band (docs/spec/converters.md E2b)
            for r in range(BN):                    # an all-zero block
                for c in range(BK):
                    q[(BN + r) * k + c] = 0
        if li == 1:
            for r in range(BN):                    # a block whose amax reaches e4m3's max
                q[r * k] = 0x7E
        if nan and m == "model.layers.0.mlp.gate_proj":
            q[5] = 0x7F
        layers[m] = (n, k, bytes(q), s)
        tensors.append((m + ".weight", "F8_E4M3", [n, k], bytes(q)))
        tensors.append((m + ".weight_scale_inv", "F32", [nb, kb], struct.pack("<%df" % len(s), *s)))
        if li == 0:
            tensors.append((m + ".input_scale", "F32", [1], struct.pack("<f", 0.5)))
        if m.endswith("down_proj"):
            p = m[:-len("mlp.down_proj")]
            add_bf16(p + "input_layernorm.weight", [H])
            add_bf16(p + "mlp.gate.weight", [8, H])  # a MoE router: a float linear layer
    add_bf16("model.norm.weight", [H])
    add_bf16("lm_head.weight", [V, H])
    st.write_checkpoint(folder, tensors, 3)
    config = {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": H,
              "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                      "weight_block_size": [128, 128]}}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"tokenizer": "left alone"}\n')
    return {t[0]: t for t in tensors}, layers


def read_all(folder):
    """{name: (dtype, shape, bytes)} over every shard of `folder`, and the index (or None)."""
    out = {}
    index = None
    ipath = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(ipath):
        with open(ipath) as f:
            index = json.load(f)
    for fname in sorted(os.listdir(folder)):
        if fname.endswith(".safetensors"):
            tensors, _ = st.read(os.path.join(folder, fname))
            for name, t in tensors.items():
                check(name not in out, "%s: tensor %s twice" % (folder, name))
                check(index is None or index["weight_map"].get(name) == fname,
                      "%s: the index puts %s in %s, it is in %s" % (folder, name,
                                                                   index and index["weight_map"].get(name), fname))
                out[name] = t
    return out, index


def read_config(folder):
    with open(os.path.join(folder, "config.json")) as f:
        return json.load(f)


# ------------------------------------------------------------------------------------------------

def check_copied(src, out, names, what):
    for name in names:
        check(name in out and out[name][2] == src[name][3] and out[name][0] == src[name][1],
              "%s: %s copied unchanged" % (what, name))


def float_names(src):
    return [n for n, t in src.items() if t[1] == "BF16"]


def converted(tmp, inp, to):
    """`qtl convert --to <to>` of inp into tmp/<to>: (out_dir, stdout), or None when it failed (a check)."""
    out_dir = os.path.join(tmp, to)
    rc, so, se = run("convert", inp, out_dir, "--to", to, "--threads", 2)
    check(rc == 0, "--to %s: exit %d: %s" % (to, rc, se))
    return (out_dir, so) if rc == 0 else None


def test_bf16(tmp, src, layers, inp):
    r = converted(tmp, inp, "bf16")
    if r is None:
        return
    out_dir, so = r
    out, index = read_all(out_dir)
    check(index is not None, "--to bf16: a sharded input gives a sharded output")
    check("layers converted" in so, "--to bf16: the summary: %s" % so)
    for m, (n, k, q, s) in layers.items():
        t = out.get(m + ".weight")
        want = b"".join(bf16_bytes(v) for v in dequant(q, s, n, k, False))
        check(t is not None and t[0] == "BF16" and t[1] == [n, k] and t[2] == want,
              "--to bf16: %s.weight is bf16(fl(e4m3(q) * s))" % m)
        check(m + ".weight_scale_inv" not in out, "--to bf16: %s scales dropped" % m)
        check(m + ".input_scale" not in out, "--to bf16: %s input scale dropped" % m)
    check_copied(src, out, float_names(src), "--to bf16")
    check(set(out) == set(float_names(src)) | {m + ".weight" for m in layers}, "--to bf16: no extra tensors")
    cfg = read_config(out_dir)
    check("quantization_config" not in cfg and cfg.get("model_type") == "deepseek_v3",
          "--to bf16: the quantization_config dropped, the rest kept: %s" % cfg)
    with open(os.path.join(out_dir, "tokenizer.json")) as f:
        check(f.read() == '{"tokenizer": "left alone"}\n', "--to bf16: the other files copied")


def test_ue8m0(tmp, src, layers, inp):
    # sglang_legacy: every front end takes '-' and '_' alike (qtl::dispatch_name)
    for recipe, canonical in (("sglang", False), ("sglang", True), ("sglang-legacy", False), ("vllm", False),
                              ("vllm", True), ("sglang_legacy", False)):
        if True:
            what = "--to fp8-ue8m0 --recipe %s%s" % (recipe, " --canonical" if canonical else "")
            out_dir = os.path.join(tmp, "ue8m0-%s-%d" % (recipe, canonical))
            args = ["convert", inp, out_dir, "--to", "fp8-ue8m0", "--recipe", recipe, "--threads", 2]
            rc, so, se = run(*(args + (["--canonical"] if canonical else [])))
            check(rc == 0, "%s: exit %d: %s" % (what, rc, se))
            if rc != 0:
                continue
            out, _ = read_all(out_dir)
            changed_second = 0
            for li, (m, (n, k, q, s)) in enumerate(layers.items()):
                q1, s1 = requant(q, s, n, k, recipe)
                if canonical:
                    q1b, s1b = requant(q1, s1, n, k, recipe)
                    changed_second += sum(1 for a, b in zip(s1, s1b) if a != b)
                    q1, s1 = q1b, s1b
                w = out.get(m + ".weight")
                sc = out.get(m + ".weight_scale_inv")
                ok = w is not None and sc is not None and w[0] == "F8_E4M3" and sc[0] == "F32"
                check(ok and w[2] == q1, "%s: %s codes equal the Python requant" % (what, m))
                got_s = unpack_f32(sc[2]) if ok else []
                check(got_s == s1, "%s: %s scales equal the Python requant" % (what, m))
                check(all(v > 0 and f32_bits(v) & 0x807FFFFF == 0 for v in got_s),
                      "%s: %s scales are powers of two" % (what, m))
                isc = m + ".input_scale"
                check(isc not in src or out.get(isc, (0, 0, b""))[2] == src[isc][3], "%s: %s input scale kept" % (what, m))
                if ok and li < 3:
                    # dequant of the requant within one e4m3 step (in the output's scale) of the input's
                    d0 = dequant(q, s, n, k, recipe != "vllm")
                    d1 = dequant(w[2], got_s, n, k, False)
                    kb = cdiv(k, BK)
                    worst = max(abs(d0[i] - d1[i]) / got_s[(i // k // BN) * kb + (i % k) // BK] for i in range(n * k))
                    check(worst <= 32.0, "%s: %s dequantizes within one e4m3 step (%g)" % (what, m, worst))
                if ok and canonical:
                    q3, s3 = requant(w[2], got_s, n, k, recipe)
                    check(q3 == w[2] and s3 == got_s, "%s: %s is a fixed point of the requant" % (what, m))
            if canonical:
                check(changed_second > 0, "%s: the second pass changed some block (the test exercises it)" % what)
            check_copied(src, out, float_names(src), what)
            cfg = read_config(out_dir)["quantization_config"]
            check(cfg.get("scale_fmt") == "ue8m0" and cfg.get("weight_block_size") == [128, 128] and
                  cfg.get("quant_method") == "fp8", "%s: config %s" % (what, cfg))
    # the two recipes differ exactly where docs/spec/converters.md says: E2b's block under vLLM keeps 2^-9
    a, _ = read_all(os.path.join(tmp, "ue8m0-sglang-0"))
    b, _ = read_all(os.path.join(tmp, "ue8m0-vllm-0"))
    m0 = fp8_layers()[0][0]
    sa = unpack_f32(a[m0 + ".weight_scale_inv"][2])
    sb = unpack_f32(b[m0 + ".weight_scale_inv"][2])
    check(sa[0] == sb[0] == 2.0 ** -9,
          "fp8-ue8m0: a power-of-two scale is kept by both recipes (%r %r)" % (sa[0], sb[0]))


def test_mxfp4(tmp, src, layers, inp):
    r = converted(tmp, inp, "mxfp4")
    if r is None:
        return
    out_dir, so = r
    out, _ = read_all(out_dir)
    for li, (m, (n, k, q, s)) in enumerate(layers.items()):
        p = out.get(m + ".weight_packed")
        sc = out.get(m + ".weight_scale")
        ok = p is not None and sc is not None and p[0] == "U8" and p[1] == [n, k // 2] and sc[0] == "U8" and \
            sc[1] == [n, k // 32]
        check(ok, "--to mxfp4: %s: weight_packed U8 [N, K/2], weight_scale U8 [N, K/32]" % m)
        check(m + ".weight" not in out and m + ".weight_scale_inv" not in out, "--to mxfp4: %s FP8 tensors gone" % m)
        if not ok:
            continue
        one = os.path.join(tmp, "one.safetensors")
        with open(one, "wb") as f:
            f.write(st.build([("weight", "F8_E4M3", [n, k], q),
                              ("weight_scale_inv", "F32", [cdiv(n, BN), cdiv(k, BK)],
                               struct.pack("<%df" % len(s), *s))]))
        rc2, _, se2 = run("op", "fp8-block-to-mxfp4", one, one + ".out")
        ref, _ = st.read(one + ".out") if rc2 == 0 else ({}, None)
        check(rc2 == 0 and ref["weight"][2] == p[2] and ref["weight_scale"][2] == sc[2],
              "--to mxfp4: %s equals qtl op fp8-block-to-mxfp4 (%s)" % (m, se2))
        if li < 2:
            d = dequant(q, s, n, k, True)
            worst = 0.0
            for i in range(n * k):
                byte = p[2][i // 2]
                code = byte & 0xF if i % 2 == 0 else byte >> 4
                e = sc[2][i // 32] - 127
                v = e2m1_value(code) * 2.0 ** e
                worst = max(worst, abs(v - d[i]) / 2.0 ** e)
            check(worst <= 2.0 + 1e-9, "--to mxfp4: %s dequantizes within one MXFP4 step (%g)" % (m, worst))
    cfg = read_config(out_dir)["quantization_config"]
    g = cfg.get("config_groups", {}).get("group_0", {})
    check(cfg.get("quant_method") == "compressed-tensors" and cfg.get("format") == "mxfp4-pack-quantized" and
          cfg.get("quantization_status") == "compressed" and g.get("weights", {}).get("group_size") == 32 and
          g.get("weights", {}).get("type") == "float" and g.get("weights", {}).get("num_bits") == 4,
          "--to mxfp4: config %s" % cfg)
    kept = {"model.layers.0.mlp.gate", "model.layers.1.mlp.gate", "lm_head"}
    check(set(cfg.get("ignore", [])) == kept,
          "--to mxfp4: ignore lists the float linear layers: %s" % cfg.get("ignore"))
    check_copied(src, out, float_names(src), "--to mxfp4")


def test_nvfp4(tmp, src, layers, inp):
    r = converted(tmp, inp, "nvfp4")
    if r is None:
        return
    out_dir, so = r
    out, _ = read_all(out_dir)
    deq = {m: dequant(q, s, n, k, True) for m, (n, k, q, s) in layers.items()}
    for li, (m, (n, k, q, s)) in enumerate(layers.items()):
        p = out.get(m + ".weight_packed")
        sc = out.get(m + ".weight_scale")
        g = out.get(m + ".weight_global_scale")
        ok = p is not None and sc is not None and g is not None and p[1] == [n, k // 2] and \
            sc[0] == "F8_E4M3" and sc[1] == [n, k // 16] and g[0] == "F32" and g[1] == [1]
        check(ok, "--to nvfp4: %s: weight_packed, weight_scale F8_E4M3 [N, K/16], weight_global_scale F32 [1]" % m)
        if not ok:
            continue
        share = [m]  # the shards of m's fused layer: one global scale, as the engines keep one
        for fused in ((".gate_proj", ".up_proj"), (".q_proj", ".k_proj", ".v_proj")):
            for a in fused:
                if m.endswith(a):
                    share = [m[:-len(a)] + b for b in fused]
        amax = max(abs(v) for mm in share for v in deq[mm])
        gs = f32(1.0 / f32(amax / 2688.0))
        got_gs = struct.unpack("<f", g[2])[0]
        check(got_gs == gs, "--to nvfp4: %s global scale fl(1/fl(amax/2688)) over %s: %r, want %r" %
              (m, share, got_gs, gs))
        if li < 4:
            codes, scales = nvfp4_reference(deq[m], n, k, gs)
            want_p = bytes(codes[2 * i] | codes[2 * i + 1] << 4 for i in range(n * k // 2))
            check(p[2] == want_p, "--to nvfp4: %s codes equal the Python NVFP4 quantizer" % m)
            check(sc[2] == bytes(scales), "--to nvfp4: %s scales equal the Python NVFP4 quantizer" % m)
    cfg = read_config(out_dir)["quantization_config"]
    g = cfg.get("config_groups", {}).get("group_0", {})
    check(cfg.get("format") == "nvfp4-pack-quantized" and g.get("weights", {}).get("strategy") == "tensor_group" and
          g.get("weights", {}).get("group_size") == 16, "--to nvfp4: config %s" % cfg)


def test_refusals(tmp, inp):
    def refused(args, code, words, what):
        out_dir = os.path.join(tmp, "refused")
        rc, so, se = run(*(["convert"] + args[:1] + [out_dir] + args[1:]))
        check(rc == code, "%s: exit %d, want %d (%s)" % (what, rc, code, se.strip()))
        check(all(w in se for w in words), "%s: the message names %s: %s" % (what, words, se.strip()))
        check(not os.path.exists(out_dir) or not os.listdir(out_dir), "%s: no output left" % what)
        left = [f for f in os.listdir(tmp) if f.startswith(".refused")]
        check(not left, "%s: no staging folder left: %s" % (what, left))

    refused([inp, "--to", "bf16", "--recipe", "vllm"], 1, ["--recipe"], "--recipe with --to bf16")
    refused([inp, "--to", "mxfp4", "--canonical"], 1, ["--canonical"], "--canonical with --to mxfp4")
    refused([inp, "--to", "fp4"], 1, ["--to"], "an unknown --to")
    refused([inp, "--to", "fp8-ue8m0", "--recipe", "deepgemm"], 1, ["--recipe", "{sglang, sglang-legacy, vllm}"],
            "an unknown --recipe")
    # not an FP8 block checkpoint
    bad = os.path.join(tmp, "bad-config")
    os.makedirs(bad)
    st.write_checkpoint(bad, [("a.weight", "BF16", [2, 2], b"\0" * 8)], 1)
    with open(os.path.join(bad, "config.json"), "w") as f:
        json.dump({"quantization_config": {"quant_method": "gptq", "bits": 4}}, f)
    refused([bad, "--to", "bf16"], 2, ["gptq", "FP8 block"], "a GPTQ config")
    # a weight without its scales, scales of the wrong shape
    for name, tensors, words in (
            ("no-scale", [("x.weight", "F8_E4M3", [128, 128], b"\0" * 16384)], ["x.weight", "weight_scale_inv"]),
            ("bad-shape", [("x.weight", "F8_E4M3", [130, 128], b"\0" * 16640),
                           ("x.weight_scale_inv", "F32", [1, 1], b"\0\0\x80\x3f")], ["[2, 1]"]),
            ("float-only", [("x.weight", "BF16", [2, 2], b"\0" * 8)], ["no FP8 block weights"])):
        d = os.path.join(tmp, name)
        st.write_checkpoint(d, tensors, 1)
        refused([d, "--to", "bf16"], 2, words, name)
    # a NaN code: every target refuses it after work has started; nothing is left behind
    nan_dir = os.path.join(tmp, "nan")
    make_checkpoint(nan_dir, nan=True)
    for to in ("mxfp4", "nvfp4", "bf16", "fp8-ue8m0"):
        refused([nan_dir, "--to", to], 2, ["NaN", "mlp.gate_proj"] + (["--allow-nonfinite"] if to in ("bf16", "fp8-ue8m0") else []),
                "a NaN code for --to " + to)
    # an infinite scale likewise
    inf_dir = os.path.join(tmp, "inf")
    one = [("x.weight", "F8_E4M3", [128, 128], b"\x38" * 16384),
           ("x.weight_scale_inv", "F32", [1, 1], struct.pack("<f", float("inf")))]
    st.write_checkpoint(inf_dir, one, 1)
    for to in ("bf16", "fp8-ue8m0"):
        refused([inf_dir, "--to", to], 2, ["x", "Inf", "--allow-nonfinite"], "an infinite scale for --to " + to)
    refused([nan_dir, "--to", "mxfp4", "--allow-nonfinite"], 1, ["--allow-nonfinite"], "--allow-nonfinite with --to mxfp4")
    for to in ("bf16", "fp8-ue8m0"):
        out_dir = os.path.join(tmp, "nan-allowed")
        rc, _, se = run("convert", nan_dir, out_dir, "--to", to, "--allow-nonfinite")
        check(rc == 0, "--to %s --allow-nonfinite converts the NaN code: %d %s" % (to, rc, se.strip()))
    # an input tensor with the name of an output: refused by the writer, naming both
    for to, extra in (("nvfp4", ".weight_scale"), ("mxfp4", ".weight_scale"), ("mxfp4", ".weight_packed")):
        d = os.path.join(tmp, "dup" + extra)
        st.write_checkpoint(d, [("x.weight", "F8_E4M3", [128, 128], b"\x38" * 16384),
                                ("x.weight_scale_inv", "F32", [1, 1], struct.pack("<f", 0.5)),
                                ("x" + extra, "F32", [1], struct.pack("<f", 1.0))], 1)
        refused([d, "--to", to], 2, ["x" + extra, "'x.weight'", "two output tensors"],
                "an input x%s beside an FP8 layer, --to %s" % (extra, to))


def test_single_file(tmp):
    """7."""
    d = os.path.join(tmp, "single")
    os.makedirs(d)
    with open(os.path.join(d, "weights.safetensors"), "wb") as f:
        f.write(st.build([("x.weight", "F8_E4M3", [128, 128], b"\x38" * 16384),
                          ("x.weight_scale_inv", "F32", [1, 1], struct.pack("<f", 0.5))]))
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        f.write('{"t": 1}\n')
    out_dir = os.path.join(tmp, "single-out")
    rc, _, se = run("convert", os.path.join(d, "weights.safetensors"), out_dir, "--to", "bf16")
    check(rc == 0, "a single-file input converts: %s" % se.strip())
    if rc == 0:
        names = sorted(f for f in os.listdir(out_dir) if not f.startswith("."))  # not qtl's output marker
        check(names == ["model.safetensors", "tokenizer.json"],
              "a single-file input gives model.safetensors and its folder's side files: %s" % names)


def test_killed(tmp, inp):
    out_dir = os.path.join(tmp, "killed")
    rc, _, se = run("convert", inp, out_dir, "--to", "bf16")
    check(rc == 0, "killed: the first run: %s" % se)
    before = sorted(os.listdir(out_dir))
    rc, _, _ = run("convert", inp, out_dir, "--to", "fp8-ue8m0", env={"QTL_TEST_STOP_AT": "staged"})
    check(rc == -9, "killed: QTL_TEST_STOP_AT=staged kills the run (rc %d)" % rc)
    check(sorted(os.listdir(out_dir)) == before and "quantization_config" not in read_config(out_dir),
          "killed: the older (bf16) output is untouched")
    rc, _, se = run("convert", inp, out_dir, "--to", "fp8-ue8m0")
    check(rc == 0 and "quantization_config" in read_config(out_dir), "killed: the next run replaces it: %s" % se)
    left = [f for f in os.listdir(tmp) if f.startswith(".killed")]
    check(not left, "killed: nothing left beside the output: %s" % left)


def main():
    with tempfile.TemporaryDirectory(prefix="qtl_convert_test_") as tmp:
        inp = os.path.join(tmp, "in")
        src, layers = make_checkpoint(inp)
        test_bf16(tmp, src, layers, inp)
        test_ue8m0(tmp, src, layers, inp)
        test_mxfp4(tmp, src, layers, inp)
        test_nvfp4(tmp, src, layers, inp)
        test_killed(tmp, inp)
        test_refusals(tmp, inp)
        test_single_file(tmp)
    finish()


if __name__ == "__main__":
    main()
