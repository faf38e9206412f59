#!/usr/bin/env python3
"""A/B of two builds of the host benchmarks: runs OLD_DIR/qtl_bench_<name> and NEW_DIR/qtl_bench_<name>
alternately, REPS times each (one repetition per run, so that drifts of a shared machine hit both
alike), and prints per case the median bytes/s ratio to the memcpy baseline of the same run, old
and new, new/old, and the median bytes/s of each.

  bench/host_ab.py OLD_BENCH_DIR NEW_BENCH_DIR [--reps 5] [--filter NAME=REGEX ...] NAME...

The baseline of a case is the memcpy benchmark of the same binary whose bytes match (the first
memcpy when the names carry no size).
"""
import argparse
import json
import re
import statistics
import subprocess


def run(binary, flt):
    args = [binary, "--benchmark_format=json", "--benchmark_min_time=0.2"]
    if flt:
        args.append(f"--benchmark_filter={flt}")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return {b["name"]: b["bytes_per_second"] for b in json.loads(out)["benchmarks"] if "bytes_per_second" in b}


def baseline(name, rates):
    copies = {n: r for n, r in rates.items() if "memcpy" in n.lower()}
    for n, r in copies.items():
        if "moe" in name.lower() and "moe" in n.lower():
            return r
    m = re.search(r"/(\d+)x(\d+)|K:(\d+)/N:(\d+)|/(\d+)/(\d+)$", name)
    for n, r in copies.items():
        size = re.search(r"/(\d+)", n)
        if size and m:
            a, b = [int(x) for x in m.groups() if x][:2]
            if int(size.group(1)) in (a * b * 2, a * b * 4, a * b, a * b // 2):  # a * b / 2: 4-bit codes
                return r
    return next(iter(copies.values()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--filter", action="append", default=[])
    a = ap.parse_args()
    filters = dict(f.split("=", 1) for f in a.filter)
    print("| benchmark | case | old / memcpy | new / memcpy | new / old | old GB/s | new GB/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in a.names:
        ratios = {"old": {}, "new": {}}
        rates_of = {"old": {}, "new": {}}
        for _ in range(a.reps):
            for side, folder in (("old", a.old), ("new", a.new)):
                rates = run(f"{folder}/qtl_bench_{name}", filters.get(name))
                for case, r in rates.items():
                    if "memcpy" not in case.lower():
                        ratios[side].setdefault(case, []).append(r / baseline(case, rates))
                        rates_of[side].setdefault(case, []).append(r / 1e9)
        for case in ratios["old"]:
            o = statistics.median(ratios["old"][case])
            n = statistics.median(ratios["new"].get(case, [float("nan")]))
            ro = statistics.median(rates_of["old"][case])
            rn = statistics.median(rates_of["new"].get(case, [float("nan")]))
            print(f"| {name} | {case} | {o:.3f} | {n:.3f} | {n / o:.3f} | {ro:.2f} | {rn:.2f} |", flush=True)


if __name__ == "__main__":
    main()
