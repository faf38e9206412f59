#!/usr/bin/env python3
"""Generates consumer_cases.jsonl: every consumer dialect of docs/spec/matchers.md §2, re-stated in
Python with CPython's own `re` and `fnmatch`, on random skip lists (literal names, partial names,
`re:` entries, globs, regex metacharacters, invalid patterns), fused mappings and module names.
test/unit/golden_configs_test.cpp replays every line through qtl::decide. Line 1 names the
consumers; each further line is a list, a mapping, and per module its kind and one letter per
consumer: s (skipped), n (not skipped), e (the consumer raises: mixed shards or re.error). The reference
`is_layer_skipped` and `_module_path_match` are taken verbatim from the reference file (as in
gen_reference_cases.py); the other dialects are re-statements of the spec.

Usage: gen_consumer_cases.py <reference.py> > consumer_cases.jsonl   (deterministic)
"""
import fnmatch
import json
import random
import re
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from gen_reference_cases import load_reference  # noqa: E402

REF = None


class Mixed(Exception):
    pass


def shards_agree(decisions):
    """The one decision every shard of a fused layer gets; Mixed where they differ (the engines
    raise there)."""
    decisions = list(decisions)
    assert decisions
    if any(d != decisions[0] for d in decisions):
        raise Mixed()
    return decisions[0]


def vllm_is_layer_skipped(prefix, ignored, fused, substr=False):
    match = (lambda p: any(i in p for i in ignored)) if substr else (lambda p: p in ignored)
    proj = prefix.split(".")[-1]
    if proj in fused:
        return shards_agree(match(prefix.replace(proj, shard)) for shard in fused[proj])
    if "experts" in prefix and not substr:
        return any(prefix in i for i in ignored if "experts" in i)
    return match(prefix)


def sglang_skip(prefix, ignored, fused):
    try:
        return REF["is_layer_skipped"](prefix, ignored, fused)
    except ValueError:
        raise Mixed()


def ct_match(value, target, contains):
    if target.startswith("re:"):
        return re.match(target[3:], value) is not None
    if contains:
        return target.lower() in value.lower()
    return target == value


def ct_should_ignore(name, ignore, fused, contains):
    proj = name.split(".")[-1]
    if proj in fused and name not in ignore:
        return shards_agree(any(ct_match(name.replace(proj, shard), t, contains) for t in ignore)
                            for shard in fused[proj])
    return any(ct_match(name, t, contains) for t in ignore)


def ct_match_name(name, target, fused):
    for suffix, shards in fused.items():
        if name.endswith(suffix):
            stem = name[: len(name) - len(suffix)]
            return any(ct_match(stem + s, target, False) for s in shards)
    return ct_match(name, target, False)


def sglang_modelopt_excluded(prefix, patterns):
    cands = [prefix] + ([prefix.replace("language_model.", "")] if "language_model." in prefix else [])
    leaf = prefix.split(".")[-1]
    for p in patterns:
        rx = p.replace(".", r"\.").replace("*", ".*")
        for c in cands:
            if re.fullmatch(rx, c) or any(re.fullmatch(rx, part) for part in c.split(".")):
                return True
        tail = p.split(".")[-1]
        if tail in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj") and tail in leaf:
            return True
    return False


def vllm_modelopt(prefix, patterns, fused):
    if any(v in prefix for v in ("vision_tower", "vision_model", "vit_large_projector")):
        return True
    if not patterns:
        return False
    if vllm_is_layer_skipped(prefix, patterns, fused):
        return True
    if any(e != prefix and e in prefix for e in patterns):
        return True
    return any(fnmatch.fnmatchcase(prefix, p) for p in patterns)


def decide(consumer, module, kind, lst, fused):
    if consumer == "sglang_fp8":
        doubled = []
        for e in lst:
            bare = e[6:] if e.startswith("model.") else e
            doubled += [bare, "model." + bare]
        return sglang_skip(module, doubled, fused)
    if consumer == "vllm_fp8":
        return vllm_is_layer_skipped(module, lst, fused)
    if consumer == "sglang_is_layer_skipped":
        return sglang_skip(module, lst, fused)
    if consumer == "sglang_awq":
        return any(e in module for e in lst)
    if consumer == "vllm_awq":
        return vllm_is_layer_skipped(module, lst, fused, substr=True)
    if consumer in ("sglang_compressed_tensors", "vllm_compressed_tensors"):
        return ct_should_ignore(module, lst, fused, consumer.startswith("sglang"))
    if consumer == "compressed_tensors":
        return any(ct_match_name(module, t, fused) for t in lst)
    if consumer == "sglang_modelopt":
        if kind != "moe" and sglang_skip(module, lst, fused):
            return True
        return sglang_modelopt_excluded(module, lst)
    if consumer == "vllm_modelopt":
        return vllm_modelopt(module, lst, fused)
    if consumer == "fnmatch":
        return any(fnmatch.fnmatchcase(module, p) for p in lst)
    if consumer == "fnmatch_subtree":
        return any(fnmatch.fnmatchcase(module, p) or fnmatch.fnmatchcase(module, p + ".*") for p in lst)
    if consumer == "transformers_v4":
        leaf = module.split(".")[-1]
        return leaf in lst or any(k in module for k in lst)
    if consumer == "transformers_v4_bnb":
        leaf = module.split(".")[-1]
        return leaf in lst or any(k + "." in module or k == module for k in lst)
    if consumer == "transformers_v5":
        return any(re.match(f"{k}\\.", module) or re.match(f"{k}", module) or module.endswith(k) for k in lst)
    raise KeyError(consumer)


CONSUMERS = ["sglang_fp8", "vllm_fp8", "sglang_is_layer_skipped", "sglang_awq", "vllm_awq",
             "sglang_compressed_tensors", "vllm_compressed_tensors", "compressed_tensors",
             "sglang_modelopt", "vllm_modelopt", "fnmatch", "fnmatch_subtree", "transformers_v4",
             "transformers_v4_bnb", "transformers_v5"]

MODULES = ["model.layers.{i}.self_attn.qkv_proj", "model.layers.{i}.self_attn.o_proj",
           "model.layers.{i}.mlp.gate_up_proj", "model.layers.{i}.mlp.down_proj",
           "model.layers.{i}.mlp.gate", "model.layers.{i}.mlp.experts",
           "model.layers.{i}.self_attn.fused_qkv_a_proj_with_mqa", "model.layers.{i}.self_attn.kv_b_proj",
           "model.language_model.layers.{i}.self_attn.o_proj", "language_model.model.layers.{i}.mlp.down_proj",
           "model.visual.blocks.{i}.attn.qkv", "vision_tower.encoder.layers.{i}.fc1", "lm_head",
           "model.mtp.layers.{i}.mlp.gate_up_proj", "model.layers.{i}.mlp.shared_experts.gate_up_proj"]

PIECES = ["model", "layers", "0", "1", "12", "self_attn", "mlp", "q_proj", "k_proj", "v_proj", "qkv_proj",
          "o_proj", "gate", "gate_proj", "up_proj", "gate_up_proj", "down_proj", "experts", "lm_head",
          "language_model", "visual", "mtp", "kv_b_proj", "q_a_proj", "kv_a_proj_with_mqa", "shared_experts"]

REGEXES = [r".*self_attn.*", r".*mlp\.(gate|up|gate_up|down)_proj.*", r".*lm_head", r"vision_tower.*",
           r".*mlp.gate$", r"model\.layers\.1\d*\.", r"model.layers.[0-2].self_attn", r".*gate{1,2}_?up",
           r".*\.(q|k|v)_proj$", r"(bad", r"model\.layers\.(?!0\.)\d+\.", r"[a-z_]+\.layers\.1\.mlp.*",
           r".*experts.*", r"lm_head|visual.*", r"model\.layers\.\d{1,2}\.mlp\.gate"]

GLOBS = ["*mlp.gate", "model.layers.1*", "model.layers.1.*", "*.self_attn.*", "lm_head*", "*visual*",
         "model.layers.[0-1].mlp.*", "model.layers.?.self_attn.q_proj", "*[!a-z]gate_up_proj", "mtp*",
         "*q_a_proj", "model.layers.12.self_attn.kv_a_proj_with_mqa", "model.layers.*.mlp.experts*",
         "*(gate|up)*", "model+layers*", "*.experts.0.*"]


def rand_entry(rng, i):
    r = rng.random()
    if r < 0.3:
        m = rng.choice(MODULES).format(i=rng.choice([i, i, 0, 1, 12]))
        parts = m.split(".")
        a = rng.randrange(len(parts))
        b = rng.randrange(a + 1, len(parts) + 1)
        run = parts[a:b]
        if run[-1] == "qkv_proj" and rng.random() < 0.6:
            run[-1] = rng.choice(["q_proj", "k_proj", "v_proj"])
        if run[-1] == "gate_up_proj" and rng.random() < 0.6:
            run[-1] = rng.choice(["gate_proj", "up_proj"])
        if run[-1] == "fused_qkv_a_proj_with_mqa" and rng.random() < 0.6:
            run[-1] = rng.choice(["q_a_proj", "kv_a_proj_with_mqa"])
        return ".".join(run) + ("." if rng.random() < 0.1 else "")
    if r < 0.45:
        return "re:" + rng.choice(REGEXES)
    if r < 0.55:
        return rng.choice(REGEXES)
    if r < 0.75:
        return rng.choice(GLOBS)
    if r < 0.85:
        return rng.choice(PIECES) if rng.random() < 0.5 else rng.choice(PIECES).upper()[:5]
    return ".".join(rng.sample(PIECES, rng.randint(1, 3)))


MAPPINGS = [{}, {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]},
            {"fused_qkv_a_proj_with_mqa": ["q_a_proj", "kv_a_proj_with_mqa"], "gate_up_proj": ["gate_proj", "up_proj"]}]


def main():
    global REF
    REF = load_reference(sys.argv[1])
    rng = random.Random(20261203)
    out = sys.stdout
    out.write(json.dumps({"consumers": CONSUMERS}) + "\n")
    for _ in range(1000):
        i = rng.choice([0, 1, 2, 12])
        lst = [rand_entry(rng, i) for _ in range(rng.randint(0, 4))]
        fused = rng.choice(MAPPINGS)
        cases = []
        for module in [rng.choice(MODULES).format(i=i) for _ in range(4)]:
            kind = "lm_head" if module == "lm_head" else "moe" if module.endswith(".experts") else "linear"
            verdicts = ""
            for consumer in CONSUMERS:
                try:
                    verdicts += "s" if decide(consumer, module, kind, lst, fused) else "n"
                except (Mixed, re.error):
                    verdicts += "e"
            cases.append([module, kind, verdicts])
        out.write(json.dumps({"list": lst, "packed_modules_mapping": fused, "cases": cases},
                             separators=(",", ":")) + "\n")

if __name__ == "__main__":
    main()
