#!/usr/bin/env bash
# QTL's whole test suite, from a fresh Debian 12 machine: installs the missing Debian packages (as
# root), configures build/ (CUDA kernels included where nvcc exists), builds everything, and runs
# `meson test` (static, headers, unit, compile_fail, cuda, tools, consumers, examples).
# Extra arguments go to `meson test` (e.g. --suite unit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH   # Meson finds nvcc only on PATH
fi
builddir=${QTL_BUILD_DIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir" -Dwerror=true
fi
meson compile -C "$builddir"
meson test -C "$builddir" --print-errorlogs --num-processes "$(nproc)" "$@"
