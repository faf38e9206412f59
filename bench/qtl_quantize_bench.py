#!/usr/bin/env python3
"""`qtl quantize --format gptq` on a ~2 GB fp16 Llama-shaped checkpoint, beside `cp -r` of the
same folder in the same run (target: at least 0.3 of `cp` with 2 threads), and the tool's peak RSS.

    bench/qtl_quantize_bench.py QTL [--threads 2] [--repeat 3] [--dir DIR] [--layers 19]

The checkpoint (4 shards and an index, hidden 2048, intermediate 5632, vocabulary 32000, fp16
weights drawn from N(0, 0.02)) is written once into a temporary folder under DIR. Figures are
medians of N runs after one warm-up, with the input in the page cache (as for repeated runs):
  cp         `cp -r IN OUT`
  cp+sync    the same, then an fsync of every output file (qtl fsyncs its outputs before
             renaming them into place; cp does not)
  qtl        `qtl quantize IN OUT --format gptq --bits 4 --group-size 128 --threads T`
GB/s counts the input checkpoint's bytes; the ratio qtl / cp is the figure that counts (target 0.3
with 2 threads). Peak RSS is the tool's maximum resident set (getrusage of the child).
"""
import argparse
import json
import os
import random
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

H, I, V = 2048, 5632, 32000


def gaussian_block(n, seed):
    """n fp16 values from N(0, 0.02), as bytes."""
    rnd = random.Random(seed)
    return struct.pack("<%de" % n, *(0.02 * rnd.gauss(0, 1) for _ in range(n)))


def write_checkpoint(folder, layers, shards=4):
    block = gaussian_block(1 << 20, 1)  # 2 MiB of values, cycled with a per-tensor offset
    tensors = [("model.embed_tokens.weight", [V, H])]
    for i in range(layers):
        p = "model.layers.%d." % i
        tensors += [(p + "self_attn.q_proj.weight", [H, H]), (p + "self_attn.k_proj.weight", [H, H]),
                    (p + "self_attn.v_proj.weight", [H, H]), (p + "self_attn.o_proj.weight", [H, H]),
                    (p + "mlp.gate_proj.weight", [I, H]), (p + "mlp.up_proj.weight", [I, H]),
                    (p + "mlp.down_proj.weight", [H, I]),
                    (p + "input_layernorm.weight", [H]), (p + "post_attention_layernorm.weight", [H])]
    tensors += [("model.norm.weight", [H]), ("lm_head.weight", [V, H])]
    per = (len(tensors) + shards - 1) // shards
    weight_map = {}
    total = 0
    for s in range(shards):
        part = tensors[s * per:(s + 1) * per]
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for name, shape in part:
            n = 2
            for d in shape:
                n *= d
            header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + n]}
            offset += n
            weight_map[name] = fname
        text = json.dumps(header, separators=(",", ":"))
        text += " " * ((8 - (8 + len(text)) % 8) % 8)
        with open(os.path.join(folder, fname), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text.encode())
            for t, (name, shape) in enumerate(part):
                n = header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
                shift = (t * 4098) % len(block)
                rotated = block[shift:] + block[:shift]
                while n > 0:
                    piece = rotated[:min(n, len(rotated))]
                    f.write(piece)
                    n -= len(piece)
        total += offset
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
                   "intermediate_size": I, "num_hidden_layers": layers, "num_attention_heads": 16,
                   "num_key_value_heads": 16, "vocab_size": V, "torch_dtype": "float16"}, f)
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder))


def fsync_tree(folder):
    for name in os.listdir(folder):
        fd = os.open(os.path.join(folder, name), os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


def timed(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qtl")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--layers", type=int, default=19)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="qtl_qbench_", dir=a.dir) as tmp:
        src = os.path.join(tmp, "in")
        os.makedirs(src)
        size = write_checkpoint(src, a.layers)
        out = os.path.join(tmp, "out")

        def cp():
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run(["cp", "-r", src, out], check=True)

        def cp_sync():
            cp()
            fsync_tree(out)

        def qtl():
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run([a.qtl, "quantize", src, out, "--format", "gptq", "--bits", "4", "--group-size", "128",
                            "--threads", str(a.threads)], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

        t_cp = timed(cp, a.repeat)
        t_sync = timed(cp_sync, a.repeat)
        t_qtl = timed(qtl, a.repeat)
        rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
        gb = size / 1e9
        print("input checkpoint: %.2f GB (%d layers, 4 shards)" % (gb, a.layers))
        print("%-34s %8s %8s %8s" % ("case", "seconds", "GB/s", "vs cp"))
        for name, t in (("cp -r", t_cp), ("cp -r + fsync", t_sync),
                        ("qtl quantize gptq (%d threads)" % a.threads, t_qtl)):
            print("%-34s %8.3f %8.2f %8.2f" % (name, t, gb / t, t_cp / t))
        print("qtl vs cp + fsync: %.2f" % (t_sync / t_qtl))
        print("peak RSS of any child (qtl's, cp's are small): %.0f MiB" % rss_mib)


if __name__ == "__main__":
    sys.exit(main())
