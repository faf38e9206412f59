#!/usr/bin/env python3
"""Hostile safetensors files (make_hostile.py) through the built tool.

    test_qtl_hostile.py QTL

For every hostile file: `qtl inspect FILE` and `qtl op pack-cols --bits 4 FILE OUT` exit with 2,
print a message naming the file and the problem, and leave nothing in OUT's folder (neither OUT
nor a temporary file). A valid file in the same run must still work, and an existing OUT must
survive a failed run unchanged. Prints a summary; exits 1 if any check fails.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_hostile  # noqa: E402
from safetensors_py import build  # noqa: E402
from checks import check, finish  # noqa: E402



def main():
    qtl = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="qtl_hostile_") as tmp:
        corpus = os.path.join(tmp, "corpus")
        subprocess.run([sys.executable, os.path.join(HERE, "make_hostile.py"), corpus], check=True)
        with open(os.path.join(corpus, "cases.json")) as f:
            cases = json.load(f)
        check(len(cases) == len(make_hostile.HOSTILE) and len(cases) >= 30,
              "corpus has %d cases" % len(cases))
        out_dir = os.path.join(tmp, "out")
        os.makedirs(out_dir)
        out = os.path.join(out_dir, "out.safetensors")
        for name, fragment in sorted(cases.items()):
            path = os.path.join(corpus, name + ".safetensors")
            for cmd in ([qtl, "inspect", path], [qtl, "op", "pack-cols", "--bits", "4", path, out]):
                r = subprocess.run(cmd, capture_output=True, text=True)
                label = "%s (%s)" % (name, cmd[1])
                check(r.returncode == 2, "%s: exit %d, want 2: %s" % (label, r.returncode, r.stderr.strip()))
                check(path in r.stderr and fragment in r.stderr,
                      "%s: message %r lacks the file or %r" % (label, r.stderr.strip(), fragment))
                check(os.listdir(out_dir) == [], "%s: left %s behind" % (label, os.listdir(out_dir)))
        # A failed run leaves an existing output untouched.
        good = os.path.join(tmp, "good.safetensors")
        with open(good, "wb") as f:
            f.write(build([("q_w", "I32", [2, 8], bytes(64))]))
        r = subprocess.run([qtl, "op", "pack-cols", "--bits", "4", good, out], capture_output=True)
        check(r.returncode == 0 and os.path.exists(out), "valid file: exit %d" % r.returncode)
        with open(out, "rb") as f:
            before = f.read()
        for name in cases:
            subprocess.run([qtl, "op", "pack-cols", "--bits", "4",
                            os.path.join(corpus, name + ".safetensors"), out], capture_output=True)
        with open(out, "rb") as f:
            check(f.read() == before, "an existing output changed after failed runs")
        check(sorted(os.listdir(out_dir)) == ["out.safetensors"],
              "temporary files left: %s" % os.listdir(out_dir))
    finish()


if __name__ == "__main__":
    main()
