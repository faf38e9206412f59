#!/usr/bin/env python3
"""Every `qtl quantize --format` and every `qtl convert --to` on a Qwen3-shaped bf16 checkpoint,
beside `cp -r` of the same bytes on equal terms, with the tool's page faults and peak RSS.

    bench/qtl_quantize_bench.py QTL [--size-mb 1100] [--threads 2] [--repeat 5] [--dir /dev/shm]
                                    [--only gptq,fp8] [--peers] [--sync]

The checkpoint (made once in a temporary folder under DIR, a tmpfs by default, so that neither
side pays for a disk): Qwen3-1.7B's shapes (hidden 2048, intermediate 6144, 16 query heads and
8 key/value heads of 128, tied embeddings), bf16 values of N(0, 0.02), 4 shards and an index,
as many decoder layers as make --size-mb. The vocabulary is Qwen3's 151936, or fewer (a
multiple of 128) where its embedding would be more than a third of the checkpoint, so that the
linear weights are most of the bytes. `convert` runs on the checkpoint's FP8-block form
(`qtl quantize --format fp8 --fp8-scheme block`, made once).

Each round runs, for every job, `cp -r` of the job's baseline folder and then the job itself
(alternated, outputs removed between runs); the first round warms up and is dropped, the
figures are medians of --repeat rounds. The baseline is the job's input, or its output where the
output is larger (convert --to bf16 writes twice what it reads). Columns:
  qtl s, cp s   median wall times;  x cp = cp / qtl (1.0: as fast as the copy; the target is 0.8)
  best          the same ratio of the fastest runs
  minflt, majflt, RSS   page faults and peak resident set of the qtl process (os.wait4), medians
`--peers` also runs llm-compressor's `model_free_ptq` (CPU) and AutoRound (RTN, iters=0) once per
scheme they share with qtl, where the Python running this script imports them; otherwise it
says they are absent.
"""
import argparse
import importlib.util
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

H, I, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 2048, 6144, 16, 8, 128, 151936
SHARDS = 4

QUANTIZE = [
    ("quantize gptq int4 g128", ["--format", "gptq", "--bits", "4", "--group-size", "128"]),
    ("quantize w4a16 g128", ["--format", "w4a16"]),
    ("quantize w8a16 g128", ["--format", "w8a16"]),
    ("quantize nvfp4", ["--format", "nvfp4"]),
    ("quantize mxfp4", ["--format", "mxfp4"]),
    ("quantize fp8 tensor", ["--format", "fp8", "--fp8-scheme", "tensor"]),
    ("quantize fp8 channel", ["--format", "fp8", "--fp8-scheme", "channel"]),
    ("quantize fp8 block", ["--format", "fp8", "--fp8-scheme", "block"]),
    ("quantize fp8 ct-block", ["--format", "fp8", "--fp8-scheme", "ct-block"]),
    ("quantize mxfp8", ["--format", "mxfp8"]),
]
CONVERT = ["fp8-ue8m0", "bf16", "mxfp4", "nvfp4"]
# llm-compressor's schemes for the formats qtl writes in the same layout
PEER_SCHEMES = {"w4a16": "W4A16", "w8a16": "W8A16", "nvfp4": "NVFP4A16", "mxfp4": "MXFP4A16",
                "fp8 ct-block": "FP8_BLOCK", "fp8 channel": "FP8_DYNAMIC", "mxfp8": "MXFP8A16"}


def bf16_block(n, seed):
    """n bf16 values of N(0, 0.02) (float32 truncated to its high half), as bytes."""
    rnd = random.Random(seed)
    f32 = struct.pack("<%df" % n, *(0.02 * rnd.gauss(0, 1) for _ in range(n)))
    return b"".join(f32[i + 2:i + 4] for i in range(0, len(f32), 4))


def layer_tensors(i):
    p = "model.layers.%d." % i
    return [(p + "self_attn.q_proj.weight", [HEADS * HEAD_DIM, H]),
            (p + "self_attn.k_proj.weight", [KV_HEADS * HEAD_DIM, H]),
            (p + "self_attn.v_proj.weight", [KV_HEADS * HEAD_DIM, H]),
            (p + "self_attn.o_proj.weight", [H, HEADS * HEAD_DIM]),
            (p + "self_attn.q_norm.weight", [HEAD_DIM]), (p + "self_attn.k_norm.weight", [HEAD_DIM]),
            (p + "mlp.gate_proj.weight", [I, H]), (p + "mlp.up_proj.weight", [I, H]),
            (p + "mlp.down_proj.weight", [H, I]),
            (p + "input_layernorm.weight", [H]), (p + "post_attention_layernorm.weight", [H])]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write_checkpoint(folder, size_mb):
    """The checkpoint of the file comment."""
    target = size_mb * 1e6
    vocab = min(VOCAB, int(target / 3 / (2 * H)) // 128 * 128)
    per_layer = 2 * sum(numel(s) for _, s in layer_tensors(0))
    layers = max(1, round((target - 2 * vocab * H) / per_layer))
    tensors = [("model.embed_tokens.weight", [vocab, H])]
    for i in range(layers):
        tensors += layer_tensors(i)
    tensors.append(("model.norm.weight", [H]))
    block = bf16_block(1 << 20, 1)  # 2 MiB of values, cycled with a per-tensor rotation
    per = (len(tensors) + SHARDS - 1) // SHARDS
    weight_map = {}
    total = 0
    for s in range(SHARDS):
        part = tensors[s * per:(s + 1) * per]
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, SHARDS)
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for name, shape in part:
            n = 2 * numel(shape)
            header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + n]}
            offset += n
            weight_map[name] = fname
        text = json.dumps(header, separators=(",", ":"))
        text += " " * ((8 - (8 + len(text)) % 8) % 8)
        with open(os.path.join(folder, fname), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text.encode())
            for t, (name, shape) in enumerate(part):
                n = 2 * numel(shape)
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
        json.dump({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": H,
                   "intermediate_size": I, "num_hidden_layers": layers, "num_attention_heads": HEADS,
                   "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": vocab,
                   "tie_word_embeddings": True, "torch_dtype": "bfloat16"}, f)


def folder_bytes(folder):
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder))


def run(cmd):
    """Wall seconds, minor and major page faults and peak RSS (MiB) of `cmd` as a child."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), p.returncode, err.strip()))
    return dt, ru.ru_minflt, ru.ru_majflt, ru.ru_maxrss / 1024.0


def alternate(jobs, tmp, out, repeat, sync=False):
    """Runs `jobs` ((label, input folder, command writing `out`)) beside `cp -r` of each one's
    baseline: its input, or a copy (in `tmp`) of its output where that is larger (`sync`: `cp -r`
    then `sync`, for a folder on a disk, where qtl fsyncs what it writes). Each round runs cp then
    the job, for every job, removing `out` between runs; the first round warms up and is dropped.
    Returns ({label: (baseline folder, "input"|"output")}, {label: {"cp"|"qtl": [run()]}})."""
    base = {}
    for label, job_in, cmd in jobs:
        shutil.rmtree(out, ignore_errors=True)
        run(cmd)
        if folder_bytes(out) > folder_bytes(job_in):
            kept = os.path.join(tmp, "out_of_" + label.replace(" ", "_"))
            shutil.copytree(out, kept)
            base[label] = (kept, "output")
        else:
            base[label] = (job_in, "input")
    samples = {label: {"cp": [], "qtl": []} for label, _, _ in jobs}
    for r in range(repeat + 1):
        for label, _, cmd in jobs:
            for side in ("cp", "qtl"):
                shutil.rmtree(out, ignore_errors=True)
                copy = ["cp", "-r", base[label][0], out]
                if sync:
                    copy = ["sh", "-c", 'cp -r "$0" "$1" && sync', base[label][0], out]
                m = run(copy if side == "cp" else cmd)
                if r > 0:
                    samples[label][side].append(m)
    shutil.rmtree(out, ignore_errors=True)
    return base, samples


def print_table(jobs, base, samples):
    """The table of the file comment: medians of `alternate`'s samples."""
    print("| job | qtl s | cp -r s (of) | x cp | best | minflt | majflt | peak RSS MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, _, _ in jobs:
        q = samples[label]["qtl"]
        c = samples[label]["cp"]
        tq = statistics.median(x[0] for x in q)
        tc = statistics.median(x[0] for x in c)
        print("| %s | %.3f | %.3f (%s) | %.2f | %.2f | %d | %d | %.0f |" % (
            label, tq, tc, base[label][1], tc / tq, min(x[0] for x in c) / min(x[0] for x in q),
            statistics.median(x[1] for x in q), statistics.median(x[2] for x in q),
            statistics.median(x[3] for x in q)))


def peers_available():
    return {name: importlib.util.find_spec(mod) is not None
            for name, mod in (("llm-compressor", "llmcompressor"), ("AutoRound", "auto_round"))}


def run_peers(src, out, label, threads):
    """One timed run of each importable peer on the scheme of `label`; lines to print."""
    scheme = PEER_SCHEMES.get(label.replace("quantize ", "").replace(" g128", ""))
    if scheme is None:
        return []
    lines = []
    have = peers_available()
    if have["llm-compressor"]:
        code = ("import sys\nfrom llmcompressor import model_free_ptq\n"
                "model_free_ptq(model_stub=sys.argv[1], save_directory=sys.argv[2], scheme=sys.argv[3], "
                "ignore=['lm_head', 're:.*embed_tokens'], max_workers=int(sys.argv[4]), device='cpu')\n")
        shutil.rmtree(out, ignore_errors=True)
        try:
            dt, _, _, rss = run([sys.executable, "-c", code, src, out, scheme, str(threads)])
            lines.append("  llm-compressor model_free_ptq %-12s %8.2f s  RSS %6.0f MiB" % (scheme, dt, rss))
        except RuntimeError as e:
            lines.append("  llm-compressor model_free_ptq %s failed: %s" % (scheme, str(e)[-300:]))
    if have["AutoRound"] and scheme == "W4A16":
        code = ("import sys\nfrom auto_round import AutoRound\n"
                "ar = AutoRound(sys.argv[1], scheme='W4A16', iters=0)\n"
                "ar.quantize_and_save(sys.argv[2], format='auto_round')\n")
        shutil.rmtree(out, ignore_errors=True)
        try:
            dt, _, _, rss = run([sys.executable, "-c", code, src, out])
            lines.append("  AutoRound RTN (iters=0) W4A16        %8.2f s  RSS %6.0f MiB" % (dt, rss))
        except RuntimeError as e:
            lines.append("  AutoRound W4A16 failed: %s" % str(e)[-300:])
    shutil.rmtree(out, ignore_errors=True)
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("qtl")
    ap.add_argument("--size-mb", type=float, default=1100, help="checkpoint size (default 1100 MB)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ap.add_argument("--only", default="", help="comma-separated substrings of the job names to run")
    ap.add_argument("--peers", action="store_true", help="also run the importable peers once per scheme")
    ap.add_argument("--sync", action="store_true",
                    help="time `cp -r` followed by `sync` (for a DIR on a disk: qtl fsyncs every file it writes)")
    a = ap.parse_args()
    qtl = os.path.abspath(a.qtl)
    only = [s for s in a.only.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="qtl_qbench_", dir=a.dir) as tmp:
        src = os.path.join(tmp, "in")
        os.makedirs(src)
        # written by a child: the values it builds would stay in this process's resident set,
        # which a child forked from here starts with (ru_maxrss would report it for every job)
        pid = os.fork()
        if pid == 0:
            write_checkpoint(src, a.size_mb)
            os._exit(0)
        if os.waitpid(pid, 0)[1] != 0:
            raise RuntimeError("writing the checkpoint failed")
        total = folder_bytes(src)
        with open(os.path.join(src, "config.json")) as f:
            config = json.load(f)
        layers, vocab = config["num_hidden_layers"], config["vocab_size"]
        out = os.path.join(tmp, "out")
        t = str(a.threads)
        jobs = [(label, src, [qtl, "quantize", src, out] + args + ["--threads", t]) for label, args in QUANTIZE]
        fp8 = os.path.join(tmp, "fp8")
        if any(not only or any(s in "convert " + c for s in only) for c in CONVERT):
            run([qtl, "quantize", src, fp8, "--format", "fp8", "--fp8-scheme", "block", "--threads", t])
            jobs += [("convert " + c, fp8, [qtl, "convert", fp8, out, "--to", c, "--threads", t]) for c in CONVERT]
        jobs = [j for j in jobs if not only or any(s in j[0] for s in only)]
        base, samples = alternate(jobs, tmp, out, a.repeat, a.sync)
        print("checkpoint: %.2f GB of bf16 (Qwen3-1.7B shapes, %d layers, vocabulary %d, %d shards) in %s"
              % (total / 1e9, layers, vocab, SHARDS, a.dir or tempfile.gettempdir()))
        if os.path.isdir(fp8):
            print("convert input: its FP8-block form, %.2f GB" % (folder_bytes(fp8) / 1e9))
        print("qtl --threads %d; medians of %d alternated rounds after one warm-up; load average %s"
              % (a.threads, a.repeat, " ".join("%.1f" % x for x in os.getloadavg())))
        print_table(jobs, base, samples)
        have = peers_available()
        print("peers in %s: %s" % (sys.executable, ", ".join(
            "%s %s" % (n, "importable" if ok else "absent") for n, ok in have.items())))
        if a.peers and any(have.values()):
            for label, _, _ in jobs:
                for line in run_peers(src, out, label, a.threads):
                    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
