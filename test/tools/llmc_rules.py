"""`qtl quantize` against llm-compressor's `model_free_ptq` (0.14.0.1, compressed-tensors 0.19.0):
which bytes are equal and, where they differ, the exact relation between the two
(docs/spec/checkpoint_formats.md, "llm-compressor's bytes"). Standard library only: used by
test_qtl_llmc.py in CI on recorded outputs and by test/interop/producers/compare_llmcompressor.py
on a live run.

The differences, each a rule of compressed-tensors evaluated in the weight's dtype: its observers
keep the min/max in bf16, so torch computes `2688 / amax` (as amax.reciprocal() * 2688),
`amax / 6` and `amax / 448` in bf16 (each rounded to bf16), and FP8's scale stays bf16, so x / s
is rounded to bf16 before the cast to E4M3. QTL computes the same rules in float32 and multiplies
by the reciprocal as vLLM's and sglang's kernels do.
"""
import json
import math
import os
import struct

import safetensors_py as st

# model_free_ptq quantizes every 2-D `.weight` not in `ignore` (names ending in "norm" excepted),
# embeddings included; qtl quantizes the linear layers and keeps lm_head. The same layers:
IGNORE = ["lm_head", "model.embed_tokens"]

SCHEMES = {
    "W4A16": ["--format", "w4a16"],
    "W4A16_ASYM": ["--format", "w4a16", "--asym"],
    "W8A16": ["--format", "w8a16"],
    "NVFP4A16": ["--format", "nvfp4"],
    "MXFP4A16": ["--format", "mxfp4"],
    "FP8_BLOCK": ["--format", "fp8", "--fp8-scheme", "ct-block"],
    "FP8_DYNAMIC": ["--format", "fp8", "--fp8-scheme", "channel"],
}

# The recipe test_qtl_recipe.py compares with llm-compressor's model_free_ptq given the same config
# groups (make_llmc_cases.py records RECIPE.*): (group name, targets, llm-compressor preset, the qtl
# recipe group's format and options). The regexes also match vLLM's fused names.
RECIPE = [
    ("attention", ["re:.*self_attn\\.(q|k|v|o|qkv)_proj$"], "FP8_BLOCK", {"format": "fp8", "fp8_scheme": "ct-block"}),
    ("gate_up", ["re:.*mlp\\.(gate|up|gate_up)_proj$"], "NVFP4A16", {"format": "nvfp4"}),
    ("down", ["re:.*mlp\\.down_proj$"], "W4A16", {"format": "w4a16"}),
]

# quantization_config keys where the two differ, and why (none changes what an engine loads).
# A path is config key names joined by "."; the scheme's group is "group" (theirs is named after
# the preset, ours "group_0").
KNOWN_CONFIG = {
    "version": "compressed-tensors' version; qtl is not compressed-tensors and writes none",
    "transform_config": "llm-compressor writes {} (no transforms); qtl omits it",
    "global_compression_ratio": "null in llm-compressor's; omitted by qtl",
    "kv_cache_scheme": "null in llm-compressor's; omitted by qtl",
    "group.weights.*": "QuantizationArgs defaults written as null/{} by llm-compressor, omitted by qtl",
    "group.input_activations.*": "as group.weights.*",
    "group.weights.zp_dtype": "W4A16_ASYM: llm-compressor records torch.int8; the packed zero point "
                              "is I32 in both, and the engines read num_bits/type/strategy only",
    "group.weights.scale_dtype": "NVFP4A16: llm-compressor records torch.float8_e4m3fn; the scale "
                                 "tensor is F8_E4M3 in both",
    "ignore": "llm-compressor is told to ignore model.embed_tokens too (model-free, it would quantize it)",
}

# llm-compressor's roundings: a bf16 result (torch computes in float32 and rounds); QTL's: float32.
E2M1_UP = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]  # the midpoints between E2M1's values
E2M1_TIE_UP = [False, True, False, True, False, True, False]  # a tie goes to the even code


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bf16(x):
    """float32 x rounded to bf16 (round half to even), as a float."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", u))[0]


def in_f32(x):
    return f32(x)


def in_bf16(x):
    return bf16(f32(x))


def values(entry):
    """The floats of a BF16/F16/F32 tensor entry (dtype, shape, bytes)."""
    dt, _, raw = entry
    if dt == "BF16":
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    return list(struct.unpack("<%d%s" % (len(raw) // (2 if dt == "F16" else 4), "e" if dt == "F16" else "f"), raw))


def e4m3_byte(x):
    """The E4M3 byte of x: round half to even, saturating at 448 (compressed-tensors clamps to +-448
    before torch's cast; QTL saturates), the sign of x kept (-0 is 0x80)."""
    a = min(abs(x), 448.0)
    if a < 2.0 ** -6:
        code = round(a * 512)  # subnormals, step 2^-9; 8 is the first normal
    else:
        m, e = math.frexp(a)  # a = m * 2^e, m in [0.5, 1)
        code = ((e - 1 + 7) << 3) + round((m * 2 - 1) * 8)  # a mantissa of 8 carries into the exponent
    return code | (0x80 if math.copysign(1.0, x) < 0 else 0)


def e4m3_value(code):
    e, m = (code >> 3) & 15, code & 7
    v = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if code & 0x80 else v


def e2m1_code(q):
    """The E2M1 code of q: round half to even on the code, saturating at 6, sign bit from q's sign
    (compressed-tensors' signbit: a negative value that rounds to 0 is code 8)."""
    a = abs(q)
    c = 0
    while c < 7 and (a > E2M1_UP[c] or (a == E2M1_UP[c] and E2M1_TIE_UP[c])):
        c += 1
    return c | (8 if math.copysign(1.0, q) < 0 else 0)


def nvfp4(x, n, k, amax, rnd, divide):
    """NVFP4 (tensor_group, 16) of row-major x [n, k] given its fused group's amax: (global scale,
    E4M3 scale bytes, packed code bytes). rnd rounds 1/amax, the global scale and amax_b/6 (in_bf16:
    llm-compressor, in_f32: QTL); divide: codes of x / (s / g) (compressed-tensors) rather than
    x * (1 / (s * (1 / g))) (QTL, the engines' reference)."""
    g = rnd(rnd(1.0 / amax) * 2688.0)
    scales, codes = bytearray(), []
    for r in range(n):
        for b in range(0, k, 16):
            block = x[r * k + b:r * k + b + 16]
            code = e4m3_byte(f32(g * rnd(max(abs(v) for v in block) / 6.0))) or 0x20  # 0 becomes 0.125
            scales.append(code)
            s = e4m3_value(code)
            if divide:
                step = f32(s / g)
                codes += [e2m1_code(f32(v / step)) for v in block]
            else:
                inv = f32(1.0 / f32(s * f32(1.0 / g)))
                codes += [e2m1_code(f32(v * inv)) for v in block]
    packed = bytes(codes[i] | (codes[i + 1] << 4) for i in range(0, len(codes), 2))
    return g, bytes(scales), packed


def fp8_codes(x, n, k, scale_of, rnd, divide):
    """E4M3 bytes of x [n, k] with scale_of(r, c): e4m3(rnd(x / s)) (divide) or e4m3(x * (1/s))."""
    out = bytearray()
    for r in range(n):
        for c in range(k):
            s = scale_of(r, c)
            out.append(e4m3_byte(rnd(x[r * k + c] / s) if divide else f32(x[r * k + c] * f32(1.0 / s))))
    return bytes(out)


def read_folder(folder):
    """{name: (dtype, shape, bytes)} of every *.safetensors file in folder."""
    out = {}
    for fn in sorted(os.listdir(folder)):
        if fn.endswith(".safetensors"):
            out.update(st.read(os.path.join(folder, fn))[0])
    return out


def fused_amax(inp, module):
    """The amax over module's fused group (q/k/v, gate/up: what both tools share a global scale over)."""
    parent, leaf = module.rsplit(".", 1)
    group = next((g for g in (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")) if leaf in g), (leaf,))
    return max(abs(v) for m in group for v in values(inp[parent + "." + m + ".weight"]))


def check_nvfp4(inp, ours, theirs, module, fail):
    """Both outputs of one NVFP4 layer are the one rule at their rounding points; returns the number
    of differing codes."""
    x = values(inp[module + ".weight"])
    n, k = inp[module + ".weight"][1]
    amax = fused_amax(inp, module)
    for who, got, rnd, divide in (("llm-compressor", theirs, in_bf16, True), ("qtl", ours, in_f32, False)):
        g, scales, packed = nvfp4(x, n, k, amax, rnd, divide)
        if got[module + ".weight_global_scale"] != ("F32", [1], struct.pack("<f", g)):
            fail("%s %s: weight_global_scale is not fl(fl(1/amax) * 2688) rounded at %s" % (who, module, rnd.__name__))
        if got[module + ".weight_scale"][2] != scales:
            fail("%s %s: weight_scale is not e4m3(g * %s(amax_b / 6))" % (who, module, rnd.__name__))
        if got[module + ".weight_packed"][2] != packed:
            fail("%s %s: weight_packed is not e2m1 of x %s" % (who, module, "/ (s / g)" if divide else "* (1 / (s * (1/g)))"))
    a, b = ours[module + ".weight_packed"][2], theirs[module + ".weight_packed"][2]
    return sum((u & 15) != (v & 15) for u, v in zip(a, b)) + sum((u >> 4) != (v >> 4) for u, v in zip(a, b))


def check_fp8(inp, ours, theirs, module, block, fail):
    """llm-compressor's FP8 scale is QTL's rounded to bf16 (stored BF16); its codes e4m3(bf16(x / s))
    with that scale, QTL's e4m3(x * (1/s)) with its own; returns the number of differing codes."""
    x = values(inp[module + ".weight"])
    n, k = inp[module + ".weight"][1]
    so, sn = ours[module + ".weight_scale"], theirs[module + ".weight_scale"]
    if so[0] != "F32" or sn[0] != "BF16" or so[1] != sn[1]:
        fail("%s: weight_scale qtl %s%s, llm-compressor %s%s (want F32 and BF16)" % (module, so[0], so[1], sn[0], sn[1]))
        return 0
    vo, vt = values(so), values(sn)
    if [bf16(v) for v in vo] != vt:
        fail("%s: llm-compressor's weight_scale is not qtl's rounded to bf16" % module)
    cols = so[1][1]

    def at(vals):
        if block:
            return lambda r, c: vals[(r // block) * cols + c // block]
        return lambda r, c: vals[r]
    if theirs[module + ".weight"][2] != fp8_codes(x, n, k, at(vt), in_bf16, True):
        fail("%s: llm-compressor's codes are not e4m3(bf16(x / s))" % module)
    if ours[module + ".weight"][2] != fp8_codes(x, n, k, at(vo), in_f32, False):
        fail("%s: qtl's codes are not e4m3(x * (1 / s))" % module)
    return sum(u != v for u, v in zip(ours[module + ".weight"][2], theirs[module + ".weight"][2]))


def config_differences(ours, theirs, path=""):
    """[(path, ours, theirs)] where two quantization_config values differ; the single config group
    of each compared as "group"."""
    if path == "" and "config_groups" in ours and "config_groups" in theirs:
        ours, theirs = dict(ours), dict(theirs)
        for d in (ours, theirs):
            groups = d.pop("config_groups")
            d["group"] = next(iter(groups.values())) if len(groups) == 1 else groups
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for key in sorted(set(ours) | set(theirs)):
            out += config_differences(ours.get(key, "<absent>"), theirs.get(key, "<absent>"),
                                      (path + "." if path else "") + key)
        return out
    return [] if ours == theirs else [(path, ours, theirs)]


def known_config(path, o, t):
    """The KNOWN_CONFIG reason of a config difference, or None."""
    if path in ("group.weights.zp_dtype", "group.weights.scale_dtype") and o == "<absent>":
        return KNOWN_CONFIG[path]
    if path == "ignore":
        return KNOWN_CONFIG[path] if t == o + [x for x in IGNORE if x not in o] else None
    if path == "version":
        return KNOWN_CONFIG[path] if o == "<absent>" and isinstance(t, str) else None
    if o == "<absent>" and t in (None, {}):
        for key in (path, path.rsplit(".", 1)[0] + ".*"):
            if key in KNOWN_CONFIG:
                return KNOWN_CONFIG[key]
    return None


def compare(scheme, inp, ours, theirs, ours_qc, theirs_qc):
    """Compares the outputs of one scheme: (equal tensor count, notes, failures). Every tensor must
    be equal but the known differences of NVFP4A16 and FP8, each of which must hold its relation."""
    failures, notes = [], []
    fail = failures.append
    if set(ours) != set(theirs):
        fail("tensor names: only qtl %s, only llm-compressor %s" % (sorted(set(ours) - set(theirs))[:4],
                                                                   sorted(set(theirs) - set(ours))[:4]))
    common = sorted(set(ours) & set(theirs))
    equal = [n for n in common if ours[n] == theirs[n]]
    differ = [n for n in common if ours[n] != theirs[n]]
    if scheme == "NVFP4A16":
        related = (".weight_global_scale", ".weight_scale", ".weight_packed")
        modules = sorted(n[:-len(".weight_global_scale")] for n in common if n.endswith(".weight_global_scale"))
        moved = sum(check_nvfp4(inp, ours, theirs, m, fail) for m in modules)
        gs = sum(ours[m + ".weight_global_scale"] != theirs[m + ".weight_global_scale"] for m in modules)
        notes.append("%d of %d global scales differ, %d codes" % (gs, len(modules), moved))
        if not gs:
            fail("no NVFP4 global scale differs: the known difference is gone (update the docs)")
    elif scheme.startswith("FP8"):
        related = (".weight", ".weight_scale")
        modules = sorted(n[:-len(".weight_scale")] for n in common if n.endswith(".weight_scale"))
        moved = sum(check_fp8(inp, ours, theirs, m, 128 if scheme == "FP8_BLOCK" else 0, fail) for m in modules)
        notes.append("scales BF16 = bf16(qtl's F32) in %d layers, %d codes differ" % (len(modules), moved))
        if not moved:
            fail("no FP8 code differs: the known difference is gone (update the docs)")
    else:
        related, modules = (), []
    for n in differ:
        if not (n.endswith(related) and n.rsplit(".", 1)[0] in modules):
            fail("%s differs (qtl %s%s, llm-compressor %s%s)" % (n, ours[n][0], ours[n][1], theirs[n][0], theirs[n][1]))
    for path, o, t in config_differences(ours_qc, theirs_qc):
        if known_config(path, o, t) is None:
            fail("quantization_config.%s: qtl %s, llm-compressor %s" % (path, json.dumps(o), json.dumps(t)))
    return len(equal), notes, failures
