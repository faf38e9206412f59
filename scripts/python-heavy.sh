#!/usr/bin/env bash
# The Python package's torch tier: test/python/torch/ (the reference Python and qtl on
# the same random inputs, bit for bit; the drop-in test) under VENV_PYTHON, the heavy interop
# venv's python (torch from PyPI; scripts/interop-venv.sh heavy prints it), which also holds the
# pinned vLLM wheel whose scalar_type.py the reference uses (reference_loader.py).
#
#   scripts/python-heavy.sh VENV_PYTHON [pytest args...]
# qtl is built and installed by scripts/python-ci.sh (its venv, the same Python version), then
# only the package folder is put on VENV_PYTHON's path (build-python-heavy/site), so that the
# heavy venv's own numpy and torch are the ones imported. Prints "python-heavy: N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
VPY=${1:?usage: scripts/python-heavy.sh VENV_PYTHON [pytest args]}
shift
scripts/python-ci.sh -q >/dev/null || { echo "python-heavy: 0 passed, 1 failed (scripts/python-ci.sh)"; exit 1; }
ci_py=$PWD/.venv-python/bin/python
if [ "$("$ci_py" -c 'import sys; print(sys.version_info[:2])')" != "$("$VPY" -c 'import sys; print(sys.version_info[:2])')" ]; then
  echo "python-heavy: 0 passed, 1 failed ($VPY is not the Python version qtl was built for)"; exit 1
fi
site=build-python-heavy/site
rm -rf "$site" && mkdir -p "$site"
cp -r "$("$ci_py" -c 'import os, qtl; print(os.path.dirname(qtl.__file__))')" "$site/qtl"
set +e
out=$(cd test/python && PYTHONPATH="$(realpath ../../$site)" "$VPY" -m pytest -q -p no:cacheprovider torch "$@" 2>&1)
rc=$?
set -e
echo "$out" | tail -25
last=$(echo "$out" | tail -1)
passed=$(echo "$last" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
failed=0
for n in $(echo "$last" | grep -oE '[0-9]+ (failed|errors?)' | grep -oE '[0-9]+'); do failed=$((failed + n)); done
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "python-heavy: ${passed:-0} passed, $failed failed"
exit $rc
