#!/usr/bin/env python3
"""qtl through Python against the reference Python (CPU torch) and against the C++ library's own
benchmark, in one process run.

For each function and shape (K x N, fp16 weights): the median time of --runs calls through `qtl`
(torch tensors in and out) and through the reference; bytes/s with the C++ benchmarks' accounting
(every input byte read once, every output byte written once); the ratio to a memcpy of the same
bytes (numpy copyto, same run); the speed-up over the reference; and, where a C++ benchmark of the
same call exists (bench/quantize_bench.cpp, bench/pack_bench.cpp), qtl's bytes/s over the C++
library's (target: at least 0.8 on 4096x4096, one thread both). Then the call overhead of a small
array: qtl.pack_cols against qtl._noop, a plain nanobind function taking the same array (target:
at most 3x).

    PYTHONPATH=<dir holding the qtl package> VENV/bin/python bench/python_bench.py \\
        --cpp-bench build/bench [--shapes 4096x4096,8192x28672] [--runs 5]

With torch (the heavy interop venv) and the reference (test/python/reference_loader.py says where
it comes from), torch tensors go in and the reference is timed too; without torch (the CI venv:
numpy only) numpy arrays go in and the reference columns stay empty. Every qtl call is given
threads=1 (the C++ benchmarks run one thread); run it on a quiet machine.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

import qtl

try:
    import torch
except ImportError:
    torch = None

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "test" / "python"))


CLOCK = time.perf_counter  # --cpu-time: time.process_time (this process's CPU, kernel time included)


def median_time(fn, runs, warmup=1):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = CLOCK()
        fn()
        times.append(CLOCK() - t0)
    return statistics.median(times)


def memcpy_rate(nbytes, runs):
    """bytes/s of numpy copyto of an nbytes buffer, counted read + write (as bench/support)."""
    src = np.ones(nbytes, np.uint8)
    dst = np.empty_like(src)
    return 2 * nbytes / median_time(lambda: np.copyto(dst, src), runs)


def cpp_rates(bench_dir, k, n, cpu_time=False):
    """{function: bytes/s} from the C++ benchmarks for this shape (empty without them)."""
    if bench_dir is None:
        return {}
    out = {}
    jobs = [("qtl_bench_quantize", f"bm_quantize<qtl::half_t, 128, false>/K:{k}/N:{n}/", {"quantize_weights"}),
            ("qtl_bench_pack", f"bm_pack<op::(pack_rows|pack_cols|unpack_cols), 4>/{k}/{n}$", None)]
    for exe, filt, _ in jobs:
        path = pathlib.Path(bench_dir) / exe
        if not path.exists():
            continue
        r = subprocess.run([str(path), f"--benchmark_filter={filt}", "--benchmark_format=json",
                            "--benchmark_min_time=0.5", "--benchmark_repetitions=3",
                            "--benchmark_report_aggregates_only=true"],
                           capture_output=True, text=True)
        if r.returncode != 0 or not r.stdout.strip():
            continue  # no benchmark of this shape
        for b in json.loads(r.stdout)["benchmarks"]:
            if b.get("aggregate_name") != "median":
                continue
            name = b["run_name"]
            for fn in ("quantize_weights", "pack_rows", "pack_cols", "unpack_cols"):
                key = "bm_quantize" if fn == "quantize_weights" else f"op::{fn},"
                if key in name:
                    # bytes/s of the benchmark's own clock; with cpu_time, of its CPU time
                    scale = b["real_time"] / b["cpu_time"] if cpu_time and "real_time" in name else 1.0
                    out[fn] = b["bytes_per_second"] * scale
    return out


def cases(k, n, ref):
    """(name, qtl call, reference call or None, bytes) for one shape."""
    if torch is not None:
        g = torch.Generator().manual_seed(19)
        w = (torch.randn((k, n), generator=g) * 0.02).to(torch.float16)
        perm = torch.randperm(k, generator=g)
        arange = torch.arange(k, dtype=torch.int32)
    else:
        rng = np.random.default_rng(19)
        w = (rng.standard_normal((k, n), dtype=np.float32) * 0.02).astype(np.float16)
        perm = rng.permutation(k).astype(np.int64)
        arange = np.arange(k, dtype=np.int32)
    w_ref, w_q, w_s, _ = qtl.quantize_weights(w, qtl.scalar_types.uint4b8, 128)
    packed = qtl.pack_cols(w_q, 4, k, n)
    g_idx = (arange // 128)[perm]
    g_idx = g_idx.contiguous() if torch is not None else np.ascontiguousarray(g_idx)
    rt = ref.scalar_types.uint4b8 if ref else None
    e = k * n

    def r(f):
        return f if ref else None
    return [
        ("quantize_weights", lambda: qtl.quantize_weights(w, qtl.scalar_types.uint4b8, 128, threads=1),
         r(lambda: ref.quantize_weights(w, rt, 128)), e * (2 + 2 + 4) + (k // 128) * n * 2),
        ("pack_rows", lambda: qtl.pack_rows(w_q, 4, k, n), r(lambda: ref.pack_rows(w_q, 4, k, n)), e * 4 + e // 2),
        ("pack_cols", lambda: qtl.pack_cols(w_q, 4, k, n), r(lambda: ref.pack_cols(w_q, 4, k, n)), e * 4 + e // 2),
        ("unpack_cols", lambda: qtl.unpack_cols(packed, 4, k, n), r(lambda: ref.unpack_cols(packed, 4, k, n)),
         e // 2 + e * 4),
        ("permute_rows", lambda: qtl.permute_rows(w_q, w_ref, 128, perm),
         r(lambda: ref.permute_rows(w_q, w_ref, 128, perm)), 2 * (e * 4 + e * 2) + k * (8 + 8 + 4)),
        ("sort_weights", lambda: qtl.sort_weights(w_q, g_idx), r(lambda: ref.sort_weights(w_q, g_idx)),
         2 * e * 4 + k * 4 * 3),
        ("swap_w13_to_w31", lambda: qtl.swap_w13_to_w31(w), r(lambda: ref.swap_w13_to_w31(w)), 2 * e * 2),
    ]


def overhead(loops=20000, reps=7):
    rows = []
    kinds = [("numpy", np.arange(64, dtype=np.int32).reshape(8, 8) % 16)]
    if torch is not None:
        kinds.append(("torch", torch.arange(64, dtype=torch.int32).reshape(8, 8) % 16))
    for kind, x in kinds:
        def per_call(fn):
            def run():
                for _ in range(loops):
                    fn()
            return median_time(run, reps) / loops  # CLOCK: --cpu-time counts CPU
        t_op = per_call(lambda: qtl.pack_cols(x, 4, 8, 8))
        t_noop = per_call(lambda: qtl._noop(x))
        rows.append((kind, t_op, t_noop))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpp-bench", help="folder of qtl_bench_quantize and qtl_bench_pack (build/bench)")
    ap.add_argument("--shapes", default="4096x4096,8192x28672")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--reference-runs", type=int, default=3)
    ap.add_argument("--no-overhead", action="store_true", help="skip the call-overhead table")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time CPU, not wall (a loaded machine): process time here, cpu_time of the C++ benchmarks")
    ap.add_argument("--buffer-cache", type=int, help="qtl.set_buffer_cache(BYTES) first (0: every output fresh)")
    args = ap.parse_args()
    if args.buffer_cache is not None:
        qtl.set_buffer_cache(args.buffer_cache)
    global CLOCK
    if args.cpu_time:
        CLOCK = time.process_time
    ref = None
    if torch is not None:
        import reference_loader
        torch.set_num_threads(1)
        ref = reference_loader.load()
    tv = f"torch {torch.__version__} (1 thread)" if torch is not None else "no torch (numpy inputs, no reference)"
    print(f"qtl {qtl.__version__}, {tv}, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs; medians of {args.runs} (qtl) / {args.reference_runs} (reference) runs")
    print()
    print("| shape | function | qtl ms | qtl GB/s | ×memcpy | reference ms | speed-up | C++ GB/s | qtl/C++ |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for shape in args.shapes.split(","):
        k, n = (int(v) for v in shape.split("x"))
        cpp = cpp_rates(args.cpp_bench, k, n, args.cpu_time)
        for name, q, r, nbytes in cases(k, n, ref):
            t_q = median_time(q, args.runs)
            t_r = median_time(r, args.reference_runs, warmup=0) if r else None
            mem = memcpy_rate(nbytes // 2, args.runs)
            rate = nbytes / t_q
            c = cpp.get(name)
            print(f"| {k}x{n} | {name} | {t_q * 1e3:.1f} | {rate / 1e9:.2f} | {rate / mem:.2f} | "
                  f"{'' if t_r is None else f'{t_r * 1e3:.0f}'} | {'' if t_r is None else f'{t_r / t_q:.1f}x'} | "
                  f"{'' if c is None else f'{c / 1e9:.2f}'} | {'' if c is None else f'{rate / c:.2f}'} |",
                  flush=True)
    if args.no_overhead:
        return
    print()
    print("| call overhead, 8x8 int32 | qtl.pack_cols µs | qtl._noop µs | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for kind, t_op, t_noop in overhead():
        print(f"| {kind} | {t_op * 1e6:.2f} | {t_noop * 1e6:.2f} | {t_op / t_noop:.2f} |")


if __name__ == "__main__":
    main()
