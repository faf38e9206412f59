"""End-to-end tests of `qtl convert` on DeepSeek-V4's own checkpoint form (make_dsv4_checkpoint.py),
read back and checked independently here.

Usage: test_qtl_dsv4.py QTL

Standard library only: safetensors parsed with struct/json (safetensors_py), e4m3/e2m1/bf16 decoded
in Python (convert_py).
  1. --to fp8-ue8m0: every routed expert is F8_E4M3 [out, in] with F8_E8M0 [ceil(out/128),
     ceil(in/128)] scales under its own names, bytes equal to `qtl op cast-e2m1fn-to-e4m3fn`
     (golden-tested against sglang's function) on that expert alone, and every element decodes to
     exactly the MXFP4 input's value (lossless), block scale = largest 1x32 scale - 6; every other
     tensor byte for byte with its name, dtype and shape; config `expert_dtype: "fp8"`, the
     quantization_config kept; the side files copied; the shards and their index.
  2. --to bf16: every quantized weight (experts and FP8 blocks) BF16 [out, in] equal to its exact
     value, scales gone, the other tensors byte for byte; config without quantization_config and
     expert_dtype.
  3. Refusals (exit 2, a message naming what, no output folder): a block the cast cannot hold
     (named: tensor, block, element); V4-Flash-Base's form (expert_dtype "fp8"); V4.1's 32x32
     blocks; an expert without its scales; --to bf16 on a value bf16 cannot hold (an e4m3
     subnormal under a scale of 2^-127); --to mxfp4 and nvfp4 on a NaN code; and the flags that do
     not apply (exit 1).
  4. `qtl op cast-e2m1fn-to-e4m3fn` on a block it cannot cast losslessly: exit 2 naming the block,
     no output file.
  5. --to mxfp4 (the op comparisons on layer 0's weights): every FP8 weight I8 [out, in/2] with F8_E8M0 [out, in/32] scales under its own
     names, bytes equal to `qtl op fp8-block-to-mxfp4` (golden-tested against sglang's
     quantize_block_fp8_weight_to_mxfp4, on E8M0 scales too) on that weight with its scales
     decoded to F32 (2^(b-127)); the experts and everything else byte for byte; config unchanged.
  6. --to nvfp4: every FP8 weight U8 [out, in/2], F8_E4M3 [out, in/16] scales and an F32 [1]
     global_scale, bytes equal to `qtl op fp8-block-to-nvfp4` with that global scale; the shared
     experts' w1 and w3 share theirs, which is the op's on the two stacked, and an unfused layer's
     is the op's on it alone; the experts and the rest byte for byte.
  7. `qtl op deepgemm-post-process-e8m0` (vLLM's DeepGEMM packing of E8M0 scales, golden-tested)
     on every FP8 weight of layer 0 and on wo_a viewed as 2 matrices (--bmm-batch 2),
     against a packing written here; codes 0 and 255 and a bmm view that does not divide refused.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_dsv4_checkpoint as dsv4  # noqa: E402
import safetensors_py as st  # noqa: E402
from checks import check, run_in_temp_dir  # noqa: E402
from convert_py import E4M3, cdiv, e2m1_value  # noqa: E402

QTL = sys.argv[1]


def run(*args):
    p = subprocess.run([QTL] + [str(a) for a in args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def read_checkpoint(folder):
    """{name: (dtype, shape, bytes)} of a folder's shards, and {name: shard file} from its index."""
    names = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    tensors, where = {}, {}
    for f in names:
        t, _ = st.read(os.path.join(folder, f))
        for n in t:
            check(n not in tensors, "%s: %s written twice" % (folder, n))
            where[n] = f
        tensors.update(t)
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            check(json.load(f)["weight_map"] == where, "%s: the index maps every tensor to its shard" % folder)
    return tensors, where


def bf16_value(b, i):
    return struct.unpack("<f", struct.pack("<I", struct.unpack_from("<H", b, 2 * i)[0] << 16))[0]


def mxfp4_value(codes, scales, k, r, c):
    byte = codes[(r * k + c) // 2]
    return e2m1_value(byte >> (c % 2 * 4) & 15) * 2.0 ** (scales[r * (k // 32) + c // 32] - 127)


def fp8_value(q, s, k, r, c):
    return E4M3[q[r * k + c]] * 2.0 ** (s[(r // 128) * cdiv(k, 128) + c // 128] - 127)


def expert_names(tensors):
    return [n for n, (dt, _, _) in tensors.items() if dt == "I8"]


def check_fp8(tmp, src, out, ins):
    got, where = read_checkpoint(out)
    check(sorted(got) == sorted(ins), "fp8-ue8m0: the output has the input's tensor names")
    _, in_where = read_checkpoint(src)
    check(where == in_where, "fp8-ue8m0: every tensor stays in its shard")
    experts = expert_names(ins)
    check(len(experts) == 2 * dsv4.E * 3, "the checkpoint has %d MXFP4 experts" % (2 * dsv4.E * 3))
    for name in experts:
        scale = name[:-len(".weight")] + ".scale"
        _, (n, half), codes = ins[name]
        k = 2 * half
        sc = ins[scale][2]
        dt, shape, q = got[name]
        sdt, sshape, s = got[scale]
        check(dt == "F8_E4M3" and shape == [n, k], "%s: F8_E4M3 [%d, %d], got %s %s" % (name, n, k, dt, shape))
        check(sdt == "F8_E8M0" and sshape == [cdiv(n, 128), cdiv(k, 128)],
              "%s: F8_E8M0 block scales, got %s %s" % (scale, sdt, sshape))
        # the library op on this expert alone (its golden cases are sglang's output)
        op_in = os.path.join(tmp, "op_in.safetensors")
        op_out = os.path.join(tmp, "op_out.safetensors")
        with open(op_in, "wb") as f:
            f.write(st.build([("weight", "I8", [n, half], codes), ("scale", "F8_E8M0", [n, k // 32], sc)]))
        rc, _, err = run("op", "cast-e2m1fn-to-e4m3fn", op_in, op_out)
        check(rc == 0, "qtl op cast-e2m1fn-to-e4m3fn on %s: %s" % (name, err))
        if rc == 0:
            want, _ = st.read(op_out)
            check(want["weight"][2] == q and want["scale"][2] == s, "%s: bytes equal to qtl op's" % name)
        # lossless, and the block scale rule, decoded here
        bad = 0
        for bi in range(cdiv(n, 128)):
            for bj in range(cdiv(k, 128)):
                top = max(sc[r * (k // 32) + c // 32] for r in range(bi * 128, min(n, bi * 128 + 128))
                          for c in range(bj * 128, min(k, bj * 128 + 128), 32))
                bad += s[bi * cdiv(k, 128) + bj] != top - 6
        for r in range(n):
            for c in range(k):
                bad += fp8_value(q, s, k, r, c) != mxfp4_value(codes, sc, k, r, c)
        check(bad == 0, "%s: every element equals the MXFP4 value, every block scale its top / 2^6 (%d differ)"
              % (name, bad))
    for name, t in ins.items():
        if name in experts or name[:-len(".scale")] + ".weight" in experts:
            continue
        check(got.get(name) == t, "%s: copied byte for byte" % name)


def check_bf16(out, ins):
    got, _ = read_checkpoint(out)
    quantized = [n for n, (dt, _, _) in ins.items() if dt in ("I8", "F8_E4M3")]
    scales = [n[:-len(".weight")] + ".scale" for n in quantized]
    check(sorted(got) == sorted(n for n in ins if n not in scales), "bf16: the scales dropped, every name kept")
    for name in quantized:
        dt, shape, codes = ins[name]
        sc = ins[name[:-len(".weight")] + ".scale"][2]
        n = shape[0]
        k = shape[1] * (2 if dt == "I8" else 1)
        odt, oshape, b = got[name]
        check(odt == "BF16" and oshape == [n, k], "%s: BF16 [%d, %d], got %s %s" % (name, n, k, odt, oshape))
        value = mxfp4_value if dt == "I8" else fp8_value
        bad = sum(bf16_value(b, r * k + c) != value(codes, sc, k, r, c) for r in range(n) for c in range(k))
        check(bad == 0, "%s: every element exact in bf16 (%d differ)" % (name, bad))
    for name, t in ins.items():
        if name not in quantized and name not in scales:
            check(got.get(name) == t, "%s: copied byte for byte" % name)


def fp8_weights(tensors):
    return [n for n, (dt, _, _) in tensors.items() if dt == "F8_E4M3"]


def f32_scales(codes):
    """E8M0 codes as the F32 values they stand for, 2^(b-127) (exact; none is 255 here)."""
    return struct.pack("<%df" % len(codes), *(2.0 ** (b - 127) for b in codes))


def run_op(tmp, op, tensors, *flags):
    """`qtl op OP` on `tensors` ((name, dtype, shape, bytes)); the outputs, or None."""
    op_in = os.path.join(tmp, "op_in.safetensors")
    op_out = os.path.join(tmp, "op_out.safetensors")
    with open(op_in, "wb") as f:
        f.write(st.build(tensors))
    if os.path.exists(op_out):
        os.remove(op_out)
    rc, _, err = run("op", op, op_in, op_out, *flags)
    check(rc == 0, "qtl op %s: exit 0 (%s)" % (op, err.strip()))
    return st.read(op_out)[0] if rc == 0 else None


def check_fp4_targets(tmp, src, config, ins):
    fp8 = fp8_weights(ins)
    check(len(fp8) == 8 * dsv4.LAYERS, "the checkpoint has %d FP8 weights" % (8 * dsv4.LAYERS))
    for to in ("mxfp4", "nvfp4"):
        out = os.path.join(tmp, to)
        rc, sout, err = run("convert", src, out, "--to", to, "--threads", "2")
        check(rc == 0, "%s: exit 0 (%s)" % (to, err.strip()))
        if rc != 0:
            continue
        check("%d layers converted" % len(fp8) in sout, "%s: the summary counts the FP8 weights: %r" % (to, sout[-200:]))
        got, _ = read_checkpoint(out)
        with open(os.path.join(out, "config.json")) as f:
            check(json.load(f) == config, "%s: config unchanged" % to)
        extra = [n[:-len(".weight")] + ".global_scale" for n in fp8] if to == "nvfp4" else []
        check(sorted(got) == sorted(list(ins) + extra), "%s: the input's names%s" % (to, " and L.global_scale" if extra else ""))
        for name, t in ins.items():
            if name not in fp8 and name[:-len(".scale")] + ".weight" not in fp8:
                check(got.get(name) == t, "%s: %s copied byte for byte" % (to, name))
        globals_ = {}
        for name in fp8:
            if not name.startswith("layers.0."):  # the op on one layer's weights (each costs a process)
                continue
            module = name[:-len(".weight")]
            _, (n, k), q = ins[name]
            sc = ins[module + ".scale"][2]
            weight = [("weight", "F8_E4M3", [n, k], q),
                      ("weight_scale_inv", "F32", [cdiv(n, 128), cdiv(k, 128)], f32_scales(sc))]
            if to == "mxfp4":
                check(got[name][:2] == ("I8", [n, k // 2]) and got[module + ".scale"][:2] == ("F8_E8M0", [n, k // 32]),
                      "mxfp4: %s I8 [%d, %d] with F8_E8M0 [%d, %d] scales" % (name, n, k // 2, n, k // 32))
                want = run_op(tmp, "fp8-block-to-mxfp4", weight)
                if want is not None:
                    check(got[name][2] == want["weight"][2] and got[module + ".scale"][2] == want["weight_scale"][2],
                          "mxfp4: %s equals qtl op fp8-block-to-mxfp4 on its F32-decoded scales" % name)
                continue
            gs = got[module + ".global_scale"]
            check(got[name][:2] == ("U8", [n, k // 2]) and got[module + ".scale"][:2] == ("F8_E4M3", [n, k // 16])
                  and gs[:2] == ("F32", [1]), "nvfp4: %s U8 [%d, %d], F8_E4M3 [%d, %d], F32 [1]"
                  % (name, n, k // 2, n, k // 16))
            globals_[module] = gs[2]
            want = run_op(tmp, "fp8-block-to-nvfp4", weight + [("global_scale", "F32", [], gs[2])])
            if want is not None:
                check(got[name][2] == want["weight"][2] and got[module + ".scale"][2] == want["weight_scale"][2],
                      "nvfp4: %s equals qtl op fp8-block-to-nvfp4 with its global scale" % name)
        if to == "nvfp4":
            p = "layers.0."
            w1, w3 = (ins[p + "ffn.shared_experts.%s.weight" % w] for w in ("w1", "w3"))
            s1, s3 = (ins[p + "ffn.shared_experts.%s.scale" % w][2] for w in ("w1", "w3"))
            n, k = w1[1]
            both = run_op(tmp, "fp8-block-to-nvfp4",
                          [("weight", "F8_E4M3", [2, n, k], w1[2] + w3[2]),
                           ("weight_scale_inv", "F32", [2, cdiv(n, 128), cdiv(k, 128)], f32_scales(s1 + s3))])
            g1, g3 = globals_[p + "ffn.shared_experts.w1"], globals_[p + "ffn.shared_experts.w3"]
            check(g1 == g3 and both is not None and both["global_scale"][2] == g1,
                  "nvfp4: %sffn.shared_experts w1 and w3 share the global scale of the two stacked" % p)
            wo_b, s = ins[p + "attn.wo_b.weight"], ins[p + "attn.wo_b.scale"][2]
            alone = run_op(tmp, "fp8-block-to-nvfp4",
                           [("weight", "F8_E4M3", wo_b[1], wo_b[2]),
                            ("weight_scale_inv", "F32", [cdiv(wo_b[1][0], 128), cdiv(wo_b[1][1], 128)],
                             f32_scales(s))])
            check(alone is not None and alone["global_scale"][2] == globals_[p + "attn.wo_b"],
                  "nvfp4: %sattn.wo_b has its own global scale" % p)


def deepgemm_words(codes, groups, rows, kb):
    """DeepGEMM's packed storage [groups, P, A] of E8M0 codes [groups, ceil(rows/128), kb]:
    word (g, p, n) holds in byte t the code of block (n / 128, 4p + t), 0 past kb or rows."""
    P, A, nb = cdiv(kb, 4), cdiv(rows, 4) * 4, cdiv(rows, 128)
    words = []
    for g in range(groups):
        for p in range(P):
            for n in range(A):
                w = 0
                for t in range(4):
                    j = 4 * p + t
                    if n < rows and j < kb:
                        w |= codes[(g * nb + n // 128) * kb + j] << (8 * t)
                words.append(w)
    return struct.pack("<%dI" % len(words), *words)


def check_deepgemm(tmp, ins):
    for name in fp8_weights(ins):
        if not name.startswith("layers.0."):  # one layer's weights (each costs a process)
            continue
        _, (n, k), q = ins[name]
        sc = ins[name[:-len(".weight")] + ".scale"][2]
        tensors = [("weight", "F8_E4M3", [n, k], q), ("scale", "F8_E8M0", [cdiv(n, 128), cdiv(k, 128)], sc)]
        got = run_op(tmp, "deepgemm-post-process-e8m0", tensors)
        kb = cdiv(k, 128)
        if got is not None:
            check(got["weight"] == ("F8_E4M3", [n, k], q), "deepgemm: %s's weight unchanged" % name)
            check(got["scale"] == ("I32", [cdiv(kb, 4), cdiv(n, 4) * 4], deepgemm_words(sc, 1, n, kb)),
                  "deepgemm: %s's scales packed as DeepGEMM's layout" % name)
        if name.endswith("attn.wo_a.weight"):  # vLLM's is_bmm view of wo_a: 2 matrices [n/2, k]
            got = run_op(tmp, "deepgemm-post-process-e8m0", tensors, "--bmm-batch", "2")
            if got is not None:
                check(got["weight"] == ("F8_E4M3", [2, n // 2, k], q), "deepgemm: %s viewed [2, %d, %d]" % (name, n // 2, k))
                check(got["scale"] == ("I32", [2, cdiv(kb, 4), n // 2], deepgemm_words(sc, 2, n // 2, kb)),
                      "deepgemm: %s's scales packed as 2 matrices" % name)
            op_in = os.path.join(tmp, "op_in.safetensors")
            for flags, bad, needles in ((["--bmm-batch", "3"], sc, ["cannot be viewed as 3"]),
                                        ([], b"\x00" + sc[1:], ["scale 0", "E8M0 code 0"]),
                                        ([], sc[:-1] + b"\xff", ["scale %d" % (len(sc) - 1), "E8M0 code 255"])):
                with open(op_in, "wb") as f:
                    f.write(st.build([tensors[0], ("scale", "F8_E8M0", tensors[1][2], bad)]))
                op_out = os.path.join(tmp, "refused.safetensors")
                rc, _, err = run("op", "deepgemm-post-process-e8m0", op_in, op_out, *flags)
                check(rc == 2 and err.startswith("qtl: error: ") and all(s in err for s in needles)
                      and not os.path.exists(op_out),
                      "deepgemm %s: exit 2 naming %s, no output (%d: %s)" % (flags, needles, rc, err.strip()))


def refused(tmp, src, args, code, needles, what):
    out = os.path.join(tmp, "refused")
    rc, _, err = run("convert", src, out, *args)
    check(rc == code, "%s: exit %d, got %d (%s)" % (what, code, rc, err.strip()))
    check(err.startswith("qtl: error: "), "%s: the message follows 'qtl: error: ': %r" % (what, err))
    for n in needles:
        check(n in err, "%s: the message names %r: %r" % (what, n, err.strip()))
    check(not os.path.exists(out), "%s: no output folder" % what)
    check(not [f for f in os.listdir(tmp) if f.startswith("refused") or f.startswith(".refused")],
          "%s: nothing staged left beside it" % what)


def body(tmp):
    src = os.path.join(tmp, "dsv4")
    config = dsv4.make(src)
    ins, _ = read_checkpoint(src)

    # 1. --to fp8-ue8m0
    out = os.path.join(tmp, "fp8")
    rc, sout, err = run("convert", src, out, "--to", "fp8-ue8m0", "--threads", "2")
    check(rc == 0, "fp8-ue8m0: exit 0 (%s)" % err.strip())
    check("24 layers converted" in sout, "fp8-ue8m0: the summary counts the 24 experts: %r" % sout[-200:])
    if rc == 0:
        check_fp8(tmp, src, out, ins)
        with open(os.path.join(out, "config.json")) as f:
            got = json.load(f)
        want = dict(config, expert_dtype="fp8")
        check(got == want, "fp8-ue8m0: config expert_dtype 'fp8', the rest as it was: %s" % got)
        with open(os.path.join(out, "tokenizer_config.json")) as f, \
                open(os.path.join(src, "tokenizer_config.json")) as g:
            check(f.read() == g.read(), "fp8-ue8m0: the side files copied")

    # 2. --to bf16
    out = os.path.join(tmp, "bf16")
    rc, _, err = run("convert", src, out, "--to", "bf16")
    check(rc == 0, "bf16: exit 0 (%s)" % err.strip())
    if rc == 0:
        check_bf16(out, ins)
        with open(os.path.join(out, "config.json")) as f:
            got = json.load(f)
        want = {k: v for k, v in config.items() if k not in ("quantization_config", "expert_dtype")}
        check(got == want, "bf16: config without quantization_config and expert_dtype: %s" % got)

    # 3. refusals
    bad = os.path.join(tmp, "inexact")
    dsv4.make(bad, inexact=True)
    tensor, row, col, low, top = dsv4.INEXACT
    for to in ("fp8-ue8m0",):
        refused(tmp, bad, ["--to", to], 2,
                [tensor, "block (1, 0)", "element (%d, %d)" % (row, col), "2^%d" % (low - 127),
                 "2^%d" % (top - 127)], "an inexact block --to " + to)
    base = os.path.join(tmp, "base")
    dsv4.make(base, variant="flash-base")
    refused(tmp, base, ["--to", "fp8-ue8m0"], 2, ["expert_dtype", '"fp8"', "Flash-Base"], "V4-Flash-Base")
    v41 = os.path.join(tmp, "v41")
    dsv4.make(v41, variant="v4.1")
    refused(tmp, v41, ["--to", "bf16"], 2, ["weight_block_size", "[32,32]", "V4.1"], "V4.1")
    refused(tmp, src, ["--to", "mxfp4", "--allow-nonfinite"], 1, ["--allow-nonfinite"],
            "--allow-nonfinite --to mxfp4 on DeepSeek-V4's form")
    refused(tmp, src, ["--to", "fp8-ue8m0", "--recipe", "vllm"], 1, ["--recipe"], "--recipe on DeepSeek-V4's form")
    refused(tmp, src, ["--to", "fp8-ue8m0", "--allow-nonfinite"], 1, ["--allow-nonfinite"],
            "--allow-nonfinite --to fp8-ue8m0 on DeepSeek-V4's form")
    # an expert without its scales, and a scale of the wrong shape
    t, _ = read_checkpoint(src)
    broken = os.path.join(tmp, "broken")
    st.write_checkpoint(broken, [(n,) + v for n, v in t.items() if n != "layers.0.ffn.experts.1.w3.scale"], 1)
    with open(os.path.join(broken, "config.json"), "w") as f:
        json.dump(config, f)
    refused(tmp, broken, ["--to", "fp8-ue8m0"], 2, ["layers.0.ffn.experts.1.w3.weight", ".scale"],
            "an expert without its scales")

    # a scale of 2^-127 puts wq_a's e4m3 subnormals below bf16's least subnormal: bf16 refuses,
    # fp8-ue8m0 copies it
    tiny = os.path.join(tmp, "tiny")
    st.write_checkpoint(tiny, [(n,) + ((v[0], v[1], b"\x00" + v[2][1:]) if n == "layers.0.attn.wq_a.scale" else v)
                               for n, v in t.items()], 2)
    with open(os.path.join(tiny, "config.json"), "w") as f:
        json.dump(config, f)
    refused(tmp, tiny, ["--to", "bf16"], 2, ["layers.0.attn.wq_a.weight", "is not a bf16 value"],
            "--to bf16 on a value below bf16's range")
    rc, _, err = run("convert", tiny, os.path.join(tmp, "tiny_fp8"), "--to", "fp8-ue8m0")
    check(rc == 0, "fp8-ue8m0 copies the FP8 weight whose scale is 2^-127 (%s)" % err.strip())

    # the edges of bf16's range, under which --to bf16 checks no element: expert scale codes 0 and
    # 252 and FP8 block codes 3 and 246 convert exactly (every element checked here); an expert code
    # 253 over a 6 and an FP8 code 247 over a 448 are beyond bf16's range and refused
    def edited(folder, changes):
        st.write_checkpoint(folder, [(n,) + ((v[0], v[1], changes[n](v[2])) if n in changes else v)
                                     for n, v in t.items()], 2)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        return folder

    expert, fp8w = "layers.0.ffn.experts.1.w2", "layers.0.attn.wo_b"
    edges = edited(os.path.join(tmp, "edges"), {expert + ".scale": lambda b: bytes([0, 252]) + b[2:],
                                                fp8w + ".scale": lambda b: bytes([3, 246, 3, 246])})
    out = os.path.join(tmp, "edges_bf16")
    rc, _, err = run("convert", edges, out, "--to", "bf16")
    check(rc == 0, "bf16 at the edges of its range: exit 0 (%s)" % err.strip())
    if rc == 0:
        check_bf16(out, read_checkpoint(edges)[0])
    for name, changes, needles in (
            (expert, {expert + ".scale": lambda b: bytes([253]) + b[1:], expert + ".weight": lambda b: b"\x07" + b[1:]},
             ["element (0, 0)", "beyond bf16's range"]),
            (fp8w, {fp8w + ".scale": lambda b: bytes([247]) + b[1:], fp8w + ".weight": lambda b: b"\x7e" + b[1:]},
             ["block (0, 0, 0)", "dequantizes to NaN or Inf"])):
        over = edited(os.path.join(tmp, "over"), changes)
        refused(tmp, over, ["--to", "bf16"], 2, [name + ".weight"] + needles,
                "--to bf16 on %s beyond bf16's range" % name)
        shutil.rmtree(over)

    # a NaN code in an FP8 weight: MXFP4 and NVFP4 cannot encode it
    nan = os.path.join(tmp, "nan")
    st.write_checkpoint(nan, [(n,) + ((v[0], v[1], b"\x7f" + v[2][1:]) if n == "layers.1.attn.wo_b.weight" else v)
                              for n, v in t.items()], 2)
    with open(os.path.join(nan, "config.json"), "w") as f:
        json.dump(config, f)
    for to in ("mxfp4", "nvfp4", "bf16"):
        refused(tmp, nan, ["--to", to], 2, ["layers.1.attn.wo_b.weight", "NaN"], "--to %s on a NaN code" % to)
    nan_last = edited(os.path.join(tmp, "nan_last"), {"layers.1.attn.wq_b.weight": lambda b: b[:-1] + b"\xff"})
    refused(tmp, nan_last, ["--to", "bf16"], 2, ["layers.1.attn.wq_b.weight", "NaN"], "--to bf16 on a last NaN code")

    # 5. --to mxfp4, 6. --to nvfp4, 7. the DeepGEMM packing of the E8M0 scales
    check_fp4_targets(tmp, src, config, ins)
    check_deepgemm(tmp, ins)

    # 4. qtl op on a block it cannot cast losslessly
    op_in = os.path.join(tmp, "op_bad.safetensors")
    op_out = os.path.join(tmp, "op_bad_out.safetensors")
    scales = bytearray([120] * (256 * 8))
    scales[200 * 8 + 5] = 120 - 15  # row 200, columns 160..191: block (1, 1)
    codes = bytearray(256 * 128)
    codes[200 * 128 + 5 * 16] = 0x10  # element (200, 161): e2m1 0.5, 2^15 below the block's top
    with open(op_in, "wb") as f:
        f.write(st.build([("weight", "I8", [256, 128], bytes(codes)), ("scale", "F8_E8M0", [256, 8], bytes(scales))]))
    rc, _, err = run("op", "cast-e2m1fn-to-e4m3fn", op_in, op_out)
    check(rc == 2, "qtl op on an inexact block: exit 2, got %d (%s)" % (rc, err.strip()))
    for n in ("block (1, 1)", "rows 128..255, columns 128..255", "element (200, 161)"):
        check(n in err, "qtl op on an inexact block: the message names %r: %r" % (n, err.strip()))
    check(not os.path.exists(op_out), "qtl op on an inexact block: no output file")
    codes[200 * 128 + 5 * 16] = 0  # the same scales with that element zero: exact
    with open(op_in, "wb") as f:
        f.write(st.build([("weight", "I8", [256, 128], bytes(codes)), ("scale", "F8_E8M0", [256, 8], bytes(scales))]))
    rc, _, err = run("op", "cast-e2m1fn-to-e4m3fn", op_in, op_out)
    check(rc == 0 and os.path.exists(op_out), "qtl op: the same block with that element zero casts (%s)" % err)


if __name__ == "__main__":
    run_in_temp_dir("qtl_dsv4_test_", body)
