"""The compressed-tensors library's own decisions for the mixed-precision configs of this folder.

Usage (the heavy tier's environment, which has compressed-tensors and torch):
    python make_ct_library_cases.py            # rewrites ct_library_expected.json

For each ct_*.json config here it builds a Qwen3-MoE-shaped model of torch.nn.Linear and
torch.nn.RMSNorm modules named as the checkpoint names them, runs compressed-tensors'
`apply_quantization_config` on it and records, for every module, the config group whose scheme
the library attached (null: none). `llmc_fp8_w4a16.json` is also written here, by the library's
own serializer: the config llm-compressor's model_free_ptq writes for attention FP8 per channel
and MLP W4A16 group 128 (`QuantizationConfig.model_dump()` with the per-group formats).
"""

import json
import pathlib

import compressed_tensors
import torch
from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config

HERE = pathlib.Path(__file__).resolve().parent
LAYERS = 2
EXPERTS = 2


def module_names():
    """(name, kind) of the modules of a two-layer Qwen3-MoE-shaped model with a dense layer 0."""
    out = [("model.embed_tokens", "embedding")]
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm", "norm"), (p + "post_attention_layernorm", "norm")]
        out += [(p + f"self_attn.{x}_proj", "linear") for x in "qkvo"]
        out += [(p + "self_attn.q_norm", "norm"), (p + "self_attn.k_norm", "norm")]
        if i == 0:
            out += [(p + f"mlp.{x}_proj", "linear") for x in ("gate", "up", "down")]
        else:
            out += [(p + "mlp.gate", "linear")]
            for e in range(EXPERTS):
                out += [(p + f"mlp.experts.{e}.{x}_proj", "linear") for x in ("gate", "up", "down")]
    out += [("model.norm", "norm"), ("lm_head", "linear")]
    return out


def build_model(names):
    root = torch.nn.Module()
    for name, kind in names:
        parent = root
        parts = name.split(".")
        for part in parts[:-1]:
            if not hasattr(parent, part):
                parent.add_module(part, torch.nn.Module())
            parent = getattr(parent, part)
        module = {"linear": lambda: torch.nn.Linear(8, 8, bias=False), "norm": lambda: torch.nn.RMSNorm(8),
                  "embedding": lambda: torch.nn.Embedding(4, 8)}[kind]()
        parent.add_module(parts[-1], module)
    return root


def write_llmc_config():
    fp8 = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False}
    fp8_act = {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": True, "dynamic": True}
    w4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True, "dynamic": False}
    config = QuantizationConfig(
        config_groups={
            "group_0": {"targets": ["re:.*self_attn\\.(q|k|v|o)_proj$"], "weights": fp8,
                        "input_activations": fp8_act, "format": "float-quantized"},
            "group_1": {"targets": ["Linear"], "weights": w4, "format": "pack-quantized"},
        },
        ignore=["lm_head", "re:.*mlp\\.gate$"],
        format="mixed-precision",
        quantization_status="compressed",
    )
    doc = config.model_dump(mode="json")
    doc["quant_method"] = "compressed-tensors"
    doc["version"] = compressed_tensors.__version__
    (HERE / "llmc_fp8_w4a16.json").write_text(json.dumps({"quantization_config": doc}, indent=1) + "\n")


def group_of(config_doc, scheme):
    for name, group in config_doc["config_groups"].items():
        if list(group["targets"]) == list(scheme.targets):
            return name
    raise AssertionError("scheme of no group")


def main():
    write_llmc_config()
    names = module_names()
    expected = {"compressed_tensors_version": compressed_tensors.__version__, "configs": {}}
    for path in sorted(HERE.glob("*.json")):
        doc = json.loads(path.read_text())
        q = doc.get("quantization_config", doc)
        if q.get("quant_method") != "compressed-tensors":
            continue
        model = build_model(names)
        apply_quantization_config(model, QuantizationConfig.model_validate(q), show_progress=False)
        decided = {}
        for name, _ in names:
            scheme = getattr(model.get_submodule(name), "quantization_scheme", None)
            decided[name] = None if scheme is None else group_of(q, scheme)
        expected["configs"][path.name] = decided
    (HERE / "ct_library_expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
