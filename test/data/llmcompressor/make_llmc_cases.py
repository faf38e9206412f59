#!/usr/bin/env python3
"""Writes what llm-compressor's `model_free_ptq` makes of a tiny Qwen3-shaped bf16 checkpoint, for
test/tools/test_qtl_llmc.py (which runs `qtl quantize` on the same input in CI, without torch):

  input/model.safetensors, input/config.json   the checkpoint (one layer, 14 KB of linear weights:
                                               q [16,128], k/v [8,128], o [16,128], gate/up
                                               [16,128], down [16,256]; embed_tokens and lm_head
                                               [8,128]; the norms)
  <SCHEME>.safetensors                         model_free_ptq(scheme=SCHEME, ignore=IGNORE) output
  <SCHEME>.json                                its config.json's quantization_config

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


def main():
    out = sys.argv[1]
    src = os.path.join(out, "input")
    shutil.rmtree(src, ignore_errors=True)
    cmp.write_checkpoint(src, cmp.qwen3_tensors(SHAPES, layers=1, seed=1), lambda name: "model.safetensors",
                         cmp.qwen3_config(1, 128, 16, 1, 1, 16, 8))
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
