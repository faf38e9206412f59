#!/usr/bin/env bash
# QTL's whole test suite, from a fresh Debian 12 machine: installs the missing Debian packages (as
# root), configures build/ (CUDA kernels included where nvcc exists), builds everything, and runs
# `meson test` (static, headers, unit, compile_fail, cuda, tools, consumers, examples).
# Extra arguments go to `meson test` (e.g. --suite unit). QTL_SETUP_ARGS adds options to a first
# `meson setup` (CI passes -Ddebug=false: the same -O2 code without debug info, a third less compile time).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH   # Meson finds nvcc only on PATH
fi
builddir=${QTL_BUILD_DIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
  # shellcheck disable=SC2086
  meson setup "$builddir" -Dwerror=true ${QTL_SETUP_ARGS:-}
fi
meson compile -C "$builddir"
meson test -C "$builddir" --print-errorlogs --num-processes "$(nproc)" "$@"
