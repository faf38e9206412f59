#!/usr/bin/env python3
"""Fails if the PTX nvcc emits for the exactness-critical kernels has a flush-to-zero form.

Usage: ptx_no_ftz.py NVCC SOURCE -- NVCC_ARGS...

QTL's kernels promise the host's bits, which needs IEEE subnormals in every float instruction
(`mul.rn.f32`, not `mul.rn.ftz.f32`). nvcc emits `.ftz` forms under `-ftz=true` or
`-use_fast_math`, which QTL does not support; this check keeps them out of the project's own flags.
SOURCE is compiled to PTX with NVCC_ARGS; any instruction with `.ftz` is printed and fails the test.
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    nvcc, source, sep, *args = sys.argv[1:]
    assert sep == "--", "usage: ptx_no_ftz.py NVCC SOURCE -- NVCC_ARGS..."
    with tempfile.TemporaryDirectory() as tmp:
        ptx = Path(tmp) / "kernels.ptx"
        r = subprocess.run([nvcc, *args, "-ptx", "-o", str(ptx), source], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout + r.stderr)
            print(f"nvcc failed ({r.returncode})")
            return 1
        text = ptx.read_text()
    entries = len(re.findall(r"^\.visible \.entry|^\.entry|^\.weak \.entry", text, re.M))
    bad = [line.strip() for line in text.splitlines()
           if re.search(r"\.ftz\b", line) and not line.lstrip().startswith("//")]
    print(f"{entries} kernels, {len(text.splitlines())} PTX lines, {len(bad)} with .ftz")
    for line in bad[:20]:
        print("  " + line)
    if entries == 0:
        print("no kernel in the PTX: the check checked nothing")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
