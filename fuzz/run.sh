#!/usr/bin/env bash
# Builds every fuzz/*_fuzz.cpp (libFuzzer) with clang in its own folder (Meson 1.0.1's b_sanitize has
# no 'fuzzer'), and runs each for FUZZ_SECONDS (default 20) from its seed corpus fuzz/corpus/<name>/.
# Prints one line per target and exits non-zero if any target failed to build or found a crash.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-20}
out=${FUZZ_OUT:-build-fuzz}
mkdir -p "$out"
cxx=${CXX_FUZZ:-clang++}
passed=0
failed=0
for src in fuzz/*_fuzz.cpp; do
  [ -e "$src" ] || continue
  name=$(basename "$src" .cpp)
  corpus_seed="fuzz/corpus/${name%_fuzz}"
  bin="$out/$name"
  if ! $cxx -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -Iinclude "$src" -o "$bin" 2>"$out/$name.build.log"; then
    echo "fuzz $name: BUILD FAILED"; tail -20 "$out/$name.build.log"; failed=$((failed + 1)); continue
  fi
  work="$out/$name.corpus"
  rm -rf "$work"; mkdir -p "$work"
  [ -d "$corpus_seed" ] && cp -r "$corpus_seed"/. "$work"/
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
        -artifact_prefix="$out/$name-" "$work" >"$out/$name.log" 2>&1; then
    echo "fuzz $name: OK ($(grep -c . <(ls "$work")) corpus files after ${seconds}s)"; passed=$((passed + 1))
  else
    echo "fuzz $name: FAILED"; tail -30 "$out/$name.log"; failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
