#!/usr/bin/env bash
# QTL's whole test suite, from a fresh Debian 12 machine: installs the missing Debian packages (as
# root), configures build/ (CUDA kernels included where nvcc exists), builds everything, and runs
# `meson test` (static, headers, unit, compile_fail, cuda, tools, consumers, examples).
# Extra arguments go to `meson test` (e.g. --suite unit). QTL_SETUP_ARGS adds options to a first
# `meson setup` (CI passes -Ddebug=false: the same -O2 code without debug info, a third less compile time).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/configure.sh   # the packages, nvcc on PATH, $builddir configured
meson compile -C "$builddir"
meson test -C "$builddir" --print-errorlogs --num-processes "$(nproc)" "$@"
