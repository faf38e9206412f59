#!/usr/bin/env bash
# Installs the Debian 12 packages QTL's build, tests, benchmarks and fuzzers need, when run as root;
# otherwise prints the apt-get command to run. The CUDA Toolkit is optional and never installed here:
# when /usr/local/cuda/bin/nvcc exists, the build compiles the kernels for the GPU architecture(s) in
# -Dgpu_arch (default 9.0).
set -euo pipefail
packages=(g++ meson ninja-build cmake pkg-config catch2 libbenchmark-dev nlohmann-json3-dev libcli11-dev
          python3 clang clang-format libclang-rt-14-dev libpcre2-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "QTL needs these Debian packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
