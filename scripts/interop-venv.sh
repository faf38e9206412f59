#!/usr/bin/env bash
# Creates (or reuses) the pinned virtualenv of one interop tier and prints its python's path on the
# last line of stdout.
#
#   scripts/interop-venv.sh light   # numpy, ml_dtypes, safetensors, pytest
#   scripts/interop-venv.sh heavy   # + torch, transformers, accelerate, compressed-tensors, torchao
#   scripts/interop-venv.sh gptq    # the heavy venv + optimum, gptqmodel (may fail on its own)
#   scripts/interop-venv.sh producers  # llmcompressor, auto-round and their torch/transformers/
#                                      # compressed-tensors: a venv of its own, since llmcompressor
#                                      # pins versions below the heavy tier's
#
# The venv lives in .venv-interop-<light|heavy|producers> at the repository root (git-ignored), or under
# $QTL_INTEROP_VENV_ROOT. It is reused while the SHA-256 of its requirements file(s) is unchanged
# and rebuilt from scratch otherwise. Any failing pip install is a failure (exit 1): no tier skips.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tier=${1:?usage: scripts/interop-venv.sh light|heavy|gptq|producers}
req_dir=$root/test/interop
case "$tier" in
  light) venv_name=light; reqs=("$req_dir/requirements-light.txt") ;;
  heavy) venv_name=heavy; reqs=("$req_dir/requirements-heavy.txt") ;;
  gptq) venv_name=heavy; reqs=("$req_dir/requirements-heavy.txt" "$req_dir/requirements-gptq.txt") ;;
  producers) venv_name=producers; reqs=("$req_dir/requirements-producers.txt") ;;
  *) echo "interop-venv: unknown tier '$tier' (light, heavy, gptq or producers)" >&2; exit 2 ;;
esac
venv=${QTL_INTEROP_VENV_ROOT:-$root}/.venv-interop-$venv_name
py=${QTL_INTEROP_PYTHON:-python3.11}
command -v "$py" >/dev/null || py=python3

stamp_of() { cat "$@" | sha256sum | cut -d' ' -f1; }
base_stamp=$(stamp_of "${reqs[0]}")
want_stamp=$(stamp_of "${reqs[@]}")

have_stamp=$(cat "$venv/.qtl-stamp" 2>/dev/null || true)
if [ "$have_stamp" = "$want_stamp" ]; then
  echo "$venv/bin/python"; exit 0
fi
# The heavy venv with the gptq step installed on top serves the heavy tier as it is.
if [ "$tier" = heavy ] && [ -n "$have_stamp" ] \
   && [ "$have_stamp" = "$(stamp_of "${reqs[0]}" "$req_dir/requirements-gptq.txt")" ]; then
  echo "$venv/bin/python"; exit 0
fi
# The heavy venv with only its base step installed is reused for the gptq step.
if [ -x "$venv/bin/python" ] && [ -f "$venv/.qtl-stamp" ] \
   && [ "$(cat "$venv/.qtl-stamp")" = "$base_stamp" ] && [ "${#reqs[@]}" -gt 1 ]; then
  :
else
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check --only-binary=:all: \
    -r "${reqs[0]}" >&2
  echo "$base_stamp" > "$venv/.qtl-stamp"
fi
if [ "${#reqs[@]}" -gt 1 ]; then
  # Constrained by the base step's pins so the optional step cannot move torch/numpy/transformers.
  "$venv/bin/python" -m pip freeze > "$venv/.qtl-constraints.txt"
  "$venv/bin/python" -m pip install --disable-pip-version-check \
    -c "$venv/.qtl-constraints.txt" -r "${reqs[1]}" >&2
  echo "$want_stamp" > "$venv/.qtl-stamp"
fi
echo "$venv/bin/python"
