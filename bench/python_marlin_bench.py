#!/usr/bin/env python3
"""The Marlin repack through Python against the C++ library's own benchmark, in one run.

gptq_marlin_repack (without and with act-order) and awq_marlin_repack of a 4-bit K x N weight,
numpy arrays in and out: the medians of --runs calls (wall and thread CPU time), bytes/s of the
CPU time with bench/marlin_bench.cpp's accounting (the int32 words read once and written once:
2 * K*N/2 bytes), beside the same benchmark of qtl_bench_marlin (one thread both; Google
Benchmark's bytes/s are per CPU second too) run by this script: qtl/C++ (target: at least 0.8 on
4096x4096). The Python figure includes the call, the checks and the new output's first touch,
which the C++ benchmark (one output reused) does not. The engines' repack is a CUDA kernel, so there is no reference Python to time.
Needs numpy only (bench/python_bench.py, which needs torch, covers the reference's functions).

    PYTHONPATH=<dir holding the qtl package> VENV/bin/python bench/python_marlin_bench.py \\
        --cpp-bench build/bench [--shapes 4096x4096,8192x28672] [--runs 7]
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import time

import numpy as np

import qtl


def median_times(fn, runs):
    """(wall, CPU) medians in seconds: the CPU time of the calling thread (the library runs on it)
    is what Google Benchmark's bytes_per_second counts, and it survives a loaded machine."""
    fn()  # warm-up: page faults of the first output, caches
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.thread_time()
        fn()
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - t0)
    return statistics.median(wall), statistics.median(cpu)


def cpp_rates(bench_dir, k, n):
    """{case: bytes/s} of qtl_bench_marlin's 4-bit repacks for this shape (empty without it)."""
    path = pathlib.Path(bench_dir or "") / "qtl_bench_marlin"
    if bench_dir is None or not path.exists():
        return {}
    filt = f"bm_repack_(gptq4|awq4)/K:{k}/N:{n}(/act:[01])?$"
    r = subprocess.run([str(path), f"--benchmark_filter={filt}", "--benchmark_format=json",
                        "--benchmark_min_time=0.5", "--benchmark_repetitions=3",
                        "--benchmark_report_aggregates_only=true"], capture_output=True, text=True)
    out = {}
    if r.returncode != 0 or not r.stdout.strip():
        return out
    for b in json.loads(r.stdout)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        key = "awq" if "awq4" in name else "gptq act-order" if name.endswith("act:1") else "gptq"
        out[key] = b["bytes_per_second"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpp-bench", help="folder of qtl_bench_marlin (build/bench)")
    ap.add_argument("--shapes", default="4096x4096")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(42)
    print(f"qtl {qtl.__version__}, numpy {np.__version__}; medians of {args.runs} runs, one thread")
    print()
    print("| shape | repack | qtl wall ms | qtl CPU ms | qtl GB/s (CPU) | C++ GB/s (CPU) | qtl/C++ |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for shape in args.shapes.split(","):
        k, n = (int(v) for v in shape.split("x"))
        gptq = rng.integers(-2**31, 2**31, size=(k // 8, n), dtype=np.int64).astype(np.int32)
        awq = gptq.reshape(k, n // 8)
        perm = rng.permutation(k).astype(np.int32)
        none = np.empty(0, np.int32)
        cpp = cpp_rates(args.cpp_bench, k, n)
        nbytes = 2 * gptq.nbytes
        for name, fn in (("gptq", lambda: qtl.gptq_marlin_repack(gptq, none, k, n, 4)),
                         ("gptq act-order", lambda: qtl.gptq_marlin_repack(gptq, perm, k, n, 4)),
                         ("awq", lambda: qtl.awq_marlin_repack(awq, k, n, 4))):
            wall, t = median_times(fn, args.runs)
            rate = nbytes / t
            c = cpp.get(name)
            print(f"| {k}x{n} | {name} | {wall * 1e3:.2f} | {t * 1e3:.2f} | {rate / 1e9:.2f} | "
                  f"{'' if c is None else f'{c / 1e9:.2f}'} | {'' if c is None else f'{rate / c:.2f}'} |",
                  flush=True)


if __name__ == "__main__":
    main()
