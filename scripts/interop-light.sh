#!/usr/bin/env bash
# The light interop tier (CI stage; test/interop/README.md): the pinned light venv
# (scripts/interop-venv.sh light, reused), the two programs it needs (qtl, dump_numeric) in
# build/ (or $QTL_BUILD_DIR), then pytest on test/interop/light. A failing pip install fails.
# Its last line is pytest's closing line; .ci/run reads the counts from it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${QTL_BUILD_DIR:-$root/build}
if ! venv_py=$(scripts/interop-venv.sh light | tail -n 1); then
  echo "interop-light: FAILED: the pinned venv could not be installed (see pip's output above)"
  echo "0 passed, 1 failed"
  exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dcuda=disabled -Dbenchmarks=disabled >/dev/null || { echo "0 passed, 1 failed"; exit 1; }
fi
if ! ninja -C "$build" tools/qtl/qtl test/interop/dump_numeric >/dev/null; then
  echo "interop-light: FAILED: cannot build qtl and dump_numeric"; echo "0 passed, 1 failed"; exit 1
fi
QTL_BUILD_DIR=$build "$venv_py" -m pytest -q -p no:cacheprovider test/interop/light "$@"
