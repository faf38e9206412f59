#!/usr/bin/env bash
# The end-to-end demo, from a fresh Debian 12 machine: installs the missing Debian packages (as root),
# builds QTL in build/, and runs `qtl demo` (a small Llama-shaped checkpoint quantized to GPTQ int4 and
# to FP8, read back and checked). Where the tool does not have `demo` yet, it runs the examples.
# Extra arguments go to `qtl demo` (e.g. --out DIR keeps the files).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
builddir=${QTL_BUILD_DIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir" -Dwerror=true
fi
if [ -x "$builddir/tools/qtl/qtl" ] || meson compile -C "$builddir" tools/qtl/qtl >/dev/null 2>&1; then
  if "$builddir/tools/qtl/qtl" demo --help >/dev/null 2>&1; then
    exec "$builddir/tools/qtl/qtl" demo "$@"
  fi
fi
meson compile -C "$builddir"
for ex in "$builddir"/examples/[0-9][0-9]_*; do
  [ -x "$ex" ] || continue
  echo "=== $(basename "$ex")"
  "$ex"
done
