#!/usr/bin/env python3
"""Every golden case of test/data/golden/ops through `qtl op` must reproduce it exactly.

    test_qtl_op.py QTL GOLDEN_OPS_DIR

"Exactly" (test/data/golden/README.md): every expected tensor present with the same name, dtype, shape and
bytes, and no other tensor; header order, padding and metadata are free. Files are parsed here with
struct/json (safetensors_py), independently of the C++ reader. Flags come from the case's params:
true -> --p, false/absent -> nothing, null -> --p none, numbers and strings verbatim.
Prints one line per failure and a summary; exits 1 if any case fails, or if an op of `qtl op
--help` has no case (except the ops that test/data/golden/README.md lists as having none yet: NO_CASES_YET).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_py import read  # noqa: E402


def flags(params):
    out = []
    for k, v in params.items():
        if v is True:
            out.append("--" + k)
        elif v is False:
            continue
        elif v is None:
            out += ["--" + k, "none"]
        else:
            out += ["--" + k, str(v)]
    return out


# test/data/golden/README.md: "the three ops between them, per-tensor-dequantize to nvfp4-quant, have no
# golden cases yet".
NO_CASES_YET = {"per-tensor-dequantize", "requantize-with-max-scale", "nvfp4-quant"}


def listed_ops(qtl):
    """The op names of `qtl op --help` (its Subcommands section)."""
    text = subprocess.run([qtl, "op", "--help"], capture_output=True, text=True).stdout
    names, section = [], False
    for line in text.splitlines():
        if line.strip() == "Subcommands:":
            section = True
        elif section and line.startswith("  ") and not line.startswith("   ") and line.split():
            names.append(line.split()[0])  # (a long name's description wraps onto a deeper line)
    return names


def compare(got_path, want_path):
    """A list of differences (empty when the files hold the same tensors)."""
    got, _ = read(got_path)
    want, _ = read(want_path)
    problems = []
    for name in sorted(set(want) - set(got)):
        problems.append("missing tensor %r" % name)
    for name in sorted(set(got) - set(want)):
        problems.append("unexpected tensor %r" % name)
    for name in sorted(set(got) & set(want)):
        gd, gs, gb = got[name]
        wd, ws, wb = want[name]
        if (gd, gs) != (wd, ws):
            problems.append("%r: got %s %s, want %s %s" % (name, gd, gs, wd, ws))
        elif gb != wb:
            first = next(i for i in range(len(gb)) if gb[i] != wb[i])
            problems.append("%r: bytes differ (first at byte %d of %d)" % (name, first, len(wb)))
    return problems


def main():
    qtl, golden = sys.argv[1], sys.argv[2]
    passed, failed = 0, 0
    per_op = {}
    with open(os.path.join(golden, "cases.jsonl")) as f:
        cases = [json.loads(line) for line in f if line.strip()]
    with tempfile.TemporaryDirectory(prefix="qtl_op_test_") as tmp:
        for c in cases:
            name, op = c["case"], c["op"]
            out = os.path.join(tmp, name + ".out.safetensors")
            cmd = [qtl, "op", op] + flags(c["params"]) + [
                os.path.join(golden, name + ".in.safetensors"), out]
            r = subprocess.run(cmd, capture_output=True, text=True)
            problems = []
            if r.returncode != 0:
                problems.append("exit %d: %s" % (r.returncode, (r.stderr or r.stdout).strip()))
            else:
                problems = compare(out, os.path.join(golden, name + ".expected.safetensors"))
            ok = not problems
            passed += ok
            failed += not ok
            per_op.setdefault(op, [0, 0])[0 if ok else 1] += 1
            if not ok:
                print("FAIL %s: %s\n     %s" % (name, " ".join(cmd[1:-2]), "\n     ".join(problems)))
            if os.path.exists(out):
                os.remove(out)
    for op, (p, f) in sorted(per_op.items()):
        print("  %-24s %3d passed, %d failed" % (op, p, f))
    uncovered = [op for op in listed_ops(qtl) if op not in per_op and op not in NO_CASES_YET]
    for op in uncovered:
        print("FAIL op %s has no golden case" % op)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or uncovered else 0


if __name__ == "__main__":
    sys.exit(main())
