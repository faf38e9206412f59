#!/usr/bin/env python3
"""`qtl convert --to fp8-ue8m0` on a ~2 GiB FP8-block checkpoint beside `cp -r` of the same folder
(target: at least 0.5 of cp).

    bench/qtl_convert_bench.py QTL [--dir DIR] [--threads 1,2] [--repeat N] [--weights 144]

The checkpoint (made once in DIR, default a temporary folder): 8 shards, `--weights` DeepSeek-V3
sized FP8 block weights of 7168 x 2048 (random e4m3 codes without NaN, random float32 scales of
56 x 16 blocks), their `weight_scale_inv`, a config.json with the FP8 block quantization_config.
Each round runs `cp -r` and then `qtl convert` with each thread count, alternated, and removes the
outputs; the figures are medians of N rounds (default 3) of wall time after one warm-up round, with
the input in the page cache. qtl fsyncs every output file before its swap into place; cp does not,
so a third baseline is cp followed by `sync -f` of the output (the same durability).
"""
import argparse
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "tools"))
from safetensors_py import build  # noqa: E402

N, K, BLOCK = 7168, 2048, 128
SHARDS = 8


def make_checkpoint(folder, weights):
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(20)
    no_nan = bytes(range(256)).replace(b"\x7f", b"\x7e").replace(b"\xff", b"\xfe")
    assert len(no_nan) == 256
    per = (weights + SHARDS - 1) // SHARDS
    weight_map = {}
    total = 0
    scales = (N // BLOCK) * (K // BLOCK)
    for s in range(SHARDS):
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, SHARDS)
        tensors = []
        for i in range(s * per, min(weights, (s + 1) * per)):
            name = "model.layers.%d.mlp.experts.%d.down_proj" % (i // 8, i % 8)
            codes = os.urandom(N * K).translate(no_nan)
            sc = b"".join(struct.pack("<f", 2.0 ** rng.uniform(-14, -4)) for _ in range(scales))
            tensors += [(name + ".weight", "F8_E4M3", [N, K], codes),
                        (name + ".weight_scale_inv", "F32", [N // BLOCK, K // BLOCK], sc)]
        with open(os.path.join(folder, fname), "wb") as f:
            f.write(build(tensors, {"format": "pt"}))
        for t in tensors:
            weight_map[t[0]] = fname
            total += len(t[3])
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    config = {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"],
              "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                      "weight_block_size": [BLOCK, BLOCK]}}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)


def timed(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qtl")
    ap.add_argument("--dir")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--weights", type=int, default=144)
    a = ap.parse_args()
    base = a.dir or tempfile.mkdtemp(prefix="qtl-convert-bench-")
    src = os.path.join(base, "in")
    if not os.path.exists(os.path.join(src, "config.json")):
        make_checkpoint(src, a.weights)
    size = sum(os.path.getsize(os.path.join(src, f)) for f in os.listdir(src))
    threads = [int(t) for t in a.threads.split(",")]
    out = os.path.join(base, "out")
    times = {"cp": [], "cp+sync": []}
    for t in threads:
        times["qtl %d" % t] = []
    for r in range(a.repeat + 1):
        for key in times:
            shutil.rmtree(out, ignore_errors=True)
            if key == "cp":
                dt = timed(["cp", "-r", src, out])
            elif key == "cp+sync":
                dt = timed(["sh", "-c", 'cp -r "$1" "$2" && sync -f "$2"', "sh", src, out])
            else:
                dt = timed([a.qtl, "convert", src, out, "--to", "fp8-ue8m0", "--threads", key.split()[1]])
            if r > 0:
                times[key].append(dt)
    shutil.rmtree(out, ignore_errors=True)
    print("input %.2f GiB (%s), load average %s" % (size / 2**30, src, " ".join("%.1f" % x for x in os.getloadavg())))
    cp = statistics.median(times["cp"])
    for key, v in times.items():
        m = statistics.median(v)
        print("%-8s median %6.2f s  (%s)  %5.2f GB/s  x cp %.2f" %
              (key, m, " ".join("%.2f" % x for x in v), size / m / 1e9, cp / m))


if __name__ == "__main__":
    main()
