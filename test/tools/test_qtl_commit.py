"""`qtl quantize` never leaves a mixed or stale output folder.

Usage: test_qtl_commit.py QTL

Two reference outputs are made by clean runs: A (8-bit, two shards and an index, from input A) and B
(4-bit, one file, from input B). Every other run goes into a folder that holds A and is stopped, made
to fail or refused; afterwards the WHOLE folder (every file name and every byte) must equal A or B,
and nothing hidden may be left beside it once a later run has cleaned up. Stops are deterministic:
QTL_TEST_STOP_AT=STEP[:TERM] makes the tool kill itself at a commit step (staged_output.hpp).
  1. killed (SIGKILL, SIGTERM) at every commit step, with RENAME_EXCHANGE and on the fallback path
  2. the swap failing (QTL_TEST_FAIL_AT=swap): exit 2, the folder still A
  3. a second run while one holds the folder's lock: refused at once, exit 2
  4. a single-file output over a sharded one: no old index or shard survives
  5. an unreadable side file in the input folder: exit 2, nothing written (a FIFO or a dangling
     link there is skipped with a warning: test_qtl_job_inputs.py)
  6. an already-quantized input: exit 2 naming the tensors
  7. group sizes and `dynamic` values that reach the output config: the command line's rules
Standard library only; runs in a second or two (it also runs under ASan in CI).
"""
import fcntl
import json
import os
import random
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from checks import check, finish  # noqa: E402

QTL = sys.argv[1]


def run(*args, env=None, user=None):
    e = dict(os.environ)
    e.update(env or {})
    pre = None
    if user is not None:
        def pre():
            os.setgid(user)
            os.setuid(user)
    p = subprocess.run([QTL] + [str(a) for a in args], capture_output=True, text=True, env=e,
                       preexec_fn=pre, timeout=60)
    return p.returncode, p.stdout, p.stderr


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


H, I = 64, 128


def make_input(folder, seed, shards):
    rnd = random.Random(seed)
    tensors = []

    def add(name, shape, mean=0.0):
        n = 1
        for d in shape:
            n *= d
        vals = [f16(mean + 0.02 * rnd.gauss(0, 1)) for _ in range(n)]
        tensors.append((name, "F16", shape, struct.pack("<%de" % n, *vals)))

    add("model.embed_tokens.weight", [64, H])
    for i in range(2):
        p = "model.layers.%d." % i
        add(p + "self_attn.q_proj.weight", [H, H])
        add(p + "self_attn.o_proj.weight", [H, H])
        add(p + "mlp.up_proj.weight", [I, H])
        add(p + "mlp.down_proj.weight", [H, I])
        add(p + "input_layernorm.weight", [H], 1.0)
    add("lm_head.weight", [64, H])
    st.write_checkpoint(folder, tensors, shards)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "hidden_size": H, "seed": seed}, f)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump({"seed": seed}, f)
    return tensors


def snapshot(folder):
    """{relative path: bytes} of everything under `folder` (None when it does not exist)."""
    if not os.path.isdir(folder):
        return None
    out = {}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), folder) + "/"] = b""
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out[os.path.relpath(os.path.join(root, f), folder)] = fh.read()
    return out


def hidden_beside(folder):
    parent, name = os.path.split(folder.rstrip("/"))
    return sorted(f for f in os.listdir(parent) if f.startswith("." + name + ".qtl-"))


ARGS_A = ["--format", "gptq", "--bits", "8", "--group-size", "32"]
ARGS_B = ["--format", "gptq", "--bits", "4", "--group-size", "64"]


class Refs:
    pass


def references(tmp):
    r = Refs()
    r.in_a = os.path.join(tmp, "in-a")
    r.in_b = os.path.join(tmp, "in-b")
    make_input(r.in_a, 1, shards=2)
    make_input(r.in_b, 2, shards=1)
    r.out_a = os.path.join(tmp, "ref-a")
    r.out_b = os.path.join(tmp, "ref-b")
    rc, _, err = run("quantize", r.in_a, r.out_a, *ARGS_A)
    check(rc == 0, "reference A: " + err)
    rc, _, err = run("quantize", r.in_b, r.out_b, *ARGS_B)
    check(rc == 0, "reference B: " + err)
    r.a = snapshot(r.out_a)
    r.b = snapshot(r.out_b)
    check(r.a is not None and "model.safetensors.index.json" in r.a and "model-00002-of-00002.safetensors" in r.a,
          "reference A is sharded")
    check(r.b is not None and sorted(r.b) == [".qtl-output", "config.json", "model.safetensors", "quantize_config.json",
                                              "tokenizer.json"], "reference B: one file: %s" % sorted(r.b or {}))
    # the two runs are told apart by every file: bits in the configs, seeds in the copies
    ca = json.loads(r.a["config.json"])
    cb = json.loads(r.b["config.json"])
    check(ca["quantization_config"]["bits"] == 8 and cb["quantization_config"]["bits"] == 4, "A 8-bit, B 4-bit")
    # a second clean run gives the same bytes: the outputs are deterministic, so equality means "from that run"
    again = os.path.join(tmp, "ref-b-again")
    run("quantize", r.in_b, again, *ARGS_B)
    check(snapshot(again) == r.b, "quantize is deterministic")
    shutil.rmtree(again, ignore_errors=True)
    return r


def fresh_a(r, folder):
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(r.out_a, folder)


def which(r, snap):
    return "A" if snap == r.a else "B" if snap == r.b else "MIXED" if snap is not None else "MISSING"


def test_killed(tmp, r):
    """1. A run killed at each commit step leaves A or B whole; the next run cleans up."""
    cases = [("staged", "", "A"), ("swapped", "", "B"),
             ("staged", "1", "A"), ("aside", "1", "MISSING"), ("swapped", "1", "B")]
    for step, no_exchange, expect in cases:
        for term in (False, True):
            out = os.path.join(tmp, "out")
            fresh_a(r, out)
            env = {"QTL_TEST_STOP_AT": step + (":TERM" if term else "")}
            if no_exchange:
                env["QTL_TEST_NO_EXCHANGE"] = "1"
            what = "killed at %s (%s, %s)" % (step, "fallback" if no_exchange else "exchange",
                                              "SIGTERM" if term else "SIGKILL")
            rc, _, _ = run("quantize", r.in_b, out, *ARGS_B, env=env)
            check(rc == -(signal.SIGTERM if term else signal.SIGKILL), what + ": died by the signal, rc %d" % rc)
            got = which(r, snapshot(out))
            check(got == expect, what + ": the folder holds %s, expected %s" % (got, expect))
            if term and step == "staged":
                check(hidden_beside(out) == [], what + ": the handler removed the staging folder: %s"
                      % hidden_beside(out))
            if expect == "MISSING":
                # The next run puts the old output back before it even reads its input.
                rc, _, err = run("quantize", os.path.join(tmp, "no-such-input"), out, *ARGS_B)
                check(rc == 2 and "put back" in err, what + ": the next run puts A back: " + err)
                check(which(r, snapshot(out)) == "A", what + ": A back in place")
            rc, _, err = run("quantize", r.in_b, out, *ARGS_B)
            check(rc == 0, what + ": the next run succeeds: " + err)
            check(which(r, snapshot(out)) == "B", what + ": the next run leaves B")
            check(hidden_beside(out) == [], what + ": nothing hidden left beside: %s" % hidden_beside(out))
    # into a folder that did not exist: killed before the swap, no file under a final name
    out = os.path.join(tmp, "new-out")
    shutil.rmtree(out, ignore_errors=True)
    run("quantize", r.in_b, out, *ARGS_B, env={"QTL_TEST_STOP_AT": "staged"})
    check(snapshot(out) in (None, {}), "killed into a new folder: no file under a final name: %s" % snapshot(out))
    shutil.rmtree(out, ignore_errors=True)


def test_swap_fails(tmp, r):
    """2. The swap fails (as a rename into a folder this user may not change): exit 2, A untouched."""
    for no_exchange in ("", "1"):
        out = os.path.join(tmp, "out")
        fresh_a(r, out)
        env = {"QTL_TEST_FAIL_AT": "swap"}
        if no_exchange:
            env["QTL_TEST_NO_EXCHANGE"] = "1"
        rc, _, err = run("quantize", r.in_b, out, *ARGS_B, env=env)
        check(rc == 2 and "cannot move the finished output into place" in err and out in err,
              "a failed swap: exit 2 naming the folder: %d %s" % (rc, err))
        check(which(r, snapshot(out)) == "A", "a failed swap leaves A whole")
        check(hidden_beside(out) == [], "a failed swap leaves nothing hidden: %s" % hidden_beside(out))


def test_lock(tmp, r):
    """3. A second run into a folder whose lock another run holds is refused at once."""
    out = os.path.join(tmp, "out")
    fresh_a(r, out)
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        rc, _, err = run("quantize", r.in_b, out, *ARGS_B)
        check(rc == 2 and "another qtl run is writing this folder" in err, "locked: refused: %d %s" % (rc, err))
        check(which(r, snapshot(out)) == "A", "locked: the folder untouched")
        check(hidden_beside(out) == [], "locked: nothing hidden left")
    finally:
        os.close(fd)
    rc, _, err = run("quantize", r.in_b, out, *ARGS_B)
    check(rc == 0 and which(r, snapshot(out)) == "B", "unlocked: the run goes through: " + err)


def test_old_files_go(tmp, r):
    """4. Files of the old output that the new one lacks do not survive; the folder is checked."""
    out = os.path.join(tmp, "out")
    fresh_a(r, out)
    with open(os.path.join(out, "extra-old-file.bin"), "wb") as f:
        f.write(b"old")
    os.makedirs(os.path.join(out, "subfolder"))
    rc, _, err = run("quantize", r.in_b, out, *ARGS_B)
    check(rc == 0 and which(r, snapshot(out)) == "B", "single-file output over a sharded one: exactly B: %s %s"
          % (err, sorted(snapshot(out) or {})))
    rc, so, _ = run("inspect", out, "--json")
    check(rc == 0 and "model-00001-of-00002" not in so, "inspect reads the new output only")
    # a folder that is not a checkpoint is never replaced
    notes = os.path.join(tmp, "notes")
    os.makedirs(notes, exist_ok=True)
    with open(os.path.join(notes, "thesis.txt"), "w") as f:
        f.write("precious")
    rc, _, err = run("quantize", r.in_b, notes, *ARGS_B)
    check(rc == 2 and "holds thesis.txt (not a checkpoint's files)" in err, "a folder of other files is refused: " + err)
    check(os.listdir(notes) == ["thesis.txt"], "and left alone")
    # nor one that holds the input
    rc, _, err = run("quantize", os.path.join(r.in_b), tmp, *ARGS_B)
    check(rc == 2 and "holds the input" in err,
          "a folder holding the input is refused: " + err)


def test_bad_inputs(tmp, r):
    """5. Every input file that cannot be read whole is an error; 6. quantized input is refused."""
    out = os.path.join(tmp, "out")
    src = os.path.join(tmp, "in-bad")

    def unreadable(folder):
        p = os.path.join(folder, "tokenizer.json")
        os.chmod(p, 0)
        return p, "Permission denied"

    cases = [unreadable]
    for make in cases:
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(r.in_b, src)
        os.chmod(src, 0o777)
        path, words = make(src)
        fresh_a(r, out)
        os.chmod(out, 0o777)
        # unprivileged, so that a mode-000 file is unreadable even when the tests run as root
        user = 65534 if os.getuid() == 0 else None
        rc, _, err = run("quantize", src, out, *ARGS_B, user=user)
        check(rc == 2 and path in err and words in err, "%s: exit 2 naming it (%s): %d %s" % (make.__name__, words, rc, err))
        os.chmod(out, 0o755)
        check(which(r, snapshot(out)) == "A", "%s: the output folder untouched" % make.__name__)
        check(hidden_beside(out) == [], "%s: nothing hidden left: %s" % (make.__name__, hidden_beside(out)))
    shutil.rmtree(src, ignore_errors=True)
    # 6. already quantized: A itself (GPTQ), and a float checkpoint whose config says it is quantized
    for fmt in (["--format", "fp8"], ["--format", "gptq"]):
        rc, _, err = run("quantize", r.out_a, os.path.join(tmp, "requant"), *fmt)
        check(rc == 2 and "quantized already" in err and "qweight" in err and "GPTQ" in err,
              "GPTQ input refused for %s, naming tensors: %d %s" % (fmt, rc, err))
        check(not os.path.exists(os.path.join(tmp, "requant")), "nothing written for a quantized input")
    shutil.copytree(r.in_b, src)
    with open(os.path.join(src, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "quantization_config": {"quant_method": "fp8"}}, f)
    rc, _, err = run("quantize", src, os.path.join(tmp, "requant"), *ARGS_B)
    check(rc == 2 and "quantized already" in err and "'fp8'" in err, "a quantized config refused: " + err)
    fp8 = os.path.join(tmp, "fp8-in")
    os.makedirs(fp8)
    with open(os.path.join(fp8, "model.safetensors"), "wb") as f:
        f.write(st.build([("model.layers.0.mlp.up_proj.weight", "F8_E4M3", [64, 64], bytes(4096))]))
    rc, _, err = run("quantize", fp8, os.path.join(tmp, "requant"), *ARGS_B)
    check(rc == 2 and "quantized already" in err and "up_proj.weight" in err, "F8 tensors refused: " + err)
    for bad_json in ("[1, 2]", '"text"'):
        with open(os.path.join(src, "config.json"), "w") as f:
            f.write(bad_json)
        rc, _, err = run("quantize", src, os.path.join(tmp, "requant"), *ARGS_B)
        check(rc == 2 and os.path.join(src, "config.json") in err and "not an object" in err,
              "config.json %s: named, in words: %s" % (bad_json, err))
    shutil.rmtree(src, ignore_errors=True)


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def test_values(tmp, r):
    """7. Every value that reaches an output config passes the command line's rules; lint and
    explain apply the same ones; flags of the other format are refused."""
    out = os.path.join(tmp, "out-values")

    def refused(args, want_rc, words, what):
        rc, _, err = run("quantize", r.in_b, out, *args)
        check(rc == want_rc and all(w in err for w in words), "%s: exit %d naming %s: %d %s" % (what, want_rc, words, rc, err))
        check(not os.path.exists(out), what + ": nothing written")

    # K is 64 or 128 in input B: 1024 does not divide it (the engines raise), whatever the source
    refused(["--format", "gptq", "--group-size", "1024"], 2, ["1024", "K = 64"], "--group-size 1024")
    refused(["--format", "gptq", "--group-size", "99999999999999999999"], 1, ["--group-size", "too large"],
            "--group-size beyond int64")
    for g in ("0", "-2", "abc", "64x"):
        refused(["--format", "gptq", "--group-size", g], 1, ["--group-size " + g], "--group-size " + g)
    base = {"quant_method": "gptq", "bits": 4, "group_size": 64, "desc_act": False, "sym": True}
    cfg = write_json(os.path.join(tmp, "g1024.json"), dict(base, group_size=1024))
    refused(["--format", "gptq", "--config", cfg], 2, ["1024", "K = 64"], "config group_size 1024")
    bad_rules = [({"bits": "four"}, ".bits", "a string"), ({"group_size": "64"}, ".group_size", "a string"),
                 ({"bits": 4.0}, ".bits", "not an integer"), ({"sym": 1}, ".sym", "not true or false"),
                 ({"group_size": 1024}, "1024", "K = "), ({"bits": 3}, ".bits 3", "4- or 8-bit"),
                 ({"desc_act": True}, "desc_act", "act-order"), ({"group_size": 0}, "group_size 0", "-1")]
    for body, w1, w2 in bad_rules:
        doc = dict(base, dynamic={"+:.*mlp.*": body})
        cfg = write_json(os.path.join(tmp, "dyn.json"), {"quantization_config": doc})
        refused(["--format", "gptq", "--config", cfg], 2, [w1, w2], "dynamic %s" % body)
    cfg = write_json(os.path.join(tmp, "null.json"), dict(base, bits=None))
    refused(["--format", "gptq", "--config", cfg], 2, ["bits is null"], '"bits": null')
    # lint: the same rules, reported as problems (exit 3); explain refuses (exit 2)
    names = os.path.join(tmp, "modules.txt")
    with open(names, "w") as f:
        f.write("model.layers.0.mlp.up_proj\nmodel.layers.0.self_attn.q_proj\n")
    lint_cases = [dict(base, group_size=0), dict(base, group_size=-2), dict(base, dynamic={"+:.*mlp.*": {"bits": "four"}}),
                  dict(base, dynamic={"+:.*mlp.*": {"group_size": "64"}}),
                  {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [0, 128]},
                  {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": "128"}]
    for doc in lint_cases:
        cfg = write_json(os.path.join(tmp, "lint.json"), {"quantization_config": doc})
        rc, so, _ = run("lint", "--config", cfg, "--modules", names)
        check(rc == 3 and "value:" in so, "lint finds the bad value in %s: %d %s" % (doc, rc, so))
        rc, _, err = run("explain", "--config", cfg, "--modules", names)
        check(rc == 2 and cfg in err, "explain refuses %s: %d %s" % (doc, rc, err))
    cfg = write_json(os.path.join(tmp, "good.json"), {"quantization_config": base})
    rc, so, _ = run("lint", "--config", cfg, "--modules", names)
    check(rc == 0, "a good config lints clean: %s" % so)
    # flags of the other format
    refused(["--format", "fp8", "--bits", "8"], 1, ["--bits", "gptq"], "--bits with fp8")
    refused(["--format", "fp8", "--group-size", "64"], 1, ["--group-size", "gptq"], "--group-size with fp8")
    refused(["--format", "fp8", "--asym"], 1, ["--asym"], "--asym with fp8")
    refused(["--format", "gptq", "--fp8-scheme", "block"], 1, ["--fp8-scheme", "fp8"], "--fp8-scheme with gptq")
    # and a config the rules accept still goes through, dynamic values copied as written
    doc = dict(base, dynamic={"+:.*mlp.*": {"bits": 8, "group_size": 32}})
    cfg = write_json(os.path.join(tmp, "ok.json"), {"quantization_config": doc})
    rc, _, err = run("quantize", r.in_b, out, "--format", "gptq", "--config", cfg)
    check(rc == 0, "a valid dynamic config quantizes: " + err)
    if rc == 0:
        with open(os.path.join(out, "config.json")) as f:
            q = json.load(f)["quantization_config"]
        check(q["dynamic"] == doc["dynamic"] and q["group_size"] == 64, "dynamic copied: %s" % q)
    shutil.rmtree(out, ignore_errors=True)


def main():
    tmp = tempfile.mkdtemp(prefix="qtl-commit-test-")
    os.chmod(tmp, 0o777)
    try:
        r = references(tmp)
        test_killed(tmp, r)
        test_swap_fails(tmp, r)
        test_lock(tmp, r)
        test_old_files_go(tmp, r)
        test_bad_inputs(tmp, r)
        test_values(tmp, r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
