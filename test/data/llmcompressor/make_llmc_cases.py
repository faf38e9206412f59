#!/usr/bin/env python3
"""Writes what llm-compressor's `model_free_ptq` makes of a tiny Qwen3-shaped bf16 checkpoint, for
test/tools/test_qtl_llmc.py (which runs `qtl quantize` on the same input in CI, without torch):

  input/model.safetensors, input/config.json   the checkpoint (one layer, 14 KB of linear weights:
                                               q [16,128], k/v [8,128], o [16,128], gate/up
                                               [16,128], down [16,256]; embed_tokens and lm_head
                                               [8,128]; the norms)
  <SCHEME>.safetensors                         model_free_ptq(scheme=SCHEME, ignore=IGNORE) output
  <SCHEME>.json                                its config.json's quantization_config
  RECIPE.safetensors, RECIPE.json              model_free_ptq(config=llmc_rules.RECIPE's groups), for
                                               test/tools/test_qtl_recipe.py (`... make_llmc_cases.py DIR
                                               recipe` writes these alone)

for each scheme of llmc_rules.SCHEMES (test/tools/) (W4A16, W4A16_ASYM, W8A16, NVFP4A16, MXFP4A16,
FP8_BLOCK, FP8_DYNAMIC). Needs the producers venv (scripts/interop-venv.sh producers:
llmcompressor 0.14.0.1, compressed-tensors 0.19.0, torch 2.14.0 on the CPU):

    .venv-interop-producers/bin/python test/data/llmcompressor/make_llmc_cases.py test/data/llmcompressor
"""
import json
import os
import shutil
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "interop", "producers"))
import compare_llmcompressor as cmp  # noqa: E402

SHAPES = {"q_proj": (16, 128), "k_proj": (8, 128), "v_proj": (8, 128), "o_proj": (16, 128),
          "gate_proj": (16, 128), "up_proj": (16, 128), "down_proj": (16, 256),
          "embed_tokens": (8, 128), "lm_head": (8, 128), "hidden": 128, "head_dim": 16}


def write_recipe_case(out):
    """RECIPE.safetensors/.json: model_free_ptq given llmc_rules.RECIPE's groups as one config."""
    from compressed_tensors.quantization import QuantizationConfig, preset_name_to_scheme
    from llmcompressor import model_free_ptq
    groups = {name: preset_name_to_scheme(preset, targets) for name, targets, preset, _ in cmp.llmc_rules.RECIPE}
    config = QuantizationConfig(config_groups=groups, ignore=cmp.llmc_rules.IGNORE)
    with tempfile.TemporaryDirectory() as tmp:
        model_free_ptq(os.path.join(out, "input"), os.path.join(tmp, "o"), config=config, max_workers=1, device="cpu")
        shutil.copyfile(os.path.join(tmp, "o", "model.safetensors"), os.path.join(out, "RECIPE.safetensors"))
        with open(os.path.join(tmp, "o", "config.json")) as f:
            qc = json.load(f)["quantization_config"]
    with open(os.path.join(out, "RECIPE.json"), "w") as f:
        json.dump(qc, f, indent=1, sort_keys=True)
        f.write("\n")
    print("RECIPE written")


def main():
    out = sys.argv[1]
    if sys.argv[2:] == ["recipe"]:  # the recipe case alone, on the recorded input
        write_recipe_case(out)
        return
    src = os.path.join(out, "input")
    shutil.rmtree(src, ignore_errors=True)
    cmp.write_checkpoint(src, cmp.qwen3_tensors(SHAPES, layers=1, seed=1), lambda name: "model.safetensors",
                         cmp.qwen3_config(1, 128, 16, 1, 1, 16, 8))
    write_recipe_case(out)
    for scheme in cmp.llmc_rules.SCHEMES:
        with tempfile.TemporaryDirectory() as tmp:
            cmp.run_llmc(src, os.path.join(tmp, "o"), scheme)
            shutil.copyfile(os.path.join(tmp, "o", "model.safetensors"), os.path.join(out, scheme + ".safetensors"))
            with open(os.path.join(tmp, "o", "config.json")) as f:
                qc = json.load(f)["quantization_config"]
        with open(os.path.join(out, scheme + ".json"), "w") as f:
            json.dump(qc, f, indent=1, sort_keys=True)
            f.write("\n")
        print(scheme, "written")


if __name__ == "__main__":
    main()
