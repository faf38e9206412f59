#!/usr/bin/env bash
# Builds every fuzz/*_fuzz.cpp (libFuzzer) with clang in its own folder (Meson 1.0.1's b_sanitize has
# no 'fuzzer'), and runs each for FUZZ_SECONDS (default 20) from its seed corpus fuzz/corpus/<name>/.
# Targets are built and run FUZZ_JOBS at a time (default: one per core; a fuzzer uses one core), so
# each keeps its whole time budget and the stage takes about targets / jobs x FUZZ_SECONDS.
# Prints one line per target, in a fixed order, and exits non-zero if any target failed to build or
# found a crash.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-20}
jobs=${FUZZ_JOBS:-$(nproc)}
out=${FUZZ_OUT:-build-fuzz}
mkdir -p "$out"
cxx=${CXX_FUZZ:-clang++}

# One target: build, run, and leave its verdict line in $out/<name>.result (OK or FAILED first).
fuzz_one() {
  local src=$1 name bin work corpus_seed
  name=$(basename "$src" .cpp)
  corpus_seed="fuzz/corpus/${name%_fuzz}"
  bin="$out/$name"
  if ! $cxx -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -Iinclude "$src" -o "$bin" 2>"$out/$name.build.log"; then
    { echo "FAILED fuzz $name: BUILD FAILED"; tail -20 "$out/$name.build.log"; } >"$out/$name.result"
    return
  fi
  work="$out/$name.corpus"
  rm -rf "$work"; mkdir -p "$work"
  [ -d "$corpus_seed" ] && cp -r "$corpus_seed"/. "$work"/
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
        -artifact_prefix="$out/$name-" "$work" >"$out/$name.log" 2>&1; then
    echo "OK fuzz $name: OK ($(find "$work" -type f | wc -l) corpus files after ${seconds}s)" >"$out/$name.result"
  else
    { echo "FAILED fuzz $name: FAILED"; tail -30 "$out/$name.log"; } >"$out/$name.result"
  fi
}

targets=()
for src in fuzz/*_fuzz.cpp; do
  [ -e "$src" ] && targets+=("$src")
done
running=0
for src in "${targets[@]}"; do
  rm -f "$out/$(basename "$src" .cpp).result"
  fuzz_one "$src" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

passed=0
failed=0
for src in "${targets[@]}"; do
  result="$out/$(basename "$src" .cpp).result"
  if [ -f "$result" ] && head -n 1 "$result" | grep -q '^OK '; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
  if [ -f "$result" ]; then
    sed '1s/^[A-Z]* //' "$result"
  else
    echo "fuzz $(basename "$src" .cpp): no result"
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
