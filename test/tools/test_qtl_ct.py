"""End-to-end tests of `qtl quantize`'s compressed-tensors formats: w4a16, w8a16
(pack-quantized), nvfp4 (NVFP4A16), mxfp4 and --fp8-scheme ct-block.

Usage: test_qtl_ct.py QTL GOLDEN_CONFIGS_DIR

Standard library only. The layouts are those of docs/spec/interop.md §3.1, read here from the
spec, not from QTL's code:
  1. w4a16/w8a16, sym and asym, group and channelwise, under a compressed-tensors --config whose
     `ignore` keeps one layer: names, dtypes and shapes of every tensor; weight_packed unpacked
     along K, weight_zero_point along N, and every scale, zero point and code equal to
     compressed-tensors' rule redone here in fp16 (`ct_group` below, CT 0.20.0's calculate_qparams
     and quantize: symmetric s = fp16(amax / 7.5) for 4 bits and amax / 127.5 for 8, not the GPTQ
     rule's amax / 7 that `--format gptq` keeps; asymmetric s = fp16((max - min) / 15) with the
     range widened to 0 and a signed zero point added in fp16 before rounding); the config JSON
     (only keys the compressed-tensors schema accepts, `ignore` = the layers kept); `qtl inspect`
     recognises the output and `qtl explain` on its config skips exactly the kept layers.
  2. nvfp4: weight_global_scale is compressed-tensors' fl(fl(1 / amax) * 2688);
     weight_packed/weight_scale equal byte for byte to `qtl op nvfp4-quant` (the golden-tested
     op) given that global scale, but for a -0.0 weight's code (0, as compressed-tensors writes
     it); dequantization e2m1 * e4m3 / global within a step.
     An all-zero block gets compressed-tensors' scale 0.125 (E4M3 0x20), not 0.
  3. mxfp4: E8M0 scales are compressed-tensors' rule (`ct_mx_exponent` below: amax rounded to a
     power of two, up from a significand of 1.75, divided by 4), codes the E2M1 rounding of
     x / scale recomputed here; dequantization within a step (a clipped amax within 1.2 steps).
  4. ct-block: F8_E4M3 weight, weight_scale [ceil(N/128), ceil(K/128)], the FP8_BLOCK config;
     `qtl inspect` reads a single-block layer's [1, 1] scale as a block (the config says so).
  5. Bad flag combinations refused (exit 1) and shapes a format cannot take (exit 2), each with a
     message naming the flag or the tensor; no output folder left.
  6. Fused layers (q/k/v, gate/up, experts' gate/up and w1/w3, q_a/kv_a) with shards of different
     amax in two files: the engines' fused view (shards concatenated, one NVFP4 global scale, the
     max or the gate's) equals each shard's own dequantization bit for bit; FP8 per-tensor scales
     shared, so the engines' requantization with the max scale changes no code; an infinite
     weight is refused naming its own shard.
"""
import bisect
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from checks import check, run_in_temp_dir  # noqa: E402
import test_qtl_quantize as tq  # noqa: E402  (its checkpoint maker and readers; argv as ours)

QTL = sys.argv[1]

SCHEME_KEYS = {"targets", "weights", "input_activations", "output_activations", "format"}
ARGS_KEYS = {"num_bits", "type", "symmetric", "group_size", "strategy", "block_structure", "dynamic",
             "actorder", "scale_dtype", "zp_dtype", "observer", "observer_kwargs"}
KEPT = "model.layers.1.mlp.down_proj"


def run(*args):
    p = subprocess.run([QTL] + [str(a) for a in args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def ct_config(tmp, bits, group, sym):
    """A compressed-tensors config whose weights agree with the flags of the run (a flag that
    contradicts the config is refused)."""
    path = os.path.join(tmp, "ct_cfg.json")
    weights = {"num_bits": bits, "type": "int", "symmetric": sym, "strategy": "channel" if group == -1 else "group",
               "group_size": None if group == -1 else group}
    with open(path, "w") as f:
        json.dump({"quantization_config": {
            "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "ignore": ["lm_head", "re:.*layers\\.1\\.mlp\\.down_proj$"],
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}}, f)
    return path


def check_config(out, fmt, weights, kept):
    with open(os.path.join(out, "config.json")) as f:
        conf = json.load(f)
    check(conf["model_type"] == "llama", fmt + ": config.json keeps the model fields")
    q = conf["quantization_config"]
    check(q["quant_method"] == "compressed-tensors" and q["quantization_status"] == "compressed", fmt + ": CT config")
    check(q["format"] == weights.pop("_format"), fmt + ": format " + q["format"])
    check(sorted(q["ignore"]) == sorted(kept), fmt + ": ignore lists the kept layers: %s" % q["ignore"])
    groups = q["config_groups"]
    check(list(groups) == ["group_0"], fmt + ": one config group")
    g = groups["group_0"]
    check(set(g) <= SCHEME_KEYS, fmt + ": scheme keys accepted by QuantizationScheme: %s" % sorted(g))
    check(set(g["weights"]) <= ARGS_KEYS, fmt + ": weights keys accepted by QuantizationArgs: %s" % sorted(g["weights"]))
    check(g["targets"] == ["Linear"] and g["format"] == q["format"], fmt + ": targets and group format")
    check(g["input_activations"] is None and g["output_activations"] is None, fmt + ": weight only")
    for key, want in weights.items():
        check(g["weights"].get(key) == want, "%s: weights.%s = %r (is %r)" % (fmt, key, want, g["weights"].get(key)))
    return out


def check_explain(out, kept_modules):
    """qtl explain on the output, its config read from its config.json: its linear modules (the
    quantized ones recognised by weight_packed etc.) listed, exactly the kept ones skipped."""
    rc, so, se = run("explain", "--checkpoint", out, "--json")
    check(rc == 0, "explain on the output config: " + se)
    rows = [json.loads(line) for line in so.splitlines()]
    linear = {d["module"] for d in rows if "kept" not in d}
    check(linear == {n for n, _, _ in tq.linear_shapes()} | {"lm_head"}, "explain lists the linear modules: %s" % sorted(linear))
    skipped = {d["module"] for d in rows if d["skipped"] and "kept" not in d}
    check(skipped == set(kept_modules), "explain skips exactly %s (skips %s)" % (sorted(kept_modules), sorted(skipped)))


def h(x):
    """fp16(float32(x)): a torch fp16 operation (computed in float32, rounded to fp16)."""
    return tq.f16(f32(x))


def ct_group(vals, bits, sym):
    """compressed-tensors 0.20.0's scale and signed zero point of one fp16 group (calculate_qparams
    in the weight's dtype), and its code function (quantize). Independent of QTL's code."""
    lo, hi = min(min(vals), 0.0), max(max(vals), 0.0)
    levels, qmin = (1 << bits) - 1, -(1 << (bits - 1))
    qmax = -qmin - 1
    zp = 0
    if sym:
        s0 = h(max(-lo, hi) / (levels / 2))
    else:
        s0 = h(h(hi - lo) / levels)
        if s0 == 0:
            z = float("nan") if lo == 0 else float(qmax)
        else:
            z = min(max(h(qmin - h(lo / s0)), qmin), qmax)
        zp = 0 if z != z else round(z)
    s = s0 if s0 != 0 else 2.0 ** -10     # fp16's epsilon for a zero scale

    def code(x):
        return round(min(max(h(h(x / s) + zp), qmin), qmax))
    return s, zp, code


def unpack_bits(words, index, bits):
    """Element `index` of a bit stream of 32-bit little-endian words, LSB first."""
    w = words[(index * bits) // 32] & 0xFFFFFFFF
    return (w >> ((index * bits) % 32)) & ((1 << bits) - 1)


def test_pack(tmp, fmt, bits, group, sym):
    src = os.path.join(tmp, "ckpt")
    if not os.path.exists(src):
        tq.make_checkpoint(src, shards=2)
    _, weights = tq.make_checkpoint(os.path.join(tmp, "ckpt-copy"), shards=1)  # same seed, same values
    inputs = st.read(os.path.join(tmp, "ckpt-copy", "model.safetensors"))[0]
    name = "%s-%s-g%d" % (fmt, "sym" if sym else "asym", group)
    out = os.path.join(tmp, "out-" + name)
    args = ["quantize", src, out, "--format", fmt, "--group-size", group, "--config", ct_config(tmp, bits, group, sym),
            "--threads", 2]
    if not sym:
        args.append("--asym")
    rc, so, se = run(*args)
    check(rc == 0, name + ": rc 0: " + se)
    if rc != 0:
        return
    check("layers quantized" in so and "pack-quantized" in so, name + ": summary printed")
    channel = group == -1
    check_config(out, name, {"_format": "pack-quantized", "num_bits": bits, "type": "int", "symmetric": sym,
                             "strategy": "channel" if channel else "group",
                             "group_size": None if channel else group, "dynamic": False}, ["lm_head", KEPT])
    tq.check_aligned(out)
    t = tq.read_checkpoint(out)
    rc, so, se = run("inspect", out)
    check(rc == 0 and "INT (compressed-tensors pack-quantized, %d-bit, %s, %s)" %
          (bits, "channelwise" if channel else "group %d" % group, "symmetric" if sym else "asymmetric") in so,
          name + ": qtl inspect recognises it: " + so[-300:])
    check_explain(out, ["lm_head", KEPT])
    pf = 32 // bits
    expected = set()
    for module, n, k in tq.linear_shapes():
        if module == KEPT:
            check(t[module + ".weight"][2] == inputs[module + ".weight"][2], module + " kept byte-identical")
            expected.add(module + ".weight")
            continue
        gs = k if channel else group
        g = k // gs
        wp, ws, wsh = t[module + ".weight_packed"], t[module + ".weight_scale"], t[module + ".weight_shape"]
        check(wp[0] == "I32" and wp[1] == [n, k // pf], module + ": weight_packed I32 [N, K/%d]" % pf)
        check(ws[0] == "F16" and ws[1] == [n, g], module + ": weight_scale F16 (the weight's dtype) [N, G]")
        check(wsh[0] == "I64" and wsh[1] == [2] and struct.unpack("<2q", wsh[2]) == (n, k), module + ": weight_shape")
        names = {module + s for s in (".weight_packed", ".weight_scale", ".weight_shape")}
        words = tq.i32s(wp[2])
        scales = tq.f16s(ws[2])
        if sym:
            check(module + ".weight_zero_point" not in t, module + ": no zero point when symmetric")
            zero = [[1 << (bits - 1)] * g for _ in range(n)]
        else:
            zp = t[module + ".weight_zero_point"]
            names.add(module + ".weight_zero_point")
            check(zp[0] == "I32" and zp[1] == [n // pf, g], module + ": weight_zero_point I32 [N/%d, G]" % pf)
            zw = tq.i32s(zp[2])
            # packed along N: column gi of the [N/pf, G] words holds zero points of rows nn
            zero = [[unpack_bits([zw[(nn // pf) * g + gi]], nn % pf, bits) for gi in range(g)] for nn in range(n)]
        expected |= names
        w = weights[module + ".weight"]
        half = 1 << (bits - 1)
        bad_s = bad_z = bad_q = 0
        gptq_rule = 0   # groups whose scale would equal the GPTQ rule's (amax / (2^(b-1) - 1))
        for nn in range(n):
            row = words[nn * (k // pf):(nn + 1) * (k // pf)]
            for gi in range(g):
                vals = w[nn * k + gi * gs:nn * k + (gi + 1) * gs]
                s, zp, code = ct_group(vals, bits, sym)
                bad_s += scales[nn * g + gi] != s
                bad_z += zero[nn][gi] != zp + half
                gptq_rule += sym and scales[nn * g + gi] == h(max(abs(v) for v in vals) / (half - 1))
                for i, x in enumerate(vals):
                    bad_q += unpack_bits(row, gi * gs + i, bits) != code(x) + half
        check(bad_s == 0 and bad_z == 0 and bad_q == 0,
              "%s %s: compressed-tensors' rule: %d of %d scales, %d zero points, %d of %d codes differ"
              % (name, module, bad_s, n * g, bad_z, bad_q, n * k))
        check(gptq_rule == 0, "%s %s: no scale is the GPTQ rule's amax/%d (%d are)" % (name, module, half - 1, gptq_rule))
    for n_ in inputs:
        if not any(n_ == m + ".weight" for m, _, _ in tq.linear_shapes()):
            expected.add(n_)
            check(t[n_][2] == inputs[n_][2], n_ + " copied unchanged")
    check(set(t) == expected, name + ": exactly the expected tensors (extra %s, missing %s)" %
          (sorted(set(t) - expected)[:4], sorted(expected - set(t))[:4]))


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e2m1(c):
    return (-1.0 if c & 8 else 1.0) * E2M1[c & 7]


def e2m1_rne(x):
    """The E2M1 code of x (exact rational), round half to even on the code, saturating at 6."""
    a = min(abs(x), Fraction(6))
    best = min(range(8), key=lambda c: (abs(Fraction(E2M1[c]) - a), c & 1))
    return best | (8 if x < 0 else 0)


def ct_mx_exponent(amax):
    """compressed-tensors 0.20.0's MXFP4 scale byte for an fp16 block max (generate_mx_scales:
    amax rounded to a power of two on fp16's bits, up from a significand of 1.75, then
    127 + log2 - 2; a small subnormal or zero amax has exponent bits 0, so 2^-127, which fp16 flushes
    to 0, which CT's epsilon makes 1: byte 127; but from 0.75 * 2^-14 the rounding carries into
    the exponent field: 2^-14, byte 111)."""
    if amax < 2.0 ** -14:
        return 111 if amax >= 0.75 * 2.0 ** -14 else 127
    m, e = math.frexp(amax)          # amax = m * 2^e, m in [0.5, 1): significand 2m
    return max(127 + (e - 1) + (1 if 2 * m >= 1.75 else 0) - 2, 0)


def test_fp4(tmp, fmt):
    src = os.path.join(tmp, "ckpt1")
    if not os.path.exists(src):
        tq.make_checkpoint(src, shards=1)
    inputs, weights = tq.make_checkpoint(os.path.join(tmp, "ckpt1-copy"), shards=1)
    out = os.path.join(tmp, "out-" + fmt)
    rc, so, se = run("quantize", src, out, "--format", fmt, "--threads", 2)
    check(rc == 0, fmt + ": rc 0: " + se)
    if rc != 0:
        return
    nv = fmt == "nvfp4"
    bs = 16 if nv else 32
    want = {"_format": fmt + "-pack-quantized", "num_bits": 4, "type": "float", "symmetric": True,
            "group_size": bs, "strategy": "tensor_group" if nv else "group", "dynamic": False}
    if not nv:
        want["scale_dtype"] = "torch.uint8"
    check_config(out, fmt, want, ["lm_head"])
    t = tq.read_checkpoint(out)
    rc, so, se = run("inspect", out)
    check(rc == 0 and ("NVFP4 (compressed-tensors, group 16)" if nv else "MXFP4 (group 32, E8M0 scales)") in so,
          fmt + ": qtl inspect recognises it")
    check_explain(out, ["lm_head"])
    for module, n, k in tq.linear_shapes():
        wp, ws = t[module + ".weight_packed"], t[module + ".weight_scale"]
        check(wp[0] == "U8" and wp[1] == [n, k // 2], module + ": weight_packed U8 [N, K/2]")
        check(ws[0] == ("F8_E4M3" if nv else "U8") and ws[1] == [n, k // bs], module + ": weight_scale [N, K/%d]" % bs)
        names = {module + ".weight_packed", module + ".weight_scale"}
        w = weights[module + ".weight"]
        if nv:
            gsc = t[module + ".weight_global_scale"]
            names.add(module + ".weight_global_scale")
            check(gsc[0] == "F32" and gsc[1] == [1], module + ": weight_global_scale F32 [1]")
            # compressed-tensors' global scale: torch's 2688 / amax is amax.reciprocal() * 2688,
            # two float32 roundings (exact here through double: 53 >= 2 * 24 + 2 bits), of the
            # amax of the engine's fused layer: q/k/v and gate/up share one (test_fused_nvfp4)
            parent, leaf = module.rsplit(".", 1)
            shards = next((g for g in (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")) if leaf in g), (leaf,))
            amax = max(abs(x) for sh in shards for x in weights[parent + "." + sh + ".weight"])
            want_gs = f32(f32(1.0 / amax) * 2688.0)
            gs = tq.f32s(gsc[2])[0]
            check(gs == want_gs, module + ": weight_global_scale %r is CT's fl(fl(1/amax) * 2688) %r" % (gs, want_gs))
            # the golden-tested op on the same weight and global scale: the same bytes, but for
            # the code of a -0.0 weight (0 in compressed-tensors, -0 from the op)
            op_in = os.path.join(tmp, "nv_in.safetensors")
            op_out = os.path.join(tmp, "nv_out.safetensors")
            with open(op_in, "wb") as f:
                f.write(st.build([("input", "F16", [n, k], inputs[module + ".weight"][3]),
                                  ("global_scale", "F32", [], gsc[2])]))
            rc, _, se = run("op", "nvfp4-quant", op_in, op_out)
            check(rc == 0, "qtl op nvfp4-quant: " + se)
            o, _ = st.read(op_out)
            op_codes = bytearray(o["output"][2])
            for i, x in enumerate(w):
                if x == 0:
                    op_codes[i // 2] &= 0xF0 if i % 2 == 0 else 0x0F
            check(bytes(op_codes) == wp[2], module + ": weight_packed equals qtl op nvfp4-quant's output")
            check(o["scale"][2] == ws[2], module + ": weight_scale equals qtl op nvfp4-quant's scale")
        check(set(n_ for n_ in t if n_.startswith(module + ".")) == names, module + ": exactly its tensors")
        worst = 0.0
        bad_codes = 0
        for nn in range(n):
            for b in range(k // bs):
                sc = ws[2][nn * (k // bs) + b]
                block = w[nn * k + b * bs:nn * k + (b + 1) * bs]
                if nv:
                    step = tq.E4M3[sc] / gs
                else:
                    amax = max(abs(x) for x in block)
                    bad_codes += sc != ct_mx_exponent(amax)
                    step = 2.0 ** (sc - 127)
                for i, x in enumerate(block):
                    kk = b * bs + i
                    byte = wp[2][nn * (k // 2) + kk // 2]
                    c = (byte >> (4 * (kk % 2))) & 0xF
                    if not nv and amax != 0:
                        bad_codes += c != e2m1_rne(Fraction(x) / Fraction(2) ** (sc - 127))
                    d = e2m1(c) * step
                    # within half an E2M1 step of the block's grid (1 unit of the scale at most)
                    worst = max(worst, abs(d - x) / (step * 1.0001))
        check(worst <= 1.0, "%s %s: within one E2M1 step of the weight (worst %.3f)" % (fmt, module, worst))
        if not nv:
            check(bad_codes == 0, "%s: %d E8M0 scales or E2M1 codes differ from the rule" % (module, bad_codes))


def test_ct_block(tmp):
    src = os.path.join(tmp, "ckpt1")
    if not os.path.exists(src):
        tq.make_checkpoint(src, shards=1)
    out = os.path.join(tmp, "out-ct-block")
    rc, so, se = run("quantize", src, out, "--format", "fp8", "--fp8-scheme", "ct-block", "--threads", 2)
    check(rc == 0, "ct-block: rc 0: " + se)
    if rc != 0:
        return
    with open(os.path.join(out, "config.json")) as f:
        q = json.load(f)["quantization_config"]
    g = q["config_groups"]["group_0"]
    check(q["quant_method"] == "compressed-tensors" and q["format"] == "float-quantized" and
          q["ignore"] == ["lm_head"], "ct-block: compressed-tensors float-quantized config")
    check(g["weights"]["strategy"] == "block" and g["weights"]["block_structure"] == [128, 128] and
          g["input_activations"]["strategy"] == "group" and g["input_activations"]["group_size"] == 128 and
          g["input_activations"]["dynamic"] is True, "ct-block: FP8_BLOCK weights and inputs")
    check(set(g) <= SCHEME_KEYS and set(g["weights"]) <= ARGS_KEYS and set(g["input_activations"]) <= ARGS_KEYS,
          "ct-block: only schema keys")
    t = tq.read_checkpoint(out)
    for module, n, k in tq.linear_shapes():
        check(t[module + ".weight"][0] == "F8_E4M3" and t[module + ".weight"][1] == [n, k], module + ": F8_E4M3 [N, K]")
        s = t.get(module + ".weight_scale")
        check(s is not None and s[0] == "F32" and s[1] == [(n + 127) // 128, (k + 127) // 128],
              module + ": weight_scale [ceil(N/128), ceil(K/128)]")
        check(module + ".weight_scale_inv" not in t, module + ": no HF weight_scale_inv")
    rc, so, se = run("inspect", out)
    # One 128x128 block covers each of these small layers: their [1, 1] scale fits a tensor, a
    # channel and a block; the config's FP8_BLOCK strategy settles it.
    check(rc == 0 and "FP8 (e4m3, block scales [1, 1] for [128, 64]" in so and "per-tensor" not in so,
          "ct-block: qtl inspect reads a single-block layer as block scales: " + so[-400:])
    # The same tensors under a per-tensor config (CT strategy tensor) read as per-tensor.
    with open(os.path.join(out, "config.json")) as f:
        conf = json.load(f)
    conf["quantization_config"]["config_groups"]["group_0"]["weights"].update(
        strategy="tensor", block_structure=None)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(conf, f)
    rc, so, se = run("inspect", out)
    check(rc == 0 and "per-tensor weight scale" in so and "block scales" not in so,
          "ct-block files under a tensor-strategy config: per-tensor")


def test_zero_blocks(tmp):
    """An all-zero group or block gets compressed-tensors' scale: its epsilon of the scale dtype
    (calculate_qparams), not the library's 0 or 1e-12 floor."""
    src = os.path.join(tmp, "zeros")
    n, k = 16, 128
    vals = [0.0 if i < 64 else ((i * 37) % 23 - 11) / 64 for i in range(n * k)]  # row 0: first half zero
    st.write_checkpoint(src, [("model.layers.0.mlp.up_proj.weight", "F16", [n, k], struct.pack("<%de" % (n * k), *vals))], 1)
    cases = [(["--format", "nvfp4"], "weight_scale", lambda b: b[0] == 0x20 and b[3] == 0x20,
              "NVFP4 scale 0.125 (E4M3 0x20)"),
             (["--format", "mxfp4"], "weight_scale", lambda b: b[0] == 127 and b[1] == 127,
              "MXFP4 byte 127 (fp16: 2^-127 flushes to 0, epsilon 1)"),
             (["--format", "w4a16", "--group-size", "64"], "weight_scale",
              lambda b: tq.f16s(b)[0] == 2.0 ** -10, "w4a16 scale fp16 epsilon 2^-10"),
             (["--format", "w4a16", "--group-size", "64", "--asym"], "weight_zero_point",
              lambda b: unpack_bits(tq.i32s(b), 0, 4) == 8, "w4a16 asym zero point 0 (stored 8)")]
    for args, key, ok, what in cases:
        out = os.path.join(tmp, "zeros-out")
        rc, so, se = run("quantize", src, out, *args)
        check(rc == 0, " ".join(args) + " on zero blocks: " + se)
        if rc != 0:
            continue
        t = tq.read_checkpoint(out)
        b = t["model.layers.0.mlp.up_proj." + key][2]
        check(ok(b), "%s: %s (bytes %s)" % (" ".join(args), what, b[:8].hex()))
        shutil.rmtree(out, ignore_errors=True)
    # ct-block: an all-zero 128x128 block gets float32's epsilon 2^-23 as its scale
    zsrc = os.path.join(tmp, "zeros-block")
    st.write_checkpoint(zsrc, [("model.layers.0.mlp.up_proj.weight", "F16", [128, 256],
                                struct.pack("<32768e", *([0.0] * 128 + [0.5] * 128) * 128))], 1)
    out = os.path.join(tmp, "zeros-block-out")
    rc, so, se = run("quantize", zsrc, out, "--format", "fp8", "--fp8-scheme", "ct-block")
    check(rc == 0, "ct-block on a zero block: " + se)
    if rc == 0:
        sc = tq.f32s(tq.read_checkpoint(out)["model.layers.0.mlp.up_proj.weight_scale"][2])
        check(sc[0] == 2.0 ** -23 and sc[1] == f32(0.5 / 448), "ct-block: zero block scale 2^-23, other amax/448: %s" % (sc,))


def test_refused(tmp):
    src = os.path.join(tmp, "ckpt1")
    if not os.path.exists(src):
        tq.make_checkpoint(src, shards=1)
    gptq_cfg = os.path.join(tmp, "gptq_only.json")
    with open(gptq_cfg, "w") as f:
        json.dump({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}, f)
    hf_fp8 = os.path.join(tmp, "hf_fp8.json")
    with open(hf_fp8, "w") as f:
        json.dump({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}, f)
    int_cfg = ct_config(tmp, 4, 128, True)  # W4A16 weights: an NVFP4, MXFP4 or FP8 run would replace them
    fp8_block_cfg = os.path.join(tmp, "ct_fp8_block.json")
    with open(fp8_block_cfg, "w") as f:
        json.dump({"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"g": {
            "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                                               "block_structure": [128, 128]}}}}, f)
    cases = [
        (["--format", "nvfp4", "--config", int_cfg], 1, ["group_0.weights.type", '"int"', "--format nvfp4", '"float"']),
        (["--format", "mxfp4", "--config", int_cfg], 1, ["weights.type", "--format mxfp4"]),
        (["--format", "fp8", "--fp8-scheme", "channel", "--config", fp8_block_cfg], 1,
         ["config_groups.g.weights.strategy", '"block"', "--fp8-scheme channel", '"channel"']),
        (["--format", "fp8", "--fp8-scheme", "ct-block", "--config", int_cfg], 1, ["weights.type", "ct-block"]),
        (["--format", "w4a16", "--bits", "8"], 1, ["--bits", "w4a16"]),
        (["--format", "w8a16", "--fp8-scheme", "block"], 1, ["--fp8-scheme", "w8a16"]),
        (["--format", "nvfp4", "--group-size", "32"], 1, ["--group-size", "nvfp4"]),
        (["--format", "mxfp4", "--asym"], 1, ["--asym", "mxfp4"]),
        (["--format", "nvfp4", "--sym"], 1, ["--sym", "nvfp4"]),
        (["--format", "mxfp4", "--fp8-scheme", "ct-block"], 1, ["--fp8-scheme", "mxfp4"]),
        (["--format", "w4a16", "--sym", "--asym"], 1, ["--sym", "--asym"]),
        (["--format", "w4a16", "--config", gptq_cfg], 1, ["gptq", "compressed-tensors"]),
        (["--format", "fp8", "--fp8-scheme", "ct-block", "--config", hf_fp8], 1, ["ct-block", "fp8"]),
        (["--format", "int4"], 1, ["--format"]),
        (["--format", "w4a16", "--group-size", "48"], 2, ["K = 64", "48"]),
    ]
    for args, want_rc, words in cases:
        out = os.path.join(tmp, "refused")
        rc, so, se = run("quantize", src, out, *args)
        check(rc == want_rc and all(w in se for w in words),
              "%s: exit %d naming %s (got %d: %s)" % (" ".join(args), want_rc, words, rc, se.strip()[:200]))
        check(not os.path.exists(out) or not os.listdir(out), " ".join(args) + ": no output left")
        shutil.rmtree(out, ignore_errors=True)
    # a config describing the weights the format writes is taken (its ignore list decides)
    rc, so, se = run("quantize", src, os.path.join(tmp, "fp8-block-cfg"), "--format", "fp8", "--fp8-scheme", "ct-block",
                     "--config", fp8_block_cfg)
    check(rc == 0, "ct-block with a matching FP8_BLOCK config: exit 0 (got %d: %s)" % (rc, se.strip()[:200]))
    # a K no format block divides: 24 columns
    odd = os.path.join(tmp, "odd")
    st.write_checkpoint(odd, [("model.layers.0.mlp.up_proj.weight", "F16", [8, 24], struct.pack("<192e", *([0.5] * 192)))], 1)
    for fmt, words in (("nvfp4", ["K = 24", "16"]), ("mxfp4", ["K = 24", "32"]), ("w4a16", ["K = 24", "128"])):
        rc, so, se = run("quantize", odd, os.path.join(tmp, "odd-out"), "--format", fmt)
        check(rc == 2 and all(w in se for w in words) and "up_proj" in se,
              "%s on K = 24: exit 2 naming the tensor (got %d: %s)" % (fmt, rc, se.strip()[:200]))
        check(not os.path.exists(os.path.join(tmp, "odd-out")) or not os.listdir(os.path.join(tmp, "odd-out")),
              fmt + " on K = 24: no output left")


def test_moe_router(tmp):
    """MoE routers (`mlp.gate` [num_experts, hidden], `shared_expert_gate` [1, hidden]) stay in the
    input's dtype in every format, as the engines build them, and `ignore` lists them."""
    src = os.path.join(tmp, "moe")
    tensors = [("model.layers.0.mlp.gate.weight", "F16", [4, 128], struct.pack("<512e", *([0.25] * 512))),
               ("model.layers.0.mlp.shared_expert_gate.weight", "F16", [1, 128], struct.pack("<128e", *([0.5] * 128))),
               ("model.layers.0.mlp.experts.0.up_proj.weight", "F16", [64, 128],
                struct.pack("<8192e", *[((i * 37) % 17 - 8) / 16 for i in range(8192)]))]
    st.write_checkpoint(src, tensors, 1)
    for args in (["--format", "gptq", "--bits", "4", "--asym"], ["--format", "w4a16", "--asym"],
                 ["--format", "nvfp4"], ["--format", "fp8"]):
        out = os.path.join(tmp, "moe-out")
        rc, so, se = run("quantize", src, out, *args)
        name = " ".join(args)
        check(rc == 0, name + ": a MoE checkpoint with routers quantizes (got %d: %s)" % (rc, se.strip()[:200]))
        if rc != 0:
            continue
        t = tq.read_checkpoint(out)
        for router, n in (("model.layers.0.mlp.gate", 4), ("model.layers.0.mlp.shared_expert_gate", 1)):
            check(router + ".weight" in t and t[router + ".weight"][0] == "F16" and t[router + ".weight"][1] == [n, 128],
                  name + ": " + router + " kept in F16")
        check(any(k.startswith("model.layers.0.mlp.experts.0.up_proj.") and not k.endswith(".weight") for k in t),
              name + ": the expert is quantized")
        if args[1] != "gptq":
            with open(os.path.join(out, "config.json")) as f:
                q = json.load(f)["quantization_config"]
            skip = q.get("ignore", q.get("modules_to_not_convert", []))
            check("model.layers.0.mlp.gate" in skip and "model.layers.0.mlp.shared_expert_gate" in skip,
                  name + ": the routers are in the config's skip list (%s)" % skip)
        shutil.rmtree(out, ignore_errors=True)


# The fused checkpoint of test_fused_*: (module, N, K, amax scale) per linear layer, the shards of
# each engine-fused layer with different amax, q and gate in the first file, k, v and up in the
# second. The groups below are the engines' fused layers, written out here (not QTL's rule).
FUSED_LINEARS = [
    # file 1
    ("model.layers.0.self_attn.q_proj", 64, 64, 1.0),
    ("model.layers.0.self_attn.o_proj", 64, 64, 1.0),
    ("model.layers.0.mlp.gate_proj", 128, 64, 1.0),
    ("model.layers.0.mlp.down_proj", 64, 128, 1.0),
    ("model.layers.1.self_attn.q_a_proj", 32, 64, 1.0),
    ("model.layers.1.mlp.experts.0.gate_proj", 32, 64, 1.0),
    ("model.layers.1.mlp.experts.1.up_proj", 32, 64, 1.0),
    ("model.layers.2.block_sparse_moe.experts.0.w1", 32, 64, 1.0),
    # file 2
    ("model.layers.0.self_attn.k_proj", 32, 64, 1.25),   # k's amax 1.25x q's
    ("model.layers.0.self_attn.v_proj", 32, 64, 0.75),
    ("model.layers.0.mlp.up_proj", 128, 64, 1.5),
    ("model.layers.1.self_attn.kv_a_proj_with_mqa", 48, 64, 2.0),
    ("model.layers.1.mlp.experts.0.up_proj", 32, 64, 0.5),
    ("model.layers.1.mlp.experts.1.gate_proj", 32, 64, 3.0),
    ("model.layers.1.mlp.experts.0.down_proj", 64, 32, 1.0),
    ("model.layers.2.block_sparse_moe.experts.0.w3", 32, 64, 1.75),
    ("model.layers.2.block_sparse_moe.experts.0.w2", 64, 32, 1.0),
]
FUSED_GROUPS = [  # (the engine's fused layer, its shards in the engine's order)
    ("model.layers.0.self_attn.qkv_proj", ["model.layers.0.self_attn.%s_proj" % x for x in "qkv"]),
    ("model.layers.0.mlp.gate_up_proj", ["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"]),
    ("model.layers.1.self_attn.fused_qkv_a_proj",
     ["model.layers.1.self_attn.q_a_proj", "model.layers.1.self_attn.kv_a_proj_with_mqa"]),
    ("model.layers.1.mlp.experts.w13[0]",
     ["model.layers.1.mlp.experts.0.gate_proj", "model.layers.1.mlp.experts.0.up_proj"]),
    ("model.layers.1.mlp.experts.w13[1]",
     ["model.layers.1.mlp.experts.1.gate_proj", "model.layers.1.mlp.experts.1.up_proj"]),
    ("model.layers.2.block_sparse_moe.experts.w13[0]",
     ["model.layers.2.block_sparse_moe.experts.0.w1", "model.layers.2.block_sparse_moe.experts.0.w3"]),
]


def make_fused_checkpoint(folder, model_config=None):
    """The FUSED_LINEARS checkpoint (F16, two files, seeded), routers and embeddings beside; returns
    {module: weight values}."""
    rnd = random.Random(11)
    tensors, weights = [], {}
    for module, n, k, scale in FUSED_LINEARS:
        vals = [tq.f16(0.02 * scale * rnd.gauss(0, 1)) for _ in range(n * k)]
        vals[3] = tq.f16(0.1 * scale)  # the amax, planted: the ratios exact
        weights[module] = vals
        tensors.append((module + ".weight", "F16", [n, k], struct.pack("<%de" % (n * k), *vals)))
    for name, n in (("model.embed_tokens.weight", 64), ("model.layers.1.mlp.gate.weight", 2),
                    ("model.layers.2.block_sparse_moe.gate.weight", 1)):
        tensors.append((name, "F16", [n, 64], struct.pack("<%de" % (n * 64), *[0.01] * (n * 64))))
    order = tensors[:8] + tensors[-3:-1] + tensors[8:-3] + tensors[-1:]  # 10 + 10: q and k apart
    st.write_checkpoint(folder, order, 2)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(model_config or {"model_type": "llama"}, f)
    return weights


def fused_groups_of(mapping_has_gate_up=True):
    """FUSED_GROUPS, without the dense gate/up when the packed mapping does not fuse them."""
    return [g for g in FUSED_GROUPS if mapping_has_gate_up or g[0] != "model.layers.0.mlp.gate_up_proj"]


def ct_nvfp4_gs(amax):
    """compressed-tensors' NVFP4 global scale (generate_gparam; llm-compressor's fused groups take
    it of the max |x| over the group's shards): torch's 2688 / amax, fl(fl(1/amax) * 2688)."""
    return f32(f32(1.0 / amax) * 2688.0)


def test_fused_nvfp4(tmp, mapping_has_gate_up=True):
    """The engines' fused view of an NVFP4 checkpoint: vLLM and sglang load the shards of a fused
    layer concatenated along N and dequantize all of them with ONE global scale (linear layers:
    `weight_global_scale.max()`; MoE layers: the gate's, w13_weight_global_scale[:, 0]), so every
    shard's own dequantization must equal the fused one, bit for bit: one global scale per fused
    group, fl(fl(1/amax) * 2688) of the max amax over its shards, and the block scales computed
    from it (each shard within an E2M1 step of its weights). Without gate_up_proj in the input
    config.json's packed_modules_mapping the dense gate/up keep their own scales (experts' do not:
    the engines' MoE layers always fuse them)."""
    src = os.path.join(tmp, "fused-%d" % mapping_has_gate_up)
    mapping = {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}
    if mapping_has_gate_up:
        mapping["gate_up_proj"] = ["gate_proj", "up_proj"]
    weights = make_fused_checkpoint(src, {"model_type": "llama", "packed_modules_mapping": mapping})
    out = os.path.join(tmp, "fused-out-nvfp4")
    what = "nvfp4 fused (mapping %s)" % sorted(mapping)
    rc, so, se = run("quantize", src, out, "--format", "nvfp4", "--threads", 2)
    check(rc == 0, what + ": rc 0: " + se)
    if rc != 0:
        return
    t = tq.read_checkpoint(out)
    shapes = {m: (n, k) for m, n, k, _ in FUSED_LINEARS}

    def gs_of(m):
        return tq.f32s(t[m + ".weight_global_scale"][2])[0]

    def dequant(m, gs):
        n, k = shapes[m]
        packed, scales = t[m + ".weight_packed"][2], t[m + ".weight_scale"][2]
        return [f32(e2m1((packed[i // 2] >> (4 * (i % 2))) & 0xF) * tq.E4M3[scales[i // 16]] / gs)
                for i in range(n * k)]

    groups = fused_groups_of(mapping_has_gate_up)
    grouped = {m for _, shards in groups for m in shards}
    for module, _, _, _ in FUSED_LINEARS:  # a layer alone: its own amax
        if module not in grouped:
            want = ct_nvfp4_gs(max(abs(x) for x in weights[module]))
            check(gs_of(module) == want,
                  "%s: %s's global scale %r is its own amax's %r" % (what, module, gs_of(module), want))
    for fused, shards in groups:
        gss = [gs_of(m) for m in shards]
        want = ct_nvfp4_gs(max(abs(x) for m in shards for x in weights[m]))
        check(gss == [want] * len(shards),
              "%s: %s: one global scale, CT's of the max amax %r: %s" % (what, fused, want, gss))
        # the engine's view: the shards concatenated along N, dequantized with the max (linear) and
        # with the first shard's (MoE w13) global scale
        for engine_gs, rule in ((max(gss), "max"), (gss[0], "first shard's")):
            fused_view = [x for m in shards for x in dequant(m, engine_gs)]
            own = [x for m in shards for x in dequant(m, gs_of(m))]
            bad = sum(a != b for a, b in zip(fused_view, own))
            check(bad == 0, "%s: %s dequantized with the %s global scale differs from its shards' own "
                  "dequantization in %d of %d elements" % (what, fused, rule, bad, len(own)))
        for m in shards:  # the block scales follow the shared global scale
            n, k = shapes[m]
            d = dequant(m, gs_of(m))
            scales = t[m + ".weight_scale"][2]
            worst = max(abs(d[i] - x) / (tq.E4M3[scales[i // 16]] / gs_of(m) * 1.0001)
                        for i, x in enumerate(weights[m]))
            check(worst <= 1.0, "%s: %s within one E2M1 step of its weights (worst %.3f)" % (what, m, worst))
    with open(os.path.join(out, "config.json")) as f:
        check(json.load(f).get("packed_modules_mapping") == mapping, what + ": config.json keeps the mapping")
    shutil.rmtree(out, ignore_errors=True)


E4M3_POSITIVE = tq.E4M3[:127]  # codes 0..126, increasing; 127 is NaN


def e4m3_rne(x):
    """The E4M3 value of x, saturating at 448, round half to even (vLLM's fp8 cast)."""
    a = min(abs(x), 448.0)
    i = bisect.bisect_left(E4M3_POSITIVE, a)
    if i == len(E4M3_POSITIVE) or (i > 0 and (a - E4M3_POSITIVE[i - 1], (i - 1) & 1) < (E4M3_POSITIVE[i] - a, i & 1)):
        i -= 1
    return math.copysign(E4M3_POSITIVE[i], x)


def test_fused_fp8_tensor(tmp):
    """FP8 per-tensor: vLLM and sglang keep one scale per fused layer, the max, and requantize
    every shard with it at load (requantize_with_max_scale: q * s_i in fp16, then x * (1 / s_max)
    cast to E4M3), a second rounding wherever s_i < s_max. QTL writes one scale per fused group,
    amax / 448 of the max amax over its shards, so that requantization changes no code."""
    src = os.path.join(tmp, "fused-fp8")
    weights = make_fused_checkpoint(src)
    out = os.path.join(tmp, "fused-out-fp8")
    rc, so, se = run("quantize", src, out, "--format", "fp8", "--fp8-scheme", "tensor", "--threads", 2)
    check(rc == 0, "fp8 tensor fused: rc 0: " + se)
    if rc != 0:
        return
    t = tq.read_checkpoint(out)

    def scale_of(m):
        return tq.f32s(t[m + ".weight_scale"][2])[0]

    for fused, shards in FUSED_GROUPS:
        scales = [scale_of(m) for m in shards]
        want = f32(max(abs(x) for m in shards for x in weights[m]) / 448.0)
        check(scales == [want] * len(shards),
              "fp8 tensor: %s: one scale, max amax / 448 = %r: %s" % (fused, want, scales))
        s_max = max(scales)
        inv = f32(1.0 / s_max)
        changed = total = 0
        worst = 0.0
        for m, s in zip(shards, scales):
            codes = t[m + ".weight"][2]
            for i, c in enumerate(codes):
                q = tq.E4M3[c]
                requant = e4m3_rne(f32(tq.f16(f32(q * s)) * inv))
                changed += requant != q
                x = weights[m][i]
                worst = max(worst, abs(x - q * s) / (max(abs(x) * 2.0 ** -4, s * 2.0 ** -10) * 1.001))
            total += len(codes)
        check(changed == 0, "fp8 tensor: %s: the engine's requantization with the max scale changes %d of %d "
              "codes" % (fused, changed, total))
        check(worst <= 1.0, "fp8 tensor: %s: within half an e4m3 step of the weights (worst %.3f)" % (fused, worst))
    for module, _, _, _ in FUSED_LINEARS:
        if not any(module in shards for _, shards in FUSED_GROUPS):
            want = f32(max(abs(x) for x in weights[module]) / 448.0)
            check(scale_of(module) == want, "fp8 tensor: %s keeps its own scale %r" % (module, want))
    shutil.rmtree(out, ignore_errors=True)


def test_fused_nonfinite(tmp):
    """An infinite weight in one shard of a fused layer is refused naming that shard, not the
    partner whose shared scale it would make infinite (q_proj, before it in the run)."""
    src = os.path.join(tmp, "fused-inf")
    make_fused_checkpoint(src)
    fname = "model-00002-of-00002.safetensors"
    t, meta = st.read(os.path.join(src, fname))
    dt, shape, b = t["model.layers.0.self_attn.k_proj.weight"]
    t["model.layers.0.self_attn.k_proj.weight"] = (dt, shape, b[:2 * 70] + struct.pack("<e", math.inf) + b[2 * 71:])
    with open(os.path.join(src, fname), "wb") as f:
        f.write(st.build([(n, v[0], v[1], v[2]) for n, v in t.items()], meta))
    for fmt in (["nvfp4"], ["fp8", "--fp8-scheme", "tensor"]):
        out = os.path.join(tmp, "fused-inf-out")
        rc, so, se = run("quantize", src, out, "--format", *fmt, "--threads", 2)
        check(rc == 2 and "k_proj.weight: element [1, 6] is +Inf" in se and "q_proj" not in se,
              "%s: a +Inf in k_proj: exit 2 naming it (rc %d: %s)" % (" ".join(fmt), rc, se.strip()))
        check(not os.path.exists(out), " ".join(fmt) + ": no output for a refused input")


def main():
    def tests(tmp):
        test_pack(tmp, "w4a16", 4, 32, True)
        test_pack(tmp, "w4a16", 4, 64, False)
        test_pack(tmp, "w8a16", 8, -1, True)
        test_pack(tmp, "w8a16", 8, 32, False)
        test_fp4(tmp, "nvfp4")
        test_fp4(tmp, "mxfp4")
        test_ct_block(tmp)
        test_zero_blocks(tmp)
        test_refused(tmp)
        test_moe_router(tmp)
        test_fused_nvfp4(tmp)
        test_fused_nvfp4(tmp, mapping_has_gate_up=False)
        test_fused_fp8_tensor(tmp)
        test_fused_nonfinite(tmp)

    run_in_temp_dir("qtl-ct-test-", tests)


if __name__ == "__main__":
    main()
