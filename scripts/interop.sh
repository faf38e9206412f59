#!/usr/bin/env bash
# The heavy interop tier, opt-in, one command (test/interop/README.md):
#   scripts/interop.sh
# 1. the pinned heavy venv (scripts/interop-venv.sh heavy: torch, transformers, accelerate,
#    compressed-tensors, torchao; cached in .venv-interop-heavy), then the GPTQ step (optimum +
#    gptqmodel) which may fail alone, and the vLLM/sglang wheels (downloaded, not installed);
# 2. qtl built with -Dcuda=disabled -Dbenchmarks=disabled (build-interop/, or $QTL_BUILD_DIR);
# 3. each test/interop/heavy/test_*.py under OMP_NUM_THREADS=1, tiny models made locally;
# 4. scripts/python-heavy.sh "$VENV_PYTHON" when that file exists (the torch tier of `import qtl`);
# then one results table. Exit 1 when any row failed (the GPTQ install row included).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 CUDA_VISIBLE_DEVICES= \
  OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1
build=${QTL_BUILD_DIR:-$root/build-interop}
log=${QTL_INTEROP_WORK:-$build/interop-heavy}/logs
mkdir -p "$log"
rows=()
results=()
failed=0
row() { rows+=("$(printf '| %-34s | %-6s | %6s | %6s | %6s | %7s | %s' "$1" "$2" "$3" "$4" "$5" "$6" "$7")"); }

start=$(date +%s)
if VENV_PYTHON=$(scripts/interop-venv.sh heavy 2>"$log/venv.log" | tail -n 1) && [ -x "$VENV_PYTHON" ]; then
  row "venv: core (torch, CT, torchao)" PASS - - - $(( $(date +%s) - start ))s "$(grep -c . test/interop/requirements-heavy.txt) pinned lines"
else
  row "venv: core (torch, CT, torchao)" FAIL - - - - "pip failed: $log/venv.log"
  failed=1
  printf '%s\n' "${rows[@]}"; echo "0 passed, 1 failed"; exit 1
fi
start=$(date +%s)
if scripts/interop-venv.sh gptq >"$log/gptq-venv.log" 2>&1; then
  gptq_ok=1; row "venv: gptq (optimum, gptqmodel)" PASS - - - $(( $(date +%s) - start ))s ""
else
  gptq_ok=0; failed=1
  row "venv: gptq (optimum, gptqmodel)" FAIL - - - - "$(grep -m1 -E 'ERROR|error:' "$log/gptq-venv.log" | cut -c1-120)"
fi
wheels=$(dirname "$VENV_PYTHON")/../wheels
if "$VENV_PYTHON" -m pip download --quiet --no-deps --only-binary=:all: -d "$wheels" \
     -r test/interop/requirements-engines.txt >"$log/wheels.log" 2>&1; then
  row "wheels: vllm, sglang (not installed)" PASS - - - - "$(ls "$wheels" | tr '\n' ' ')"
else
  row "wheels: vllm, sglang (not installed)" FAIL - - - - "see $log/wheels.log"; failed=1
fi
export QTL_INTEROP_WHEELS=$wheels

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dcuda=disabled -Dbenchmarks=disabled >"$log/meson.log" 2>&1
fi
if ! ninja -C "$build" tools/qtl/qtl test/interop/dump_numeric >"$log/build.log" 2>&1; then
  row "build qtl" FAIL - - - - "see $log/build.log"
  printf '%s\n' "${rows[@]}"; echo "0 passed, 1 failed"; exit 1
fi
export QTL_BUILD_DIR=$build QTL_INTEROP_WORK=${QTL_INTEROP_WORK:-$build/interop-heavy}

total_p=0; total_f=0; total_s=0
for t in test/interop/heavy/test_*.py; do
  name=$(basename "$t" .py)
  if [ "$name" = test_gptq ] && [ "$gptq_ok" = 0 ]; then
    row "$name" SKIP - - - - "the gptq venv step failed (above)"; continue
  fi
  start=$(date +%s)
  "$VENV_PYTHON" -m pytest -q -s -p no:cacheprovider "$t" >"$log/$name.log" 2>&1; rc=$?
  last=$(grep -E '^[=]* ?[0-9]+ (passed|failed|skipped|error)' "$log/$name.log" | tail -n 1)
  p=$(echo "$last" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
  f=$(echo "$last" | grep -oE '[0-9]+ (failed|errors?)' | awk '{s += $1} END {print s + 0}')
  s=$(echo "$last" | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+' || echo 0)
  [ -n "$f" ] || f=0
  if [ "$rc" -ne 0 ] && [ "$f" = 0 ]; then f=1; fi
  total_p=$((total_p + p)); total_f=$((total_f + f)); total_s=$((total_s + s))
  while IFS= read -r r; do results+=("$name: $r"); done < <(grep -oE 'RESULT .*' "$log/$name.log" | sed 's/^RESULT //')
  note="$(grep -oE 'RESULT .*' "$log/$name.log" | grep -c .) results below"
  if [ "$rc" -eq 0 ]; then st=PASS; else st=FAIL; failed=1; note="$(grep -m1 -E '^(FAILED|ERROR)' "$log/$name.log" | cut -c1-160) (log: $log/$name.log)"; fi
  row "$name" "$st" "$p" "$f" "$s" $(( $(date +%s) - start ))s "$note"
done

if [ -f scripts/python-heavy.sh ]; then
  start=$(date +%s)
  if bash scripts/python-heavy.sh "$VENV_PYTHON" >"$log/python-heavy.log" 2>&1; then
    row "python-heavy.sh (import qtl, torch)" PASS - - - $(( $(date +%s) - start ))s "$(tail -n 1 "$log/python-heavy.log" | cut -c1-120)"
  else
    row "python-heavy.sh (import qtl, torch)" FAIL - - - $(( $(date +%s) - start ))s "see $log/python-heavy.log"; failed=1
  fi
else
  row "python-heavy.sh (import qtl, torch)" ABSENT - - - - "scripts/python-heavy.sh does not exist in this tree"
fi

echo
echo "interop heavy tier: $("$VENV_PYTHON" -c 'import torch, transformers, compressed_tensors, torchao; print("torch", torch.__version__, "transformers", transformers.__version__, "compressed-tensors", compressed_tensors.__version__, "torchao", torchao.__version__)' 2>/dev/null)"
printf '| %-34s | %-6s | %6s | %6s | %6s | %7s | %s\n' check result passed failed skipped time notes
printf '|%s|\n' "------------------------------------|--------|--------|--------|--------|---------|------"
printf '%s\n' "${rows[@]}"
echo
echo "results (the RESULT lines of the tests):"
printf '  %s\n' "${results[@]}"
echo "$total_p passed, $total_f failed, $total_s skipped"
exit "$failed"
