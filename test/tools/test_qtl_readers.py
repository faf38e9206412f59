"""The readers (`qtl inspect`, `qtl explain --checkpoint`, `qtl lint --checkpoint`) survive their input
truncated while it is mapped, and `qtl quantize --help` says which formats --sym and
--asym apply to.

Usage: test_qtl_readers.py QTL

Each reader is stopped (QTL_TEST_STOP_AT=reading:STOP, staged_output.hpp) once the checkpoint is open
and its mappings guarded; the file is truncated; the run continues:
  inspect   reads g_idx values from the mapping (act-order detection), past the new end: the SIGBUS
            guard turns that into exit 2 naming the file ("shrank"), never a signal
  explain   read only the parsed header: the names of the whole file (exit 0, the same output as an
  lint      untruncated run), or, had they read the mapping, exit 2 naming the file — never a signal
Every run has a 20 s timeout.
"""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py as st  # noqa: E402
from checks import check, run_in_temp_dir  # noqa: E402

QTL = sys.argv[1]


def run(*args):
    try:
        p = subprocess.run([QTL] + [str(a) for a in args], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "hang", "", "timed out after 20 s"
    return p.returncode, p.stdout, p.stderr


def make_gptq(path, k=4096, n=64, group=128):
    """A GPTQ-shaped module whose g_idx (act-order: not i // group) lies past the first pages."""
    groups = k // group
    qweight = struct.pack("<%di" % (k // 8 * n), *([0x11111111] * (k // 8 * n)))
    scales = struct.pack("<%de" % (groups * n), *([0.01] * (groups * n)))
    qzeros = struct.pack("<%di" % (groups * n // 8), *([0x77777777] * (groups * n // 8)))
    g_idx = struct.pack("<%di" % k, *[(i * 7) % groups for i in range(k)])
    m = "model.layers.0.mlp.up_proj."
    with open(path, "wb") as f:
        f.write(st.build([(m + "qweight", "I32", [k // 8, n], qweight), (m + "scales", "F16", [groups, n], scales),
                          (m + "qzeros", "I32", [groups, n // 8], qzeros), (m + "g_idx", "I32", [k], g_idx)],
                         {"format": "pt"}))
    (header_len,) = struct.unpack("<Q", open(path, "rb").read(8))
    return 8 + header_len


def stopped_run(args, victim, keep):
    """Runs QTL args, stopped at the reading hook; truncates `victim` to `keep` bytes; continues."""
    env = dict(os.environ, QTL_TEST_STOP_AT="reading:STOP")
    p = subprocess.Popen([QTL] + [str(a) for a in args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    _, status = os.waitpid(p.pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        out, err = p.communicate()
        return "not stopped", out, err
    os.truncate(victim, keep)
    os.kill(p.pid, signal.SIGCONT)
    try:
        out, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return "hang", out, err
    return p.returncode, out, err


def test_inspect(tmp):
    model = os.path.join(tmp, "inspect", "model.safetensors")
    os.makedirs(os.path.dirname(model))
    data_start = make_gptq(model)
    rc, out, err = run("inspect", model)
    check(rc == 0 and "act-order" in out, "inspect of the whole file sees act-order: %s %s" % (rc, out + err))
    rc, out, err = stopped_run(["inspect", model], model, data_start)
    check(rc == 2 and model in err and "shrank" in err,
          "inspect, input truncated while mapped: exit 2 naming the file, no SIGBUS: %s %s" % (rc, err))


def test_explain_lint(tmp):
    folder = os.path.join(tmp, "names")
    os.makedirs(folder)
    model = os.path.join(folder, "model.safetensors")
    make_gptq(model)
    whole = model + ".whole"
    shutil.copyfile(model, whole)
    cfg = os.path.join(tmp, "fp8.json")
    with open(cfg, "w") as f:
        json.dump({"quant_method": "fp8", "activation_scheme": "dynamic",
                   "modules_to_not_convert": ["lm_head"]}, f)
    for cmd in (["explain", "--config", cfg, "--checkpoint", folder, "--json"],
                ["lint", "--config", cfg, "--checkpoint", folder]):
        shutil.copyfile(whole, model)
        ref_rc, ref_out, ref_err = run(*cmd)
        check(ref_rc in (0, 3), "%s of the whole file: %s %s" % (cmd[0], ref_rc, ref_err))
        for keep in (8, 4):  # the data gone; the header gone too
            shutil.copyfile(whole, model)
            rc, out, err = stopped_run(cmd, model, keep)
            same = rc == ref_rc and out == ref_out
            named = rc == 2 and model in err and "shrank" in err
            check(same or named, "%s, input truncated to %d bytes while mapped: the whole file's answer or exit 2 "
                  "naming the file, never a signal: %s %s" % (cmd[0], keep, rc, err[-300:]))


def test_sym_help():
    rc, out, err = run("quantize", "--help")
    lines = [x for x in out.splitlines() if x.strip().startswith(("--sym", "--asym"))]
    check(rc == 0 and len(lines) == 2, "quantize --help lists --sym and --asym: %s" % lines)
    for line in lines:
        check("gptq, w4a16, w8a16 only" in line, "the formats --sym/--asym apply to: " + line)


def main():
    def tests(tmp):
        test_inspect(tmp)
        test_explain_lint(tmp)
        test_sym_help()

    run_in_temp_dir("qtl-readers-test-", tests)


if __name__ == "__main__":
    main()
