#!/usr/bin/env python3
"""End-to-end timing of the qtl tool on a 4096x4096 input (process start to output written),
beside copies of the same input bytes in the same run (the ratio to `cp` is the figure).

    bench/qtl_tool_bench.py QTL [--repeat N] [--dir DIR]

Cases:
  pack-cols --bits 4                      q_w I32 [4096,4096] codes in [0,16)   (64 MiB in, 8 MiB out)
  quantize-weights --type uint4b8 --group-size 128
                                          w F16 [4096,4096] normal values      (32 MiB in, ~96 MiB out)
Baselines: `cp IN OUT` of the same input file, the same plus an fsync of OUT (qtl fsyncs its
output before renaming it into place, cp does not), and cp + fsync of a file as large as qtl's
output (the I/O floor when the output is larger than the input, as for quantize-weights). Each figure is the median of N runs (default
5) after one warm-up; the input stays in the page cache, as it would for repeated runs.
"""
import argparse
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "tools"))
from safetensors_py import build  # noqa: E402

N = 4096


def timed(cmd_or_fn, repeat):
    def once():
        t = time.perf_counter()
        if callable(cmd_or_fn):
            cmd_or_fn()
        else:
            subprocess.run(cmd_or_fn, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t
    once()
    return statistics.median(once() for _ in range(repeat))


def cp_fsync(src, dst):
    subprocess.run(["cp", src, dst], check=True)
    fd = os.open(dst, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qtl")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    rng = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="qtl_bench_", dir=a.dir) as tmp:
        pack_in = os.path.join(tmp, "pack.in.safetensors")
        # one random row of 4-bit codes, repeated (the content does not change the work)
        row = struct.pack("<%di" % N, *[rng.randrange(16) for _ in range(N)])
        with open(pack_in, "wb") as f:
            f.write(build([("q_w", "I32", [N, N], row * N)]))
        quant_in = os.path.join(tmp, "quant.in.safetensors")
        # fp16 values of N(0, 0.02), rows varied by rotating one random row
        vals = struct.pack("<%de" % N, *[rng.gauss(0.0, 0.02) for _ in range(N)])
        rows = b"".join(vals[(2 * i) % len(vals):] + vals[:(2 * i) % len(vals)] for i in range(N))
        with open(quant_in, "wb") as f:
            f.write(build([("w", "F16", [N, N], rows)]))
        out = os.path.join(tmp, "out.safetensors")
        cases = [
            ("pack-cols --bits 4", pack_in, ["op", "pack-cols", "--bits", "4"]),
            ("quantize-weights --type uint4b8 --group-size 128", quant_in,
             ["op", "quantize-weights", "--type", "uint4b8", "--group-size", "128"]),
        ]
        print("%-48s %8s %8s %9s %10s %7s %9s" % ("case (4096x4096)", "qtl ms", "cp ms", "cp+fsync",
                                                  "cp+fs out", "qtl/cp", "qtl/cp+fs"))
        for label, src, args in cases:
            t_qtl = timed([a.qtl] + args + [src, out], a.repeat)
            out_size = os.path.getsize(out)
            t_cp = timed(["cp", src, out], a.repeat)
            t_cpfs = timed(lambda: cp_fsync(src, out), a.repeat)
            same = os.path.join(tmp, "out_sized.bin")
            with open(same, "wb") as f:
                f.write(os.urandom(out_size))
            t_out = timed(lambda: cp_fsync(same, out), a.repeat)
            os.remove(same)
            print("%-48s %8.1f %8.1f %9.1f %10.1f %7.2f %9.2f   (in %d MiB, out %d MiB)" % (
                label, t_qtl * 1e3, t_cp * 1e3, t_cpfs * 1e3, t_out * 1e3, t_qtl / t_cp,
                t_qtl / t_cpfs, os.path.getsize(src) >> 20, out_size >> 20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
