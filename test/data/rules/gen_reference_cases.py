#!/usr/bin/env python3
"""Generates reference_cases.jsonl: decisions of the reference Python itself.

The functions `_module_path_match`, `_FALLBACK_FUSED_SHARDS`, `is_layer_skipped`,
`override_config`, `get_dynamic_override` and `get_linear_quant_method` are taken verbatim from
the reference Python (sglang's quantization/utils.py, given as <reference.py>; extracted with
`ast`, so torch and sglang are not needed; the sglang classes that get_linear_quant_method
imports are stand-ins), then run on random module names, skip lists, fused mappings and dynamic
rule tables. test/unit/rules_test.cpp replays every line against qtl::is_layer_skipped /
qtl::get_linear_quant_method.

Usage: gen_reference_cases.py <reference.py> > reference_cases.jsonl   (deterministic: seed 20261202)
"""
import __future__
import ast
import copy
import json
import random
import re
import sys
import types
from copy import deepcopy
from types import MappingProxyType
from typing import Dict, List, Mapping, Optional, Union

WANTED = {"_module_path_match", "_FALLBACK_FUSED_SHARDS", "is_layer_skipped", "override_config",
          "get_dynamic_override", "get_linear_quant_method"}


def load_reference(path):
    tree = ast.parse(open(path).read())
    body = []
    for node in tree.body:
        name = getattr(node, "name", None)
        if isinstance(node, ast.AnnAssign):
            name = node.target.id
        if name in WANTED:
            body.append(node)
    ns = {"re": re, "deepcopy": deepcopy, "MappingProxyType": MappingProxyType, "Mapping": Mapping,
          "List": List, "Dict": Dict, "Optional": Optional, "Union": Union,
          "QuantizationConfig": object, "torch": None}
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec",
                 flags=__future__.annotations.compiler_flag, dont_inherit=True), ns)
    return ns


# Stand-ins for the sglang classes get_linear_quant_method imports.
class LinearBase: pass
class ParallelLMHead: pass
class UnquantizedLinearMethod: pass
class UnquantizedEmbeddingMethod: pass
class Other: pass


def install_stubs():
    for mod, attrs in {
        "sglang": {}, "sglang.srt": {}, "sglang.srt.layers": {},
        "sglang.srt.layers.linear": {"LinearBase": LinearBase},
        "sglang.srt.layers.quantization": {},
        "sglang.srt.layers.quantization.unquant": {"UnquantizedEmbeddingMethod": UnquantizedEmbeddingMethod,
                                                   "UnquantizedLinearMethod": UnquantizedLinearMethod},
        "sglang.srt.layers.vocab_parallel_embedding": {"ParallelLMHead": ParallelLMHead},
    }.items():
        m = types.ModuleType(mod)
        m.__dict__.update(attrs)
        sys.modules[mod] = m


class Config:
    TYPE_MAP = {(4, True): "uint4b8", (8, True): "uint8b128"}

    def __init__(self, name, bits, group_size, desc_act, sym, lm_head, dynamic):
        self.name, self.weight_bits, self.group_size = name, bits, group_size
        self.desc_act, self.is_sym, self.lm_head_quantized, self.dynamic = desc_act, sym, lm_head, dynamic
        self.pack_factor = 32 // bits
        self.quant_type = self.TYPE_MAP.get((bits, sym)) if name == "gptq_marlin" else None

    def get_name(self):
        return self.name


class Method:
    def __init__(self, cfg):
        self.cfg = cfg


COMPONENTS = ["model", "layers", "0", "1", "2", "10", "self_attn", "mlp", "qkv_proj", "q_proj",
              "k_proj", "v_proj", "o_proj", "gate", "gate_up_proj", "gate_proj", "up_proj",
              "down_proj", "experts", "shared_experts", "lm_head", "in_proj_ba", "mtp"]


def rand_module(rng):
    head = ["model", "layers", rng.choice(["0", "1", "2", "10"])]
    tail = rng.choice([["self_attn", "qkv_proj"], ["self_attn", "o_proj"], ["mlp", "gate_up_proj"],
                       ["mlp", "down_proj"], ["mlp", "gate"], ["mlp", "experts"],
                       ["mlp", "experts", rng.choice(["0", "1"]), "down_proj"],
                       ["mlp", "shared_experts", "gate_up_proj"], ["self_attn", "q_proj"],
                       ["linear_attn", "in_proj_ba"], ["qkv_proj", "qkv_proj"]])
    if rng.random() < 0.1:
        return "lm_head"
    if rng.random() < 0.1:
        head = ["model", "mtp"] + head[1:]
    return ".".join(head + tail)


def rand_entry(rng, module):
    parts = module.split(".")
    r = rng.random()
    if r < 0.35:  # a contiguous run of components of this (or a shard) name
        i = rng.randrange(len(parts))
        j = rng.randrange(i + 1, len(parts) + 1)
        run = parts[i:j]
        if rng.random() < 0.4 and run[-1] in ("qkv_proj", "gate_up_proj"):
            run[-1] = rng.choice({"qkv_proj": ["q_proj", "k_proj", "v_proj"],
                                  "gate_up_proj": ["gate_proj", "up_proj"]}[run[-1]])
        s = ".".join(run)
        return s + ("." if rng.random() < 0.15 else "")
    if r < 0.5:  # a partial component (substring hazards)
        s = module[rng.randrange(len(module)):]
        return s[: rng.randrange(1, len(s) + 1)]
    return rand_module(rng) if rng.random() < 0.7 else ".".join(rng.sample(COMPONENTS, rng.randint(1, 3)))


MAPPINGS = [None, {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]},
            {"fused_qkv_a_proj_with_mqa": ["q_a_proj", "kv_a_proj_with_mqa"]},
            {"in_proj_ba": ["in_proj_b", "in_proj_a"]}, {"experts": []}]

PATTERNS = [r".*", r".*\.1\..*", r"model\.layers\.1\.", r"model\.layers\.(?!(?:0|2)\.)\d+\.",
            r".*down.*", r".*\.(?:[1-9]|1[0-9])\..*", r".*gate.*", r".*.mlp.gate.*", r"lm_head",
            r"^model\.mtp\.", r".*experts\.[01]\.", r"model\.layers\.\d+\.self_attn\.(q|qkv)_proj$",
            r".*\.gate_proj.*", r"model.layers.1.", r".*shared_experts.*", r"mod"]

VALUES = [None, True, False, 0, 1, 2, 3, 4, 5, 8, 16, 32, 64, 128, -1, 4.0, "4"]


def rand_body(rng):
    r = rng.random()
    if r < 0.08:
        return rng.choice([True, False, 0, 1, 0.0, "x", None, [4]])
    body = {}
    for key in ("bits", "group_size", "desc_act", "sym"):
        if rng.random() < 0.35:
            body[key] = rng.choice(VALUES)
    return body


def main():
    ref = load_reference(sys.argv[1])
    install_stubs()
    rng = random.Random(20261202)
    out = sys.stdout
    for _ in range(1500):
        module = rand_module(rng)
        entries = [rand_entry(rng, module) for _ in range(rng.randint(0, 4))]
        mapping = rng.choice(MAPPINGS)
        try:
            if mapping is None:
                res = ref["is_layer_skipped"](module, entries)
            else:
                res = ref["is_layer_skipped"](module, entries, mapping)
            verdict = "skip" if res else "no_skip"
        except ValueError:
            verdict = "error"
        except AssertionError:
            verdict = "assert"
        out.write(json.dumps({"kind": "skip", "prefix": module, "ignored": entries, "mapping": mapping,
                              "expected": verdict}, separators=(",", ":")) + "\n")
    for _ in range(1500):
        module = rand_module(rng) if rng.random() < 0.95 else ""
        dynamic = {}
        for _ in range(rng.randint(0, 3)):
            sign = rng.choice(["", "+:", "-:"])
            dynamic[sign + rng.choice(PATTERNS)] = rand_body(rng)
        name = rng.choice(["gptq", "gptq_marlin"])
        bits = rng.choice([2, 3, 4, 8]) if name == "gptq" else rng.choice([4, 8])
        cfg = Config(name, bits, rng.choice([-1, 32, 64, 128]), rng.choice([False, True]), True,
                     rng.choice([False, True]), dynamic)
        layer_kind = rng.choice(["linear", "linear", "linear", "lm_head", "other"])
        layer = {"linear": LinearBase, "lm_head": ParallelLMHead, "other": Other}[layer_kind]()
        record = {"kind": "dynamic", "prefix": module, "method": name, "bits": bits,
                  "group_size": cfg.group_size, "desc_act": cfg.desc_act, "sym": cfg.is_sym,
                  "lm_head_quantized": cfg.lm_head_quantized, "layer": layer_kind,
                  "dynamic": [[k, v] for k, v in dynamic.items()]}
        try:
            m = ref["get_linear_quant_method"](cfg, layer, module, Method)
            if m is None:
                record["expected"] = "none"
            elif isinstance(m, UnquantizedLinearMethod):
                record["expected"] = "unquantized_linear"
            elif isinstance(m, UnquantizedEmbeddingMethod):
                record["expected"] = "unquantized_embedding"
            else:
                c = m.cfg
                record["expected"] = "quantized"
                record["result"] = {"bits": int(c.weight_bits), "group_size": int(c.group_size),
                                    "desc_act": bool(c.desc_act), "sym": bool(c.is_sym),
                                    "pack_factor": c.pack_factor, "quant_type": c.quant_type}
        except Exception as e:  # the consumer's error: its type and message
            record["expected"] = "error"
            record["error"] = f"{type(e).__name__}: {e}"
        out.write(json.dumps(record, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
