#!/usr/bin/env python3
"""Flag values and input values at the edges of what `qtl op` takes: a short message naming the
value (exit 1 for a flag, 2 for the input's data), never std::bad_alloc, a 309-digit bound, an
overflowed size or a huge output; and the values the reference kernels take on purpose, which
QTL takes the same way with a warning.

    test_qtl_values.py QTL

Prints a summary; exits 1 if any check fails.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from checks import check, finish  # noqa: E402

QTL = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="qtl-values-")
OUT = os.path.join(TMP, "out.safetensors")


def run(*args):
    if os.path.exists(OUT):
        os.remove(OUT)
    p = subprocess.run([QTL] + [str(a) for a in args], capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout, p.stderr


def write(name, tensors):
    path = os.path.join(TMP, name)
    with open(path, "wb") as f:
        f.write(st.build(tensors, {"format": "pt"}))
    return path


def f32(name, shape, values):
    return (name, "F32", shape, struct.pack("<%df" % len(values), *values))


def u8(name, dtype, shape, fill=0x22):
    n = 1
    for d in shape:
        n *= d
    return (name, dtype, shape, bytes([fill]) * n)


def refused(code, args, *fragments):
    """`qtl args` exits `code` with one short message naming each fragment, and writes nothing."""
    rc, out, err = run(*args)
    label = "qtl " + " ".join(str(a) for a in args)
    check(rc == code, "%s: exit %d, want %d: %s" % (label, rc, code, err.strip()[:300]))
    check(all(f in err for f in fragments), "%s: the message names %s: %s" % (label, fragments, err.strip()[:300]))
    check(len(err) < 400 and "bad_alloc" not in err and "max_size" not in err,
          "%s: a short message (%d bytes): %s" % (label, len(err), err[:200]))
    check(not os.path.exists(OUT), label + ": no output")
    return err


def warned(args, *fragments):
    """`qtl args` succeeds and warns, naming each fragment."""
    rc, out, err = run(*args)
    label = "qtl " + " ".join(str(a) for a in args)
    check(rc == 0 and os.path.exists(OUT), "%s: exit 0 (%d): %s" % (label, rc, err.strip()[:300]))
    check("warning" in err and all(f in err for f in fragments),
          "%s: a warning naming %s: %s" % (label, fragments, err.strip()[:400]))


def test_messages():
    one = write("one_scale.safetensors", [f32("weight_scale", [1], [0.5])])
    # a width sum no weight has: said so, not std::bad_alloc or a 200 MB output
    refused(2, ["op", "convert-to-channelwise", one, OUT, "--logical-widths", "4000000000000,4"],
            "--logical-widths", "16777216")
    refused(2, ["op", "convert-to-channelwise", one, OUT, "--logical-widths", "50000000"], "16777216")
    refused(2, ["op", "convert-to-channelwise", one, OUT, "--logical-widths",
                "4611686018427387904,4611686018427387904"], "16777216")
    refused(1, ["op", "convert-to-channelwise", one, OUT, "--logical-widths", "99999999999999999999"], "too large")
    rc, _, err = run("op", "convert-to-channelwise", one, OUT, "--logical-widths", "4096")
    check(rc == 0 and os.path.getsize(OUT) < 20000, "convert-to-channelwise: a real width still works: " + err)
    # a short range message, whatever the op
    moe = write("moe.safetensors", [u8("gemm1_weights", "U8", [1, 128, 64])])
    for flag in ("--num-experts", "--hidden-size", "--intermediate-size"):
        args = {"--num-experts": "1", "--hidden-size": "128", "--intermediate-size": "64"}
        args[flag] = "-2"
        flat = [x for kv in args.items() for x in kv]
        err = refused(1, ["op", "prepare-trtllm-fp4-moe", moe, OUT] + flat, flag, "-2 is not a positive integer")
        check("000000" not in err, "no 309-digit bound: " + err[:200])
    refused(1, ["op", "unswizzle-blockscale", moe, OUT, "--rows", "-1", "--cols", "1"],
            "--rows", "-1 is not a non-negative integer")
    # sizes near 2^62: the expected shape overflows no integer
    err = refused(1, ["op", "prepare-trtllm-fp4-moe", moe, OUT, "--num-experts", "1", "--hidden-size", "128",
                      "--intermediate-size", "4611686018427387904"], "--intermediate-size", "too large")
    check("-9223372036854775808" not in err, "no overflowed size in the message: " + err)
    rc, _, err = run("op", "prepare-trtllm-fp4-moe", moe, OUT, "--num-experts", "2305843009213693952",
                     "--hidden-size", "4611686018427387904", "--intermediate-size", "2305843009213693952")
    check(rc == 2 and "-" not in err.split("need")[-1], "huge sizes: the expected shape as given: " + err.strip())
    # --block-size too large is said so
    fp8 = write("fp8.safetensors", [u8("weight", "F8_E4M3", [4, 4]), f32("weight_scale_inv", [1, 1], [1.0]),
                                    f32("weight_scale", [1], [1.0])])
    for op in ("fp8-block-to-mxfp4", "block-quant-dequant --dtype f32", "marlin-fp8-prepare --dtype f16"):
        refused(1, ["op"] + op.split()[:1] + [fp8, OUT] + op.split()[1:] +
                ["--block-size", "9223372036854775807,1"], "--block-size", "9223372036854775807 is too large")
    refused(1, ["op", "fp8-block-to-mxfp4", fp8, OUT, "--block-size", "0,1"], "two positive integers")
    # --threads abc is not an integer (quantize and convert)
    for cmd in (["quantize", TMP, os.path.join(TMP, "q"), "--format", "fp8"],
                ["convert", TMP, os.path.join(TMP, "c"), "--to", "bf16"]):
        rc, _, err = run(*(cmd + ["--threads", "abc"]))
        check(rc == 1 and "abc is not an integer" in err and "not in range" not in err,
              "%s --threads abc: not an integer (%d): %s" % (cmd[0], rc, err.strip()))
        rc, _, err = run(*(cmd + ["--threads", "5000"]))
        check(rc == 1 and "5000 is not an integer from 0 to 4096" in err,
              "%s --threads 5000: out of range (%d): %s" % (cmd[0], rc, err.strip()))
    # JSON errors show quotes as quotes
    bad = os.path.join(TMP, "bad_header.safetensors")
    header = b'{"w": {"dtype": "F32", }}'
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
    for args in (["inspect", bad], ["op", "scaled-fp8-quant", bad, OUT]):
        rc, _, err = run(*args)
        check(rc == 2 and "unexpected '}'" in err and "\\x27" not in err,
              "%s: the JSON parser's quotes as quotes: %s" % (args[0], err.strip()))


def test_values():
    x = write("x.safetensors", [f32("input", [2, 4], [0.0, 1.0, -2.0, 3.0, 0.5, -0.25, 8.0, 0.0])])
    # --scale: a finite positive float32; 0 is sglang's kernel's case, taken with a warning
    for bad in ("nan", "-1", "inf", "1e39"):
        refused(1, ["op", "scaled-fp8-quant", x, OUT, "--scale", bad], "--scale", "finite positive")
    warned(["op", "scaled-fp8-quant", x, OUT, "--scale", "0"], "--scale 0", "1/0 = inf")
    warned(["op", "scaled-fp8-quant", x, OUT, "--scale", "1e-50"], "is 0 in float32")
    rc, _, err = run("op", "scaled-fp8-quant", x, OUT, "--scale", "0.5")
    check(rc == 0 and "warning" not in err, "--scale 0.5: no warning: " + err)
    # extra scales: ignored by convert_to_channelwise, counted by requantize_with_max_scale (as the
    # reference does): a warning each
    five = write("five.safetensors", [f32("weight_scale", [5], [1, 2, 3, 4, 5]),
                                      u8("weight", "F8_E4M3", [4, 8])])
    warned(["op", "convert-to-channelwise", five, OUT, "--logical-widths", "1,1"], "5 scales for 2 shards",
           "last 3 are ignored")
    warned(["op", "requantize-with-max-scale", five, OUT, "--logical-widths", "2,2"], "5 scales for 2 shards",
           "max scale")
    rc, _, err = run("op", "convert-to-channelwise", five, OUT, "--logical-widths", "1,1,1,1,1")
    check(rc == 0 and "warning" not in err, "one scale per shard: no warning: " + err)
    refused(2, ["op", "requantize-with-max-scale", five, OUT, "--logical-widths", "4,4611686018427387904"],
            "--logical-widths", "4 rows")
    # marlin-fp8-prepare: a NaN (or Inf) weight scale is refused
    for value, shown in ((float("nan"), "nan"), (float("inf"), "inf")):
        f = write("marlin_fp8.safetensors", [u8("weight", "F8_E4M3", [64, 128]),
                                             f32("weight_scale", [64], [1.0] * 7 + [value] + [1.0] * 56)])
        refused(2, ["op", "marlin-fp8-prepare", f, OUT, "--dtype", "f16"], "weight_scale", "element 7",
                "is " + shown)
    # marlin-nvfp4-prepare: a global scale of 0 (or negative, NaN) is refused
    for value, shown in ((0.0, "is 0:"), (-1.0, "is -1:"), (float("nan"), "is nan:")):
        f = write("marlin_nvfp4.safetensors", [u8("weight", "U8", [64, 64]), u8("weight_scale", "F8_E4M3", [64, 8], 0x38),
                                               f32("weight_global_scale", [], [value])])
        refused(2, ["op", "marlin-nvfp4-prepare", f, OUT, "--dtype", "f16"], "weight_global_scale", shown)
    # requant-weight-ue8m0: negative block scales are requantized as the engines do, with a warning
    codes = bytes([0x38, 0xB8] * (128 * 128 // 2))  # 1.0 and -1.0 in e4m3
    neg = write("neg.safetensors", [("weight", "F8_E4M3", [128, 128], codes),
                                    f32("weight_scale_inv", [1, 1], [-0.5])])
    warned(["op", "requant-weight-ue8m0", neg, OUT, "--recipe", "sglang"], "1 negative scale", "-0.5")
    if os.path.exists(OUT):
        header, data = st.read(OUT)
        scale = struct.unpack("<f", header["weight_scale_inv"][2])[0]
        w = header["weight"][2]
        check(scale > 0 and w[0] & 0x80 and not w[1] & 0x80,
              "a negative scale: positive new scale, codes of flipped sign (%r, %02x %02x)" % (scale, w[0], w[1]))


def main():
    try:
        test_messages()
        test_values()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
