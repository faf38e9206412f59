#!/usr/bin/env python3
"""Generates auto_round_cases.jsonl: AutoRound `extra_config` resolution as vLLM's INC/AutoRound
config and sglang's auto_round routing do it (docs/spec/matchers.md §2.2, §2.7), re-stated in Python
with CPython's `re`: exact key first; `block_name_to_quantize` prefixes; a fused MoE takes the
agreeing config of every key under it; a fused linear the agreeing config of its shards; else the
first regex key (one with a character of `*+?^$()[]{}|\\`) that vLLM `re.search`es / sglang
`re.fullmatch`es, invalid keys skipped; 16 bits means unquantized.
test/unit/golden_configs_test.cpp replays every line through qtl::decide.

Usage: gen_auto_round_cases.py > auto_round_cases.jsonl   (deterministic)
"""
import json
import random
import re
import sys

SPECIAL = set("*+?^$()[]{}|\\")


def resolve(verb, cfg, name, kind, packed):
    extra = cfg["extra_config"]
    bits, gs, sym = cfg["bits"], cfg["group_size"], cfg["sym"]

    def get_config(n, quantized=True):
        base = (bits if quantized else 16, gs if quantized else -1, sym if quantized else True)
        if not extra:
            return base + (None,)
        if n in extra:
            e = extra[n]
            return (e.get("bits", base[0]), e.get("group_size", base[1]), e.get("sym", base[2]), n)
        for pattern, e in extra.items():
            if not any(c in SPECIAL for c in pattern):
                continue
            try:
                hit = (re.search if verb == "search" else re.fullmatch)(pattern, n) is not None
            except re.error:
                continue
            if hit:
                return (e.get("bits", base[0]), e.get("group_size", base[1]), e.get("sym", base[2]), pattern)
        return base + (None,)

    if name in extra:
        return get_config(name)
    quantized = kind != "lm_head"
    if cfg["block_name_to_quantize"]:
        quantized = any(name.startswith(b) for b in cfg["block_name_to_quantize"])
    if extra and kind == "moe":
        subs = [get_config(k, quantized) for k in extra if k.startswith(name)]
        if subs:
            if len({s[:3] for s in subs}) == 1:
                return subs[0]
            raise ValueError("moe")
    if extra:
        for fused, shards in packed.items():
            if fused in name and name.count(fused) == 1:
                subs = [get_config(name.replace(fused, s), quantized) for s in shards]
                if len({s[:3] for s in subs}) == 1:
                    return subs[0]
                raise ValueError("fused")
    return get_config(name, quantized)


MODULES = ["model.layers.{i}.self_attn.qkv_proj", "model.layers.{i}.self_attn.o_proj",
           "model.layers.{i}.mlp.gate_up_proj", "model.layers.{i}.mlp.down_proj",
           "model.layers.{i}.mlp.experts", "model.layers.{i}.mlp.experts.0.down_proj",
           "model.layers.{i}.mlp.shared_experts.down_proj", "lm_head", "model.mtp.fc", "visual.blocks.{i}.fc1"]

REGEX_KEYS = [r".*shared_experts.*", r"model\.layers\.{i}\.mlp\.experts\.0\.down_proj", r".*lm_head",
              r"model\.layers\.\d+\.self_attn\.(q|k|v)_proj", r".*mlp\.gate.*", r"^model\.mtp.*", r"(bad",
              r".*down_proj$", r"model.layers.{i}.mlp", r".*\.{i}\..*", r"visual\.blocks\.\d+\.fc1"]

LITERAL_KEYS = ["lm_head", "model.layers.{i}.self_attn.q_proj", "model.layers.{i}.self_attn.k_proj",
                "model.layers.{i}.self_attn.v_proj", "model.layers.{i}.mlp.gate_proj", "model.layers.{i}.mlp.up_proj",
                "model.layers.{i}.mlp.experts.0.down_proj", "model.layers.{i}.mlp.experts.1.down_proj",
                "model.layers.{i}.mlp", "model.mtp.fc"]


def rand_value(rng):
    v = {}
    v["bits"] = rng.choice([2, 4, 8, 16, 16])
    if rng.random() < 0.4:
        v["group_size"] = rng.choice([-1, 32, 128])
    if rng.random() < 0.3:
        v["sym"] = rng.choice([True, False])
    if rng.random() < 0.3:
        v["data_type"] = rng.choice(["int", "float"])
    return v


def main():
    rng = random.Random(20261204)
    out = sys.stdout
    for _ in range(300):
        i = rng.choice([0, 1, 11])
        extra = {}
        for _ in range(rng.randint(0, 4)):
            key = rng.choice(REGEX_KEYS if rng.random() < 0.5 else LITERAL_KEYS).replace("{i}", str(rng.choice([i, 1])))
            extra[key] = rand_value(rng)
        block = rng.choice([[], ["model.layers"], ["model.layers", "model.mtp"], ["model.layers.1"]])
        packed = rng.choice([{}, {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}])
        cfg = {"bits": rng.choice([4, 8]), "group_size": rng.choice([64, 128]), "sym": rng.choice([True, False]),
               "extra_config": extra, "block_name_to_quantize": block}
        cases = []
        for _ in range(4):
            module = rng.choice(MODULES).format(i=i)
            kind = "lm_head" if module == "lm_head" else "moe" if module.endswith(".experts") else "linear"
            for verb, consumer in (("search", "vllm_auto_round"), ("fullmatch", "sglang_auto_round")):
                try:
                    b, g, s, rule = resolve(verb, cfg, module, kind, packed)
                    # what the engines do with the values: an int below 16 bits quantizes
                    cases.append([module, kind, consumer, {"bits": b, "group_size": g, "sym": s, "rule": rule}])
                except ValueError:
                    cases.append([module, kind, consumer, "error"])
        doc = {"quantization_config": {"quant_method": "auto-round", "bits": cfg["bits"],
                                       "group_size": cfg["group_size"], "sym": cfg["sym"],
                                       "block_name_to_quantize": block, "extra_config": extra},
               "packed_modules_mapping": packed, "cases": cases}
        out.write(json.dumps(doc, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
