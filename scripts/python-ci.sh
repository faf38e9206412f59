#!/usr/bin/env bash
# The Python package's CI tier: a virtualenv (.venv-python, created once, pinned, reused),
# `pip install .` of this tree into it (meson-python; the build folder build-python is kept between
# runs so that an unchanged tree recompiles nothing), the import check of the README, then the
# numpy + pytest tier test/python/ (golden cases, errors, zero-copy), then the device tier
# (test/python/test_device.py) against the test build of the extension on the simulated CUDA device
# (-Dpython_sim=true: python/sim/, not installed; only its device table and the simulator are
# compiled on top of the installed build's objects). The installed build here is the host-only one
# (-Dcuda=disabled: nvcc would add its compile to every run; docs/python.md gives the CUDA build's
# figures). The torch tier (test/python/torch/) is scripts/python-heavy.sh's.
#
#   scripts/python-ci.sh [pytest args...]     exit status: pytest's (1 for a failed install or import)
# Prints "python-ci: N passed, N failed, N skipped" last.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(realpath -m "${QTL_PYTHON_VENV:-.venv-python}")
PY=${PYTHON:-python3}
PINS=(meson-python==0.18.0 meson==1.5.2 ninja==1.13.0 nanobind==2.9.2 numpy==2.2.6 pytest==8.4.2 ml_dtypes==0.5.3)

if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -m pip freeze 2>/dev/null | grep -qx 'nanobind==2.9.2'; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PINS[@]}"
fi
start=$SECONDS
# Only the extension and what it links (nanobind, the tool's command library): a plain
# `pip install .` also builds the qtl CLI, which the package does not ship.
ext=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
# --no-build-isolation: the build uses the venv's pinned meson-python/nanobind (no download per
# run) and keeps build-python, so a rerun only relinks what changed.
if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
    -Cbuild-dir=build-python -Csetup-args=-Dcuda=disabled -Csetup-args=-Dpython_sim=true \
    "-Ccompile-args=python/_qtl$ext" "-Ccompile-args=python/sim/_qtl$ext" . ; then
  echo "python-ci: 0 passed, 1 failed, 0 skipped (pip install . failed)"
  exit 1
fi
echo "python-ci: pip install . took $((SECONDS - start)) s"
# The README's check, from outside the source tree (so that the installed package is imported).
if ! (cd / && "$VENV/bin/python" -c "import qtl; print(qtl.scalar_types.uint4b8.id)"); then
  echo "python-ci: 0 passed, 1 failed, 0 skipped (import qtl failed)"
  exit 1
fi
passed=0 failed=0 skipped=0 rc=0
# run_tier LABEL [env...] -- pytest args: one pytest run, its counts added to the totals
run_tier() {
  local label=$1 out trc p f=0 s
  shift
  set +e
  out=$(cd test/python && env "$@" 2>&1)
  trc=$?
  set -e
  echo "$out" | tail -25
  p=$(echo "$out" | tail -1 | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
  for n in $(echo "$out" | tail -1 | grep -oE '[0-9]+ (failed|errors?)' | grep -oE '[0-9]+'); do f=$((f + n)); done
  s=$(echo "$out" | tail -1 | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+' || echo 0)
  if [ "$trc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  echo "python-ci: $label: ${p:-0} passed, $f failed, ${s:-0} skipped"
  passed=$((passed + ${p:-0})) failed=$((failed + f)) skipped=$((skipped + ${s:-0}))
  if [ "$trc" -ne 0 ]; then rc=$trc; fi
}
run_tier "installed package" "$VENV/bin/python" -m pytest -q -p no:cacheprovider --rootdir=. . "$@"
# The device tier: the test build's extension beside the package's Python files.
start=$SECONDS
sim_pkg=build-python/sim-package/qtl
rm -rf "$sim_pkg" && mkdir -p "$sim_pkg"
cp python/qtl/*.py python/qtl/*.pyi "$sim_pkg/"
cp "build-python/python/sim/_qtl$ext" "$sim_pkg/"
run_tier "device tier (simulated device)" PYTHONPATH="$PWD/build-python/sim-package" \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider --rootdir=. test_device.py test_dropin_sim.py "$@"
echo "python-ci: the device tier ran in $((SECONDS - start)) s"
echo "python-ci: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit $rc
