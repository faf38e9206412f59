"""`qtl quantize` against llm-compressor's recorded bytes: test/data/llmcompressor/ holds a tiny
Qwen3-shaped bf16 checkpoint and what llm-compressor 0.14.0.1's `model_free_ptq` wrote for it in
each scheme (make_llmc_cases.py there made them). For each scheme this runs `qtl quantize` with the
matching flags on the same input and requires (llmc_rules.compare):
  - W4A16, W4A16_ASYM, W8A16, MXFP4A16: every tensor the same bytes;
  - NVFP4A16: every tensor but the quantized layers' the same bytes; both tools' global scale,
    block scales and codes the one compressed-tensors rule, llm-compressor's rounded to bf16 at
    three points and dividing, QTL's in float32 and multiplying by the reciprocal; the global
    scales shared over q/k/v and gate/up by both;
  - FP8_BLOCK, FP8_DYNAMIC: llm-compressor's BF16 scales are QTL's F32 scales rounded to bf16,
    its codes e4m3(bf16(x / s)), QTL's e4m3(x * (1/s));
  - quantization_config: every key equal but those of llmc_rules.KNOWN_CONFIG.
A known tensor difference that disappears fails too (docs/spec/checkpoint_formats.md would be wrong).

Usage: test_qtl_llmc.py QTL DATA_DIR   (standard library only)
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, run_in_temp_dir  # noqa: E402
import llmc_rules  # noqa: E402

QTL, DATA = sys.argv[1], sys.argv[2]


def test_scheme(tmp, scheme, inp):
    out = os.path.join(tmp, scheme)
    p = subprocess.run([QTL, "quantize", os.path.join(DATA, "input"), out, "--threads", "2"]
                       + llmc_rules.SCHEMES[scheme], capture_output=True, text=True)
    check(p.returncode == 0, "%s: qtl quantize rc %d: %s" % (scheme, p.returncode, p.stderr))
    if p.returncode:
        return
    ours = llmc_rules.read_folder(out)
    theirs = llmc_rules.st.read(os.path.join(DATA, scheme + ".safetensors"))[0]
    with open(os.path.join(out, "config.json")) as f:
        conf = json.load(f)
    with open(os.path.join(DATA, scheme + ".json")) as f:
        theirs_qc = json.load(f)
    with open(os.path.join(DATA, "input", "config.json")) as f:
        input_conf = json.load(f)
    ours_qc = conf.pop("quantization_config")
    check(conf == input_conf, "%s: config.json keeps the input's other keys" % scheme)
    equal, notes, failures = llmc_rules.compare(scheme, inp, ours, theirs, ours_qc, theirs_qc)
    for f in failures:
        check(False, "%s: %s" % (scheme, f))
    check(not failures, "%s: %d tensors equal of %d%s" % (scheme, equal, len(ours), "".join("; " + n for n in notes)))
    print("%s: %d tensors equal of %d%s" % (scheme, equal, len(ours), "".join("; " + n for n in notes)))


def main():
    inp = llmc_rules.read_folder(os.path.join(DATA, "input"))

    def tests(tmp):
        for scheme in llmc_rules.SCHEMES:
            test_scheme(tmp, scheme, inp)
    run_in_temp_dir("qtl_llmc_", tests)


if __name__ == "__main__":
    main()
