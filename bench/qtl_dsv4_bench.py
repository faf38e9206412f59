#!/usr/bin/env python3
"""`qtl convert` on DeepSeek-V4's own checkpoint form, every target, beside `cp -r` of the same
bytes on equal terms (target: at least 0.8 of cp), as bench/qtl_quantize_bench.py measures.

    bench/qtl_dsv4_bench.py QTL [--scale 29] [--threads 2] [--repeat 5] [--dir /dev/shm] [--only bf16]

The checkpoint: test/tools/make_dsv4_checkpoint.py with every dimension times --scale (29: 1.07
GB; 2 layers, 4 routed MXFP4 experts of 3 matrices a layer, FP8 attention and shared experts
with E8M0 block scales, 2 shards), made once in a temporary folder under DIR (a tmpfs by
default), by a child process. Each round runs, for every target, `cp -r` of the target's
baseline folder and then `qtl convert --to TARGET --threads N` (alternated, outputs removed
between runs); the first round warms up and is dropped, the figures are medians of --repeat
rounds. The baseline is the input, or the output where that is larger (--to bf16 writes about
2.6 times what it reads). Columns as qtl_quantize_bench.py's: x cp = cp s / qtl s.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_dsv4_checkpoint as dsv4  # noqa: E402
from qtl_quantize_bench import folder_bytes, run  # noqa: E402

TARGETS = ["fp8-ue8m0", "bf16", "mxfp4", "nvfp4"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qtl")
    ap.add_argument("--scale", type=int, default=29, help="dimensions times S (default 29: 1.07 GB)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ap.add_argument("--only", default="", help="comma-separated targets to run")
    a = ap.parse_args()
    qtl = os.path.abspath(a.qtl)
    targets = [t for t in TARGETS if not a.only or t in a.only.split(",")]
    with tempfile.TemporaryDirectory(prefix="qtl_dsv4_bench_", dir=a.dir) as tmp:
        src = os.path.join(tmp, "in")
        pid = os.fork()  # the checkpoint's bytes stay out of this process's resident set
        if pid == 0:
            dsv4.make(src, scale=a.scale)
            os._exit(0)
        if os.waitpid(pid, 0)[1] != 0:
            raise RuntimeError("writing the checkpoint failed")
        out = os.path.join(tmp, "out")
        jobs = [(t, [qtl, "convert", src, out, "--to", t, "--threads", str(a.threads)]) for t in targets]
        base = {}
        for label, cmd in jobs:
            shutil.rmtree(out, ignore_errors=True)
            run(cmd)
            if folder_bytes(out) > folder_bytes(src):
                kept = os.path.join(tmp, "out_of_" + label)
                shutil.copytree(out, kept)
                base[label] = (kept, "output")
            else:
                base[label] = (src, "input")
        samples = {label: {"cp": [], "qtl": []} for label, _ in jobs}
        for r in range(a.repeat + 1):
            for label, cmd in jobs:
                for side in ("cp", "qtl"):
                    shutil.rmtree(out, ignore_errors=True)
                    m = run(["cp", "-r", base[label][0], out] if side == "cp" else cmd)
                    if r > 0:
                        samples[label][side].append(m)
        shutil.rmtree(out, ignore_errors=True)
        print("checkpoint: DeepSeek-V4's form at scale %d, %.2f GB, in %s"
              % (a.scale, folder_bytes(src) / 1e9, a.dir or tempfile.gettempdir()))
        print("qtl --threads %d; medians of %d alternated rounds after one warm-up; load average %s"
              % (a.threads, a.repeat, " ".join("%.1f" % x for x in os.getloadavg())))
        print("| qtl convert --to | qtl s | cp -r s (of) | x cp | best | minflt | majflt | peak RSS MiB |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for label, _ in jobs:
            q = samples[label]["qtl"]
            c = samples[label]["cp"]
            tq = statistics.median(x[0] for x in q)
            tc = statistics.median(x[0] for x in c)
            print("| %s | %.3f | %.3f (%s, %.2f GB) | %.2f | %.2f | %d | %d | %.0f |" % (
                label, tq, tc, base[label][1], folder_bytes(base[label][0]) / 1e9, tc / tq,
                min(x[0] for x in c) / min(x[0] for x in q), statistics.median(x[1] for x in q),
                statistics.median(x[2] for x in q), statistics.median(x[3] for x in q)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
