#!/usr/bin/env bash
# Builds tests/unit/test_cuda_ops_* (one binary per op family) against the GPU backend compiled for the
# host emulation (emu.h) and runs it: the GPU kernels, the backend's
# cuBLAS/cuBLASLt argument mapping and graph capture, checked on a machine
# without a GPU. The warp width is a compile-time choice: 32 (NVIDIA, RDNA)
# or 64 (CDNA: an AMD Instinct wavefront).
#
#   tests/hostemu/run_tests.sh [--asan] [--warp 32|64] [--tests a,b,..|--list all|ctest] [build dir]
#   TF_TEST_FILTER='*attention*' tests/hostemu/run_tests.sh
#
# --tests runs the named test_cuda_ops cases one after another (each a run
# of the family binary that holds it, with TF_TEST_FILTER=name) and fails
# when any fails, or when no family holds a name. --list runs the cases of
# tests/hostemu/cases: all of them, or those ctest runs at this width.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
san=""
warp=32
tests=""
list=""
while [ $# -gt 0 ]; do
    case "$1" in
    --asan) san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"; shift ;;
    --warp) warp=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --list) list=$2; shift 2 ;;
    *) break ;;
    esac
done
case "$warp" in 32|64) ;; *) echo "run_tests.sh: --warp takes 32 or 64, not $warp" >&2; exit 2 ;; esac
if [ -n "$list" ]; then
    case "$list" in all|ctest) ;; *) echo "run_tests.sh: --list takes all or ctest, not $list" >&2; exit 2 ;; esac
    [ -z "$tests" ] || { echo "run_tests.sh: --tests and --list name the cases twice: give one" >&2; exit 2; }
    tests=$(awk -v mode="$list" -v w="$warp" '!/^#/ && NF {
        if (mode == "all" || NF == 1 || ($2 == "w64" && w == 64)) printf "%s%s", (n++ ? "," : ""), $1
    }' "$(dirname "$0")/cases")
fi
out=${1:-/tmp/tinyfold-hostemu-w$warp}
mkdir -p "$out"
cd "$top"
# -g1: line tables (backtraces with file and line) at ~3/4 of -g's compile
# time; HOSTEMU_G=-g for variables in a debugger
flags="-O1 ${HOSTEMU_G:--g1} $san -Wall -Wextra -Werror -Iinclude -Isrc -Itests/hostemu"
jobs=${JOBS:-$(nproc)}
pids=()
# objects are rebuilt only when a source or header is newer
newest=$(ls -t src/backend/cuda/*.h src/backend/*.h tests/hostemu/emu.h $(find include -name "*.h") | head -1)
for f in src/backend/cuda/*.cu tests/hostemu/emu.cpp; do
    o="$out/$(basename "$f").o"
    if [ -f "$o" ] && [ "$o" -nt "$f" ] && [ "$o" -nt "$newest" ] && [ "$o" -nt "$0" ]; then continue; fi
    g++ -x c++ -std=c++17 $flags -Wno-unknown-pragmas -DTF_CUDA_HOSTEMU -DTF_WARP=$warp -c "$f" \
        -o "$o" & pids+=($!)
    while [ "$(jobs -r | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
done
mkdir -p "$out/tests"
for f in src/backend/cpu/*.c src/backend/gpu_plan.c tests/unit/testutil.c tests/unit/cuda_testutil.c \
         tests/unit/test_cuda_ops_*.c; do
    o="$out/$(basename "$f").o"
    case "$f" in tests/unit/test_cuda_ops_*) o="$out/tests/$(basename "$f" .c).o" ;; esac
    if [ -f "$o" ] && [ "$o" -nt "$f" ] && [ "$o" -nt "$newest" ]; then continue; fi
    gcc -std=c11 -D_POSIX_C_SOURCE=200809L $flags -fopenmp -Itests/unit -c "$f" \
        -o "$o" & pids+=($!)
    while [ "$(jobs -r | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
done
for p in "${pids[@]}"; do wait "$p"; done
for t in "$out"/tests/test_cuda_ops_*.o; do
    g++ $san -fopenmp -o "${t%.o}_hostemu" "$t" "$out"/*.o -lopenblas -lcmocka -lm
done
export TF_TEST_HOSTEMU=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# a waiting OpenMP thread sleeps (libgomp's default spins ~16 ms, taking the
# core from whatever else runs: the other width, under ctest -j2)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# ASan cannot follow every swapcontext stack switch; it warns once about it
rc=0
if [ -z "$tests" ]; then
    for b in "$out"/tests/test_cuda_ops_*_hostemu; do "$b" || rc=1; done
    exit $rc
fi
TIMEFORMAT="hostemu (warp $warp): %U s user CPU"
for t in ${tests//,/ }; do
    fam=$(grep -l "cmocka_unit_test[a-z_]*($t[,)]" tests/unit/test_cuda_ops_*.c | head -1)
    if [ -z "$fam" ]; then
        echo "hostemu (warp $warp): no tests/unit/test_cuda_ops_*.c holds a case $t"; rc=1; continue
    fi
    echo "hostemu (warp $warp): $t ($(basename "$fam" .c))"
    time { TF_TEST_FILTER=$t "$out/tests/$(basename "$fam" .c)_hostemu" ||
           { echo "hostemu (warp $warp): $t FAILED"; rc=1; }; }
done
exit $rc
