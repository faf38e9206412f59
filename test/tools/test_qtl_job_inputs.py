"""End-to-end tests of what `qtl quantize` makes of unusual inputs: names, files, configs, flags.

Usage: test_qtl_job_inputs.py QTL

Standard library only (safetensors_py). Each case is a small checkpoint built here:
  1. An input tensor named as an output of another (`L.weight_scale` beside `L.weight` for fp8,
     w4a16 and nvfp4; `L.scales` for gptq; in the same shard or in another): exit 2 naming both
     tensors, no output.
  2. A run that quantizes nothing (an index with an empty weight_map, only 3-D expert stacks of an
     unknown layout kept by --keep-expert-stacks, F64 weights): exit 2 naming why; --allow-empty
     writes it. Such stacks beside quantized layers are copied with a warning, their experts module
     listed in `ignore` (test_qtl_moe.py: the stacks qtl cuts and quantizes, the refusals); an F64
     linear weight beside them is kept and listed in `ignore`.
     MoE: per-expert 2-D weights quantized, routers (`mlp.gate`, `mlp.router`) kept.
  3. A single-file input (`weights.safetensors`) is written as model.safetensors; a single-file or
     index input gets the side files of its folder, as a folder input does.
  4. Side files: a dangling link, a FIFO, a socket, weight files of other formats (pytorch_model.bin,
     big.bin, model.pt, .gguf, .onnx) and a file over 256 MiB are skipped with a warning naming
     each; a link to a regular file and the tokenizer files are copied.
  5. --config and flags: a flag that contradicts the config's value is refused (exit 1) naming the
     field and both values (GPTQ bits, group_size, sym; compressed-tensors num_bits); when they
     merge, each value's source is printed and the config written says what was done.
  6. `--device` is not an option of `quantize` or `op` (exit 1).
"""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from checks import check, run_in_temp_dir  # noqa: E402

QTL = sys.argv[1]


def run(*args):
    p = subprocess.run([QTL] + [str(a) for a in args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def f16(n, v=0.25):
    return struct.pack("<%de" % n, *([v] * n))


def weight(name, n=64, k=128, dtype="F16"):
    if dtype == "F64":
        return (name, "F64", [n, k], struct.pack("<%dd" % (n * k), *([0.25] * (n * k))))
    return (name, dtype, [n, k], f16(n * k))


def listing(folder):
    """The folder's names but the hidden ones (qtl's output marker)."""
    return sorted(f for f in os.listdir(folder) if not f.startswith("."))


def tensors_of(folder):
    out = {}
    for fname in os.listdir(folder):
        if fname.endswith(".safetensors"):
            t, _ = st.read(os.path.join(folder, fname))
            out.update(t)
    return out


def test_duplicates(tmp):
    """1."""
    cases = [("fp8", "weight_scale", "F32", [1]), ("w4a16", "weight_scale", "F32", [1]),
             ("nvfp4", "weight_scale", "F32", [1]), ("gptq", "scales", "F16", [1])]
    for fmt, extra, dt, shape in cases:
        for shards in (1, 2):
            src = os.path.join(tmp, "dup-%s-%d" % (fmt, shards))
            size = 4 if dt == "F32" else 2
            st.write_checkpoint(src, [weight("model.layers.0.mlp.up_proj.weight"),
                                      ("model.layers.0.mlp.up_proj." + extra, dt, shape, bytes(size))], shards)
            out = os.path.join(tmp, "dup-out")
            rc, _, se = run("quantize", src, out, "--format", fmt)
            check(rc == 2 and "'model.layers.0.mlp.up_proj.%s'" % extra in se and
                  "'model.layers.0.mlp.up_proj.weight'" in se and "two output tensors" in se,
                  "%s, an input %s in %s: exit 2 naming both tensors (%d %s)"
                  % (fmt, extra, "one shard" if shards == 1 else "another shard", rc, se.strip()))
            check(not os.path.exists(out), "%s, duplicate names: no output" % fmt)


def test_empty_runs(tmp):
    """2."""
    empty = os.path.join(tmp, "empty-map")
    os.makedirs(empty)
    with open(os.path.join(empty, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": {}}, f)
    stacks = os.path.join(tmp, "stacks")
    st.write_checkpoint(stacks, [("model.layers.0.mlp.experts.gate_up_proj", "BF16", [4, 64, 32], bytes(4 * 64 * 32 * 2)),
                                 ("model.layers.0.mlp.experts.down_proj", "BF16", [4, 32, 32], bytes(4 * 32 * 32 * 2)),
                                 ("model.layers.0.mlp.router.weight", "BF16", [4, 32], bytes(4 * 32 * 2))], 1)
    f64 = os.path.join(tmp, "f64")
    st.write_checkpoint(f64, [weight("model.layers.0.mlp.up_proj.weight", dtype="F64")], 1)
    for src, words in ((empty, ["no tensors"]), (stacks, ["3-D expert stack", "experts.gate_up_proj", "MoE router"]),
                       (f64, ["F64", "up_proj"])):
        keep = ["--keep-expert-stacks"] if src == stacks else []
        for fmt in ("gptq", "fp8", "w4a16"):
            out = os.path.join(tmp, "empty-out")
            rc, _, se = run("quantize", src, out, "--format", fmt, *keep)
            what = "%s, %s" % (os.path.basename(src), fmt)
            check(rc == 2 and "no linear layer to quantize" in se and all(w in se for w in words) and
                  "--allow-empty" in se, "%s: exit 2 naming why (%d %s)" % (what, rc, se.strip()))
            check(not os.path.exists(out), what + ": no output")
            rc, _, se = run("quantize", src, out, "--format", fmt, "--allow-empty", *keep)
            check(rc == 0, "%s --allow-empty: written (%d %s)" % (what, rc, se.strip()))
            shutil.rmtree(out, ignore_errors=True)
    # beside a quantized layer: 3-D stacks copied with a warning, F64 kept and ignored, routers kept
    mixed = os.path.join(tmp, "mixed")
    st.write_checkpoint(mixed, [("model.layers.0.mlp.experts.gate_up_proj", "BF16", [4, 64, 32], bytes(4 * 64 * 32 * 2)),
                                weight("model.layers.0.mlp.experts.0.up_proj.weight"),
                                weight("model.layers.0.mlp.experts.1.down_proj.weight"),
                                weight("model.layers.0.mlp.gate.weight", n=4),
                                weight("model.layers.0.mlp.router.weight", n=4),
                                weight("model.layers.0.self_attn.o_proj.weight", dtype="F64")], 1)
    for fmt in ("w4a16", "fp8", "gptq"):
        out = os.path.join(tmp, "mixed-out-" + fmt)
        rc, so, se = run("quantize", mixed, out, "--format", fmt, "--keep-expert-stacks")
        check(rc == 0 and "warning" in se and "experts.gate_up_proj" in se and "copied unquantized" in se,
              "%s: 3-D stacks copied with a warning (%d %s)" % (fmt, rc, se.strip()))
        if rc != 0:
            continue
        t = tensors_of(out)
        check(t.get("model.layers.0.mlp.experts.gate_up_proj", ("",))[0] == "BF16", fmt + ": the stack copied")
        for m in ("experts.0.up_proj", "experts.1.down_proj"):
            check(t.get("model.layers.0.mlp.%s.weight" % m, ("",))[0] != "F16", "%s: the expert %s is quantized" % (fmt, m))
        for m in ("gate", "router"):
            check(t.get("model.layers.0.mlp.%s.weight" % m, ("",))[0] == "F16", "%s: the router %s kept" % (fmt, m))
        check(t.get("model.layers.0.self_attn.o_proj.weight", ("",))[0] == "F64", fmt + ": the F64 weight kept")
        check("o_proj" in so and "F64" in so, fmt + ": the summary lists the F64 layer as kept")
        if fmt == "w4a16":
            with open(os.path.join(out, "config.json")) as f:
                ignore = json.load(f)["quantization_config"]["ignore"]
            for m in ("model.layers.0.self_attn.o_proj", "model.layers.0.mlp.gate", "model.layers.0.mlp.router",
                      "model.layers.0.mlp.experts"):
                check(m in ignore, "w4a16: %s in ignore (%s)" % (m, ignore))


def side_files(folder):
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"t": 1}\n')
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        f.write('{"g": 1}\n')


def test_single_file_and_index(tmp):
    """3."""
    d = os.path.join(tmp, "single")
    os.makedirs(d)
    with open(os.path.join(d, "weights.safetensors"), "wb") as f:
        f.write(st.build([weight("model.layers.0.mlp.up_proj.weight")]))
    side_files(d)
    out = os.path.join(tmp, "single-out")
    rc, _, se = run("quantize", os.path.join(d, "weights.safetensors"), out, "--format", "fp8")
    check(rc == 0, "a single-file input: " + se)
    if rc == 0:
        check(listing(out) == ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json"],
              "a single-file input gives model.safetensors and its folder's side files: %s" % listing(out))
    d = os.path.join(tmp, "index")
    st.write_checkpoint(d, [weight("model.layers.0.mlp.up_proj.weight"), weight("model.layers.0.mlp.down_proj.weight")], 2)
    side_files(d)
    out = os.path.join(tmp, "index-out")
    rc, _, se = run("quantize", os.path.join(d, "model.safetensors.index.json"), out, "--format", "gptq")
    check(rc == 0, "an index input: " + se)
    if rc == 0:
        names = listing(out)
        check("tokenizer.json" in names and "generation_config.json" in names and
              "model.safetensors.index.json" in names, "an index input gets its folder's side files: %s" % names)


def test_side_files(tmp):
    """4."""
    d = os.path.join(tmp, "sides")
    st.write_checkpoint(d, [weight("model.layers.0.mlp.up_proj.weight")], 1)
    side_files(d)
    os.symlink(os.path.join(d, "missing"), os.path.join(d, "special_tokens_map.json"))
    os.mkfifo(os.path.join(d, "pipe.json"))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.path.join(d, "server.sock"))
    skipped = ["special_tokens_map.json", "pipe.json", "server.sock"]
    for name in ("pytorch_model.bin", "big.bin", "model.pt", "model.Q4.gguf", "model.onnx"):
        with open(os.path.join(d, name), "wb") as f:
            f.write(b"weights")
        skipped.append(name)
    with open(os.path.join(d, "huge.dat"), "wb") as f:
        f.truncate((256 << 20) + 1)   # sparse: nothing is read
    skipped.append("huge.dat")
    os.symlink("tokenizer.json", os.path.join(d, "tokenizer_link.json"))
    out = os.path.join(tmp, "sides-out")
    rc, _, se = run("quantize", d, out, "--format", "fp8")
    sock.close()
    check(rc == 0, "side files that are not needed do not abort the run: %d %s" % (rc, se.strip()))
    if rc != 0:
        return
    names = listing(out)
    check(names == ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                    "tokenizer_link.json"], "exactly the side files a checkpoint needs copied: %s" % names)
    for name in skipped:
        check(any(name in line and "warning" in line and "not copied" in line for line in se.splitlines()),
              "a warning names %s: %s" % (name, se.strip()))
    with open(os.path.join(out, "tokenizer_link.json")) as f:
        check(f.read() == '{"t": 1}\n', "a link to a regular file is copied as its contents")


def test_config_merge(tmp):
    """5."""
    src = os.path.join(tmp, "merge")
    st.write_checkpoint(src, [weight("model.layers.0.mlp.up_proj.weight", k=256)], 1)
    g8 = os.path.join(tmp, "g8.json")
    with open(g8, "w") as f:
        json.dump({"quant_method": "gptq", "bits": 8, "group_size": 64, "sym": False, "desc_act": False}, f)
    for flags, words in ((["--bits", "4", "--group-size", "128"], ["--bits 4", "bits is 8"]),
                         (["--group-size", "128"], ["--group-size 128", "group_size is 64"]),
                         (["--sym"], ["--sym", "sym is false"])):
        out = os.path.join(tmp, "merge-out")
        rc, _, se = run("quantize", src, out, "--format", "gptq", "--config", g8, *flags)
        check(rc == 1 and all(w in se for w in words) and g8 in se,
              "%s against the config: exit 1 naming the field and both values (%d %s)" % (flags, rc, se.strip()))
        check(not os.path.exists(out), "%s against the config: no output" % flags)
    # the same values agree; a config without group_size and sym merges with the flags, and says so
    rc, _, se = run("quantize", src, os.path.join(tmp, "agree"), "--format", "gptq", "--config", g8, "--bits", "8", "--asym")
    check(rc == 0, "flags equal to the config's values: " + se)
    partial = os.path.join(tmp, "bits8.json")
    with open(partial, "w") as f:
        json.dump({"quant_method": "gptq", "bits": 8, "desc_act": False}, f)
    out = os.path.join(tmp, "merged")
    rc, _, se = run("quantize", src, out, "--format", "gptq", "--config", partial, "--group-size", "64", "--asym")
    check(rc == 0 and "bits 8 (--config %s)" % partial in se and "group_size 64 (--group-size 64)" in se and
          "sym false (--asym)" in se, "the merged values and their sources printed: %d %s" % (rc, se.strip()))
    if rc == 0:
        with open(os.path.join(out, "config.json")) as f:
            q = json.load(f)["quantization_config"]
        check((q["bits"], q["group_size"], q["sym"]) == (8, 64, False), "the merged config written: %s" % q)
    # compressed-tensors: the config's group size and symmetry apply; num_bits against the format
    ct = os.path.join(tmp, "ct.json")
    with open(ct, "w") as f:
        json.dump({"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
                   "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                       "num_bits": 4, "type": "int", "symmetric": False, "strategy": "group", "group_size": 64}}}}, f)
    rc, _, se = run("quantize", src, os.path.join(tmp, "ct-w8"), "--format", "w8a16", "--config", ct)
    check(rc == 1 and "--format w8a16" in se and "num_bits is 4" in se, "w8a16 against num_bits 4: %d %s" % (rc, se.strip()))
    fp8_ct = os.path.join(tmp, "ct-fp8.json")
    with open(fp8_ct, "w") as f:
        json.dump({"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
                   "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                       "num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel"}}}}, f)
    rc, _, se = run("quantize", src, os.path.join(tmp, "ct-float"), "--format", "w8a16", "--config", fp8_ct)
    check(rc == 1 and "'float'" in se and "int" in se, "w8a16 with a float config: %d %s" % (rc, se.strip()))
    out = os.path.join(tmp, "ct-out")
    rc, _, se = run("quantize", src, out, "--format", "w4a16", "--config", ct)
    check(rc == 0, "w4a16 with a compressed-tensors config: " + se)
    if rc == 0:
        with open(os.path.join(out, "config.json")) as f:
            w = json.load(f)["quantization_config"]["config_groups"]["group_0"]["weights"]
        check((w["group_size"], w["symmetric"]) == (64, False), "the config's group_size and symmetric written: %s" % w)
        check("model.layers.0.mlp.up_proj.weight_zero_point" in tensors_of(out), "asymmetric as the config says")


def test_no_device(tmp):
    """6."""
    src = os.path.join(tmp, "dev")
    st.write_checkpoint(src, [weight("model.layers.0.mlp.up_proj.weight")], 1)
    for dev in ("cpu", "cuda", "auto"):
        rc, _, se = run("quantize", src, os.path.join(tmp, "dev-out"), "--format", "fp8", "--device", dev)
        check(rc == 1 and "--device" in se, "quantize --device %s: not an option (%d %s)" % (dev, rc, se.strip()))
    rc, so, _ = run("quantize", "--help")
    check("--device" not in so, "quantize --help lists no --device")
    op_in = os.path.join(tmp, "op.safetensors")
    with open(op_in, "wb") as f:
        f.write(st.build([("w", "I32", [4, 16], bytes(256))]))
    rc, _, se = run("op", "--device", "cpu", "pack-cols", "--bits", "4", op_in, os.path.join(tmp, "op-out.safetensors"))
    check(rc == 1 and "--device" in se, "op --device: not an option (%d %s)" % (rc, se.strip()))


def main():
    def tests(tmp):
        test_duplicates(tmp)
        test_empty_runs(tmp)
        test_single_file_and_index(tmp)
        test_side_files(tmp)
        test_config_merge(tmp)
        test_no_device(tmp)
    run_in_temp_dir("qtl-job-inputs-", tests)


if __name__ == "__main__":
    main()
