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
2.6 times what it reads). The measurement and the columns are qtl_quantize_bench.py's
(`alternate`, `print_table`): x cp = cp s / qtl s.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_dsv4_checkpoint as dsv4  # noqa: E402
from qtl_quantize_bench import alternate, folder_bytes, print_table  # noqa: E402

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
        jobs = [("convert --to " + t, src, [qtl, "convert", src, out, "--to", t, "--threads", str(a.threads)])
                for t in targets]
        base, samples = alternate(jobs, tmp, out, a.repeat)
        print("checkpoint: DeepSeek-V4's form at scale %d, %.2f GB, in %s"
              % (a.scale, folder_bytes(src) / 1e9, a.dir or tempfile.gettempdir()))
        print("qtl --threads %d; medians of %d alternated rounds after one warm-up; load average %s"
              % (a.threads, a.repeat, " ".join("%.1f" % x for x in os.getloadavg())))
        print_table(jobs, base, samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
