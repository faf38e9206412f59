#!/usr/bin/env python3
"""The qtl tool's command line: exit codes, --help everywhere, inspect, and dtype round trips.

    test_qtl_cli.py QTL GOLDEN_OPS_DIR

Exit codes: 0 success; 1 command line (unknown subcommand or op, missing or malformed
flag, a value outside an enumeration); 2 files and data (unreadable or hostile file, missing or
wrongly typed tensor, shapes the op cannot take).
Prints a summary; exits 1 if any check fails.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_py import DTYPE_SIZE, build, read  # noqa: E402
from checks import check, finish  # noqa: E402



def run(qtl, *args):
    return subprocess.run([qtl] + list(args), capture_output=True, text=True, errors="replace")


def expect(qtl, code, args, fragment=None):
    r = run(qtl, *args)
    label = "qtl " + " ".join(args)
    check(r.returncode == code, "%s: exit %d, want %d (%s)" % (label, r.returncode, code, r.stderr.strip()))
    if fragment is not None:
        check(re.search(fragment, r.stdout + r.stderr) is not None,
              "%s: output lacks %r: %s" % (label, fragment, (r.stdout + r.stderr).strip()[:300]))
    return r


def ops_list(qtl):
    r = run(qtl, "op", "--help")
    body = r.stdout.split("Subcommands:", 1)[1]
    # (a long name's description wraps onto a deeper-indented line, which is no op)
    return [line.split()[0] for line in body.splitlines()
            if line.startswith("  ") and not line.startswith("   ") and line.split()]


def main():
    qtl, golden = sys.argv[1], sys.argv[2]
    pack_in = os.path.join(golden, "0000-pack-cols.in.safetensors")   # q_w I32 [16,16] 2-bit codes
    quant_in = os.path.join(golden, "0036-quantize-weights.in.safetensors")  # w F16 [16,16]
    with tempfile.TemporaryDirectory(prefix="qtl_cli_") as tmp:
        out = os.path.join(tmp, "out.safetensors")

        # --help on everything ---------------------------------------------------------------
        ops = ops_list(qtl)
        check(len(ops) >= 13, "qtl op --help lists %d ops" % len(ops))
        expect(qtl, 0, ["--help"], "inspect")
        expect(qtl, 0, ["--version"], r"qtl \d")
        expect(qtl, 0, ["inspect", "--help"], "--json")
        expect(qtl, 0, ["op", "--help"], "pack-cols")
        for op in ops:
            expect(qtl, 0, ["op", op, "--help"], "IN")

        # 0 ----------------------------------------------------------------------------------
        expect(qtl, 0, ["op", "pack-cols", "--bits", "2", pack_in, out])
        expect(qtl, 0, ["inspect", pack_in, out])

        # 1: the command line -----------------------------------------------------------------
        expect(qtl, 1, [], "subcommand")
        expect(qtl, 1, ["frobnicate"], "unknown subcommand 'frobnicate'")
        expect(qtl, 1, ["op"], "subcommand")
        expect(qtl, 1, ["op", "no-such-op", pack_in, out], "unknown op 'no-such-op'")
        expect(qtl, 1, ["op", "pack-cols", pack_in, out], "--bits")                   # missing flag
        expect(qtl, 1, ["op", "pack-cols", "--bits", "3", pack_in, out], "--bits")    # enumeration
        expect(qtl, 1, ["op", "pack-cols", "--bits", "four", pack_in, out], "--bits")  # malformed
        expect(qtl, 1, ["op", "pack-cols", "--bits", "4", pack_in], "OUT")             # missing OUT
        expect(qtl, 1, ["op", "pack-cols", "--bits", "4", "--frob", pack_in, out], "frob")
        expect(qtl, 1, ["op", "--device", "cpu", "pack-cols", "--bits", "4", pack_in, out], "device")  # no CUDA path yet
        expect(qtl, 1, ["op", "pack-cols", "--bits", "2", "--device", "cpu", pack_in, out], "device")
        expect(qtl, 1, ["op", "scaled-fp8-quant", "--per-token", "--scale", "1", quant_in, out],
               "excludes")
        expect(qtl, 1, ["op", "unswizzle-blockscale", "--rows", "-1", "--cols", "4", pack_in, out])
        expect(qtl, 1, ["op", "requantize-with-max-scale", "--logical-widths", "1,x", pack_in, out],
               "--logical-widths")
        gptq_in = os.path.join(golden, "0096-gptq-quantize-weights.in.safetensors")  # w, perm
        expect(qtl, 1, ["op", "gptq-quantize-weights", "--type", "uint4b8", "--group-size", "-1",
                        "--act-order", gptq_in, out], "act-order")
        expect(qtl, 1, ["op", "gptq-quantize-weights", "--type", "uint4", "--group-size", "32",
                        gptq_in, out], "--type")
        expect(qtl, 1, ["op", "gptq-quantize-weights", "--type", "uint4b8", "--group-size", "32",
                        "--seed", "1", gptq_in, out], "act-order")            # --seed needs it
        expect(qtl, 1, ["op", "quantize-weights", "--type", "int3", "--group-size", "32", quant_in, out],
               "--type")
        expect(qtl, 1, ["op", "quantize-weights", "--type", "int4", "--group-size", "0", quant_in, out],
               "--group-size")
        expect(qtl, 1, ["op", "quantize-weights", "--type", "int4", "--group-size", "some", quant_in, out],
               "--group-size")
        expect(qtl, 1, ["inspect"], "FILE")
        expect(qtl, 1, ["inspect", "--frob", pack_in])

        # 2: files and data -------------------------------------------------------------------
        missing = os.path.join(tmp, "missing.safetensors")
        expect(qtl, 2, ["op", "pack-cols", "--bits", "4", missing, out], "missing.safetensors: cannot open")
        expect(qtl, 2, ["inspect", missing], "missing.safetensors")
        expect(qtl, 2, ["op", "pack-cols", "--bits", "4", quant_in, out], "no tensor 'q_w'")
        wrong = os.path.join(tmp, "wrong.safetensors")
        with open(wrong, "wb") as f:
            f.write(build([("q_w", "F32", [2, 8], bytes(64))]))
        expect(qtl, 2, ["op", "pack-cols", "--bits", "4", wrong, out], "'q_w' has dtype F32")
        odd = os.path.join(tmp, "odd.safetensors")
        with open(odd, "wb") as f:
            f.write(build([("q_w", "I32", [2, 5], bytes(40))]))
        expect(qtl, 2, ["op", "pack-cols", "--bits", "4", odd, out])                   # N % 8 != 0
        rank1 = os.path.join(tmp, "rank1.safetensors")
        with open(rank1, "wb") as f:
            f.write(build([("q_w", "I32", [8], bytes(32))]))
        expect(qtl, 2, ["op", "pack-cols", "--bits", "4", rank1, out], "dimensions")
        big = os.path.join(tmp, "big.safetensors")
        with open(big, "wb") as f:
            f.write(build([("q_w", "I32", [1, 8], struct.pack("<8i", 0, 1, 2, 3, 4, 5, 6, 16))]))
        expect(qtl, 2, ["op", "pack-cols", "--bits", "4", big, out], "16")             # code > 15
        expect(qtl, 2, ["op", "gptq-quantize-weights", "--type", "uint4b8", "--group-size", "32",
                        gptq_in, out], "perm' is given without --act-order")
        expect(qtl, 2, ["op", "gptq-quantize-weights", "--type", "uint4b8", "--group-size", "32",
                        "--act-order", quant_in, out], "no tensor 'perm'")
        notperm = os.path.join(tmp, "notperm.safetensors")
        with open(notperm, "wb") as f:
            f.write(build([("w", "F32", [64, 2], bytes(512)),
                           ("perm", "I64", [64], struct.pack("<64q", *([0] * 64)))]))
        expect(qtl, 2, ["op", "gptq-quantize-weights", "--type", "uint4b8", "--group-size", "32",
                        "--act-order", notperm, out], "not a permutation")
        w_only = os.path.join(tmp, "w_only.safetensors")
        with open(w_only, "wb") as f:
            f.write(build([("w", "F32", [64, 2], struct.pack("<128f", *[i / 7 for i in range(128)]))]))
        expect(qtl, 0, ["op", "gptq-quantize-weights", "--type", "uint4b8", "--group-size", "32",
                        "--act-order", "--seed", "7", w_only, out])
        perm = struct.unpack("<64q", read(out)[0]["rand_perm"][2])
        check(sorted(perm) == list(range(64)) and list(perm) != list(range(64)),
              "--seed gives a shuffled permutation")
        expect(qtl, 2, ["op", "quantize-weights", "--type", "int4", "--group-size", "5", quant_in, out])
        expect(qtl, 2, ["op", "pack-cols", "--bits", "2", pack_in, os.path.join(tmp, "no", "x.st")],
               "cannot create")
        for f in os.listdir(tmp):
            check(not f.startswith("."), "temporary file left: " + f)

        # read -> write -> read of every dtype, through the tool: swapping halves twice is the
        # identity, so the bytes must come back unchanged (and the dtype and shape with them).
        for dt, size in DTYPE_SIZE.items():
            src = os.path.join(tmp, "rt_%s.safetensors" % dt)
            data = bytes((i * 37 + 11) % 256 for i in range(2 * 4 * 3 * size))
            with open(src, "wb") as f:
                f.write(build([("x", dt, [2, 4, 3], data)]))
            mid = os.path.join(tmp, "rt_%s.1.safetensors" % dt)
            end = os.path.join(tmp, "rt_%s.2.safetensors" % dt)
            r1 = run(qtl, "op", "swap-w13-to-w31", src, mid)
            r2 = run(qtl, "op", "swap-w13-to-w31", mid, end)
            ok = r1.returncode == 0 and r2.returncode == 0
            check(ok, "%s round trip: exit %d/%d %s" % (dt, r1.returncode, r2.returncode, r1.stderr + r2.stderr))
            if ok:
                got, _ = read(end)
                check(got == {"x": (dt, [2, 4, 3], data)}, "%s round trip changed the tensor" % dt)
                half = 2 * 3 * size
                swapped = b"".join(data[b * 2 * half:(b * 2 + 2) * half][half:] + data[b * 2 * half:(b * 2 + 2) * half][:half]
                                   for b in range(2))
                check(read(mid)[0]["x"][2] == swapped, "%s: one swap is not the halves exchanged" % dt)

        # ops without golden cases: hand-worked values -------------------------------------
        # nvfp4-quant: the worked block of docs/spec/checkpoint_formats.md §3.1 (amax 10.5, global
        # scale 256 = 1/weight_scale_2): block scale 256.0 = E4M3 0x78, packed bytes below.
        vals = [0.1, -0.25, 0.5, 1, -1.5, 2, 3, -4, 6, 0, 0.75, -0.3, 2.5, 5, -5.5, 1.2]
        nv_in = os.path.join(tmp, "nvfp4.safetensors")
        with open(nv_in, "wb") as f:
            f.write(build([("input", "F32", [1, 16], struct.pack("<16f", *vals)),
                           ("global_scale", "F32", [], struct.pack("<f", 256.0))]))
        expect(qtl, 0, ["op", "nvfp4-quant", nv_in, out])
        got = read(out)[0]
        check(got.get("output") == ("U8", [1, 8], bytes.fromhex("80214be50792642f")),
              "nvfp4-quant output %r" % (got.get("output"),))
        check(got.get("scale") == ("F8_E4M3", [1, 1], b"\x78"), "nvfp4-quant scale %r" % (got.get("scale"),))
        check(got.get("global_scale") == ("F32", [], struct.pack("<f", 256.0)), "nvfp4-quant global_scale")
        expect(qtl, 0, ["op", "nvfp4-quant", "--swizzle", nv_in, out])
        got = read(out)[0]
        check(got["scale"][:2] == ("F8_E4M3", [128, 4]) and got["scale"][2] == b"\x78" + bytes(511),
              "nvfp4-quant --swizzle scale %r" % (got["scale"][:2],))
        # gptq-checkpoint-quantize, 4 bits, one group of 8 a row, the reference's symmetric rule: row 0
        # 0..7 (s = max(|7/7|, |0/-8|) = 1, codes x + 8 = 8..15), row 1 -8, -4, -2, -1, 0, 1, 2, 4 (s = 1,
        # codes 0, 4, 6, 7, 8, 9, 10, 12); nibble j of a word is element j: qweight [1, 2] below, F16
        # scales 1.0, zero points the bias 8.
        g_in = os.path.join(tmp, "gptq.safetensors")
        with open(g_in, "wb") as f:
            f.write(build([("weight", "F32", [2, 8], struct.pack("<16f", *range(8), -8, -4, -2, -1, 0, 1, 2, 4))]))
        expect(qtl, 0, ["op", "gptq-checkpoint-quantize", "--bits", "4", "--group-size", "8", g_in, out])
        got = read(out)[0]
        check(got.get("qweight") == ("I32", [1, 2], struct.pack("<2I", 0xFEDCBA98, 0xCA987640)),
              "gptq-checkpoint-quantize qweight %r" % (got.get("qweight"),))
        check(got.get("scales") == ("F16", [1, 2], bytes.fromhex("003c003c")) and
              got.get("zeros") == ("I32", [1, 2], struct.pack("<2i", 8, 8)),
              "gptq-checkpoint-quantize scales/zeros %r %r" % (got.get("scales"), got.get("zeros")))
        expect(qtl, 2, ["op", "gptq-checkpoint-quantize", "--bits", "4", "--group-size", "3", g_in, out])
        # mxfp4-quant / mxfp8-quant: one block of 32 with amax 24. MXFP4: scale 2^ceil(log2(24/6)) = 4
        # (E8M0 0x81), codes of x/4 = 0, .5, 1, 1.5, 2, 3, 4, 6 (0..7; negatives 8|code); MXFP8:
        # scale 2^ceil(log2(24/448)) = 2^-4 (0x7b), E4M3 codes of 16x = 32 (0x60) ... 384 (0x7c).
        mx = [0, 2, 4, 6, 8, 12, 16, 24, -2, -4, -6, -8, -12, -16, -24, 0] * 2
        mx_in = os.path.join(tmp, "mx.safetensors")
        with open(mx_in, "wb") as f:
            f.write(build([("input", "F32", [1, 32], struct.pack("<32f", *mx))]))
        for op, out_type, codes, scale in (
                ("mxfp4-quant", ("U8", [1, 16]), "10325476a9cbed0f", b"\x81"),
                ("mxfp8-quant", ("F8_E4M3", [1, 32]), "0060686c7074787ce0e8ecf0f4f8fc00", b"\x7b")):
            expect(qtl, 0, ["op", op, mx_in, out])
            got = read(out)[0]
            check(got.get("output") == out_type + (bytes.fromhex(codes * 2),), "%s output %r" % (op, got.get("output")))
            check(got.get("scale") == ("F8_E8M0", [1, 1], scale) and "global_scale" not in got,
                  "%s scale %r" % (op, got.get("scale")))
            expect(qtl, 0, ["op", op, "--swizzle", mx_in, out])
            got = read(out)[0]
            check(got["scale"] == ("F8_E8M0", [128, 4], scale + bytes(511)), "%s --swizzle scale" % op)
            expect(qtl, 2, ["op", op, nv_in, out], "multiple of the %s block of 32" % op[:5])
        # per-tensor-dequantize: e4m3 1.0 (0x38), -2.0 (0xc0), 448 (0x7e) times 0.5; F16 for a
        # 0-dim scale, F32 for a [1] one.
        dq_in = os.path.join(tmp, "dq.safetensors")
        for shape, dt, fmt in (([], "F16", "<3e"), ([1], "F32", "<3f")):
            with open(dq_in, "wb") as f:
                f.write(build([("tensor", "F8_E4M3", [1, 3], b"\x38\xc0\x7e"),
                               ("inv_scale", "F32", shape, struct.pack("<f", 0.5))]))
            expect(qtl, 0, ["op", "per-tensor-dequantize", dq_in, out])
            check(read(out)[0] == {"dq_weight": (dt, [1, 3], struct.pack(fmt, 0.5, -1.0, 224.0))},
                  "per-tensor-dequantize %s: %r" % (dt, read(out)[0]))
        # requantize-with-max-scale: shard 0 (scale 1) holds 1.0 -> 0.5 at the max scale 2 (0x30);
        # shard 1 (scale 2) keeps 1.0 (0x38).
        rq_in = os.path.join(tmp, "rq.safetensors")
        with open(rq_in, "wb") as f:
            f.write(build([("weight", "F8_E4M3", [2, 1], b"\x38\x38"),
                           ("weight_scale", "F32", [2], struct.pack("<2f", 1.0, 2.0))]))
        expect(qtl, 0, ["op", "requantize-with-max-scale", "--logical-widths", "1,1", rq_in, out])
        check(read(out)[0] == {"max_w_scale": ("F32", [], struct.pack("<f", 2.0)),
                               "weight": ("F8_E4M3", [2, 1], b"\x30\x38")},
              "requantize-with-max-scale: %r" % (read(out)[0],))
        expect(qtl, 2, ["op", "requantize-with-max-scale", "--logical-widths", "2,1", rq_in, out], "rows")
        # prepare-trtllm-fp4-moe: names, dtypes and shapes kept; each output a permutation of its
        # input's rows (distinct row contents make that checkable).
        e, h, i = 1, 128, 64
        moe = [("gemm1_weights", "U8", [e, 2 * i, h // 2]), ("gemm1_scales", "F8_E4M3", [e, 2 * i, h // 16]),
               ("gemm2_weights", "U8", [e, h, i // 2]), ("gemm2_scales", "F8_E4M3", [e, h, i // 16])]
        moe_t = []
        for name, dt, shape in moe:
            rows, cols = shape[1], shape[2]
            moe_t.append((name, dt, shape, b"".join(struct.pack("<H", r) * (cols // 2) for r in range(rows))))
        moe_in = os.path.join(tmp, "moe.safetensors")
        with open(moe_in, "wb") as f:
            f.write(build(moe_t))
        expect(qtl, 0, ["op", "prepare-trtllm-fp4-moe", "--hidden-size", str(h), "--intermediate-size",
                        str(i), "--num-experts", str(e), moe_in, out])
        got = read(out)[0]
        for name, dt, shape, data in moe_t:
            g = got.get(name + "_fp4_shuffled")
            check(g is not None and g[:2] == (dt, shape) and sorted(g[2]) == sorted(data) and g[2] != data,
                  "prepare-trtllm-fp4-moe %s" % name)
        expect(qtl, 2, ["op", "prepare-trtllm-fp4-moe", "--hidden-size", "256", "--intermediate-size",
                        str(i), "--num-experts", str(e), moe_in, out], "gemm1_weights")
        expect(qtl, 1, ["op", "prepare-trtllm-fp4-moe", "--hidden-size", str(h), moe_in, out],
               "intermediate-size")
        # the FP4 MoE paddings: a layer whose tensors do not fit together is a data error (exit 2),
        # an alignment that is not positive a usage error (exit 1); no output either way
        pad_in = os.path.join(tmp, "pad.safetensors")
        with open(pad_in, "wb") as f:
            f.write(build([("w13", "U8", [1, 32, 16], bytes(512)), ("w13_scale", "F8_E4M3", [1, 32, 2], bytes(64)),
                           ("w2", "U8", [1, 32, 24], bytes(768)), ("w2_scale", "F8_E4M3", [1, 32, 3], bytes(96))]))
        if os.path.exists(out):
            os.remove(out)
        expect(qtl, 2, ["op", "align-fp4-moe-weights-for-fi", "--is-act-and-mul", pad_in, out], "input w13 has shape")
        expect(qtl, 1, ["op", "align-fp4-moe-hidden-dim-for-fi", "--min-alignment", "0", pad_in, out],
               "--min-alignment")
        check(not os.path.exists(out), "align-fp4-moe-*: no output after an error")
        expect(qtl, 0, ["op", "align-fp4-moe-hidden-dim-for-fi", pad_in, out])
        check(read(out)[0]["padded_hidden_size"] == ("I64", [], struct.pack("<q", 256)), "padded_hidden_size")

        # inspect: scheme recognition and sharded checkpoints ----------------------------------
        i32 = lambda *shape: ("I32", list(shape), bytes(4 * prod(shape)))  # noqa: E731
        f16 = lambda *shape: ("F16", list(shape), bytes(2 * prod(shape)))  # noqa: E731
        g_idx = struct.pack("<256i", *[k // 128 for k in range(256)])
        tensors = [
            ("model.layers.0.q.qweight",) + i32(32, 64), ("model.layers.0.q.qzeros",) + i32(2, 8),
            ("model.layers.0.q.scales",) + f16(2, 64), ("model.layers.0.q.g_idx", "I32", [256], g_idx),
            ("model.layers.1.q.qweight",) + i32(256, 8), ("model.layers.1.q.qzeros",) + i32(2, 8),
            ("model.layers.1.q.scales",) + f16(2, 64),
            ("model.layers.2.q.weight", "F8_E4M3", [64, 128], bytes(64 * 128)),
            ("model.layers.2.q.weight_scale_inv", "F32", [1, 1], bytes(4)),
            ("model.layers.3.q.weight", "F8_E4M3", [64, 128], bytes(64 * 128)),
            ("model.layers.3.q.weight_scale", "F32", [64, 1], bytes(256)),
            ("model.layers.3.q.input_scale", "F32", [], bytes(4)),
            ("model.layers.4.q.weight", "U8", [64, 64], bytes(64 * 64)),
            ("model.layers.4.q.weight_scale", "F8_E4M3", [64, 8], bytes(64 * 8)),
            ("model.layers.4.q.weight_scale_2", "F32", [], bytes(4)),
            ("model.layers.5.mlp.experts.down_proj_blocks", "U8", [2, 64, 4, 16], bytes(2 * 64 * 64)),
            ("model.layers.5.mlp.experts.down_proj_scales", "U8", [2, 64, 4], bytes(2 * 64 * 4)),
            ("model.norm.weight",) + f16(64),
        ]
        shard1, shard2 = tensors[:9], tensors[9:]
        model = os.path.join(tmp, "model")
        os.makedirs(model)
        for name, part in (("model-00001-of-00002.safetensors", shard1),
                           ("model-00002-of-00002.safetensors", shard2)):
            with open(os.path.join(model, name), "wb") as f:
                f.write(build([(t[0], t[1], t[2], t[3]) for t in part], metadata={"format": "pt"}))
        index = {"metadata": {"total_size": 0}, "weight_map": {}}
        for name, part in (("model-00001-of-00002.safetensors", shard1),
                           ("model-00002-of-00002.safetensors", shard2)):
            for t in part:
                index["weight_map"][t[0]] = name
        with open(os.path.join(model, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f)
        r = expect(qtl, 0, ["inspect", "--json", model])
        report = json.loads(r.stdout)["files"][0]
        check(report["tensor_count"] == len(tensors), "inspect: %d tensors" % report["tensor_count"])
        check(len(report["shards"]) == 2, "inspect: shards %s" % report["shards"])
        mods = {m["module"]: (m["scheme"], m["variant"]) for m in report["quantization"]["modules"]}
        want = {
            "model.layers.0.q": ("GPTQ", "4-bit, group 128"),
            "model.layers.1.q": ("AWQ", "4-bit, group 128"),
            "model.layers.2.q": ("FP8", "e4m3, per-tensor weight scale, dynamic activations"),
            "model.layers.3.q": ("FP8", "e4m3, per-channel weight scale, static input scale"),
            "model.layers.4.q": ("NVFP4", "ModelOpt, group 16"),
            "model.layers.5.mlp.experts.down_proj": ("MXFP4", "gpt-oss blocks, group 32, E8M0 scales"),
        }
        check(mods == want, "inspect modules:\n  got  %s\n  want %s" % (mods, want))
        r = expect(qtl, 0, ["inspect", model], "GPTQ")
        for scheme in ("AWQ", "FP8", "NVFP4", "MXFP4", "2 shards", "metadata total_size = 0"):
            check(scheme in r.stdout, "inspect table lacks %r" % scheme)
        os.remove(os.path.join(model, "model-00002-of-00002.safetensors"))
        expect(qtl, 2, ["inspect", model], "model-00002-of-00002.safetensors: cannot open")

        # inspect --assume marlin: logical shapes from the Marlin weight and the scales beside it
        marlin = os.path.join(tmp, "marlin.safetensors")
        with open(marlin, "wb") as f:
            f.write(build([("l0.qweight",) + i32(4, 256), ("l0.scales",) + f16(2, 128), ("l0.g_idx",) + i32(64),
                           ("l1.experts.w13_qweight",) + i32(4, 8, 1024), ("l1.experts.w13_scales",) + f16(4, 1, 256),
                           ("l2.weight",) + i32(2, 512)]))
        r = expect(qtl, 0, ["inspect", "--assume", "marlin", "--json", marlin])
        got = {m["tensor"]: m for m in json.loads(r.stdout)["files"][0]["marlin"]}
        check((got["l0.qweight"]["bits"], got["l0.qweight"]["K"], got["l0.qweight"]["N"],
               got["l0.qweight"]["group_size"], got["l0.qweight"]["act_order"]) == (4, 64, 128, 32, True),
              "inspect --assume marlin: l0 %s" % got.get("l0.qweight"))
        w13 = got["l1.experts.w13_qweight"]
        check((w13["bits"], w13["experts"], w13["K"], w13["N"], w13["group_size"]) == (8, 4, 128, 256, -1),
              "inspect --assume marlin: w13 %s" % w13)
        check((got["l2.weight"]["bits"], got["l2.weight"]["N_if_4_bit"]) == (None, 256),
              "inspect --assume marlin: l2 %s" % got.get("l2.weight"))
        expect(qtl, 0, ["inspect", "--assume", "marlin", marlin], re.escape("4-bit [K=64, N=128], 2 groups of 32, act-order"))
        expect(qtl, 1, ["inspect", "--assume", "awq", marlin])

    finish()


def prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


if __name__ == "__main__":
    main()
