#!/usr/bin/env bash
# The end-to-end demo, from a fresh Debian 12 machine: installs the missing Debian packages (as root),
# builds the qtl tool in build/, and runs `qtl demo`: a small Llama-shaped checkpoint with skip and
# `dynamic` rules, quantized to GPTQ int4 and to FP8, read back, dequantized and checked layer by layer.
# Extra arguments go to `qtl demo` (e.g. --out DIR keeps the files).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/configure.sh   # the packages, nvcc on PATH, $builddir configured
meson compile -C "$builddir" tools/qtl/qtl
exec "$builddir/tools/qtl/qtl" demo "$@"
