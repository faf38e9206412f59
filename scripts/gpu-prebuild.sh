#!/usr/bin/env bash
# Prepares gpu-tree/ (git-ignored), the self-contained tree that scripts/gpu-check.sh runs on a GPU
# machine with no apt and no network. Run it here, on the Debian 12 development machine:
#
#   scripts/gpu-prebuild.sh [--jobs N]        (about 10 minutes on one core; ccache makes reruns short)
#
# gpu-tree/
#   bin/cuda_<name>              every test/cuda/*_test.cu, nvcc for sm_90, statically linked
#   bin/qtl_cuda_bench_<name>    every bench/cuda/*_bench.cu, the same
#   deps/catch2/catch2/catch.hpp Catch2 v2's single header (Debian's catch2 package) + its copyright
#   deps/benchmark/              Google Benchmark's source (Debian's benchmark source package, the
#                                version of the libbenchmark-dev headers): what the fallback builds
#   MANIFEST                     commit, toolkit, the newest glibc symbol version the binaries need,
#                                and what each binary still loads dynamically (readelf -d)
#
# The third-party sources are gathered here, never committed: Catch2 from /usr/include/catch2 (apt
# package catch2), Google Benchmark by `apt-get source --download-only benchmark` against a
# private deb-src list and package cache under build-gpu-prebuild/apt (the system's apt
# configuration is not touched). The whole tree must stay under 64 MiB (what can be carried to the
# GPU machine); the script fails when it does not.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
tree=$root/gpu-tree
work=$root/build-gpu-prebuild
jobs=$(nproc)
while [ $# -gt 0 ]; do
  case $1 in
    --jobs) jobs=$2; shift 2 ;;
    *) echo "gpu-prebuild.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
export PATH=/usr/local/cuda/bin:$PATH
limit_bytes=$((64 * 1024 * 1024))

rm -rf "$tree"
mkdir -p "$tree/bin" "$tree/deps/catch2/catch2" "$work"

# 1. Catch2 v2: header-only; Debian's copy.
catch_hpp=/usr/include/catch2/catch.hpp
[ -f "$catch_hpp" ] || { echo "gpu-prebuild.sh: $catch_hpp missing (apt-get install catch2)" >&2; exit 1; }
cp "$catch_hpp" "$tree/deps/catch2/catch2/"
cp /usr/share/doc/catch2/copyright "$tree/deps/catch2/COPYRIGHT" 2>/dev/null || true

# 2. Google Benchmark: the source of the Debian package whose headers the benchmarks compile against.
bench_full_version=$(dpkg-query -W -f='${Version}' libbenchmark-dev 2>/dev/null || true)
bench_version=${bench_full_version%-*}
[ -n "$bench_version" ] || { echo "gpu-prebuild.sh: libbenchmark-dev not installed" >&2; exit 1; }
apt_dir=$work/apt
orig=$apt_dir/dl/benchmark_${bench_version}.orig.tar.gz
if [ ! -f "$orig" ]; then
  mkdir -p "$apt_dir/parts" "$apt_dir/lists/partial" "$apt_dir/dl"
  # The machine's own Debian sources, as deb-src, in a private list.
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && sed -e 's/^Types: deb$/Types: deb-src/' "$f"
  done >"$apt_dir/parts/src.sources"
  grep '^deb ' /etc/apt/sources.list 2>/dev/null | sed 's/^deb /deb-src /' >"$apt_dir/src.list" || true
  mkdir -p "$apt_dir/cache/archives/partial"
  apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/src.list" -o "Dir::Etc::SourceParts=$apt_dir/parts"
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o "APT::Sandbox::User=root")
  apt-get "${apt_opts[@]}" update >"$apt_dir/update.log" 2>&1 ||
    { cat "$apt_dir/update.log" >&2; exit 1; }
  (cd "$apt_dir/dl" && apt-get "${apt_opts[@]}" source --download-only "benchmark=$bench_full_version") \
    >"$apt_dir/source.log" 2>&1 || { cat "$apt_dir/source.log" >&2; exit 1; }
  [ -f "$orig" ] || { echo "gpu-prebuild.sh: apt-get source gave no $orig" >&2; ls "$apt_dir/dl" >&2; exit 1; }
fi
rm -rf "$apt_dir/src" && mkdir -p "$apt_dir/src"
tar -xzf "$orig" -C "$apt_dir/src"
src=$apt_dir/src/benchmark-$bench_version
mkdir -p "$tree/deps/benchmark"
# Only what its CMake build of the library needs (no tests, docs, bindings).
cp -r "$src/CMakeLists.txt" "$src/cmake" "$src/include" "$src/src" "$src/LICENSE" "$src/AUTHORS" "$tree/deps/benchmark/"

# 3. The programs, by the one recipe that the fallback uses too.
scripts/gpu-build.sh "$tree/deps" "$work/build" --arch 90 --jobs "$jobs"
cp "$work/build/bin/"* "$tree/bin/"
# Host symbols out (about a quarter of each file; the fatbins keep their -lineinfo).
strip "$tree/bin/"*

# 4. What the binaries still need from the machine.
glibc_needed=$(for f in "$tree/bin/"*; do objdump -T "$f"; done | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u |
  tail -n1 | sed 's/GLIBC_//')
{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- include test/cuda test/support bench/cuda || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(getconf GNU_LIBC_VERSION | cut -d' ' -f2)"
  echo "nvcc $(nvcc --version | grep -o 'release [0-9.]*' | cut -d' ' -f2), arch sm_90"
  echo "glibc_needed $glibc_needed"
  echo "benchmark $bench_version (Debian source), catch2 $(dpkg-query -W -f='${Version}' catch2 2>/dev/null)"
  for f in "$tree/bin/"*; do
    echo "needed $(basename "$f"): $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
  done
} >"$tree/MANIFEST"
cat "$tree/MANIFEST"

size=$(du -sb "$tree" | cut -f1)
echo "gpu-tree: $((size / 1024 / 1024)) MiB ($size bytes) in $(find "$tree" -type f | wc -l) files"
if [ "$size" -gt "$limit_bytes" ]; then
  echo "gpu-prebuild.sh: gpu-tree is over 64 MiB, too big to carry" >&2
  exit 1
fi
