#!/usr/bin/env bash
# Builds every CUDA test (test/cuda/*_test.cu) and CUDA benchmark (bench/cuda/*_bench.cu) with nvcc
# alone, outside Meson, against dependencies given as sources: the one build recipe of the real-GPU
# check, used by scripts/gpu-prebuild.sh here and by scripts/gpu-check.sh's fallback on a
# GPU machine that has nvcc, cmake, ninja and a C++ compiler but no apt, no network and none of
# Catch2 / Google Benchmark installed.
#
#   scripts/gpu-build.sh DEPS BUILD [--arch 90] [--tests "fp8 fp4"] [--benches "fp8"] [--jobs N]
#
#   DEPS    deps/ of a tree made by scripts/gpu-prebuild.sh:
#             DEPS/catch2/catch2/catch.hpp   Catch2 v2 (single header)
#             DEPS/benchmark/                Google Benchmark's source (CMakeLists.txt, include/, src/)
#   BUILD   where objects go; the programs land in BUILD/bin/cuda_<name> and
#           BUILD/bin/qtl_cuda_bench_<name> (the names Meson gives them)
#   --tests / --benches   only these (names without _test.cu / _bench.cu; "" builds none)
#
# Linking: CUDA's runtime statically (libcudart_static.a), libstdc++ and libgcc statically,
# Google Benchmark as a static archive; what remains dynamic is glibc (libc, libm, and on older
# glibc libdl/librt/libpthread) — the driver's libcuda.so is opened at run time by cudart.
#
# The compile flags are those of the Meson build (meson.build's cuda_args, test/meson.build's CUDA
# tests, bench/meson.build's CUDA benchmarks): C++20, --expt-relaxed-constexpr, one -gencode per
# arch; tests at -O2 with asserts, benchmarks at -O3 -DNDEBUG. -lineinfo so compute-sanitizer's
# reports name source lines.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,25p' "$0"; exit 2; }
deps=$(cd "$1" && pwd)
mkdir -p "$2"
build=$(cd "$2" && pwd)
shift 2
arch=90
tests=$(python3 "$root/scripts/list_files.py" "$root/test/cuda" '*_test.cu' | sed 's/_test\.cu$//' | tr '\n' ' ')
benches=$(python3 "$root/scripts/list_files.py" "$root/bench/cuda" '*_bench.cu' | sed 's/_bench\.cu$//' | tr '\n' ' ')
jobs=$(nproc)
while [ $# -gt 0 ]; do
  case $1 in
    --arch) arch=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --benches) benches=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "gpu-build.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

# nvcc: on PATH, else the toolkit's usual place; the toolkit root is the folder above its bin/.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "gpu-build.sh: no nvcc on PATH nor at /usr/local/cuda/bin" >&2; exit 1; }
cuda_home=$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)
cudart_static=""
for d in "$cuda_home/lib64" "$cuda_home/targets/x86_64-linux/lib" "$cuda_home/lib"; do
  if [ -f "$d/libcudart_static.a" ]; then cudart_static=$d/libcudart_static.a; break; fi
done
[ -n "$cudart_static" ] || { echo "gpu-build.sh: libcudart_static.a not found under $cuda_home" >&2; exit 1; }
cxx=${CXX:-g++}
for f in "$deps/catch2/catch2/catch.hpp" "$deps/benchmark/CMakeLists.txt"; do
  [ -f "$f" ] || { echo "gpu-build.sh: missing dependency source $f (run scripts/gpu-prebuild.sh)" >&2; exit 1; }
done
launcher=""
if command -v ccache >/dev/null 2>&1 && [ "${QTL_GPU_BUILD_CCACHE:-1}" = 1 ]; then launcher=ccache; fi

# Google Benchmark: a static archive, built by its own CMake (only when benchmarks are wanted).
bench_lib=""
if [ -n "${benches// /}" ]; then
  bench_lib=$build/benchmark-install/lib/libbenchmark.a
  if [ ! -f "$bench_lib" ]; then
    cmake -S "$deps/benchmark" -B "$build/benchmark-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_COMPILER="$cxx" -DBUILD_SHARED_LIBS=OFF -DBENCHMARK_ENABLE_TESTING=OFF \
      -DBENCHMARK_ENABLE_GTEST_TESTS=OFF -DBENCHMARK_ENABLE_WERROR=OFF -DBENCHMARK_INSTALL_DOCS=OFF \
      -DCMAKE_INSTALL_PREFIX="$build/benchmark-install" -DCMAKE_INSTALL_LIBDIR=lib >"$build/benchmark-cmake.log" 2>&1 ||
      { cat "$build/benchmark-cmake.log" >&2; exit 1; }
    ninja -C "$build/benchmark-build" -j "$jobs" install >"$build/benchmark-build.log" 2>&1 ||
      { tail -n 40 "$build/benchmark-build.log" >&2; exit 1; }
  fi
fi

# One ninja file for the programs, so that the machine's cores compile in parallel.
common="-std=c++20 --expt-relaxed-constexpr -gencode arch=compute_${arch},code=[sm_${arch},compute_${arch}] -lineinfo"
common+=" -I$root/include -I$root/test/support -isystem $deps/catch2"
link_tail="-static-libstdc++ -static-libgcc $cudart_static -ldl -lrt -lpthread"
{
  echo "ninja_required_version = 1.5"
  echo "rule nvcc"
  echo "  command = $launcher $nvcc \$flags -MD -MF \$out.d -c \$in -o \$out"
  echo "  depfile = \$out.d"
  echo "  deps = gcc"
  echo "  description = nvcc \$in"
  echo "rule link"
  echo "  command = $cxx -o \$out \$in \$libs $link_tail"
  echo "  description = link \$out"
  if [ -n "${tests// /}" ]; then
    echo "build obj/main.o: nvcc $root/test/cuda/main.cu"
    echo "  flags = $common -O2"
  fi
  for t in $tests; do
    echo "build obj/${t}_test.o: nvcc $root/test/cuda/${t}_test.cu"
    echo "  flags = $common -O2"
    echo "build bin/cuda_${t}: link obj/${t}_test.o obj/main.o"
  done
  for b in $benches; do
    echo "build obj/${b}_bench.o: nvcc $root/bench/cuda/${b}_bench.cu"
    echo "  flags = $common -O3 -DNDEBUG -DBENCHMARK_STATIC_DEFINE -isystem $build/benchmark-install/include"
    echo "build bin/qtl_cuda_bench_${b}: link obj/${b}_bench.o | $bench_lib"
    echo "  libs = $bench_lib"
  done
} >"$build/build.ninja"
ninja -C "$build" -j "$jobs"
