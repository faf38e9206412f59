#!/usr/bin/env bash
# The one-shot real-GPU check: every CUDA test, plain and under compute-sanitizer
# memcheck, racecheck and synccheck (where the tool exists and accepts the device), then the CUDA
# benchmarks, and one table of each benchmark's throughput and its ratio to a device-to-device copy
# of the same bytes in the same run. At most ~6 minutes (QTL_GPU_CHECK_SECONDS, default 360).
#
# Where it runs: a GPU machine with nvcc, cmake, ninja and Python but no apt, no network and none of
# Catch2 / Google Benchmark. Prepare the tree here (Debian 12, the development machine), then carry
# the checkout plus that one ignored folder there and run the script:
#
#   here:   scripts/gpu-prebuild.sh                        -> gpu-tree/ (< 64 MiB, git-ignored)
#   there:  scripts/gpu-check.sh [TREE]                    TREE defaults to gpu-tree
#   (the device tool: carry ["gpu-tree"], command
#    bash -o pipefail -c 'QTL_GPU_CHECK_LOGS=$OUT/logs scripts/gpu-check.sh | tee $OUT/gpu-check.txt'
#    with timeout_s 420: the table comes back in the output, each failure's log under $OUT/logs)
#
# 1. The prebuilt programs (TREE/bin, nvcc for sm_90, static cudart/libstdc++/libgcc/benchmark:
#    they need only glibc and the driver). Each is probed first (started with --list-tests /
#    --benchmark_list_tests, which needs no kernel). When one cannot start there (the machine's glibc
#    is older than TREE/MANIFEST's glibc_needed, a loader error), or when the tree is missing:
# 2. the fallback: scripts/gpu-build.sh rebuilds every CUDA test and benchmark from this checkout's
#    sources with the machine's nvcc and the dependency sources carried in TREE/deps, into
#    build-gpu-src/, and those programs run instead. The table's header says which ran and why.
#
# Without a usable device every row reads "not run" and the script exits 0 (the table is the
# output), unless QTL_CUDA_REQUIRE_DEVICE=1, which makes "no device" a failure (exit 1). A sanitizer
# that is missing or refuses the device counts as "not run", not as a failure.
#
#   QTL_GPU_CHECK_FORCE_SOURCE=1   take the fallback even when the prebuilt programs run; builds
#                                  even without a device (a check of the fallback on this machine)
#   QTL_GPU_CHECK_TESTS="fp8 fp4"  only these tests (default: every test/cuda/*_test.cu)
#   QTL_GPU_CHECK_BENCHES="fp8"    only these benchmarks (default: every bench/cuda/*_bench.cu)
#   QTL_GPU_CHECK_LOGS=DIR         where each run's output goes (default build-gpu-check/logs)
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/cuda/bin
tree=${1:-gpu-tree}
budget=${QTL_GPU_CHECK_SECONDS:-360}
require=${QTL_CUDA_REQUIRE_DEVICE:-0}
force_source=${QTL_GPU_CHECK_FORCE_SOURCE:-0}
logs=${QTL_GPU_CHECK_LOGS:-build-gpu-check/logs}
mkdir -p "$logs"
start=$(date +%s)
status=0
declare -a notes

left() { echo $((start + budget - $(date +%s))); }
note() { notes+=("$1"); }
# The first line of a log that says what went wrong (for the notes under the tables).
first_error() { grep -m1 -iE 'error|fail|not found|unsupported|not supported|refus|insufficient|no usable' "$1" | cut -c1-150; }

device=""
if command -v nvidia-smi >/dev/null 2>&1; then
  device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1)
fi

tests=${QTL_GPU_CHECK_TESTS-$(python3 scripts/list_files.py test/cuda '*_test.cu' 2>/dev/null | sed 's/_test\.cu$//')}
benches=${QTL_GPU_CHECK_BENCHES-$(python3 scripts/list_files.py bench/cuda '*_bench.cu' 2>/dev/null | sed 's/_bench\.cu$//')}
tests=$(echo $tests)
benches=$(echo $benches)

# --- which programs: the prebuilt tree, or the fallback built here ---------------------------------
bindir=$tree/bin
why_source=""
if [ "$force_source" = 1 ]; then
  why_source="QTL_GPU_CHECK_FORCE_SOURCE=1"
elif [ ! -d "$tree/bin" ]; then
  why_source="no prebuilt tree $tree/bin (scripts/gpu-prebuild.sh makes it)"
else
  need=$(sed -n 's/^glibc_needed //p' "$tree/MANIFEST" 2>/dev/null)
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | cut -d' ' -f2)
  if [ -n "$need" ] && [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]; then
    why_source="this machine's glibc $have is older than the $need the prebuilt programs need"
  else
    for t in $tests; do
      exe=$tree/bin/cuda_$t
      [ -x "$exe" ] || { why_source="prebuilt $exe missing"; break; }
      env -u QTL_CUDA_REQUIRE_DEVICE timeout 60 "$exe" --list-tests >"$logs/probe_$t.log" 2>&1; rc=$?
      # 0: listed; 77: started and found no device. Anything else: it could not start here.
      if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
        why_source="prebuilt cuda_$t does not start here (exit $rc: $(head -c 150 "$logs/probe_$t.log" | head -n1))"
        break
      fi
    done
    for b in $benches; do
      [ -n "$why_source" ] && break
      exe=$tree/bin/qtl_cuda_bench_$b
      [ -x "$exe" ] || { why_source="prebuilt $exe missing"; break; }
      if ! timeout 60 "$exe" --benchmark_list_tests >"$logs/probe_bench_$b.log" 2>&1; then
        why_source="prebuilt qtl_cuda_bench_$b does not start here ($(head -c 150 "$logs/probe_bench_$b.log" | head -n1))"
      fi
    done
  fi
fi

built=none  # none: no fallback build tried; ok; failed
if [ -n "$why_source" ]; then
  bindir=build-gpu-src/bin
  if [ -n "$device" ] || [ "$force_source" = 1 ]; then
    echo "building from source: $why_source"
    built=ok
    if [ ! -d "$tree/deps" ]; then
      echo "no dependency sources in $tree/deps (scripts/gpu-prebuild.sh gathers them)"
      built=failed
    elif ! timeout $(($(left) / 2)) scripts/gpu-build.sh "$tree/deps" build-gpu-src --tests "$tests" \
      --benches "$benches" >"$logs/build.log" 2>&1; then
      echo "the fallback build failed; the end of $logs/build.log:"
      tail -n 30 "$logs/build.log"
      built=failed
    fi
    [ $built = ok ] || status=1
  fi
fi
if [ -z "$why_source" ]; then
  echo "programs: prebuilt ($tree/bin; $(head -n1 "$tree/MANIFEST" 2>/dev/null))"
elif [ $built = none ]; then
  echo "programs: none (no device, so no fallback build); the prebuilt tree would not be used: $why_source"
else
  echo "programs: built from source into $bindir ($built): $why_source"
fi
echo "device: ${device:-none}; budget ${budget}s"
echo

# --- the tests --------------------------------------------------------------------------------------
sanitizer=$(command -v compute-sanitizer || true)
[ -n "$sanitizer" ] || note "compute-sanitizer not found: its columns read 'not run'"
n_tests=$(echo "$tests" | wc -w)
n_benches=$(echo "$benches" | wc -w)
bench_reserve=$((n_benches * 12))
# cell RC LOG: what one run's exit status means (77: the program found no usable device).
cell() {
  case $1 in
    0) echo ok ;;
    77) echo "no device" ;;
    124 | 137) echo timeout ;;
    *) echo FAIL ;;
  esac
}
declare -A result
# Plain runs first (each may take up to 60 s), then each sanitizer over every test (less the
# [full]-tagged cases), the time left (less the benchmarks' share) split evenly over the runs still
# to come.
runs_left=$((n_tests * 3))
for tool in plain memcheck racecheck synccheck; do
  for t in $tests; do
    exe=$bindir/cuda_$t
    r="not run"
    if [ $tool = plain ]; then
      slice=$(($(left) - bench_reserve - runs_left * 5))
      [ "$slice" -le 60 ] || slice=60
    else
      slice=$((($(left) - bench_reserve) / (runs_left > 0 ? runs_left : 1)))
      runs_left=$((runs_left - 1))
    fi
    log=$logs/${t}_$tool.log
    if [ -z "$device" ]; then
      :
    elif [ ! -x "$exe" ]; then
      r="no binary"; status=1
    elif [ "$slice" -lt 5 ]; then
      note "$t $tool: no time left"
    elif [ $tool = plain ]; then
      env -u QTL_CUDA_REQUIRE_DEVICE timeout "$slice" "$exe" >"$log" 2>&1; rc=$?
      r=$(cell $rc)
      [ "$r" = ok ] || { status=1; note "$t plain: $r ($(first_error "$log"))"; }
    elif [ "${result[$t,plain]}" = "no device" ]; then
      :  # the program itself finds no usable device (its note says why)
    elif [ -n "$sanitizer" ]; then
      # without the [full] cases (past the grid caps: long under a sanitizer; the plain run has them)
      timeout "$slice" "$sanitizer" --tool "$tool" --error-exitcode 99 "$exe" '~[full]' >"$log" 2>&1; rc=$?
      if [ $rc -eq 0 ]; then
        r=ok
      elif [ $rc -eq 99 ]; then
        r=FAIL; status=1; note "$t $tool: $(first_error "$log")"
      elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        r=timeout; note "$t $tool: over its ${slice}s slice (not counted as a failure)"
      elif [ "${result[$t,plain]}" = ok ] || grep -qiE 'not supported|unsupported|refus' "$log"; then
        # the tool refused this device or lacks support for it (or the program passes alone)
        note "$t $tool: the tool did not run (exit $rc: $(first_error "$log"))"
      else
        r=FAIL; status=1; note "$t $tool: exit $rc ($(first_error "$log"))"
      fi
    fi
    result[$t,$tool]=$r
  done
done

printf '%-22s %-10s %-10s %-10s %-10s\n' "CUDA test" "plain" "memcheck" "racecheck" "synccheck"
for t in $tests; do
  printf '%-22s %-10s %-10s %-10s %-10s\n' "$t" "${result[$t,plain]}" "${result[$t,memcheck]}" \
    "${result[$t,racecheck]}" "${result[$t,synccheck]}"
done

# --- the benchmarks ---------------------------------------------------------------------------------
echo
printf '%-48s %-10s %-10s\n' "CUDA benchmark" "GB/s" "/ d2d copy"
benches_left=$n_benches
for b in $benches; do
  exe=$bindir/qtl_cuda_bench_$b
  slice=$(($(left) / (benches_left > 0 ? benches_left : 1)))
  benches_left=$((benches_left - 1))
  if [ -n "$device" ] && [ -x "$exe" ] && [ "$slice" -ge 5 ]; then
    json=$logs/bench_$b.json
    timeout "$slice" "$exe" --benchmark_format=json --benchmark_min_time=0.05 >"$json" 2>"$logs/bench_$b.log"
    rc=$?
    if ! python3 - "$json" "$b" <<'EOF'; then
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(1)
rows = d.get("benchmarks", [])
for r in rows:
    if r.get("error_occurred"):
        print(f"{r['name'][:48]:<48} {'FAIL':<10} {r.get('error_message', '')[:40]}")
        continue
    bps = r.get("bytes_per_second", 0.0)
    ratio = r.get("ratio_to_d2d_copy", float("nan"))
    print(f"{r['name'][:48]:<48} {bps / 1e9:<10.1f} {ratio:<10.3f}")
sys.exit(0 if rows and not any(r.get("error_occurred") for r in rows) else 1)
EOF
      printf '%-48s %-10s %-10s\n' "$b" "FAIL" "exit $rc"
      status=1
      note "bench $b: exit $rc ($(first_error "$logs/bench_$b.log"))"
    fi
  else
    printf '%-48s %-10s %-10s\n' "$b" "not run" "not run"
  fi
done

for n in "${notes[@]}"; do echo "note: $n"; done
echo "took $(($(date +%s) - start))s; logs in $logs"
if [ -z "$device" ]; then
  echo
  echo "no CUDA device: nothing ran"
  if [ "$require" = "1" ]; then
    echo "QTL_CUDA_REQUIRE_DEVICE=1: no device is a failure"
    exit 1
  fi
fi
exit "$status"
