#!/usr/bin/env bash
# The producers tier, opt-in (not in CI): llm-compressor's model_free_ptq and `qtl quantize` on the
# same Qwen3-shaped bf16 checkpoint, every tensor and config key compared
# (test/interop/producers/compare_llmcompressor.py; the rules are test/tools/llmc_rules.py, which
# CI's test_qtl_llmc applies to the outputs recorded in test/data/llmcompressor/).
#   scripts/interop-producers.sh [SCHEME ...]        # default: every scheme
# 1. the pinned producers venv (scripts/interop-venv.sh producers: llmcompressor, auto-round, torch,
#    transformers, compressed-tensors; cached in .venv-interop-producers);
# 2. qtl built with -Dcuda=disabled -Dbenchmarks=disabled (build-interop/, or $QTL_BUILD_DIR);
# 3. the comparison on the CPU, offline, OMP_NUM_THREADS=1, in $QTL_INTEROP_WORK (default
#    build-interop/interop-producers). Exit 1 when a scheme differs other than as documented.
# To record the CI data again: $VENV_PYTHON test/data/llmcompressor/make_llmc_cases.py test/data/llmcompressor
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 CUDA_VISIBLE_DEVICES= \
  OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
build=${QTL_BUILD_DIR:-$root/build-interop}
work=${QTL_INTEROP_WORK:-$build/interop-producers}
py=$(scripts/interop-venv.sh producers | tail -n 1)
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dcuda=disabled -Dbenchmarks=disabled >&2
fi
ninja -C "$build" tools/qtl/qtl >&2
mkdir -p "$work"
"$py" test/interop/producers/compare_llmcompressor.py "$build/tools/qtl/qtl" "$work" "$@" 2>"$work/producers.log"
