"""`qtl` never crashes or hangs on a hostile system, and names what is wrong.

Usage: test_qtl_robust.py QTL

  1. threads the system will not create (RLIMIT_NPROC): fewer workers, a warning, the same output;
     --threads out of range: a command-line error naming the range
  2. the input truncated while a run reads it (the run stopped with QTL_TEST_STOP_AT=reading:STOP,
     the file truncated, the run continued): exit 2 naming the file, no SIGBUS, nothing left
  3. a FIFO as model.safetensors, the index, a shard, the input's config.json or --config: exit 2
     at once (inspect, quantize, explain, lint), never a blocking open
 and: each bad file named with its problem in words (directories, dangling and looping links);
     NaN/Inf weights refused (--allow-nonfinite); inspect escapes control bytes in names; --help
     lists exit code 3; a BOM or NUL padding around the header refused, spaces accepted (the
     safetensors library's reader, 0.8.0, decides the same).
Every run has a 20 s timeout: a hang fails the test instead of stalling it.
"""
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from checks import check, finish  # noqa: E402

QTL = sys.argv[1]


def run(*args, pre=None, env=None):
    e = dict(os.environ)
    e.update(env or {})
    try:
        p = subprocess.run([QTL] + [str(a) for a in args], capture_output=True, text=True, timeout=20,
                           preexec_fn=pre, env=e)
    except subprocess.TimeoutExpired:
        return "hang", "", "timed out after 20 s"
    return p.returncode, p.stdout, p.stderr


def make_input(folder, n=256, k=256, layers=4):
    os.makedirs(folder, exist_ok=True)
    vals = [((i * 37) % 101 - 50) / 1000.0 for i in range(n * k)]
    data = struct.pack("<%de" % (n * k), *vals)
    tensors = [("model.layers.%d.mlp.up_proj.weight" % i, "F16", [n, k], data) for i in range(layers)]
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(st.build(tensors, {"format": "pt"}))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "llama"}, f)


def snapshot(folder):
    if not os.path.isdir(folder):
        return None
    out = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            out[name] = f.read()
    return out


def test_threads(tmp, src):
    """8."""
    ref = os.path.join(tmp, "ref")
    rc, _, err = run("quantize", src, ref, "--format", "gptq", "--threads", "1")
    check(rc == 0, "reference run: " + err)
    out = os.path.join(tmp, "out-threads")

    def limit():
        # unprivileged (root is not held to RLIMIT_NPROC); one task: no thread can be created
        if os.getuid() == 0:
            os.setgid(65534)
            os.setuid(65534)
        resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))

    os.chmod(tmp, 0o777)
    # LeakSanitizer's exit-time check needs a thread of its own, which RLIMIT_NPROC 1 refuses (it then
    # fails the run as "LeakSanitizer has encountered a fatal error"): no leak check in this one run
    # of a sanitizer build; an ordinary build ignores the variable.
    no_lsan = {"ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))}
    rc, so, err = run("quantize", src, out, "--format", "gptq", "--threads", "50", pre=limit, env=no_lsan)
    check(rc == 0 and "could start only" in err, "--threads 50 under RLIMIT_NPROC 1: a warning, exit 0: %s %s" % (rc, err))
    check(snapshot(out) == snapshot(ref), "fewer threads, the same output")
    check(not [f for f in os.listdir(tmp) if ".qtl-" in f], "nothing hidden left")
    for bad in ("-1", "100000", "x"):
        rc, _, err = run("quantize", src, os.path.join(tmp, "never"), "--format", "gptq", "--threads", bad)
        check(rc == 1 and "--threads" in err and len(err) < 300, "--threads %s: exit 1, short message: %s %s"
              % (bad, rc, err))


def test_truncated(tmp, src):
    """9."""
    victim = os.path.join(tmp, "victim")
    shutil.copytree(src, victim)
    out = os.path.join(tmp, "out-trunc")
    env = dict(os.environ, QTL_TEST_STOP_AT="reading:STOP")
    p = subprocess.Popen([QTL, "quantize", victim, out, "--format", "gptq", "--threads", "1"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status = os.waitpid(p.pid, os.WUNTRACED)
    check(os.WIFSTOPPED(status), "the run stopped at the hook")
    model = os.path.join(victim, "model.safetensors")
    os.truncate(model, os.path.getsize(model) // 3)
    os.kill(p.pid, signal.SIGCONT)
    try:
        _, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    check(p.returncode == 2 and model in err and "shrank" in err,
          "truncated while read: exit 2 naming the file: %s %s" % (p.returncode, err))
    check(not os.path.exists(out) or os.listdir(out) == [], "nothing under the output's name")
    check(not [f for f in os.listdir(tmp) if f.startswith(".out-trunc.qtl-")], "no staging folder left")


def test_fifos(tmp, src):
    """10."""
    sharded = os.path.join(tmp, "sharded")
    os.makedirs(sharded)
    vals = struct.pack("<%de" % (64 * 64), *([0.01] * (64 * 64)))
    for i in (1, 2):
        with open(os.path.join(sharded, "model-%05d-of-00002.safetensors" % i), "wb") as f:
            f.write(st.build([("model.layers.%d.mlp.up_proj.weight" % i, "F16", [64, 64], vals)]))
    with open(os.path.join(sharded, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": {"model.layers.1.mlp.up_proj.weight": "model-00001-of-00002.safetensors",
                                                   "model.layers.2.mlp.up_proj.weight": "model-00002-of-00002.safetensors"}}, f)
    cfg = os.path.join(tmp, "cfg.json")
    with open(cfg, "w") as f:
        json.dump({"quant_method": "gptq", "bits": 4, "group_size": 64, "desc_act": False, "sym": True}, f)
    cases = []
    for folder, name in ((src, "model.safetensors"), (src, "config.json"), (sharded, "model.safetensors.index.json"),
                         (sharded, "model-00002-of-00002.safetensors")):
        d = os.path.join(tmp, "fifo-" + name)
        shutil.copytree(folder, d)
        os.remove(os.path.join(d, name))
        os.mkfifo(os.path.join(d, name))
        cases.append((d, os.path.join(d, name)))
    for d, fifo in cases:
        quant = run("quantize", d, os.path.join(tmp, "never"), "--format", "gptq", "--group-size", "64")
        if not fifo.endswith("config.json"):
            runs = [("inspect", run("inspect", d)), ("quantize", quant),
                    ("explain", run("explain", "--config", cfg, "--checkpoint", d)),
                    ("lint", run("lint", "--config", cfg, "--checkpoint", d))]
        else:
            runs = [("quantize", quant)]
        for what, (rc, _, err) in runs:
            check(rc == 2 and fifo in err and "FIFO" in err, "%s with a FIFO %s: exit 2 naming it: %s %s"
                  % (what, os.path.basename(fifo), rc, err))
    fifo_cfg = os.path.join(tmp, "fifo-cfg.json")
    os.mkfifo(fifo_cfg)
    for args in (["quantize", src, os.path.join(tmp, "never"), "--format", "gptq", "--config", fifo_cfg],
                 ["explain", "--config", fifo_cfg, "--checkpoint", src], ["lint", "--config", fifo_cfg]):
        rc, _, err = run(*args)
        check(rc == 2 and fifo_cfg in err and "FIFO" in err, "%s --config FIFO: exit 2 naming it: %s %s"
              % (args[0], rc, err))
    check(not os.path.exists(os.path.join(tmp, "never")), "nothing written")


def test_messages(tmp, src):
    """Each file and problem named in words."""
    d = os.path.join(tmp, "msg")
    shutil.copytree(src, d)
    os.remove(os.path.join(d, "config.json"))
    os.makedirs(os.path.join(d, "config.json"))
    rc, _, err = run("quantize", d, os.path.join(tmp, "never"), "--format", "gptq")
    check(rc == 2 and "config.json" in err and "directory" in err, "config.json a directory: " + err)
    rc, _, err = run("quantize", src, os.path.join(tmp, "never"), "--format", "gptq", "--config", d)
    check(rc == 2 and d in err and "directory" in err, "--config a directory: " + err)
    # a 90 MB header under a 240 MB address-space limit: named, not std::bad_alloc (skipped under
    # ASan, which cannot start under such a limit)
    big = os.path.join(tmp, "big-header.safetensors")
    text = b'{"__metadata__":{"x":"' + b"a" * 90_000_000 + b'"}}'
    with open(big, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
    rc0, _, _ = run("--version", pre=lambda: resource.setrlimit(resource.RLIMIT_AS, (240 << 20, 240 << 20)))
    if rc0 == 0:
        rc, _, err = run("inspect", big, pre=lambda: resource.setrlimit(resource.RLIMIT_AS, (240 << 20, 240 << 20)))
        check(rc == 2 and big in err and "more memory" in err, "a header too big for the memory limit: %s %s" % (rc, err))
    os.remove(big)
    for kind, target in (("dangling", "missing"), ("looping", "model.safetensors")):
        l = os.path.join(tmp, kind)
        os.makedirs(l)
        os.symlink(os.path.join(l, target) if kind == "dangling" else "model.safetensors",
                   os.path.join(l, "model.safetensors"))
        rc, _, err = run("inspect", l)
        words = "missing file" if kind == "dangling" else "loops"
        check(rc == 2 and "model.safetensors" in err and words in err, "%s link as model.safetensors: %s" % (kind, err))


def test_small_things(tmp):
    """NaN/Inf weights refused by default; inspect escapes names; --help lists exit code 3;
    a BOM or NUL padding around the header refused (as the safetensors library's reader does)."""
    for fmt in (["--format", "gptq", "--group-size", "64"], ["--format", "fp8"],
                ["--format", "w4a16", "--group-size", "32"], ["--format", "w8a16", "--asym", "--group-size", "-1"]):
        for bad, word in ((float("nan"), "NaN"), (float("inf"), "+Inf"), (float("-inf"), "-Inf")):
            d = os.path.join(tmp, "nonfinite")
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            vals = [0.01] * (64 * 64)
            vals[64 * 3 + 5] = bad
            with open(os.path.join(d, "model.safetensors"), "wb") as f:
                f.write(st.build([("model.layers.0.mlp.up_proj.weight", "F32", [64, 64],
                                   struct.pack("<%df" % len(vals), *vals))]))
            out = os.path.join(tmp, "out-nonfinite")
            rc, _, err = run("quantize", d, out, *fmt)
            check(rc == 2 and "up_proj.weight" in err and "[3, 5]" in err and word in err,
                  "%s %s: refused naming tensor and element: %s %s" % (fmt[1], word, rc, err))
            check(not os.path.exists(out), "nothing written for a non-finite weight")
            rc, _, err = run("quantize", d, out, *fmt, "--allow-nonfinite")
            check(rc == 0, "--allow-nonfinite quantizes it: " + err)
            shutil.rmtree(out, ignore_errors=True)
    name = "evil\x1b[2J\r\nforged.row  F32  [1]  4"
    p = os.path.join(tmp, "evil.safetensors")
    with open(p, "wb") as f:
        f.write(st.build([(name, "F32", [1], b"\0\0\0\0")]))
    rc, so, _ = run("inspect", p)
    check(rc == 0 and "\x1b" not in so and "\r" not in so and "forged.row" in so and "\\x1b" in so
          and len([l for l in so.splitlines() if "forged" in l]) == 1, "inspect escapes control bytes: %r" % so)
    rc, so, _ = run("inspect", p, "--json")
    check(rc == 0 and json.loads(so)["files"][0]["tensors"][0]["name"] == name, "inspect --json keeps the name")
    rc, so, _ = run("--help")
    check(rc == 0 and "3 qtl lint found problems" in so.replace("\n", " ").replace("  ", " "), "--help lists exit 3")
    ok = json.dumps({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    for what, header, words in (("BOM", b"\xef\xbb\xbf" + ok, "byte-order mark"), ("NUL padding", ok + b"\0\0\0", "NUL byte")):
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header + b"\0\0\0\0")
        rc, _, err = run("inspect", p)
        check(rc == 2 and words in err, "%s before/after the header refused: %s" % (what, err))
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(ok) + 3) + ok + b"   " + b"\0\0\0\0")
    rc, _, err = run("inspect", p)
    check(rc == 0, "space padding accepted (the safetensors reader accepts it): " + err)


def main():
    tmp = tempfile.mkdtemp(prefix="qtl-robust-test-")
    try:
        src = os.path.join(tmp, "src")
        make_input(src)
        test_threads(tmp, src)
        test_truncated(tmp, src)
        test_fifos(tmp, src)
        test_messages(tmp, src)
        test_small_things(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
